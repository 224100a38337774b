//! The split plan of split-KV attention, shared by `sdpa_split.wgsl` and
//! `sdpa_split_combine.wgsl` so both agree on it: the kernels read the
//! live context length (`start_pos + seq`) and plan its splits on the
//! device, so a decode step changes only `start_pos` in their uniforms.
//! The host (`split_plan` in `ops/llm.rs`, the same formula) sizes the
//! grid and the partials for the longest context; workgroups past the
//! live plan return. The kernel that includes this declares a `Params`
//! with the fields `split_target`, `split_min_keys`, `split_tile` and
//! `split_max` (set by the host from its constants).

/// `(splits, keys per split)` of a context of `ctx >= 1` keys: at least
/// `split_min_keys` keys each, enough splits to reach `split_target`
/// (workgroups) or one `split_tile` each, at most `split_max`, of equal
/// length but the last, none empty.
fn split_plan(ctx: u32) -> vec2<u32> {
    let by_keys = (ctx + p.split_min_keys - 1u) / p.split_min_keys;
    let by_target = max(p.split_target, (ctx + p.split_tile - 1u) / p.split_tile);
    let bound = clamp(min(by_keys, by_target), 1u, p.split_max);
    let chunk = max((ctx + bound - 1u) / bound, 1u);
    return vec2<u32>(max((ctx + chunk - 1u) / chunk, 1u), chunk);
}
