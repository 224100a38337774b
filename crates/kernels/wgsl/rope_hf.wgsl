//! HF rotate-half rotary position embeddings (`et_vk.apply_rotary_emb_hf`)
//! on the query `xq [B, S, Hq, D]` and the key `xk [B, S, Hkv, D]` in one
//! dispatch, one invocation per element: the first `numel_q` invocations
//! take the query's elements, the next `numel_k` the key's.
//!
//! Tables `cos, sin [max_seq, R]` (`R <= D`, the rotary dim) are indexed
//! by row `start_pos + s`. With `h = R / 2`, dims `d < h` give
//! `x[d] * cos[d] - x[d + h] * sin[d]`, dims `h <= d < R` give
//! `x[d] * cos[d] + x[d - h] * sin[d]`, and dims `d >= R` pass through.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    /// Elements of the query.
    numel_q: u32,
    /// Elements of the key.
    numel_k: u32,
    head_dim: u32,
    /// Rotary dim `R` (the tables' width).
    rot: u32,
    seq: u32,
    /// Query heads.
    heads_q: u32,
    /// Key heads.
    heads_k: u32,
    start_pos: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> xq: array<Elem>;
@group(0) @binding(2) var<storage, read> xk: array<Elem>;
@group(0) @binding(3) var<storage, read> cos_t: array<Elem>;
@group(0) @binding(4) var<storage, read> sin_t: array<Elem>;
@group(0) @binding(5) var<storage, read_write> out_q: array<Elem>;
@group(0) @binding(6) var<storage, read_write> out_k: array<Elem>;

/// Element `idx` of a tensor of `heads` heads, given its value `v` and the
/// value `u` it rotates with (`x[idx + h]` below `h`, `x[idx - h]` from
/// `h` to `R`; unused past `R`).
fn rotated(idx: u32, heads: u32, v: f32, u: f32) -> f32 {
    let d = idx % p.head_dim;
    if d >= p.rot {
        return v;
    }
    let s = (idx / p.head_dim / heads) % p.seq;
    let t = (p.start_pos + s) * p.rot + d;
    let c = v * f32(cos_t[t]);
    if d < p.rot / 2u {
        return c - u * f32(sin_t[t]);
    }
    return c + u * f32(sin_t[t]);
}

/// Where element `idx`'s partner sits (itself past the rotary dims).
fn partner(idx: u32) -> u32 {
    let d = idx % p.head_dim;
    let half = p.rot / 2u;
    if d >= p.rot {
        return idx;
    }
    if d < half {
        return idx + half;
    }
    return idx - half;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * WG;
    if idx < p.numel_q {
        out_q[idx] = Elem(rotated(idx, p.heads_q, f32(xq[idx]), f32(xq[partner(idx)])));
    } else if idx < p.numel_q + p.numel_k {
        let j = idx - p.numel_q;
        out_k[j] = Elem(rotated(j, p.heads_k, f32(xk[j]), f32(xk[partner(j)])));
    }
}
