//! The column work of the 4-bit GEMVs whose x a prologue builds in
//! workgroup memory (`q4_gemv_attn.wgsl` merges the attention's split
//! partials into it, `q4_gemv_sdpa.wgsl` computes the attention there),
//! split around the prologue: [`column_start`] places the invocation and
//! loads its first two words and scales (they do not depend on x, so they
//! are in flight through the prologue), [`column_finish`] does the rest of
//! `q4_gemv.wgsl`'s work:
//! `out[m, n] = sum_k x[m, k] * (nibble(n, k) - 8) * scales[k / group, n] + bias[n]`.
//! The including kernel declares `WG`, `Elem`, a `p` with `q4_gemv.wgsl`'s
//! GEMV fields, the bindings `weights`, `scales`, `bias` and `out`, `x`
//! and `partial: array<vec4<f32>, WG>`, and includes `q4_dot.wgsl` first.

/// An invocation's place in the GEMV and its first two words.
struct Column {
    /// The column it stores (past N: it computes the last one and stores
    /// nothing, so control flow stays uniform).
    target_col: u32,
    col: u32,
    /// Its K slice.
    slice: u32,
    /// Word `w` of the column at `base + w * stride`; `words` of them.
    base: u32,
    stride: u32,
    words: u32,
    /// Words `slice` and `slice + slices` (at clamped indices) and their
    /// scales.
    qa: vec4<u32>,
    qb: vec4<u32>,
    sa: f32,
    sb: f32,
}

fn column_start(lid: u32, wid: vec3<u32>, groups: vec3<u32>) -> Column {
    var c: Column;
    let cols = p.cols;
    c.slice = lid / cols;
    let slices = WG / cols;
    c.target_col = (wid.y * groups.x + wid.x) * cols + lid % cols;
    c.col = min(c.target_col, p.n - 1u);
    c.words = p.k / 32u;
    let at = column_words(c.col, c.words, p.n, (p.w_layout & 1u) != 0u);
    c.base = at.x;
    c.stride = at.y;
    let wa = min(c.slice, c.words - 1u);
    let wb = min(c.slice + slices, c.words - 1u);
    c.qa = weights[c.base + wa * c.stride];
    c.qb = weights[c.base + wb * c.stride];
    c.sa = f32(scales[(wa * 32u / p.group_size) * p.n_pad + c.col]);
    c.sb = f32(scales[(wb * 32u / p.group_size) * p.n_pad + c.col]);
    return c;
}

/// The column's sums over x's `m` rows (x ready), two words loaded before
/// either is used; the slices meet in a workgroup-memory tree; slice 0
/// stores.
fn column_finish(lid: u32, c: Column, m: u32) {
    let x_row = p.k / 4u;
    let slice = c.slice;
    // From the uniforms, not from `c` (whose fields depend on the
    // invocation): the tree's barriers must stand in uniform control flow
    // as WGSL compilers prove it (Chrome's rejects a loop bound read from
    // a struct that holds non-uniform fields).
    let slices = WG / p.cols;
    let base = c.base;
    let stride = c.stride;
    let words = c.words;
    let col = c.col;
    var acc = vec4<f32>();
    if slice < words {
        acc = rows4(acc, c.qa, slice * 8u, x_row, m, c.sa);
    }
    if slice + slices < words {
        acc = rows4(acc, c.qb, (slice + slices) * 8u, x_row, m, c.sb);
    }
    var w = slice + 2u * slices;
    for (; w + slices < words; w += 2u * slices) {
        let q0 = weights[base + w * stride];
        let q1 = weights[base + (w + slices) * stride];
        let s0 = f32(scales[(w * 32u / p.group_size) * p.n_pad + col]);
        let s1 = f32(scales[((w + slices) * 32u / p.group_size) * p.n_pad + col]);
        acc = rows4(acc, q0, w * 8u, x_row, m, s0);
        acc = rows4(acc, q1, (w + slices) * 8u, x_row, m, s1);
    }
    if w < words {
        let s = f32(scales[(w * 32u / p.group_size) * p.n_pad + col]);
        acc = rows4(acc, weights[base + w * stride], w * 8u, x_row, m, s);
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var st = slices / 2u; st > 0u; st /= 2u) {
        if slice < st {
            partial[lid] += partial[lid + st * p.cols];
        }
        workgroupBarrier();
    }
    if slice == 0u && c.target_col < p.n {
        let v = partial[lid];
        var bv = 0.0;
        if p.has_bias != 0u {
            bv = f32(bias[col]);
        }
        for (var r = 0u; r < m; r++) {
            out[r * p.n + col] = Elem(v[r] + bv);
        }
    }
}
