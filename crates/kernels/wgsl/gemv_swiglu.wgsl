//! SwiGLU of two linears of one input in one dispatch, matrix-vector
//! route for few rows (`etwgpu.linear_swiglu` at decode): with
//! `g = x @ w_gate^T + b_gate` and `u = x @ w_up^T + b_up`,
//! `out[m, n] = g * sigmoid(g) * u`.
//!
//! One workgroup per output element (folded into x and y); its
//! invocations split K for both dot products and reduce them in shared
//! memory in f32, as in `gemv.wgsl`.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup; the reduction assumes a power of two.
const WG: u32 = 64u;

struct Params {
    m: u32,
    n: u32,
    k: u32,
    /// Bit 0: the gate has a bias; bit 1: the up projection has one.
    has_bias: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> w_gate: array<Elem>;
@group(0) @binding(3) var<storage, read> b_gate: array<Elem>;
@group(0) @binding(4) var<storage, read> w_up: array<Elem>;
@group(0) @binding(5) var<storage, read> b_up: array<Elem>;
@group(0) @binding(6) var<storage, read_write> out: array<Elem>;

var<workgroup> partial_g: array<f32, WG>;
var<workgroup> partial_u: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let idx = wid.y * groups.x + wid.x;
    // Workgroup-uniform: either every invocation of a group returns or none.
    if idx >= p.m * p.n {
        return;
    }
    let row = idx / p.n;
    let col = idx % p.n;
    var acc_g = 0.0;
    var acc_u = 0.0;
    for (var kk = lid; kk < p.k; kk += WG) {
        let xv = f32(x[row * p.k + kk]);
        acc_g += xv * f32(w_gate[col * p.k + kk]);
        acc_u += xv * f32(w_up[col * p.k + kk]);
    }
    partial_g[lid] = acc_g;
    partial_u[lid] = acc_u;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if lid < stride {
            partial_g[lid] += partial_g[lid + stride];
            partial_u[lid] += partial_u[lid + stride];
        }
        workgroupBarrier();
    }
    if lid == 0u {
        var g = partial_g[0];
        var u = partial_u[0];
        if (p.has_bias & 1u) != 0u {
            g += f32(b_gate[col]);
        }
        if (p.has_bias & 2u) != 0u {
            u += f32(b_up[col]);
        }
        out[idx] = Elem(g * (1.0 / (1.0 + exp(-g))) * u);
    }
}
