//! Causal attention over a KV cache in one pass (online softmax), layout
//! `[1, seq, heads, D]` everywhere, for head dims that are a multiple of 4
//! and at most 256 (`sdpa.wgsl` takes the rest). Same parameters as
//! `sdpa.wgsl`.
//!
//! One workgroup of 256 invocations per (query row, head): query row `i`
//! attends to cache rows `0..=start_pos + i` of kv head `h / group`. Keys
//! go 256 at a time: each invocation scores one key (a `vec4` dot product
//! with the query, held in shared memory), the chunk's max and sum meet in
//! shared memory, and the running output is rescaled by `exp(m_old -
//! m_new)`. For the values, invocation `t` owns dim `t % D` over every
//! `256 / D`-th key of the chunk, so neighbouring invocations read
//! neighbouring dims; the key groups are summed at the end. f32 math.
//! The caches may be float16 under f32 activations (`KvElem`, the
//! `f32_kvf16` variant); the math is f32 either way.
// variants: f32 f16 f32_kvf16

alias Elem = f32;
alias KvElem = Elem;

const WG: u32 = 256u;

struct Params {
    /// Tokens in the chunk (`S`).
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
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> k_cache: array<vec4<KvElem>>;
@group(0) @binding(3) var<storage, read> v_cache: array<KvElem>;
@group(0) @binding(4) var<storage, read_write> out: array<Elem>;

var<workgroup> qs: array<vec4<f32>, 64>;
var<workgroup> red: array<f32, WG>;
var<workgroup> probs: array<f32, WG>;

/// Tree reduction of `red` (max when `is_max`, else sum); every invocation
/// gets the result.
fn reduce(lid: u32, v: f32, is_max: bool) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if lid < stride {
            if is_max {
                red[lid] = max(red[lid], red[lid + stride]);
            } else {
                red[lid] += red[lid + stride];
            }
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let idx = wid.y * groups.x + wid.x;
    // Workgroup-uniform: either every invocation of a group returns or none.
    if idx >= p.seq * p.n_heads {
        return;
    }
    let i = idx / p.n_heads;
    let h = idx % p.n_heads;
    let kvh = h / (p.n_heads / p.n_kv_heads);
    let d4 = p.head_dim / 4u;
    let q_base = (i * p.n_heads + h) * p.head_dim;
    let ctx = p.start_pos + i + 1u;
    if lid < d4 {
        qs[lid] = vec4<f32>(q[q_base / 4u + lid]);
    }
    workgroupBarrier();
    // Value work: dim `dim` of every `n_kg`-th key, from key `kg`.
    let n_kg = WG / p.head_dim;
    let dim = lid % p.head_dim;
    let kg = lid / p.head_dim;
    var m_run = -3.402823e38;
    var l_run = 0.0;
    var acc = 0.0;
    for (var c0 = 0u; c0 < ctx; c0 += WG) {
        let key = c0 + lid;
        var s = -3.402823e38;
        if key < ctx {
            let k_base = (key * p.n_kv_heads + kvh) * d4;
            var dot4 = vec4<f32>(0.0);
            for (var d = 0u; d < d4; d++) {
                dot4 += qs[d] * vec4<f32>(k_cache[k_base + d]);
            }
            s = (dot4.x + dot4.y + dot4.z + dot4.w) * p.scale;
        }
        let m_new = max(m_run, reduce(lid, s, true));
        var pr = 0.0;
        if key < ctx {
            pr = exp(s - m_new);
        }
        probs[lid] = pr;
        let l_chunk = reduce(lid, pr, false);
        let alpha = exp(m_run - m_new);
        l_run = l_run * alpha + l_chunk;
        acc *= alpha;
        m_run = m_new;
        if kg < n_kg {
            let n_here = min(WG, ctx - c0);
            for (var j = kg; j < n_here; j += n_kg) {
                acc += probs[j] * f32(v_cache[((c0 + j) * p.n_kv_heads + kvh) * p.head_dim + dim]);
            }
        }
        workgroupBarrier();
    }
    // Sum the key groups of each dim.
    red[lid] = acc;
    workgroupBarrier();
    if lid < p.head_dim {
        var total = 0.0;
        for (var g = 0u; g < n_kg; g++) {
            total += red[g * p.head_dim + lid];
        }
        out[q_base + lid] = Elem(total / l_run);
    }
}
