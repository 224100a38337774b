//! KV-cache update of `sdpa_with_kv_cache`: one invocation per element of
//! the new keys/values `[1, S, Hkv, D]`, copied to rows
//! `start_pos..start_pos + S` of both caches `[1, Cmax, Hkv, D]`, which
//! may be float16 under f32 values (`f32_kvf16`: rounded on the way in).
// variants: f32 f16 f32_kvf16

alias Elem = f32;
alias KvElem = Elem;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    /// Elements of the new keys (`S * Hkv * D`).
    n_new: u32,
    /// Element offset of row `start_pos` in a cache.
    offset: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> k_new: array<Elem>;
@group(0) @binding(2) var<storage, read> v_new: array<Elem>;
@group(0) @binding(3) var<storage, read_write> k_cache: array<KvElem>;
@group(0) @binding(4) var<storage, read_write> v_cache: array<KvElem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * WG;
    if idx >= p.n_new {
        return;
    }
    k_cache[p.offset + idx] = KvElem(k_new[idx]);
    v_cache[p.offset + idx] = KvElem(v_new[idx]);
}
