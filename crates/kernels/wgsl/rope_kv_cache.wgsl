//! A prompt's rotary embedding and KV-cache update in one dispatch: the
//! rotation of `rope.wgsl` on the query `xq [1, S, Hq, D]` (into `out_q`)
//! and on the new keys `xk [1, S, Hkv, D]`, whose rotated pairs go
//! straight into rows `start_pos..start_pos + S` of the key cache, and the
//! new values' copy into the value cache, as `kv_cache_update.wgsl` makes
//! it (caches `[1, Cmax, Hkv, D]`, float16 under f32 values in
//! `f32_kvf16`, rounded on the way in). The route of
//! `etwgpu.sdpa_rope_with_kv_cache` where the attention reads the new keys
//! from the cache (every route but the split one, which rotates and
//! stores them itself): the rotated keys are not written anywhere else.
//!
//! One invocation per pair: the first `n_q` take the query's pairs
//! `(x[2i], x[2i+1])`, the next `n_k` the keys', the next `n_k` the
//! values' (copied, not rotated). Tables `cos, sin [R, D/2]` at row
//! `row0` plus the token's row in the chunk: `r' = r*c - i*s`,
//! `i' = r*s + i*c`.
// variants: f32 f16 f32_kvf16

alias Elem = f32;
alias KvElem = Elem;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    /// Pairs of the query: `S * Hq * D / 2`.
    n_q: u32,
    /// Pairs of the new keys (and of the new values): `S * Hkv * D / 2`.
    n_k: u32,
    /// Query heads.
    heads_q: u32,
    /// Key heads.
    heads_k: u32,
    /// `D / 2`.
    half: u32,
    /// Tokens in the chunk.
    seq: u32,
    /// The tables' row of the chunk's first token.
    row0: u32,
    /// Element offset of row `start_pos` in a cache.
    offset: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> xq: array<Elem>;
@group(0) @binding(2) var<storage, read> xk: array<Elem>;
@group(0) @binding(3) var<storage, read> v_new: array<Elem>;
@group(0) @binding(4) var<storage, read> cos_t: array<Elem>;
@group(0) @binding(5) var<storage, read> sin_t: array<Elem>;
@group(0) @binding(6) var<storage, read_write> out_q: array<Elem>;
@group(0) @binding(7) var<storage, read_write> k_cache: array<KvElem>;
@group(0) @binding(8) var<storage, read_write> v_cache: array<KvElem>;

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
        k_cache[p.offset + 2u * j] = KvElem(r.x);
        k_cache[p.offset + 2u * j + 1u] = KvElem(r.y);
    } else if idx < p.n_q + 2u * p.n_k {
        let j = idx - p.n_q - p.n_k;
        v_cache[p.offset + 2u * j] = KvElem(v_new[2u * j]);
        v_cache[p.offset + 2u * j + 1u] = KvElem(v_new[2u * j + 1u]);
    }
}
