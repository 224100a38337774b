//! Re-quantization of f32 latent weights `[N, K]` into `linear_q4gsw`'s
//! frozen-scale 4-bit codes (`et_vk.q4gsw_requant`):
//! `code = clamp(round(latent / s), -8, 7) + 8` with `s = scales[k / group,
//! n]`, code 8 (zero) where `s` is 0, `round` ties to even as PyTorch's
//! `torch.round`. Output u8 `[N, ceil(K/2)]`, k = 2j in the low nibble of
//! byte j, a missing odd column's nibble 0. One invocation per 4-byte word
//! of the output (bytes past the tensor are written 0, within the buffer's
//! 4-byte padding). f32 only.
// variants: f32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
const WG: u32 = 256u;

struct Params {
    n: u32,
    k: u32,
    /// Bytes per output row: ceil(K / 2).
    k_packed: u32,
    /// Row length of the scales.
    n_pad: u32,
    group_size: u32,
    /// Output bytes: N * k_packed.
    bytes: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> latent: array<Elem>;
@group(0) @binding(2) var<storage, read> scales: array<Elem>;
@group(0) @binding(3) var<storage, read_write> packed: array<u32>;

/// The 4-bit code (0..15) of row `n`, input `k`.
fn code(n: u32, k: u32) -> u32 {
    let s = scales[(k / p.group_size) * p.n_pad + n];
    var q = 0.0;
    if s != 0.0 {
        q = round(latent[n * p.k + k] / s);
    }
    return u32(i32(clamp(q, -8.0, 7.0)) + 8);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let w = gid.x + gid.y * nwg.x * WG;
    if w * 4u >= p.bytes {
        return;
    }
    var word = 0u;
    for (var b = 0u; b < 4u; b++) {
        let byte_idx = w * 4u + b;
        if byte_idx >= p.bytes {
            break;
        }
        let n = byte_idx / p.k_packed;
        let j = byte_idx % p.k_packed;
        var byte = code(n, 2u * j);
        if 2u * j + 1u < p.k {
            byte |= code(n, 2u * j + 1u) << 4u;
        }
        word |= byte << (b * 8u);
    }
    packed[w] = word;
}
