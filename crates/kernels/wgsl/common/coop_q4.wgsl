//! The 4-bit weight tile of the cooperative-matrix GEMMs
//! (`q4_gemm_coop*.wgsl`): which 16 inputs of which column each staging
//! unit takes, where they go, and their dequantization to f16. The kernel
//! that includes this declares `Elem`, the constants `BN` and `TK` (a
//! multiple of 32) and includes `coop_stage.wgsl` (`Eight`).

/// 16 nibbles of one weight column (an 8-byte half of a 16-byte word) and
/// their scale, as loaded: the next step's units are held in this form
/// across the current step's products, so nothing may consume the loads
/// before `deq8`. The scale stays `Elem` until then; converting an f16
/// scale to f32 as it was loaded made every invocation wait for its load
/// before the products, and cost the 128 x 256 kernel 13-35% of its speed
/// on an H100 (`coop_probe bisect`, run ba: 122 / 122 / 134 TFLOP/s
/// against 140 / 151 / 192 with the conversion at `deq8`).
struct Nibbles {
    word: vec2<u32>,
    scale: Elem,
}

/// Input offset in the tile of unit `i` (16 inputs): adjacent units are
/// the two halves of a column's word, then adjacent columns (adjacent in
/// the word-major layout), then the tile's next word.
fn unit_k(i: u32) -> u32 {
    return (i / (2u * BN)) * 32u + (i % 2u) * 16u;
}

/// The column of unit `i` in the tile.
fn unit_col(i: u32) -> u32 {
    return (i / 2u) % BN;
}

/// Where unit `i` goes in a staged weight tile, in halves.
fn w_at(i: u32) -> u32 {
    return unit_col(i) * (TK + 8u) + unit_k(i);
}

/// The 8 nibbles of `word` as halves `(q - 8) * s`, in input order:
/// `0x6400 | q` is the half `1024 + q`, so two nibbles become two exact
/// values with one mask and one or; `(q - 8) * s` is computed in f32 and
/// rounded once to f16. (naga 30 types a `bitcast` from u32 to
/// `vec2<f16>` as `vec2<f32>`, so the halves go through f32.)
fn deq8(word: u32, s: Elem) -> Eight {
    let s2 = vec2<f32>(f32(s));
    let mask = 0x000F000Fu;
    let one = 0x64006400u;
    // Inputs (0, 4), (1, 5), (2, 6), (3, 7).
    let a = (unpack2x16float((word & mask) | one) - 1032.0) * s2;
    let b = (unpack2x16float(((word >> 4u) & mask) | one) - 1032.0) * s2;
    let c = (unpack2x16float(((word >> 8u) & mask) | one) - 1032.0) * s2;
    let d = (unpack2x16float(((word >> 12u) & mask) | one) - 1032.0) * s2;
    return Eight(vec4<f16>(vec4<f32>(a.x, b.x, c.x, d.x)), vec4<f16>(vec4<f32>(a.y, b.y, c.y, d.y)));
}
