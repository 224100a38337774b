//! Layer norm over the last `n` elements of each row:
//! `out = (x - mean) * rstd * weight + bias`, also writing `mean` and
//! `rstd` per row. One invocation per row, two passes, in f32.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 64).
override WG: u32 = 64u;

struct Params {
    rows: u32,
    n: u32,
    has_weight: u32,
    has_bias: u32,
    eps: f32,
    _pad0: f32,
    _pad1: f32,
    _pad2: f32,
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
    let base = r * p.n;
    var sum = 0.0;
    for (var j = 0u; j < p.n; j++) {
        sum += f32(x[base + j]);
    }
    let mean = sum / f32(p.n);
    var sq = 0.0;
    for (var j = 0u; j < p.n; j++) {
        let d = f32(x[base + j]) - mean;
        sq += d * d;
    }
    let rstd = inverseSqrt(sq / f32(p.n) + p.eps);
    for (var j = 0u; j < p.n; j++) {
        var v = (f32(x[base + j]) - mean) * rstd;
        if p.has_weight != 0u {
            v *= f32(weight[j]);
        }
        if p.has_bias != 0u {
            v += f32(bias[j]);
        }
        out[base + j] = Elem(v);
    }
    mean_out[r] = Elem(mean);
    rstd_out[r] = Elem(rstd);
}
