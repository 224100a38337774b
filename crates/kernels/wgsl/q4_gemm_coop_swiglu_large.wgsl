//! Prefill route of the fused `etwgpu.linear_q4gsw_swiglu` on cooperative
//! matrices (tensor cores): with `g` and `u` the 4-bit linears of the gate
//! and up weights, `out[m, n] = g * sigmoid(g) * u`, f16 operands and f32
//! accumulation.
//!
//! The large tile: 128 x 128 (2 x 4 subgroups of 4 x 2 fragments of
//! gate and 4 x 2 of up), K steps of 32 through one staged copy, the next
//! step's loads in flight during the products (64-input steps, as the
//! QKV form's, would not fit in 48 KiB of workgroup memory with the second
//! weight tile). The host routes here
//! when the call has enough 128 x 128 tiles to fill the GPU; else
//! `q4_gemm_coop_swiglu.wgsl` (64 x 128) runs.
//!
//! Staged through workgroup memory as `vec4<f16>`: the x tile row-major,
//! the (dequantized) weight tile column-major, rounded to f16 as they are
//! staged. Each subgroup holds `FM x FN` accumulators of 16 x 16
//! (`coop_mat16x16<f32, C>`, unrolled); at the end each fragment passes
//! through the subgroup's 16 x 16 slot of `cs`, where its 32 invocations
//! finish and bounds-check it and write it out as `Elem`. Rows past M and
//! columns past N are staged as zeros and never written, so M and N are
//! free; the host routes here only on devices whose subgroups have 32
//! invocations, with `K % TK == 0`. The tilings are the winners of
//! `coop_probe` (crates/runtime/examples) on an H200; it times this file
//! as shipped. Which tile a call takes is `etwgpu_kernels::ops::gemm`'s
//! `coop_tile`.
//!
//! Bounds: every index into `xs`, `ws`, `ws_up`, `cs` is a function of
//! `lid < WG`, the stage (below `STAGES`) and constants: the staging units
//! `u * WG + lid` cover the tiles exactly (`BM * TK / 8` units of x, `BN *
//! TK / 16` of each weight), the fragments' offsets stay below `BM`, `BN`
//! and `TK / 4`, and `cs` holds two 256-float slots a subgroup; no uniform
//! reaches them.
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
const TK: u32 = 32u;
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
    /// Output features.
    n: u32,
    /// Input features (a multiple of TK).
    k: u32,
    /// Row length of the scales: N padded.
    n_pad: u32,
    /// Inputs per scale group (a multiple of 32).
    group_size: u32,
    /// Workgroups along N.
    tiles_n: u32,
    /// Bit 0: `w_gate` is word-major (16-byte word `w` of row `n` at word
    /// `w * N + n`; see `etwgpu_graph::layout`), bit 1: `w_up`; else
    /// row-major.
    w_layout: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> w_gate: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> s_gate: array<Elem>;
@group(0) @binding(4) var<storage, read> w_up: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read> s_up: array<Elem>;
@group(0) @binding(6) var<storage, read_write> out: array<Elem>;

/// Staged x tiles, row-major (`xs[row * LDE + k / 4]`), and weight tiles,
/// column-major (`ws[col * LDE + k / 4]`), 4 halves an element.
var<workgroup> xs: array<vec4<f16>, STAGES * XS_LEN>;
/// Gate weights in `ws`, up weights in `ws_up`.
var<workgroup> ws: array<vec4<f16>, STAGES * WS_LEN>;
var<workgroup> ws_up: array<vec4<f16>, STAGES * WS_LEN>;
/// Two 16 x 16 f32 slots per subgroup (gate, up), row-major: fragments
/// on their way out (and the zeros the accumulators start from).
var<workgroup> cs: array<f32, SGM * SGN * 512u>;

// include: coop_stage.wgsl
// include: q4_word8.wgsl
// include: coop_q4.wgsl

/// The gate's and the up weights' 16 nibbles of one column (unit `i`,
/// see `unit_k`) and their scales; zeros past N.
fn load_w(n0: u32, k0: u32, i: u32) -> array<Nibbles, 2> {
    let col = n0 + unit_col(i);
    let k = k0 + unit_k(i);
    if col >= p.n {
        return array<Nibbles, 2>(Nibbles(vec2<u32>(0u), Elem(0.0)), Nibbles(vec2<u32>(0u), Elem(0.0)));
    }
    let words = p.k / 16u;
    let si = (k / p.group_size) * p.n_pad + col;
    return array<Nibbles, 2>(
        Nibbles(w_gate[w8(col, words, k, (p.w_layout & 1u) != 0u)], s_gate[si]),
        Nibbles(w_up[w8(col, words, k, (p.w_layout & 2u) != 0u)], s_up[si]),
    );
}

/// Stores the 16 gate and 16 up weights of `v` at half `o` (a multiple
/// of 8) of the weight tiles.
fn store_w(o: u32, v: array<Nibbles, 2>) {
    let g0 = deq8(v[0].word.x, v[0].scale);
    let g1 = deq8(v[0].word.y, v[0].scale);
    let u0 = deq8(v[1].word.x, v[1].scale);
    let u1 = deq8(v[1].word.y, v[1].scale);
    ws[o / 4u] = g0.lo;
    ws[o / 4u + 1u] = g0.hi;
    ws[o / 4u + 2u] = g1.lo;
    ws[o / 4u + 3u] = g1.hi;
    ws_up[o / 4u] = u0.lo;
    ws_up[o / 4u + 1u] = u0.hi;
    ws_up[o / 4u + 2u] = u1.lo;
    ws_up[o / 4u + 3u] = u1.hi;
}

/// Writes `silu(gate) * up` of the fragments the subgroup `sg` left in its
/// `cs` slots to rows `row0 ..` and columns `col0 ..` of the output:
/// invocation `lane` writes column `lane % 16` of 8 rows (`(lane / 16) * 8
/// ..`), so each store of the subgroup writes two runs of 16 adjacent
/// outputs (it replaces 8 adjacent columns of one row an invocation, whose
/// stores each touched 16 rows: run bd found writing f32 rather than f16
/// output cost the large kernel 18% at K = 2,048).
fn emit(sg: u32, lane: u32, row0: u32, col0: u32) {
    let c = lane % 16u;
    let col = col0 + c;
    if col >= p.n {
        return;
    }
    for (var e = 0u; e < 8u; e++) {
        let r = (lane / 16u) * 8u + e;
        let row = row0 + r;
        if row < p.m {
            let at = sg * 512u + r * 16u + c;
            let g = cs[at];
            let u = cs[at + 256u];
            out[row * p.n + col] = Elem(g / (1.0 + exp(-g)) * u);
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
    let n0 = (tile % p.tiles_n) * BN;
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
    var u0_0 = c0_0;
    var c0_1 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var u0_1 = c0_1;
    var c1_0 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var u1_0 = c1_0;
    var c1_1 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var u1_1 = c1_1;
    var c2_0 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var u2_0 = c2_0;
    var c2_1 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var u2_1 = c2_1;
    var c3_0 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var u3_0 = c3_0;
    var c3_1 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var u3_1 = c3_1;
    workgroupBarrier();
    // The first step's loads; each step then issues the next step's
    // loads right after staging its own, so they arrive during its
    // products (the last step loads its own tile again, in bounds).
    var gx0 = load_raw_x(m0, 0u, 0u * WG + lid);
    var gx1 = load_raw_x(m0, 0u, 1u * WG + lid);
    var gw0 = load_w(n0, 0u, 0u * WG + lid);
    for (var t = 0u; t < nk; t++) {
        store_raw_x(0u * XS_HALVES + x_at(0u * WG + lid), gx0);
        store_raw_x(0u * XS_HALVES + x_at(1u * WG + lid), gx1);
        store_w(0u * WS_HALVES + w_at(0u * WG + lid), gw0);
        workgroupBarrier();
        let kn = min(t + 1u, nk - 1u) * TK;
        gx0 = load_raw_x(m0, kn, 0u * WG + lid);
        gx1 = load_raw_x(m0, kn, 1u * WG + lid);
        gw0 = load_w(n0, kn, 0u * WG + lid);
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
            let d0 = coopLoad<coop_mat16x16<f16, B>>(&ws_up[wb + (wn + 0u) * LDE + 0u], LDE);
            let d1 = coopLoad<coop_mat16x16<f16, B>>(&ws_up[wb + (wn + 16u) * LDE + 0u], LDE);
            u0_0 = coopMultiplyAdd(a0, d0, u0_0);
            u0_1 = coopMultiplyAdd(a0, d1, u0_1);
            u1_0 = coopMultiplyAdd(a1, d0, u1_0);
            u1_1 = coopMultiplyAdd(a1, d1, u1_1);
            u2_0 = coopMultiplyAdd(a2, d0, u2_0);
            u2_1 = coopMultiplyAdd(a2, d1, u2_1);
            u3_0 = coopMultiplyAdd(a3, d0, u3_0);
            u3_1 = coopMultiplyAdd(a3, d1, u3_1);
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
            let d0 = coopLoad<coop_mat16x16<f16, B>>(&ws_up[wb + (wn + 0u) * LDE + 4u], LDE);
            let d1 = coopLoad<coop_mat16x16<f16, B>>(&ws_up[wb + (wn + 16u) * LDE + 4u], LDE);
            u0_0 = coopMultiplyAdd(a0, d0, u0_0);
            u0_1 = coopMultiplyAdd(a0, d1, u0_1);
            u1_0 = coopMultiplyAdd(a1, d0, u1_0);
            u1_1 = coopMultiplyAdd(a1, d1, u1_1);
            u2_0 = coopMultiplyAdd(a2, d0, u2_0);
            u2_1 = coopMultiplyAdd(a2, d1, u2_1);
            u3_0 = coopMultiplyAdd(a3, d0, u3_0);
            u3_1 = coopMultiplyAdd(a3, d1, u3_1);
        }
        workgroupBarrier();
    }

    let slot = sg * 512u;
    coopStoreT(c0_0, &cs[slot], 16u);
    coopStoreT(u0_0, &cs[slot + 256u], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 0u, n0 + wn + 0u);
    workgroupBarrier();
    coopStoreT(c0_1, &cs[slot], 16u);
    coopStoreT(u0_1, &cs[slot + 256u], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 0u, n0 + wn + 16u);
    workgroupBarrier();
    coopStoreT(c1_0, &cs[slot], 16u);
    coopStoreT(u1_0, &cs[slot + 256u], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 16u, n0 + wn + 0u);
    workgroupBarrier();
    coopStoreT(c1_1, &cs[slot], 16u);
    coopStoreT(u1_1, &cs[slot + 256u], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 16u, n0 + wn + 16u);
    workgroupBarrier();
    coopStoreT(c2_0, &cs[slot], 16u);
    coopStoreT(u2_0, &cs[slot + 256u], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 32u, n0 + wn + 0u);
    workgroupBarrier();
    coopStoreT(c2_1, &cs[slot], 16u);
    coopStoreT(u2_1, &cs[slot + 256u], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 32u, n0 + wn + 16u);
    workgroupBarrier();
    coopStoreT(c3_0, &cs[slot], 16u);
    coopStoreT(u3_0, &cs[slot + 256u], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 48u, n0 + wn + 0u);
    workgroupBarrier();
    coopStoreT(c3_1, &cs[slot], 16u);
    coopStoreT(u3_1, &cs[slot + 256u], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 48u, n0 + wn + 16u);
}
