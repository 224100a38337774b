//! The `_rope` form of `sdpa_split_short.wgsl` (see there for where it
//! runs and why): `sdpa_split_rope.wgsl` in workgroups of 64 invocations.
//! Everything but `WG` is `sdpa_split_rope.wgsl`'s.
// variants: f32 f16 f32_kvf16

alias Elem = f32;
alias KvElem = Elem;

/// Invocations per workgroup (`common/sdpa_split_body.wgsl`).
const WG: u32 = 64u;

// include: split_plan.wgsl
// include: rope4.wgsl
// include: sdpa_split_rope_decl.wgsl
// include: sdpa_split_body.wgsl
