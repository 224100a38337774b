//! `rotate` of the prompt rotations (`rope.wgsl`, `rope_kv_cache.wgsl`):
//! one `(x[2i], x[2i+1])` pair rotated by the tables `cos_t`, `sin_t`
//! `[R, D/2]` at row `p.row0` plus the pair's token in the chunk
//! (`p.half` = D/2 pairs a head, `p.seq` tokens).

/// Pair `pair` of a tensor of `heads` heads: its table index and its
/// (real, imaginary) parts rotated from `(re, im)`.
fn rotate(pair: u32, heads: u32, re: f32, im: f32) -> vec2<f32> {
    let i = pair % p.half;
    let s = (pair / p.half / heads) % p.seq + p.row0;
    let c = f32(cos_t[s * p.half + i]);
    let sn = f32(sin_t[s * p.half + i]);
    return vec2<f32>(re * c - im * sn, re * sn + im * c);
}
