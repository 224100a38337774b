//! The `_rope` form of `sdpa_split_sg.wgsl` (as `sdpa_split_rope.wgsl` is
//! of `sdpa_split.wgsl`), for `etwgpu.sdpa_rope_with_kv_cache` on the
//! decode route of devices with subgroups: the query and the call's new
//! keys read un-rotated and rotated as they are loaded (pairs `(x[2i],
//! x[2i+1])` of a row of token `t` of the call turned by the tables `cos,
//! sin [_, D/2]` at row `table_row + t`, each result rounded to the
//! activations' dtype as `rope.wgsl` stores it); the rotated keys are what
//! it writes into the key cache. Everything else is
//! `common/sdpa_split_sg_body.wgsl`'s.
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
// include: rope4.wgsl
// include: sdpa_split_rope_decl.wgsl
// include: sdpa_split_sg_body.wgsl
