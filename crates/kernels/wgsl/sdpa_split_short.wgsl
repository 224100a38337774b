//! `sdpa_split.wgsl` in workgroups of 64 invocations (tiles of 64 keys),
//! for caches whose splits hold 64 keys at most at their longest context
//! (every split plan up to 4,096 keys; decode splits hold 32 keys up to
//! 2,048): there, most of the 256 invocations would idle and each tree
//! would take two more levels (H200, run al: ~1 us a layer off the
//! SmolLM2 shape's decode step; on longer splits the 256-wide form is the
//! faster, four tiles a split costing ~7% of the 1B decode at 8,192).
//! Everything but `WG` is `sdpa_split.wgsl`'s.
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
// include: sdpa_split_decl.wgsl
// include: sdpa_split_body.wgsl
