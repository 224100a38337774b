//! 4-bit group-wise symmetric weight linear (`et_vk.linear_q4gsw`):
//! `out[m, n] = sum_k x[m, k] * (nibble(n, k) - 8) * scales[k / group, n] + bias[n]`.
//!
//! Weights are u8 `[N, K_packed]` read as `u32` words: byte `j` of row `n`
//! holds k = 2j in its low nibble and k = 2j+1 in its high nibble. Scales
//! are `[G, N_pad]`. One workgroup per output element; its invocations
//! split K and reduce in shared memory, in f32. The grid is folded into x
//! and y.
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
@group(0) @binding(2) var<storage, read> weights: array<u32>;
@group(0) @binding(3) var<storage, read> scales: array<Elem>;
@group(0) @binding(4) var<storage, read> bias: array<Elem>;
@group(0) @binding(5) var<storage, read_write> out: array<Elem>;

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
    var acc = 0.0;
    for (var kk = lid; kk < p.k; kk += WG) {
        let s = f32(scales[(kk / p.group_size) * p.n_pad + col]);
        acc += f32(x[row * p.k + kk]) * weight(col, kk) * s;
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
        var r = partial[0];
        if p.has_bias != 0u {
            r += f32(bias[col]);
        }
        out[idx] = Elem(r);
    }
}
