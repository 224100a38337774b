//! The input gradient through a frozen 4-bit linear
//! (`et_vk.linear_q4gsw_backward`): `d_x[m, k] = sum_n d_out[m, n] *
//! ((nibble(n, k) - 8) * scales[k / group, n])`, the weight dequantized
//! first as upstream's reference does. Weights are `linear_q4gsw`'s u8
//! `[N, K/2]` (k = 2j in the low nibble of byte j), row-major or, where
//! the load-time layout pass chose it, word-major (16-byte word `w` of row
//! `n` at word `w * N + n`). One invocation per element of `d_x`, summing
//! over `n` in order, in f32. f32 only.
// variants: f32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
const WG: u32 = 256u;

struct Params {
    /// Rows of d_out.
    m: u32,
    /// Output features of the forward linear (d_out's last dim).
    n: u32,
    /// Input features (d_x's last dim): twice the row bytes.
    k: u32,
    /// Bytes per weight row.
    k_packed: u32,
    /// Row length of the scales.
    n_pad: u32,
    group_size: u32,
    /// 1: the weight is word-major.
    word_major: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> d_out: array<Elem>;
@group(0) @binding(2) var<storage, read> weights: array<u32>;
@group(0) @binding(3) var<storage, read> scales: array<Elem>;
@group(0) @binding(4) var<storage, read_write> d_x: array<Elem>;

/// The signed 4-bit weight of row `n`, input `k`.
fn weight(n: u32, k: u32) -> f32 {
    let j = k / 2u;
    var byte_idx = n * p.k_packed + j;
    if p.word_major != 0u {
        byte_idx = ((j / 16u) * p.n + n) * 16u + j % 16u;
    }
    let byte = (weights[byte_idx / 4u] >> ((byte_idx % 4u) * 8u)) & 0xffu;
    let nibble = (byte >> ((k % 2u) * 4u)) & 0xfu;
    return f32(i32(nibble) - 8);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.m * p.k {
        return;
    }
    let row = i / p.k;
    let k = i % p.k;
    let g = k / p.group_size;
    var acc = 0.0;
    for (var n = 0u; n < p.n; n++) {
        let w = weight(n, k) * scales[g * p.n_pad + n];
        acc += d_out[row * p.n + n] * w;
    }
    d_x[i] = acc;
}
