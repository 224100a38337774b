//! Rotary position embeddings on the query `xq [B, S, Hq, D]` and the key
//! `xk [B, S, Hkv, D]` in one dispatch, one invocation per rotated pair:
//! the first `n_q` invocations take the query's pairs, the next `n_k` the
//! key's.
//!
//! `et_vk.apply_rotary_emb`: pairs `(x[2i], x[2i+1])`, tables
//! `cos, sin [S, D/2]` indexed by the token's row in the chunk (from row
//! `row0` of longer tables):
//! `r' = r*c - i*s`, `i' = r*s + i*c`.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    /// Pairs of the query: `B * S * Hq * D / 2`.
    n_q: u32,
    /// Pairs of the key: `B * S * Hkv * D / 2`.
    n_k: u32,
    /// Query heads.
    heads_q: u32,
    /// Key heads.
    heads_k: u32,
    /// `D / 2`.
    half: u32,
    /// Tokens in the chunk.
    seq: u32,
    /// The tables' row of the chunk's first token (0 for tables of the
    /// chunk's rows; a fused op may hand whole tables).
    row0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> xq: array<Elem>;
@group(0) @binding(2) var<storage, read> xk: array<Elem>;
@group(0) @binding(3) var<storage, read> cos_t: array<Elem>;
@group(0) @binding(4) var<storage, read> sin_t: array<Elem>;
@group(0) @binding(5) var<storage, read_write> out_q: array<Elem>;
@group(0) @binding(6) var<storage, read_write> out_k: array<Elem>;

// include: rope_pair.wgsl

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * WG;
    if idx < p.n_q {
        let r = rotate(idx, p.heads_q, f32(xq[2u * idx]), f32(xq[2u * idx + 1u]));
        out_q[2u * idx] = Elem(r.x);
        out_q[2u * idx + 1u] = Elem(r.y);
    } else if idx < p.n_q + p.n_k {
        let j = idx - p.n_q;
        let r = rotate(j, p.heads_k, f32(xk[2u * j]), f32(xk[2u * j + 1u]));
        out_k[2u * j] = Elem(r.x);
        out_k[2u * j + 1u] = Elem(r.y);
    }
}
