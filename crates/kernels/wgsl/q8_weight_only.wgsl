//! Weight-only quantized linears of VulkanQuantizer (`weight_bits` 8 or
//! 4, symmetric per output channel): `out[m, n] = s[n] * sum_k x[m, k] *
//! w[n, k]`, float activations, accumulated in f32.
//! `aten._weight_int8pack_mm`: `w` int8 `[N, K]`, four to a word.
//! `et_vk.linear_qcs4w`: `w` u8 `[N, ceil(K / 2)]`, two 4-bit values per
//! byte stored `+ 8`, the even `k` in the *high* nibble.
//! One invocation per output element.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 64).
override WG: u32 = 64u;

struct Params {
    m: u32,
    n: u32,
    k: u32,
    /// Bytes per weight row.
    row_bytes: u32,
    /// 8 or 4.
    bits: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> scales: array<Elem>;
@group(0) @binding(4) var<storage, read_write> out: array<Elem>;

// include: q8_int8.wgsl

/// Byte `i` of the weights, unsigned.
fn byte_at(i: u32) -> u32 {
    return (w[i / 4u] >> (8u * (i % 4u))) & 0xffu;
}

/// Weight `(col, kk)` as a signed value.
fn weight(col: u32, kk: u32) -> f32 {
    if p.bits == 8u {
        let i = col * p.row_bytes + kk;
        return f32(i8_at(w[i / 4u], i % 4u));
    }
    let b = byte_at(col * p.row_bytes + kk / 2u);
    let nibble = select(b & 0xfu, b >> 4u, kk % 2u == 0u);
    return f32(i32(nibble) - 8);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = gid.x + gid.y * nwg.x * WG;
    if o >= p.m * p.n {
        return;
    }
    let row = o / p.n;
    let col = o % p.n;
    var acc = 0.0;
    for (var kk = 0u; kk < p.k; kk++) {
        acc += f32(x[row * p.k + kk]) * weight(col, kk);
    }
    out[o] = Elem(acc * f32(scales[col]));
}
