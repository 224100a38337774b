//! Edits to a shipped cooperative-matrix kernel's source for
//! `coop_probe bisect`: each undoes one difference between the shipped
//! 4-bit large kernel and the template's form of the same tiling.

/// Edits to a shipped 4-bit kernel's source, each one of its differences
/// from the template's form of the same tiling (`bisect` times them): run
/// ba found the shipped 128 x 256 kernel 13-35% slower than the template's
/// `j` with the same tiling, whose sources differed only in these and in
/// the scale's conversion at its load (bit 1, the whole gap; since fixed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Patch(pub u8);

impl Patch {
    pub const NONE: Patch = Patch(0);
    /// The word-major weight index written out (no layout branch, the
    /// word's half from the unit, not from K).
    pub const WORD_INDEX: u8 = 2;
    /// Each half word dequantized and stored before the next.
    pub const STORE_SPLIT: u8 = 4;
    /// No bias in the epilogue (nor its binding).
    pub const NO_BIAS: u8 = 8;
    /// x converted to f16 as it is loaded, not as it is staged (the same
    /// operations for the f16 variant).
    pub const LOAD_X: u8 = 16;
    /// For the f32 variant: the scales read as f16 (held as loaded, as the
    /// f16 variant holds them).
    pub const F16_SCALES: u8 = 32;
    /// For the f32 variant: the output written as f16.
    pub const F16_OUT: u8 = 64;
    /// For the f32 variant: x read as f16 (as the `f32_xf16` variant of
    /// branch x-f16 reads it).
    pub const F16_X: u8 = 128;
    /// The f32 variant with each operand the f16 variant has as f16, one
    /// at a time, then all three (`bisect`: which of them makes the f32
    /// variant 20% slower, run bb).
    pub const OPERANDS: [Patch; 4] = [Patch(32), Patch(64), Patch(128), Patch(224)];
    /// Each bit alone, then all of them. (Bit 1, the scale held as `Elem`
    /// until the dequantization, recovered the whole gap in run ba and is
    /// now the shipped form: `common/coop_q4.wgsl`.)
    pub const BISECT: [Patch; 5] = [Patch(2), Patch(4), Patch(8), Patch(16), Patch(30)];

    pub fn suffix(&self) -> String {
        if self.0 == 0 { String::new() } else { format!(" patch {}", self.0) }
    }

    /// `source` with the edits; panics where an edit's text is missing.
    pub fn apply(&self, source: &str) -> String {
        let mut s = source.to_string();
        let mut edit = |from: &str, to: &str| {
            assert!(s.contains(from), "patch {}: {from:?} is not in the shipped source", self.0);
            s = s.replace(from, to);
        };
        if self.0 & Self::WORD_INDEX != 0 {
            edit(
                "let word = weights[w8(col, p.k / 16u, k, (p.w_layout & 1u) != 0u)];",
                "let word = weights[((k / 32u) * p.n + col) * 2u + i % 2u];",
            );
        }
        if self.0 & Self::STORE_SPLIT != 0 {
            edit(
                "    let lo = deq8(v.word.x, v.scale);\n    let hi = deq8(v.word.y, v.scale);\n    ws[o / 4u] = lo.lo;\n    ws[o / 4u + 1u] = lo.hi;\n",
                "    let lo = deq8(v.word.x, v.scale);\n    ws[o / 4u] = lo.lo;\n    ws[o / 4u + 1u] = lo.hi;\n    let hi = deq8(v.word.y, v.scale);\n",
            );
        }
        if self.0 & Self::LOAD_X != 0 {
            edit("= load_raw_x(m0, ", "= load_x(m0, ");
            edit("store_raw_x(0u * XS_HALVES", "store_x(0u * XS_HALVES");
        }
        if self.0 & Self::F16_SCALES != 0 {
            edit("var<storage, read> scales: array<Elem>;", "var<storage, read> scales: array<f16>;");
            edit("    scale: Elem,", "    scale: f16,");
            edit("fn deq8(word: u32, s: Elem) -> Eight {", "fn deq8(word: u32, s: f16) -> Eight {");
            edit("Nibbles(vec2<u32>(0u), Elem(0.0))", "Nibbles(vec2<u32>(0u), 0.0h)");
        }
        if self.0 & Self::F16_OUT != 0 {
            edit("var<storage, read_write> out: array<Elem>;", "var<storage, read_write> out: array<f16>;");
            edit("out[row * p.n + col] = Elem(v);", "out[row * p.n + col] = f16(v);");
        }
        if self.0 & Self::F16_X != 0 {
            edit("var<storage, read> x: array<vec4<Elem>>;", "var<storage, read> x: array<vec4<f16>>;");
            edit("    lo: vec4<Elem>,\n    hi: vec4<Elem>,", "    lo: vec4<f16>,\n    hi: vec4<f16>,");
            edit("return RawEight(vec4<Elem>(), vec4<Elem>());", "return RawEight(vec4<f16>(), vec4<f16>());");
        }
        if self.0 & Self::NO_BIAS != 0 {
            edit("            if p.has_bias != 0u {\n                v += f32(bias[col]);\n            }\n", "");
        }
        s
    }
}
