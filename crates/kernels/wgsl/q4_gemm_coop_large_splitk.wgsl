//! Prefill route of `et_vk.linear_q4gsw` on cooperative matrices (tensor
//! cores) with the large tile, split along K: for calls whose 128 x 256
//! tiles are too few to fill the GPU but whose K is long (the down
//! projection of a 512-token prompt: 4 x 8 tiles, K = 8,192). Split `s`
//! of a workgroup computes its tile (as `q4_gemm_coop_large.wgsl`: 2 x 4
//! subgroups of 4 x 4 fragments, K steps of 32, the next step's loads in
//! flight during the products) over inputs `s * k_chunk ..` only, and
//! writes the f32 partial sums `partial[s, m, n] = sum_k x[m, k] *
//! (nibble(n, k) - 8) * scales[k / group, n]` to the scratch;
//! `gemm_splitk_combine.wgsl` then adds the splits (and the bias) into
//! the output, as after `q4_gemm_coop_splitk.wgsl` (the small tile's
//! split). Which calls take it is `etwgpu_kernels::ops::gemm`'s
//! `q4_split_k_steps`.
//!
//! Staged through workgroup memory as `vec4<f16>`: the x tile row-major,
//! the (dequantized) weight tile column-major, rounded to f16 as they are
//! staged. Each subgroup holds `FM x FN` accumulators of 16 x 16
//! (`coop_mat16x16<f32, C>`, unrolled); at the end each fragment passes
//! through the subgroup's 16 x 16 slot of `cs`, where its 32 invocations
//! finish and bounds-check it and write it to the partial sums. Rows past M and
//! columns past N are staged as zeros and never written, so M and N are
//! free; the host routes here only on devices whose subgroups have 32
//! invocations, with `K % TK == 0`, `k_chunk % TK == 0` and every split
//! non-empty.
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
const FN: u32 = 4u;
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

// include: q4_splitk_decl.wgsl

/// Staged x tiles, row-major (`xs[row * LDE + k / 4]`), and weight tiles,
/// column-major (`ws[col * LDE + k / 4]`), 4 halves an element.
var<workgroup> xs: array<vec4<f16>, STAGES * XS_LEN>;
var<workgroup> ws: array<vec4<f16>, STAGES * WS_LEN>;
/// One 16 x 16 f32 slot per subgroup, row-major: fragments on their way
/// out (and the zeros the accumulators start from).
var<workgroup> cs: array<f32, SGM * SGN * 256u>;

// include: coop_stage.wgsl
// include: q4_word8.wgsl
// include: coop_q4.wgsl

// include: coop_q4_one.wgsl

// include: coop_q4_store.wgsl

// include: coop_q4_splitk_emit.wgsl

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let g = wid.y * groups.x + wid.x;
    // This workgroup's split and output tile.
    let split = g / p.tiles;
    let tile = g % p.tiles;
    let m0 = (tile / p.tiles_n) * BM;
    let n0 = (tile % p.tiles_n) * BN;
    let k_begin = split * p.k_chunk;
    let base = split * p.m * p.n;
    // Past the last split (a grid rounded up): nothing to do.
    if k_begin >= p.k {
        return;
    }
    // This invocation's subgroup, and that subgroup's block of FM x FN
    // fragments.
    let sg = lid / 32u;
    let lane = lid % 32u;
    let wm = (sg / SGN) * (FM * 16u);
    let wn = (sg % SGN) * (FN * 16u);
    let nk = (min(k_begin + p.k_chunk, p.k) - k_begin) / TK;

    for (var e = 0u; e < 8u; e++) {
        cs[lid * 8u + e] = 0.0;
    }
    workgroupBarrier();
    // include: coop_acc4x4.wgsl
    workgroupBarrier();
    // The first step's loads; each step then issues the next step's
    // loads right after staging its own, so they arrive during its
    // products (the last step loads its own tile again, in bounds).
    var gx0 = load_raw_x(m0, k_begin, 0u * WG + lid);
    var gx1 = load_raw_x(m0, k_begin, 1u * WG + lid);
    var gw0 = load_w(n0, k_begin, 0u * WG + lid);
    var gw1 = load_w(n0, k_begin, 1u * WG + lid);
    for (var t = 0u; t < nk; t++) {
        store_raw_x(0u * XS_HALVES + x_at(0u * WG + lid), gx0);
        store_raw_x(0u * XS_HALVES + x_at(1u * WG + lid), gx1);
        store_w(0u * WS_HALVES + w_at(0u * WG + lid), gw0);
        store_w(0u * WS_HALVES + w_at(1u * WG + lid), gw1);
        workgroupBarrier();
        let kn = k_begin + min(t + 1u, nk - 1u) * TK;
        gx0 = load_raw_x(m0, kn, 0u * WG + lid);
        gx1 = load_raw_x(m0, kn, 1u * WG + lid);
        gw0 = load_w(n0, kn, 0u * WG + lid);
        gw1 = load_w(n0, kn, 1u * WG + lid);
        // include: coop_step4x4.wgsl
        workgroupBarrier();
    }

    let slot = sg * 256u;
    coopStoreT(c0_0, &cs[slot], 16u);
    workgroupBarrier();
    emit(base, sg, lane, m0 + wm + 0u, n0 + wn + 0u);
    workgroupBarrier();
    coopStoreT(c0_1, &cs[slot], 16u);
    workgroupBarrier();
    emit(base, sg, lane, m0 + wm + 0u, n0 + wn + 16u);
    workgroupBarrier();
    coopStoreT(c0_2, &cs[slot], 16u);
    workgroupBarrier();
    emit(base, sg, lane, m0 + wm + 0u, n0 + wn + 32u);
    workgroupBarrier();
    coopStoreT(c0_3, &cs[slot], 16u);
    workgroupBarrier();
    emit(base, sg, lane, m0 + wm + 0u, n0 + wn + 48u);
    workgroupBarrier();
    coopStoreT(c1_0, &cs[slot], 16u);
    workgroupBarrier();
    emit(base, sg, lane, m0 + wm + 16u, n0 + wn + 0u);
    workgroupBarrier();
    coopStoreT(c1_1, &cs[slot], 16u);
    workgroupBarrier();
    emit(base, sg, lane, m0 + wm + 16u, n0 + wn + 16u);
    workgroupBarrier();
    coopStoreT(c1_2, &cs[slot], 16u);
    workgroupBarrier();
    emit(base, sg, lane, m0 + wm + 16u, n0 + wn + 32u);
    workgroupBarrier();
    coopStoreT(c1_3, &cs[slot], 16u);
    workgroupBarrier();
    emit(base, sg, lane, m0 + wm + 16u, n0 + wn + 48u);
    workgroupBarrier();
    coopStoreT(c2_0, &cs[slot], 16u);
    workgroupBarrier();
    emit(base, sg, lane, m0 + wm + 32u, n0 + wn + 0u);
    workgroupBarrier();
    coopStoreT(c2_1, &cs[slot], 16u);
    workgroupBarrier();
    emit(base, sg, lane, m0 + wm + 32u, n0 + wn + 16u);
    workgroupBarrier();
    coopStoreT(c2_2, &cs[slot], 16u);
    workgroupBarrier();
    emit(base, sg, lane, m0 + wm + 32u, n0 + wn + 32u);
    workgroupBarrier();
    coopStoreT(c2_3, &cs[slot], 16u);
    workgroupBarrier();
    emit(base, sg, lane, m0 + wm + 32u, n0 + wn + 48u);
    workgroupBarrier();
    coopStoreT(c3_0, &cs[slot], 16u);
    workgroupBarrier();
    emit(base, sg, lane, m0 + wm + 48u, n0 + wn + 0u);
    workgroupBarrier();
    coopStoreT(c3_1, &cs[slot], 16u);
    workgroupBarrier();
    emit(base, sg, lane, m0 + wm + 48u, n0 + wn + 16u);
    workgroupBarrier();
    coopStoreT(c3_2, &cs[slot], 16u);
    workgroupBarrier();
    emit(base, sg, lane, m0 + wm + 48u, n0 + wn + 32u);
    workgroupBarrier();
    coopStoreT(c3_3, &cs[slot], 16u);
    workgroupBarrier();
    emit(base, sg, lane, m0 + wm + 48u, n0 + wn + 48u);
    workgroupBarrier();
}
