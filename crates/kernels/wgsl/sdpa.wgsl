//! Causal attention with a KV cache (`sdpa_with_kv_cache`), layout
//! `[1, seq, heads, D]` everywhere.
//!
//! The caches were updated by `kv_cache_update.wgsl` first. One workgroup
//! per (query row, head): query row `i` attends to cache rows `0..=start_pos + i` of kv head `h / group`. Pass 1 finds the
//! max score and the softmax sum (f32, per invocation then reduced in
//! shared memory); pass 2 walks the keys in chunks of `WG` probabilities
//! held in shared memory, each invocation accumulating its output dims.
//! The caches may be float16 under f32 activations (`KvElem`, the
//! `f32_kvf16` variant); the math is f32 either way.
// variants: f32 f16 f32_kvf16

alias Elem = f32;
alias KvElem = Elem;

/// Invocations per workgroup; the reductions assume a power of two.
const WG: u32 = 64u;

struct Params {
    /// Tokens in the chunk (`S`).
    seq: u32,
    /// Query heads.
    n_heads: u32,
    /// Key/value heads.
    n_kv_heads: u32,
    /// Head dim.
    head_dim: u32,
    /// Position of the first new token.
    start_pos: u32,
    /// Softmax scale.
    scale: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<Elem>;
@group(0) @binding(2) var<storage, read> k_cache: array<KvElem>;
@group(0) @binding(3) var<storage, read> v_cache: array<KvElem>;
@group(0) @binding(4) var<storage, read_write> out: array<Elem>;

var<workgroup> red_a: array<f32, WG>;
var<workgroup> red_b: array<f32, WG>;
var<workgroup> probs: array<f32, WG>;

/// Scaled dot product of the query at `q_base` with cache row `key`, kv
/// head `kvh`.
fn score(q_base: u32, key: u32, kvh: u32) -> f32 {
    let k_base = (key * p.n_kv_heads + kvh) * p.head_dim;
    var dot = 0.0;
    for (var d = 0u; d < p.head_dim; d++) {
        dot += f32(q[q_base + d]) * f32(k_cache[k_base + d]);
    }
    return dot * p.scale;
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
    let q_base = (i * p.n_heads + h) * p.head_dim;
    let ctx = p.start_pos + i + 1u;

    // Pass 1: running max and sum per invocation, then merged.
    var m = -3.402823e38;
    var l = 0.0;
    for (var key = lid; key < ctx; key += WG) {
        let s = score(q_base, key, kvh);
        let m_new = max(m, s);
        l = l * exp(m - m_new) + exp(s - m_new);
        m = m_new;
    }
    red_a[lid] = m;
    red_b[lid] = l;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if lid < stride {
            let m1 = red_a[lid];
            let m2 = red_a[lid + stride];
            let mm = max(m1, m2);
            red_b[lid] = red_b[lid] * exp(m1 - mm) + red_b[lid + stride] * exp(m2 - mm);
            red_a[lid] = mm;
        }
        workgroupBarrier();
    }
    let m_all = red_a[0];
    let inv_l = 1.0 / red_b[0];

    // Pass 2: probabilities in chunks of WG keys; invocation `lid` owns
    // output dims `lid, lid + WG, ...`.
    let n_chunks = (ctx + WG - 1u) / WG;
    let n_dblocks = (p.head_dim + WG - 1u) / WG;
    for (var t = 0u; t < n_dblocks; t++) {
        let d = t * WG + lid;
        var acc = 0.0;
        for (var ch = 0u; ch < n_chunks; ch++) {
            let key = ch * WG + lid;
            var pr = 0.0;
            if key < ctx {
                pr = exp(score(q_base, key, kvh) - m_all) * inv_l;
            }
            probs[lid] = pr;
            workgroupBarrier();
            if d < p.head_dim {
                let n_here = min(WG, ctx - ch * WG);
                for (var j = 0u; j < n_here; j++) {
                    let v_at = ((ch * WG + j) * p.n_kv_heads + kvh) * p.head_dim + d;
                    acc += probs[j] * f32(v_cache[v_at]);
                }
            }
            workgroupBarrier();
        }
        if d < p.head_dim {
            out[q_base + d] = Elem(acc);
        }
    }
}
