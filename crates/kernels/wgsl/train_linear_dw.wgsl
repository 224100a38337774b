//! The weight gradient of a linear (`et_vk.linear_dW`):
//! `dW[n, k] = sum_m d_out[m, n] * x[m, k]` over the flattened leading
//! dims `m` of `d_out [.., N]` and `x [.., K]`. One invocation per element
//! of `dW [N, K]`, summing over `m` in order, in f32. f32 only.
// variants: f32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
const WG: u32 = 256u;

struct Params {
    m: u32,
    n: u32,
    k: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> d_out: array<Elem>;
@group(0) @binding(2) var<storage, read> x: array<Elem>;
@group(0) @binding(3) var<storage, read_write> dw: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.n * p.k {
        return;
    }
    let n = i / p.k;
    let k = i % p.k;
    var acc = 0.0;
    for (var r = 0u; r < p.m; r++) {
        acc += d_out[r * p.n + n] * x[r * p.k + k];
    }
    dw[i] = acc;
}
