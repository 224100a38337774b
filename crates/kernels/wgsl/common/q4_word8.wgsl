//! Where the 4-bit GEMMs find a weight's 8-byte word (16 nibbles): for
//! column `col` (rows of `words` 8-byte words) at input `k` (a multiple of
//! 16), in a `array<vec2<u32>>` that holds the weight row-major or
//! word-major (16-byte word `w` of row `n` at 16-byte word `w * N + n`; see
//! `etwgpu_graph::layout`). The kernel that includes this declares `p.n`.

fn w8(col: u32, words: u32, k: u32, word_major: bool) -> u32 {
    if word_major {
        return ((k / 32u) * p.n + col) * 2u + (k / 16u) % 2u;
    }
    return col * words + k / 16u;
}
