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
// variants: f32 f16 f32_kvf16

alias Elem = f32;
alias KvElem = Elem;

// include: split_plan.wgsl
// include: sdpa_split_decl.wgsl
// include: sdpa_split_sg_body.wgsl
