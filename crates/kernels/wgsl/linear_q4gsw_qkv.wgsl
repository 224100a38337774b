//! Three 4-bit group-wise symmetric weight linears of one input in one
//! dispatch (`etwgpu.linear_q4gsw_qkv`): for j = 0, 1, 2 (Q, K, V),
//! `out_j[m, n] = sum_k x[m, k] * (nibble_j(n, k) - 8) * scales_j[k / group, n]`.
//!
//! Packing as in `linear_q4gsw.wgsl`: weights u8 `[N_j, K_packed_j]` read
//! as `u32` words (even k in the low nibble), scales `[G, N_pad_j]`. One
//! workgroup per output element of the three outputs taken in order
//! (`M * (N0 + N1 + N2)` in all, folded into x and y); its invocations
//! split K and reduce in shared memory, in f32.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup; the reduction assumes a power of two.
const WG: u32 = 64u;

struct Params {
    /// Rows of x.
    m: u32,
    /// Input features.
    k: u32,
    /// Inputs per scale group.
    group_size: u32,
    _pad0: u32,
    /// Output features of each projection.
    n: vec4<u32>,
    /// Bytes per weight row of each projection.
    k_packed: vec4<u32>,
    /// Row length of each projection's scales.
    n_pad: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> weights0: array<u32>;
@group(0) @binding(3) var<storage, read> scales0: array<Elem>;
@group(0) @binding(4) var<storage, read> weights1: array<u32>;
@group(0) @binding(5) var<storage, read> scales1: array<Elem>;
@group(0) @binding(6) var<storage, read> weights2: array<u32>;
@group(0) @binding(7) var<storage, read> scales2: array<Elem>;
@group(0) @binding(8) var<storage, read_write> out0: array<Elem>;
@group(0) @binding(9) var<storage, read_write> out1: array<Elem>;
@group(0) @binding(10) var<storage, read_write> out2: array<Elem>;

var<workgroup> partial: array<f32, WG>;

/// The word holding byte `byte_idx` of projection `j`'s weights.
fn word(j: u32, byte_idx: u32) -> u32 {
    switch j {
        case 0u: { return weights0[byte_idx / 4u]; }
        case 1u: { return weights1[byte_idx / 4u]; }
        default: { return weights2[byte_idx / 4u]; }
    }
}

/// The signed 4-bit weight of projection `j`, row `n`, input `k`.
fn weight(j: u32, n: u32, k: u32) -> f32 {
    let byte_idx = n * p.k_packed[j] + k / 2u;
    let byte = (word(j, byte_idx) >> ((byte_idx % 4u) * 8u)) & 0xffu;
    let nibble = (byte >> ((k % 2u) * 4u)) & 0xfu;
    return f32(i32(nibble) - 8);
}

/// The scale of projection `j` for row `n`, input `k`.
fn scale(j: u32, n: u32, k: u32) -> f32 {
    let s_idx = (k / p.group_size) * p.n_pad[j] + n;
    switch j {
        case 0u: { return f32(scales0[s_idx]); }
        case 1u: { return f32(scales1[s_idx]); }
        default: { return f32(scales2[s_idx]); }
    }
}

fn store(j: u32, idx: u32, v: f32) {
    switch j {
        case 0u: { out0[idx] = Elem(v); }
        case 1u: { out1[idx] = Elem(v); }
        default: { out2[idx] = Elem(v); }
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    var idx = wid.y * groups.x + wid.x;
    let s0 = p.m * p.n[0];
    let s1 = p.m * p.n[1];
    // Workgroup-uniform: either every invocation of a group returns or none.
    if idx >= s0 + s1 + p.m * p.n[2] {
        return;
    }
    var j = 0u;
    if idx >= s0 + s1 {
        j = 2u;
        idx -= s0 + s1;
    } else if idx >= s0 {
        j = 1u;
        idx -= s0;
    }
    let n = p.n[j];
    let row = idx / n;
    let col = idx % n;
    var acc = 0.0;
    for (var kk = lid; kk < p.k; kk += WG) {
        acc += f32(x[row * p.k + kk]) * weight(j, col, kk) * scale(j, col, kk);
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
        store(j, idx, partial[0]);
    }
}
