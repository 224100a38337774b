//! Group norm of a tensor seen as `[N * G, C / G, inner]`: one invocation
//! per `(n, group)` row computes the mean and biased variance (two passes,
//! in f32), writes `out = (x - mean) * rstd * weight[c] + bias[c]`, and
//! the row's `mean` and `rstd`.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 64).
override WG: u32 = 64u;

struct Params {
    rows: u32,
    groups: u32,
    channels_per_group: u32,
    inner: u32,
    has_weight: u32,
    has_bias: u32,
    eps: f32,
    _pad0: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> weight: array<Elem>;
@group(0) @binding(3) var<storage, read> bias: array<Elem>;
@group(0) @binding(4) var<storage, read_write> out: array<Elem>;
@group(0) @binding(5) var<storage, read_write> mean_out: array<Elem>;
@group(0) @binding(6) var<storage, read_write> rstd_out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = gid.x + gid.y * nwg.x * WG;
    if r >= p.rows {
        return;
    }
    let n = p.channels_per_group * p.inner;
    let base = r * n;
    var sum = 0.0;
    for (var j = 0u; j < n; j++) {
        sum += f32(x[base + j]);
    }
    let mean = sum / f32(max(n, 1u));
    var sq = 0.0;
    for (var j = 0u; j < n; j++) {
        let d = f32(x[base + j]) - mean;
        sq += d * d;
    }
    let rstd = inverseSqrt(sq / f32(max(n, 1u)) + p.eps);
    let c0 = (r % p.groups) * p.channels_per_group;
    for (var j = 0u; j < n; j++) {
        let c = c0 + j / max(p.inner, 1u);
        var v = (f32(x[base + j]) - mean) * rstd;
        if p.has_weight != 0u {
            v *= f32(weight[c]);
        }
        if p.has_bias != 0u {
            v += f32(bias[c]);
        }
        out[base + j] = Elem(v);
    }
    mean_out[r] = Elem(mean);
    rstd_out[r] = Elem(rstd);
}
