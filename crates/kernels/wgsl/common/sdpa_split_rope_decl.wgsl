//! The parameters, bindings and reads of the `_rope` split-KV partials
//! (`sdpa_split_rope.wgsl`, `sdpa_split_short_rope.wgsl`,
//! `sdpa_split_sg_rope.wgsl`): the query and the call's new keys rotated
//! as they are read. The including family declares `Elem` and `KvElem`
//! (and `WG` for the workgroup body), and includes `split_plan.wgsl`,
//! `rope4.wgsl` and its body (`sdpa_split_body.wgsl` or
//! `sdpa_split_sg_body.wgsl`).

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
    /// Query vectors the subgroup body's final merge sums at once (the
    /// workgroup body does not read it).
    merge_queries: u32,
    _pad1: u32,
    /// The tables' row of the call's first token.
    table_row: u32,
    _pad2: u32,
    _pad3: u32,
    _pad4: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> k_new: array<vec4<Elem>>;
@group(0) @binding(3) var<storage, read> v_new: array<vec4<Elem>>;
@group(0) @binding(4) var<storage, read> cos_t: array<Elem>;
@group(0) @binding(5) var<storage, read> sin_t: array<Elem>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<vec4<KvElem>>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<vec4<KvElem>>;
@group(0) @binding(8) var<storage, read_write> part: array<vec4<f32>>;

/// `vec4` `d` of query row `row` (the call's token `row`), head `h`, rotated.
fn query_at(row: u32, h: u32, d: u32, d4: u32) -> vec4<f32> {
    return rope4(q[(row * p.n_heads + h) * d4 + d], row, d);
}

/// `vec4` `d` of the call's key `t` of kv head `kvh`, rotated, as the cache
/// holds it.
fn new_key(t: u32, kvh: u32, d: u32, d4: u32) -> vec4<KvElem> {
    return vec4<KvElem>(rope4(k_new[(t * p.n_kv_heads + kvh) * d4 + d], t, d));
}
