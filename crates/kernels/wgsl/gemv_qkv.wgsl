//! Three linears of one input in one dispatch, matrix-vector route for
//! few rows (`etwgpu.linear_qkv` at decode): `out_j[m, n] = sum_k x[m, k]
//! * w_j[n, k] + b_j[n]` for j = 0, 1, 2 (Q, K, V).
//!
//! One workgroup per output element of the three outputs taken in order
//! (`M * (N0 + N1 + N2)` in all, folded into x and y); its invocations
//! split K and reduce in shared memory in f32, as in `gemv.wgsl`.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup; the reduction assumes a power of two.
const WG: u32 = 64u;

struct Params {
    m: u32,
    k: u32,
    n0: u32,
    n1: u32,
    n2: u32,
    /// Bit j set: projection j has a bias.
    has_bias: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> w0: array<Elem>;
@group(0) @binding(3) var<storage, read> w1: array<Elem>;
@group(0) @binding(4) var<storage, read> w2: array<Elem>;
@group(0) @binding(5) var<storage, read> b0: array<Elem>;
@group(0) @binding(6) var<storage, read> b1: array<Elem>;
@group(0) @binding(7) var<storage, read> b2: array<Elem>;
@group(0) @binding(8) var<storage, read_write> out0: array<Elem>;
@group(0) @binding(9) var<storage, read_write> out1: array<Elem>;
@group(0) @binding(10) var<storage, read_write> out2: array<Elem>;

var<workgroup> partial: array<f32, WG>;

fn weight(j: u32, idx: u32) -> f32 {
    switch j {
        case 0u: { return f32(w0[idx]); }
        case 1u: { return f32(w1[idx]); }
        default: { return f32(w2[idx]); }
    }
}

// include: qkv_out.wgsl

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    var idx = wid.y * groups.x + wid.x;
    let s0 = p.m * p.n0;
    let s1 = p.m * p.n1;
    // Workgroup-uniform: either every invocation of a group returns or none.
    if idx >= s0 + s1 + p.m * p.n2 {
        return;
    }
    var j = 0u;
    var n = p.n0;
    if idx >= s0 + s1 {
        j = 2u;
        n = p.n2;
        idx -= s0 + s1;
    } else if idx >= s0 {
        j = 1u;
        n = p.n1;
        idx -= s0;
    }
    let row = idx / n;
    let col = idx % n;
    var acc = 0.0;
    for (var kk = lid; kk < p.k; kk += WG) {
        acc += f32(x[row * p.k + kk]) * weight(j, col * p.k + kk);
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if lid < stride {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    if lid == 0u {
        store(j, idx, partial[0] + bias(j, col));
    }
}
