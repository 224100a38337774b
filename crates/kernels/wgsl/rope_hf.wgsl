//! HF rotate-half rotary position embeddings (`et_vk.apply_rotary_emb_hf`)
//! on `x [B, S, H, D]`, one invocation per element.
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
    numel: u32,
    head_dim: u32,
    /// Rotary dim `R` (the tables' width).
    rot: u32,
    seq: u32,
    n_heads: u32,
    start_pos: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> cos_t: array<Elem>;
@group(0) @binding(3) var<storage, read> sin_t: array<Elem>;
@group(0) @binding(4) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * WG;
    if idx >= p.numel {
        return;
    }
    let d = idx % p.head_dim;
    if d >= p.rot {
        out[idx] = x[idx];
        return;
    }
    let s = (idx / p.head_dim / p.n_heads) % p.seq;
    let t = (p.start_pos + s) * p.rot + d;
    let half = p.rot / 2u;
    let v = f32(x[idx]) * f32(cos_t[t]);
    if d < half {
        out[idx] = Elem(v - f32(x[idx + half]) * f32(sin_t[t]));
    } else {
        out[idx] = Elem(v + f32(x[idx - half]) * f32(sin_t[t]));
    }
}
