//! Inference batch norm over dim 1 of a tensor seen as `[N, C, inner]`:
//! `out = (x - mean[c]) * rsqrt(var[c] + eps) * weight[c] + bias[c]`, one
//! invocation per element, in f32.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    c: u32,
    inner: u32,
    has_weight: u32,
    has_bias: u32,
    eps: f32,
    _pad0: f32,
    _pad1: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> weight: array<Elem>;
@group(0) @binding(3) var<storage, read> bias: array<Elem>;
@group(0) @binding(4) var<storage, read> mean: array<Elem>;
@group(0) @binding(5) var<storage, read> var_: array<Elem>;
@group(0) @binding(6) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    let c = (i / p.inner) % p.c;
    var v = (f32(x[i]) - f32(mean[c])) * inverseSqrt(f32(var_[c]) + p.eps);
    if p.has_weight != 0u {
        v *= f32(weight[c]);
    }
    if p.has_bias != 0u {
        v += f32(bias[c]);
    }
    out[i] = Elem(v);
}
