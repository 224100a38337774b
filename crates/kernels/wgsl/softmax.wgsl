//! Softmax and log-softmax along one dim of a tensor seen as
//! `[outer, dim, inner]`: one invocation per `(outer, inner)` row, three
//! passes (max, sum of exponentials, write), in f32.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 64).
override WG: u32 = 64u;

struct Params {
    rows: u32,
    dim: u32,
    inner: u32,
    log: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = gid.x + gid.y * nwg.x * WG;
    if r >= p.rows {
        return;
    }
    let base = (r / p.inner) * p.dim * p.inner + r % p.inner;
    var mx = f32(x[base]);
    for (var j = 1u; j < p.dim; j++) {
        mx = max(mx, f32(x[base + j * p.inner]));
    }
    var sum = 0.0;
    for (var j = 0u; j < p.dim; j++) {
        sum += exp(f32(x[base + j * p.inner]) - mx);
    }
    let log_sum = log(sum);
    for (var j = 0u; j < p.dim; j++) {
        let at = base + j * p.inner;
        let shifted = f32(x[at]) - mx;
        if p.log != 0u {
            out[at] = Elem(shifted - log_sum);
        } else {
            out[at] = Elem(exp(shifted) / sum);
        }
    }
}
