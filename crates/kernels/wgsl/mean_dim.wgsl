//! Mean over the middle dim of a tensor seen as `[outer, n, inner]`: one
//! invocation per `(outer, inner)` output, summing in f32. An empty
//! reduction gives NaN, as in PyTorch.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 64).
override WG: u32 = 64u;

struct Params {
    rows: u32,
    n: u32,
    inner: u32,
    _pad0: u32,
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
    let base = (r / p.inner) * p.n * p.inner + r % p.inner;
    var sum = 0.0;
    for (var j = 0u; j < p.n; j++) {
        sum += f32(x[base + j * p.inner]);
    }
    out[r] = Elem(sum / f32(p.n));
}
