//! Int8 helpers of the static-int8 kernels (`q8_*.wgsl`): int8 tensors live
//! four to a `u32` word, element `i` in byte `i % 4` of word `i / 4`
//! (little-endian, the bytes of the host tensor as they are).

/// Byte `j` (0..4) of `word` as a signed int8 value.
fn i8_at(word: u32, j: u32) -> i32 {
    return bitcast<i32>(word << (24u - 8u * j)) >> 24u;
}

/// `clamp(round(y * inv_scale) + zero_point, -128, 127)`, as
/// `quantized_decomposed.quantize_per_tensor` computes it (`round` is
/// half-to-even in WGSL, as `torch.round`), in the low byte.
fn requant(y: f32, inv_scale: f32, zero_point: i32, qmin: i32, qmax: i32) -> u32 {
    let q = clamp(i32(round(y * inv_scale)) + zero_point, qmin, qmax);
    return u32(q) & 0xffu;
}
