//! RMS norm over the last `n` elements of each row (`et_vk.rms_norm`):
//! `out = x / sqrt(mean(x^2) + eps) * weight`. One invocation per row, in
//! f32.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 64).
override WG: u32 = 64u;

struct Params {
    rows: u32,
    n: u32,
    eps: f32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> weight: array<Elem>;
@group(0) @binding(3) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = gid.x + gid.y * nwg.x * WG;
    if r >= p.rows {
        return;
    }
    let base = r * p.n;
    var sq = 0.0;
    for (var j = 0u; j < p.n; j++) {
        let v = f32(x[base + j]);
        sq += v * v;
    }
    let rstd = inverseSqrt(sq / f32(p.n) + p.eps);
    for (var j = 0u; j < p.n; j++) {
        out[base + j] = Elem(f32(x[base + j]) * rstd * f32(weight[j]));
    }
}
