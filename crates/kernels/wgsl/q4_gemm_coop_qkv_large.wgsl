//! Prefill route of the fused `etwgpu.linear_q4gsw_qkv` on cooperative
//! matrices (tensor cores), the large tile: the three 4-bit projections
//! Q, K and V of one input in one dispatch, as `q4_gemm_coop_qkv.wgsl`
//! (Q's tiles along N, then K's, then V's; the projection uniform across
//! a workgroup), each tile a
//! 128 x 128 block (2 x 4 subgroups of 4 x 2 fragments), K advancing 64
//! inputs a step through one staged copy, the next step's loads in flight
//! during the products. The host routes here only when
//! `K % 64 == 0` and the call has enough 128 x 128 tiles to fill the GPU;
//! else `q4_gemm_coop_qkv.wgsl` (64 x 128) runs.
//!
//! Staged through workgroup memory as `vec4<f16>`: the x tile row-major,
//! the (dequantized) weight tile column-major, rounded to f16 as they are
//! staged. Each subgroup holds `FM x FN` accumulators of 16 x 16
//! (`coop_mat16x16<f32, C>`, unrolled); at the end each fragment passes
//! through the subgroup's 16 x 16 slot of `cs`, where its 32 invocations
//! finish and bounds-check it and write it out as `Elem`. Rows past M and
//! columns past N are staged as zeros and never written, so M and N are
//! free; the host routes here only on devices whose subgroups have 32
//! invocations, with `K % TK == 0`. Which tile a call takes is
//! `etwgpu_kernels::ops::gemm`'s `coop_tile`.
//!
//! Bounds: every index into `xs`, `ws`, `cs` is a function of `lid < WG`,
//! the stage (below `STAGES`) and constants: the staging units `u * WG +
//! lid` cover the tiles exactly (`BM * TK / 8` units of x, `BN * TK / 16`
//! of the weights), the fragments' offsets stay below `BM`, `BN` and `TK /
//! 4`, and `cs` holds `WG * 8` floats; no uniform reaches them.
//!
//! Loop guard: on, as `q4_gemm_coop_large.wgsl` (whose float32 variant
//! ran 15-22% faster with it in run be) and for the same float32 x loads.
// variants: f32 f16
// bounds: host-checked
// loop-guard: on

enable f16;
enable wgpu_cooperative_matrix;

alias Elem = f32;

/// 16 x 16 fragments per subgroup along M and N.
const FM: u32 = 4u;
const FN: u32 = 2u;
/// Subgroups (of 32 invocations) per workgroup along M and N.
const SGM: u32 = 2u;
const SGN: u32 = 4u;
const WG: u32 = SGM * SGN * 32u;
/// Output rows and columns per workgroup.
const BM: u32 = SGM * FM * 16u;
const BN: u32 = SGN * FN * 16u;
/// Inputs per step along K.
const TK: u32 = 64u;
/// Row stride of a staged tile, in `vec4<f16>`: TK plus 8 halves of
/// padding (rows stay 16-byte aligned and start on different banks).
const LDE: u32 = (TK + 8u) / 4u;
/// Copies of each staged tile.
const STAGES: u32 = 1u;
/// Staging elements and halves per tile copy.
const XS_LEN: u32 = BM * LDE;
const WS_LEN: u32 = BN * LDE;
const XS_HALVES: u32 = BM * (TK + 8u);
const WS_HALVES: u32 = BN * (TK + 8u);

struct Params {
    /// Rows of x.
    m: u32,
    /// Input features (a multiple of TK).
    k: u32,
    /// Inputs per scale group (a multiple of 32).
    group_size: u32,
    /// Workgroups along N: Q's tiles, then K's, then V's.
    tiles_n: u32,
    /// Output features of Q, K and V.
    n_q: u32,
    n_k: u32,
    n_v: u32,
    /// Bit j: weight j is word-major (16-byte word `w` of row `n` at word
    /// `w * N + n`; see `etwgpu_graph::layout`), else row-major.
    w_layout: u32,
    /// Row lengths of the three scales: N padded.
    pad_q: u32,
    pad_k: u32,
    pad_v: u32,
    /// The first tile along N of K's columns, and of V's.
    first_k: u32,
    first_v: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> w_q: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> s_q: array<Elem>;
@group(0) @binding(4) var<storage, read> w_k: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read> s_k: array<Elem>;
@group(0) @binding(6) var<storage, read> w_v: array<vec2<u32>>;
@group(0) @binding(7) var<storage, read> s_v: array<Elem>;
@group(0) @binding(8) var<storage, read_write> out_q: array<Elem>;
@group(0) @binding(9) var<storage, read_write> out_k: array<Elem>;
@group(0) @binding(10) var<storage, read_write> out_v: array<Elem>;

/// Staged x tiles, row-major (`xs[row * LDE + k / 4]`), and weight tiles,
/// column-major (`ws[col * LDE + k / 4]`), 4 halves an element.
var<workgroup> xs: array<vec4<f16>, STAGES * XS_LEN>;
var<workgroup> ws: array<vec4<f16>, STAGES * WS_LEN>;
/// One 16 x 16 f32 slot per subgroup, row-major: fragments on their way
/// out (and the zeros the accumulators start from).
var<workgroup> cs: array<f32, SGM * SGN * 256u>;

// include: coop_stage.wgsl
// include: coop_q4.wgsl

/// The projection a workgroup computes (uniform across it): `j` (0 Q,
/// 1 K, 2 V), its first column, output features, scale row length and
/// weight layout.
struct Proj {
    j: u32,
    n0: u32,
    n: u32,
    n_pad: u32,
    word_major: bool,
}

/// The projection of tile `tn` along N.
fn proj(tn: u32) -> Proj {
    if tn >= p.first_v {
        return Proj(2u, (tn - p.first_v) * BN, p.n_v, p.pad_v, (p.w_layout & 4u) != 0u);
    }
    if tn >= p.first_k {
        return Proj(1u, (tn - p.first_k) * BN, p.n_k, p.pad_k, (p.w_layout & 2u) != 0u);
    }
    return Proj(0u, tn * BN, p.n_q, p.pad_q, (p.w_layout & 1u) != 0u);
}

/// Where the 8-byte word of column `col` (of `n`) at input `k` (a
/// multiple of 16) is, as `q4_word8.wgsl`'s `w8` for a projection's N.
fn w8_of(col: u32, n: u32, k: u32, word_major: bool) -> u32 {
    if word_major {
        return ((k / 32u) * n + col) * 2u + (k / 16u) % 2u;
    }
    return col * (p.k / 16u) + k / 16u;
}

/// 16 nibbles of one weight column of projection `pr` (unit `i`, see
/// `unit_k`) and their scale; zeros past its N.
fn load_w(pr: Proj, k0: u32, i: u32) -> Nibbles {
    let col = pr.n0 + unit_col(i);
    let k = k0 + unit_k(i);
    if col >= pr.n {
        return Nibbles(vec2<u32>(0u), Elem(0.0));
    }
    let at = w8_of(col, pr.n, k, pr.word_major);
    let s = (k / p.group_size) * pr.n_pad + col;
    if pr.j == 0u {
        return Nibbles(w_q[at], s_q[s]);
    }
    if pr.j == 1u {
        return Nibbles(w_k[at], s_k[s]);
    }
    return Nibbles(w_v[at], s_v[s]);
}

// include: coop_q4_store.wgsl

/// Writes the fragment the subgroup `sg` left in its `cs` slot to rows
/// `row0 ..` and columns `col0 ..` of projection `pr`'s output: invocation
/// `lane` writes column `lane % 16` of 8 rows (`(lane / 16) * 8 ..`), so
/// each store of the subgroup writes two runs of 16 adjacent outputs (it
/// replaces 8 adjacent columns of one row an invocation, whose stores each
/// touched 16 rows: run bd found writing f32 rather than f16 output cost
/// the large kernel 18% at K = 2,048).
fn emit(pr: Proj, sg: u32, lane: u32, row0: u32, col0: u32) {
    let c = lane % 16u;
    let col = col0 + c;
    if col >= pr.n {
        return;
    }
    for (var e = 0u; e < 8u; e++) {
        let r = (lane / 16u) * 8u + e;
        let row = row0 + r;
        if row < p.m {
            let v = Elem(cs[sg * 256u + r * 16u + c]);
            let at = row * pr.n + col;
            if pr.j == 0u {
                out_q[at] = v;
            } else if pr.j == 1u {
                out_k[at] = v;
            } else {
                out_v[at] = v;
            }
        }
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let tile = wid.y * groups.x + wid.x;
    let m0 = (tile / p.tiles_n) * BM;
    let pr = proj(tile % p.tiles_n);
    let n0 = pr.n0;
    // This invocation's subgroup, and that subgroup's block of FM x FN
    // fragments.
    let sg = lid / 32u;
    let lane = lid % 32u;
    let wm = (sg / SGN) * (FM * 16u);
    let wn = (sg % SGN) * (FN * 16u);
    let nk = p.k / TK;

    for (var e = 0u; e < 8u; e++) {
        cs[lid * 8u + e] = 0.0;
    }
    workgroupBarrier();
    var c0_0 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c0_1 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c1_0 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c1_1 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c2_0 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c2_1 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c3_0 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c3_1 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    workgroupBarrier();
    // The first step's loads; each step then issues the next step's
    // loads right after staging its own, so they arrive during its
    // products (the last step loads its own tile again, in bounds).
    var gx0 = load_raw_x(m0, 0u, 0u * WG + lid);
    var gx1 = load_raw_x(m0, 0u, 1u * WG + lid);
    var gx2 = load_raw_x(m0, 0u, 2u * WG + lid);
    var gx3 = load_raw_x(m0, 0u, 3u * WG + lid);
    var gw0 = load_w(pr, 0u, 0u * WG + lid);
    var gw1 = load_w(pr, 0u, 1u * WG + lid);
    for (var t = 0u; t < nk; t++) {
        store_raw_x(0u * XS_HALVES + x_at(0u * WG + lid), gx0);
        store_raw_x(0u * XS_HALVES + x_at(1u * WG + lid), gx1);
        store_raw_x(0u * XS_HALVES + x_at(2u * WG + lid), gx2);
        store_raw_x(0u * XS_HALVES + x_at(3u * WG + lid), gx3);
        store_w(0u * WS_HALVES + w_at(0u * WG + lid), gw0);
        store_w(0u * WS_HALVES + w_at(1u * WG + lid), gw1);
        workgroupBarrier();
        let kn = min(t + 1u, nk - 1u) * TK;
        gx0 = load_raw_x(m0, kn, 0u * WG + lid);
        gx1 = load_raw_x(m0, kn, 1u * WG + lid);
        gx2 = load_raw_x(m0, kn, 2u * WG + lid);
        gx3 = load_raw_x(m0, kn, 3u * WG + lid);
        gw0 = load_w(pr, kn, 0u * WG + lid);
        gw1 = load_w(pr, kn, 1u * WG + lid);
        let xb = 0u * XS_LEN;
        let wb = 0u * WS_LEN;
        {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 0u) * LDE + 0u], LDE);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 16u) * LDE + 0u], LDE);
            let a2 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 32u) * LDE + 0u], LDE);
            let a3 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 48u) * LDE + 0u], LDE);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 0u) * LDE + 0u], LDE);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 16u) * LDE + 0u], LDE);
            c0_0 = coopMultiplyAdd(a0, b0, c0_0);
            c0_1 = coopMultiplyAdd(a0, b1, c0_1);
            c1_0 = coopMultiplyAdd(a1, b0, c1_0);
            c1_1 = coopMultiplyAdd(a1, b1, c1_1);
            c2_0 = coopMultiplyAdd(a2, b0, c2_0);
            c2_1 = coopMultiplyAdd(a2, b1, c2_1);
            c3_0 = coopMultiplyAdd(a3, b0, c3_0);
            c3_1 = coopMultiplyAdd(a3, b1, c3_1);
        }
        {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 0u) * LDE + 4u], LDE);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 16u) * LDE + 4u], LDE);
            let a2 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 32u) * LDE + 4u], LDE);
            let a3 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 48u) * LDE + 4u], LDE);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 0u) * LDE + 4u], LDE);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 16u) * LDE + 4u], LDE);
            c0_0 = coopMultiplyAdd(a0, b0, c0_0);
            c0_1 = coopMultiplyAdd(a0, b1, c0_1);
            c1_0 = coopMultiplyAdd(a1, b0, c1_0);
            c1_1 = coopMultiplyAdd(a1, b1, c1_1);
            c2_0 = coopMultiplyAdd(a2, b0, c2_0);
            c2_1 = coopMultiplyAdd(a2, b1, c2_1);
            c3_0 = coopMultiplyAdd(a3, b0, c3_0);
            c3_1 = coopMultiplyAdd(a3, b1, c3_1);
        }
        {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 0u) * LDE + 8u], LDE);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 16u) * LDE + 8u], LDE);
            let a2 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 32u) * LDE + 8u], LDE);
            let a3 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 48u) * LDE + 8u], LDE);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 0u) * LDE + 8u], LDE);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 16u) * LDE + 8u], LDE);
            c0_0 = coopMultiplyAdd(a0, b0, c0_0);
            c0_1 = coopMultiplyAdd(a0, b1, c0_1);
            c1_0 = coopMultiplyAdd(a1, b0, c1_0);
            c1_1 = coopMultiplyAdd(a1, b1, c1_1);
            c2_0 = coopMultiplyAdd(a2, b0, c2_0);
            c2_1 = coopMultiplyAdd(a2, b1, c2_1);
            c3_0 = coopMultiplyAdd(a3, b0, c3_0);
            c3_1 = coopMultiplyAdd(a3, b1, c3_1);
        }
        {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 0u) * LDE + 12u], LDE);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 16u) * LDE + 12u], LDE);
            let a2 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 32u) * LDE + 12u], LDE);
            let a3 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 48u) * LDE + 12u], LDE);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 0u) * LDE + 12u], LDE);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 16u) * LDE + 12u], LDE);
            c0_0 = coopMultiplyAdd(a0, b0, c0_0);
            c0_1 = coopMultiplyAdd(a0, b1, c0_1);
            c1_0 = coopMultiplyAdd(a1, b0, c1_0);
            c1_1 = coopMultiplyAdd(a1, b1, c1_1);
            c2_0 = coopMultiplyAdd(a2, b0, c2_0);
            c2_1 = coopMultiplyAdd(a2, b1, c2_1);
            c3_0 = coopMultiplyAdd(a3, b0, c3_0);
            c3_1 = coopMultiplyAdd(a3, b1, c3_1);
        }
        workgroupBarrier();
    }

    let slot = sg * 256u;
    coopStoreT(c0_0, &cs[slot], 16u);
    workgroupBarrier();
    emit(pr, sg, lane, m0 + wm + 0u, n0 + wn + 0u);
    workgroupBarrier();
    coopStoreT(c0_1, &cs[slot], 16u);
    workgroupBarrier();
    emit(pr, sg, lane, m0 + wm + 0u, n0 + wn + 16u);
    workgroupBarrier();
    coopStoreT(c1_0, &cs[slot], 16u);
    workgroupBarrier();
    emit(pr, sg, lane, m0 + wm + 16u, n0 + wn + 0u);
    workgroupBarrier();
    coopStoreT(c1_1, &cs[slot], 16u);
    workgroupBarrier();
    emit(pr, sg, lane, m0 + wm + 16u, n0 + wn + 16u);
    workgroupBarrier();
    coopStoreT(c2_0, &cs[slot], 16u);
    workgroupBarrier();
    emit(pr, sg, lane, m0 + wm + 32u, n0 + wn + 0u);
    workgroupBarrier();
    coopStoreT(c2_1, &cs[slot], 16u);
    workgroupBarrier();
    emit(pr, sg, lane, m0 + wm + 32u, n0 + wn + 16u);
    workgroupBarrier();
    coopStoreT(c3_0, &cs[slot], 16u);
    workgroupBarrier();
    emit(pr, sg, lane, m0 + wm + 48u, n0 + wn + 0u);
    workgroupBarrier();
    coopStoreT(c3_1, &cs[slot], 16u);
    workgroupBarrier();
    emit(pr, sg, lane, m0 + wm + 48u, n0 + wn + 16u);
}
