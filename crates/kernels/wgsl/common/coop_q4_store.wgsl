//! `store_w` of the 4-bit cooperative-matrix GEMMs whose weight tile
//! holds one weight at a time (those of one weight, after
//! `coop_q4_one.wgsl`, and the fused QKV, whose tile holds one projection):
//! dequantizes a staging unit's 16 nibbles (`Nibbles`, `deq8` of
//! `coop_q4.wgsl`) into the staged tile `ws`. The SwiGLU pair stages two
//! tiles and has its own.

/// Stores the 16 weights of `v` at half `o` (a multiple of 8) of the
/// weight tiles.
fn store_w(o: u32, v: Nibbles) {
    let lo = deq8(v.word.x, v.scale);
    let hi = deq8(v.word.y, v.scale);
    ws[o / 4u] = lo.lo;
    ws[o / 4u + 1u] = lo.hi;
    ws[o / 4u + 2u] = hi.lo;
    ws[o / 4u + 3u] = hi.hi;
}
