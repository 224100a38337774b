//! Dequantize-and-dot helpers of the 4-bit GEMVs (`q4_gemv.wgsl`,
//! `q4_gemv_swiglu.wgsl`, `q4_gemv_qkv.wgsl` and their `_norm` forms); the
//! kernel that includes this declares `x`, an array of vec4s: the input in
//! storage (`array<vec4<Elem>>`) or the normed input in workgroup memory
//! (`array<vec4<f32>, _>`).

/// Where the 16-byte words of column `col` (of `n`, `words` per row) sit:
/// word `w` at `base + w * stride`, `(base, stride)` returned; row-major
/// `(col * words, 1)`, word-major (see `etwgpu_graph::layout`) `(col, n)`.
fn column_words(col: u32, words: u32, n: u32, word_major: bool) -> vec2<u32> {
    if word_major {
        return vec2<u32>(col, n);
    }
    return vec2<u32>(col * words, 1u);
}

/// Nibbles `4i .. 4i + 4` of `word`, as signed weights. Without an
/// integer-to-float conversion (a slow instruction on GPUs, 32 of them per
/// 16-byte word): the nibble `q` goes into the mantissa of 2^23, which
/// makes the float `2^23 + q` exactly, and `2^23 + 8` is subtracted.
fn low4(word: u32) -> vec4<f32> {
    let q = vec4<u32>(word, word >> 4u, word >> 8u, word >> 12u) & vec4<u32>(15u);
    return bitcast<vec4<f32>>(q | vec4<u32>(0x4B000000u)) - 8388616.0;
}

/// The 16-byte word `q` (32 nibbles, inputs `8b .. 8b + 32` of a row of x)
/// dotted with x from vec4 `b`.
fn dot32(q: vec4<u32>, b: u32) -> f32 {
    var d = dot(vec4<f32>(x[b]), low4(q.x)) + dot(vec4<f32>(x[b + 1u]), low4(q.x >> 16u));
    d += dot(vec4<f32>(x[b + 2u]), low4(q.y)) + dot(vec4<f32>(x[b + 3u]), low4(q.y >> 16u));
    d += dot(vec4<f32>(x[b + 4u]), low4(q.z)) + dot(vec4<f32>(x[b + 5u]), low4(q.z >> 16u));
    d += dot(vec4<f32>(x[b + 6u]), low4(q.w)) + dot(vec4<f32>(x[b + 7u]), low4(q.w >> 16u));
    return d;
}

/// One word's contribution to the (up to four) rows of x, each `x_row`
/// vec4s long: `acc[r] += dot32(q, r * x_row + b) * s` for `r < m`.
fn rows4(acc: vec4<f32>, q: vec4<u32>, b: u32, x_row: u32, m: u32, s: f32) -> vec4<f32> {
    var a = acc;
    a.x += dot32(q, b) * s;
    if m > 1u {
        a.y += dot32(q, x_row + b) * s;
    }
    if m > 2u {
        a.z += dot32(q, 2u * x_row + b) * s;
    }
    if m > 3u {
        a.w += dot32(q, 3u * x_row + b) * s;
    }
    return a;
}
