//! The `_rope` form of `sdpa_split_short.wgsl` (see there for where it
//! runs and why): `sdpa_split_rope.wgsl` in workgroups of 64 invocations.
//! Everything but `WG` is `sdpa_split_rope.wgsl`'s.
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
const WG: u32 = 64u;

// include: split_plan.wgsl
// include: rope4.wgsl
// include: sdpa_split_rope_decl.wgsl
// include: sdpa_split_body.wgsl
