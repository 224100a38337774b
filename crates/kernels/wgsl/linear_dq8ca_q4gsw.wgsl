//! Dynamically quantized int8 activations times 4-bit group-wise weights
//! (`et_vk.linear_dq8ca_q4gsw`, torchao 8da4w):
//! `q = clamp(round(x * (1 / s_m)) + zp_m, -128, 127)`, then
//! `out[m, n] = s_m * sum_k (q[m, k] - zp_m) * (nibble(n, k) - 8) * scales[k / group, n] + bias[n]`.
//!
//! Weights and scales are packed as for `linear_q4gsw.wgsl`; zero points
//! are int8, four to a `u32` word. One workgroup per output element; its
//! invocations split K and reduce in shared memory, in f32. The grid is
//! folded into x and y.
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
    /// Row length of the scales (and bias): N padded.
    n_pad: u32,
    /// Inputs per scale group.
    group_size: u32,
    has_bias: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> input_scale: array<Elem>;
@group(0) @binding(3) var<storage, read> input_zp: array<u32>;
@group(0) @binding(4) var<storage, read> weights: array<u32>;
@group(0) @binding(5) var<storage, read> scales: array<Elem>;
@group(0) @binding(6) var<storage, read> bias: array<Elem>;
@group(0) @binding(7) var<storage, read_write> out: array<Elem>;

var<workgroup> partial: array<f32, WG>;

/// The signed 4-bit weight of row `n`, input `k`.
fn weight(n: u32, k: u32) -> f32 {
    let byte_idx = n * p.k_packed + k / 2u;
    let byte = (weights[byte_idx / 4u] >> ((byte_idx % 4u) * 8u)) & 0xffu;
    let nibble = (byte >> ((k % 2u) * 4u)) & 0xfu;
    return f32(i32(nibble) - 8);
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
    let s = f32(input_scale[row]);
    let inv_s = 1.0 / s;
    let zp_byte = (input_zp[row / 4u] >> ((row % 4u) * 8u)) & 0xffu;
    let zp = f32(i32(zp_byte << 24u) >> 24u);
    var acc = 0.0;
    for (var kk = lid; kk < p.k; kk += WG) {
        let q = clamp(round(f32(x[row * p.k + kk]) * inv_s) + zp, -128.0, 127.0);
        let ws = f32(scales[(kk / p.group_size) * p.n_pad + col]);
        acc += (q - zp) * weight(col, kk) * ws;
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
        var r = partial[0] * s;
        if p.has_bias != 0u {
            r += f32(bias[col]);
        }
        out[idx] = Elem(r);
    }
}
