//! Rotary position embeddings on `x [B, S, H, D]`, one invocation per
//! rotated pair.
//!
//! `et_vk.apply_rotary_emb`: pairs `(x[2i], x[2i+1])`, tables
//! `cos, sin [S, D/2]` indexed by the token's row in the chunk:
//! `r' = r*c - i*s`, `i' = r*s + i*c`.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    /// Pairs to rotate: `B * S * H * D / 2`.
    n_pairs: u32,
    /// Heads.
    n_heads: u32,
    /// `D / 2`.
    half: u32,
    /// Tokens in the chunk.
    seq: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> cos_t: array<Elem>;
@group(0) @binding(3) var<storage, read> sin_t: array<Elem>;
@group(0) @binding(4) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * WG;
    if idx >= p.n_pairs {
        return;
    }
    let i = idx % p.half;
    let s = (idx / p.half / p.n_heads) % p.seq;
    let c = f32(cos_t[s * p.half + i]);
    let sn = f32(sin_t[s * p.half + i]);
    let re = f32(x[2u * idx]);
    let im = f32(x[2u * idx + 1u]);
    out[2u * idx] = Elem(re * c - im * sn);
    out[2u * idx + 1u] = Elem(re * sn + im * c);
}
