//! SwiGLU of two 4-bit group-wise symmetric weight linears of one input in
//! one dispatch (`etwgpu.linear_q4gsw_swiglu`): with `g` and `u` the
//! `et_vk.linear_q4gsw` products of the gate and up weights,
//! `out[m, n] = g * sigmoid(g) * u`.
//!
//! Packing as in `linear_q4gsw.wgsl`; both weights share one shape
//! `[N, K_packed]` and both scales one shape `[G, N_pad]`. One workgroup
//! per output element (folded into x and y); its invocations split K for
//! both dot products and reduce them in shared memory, in f32.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup; the reduction assumes a power of two.
const WG: u32 = 64u;

struct Params {
    /// Rows of x.
    m: u32,
    /// Output features.
    n: u32,
    /// Input features.
    k: u32,
    /// Bytes per weight row.
    k_packed: u32,
    /// Row length of the scales: N padded.
    n_pad: u32,
    /// Inputs per scale group.
    group_size: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> weights_gate: array<u32>;
@group(0) @binding(3) var<storage, read> scales_gate: array<Elem>;
@group(0) @binding(4) var<storage, read> weights_up: array<u32>;
@group(0) @binding(5) var<storage, read> scales_up: array<Elem>;
@group(0) @binding(6) var<storage, read_write> out: array<Elem>;

var<workgroup> partial_g: array<f32, WG>;
var<workgroup> partial_u: array<f32, WG>;

/// The signed 4-bit value of `word`'s byte for `byte_idx`, input `k`.
fn nibble(word: u32, byte_idx: u32, k: u32) -> f32 {
    let byte = (word >> ((byte_idx % 4u) * 8u)) & 0xffu;
    return f32(i32((byte >> ((k % 2u) * 4u)) & 0xfu) - 8);
}

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
        let byte_idx = col * p.k_packed + kk / 2u;
        let s_idx = (kk / p.group_size) * p.n_pad + col;
        acc_g += xv * nibble(weights_gate[byte_idx / 4u], byte_idx, kk) * f32(scales_gate[s_idx]);
        acc_u += xv * nibble(weights_up[byte_idx / 4u], byte_idx, kk) * f32(scales_up[s_idx]);
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
        let g = partial_g[0];
        out[idx] = Elem(g * (1.0 / (1.0 + exp(-g))) * partial_u[0]);
    }
}
