//! The `_rope` form of `sdpa_split_sg.wgsl` (as `sdpa_split_rope.wgsl` is
//! of `sdpa_split.wgsl`), for `etwgpu.sdpa_rope_with_kv_cache` on the
//! decode route of devices with subgroups: the query and the call's new
//! keys read un-rotated and rotated as they are loaded (pairs `(x[2i],
//! x[2i+1])` of a row of token `t` of the call turned by the tables `cos,
//! sin [_, D/2]` at row `table_row + t`, each result rounded to the
//! activations' dtype as `rope.wgsl` stores it); the rotated keys are what
//! it writes into the key cache. Everything else is
//! `common/sdpa_split_sg_body.wgsl`'s.
// variants: f32 f16 f32_kvf16

alias Elem = f32;
alias KvElem = Elem;

// include: split_plan.wgsl
// include: rope4.wgsl
// include: sdpa_split_rope_decl.wgsl
// include: sdpa_split_sg_body.wgsl
