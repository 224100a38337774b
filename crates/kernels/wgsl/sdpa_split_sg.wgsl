//! Split-KV decode attention's first pass (`sdpa_split.wgsl`'s partials)
//! on devices with subgroups: the same grid, split plan, partials layout
//! and cache writes (so `sdpa_split_combine.wgsl` merges either), without
//! the per-tile workgroup barriers. Workgroups of 128 invocations; each
//! subgroup takes its own runs of `subgroup_size` keys (a key per lane,
//! scored against the workgroup's up to `MAXQ` query vectors held in
//! workgroup memory) and keeps its own online softmax (max, sum, output)
//! per query vector: the run's max and sum are `subgroupMax` and
//! `subgroupAdd` over the lanes, and each key's probabilities reach the
//! lanes that own the value dims by `subgroupShuffle`. The subgroups meet
//! once, at the end (flash-decoding within the workgroup): their maxes and
//! sums through workgroup memory, then their outputs rescaled to the
//! workgroup's max and summed, `merge_queries` query vectors a pass. Any
//! subgroup size from 4 to 128 works as long as `D / 4 <= 4 *
//! subgroup_size` (the host routes here only then, for every size the
//! device reports). The body is `common/sdpa_split_sg_body.wgsl`; the `_rope`
//! form is `sdpa_split_sg_rope.wgsl`.
//!
//! Bounds: (`common/sdpa_split_sg_body.wgsl`) `qs` by `e < nq * D / 4` and
//! `jj * D / 4 + d + u`, below `MAXQ * D / 4 <= 256` as the head dim is at
//! most 256 (`sdpa_with_kv_cache_into` in `ops/llm.rs`); `sml` by `sg_id <
//! WG / 4 = MAX_SG`, subgroups being at least 4 wide; `sums` by `(qq *
//! rows + row) * D / 4 + dim < merge_queries * rows * D / 4`, which
//! `split_route` (`ops/llm/split_kv.rs`) keeps within `SUMS` (it takes
//! this kernel only for subgroup sizes that are powers of two from 4 to
//! 128 with `D / 4 <= MAX_DPL * size`, and sizes `merge_queries` at the
//! smallest); `acc`, `kk`, `pk`, `vv`, `dots`, `lim` and the vectors by
//! constant loop counters.
// variants: f32 f16 f32_kvf16
// bounds: host-checked

alias Elem = f32;
alias KvElem = Elem;

// include: split_plan.wgsl
// include: sdpa_split_decl.wgsl
// include: sdpa_split_sg_body.wgsl
