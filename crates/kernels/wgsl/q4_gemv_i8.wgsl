//! Decode route of `et_vk.linear_q4gsw` with int8 activations (opt-in:
//! `DeviceCaps::int8_activations`), one row of x:
//! `out[n] = sum_k x~[k] * (nibble(n, k) - 8) * scales[k / group, n] + bias[n]`
//! with `x~` the row rounded to int8 per 32-input block (`q8_x.wgsl`).
//!
//! `q4_gemv.wgsl`'s grid, layout and tree (a workgroup owns `cols`
//! adjacent output columns, invocation `i` column `i % cols` over the K
//! slice `i / cols`, word-major weights read in 512-byte runs); each
//! workgroup rounds x into workgroup memory first, while its first two
//! words and scales are in flight, and each 16-byte word's dot is eight
//! `dot4I8Packed` instead of 32 nibble-to-float conversions and
//! multiply-adds (the float kernel is issue-bound on those at the head's
//! size: run j). What it costs in accuracy is x's rounding to 8 bits a
//! block, as llama.cpp's `q8_1` activations; accumulation is exact in
//! int32 within a word and f32 across words.
//!
//! Bounds: `partial` by `lid` and `lid + stride * cols` with `slice <
//! stride <= slices / 2`, below `WG` as `cols` divides `WG` (8, 16 or 32:
//! `q4_gemv_cols` in `ops/quant.rs`); `xq` and `omax` by octets below `K /
//! 8 <= XQ`, `xscale` and `xsum` by blocks below `K / 32 <= XQ / 4`
//! (`Q4_GEMV_I8_MAX_K` in `ops/quant.rs` routes only `K <= 8 * XQ` here).
// variants: f32 f16
// bounds: host-checked

alias Elem = f32;

/// Invocations per workgroup.
const WG: u32 = 256u;
/// Octets of x held rounded: K at most `8 * XQ` = 8192.
const XQ: u32 = 1024u;

// include: q4_gemv_decl.wgsl

/// Per invocation, its slice's sum.
var<workgroup> partial: array<f32, WG>;

/// vec4 `i` of the row (`q8_x.wgsl`).
fn x_at(i: u32) -> vec4<f32> {
    return vec4<f32>(x[i]);
}

// include: q4_dot.wgsl
// include: q8_x.wgsl

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let cols = p.cols;
    let c = lid % cols;
    let slice = lid / cols;
    let slices = WG / cols;
    let target_col = (wid.y * groups.x + wid.x) * cols + c;
    // Columns past N compute the last column (control flow stays uniform)
    // and store nothing.
    let col = min(target_col, p.n - 1u);
    let words = p.k / 32u;
    let at = column_words(col, words, p.n, (p.w_layout & 1u) != 0u);
    let base = at.x;
    let stride = at.y;
    // The first two words and their scales (clamped), in flight through
    // the rounding of x.
    let wa = min(slice, words - 1u);
    let wb = min(slice + slices, words - 1u);
    let qa = weights[base + wa * stride];
    let qb = weights[base + wb * stride];
    let sa = f32(scales[(wa * 32u / p.group_size) * p.n_pad + col]);
    let sb = f32(scales[(wb * 32u / p.group_size) * p.n_pad + col]);
    round_x(lid, p.k);
    var acc = 0.0;
    if slice < words {
        acc += dot_i8(qa, slice) * sa;
    }
    if slice + slices < words {
        acc += dot_i8(qb, slice + slices) * sb;
    }
    var w = slice + 2u * slices;
    for (; w + slices < words; w += 2u * slices) {
        let q0 = weights[base + w * stride];
        let q1 = weights[base + (w + slices) * stride];
        let s0 = f32(scales[(w * 32u / p.group_size) * p.n_pad + col]);
        let s1 = f32(scales[((w + slices) * 32u / p.group_size) * p.n_pad + col]);
        acc += dot_i8(q0, w) * s0 + dot_i8(q1, w + slices) * s1;
    }
    if w < words {
        acc += dot_i8(weights[base + w * stride], w) * f32(scales[(w * 32u / p.group_size) * p.n_pad + col]);
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var st = slices / 2u; st > 0u; st /= 2u) {
        if slice < st {
            partial[lid] += partial[lid + st * cols];
        }
        workgroupBarrier();
    }
    if slice == 0u && target_col < p.n {
        var b = 0.0;
        if p.has_bias != 0u {
            b = f32(bias[col]);
        }
        out[col] = Elem(partial[lid] + b);
    }
}
