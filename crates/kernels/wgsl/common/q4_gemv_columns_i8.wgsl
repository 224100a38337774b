//! [`column_finish_i8`]: `q4_gemv_columns.wgsl`'s [`column_finish`] for one
//! row of x rounded to int8 (`q8_x.wgsl`), each 16-byte word's dot by
//! `dot4I8Packed` (the `_i8` forms of the GEMVs whose prologue builds x in
//! workgroup memory: `q4_gemv_attn_i8.wgsl`). The including kernel
//! includes `q4_gemv_columns.wgsl` and `q8_x.wgsl` first and has rounded x
//! ([`round_x`]) before calling it.

/// The column's sum over the rounded row (the first two words from
/// [`column_start`], then two at a time); the slices meet in a
/// workgroup-memory tree; slice 0 stores.
fn column_finish_i8(lid: u32, c: Column) {
    // From the uniforms (see `column_finish`): the tree's barriers stand
    // in uniform control flow.
    let slices = WG / p.cols;
    let slice = c.slice;
    var acc = 0.0;
    if slice < c.words {
        acc += dot_i8(c.qa, slice) * c.sa;
    }
    if slice + slices < c.words {
        acc += dot_i8(c.qb, slice + slices) * c.sb;
    }
    var w = slice + 2u * slices;
    for (; w + slices < c.words; w += 2u * slices) {
        let q0 = weights[c.base + w * c.stride];
        let q1 = weights[c.base + (w + slices) * c.stride];
        let s0 = f32(scales[(w * 32u / p.group_size) * p.n_pad + c.col]);
        let s1 = f32(scales[((w + slices) * 32u / p.group_size) * p.n_pad + c.col]);
        acc += dot_i8(q0, w) * s0 + dot_i8(q1, w + slices) * s1;
    }
    if w < c.words {
        acc += dot_i8(weights[c.base + w * c.stride], w) * f32(scales[(w * 32u / p.group_size) * p.n_pad + c.col]);
    }
    partial[lid] = vec4<f32>(acc, 0.0, 0.0, 0.0);
    workgroupBarrier();
    for (var st = slices / 2u; st > 0u; st /= 2u) {
        if slice < st {
            partial[lid] += partial[lid + st * p.cols];
        }
        workgroupBarrier();
    }
    if slice == 0u && c.target_col < p.n {
        var bv = 0.0;
        if p.has_bias != 0u {
            bv = f32(bias[c.col]);
        }
        out[c.col] = Elem(partial[lid].x + bv);
    }
}
