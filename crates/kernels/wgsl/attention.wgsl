//! Non-causal attention without a cache (`et_vk.sdpa`), layout
//! `[B, H, S, D]`: `out = softmax(q k^T * scale + mask) v`, with an optional
//! additive mask `[Sq, Skv]` broadcast over batch and heads (or one per
//! (b, h)), and kv head `h / (Hq / Hkv)` (`Hkv` is 1 or `Hq`).
//!
//! One workgroup per (batch, head, query row). Pass 1 finds the max score
//! and the softmax sum (f32, per invocation then reduced in shared memory);
//! pass 2 walks the keys in chunks of `WG` probabilities held in shared
//! memory, each invocation accumulating its output dims.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup; the reductions assume a power of two.
const WG: u32 = 64u;

struct Params {
    batch: u32,
    n_heads: u32,
    n_kv_heads: u32,
    q_len: u32,
    kv_len: u32,
    head_dim: u32,
    /// 0: no mask; 1: one `[Sq, Skv]` mask; 2: one per (b, h).
    mask_mode: u32,
    scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<Elem>;
@group(0) @binding(2) var<storage, read> k: array<Elem>;
@group(0) @binding(3) var<storage, read> v: array<Elem>;
@group(0) @binding(4) var<storage, read> mask: array<Elem>;
@group(0) @binding(5) var<storage, read_write> out: array<Elem>;

var<workgroup> red_a: array<f32, WG>;
var<workgroup> red_b: array<f32, WG>;
var<workgroup> probs: array<f32, WG>;

/// Masked, scaled dot product of the query at `q_base` with key `key`.
fn score(q_base: u32, kv_base: u32, mask_base: u32, key: u32) -> f32 {
    let k_base = kv_base + key * p.head_dim;
    var dot = 0.0;
    for (var d = 0u; d < p.head_dim; d++) {
        dot += f32(q[q_base + d]) * f32(k[k_base + d]);
    }
    var s = dot * p.scale;
    if p.mask_mode != 0u {
        s += f32(mask[mask_base + key]);
    }
    return s;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let idx = wid.y * groups.x + wid.x;
    // Workgroup-uniform: either every invocation of a group returns or none.
    if idx >= p.batch * p.n_heads * p.q_len {
        return;
    }
    let i = idx % p.q_len;
    let bh = idx / p.q_len;
    let h = bh % p.n_heads;
    let b = bh / p.n_heads;
    let kvh = h / (p.n_heads / p.n_kv_heads);
    let q_base = idx * p.head_dim;
    let kv_base = (b * p.n_kv_heads + kvh) * p.kv_len * p.head_dim;
    var mask_base = i * p.kv_len;
    if p.mask_mode == 2u {
        mask_base += bh * p.q_len * p.kv_len;
    }

    var m = -3.402823e38;
    var l = 0.0;
    for (var key = lid; key < p.kv_len; key += WG) {
        let s = score(q_base, kv_base, mask_base, key);
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

    let n_chunks = (p.kv_len + WG - 1u) / WG;
    let n_dblocks = (p.head_dim + WG - 1u) / WG;
    for (var t = 0u; t < n_dblocks; t++) {
        let d = t * WG + lid;
        var acc = 0.0;
        for (var ch = 0u; ch < n_chunks; ch++) {
            let key = ch * WG + lid;
            var pr = 0.0;
            if key < p.kv_len {
                pr = exp(score(q_base, kv_base, mask_base, key) - m_all) * inv_l;
            }
            probs[lid] = pr;
            workgroupBarrier();
            if d < p.head_dim {
                let n_here = min(WG, p.kv_len - ch * WG);
                for (var j = 0u; j < n_here; j++) {
                    acc += probs[j] * f32(v[kv_base + (ch * WG + j) * p.head_dim + d]);
                }
            }
            workgroupBarrier();
        }
        if d < p.head_dim {
            out[q_base + d] = Elem(acc);
        }
    }
}
