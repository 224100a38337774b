//! Prefill route of the fused `etwgpu.linear_q4gsw_swiglu` on cooperative
//! matrices (tensor cores): with `g` and `u` the 4-bit linears of the gate
//! and up weights, `out[m, n] = g * sigmoid(g) * u`, f16 operands and f32
//! accumulation.
//!
//! As `q4_gemm_coop.wgsl`, with a second staged weight tile (the up
//! weights), a second 2 x 2 set of accumulators per subgroup and a second
//! `cs` slot per subgroup, so both fragments of an output block meet there.
//! The host routes here only on devices whose subgroups have 32
//! invocations, with `K % TK == 0` and `group % TK == 0`.
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
    /// Row length of the scales: N padded.
    n_pad: u32,
    /// Inputs per scale group (a multiple of TK).
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

/// x tile, row-major: `BM` rows of `LD` halves.
var<workgroup> xs: array<f16, 2560>;
/// Gate and up weight tiles, column-major: `BN` columns of `LD` halves.
var<workgroup> ws: array<f16, 5120>;
var<workgroup> ws_up: array<f16, 5120>;
/// Two 16 x 16 f32 slots per subgroup (gate, up), row-major: fragments on
/// their way out (and the zeros the accumulators start from).
var<workgroup> cs: array<f32, 4096>;

// include: q4_word8.wgsl

/// Writes `silu(gate) * up` of the fragments the subgroup `sg` left in its
/// `cs` slots to rows `row0 ..` and columns `col0 ..` of the output:
/// invocation `lane` writes 8 consecutive columns of one row.
fn emit(sg: u32, lane: u32, row0: u32, col0: u32) {
    let row = row0 + lane / 2u;
    if row >= p.m {
        return;
    }
    for (var e = 0u; e < 8u; e++) {
        let c = (lane % 2u) * 8u + e;
        let col = col0 + c;
        if col < p.n {
            let at = sg * 512u + (lane / 2u) * 16u + c;
            let g = cs[at];
            let u = cs[at + 256u];
            out[row * p.n + col] = Elem(g / (1.0 + exp(-g)) * u);
        }
    }
}

/// The 16 weights of `word` (low nibble first, offset by 8) times `s`.
fn dequant(word: vec2<u32>, s: f32) -> array<f16, 16> {
    var v: array<f16, 16>;
    for (var e = 0u; e < 8u; e++) {
        v[e] = f16((f32((word.x >> (4u * e)) & 15u) - 8.0) * s);
        v[8u + e] = f16((f32((word.y >> (4u * e)) & 15u) - 8.0) * s);
    }
    return v;
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
    // column `lid / 2`, inputs `(lid % 2) * 16 ..` (one vec2 of words each).
    let xr = lid / 4u;
    let xk = (lid % 4u) * 8u;
    let wc = lid / 2u;
    let wk = (lid % 2u) * 16u;
    let words = p.k / 16u;

    for (var i = 0u; i < 16u; i++) {
        cs[lid * 16u + i] = 0.0;
    }
    workgroupBarrier();
    var g00 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var g01 = g00;
    var g10 = g00;
    var g11 = g00;
    var u00 = g00;
    var u01 = g00;
    var u10 = g00;
    var u11 = g00;

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
        var vg: array<f16, 16>;
        var vu: array<f16, 16>;
        if col < p.n {
            let si = (k0 / p.group_size) * p.n_pad + col;
            vg = dequant(w_gate[w8(col, words, k0 + wk, (p.w_layout & 1u) != 0u)], f32(s_gate[si]));
            vu = dequant(w_up[w8(col, words, k0 + wk, (p.w_layout & 2u) != 0u)], f32(s_up[si]));
        }
        for (var e = 0u; e < 16u; e++) {
            ws[wo + e] = vg[e];
            ws_up[wo + e] = vu[e];
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TK; kk += 16u) {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[wm * LD + kk], LD);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[(wm + 16u) * LD + kk], LD);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&ws[wn * LD + kk], LD);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&ws[(wn + 16u) * LD + kk], LD);
            g00 = coopMultiplyAdd(a0, b0, g00);
            g01 = coopMultiplyAdd(a0, b1, g01);
            g10 = coopMultiplyAdd(a1, b0, g10);
            g11 = coopMultiplyAdd(a1, b1, g11);
            let d0 = coopLoad<coop_mat16x16<f16, B>>(&ws_up[wn * LD + kk], LD);
            let d1 = coopLoad<coop_mat16x16<f16, B>>(&ws_up[(wn + 16u) * LD + kk], LD);
            u00 = coopMultiplyAdd(a0, d0, u00);
            u01 = coopMultiplyAdd(a0, d1, u01);
            u10 = coopMultiplyAdd(a1, d0, u10);
            u11 = coopMultiplyAdd(a1, d1, u11);
        }
        workgroupBarrier();
    }

    let slot = sg * 512u;
    coopStoreT(g00, &cs[slot], 16u);
    coopStoreT(u00, &cs[slot + 256u], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm, n0 + wn);
    workgroupBarrier();
    coopStoreT(g01, &cs[slot], 16u);
    coopStoreT(u01, &cs[slot + 256u], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm, n0 + wn + 16u);
    workgroupBarrier();
    coopStoreT(g10, &cs[slot], 16u);
    coopStoreT(u10, &cs[slot + 256u], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 16u, n0 + wn);
    workgroupBarrier();
    coopStoreT(g11, &cs[slot], 16u);
    coopStoreT(u11, &cs[slot + 256u], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 16u, n0 + wn + 16u);
}
