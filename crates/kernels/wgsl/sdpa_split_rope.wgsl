//! The `_rope` form of `sdpa_split.wgsl`, for `etwgpu.sdpa_rope_with_kv_cache`
//! on the decode route: the same split-KV partials, with the query and the
//! call's new keys read un-rotated and rotated here as they are loaded
//! (`et_vk.apply_rotary_emb`: pairs `(x[2i], x[2i+1])` of a row of token
//! `t` of the call turned by the tables `cos, sin [_, D/2]` at row
//! `table_row + t`, each result
//! rounded to the activations' dtype as `rope.wgsl` stores it), so RoPE
//! costs no dispatch of its own; the rotated keys are what it writes into
//! the key cache. Everything else is `sdpa_split.wgsl`'s (see there):
//! `common/sdpa_split_body.wgsl`.
//!
//! Bounds: (`common/sdpa_split_body.wgsl`) `qs` by `e < nq * D / 4` and
//! `jj * D / 4 + d`, below `MAXQ * D / 4 <= 256` as the head dim is at most
//! 256 (`sdpa_with_kv_cache_into` in `ops/llm.rs` takes the split kernels
//! only then); `sc` by `jj * TILE` plus an index below `TILE`; `red` by
//! `lid` and `lid + stride` within a `LANES` block; `sums` by `g * D / 4 +
//! lid < WG`; the per-vector state is named values (no arrays).
// variants: f32 f16 f32_kvf16
// bounds: host-checked

alias Elem = f32;
alias KvElem = Elem;

/// Invocations per workgroup (`common/sdpa_split_body.wgsl`).
const WG: u32 = 256u;

// include: split_plan.wgsl
// include: rope4.wgsl
// include: sdpa_split_rope_decl.wgsl
// include: sdpa_split_body.wgsl
