//! Edits to a shipped cooperative-matrix kernel's source for
//! `coop_probe bisect`: each undoes one difference between the shipped
//! 4-bit large kernel and the template's form of the same tiling.

/// Edits to a shipped 4-bit kernel's source, each one of its differences
/// from the template's form of the same tiling (`bisect` times them): run
/// ba found the shipped 128 x 256 kernel 20-40% slower than the template's
/// `j` with the same tiling, whose sources differ only in these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Patch(pub u8);

impl Patch {
    pub const NONE: Patch = Patch(0);
    /// The scale held as f16 between its load and the dequantization.
    pub const F16_SCALE: u8 = 1;
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
    /// Each bit alone, then all of them.
    pub const BISECT: [Patch; 6] = [Patch(1), Patch(2), Patch(4), Patch(8), Patch(16), Patch(31)];

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
        if self.0 & Self::F16_SCALE != 0 {
            edit("    scale: f32,", "    scale: f16,");
            edit(
                "fn deq8(word: u32, s: f32) -> Eight {\n    let s2 = vec2<f32>(s);",
                "fn deq8(word: u32, s: f16) -> Eight {\n    let s2 = vec2<f32>(f32(s));",
            );
            edit("return Nibbles(vec2<u32>(0u), 0.0);", "return Nibbles(vec2<u32>(0u), 0.0h);");
            edit("return Nibbles(word, f32(scales[", "return Nibbles(word, f16(scales[");
        }
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
        if self.0 & Self::NO_BIAS != 0 {
            edit("            if p.has_bias != 0u {\n                v += f32(bias[col]);\n            }\n", "");
        }
        s
    }
}
