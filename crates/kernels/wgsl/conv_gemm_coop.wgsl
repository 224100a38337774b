//! 2-D convolution (1-D as H = 1), NCHW, `groups = 1`, not transposed, as
//! an implicit GEMM on cooperative matrices (tensor cores): `out[m, oc] =
//! sum_k patch[m, k] * w[oc, k]` with the output pixels `m = (n, oh, ow)`
//! as rows, the output channels as columns and `k = (c, ky, kx)` along the
//! weight's rows (`[OC, C, KH, KW]` is `[OC, K]` row-major), as
//! `conv_gemm.wgsl` computes it in float32. f16 operands (a float32
//! program's inputs and weights are rounded as they are staged, where
//! the load's precision allows f16 operands for dense products), f32
//! accumulation, output as `Elem`.
//!
//! The tiling is `matmul_coop.wgsl`'s with rows and columns in the other
//! proportion: a workgroup of 8 subgroups of 32 computes 128 pixels x 64
//! channels (4 x 2 subgroups of 2 x 2 fragments of 16 x 16), K advancing
//! 32 inputs a step through two staged copies (the next step's values
//! loaded while the current step is multiplied, one barrier a step). The
//! patch tile is gathered from x as it is staged (zeros in the padding,
//! past M and past K, so K need not be a multiple of the step): each
//! invocation stages 8 consecutive inputs of two pixels 64 apart (a
//! subgroup covers 8 consecutive pixels at 4 groups of 8 inputs) and 8 of
//! one output channel's weights, walking `(c, ky, kx)` forward with the
//! host's precomputed carries instead of dividing. At the end each
//! fragment passes through its subgroup's 16 x 16 slot of `cs`, from which
//! 16 invocations write 16 consecutive pixels of one channel plane at a
//! time, with `conv.wgsl`'s epilogue: bias, the optional clamp
//! (`et_vk.conv_with_clamp`) and the activation (`act` of
//! `common/act.wgsl`, `ACT_COPY` for none).
//!
//! Split K (`partial`, float32 programs only: the partial sums go to an f32
//! scratch bound as `out`), as `conv_gemm.wgsl` splits: the workgroups are
//! `splits` copies of the output tiles, copy `s` summing inputs `s *
//! k_chunk ..` and writing its sums, without epilogue, NCHW at `s * M * N
//! ..`; `conv_gemm_combine.wgsl` adds them and applies the epilogue.
//!
//! Bounds: every index into `xs`, `ws`, `cs` is a function of `lid < WG`,
//! the stage (below `STAGES`) and constants: the staging units `u * WG +
//! lid` cover the tiles exactly (`BM * TK / 8` units of the patch tile,
//! `BN * TK / 8` of the weights), the fragments' offsets stay below `BM`,
//! `BN` and `TK / 4`, and `cs` holds `WG * 8` floats; no uniform reaches
//! them. Loads from x and the weight read element 0 where the value is a
//! padding zero and `select` discards it.
// variants: f32 f16
// bounds: host-checked

enable f16;
enable wgpu_cooperative_matrix;

alias Elem = f32;

/// 16 x 16 fragments per subgroup along M and N.
const FM: u32 = 2u;
const FN: u32 = 2u;
/// Subgroups (of 32 invocations) per workgroup along M and N.
const SGM: u32 = 4u;
const SGN: u32 = 2u;
const WG: u32 = SGM * SGN * 32u;
/// Output pixels and channels per workgroup.
const BM: u32 = SGM * FM * 16u;
const BN: u32 = SGN * FN * 16u;
/// Inputs per step along K.
const TK: u32 = 32u;
/// Row stride of a staged tile, in `vec4<f16>`: TK plus 8 halves of
/// padding (rows stay 16-byte aligned and start on different banks).
const LDE: u32 = (TK + 8u) / 4u;
/// Copies of each staged tile (2: the next step's loads in flight).
const STAGES: u32 = 2u;
/// Staging elements and halves per tile copy.
const XS_LEN: u32 = BM * LDE;
const WS_LEN: u32 = BN * LDE;
const XS_HALVES: u32 = BM * (TK + 8u);
const WS_HALVES: u32 = BN * (TK + 8u);

// include: conv_patch.wgsl

/// Staged patch tiles, row-major (`xs[pixel * LDE + k / 4]`), and weight
/// tiles, column-major (`ws[channel * LDE + k / 4]`), 4 halves an element.
var<workgroup> xs: array<vec4<f16>, STAGES * XS_LEN>;
var<workgroup> ws: array<vec4<f16>, STAGES * WS_LEN>;
/// One 16 x 16 f32 slot per subgroup, row-major (pixel, channel):
/// fragments on their way out (and the zeros the accumulators start from).
var<workgroup> cs: array<f32, SGM * SGN * 256u>;

/// 8 consecutive inputs as loaded, rounded to f16 only as they are staged.
struct RawEight {
    lo: vec4<Elem>,
    hi: vec4<Elem>,
}

/// `pos` one input forward.
fn next_k(pos: KPos) -> KPos {
    var q = pos;
    q.k += 1u;
    q.kx += 1u;
    if q.kx >= p.kw {
        q.kx = 0u;
        q.ky += 1u;
    }
    if q.ky >= p.kh {
        q.ky = 0u;
        q.c += 1u;
    }
    return q;
}

/// The patch values of pixel `r` at 4 positions (zeros from `k_end`).
fn four(r: Row, a: KPos, b: KPos, c: KPos, d: KPos, k_end: u32) -> vec4<Elem> {
    return vec4<Elem>(
        patch_at(r, a, k_end),
        patch_at(r, b, k_end),
        patch_at(r, c, k_end),
        patch_at(r, d, k_end),
    );
}

/// The 8 inputs from `q0` of pixels `ra` and `rb`, as two staging units
/// (zeros from `k_end`).
struct Patches {
    a: RawEight,
    b: RawEight,
}

fn patches(ra: Row, rb: Row, q0: KPos, k_end: u32) -> Patches {
    let q1 = next_k(q0);
    let q2 = next_k(q1);
    let q3 = next_k(q2);
    let q4 = next_k(q3);
    let q5 = next_k(q4);
    let q6 = next_k(q5);
    let q7 = next_k(q6);
    return Patches(
        RawEight(four(ra, q0, q1, q2, q3, k_end), four(ra, q4, q5, q6, q7, k_end)),
        RawEight(four(rb, q0, q1, q2, q3, k_end), four(rb, q4, q5, q6, q7, k_end)),
    );
}

/// Weights `k .. k + 4` of output channel `col` (zeros from `k_end`).
fn weight4(col: u32, k: u32, k_end: u32) -> vec4<Elem> {
    return vec4<Elem>(
        weight_at(col, k, k_end),
        weight_at(col, k + 1u, k_end),
        weight_at(col, k + 2u, k_end),
        weight_at(col, k + 3u, k_end),
    );
}

/// Weights `k .. k + 8` of output channel `col` (zeros from `k_end`).
fn weights(col: u32, k: u32, k_end: u32) -> RawEight {
    return RawEight(weight4(col, k, k_end), weight4(col, k + 4u, k_end));
}

/// Where staging unit `i` (row `i / (TK / 8)`, inputs `(i % (TK / 8)) *
/// 8 ..`) goes in a staged tile, in halves.
fn unit_at(i: u32) -> u32 {
    return (i / (TK / 8u)) * (TK + 8u) + (i % (TK / 8u)) * 8u;
}

/// Stores 8 inputs, rounded to f16, at half `o` (a multiple of 8) of the
/// patch tiles.
fn store_x(o: u32, v: RawEight) {
    xs[o / 4u] = vec4<f16>(v.lo);
    xs[o / 4u + 1u] = vec4<f16>(v.hi);
}

/// The same for the weight tiles.
fn store_w(o: u32, v: RawEight) {
    ws[o / 4u] = vec4<f16>(v.lo);
    ws[o / 4u + 1u] = vec4<f16>(v.hi);
}

/// Writes the fragment the subgroup `sg` left in its `cs` slot to pixels
/// `row0 ..` and channels `col0 ..` of the output (or, split, as partial
/// sums at `part ..` of the scratch): invocation `lane` writes pixel
/// `lane % 16` of 8 channels, so 16 invocations write 16 consecutive
/// pixels of a channel plane at a time.
fn emit(sg: u32, lane: u32, row0: u32, col0: u32, part: u32) {
    let r = lane % 16u;
    let m = row0 + r;
    if m >= p.m {
        return;
    }
    let ohw = p.oh * p.ow;
    let img = m / ohw;
    let pix = m % ohw;
    for (var e = 0u; e < 8u; e++) {
        let c = (lane / 16u) * 8u + e;
        let oc = col0 + c;
        if oc < p.n {
            store_out((img * p.n + oc) * ohw + pix, part, oc, cs[sg * 256u + r * 16u + c]);
        }
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let flat = wid.y * groups.x + wid.x;
    let split = flat / p.tiles;
    let tile = flat % p.tiles;
    let k_begin = split * p.k_chunk;
    let k_end = min(k_begin + p.k_chunk, p.k);
    let m0 = (tile / p.tiles_n) * BM;
    let n0 = (tile % p.tiles_n) * BN;
    // This invocation's subgroup, and that subgroup's block of FM x FN
    // fragments.
    let sg = lid / 32u;
    let lane = lid % 32u;
    let wm = (sg / SGN) * (FM * 16u);
    let wn = (sg % SGN) * (FN * 16u);
    let nk = (k_end - k_begin + TK - 1u) / TK;
    // Staging: units `lid` and `WG + lid` of the patch tile (pixels
    // `lid / 4` and 64 after it), unit `lid` of the weight tile (channel
    // `lid / 4`), all at inputs `(lid % 4) * 8 ..` of the step.
    let ra = row_of(m0 + lid / (TK / 8u));
    let rb = row_of(m0 + (WG + lid) / (TK / 8u));
    let col = n0 + lid / (TK / 8u);
    var pos = kpos(k_begin + (lid % (TK / 8u)) * 8u);

    for (var e = 0u; e < 8u; e++) {
        cs[lid * 8u + e] = 0.0;
    }
    workgroupBarrier();
    var c0_0 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c0_1 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c1_0 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c1_1 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    workgroupBarrier();
    {
        let g = patches(ra, rb, pos, k_end);
        store_x(unit_at(lid), g.a);
        store_x(unit_at(WG + lid), g.b);
        store_w(unit_at(lid), weights(col, pos.k, k_end));
    }
    workgroupBarrier();
    for (var t = 0u; t < nk; t++) {
        let cur = t % 2u;
        // The next step's values (past `k_end` at the end: zeros, stored
        // where nothing reads them any more).
        pos = advance(pos);
        let g = patches(ra, rb, pos, k_end);
        let gw = weights(col, pos.k, k_end);
        let xb = cur * XS_LEN;
        let wb = cur * WS_LEN;
        {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 0u) * LDE + 0u], LDE);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 16u) * LDE + 0u], LDE);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 0u) * LDE + 0u], LDE);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 16u) * LDE + 0u], LDE);
            c0_0 = coopMultiplyAdd(a0, b0, c0_0);
            c0_1 = coopMultiplyAdd(a0, b1, c0_1);
            c1_0 = coopMultiplyAdd(a1, b0, c1_0);
            c1_1 = coopMultiplyAdd(a1, b1, c1_1);
        }
        {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 0u) * LDE + 4u], LDE);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 16u) * LDE + 4u], LDE);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 0u) * LDE + 4u], LDE);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 16u) * LDE + 4u], LDE);
            c0_0 = coopMultiplyAdd(a0, b0, c0_0);
            c0_1 = coopMultiplyAdd(a0, b1, c0_1);
            c1_0 = coopMultiplyAdd(a1, b0, c1_0);
            c1_1 = coopMultiplyAdd(a1, b1, c1_1);
        }
        store_x((1u - cur) * XS_HALVES + unit_at(lid), g.a);
        store_x((1u - cur) * XS_HALVES + unit_at(WG + lid), g.b);
        store_w((1u - cur) * WS_HALVES + unit_at(lid), gw);
        workgroupBarrier();
    }

    let slot = sg * 256u;
    let part = split * p.m * p.n;
    coopStoreT(c0_0, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 0u, n0 + wn + 0u, part);
    workgroupBarrier();
    coopStoreT(c0_1, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 0u, n0 + wn + 16u, part);
    workgroupBarrier();
    coopStoreT(c1_0, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 16u, n0 + wn + 0u, part);
    workgroupBarrier();
    coopStoreT(c1_1, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 16u, n0 + wn + 16u, part);
}

// include: act.wgsl
// include: conv_epilogue.wgsl
