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

struct Params {
    /// Query rows (`S`).
    seq: u32,
    /// Query heads.
    n_heads: u32,
    /// Key/value heads.
    n_kv_heads: u32,
    /// Head dim (a multiple of 4, at most 256).
    head_dim: u32,
    /// Position of the first new token.
    start_pos: u32,
    /// Softmax scale.
    scale: f32,
    /// Split plan constants (`common/split_plan.wgsl`).
    split_target: u32,
    split_min_keys: u32,
    split_tile: u32,
    split_max: u32,
    /// Query vectors the final merge sums at once.
    merge_queries: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
// include: split_plan.wgsl
@group(0) @binding(1) var<storage, read> q: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> k_new: array<vec4<Elem>>;
@group(0) @binding(3) var<storage, read> v_new: array<vec4<Elem>>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<vec4<KvElem>>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<vec4<KvElem>>;
@group(0) @binding(6) var<storage, read_write> part: array<vec4<f32>>;

/// `vec4` `d` of query row `row`, head `h`.
fn query_at(row: u32, h: u32, d: u32, d4: u32) -> vec4<f32> {
    return vec4<f32>(q[(row * p.n_heads + h) * d4 + d]);
}

/// `vec4` `d` of the call's key `t` of kv head `kvh`, as the cache holds it.
fn new_key(t: u32, kvh: u32, d: u32, d4: u32) -> vec4<KvElem> {
    return vec4<KvElem>(k_new[(t * p.n_kv_heads + kvh) * d4 + d]);
}

// include: sdpa_split_sg_body.wgsl
