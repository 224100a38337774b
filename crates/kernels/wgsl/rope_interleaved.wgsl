//! Pair-interleaved rotary embeddings (`et_vk.apply_rotary_emb_interleaved`)
//! on `x [B, N, C]`, one invocation per pair `(x[2k], x[2k+1])`.
//!
//! The table holds `(cos, sin)` at `(2k, 2k+1)` of row `n` in a flat
//! `[N, C]` layout: `out[2k] = x[2k]*cos - x[2k+1]*sin`,
//! `out[2k+1] = x[2k]*sin + x[2k+1]*cos`.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    /// Pairs to rotate: `B * N * C / 2`.
    n_pairs: u32,
    /// `C / 2`.
    half: u32,
    /// Rows `N`.
    rows: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> freqs: array<Elem>;
@group(0) @binding(3) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * WG;
    if idx >= p.n_pairs {
        return;
    }
    let k = idx % p.half;
    let n = (idx / p.half) % p.rows;
    let t = 2u * (n * p.half + k);
    let c = f32(freqs[t]);
    let s = f32(freqs[t + 1u]);
    let re = f32(x[2u * idx]);
    let im = f32(x[2u * idx + 1u]);
    out[2u * idx] = Elem(re * c - im * s);
    out[2u * idx + 1u] = Elem(re * s + im * c);
}
