//! Prefill route of `et_vk.linear_q4gsw` on cooperative matrices (tensor
//! cores): `out[m, n] = sum_k x[m, k] * (nibble(n, k) - 8) * scales[k / group, n] + bias[n]`
//! with f16 operands and f32 accumulation.
//!
//! A workgroup of 256 invocations (8 subgroups of 32; the host routes here
//! only on devices whose subgroups have 32 invocations) computes a
//! `BM x BN` block of the output. K advances `TK` inputs at a time: the x
//! tile (rounded to f16 as it is staged) and the dequantized weight tile
//! (f16) go to workgroup memory, x row-major (`xs[row * LD + k]`) and the
//! weights column-major (`ws[col * LD + k]`, the packed layout's own
//! order). Each subgroup owns a 32 x 32 block: 2 x 2 fragments of 16 x 16,
//! each a `coop_mat16x16<f32, C>` accumulator. At the end each fragment
//! passes through the subgroup's 16 x 16 slot of `cs`, where its 32
//! invocations add the bias, bounds-check and write it out as `Elem`.
//! The host routes here only when `K % TK == 0` and `group % TK == 0`, so
//! one scale covers a column's slice of a tile.
// variants: f32 f16

enable f16;
enable wgpu_cooperative_matrix;

alias Elem = f32;

/// Output rows per workgroup.
const BM: u32 = 64u;
/// Output columns per workgroup.
const BN: u32 = 128u;
/// Inputs per step along K.
const TK: u32 = 32u;
/// Row stride of the staged tiles, in halves: TK plus 8 of padding (rows
/// stay 16-byte aligned and start on different banks).
const LD: u32 = 40u;

struct Params {
    /// Rows of x.
    m: u32,
    /// Output features.
    n: u32,
    /// Input features (a multiple of TK).
    k: u32,
    /// Row length of the scales (and bias): N padded.
    n_pad: u32,
    /// Inputs per scale group (a multiple of TK).
    group_size: u32,
    has_bias: u32,
    /// Workgroups along N.
    tiles_n: u32,
    /// Bit 0: the weights are word-major (16-byte word `w` of row `n` at
    /// word `w * N + n`; see `etwgpu_graph::layout`), else row-major.
    w_layout: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> weights: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> scales: array<Elem>;
@group(0) @binding(4) var<storage, read> bias: array<Elem>;
@group(0) @binding(5) var<storage, read_write> out: array<Elem>;

/// x tile, row-major: `BM` rows of `LD` halves.
var<workgroup> xs: array<f16, 2560>;
/// Weight tile, column-major: `BN` columns of `LD` halves.
var<workgroup> ws: array<f16, 5120>;
/// One 16 x 16 f32 slot per subgroup, row-major: fragments on their way
/// out (and the zeros the accumulators start from).
var<workgroup> cs: array<f32, 2048>;

// include: q4_word8.wgsl

/// Writes the fragment the subgroup `sg` left in its `cs` slot to rows
/// `row0 ..` and columns `col0 ..` of the output: invocation `lane` writes
/// 8 consecutive columns of one row.
fn emit(sg: u32, lane: u32, row0: u32, col0: u32) {
    let row = row0 + lane / 2u;
    if row >= p.m {
        return;
    }
    for (var e = 0u; e < 8u; e++) {
        let c = (lane % 2u) * 8u + e;
        let col = col0 + c;
        if col < p.n {
            var v = cs[sg * 256u + (lane / 2u) * 16u + c];
            if p.has_bias != 0u {
                v += f32(bias[col]);
            }
            out[row * p.n + col] = Elem(v);
        }
    }
}

@compute @workgroup_size(256)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let tile = wid.y * groups.x + wid.x;
    let m0 = (tile / p.tiles_n) * BM;
    let n0 = (tile % p.tiles_n) * BN;
    // This invocation's subgroup, and that subgroup's 32 x 32 block.
    let sg = lid / 32u;
    let lane = lid % 32u;
    let wm = (sg / 4u) * 32u;
    let wn = (sg % 4u) * 32u;
    // Staging: x row `lid / 4`, inputs `(lid % 4) * 8 ..` (two vec4); weight
    // column `lid / 2`, inputs `(lid % 2) * 16 ..` (one vec2 of words).
    let xr = lid / 4u;
    let xk = (lid % 4u) * 8u;
    let wc = lid / 2u;
    let wk = (lid % 2u) * 16u;
    let words = p.k / 16u;

    for (var i = 0u; i < 8u; i++) {
        cs[lid * 8u + i] = 0.0;
    }
    workgroupBarrier();
    var c00 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c01 = c00;
    var c10 = c00;
    var c11 = c00;

    for (var k0 = 0u; k0 < p.k; k0 += TK) {
        var x0 = vec4<f32>(0.0);
        var x1 = vec4<f32>(0.0);
        if m0 + xr < p.m {
            let at = ((m0 + xr) * p.k + k0 + xk) / 4u;
            x0 = vec4<f32>(x[at]);
            x1 = vec4<f32>(x[at + 1u]);
        }
        let xo = xr * LD + xk;
        for (var e = 0u; e < 4u; e++) {
            xs[xo + e] = f16(x0[e]);
            xs[xo + 4u + e] = f16(x1[e]);
        }
        let col = n0 + wc;
        let wo = wc * LD + wk;
        if col < p.n {
            // 16 nibbles: inputs k0 + wk .. k0 + wk + 16, low nibble first.
            let word = weights[w8(col, words, k0 + wk, (p.w_layout & 1u) != 0u)];
            let s = f32(scales[(k0 / p.group_size) * p.n_pad + col]);
            for (var e = 0u; e < 8u; e++) {
                ws[wo + e] = f16((f32((word.x >> (4u * e)) & 15u) - 8.0) * s);
                ws[wo + 8u + e] = f16((f32((word.y >> (4u * e)) & 15u) - 8.0) * s);
            }
        } else {
            for (var e = 0u; e < 16u; e++) {
                ws[wo + e] = f16(0.0);
            }
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TK; kk += 16u) {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[wm * LD + kk], LD);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[(wm + 16u) * LD + kk], LD);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&ws[wn * LD + kk], LD);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&ws[(wn + 16u) * LD + kk], LD);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
        }
        workgroupBarrier();
    }

    let slot = sg * 256u;
    coopStoreT(c00, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm, n0 + wn);
    workgroupBarrier();
    coopStoreT(c01, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm, n0 + wn + 16u);
    workgroupBarrier();
    coopStoreT(c10, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 16u, n0 + wn);
    workgroupBarrier();
    coopStoreT(c11, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 16u, n0 + wn + 16u);
}
