//! The weight tile's loads of the 4-bit cooperative-matrix GEMMs of one
//! weight (`q4_gemm_coop.wgsl`, `q4_gemm_coop_large.wgsl` and their
//! split-K forms; the SwiGLU pair and the fused QKV have their own):
//! `load_w` reads a staging unit's 16 nibbles and scale as loaded, for
//! `store_w` (`coop_q4_store.wgsl`) to dequantize into the staged tile. The kernel that
//! includes this declares `p` (with `n`, `k`, `n_pad`, `group_size`,
//! `w_layout`), `weights`, `scales` and `ws`, and includes
//! `coop_stage.wgsl`, `q4_word8.wgsl` and `coop_q4.wgsl` before it.

/// 16 nibbles of one weight column (unit `i`, see `unit_k`) and their
/// scale; zeros past N.
fn load_w(n0: u32, k0: u32, i: u32) -> Nibbles {
    let col = n0 + unit_col(i);
    let k = k0 + unit_k(i);
    if col >= p.n {
        return Nibbles(vec2<u32>(0u), Elem(0.0));
    }
    let word = weights[w8(col, p.k / 16u, k, (p.w_layout & 1u) != 0u)];
    return Nibbles(word, scales[(k / p.group_size) * p.n_pad + col]);
}
