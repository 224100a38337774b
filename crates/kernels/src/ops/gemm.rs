//! GEMM routes on cooperative matrices (tensor cores), taken where the
//! device has them ([`crate::caps::DeviceCaps`]): the 4-bit weight linears
//! (`q4_gemm_coop.wgsl`, `q4_gemm_coop_swiglu.wgsl`, and the fused QKV
//! form's three projections in one dispatch, `q4_gemm_coop_qkv.wgsl`) and dense `aten.linear` (`matmul_coop.wgsl`;
//! float32 at precision F16 only, converted to f16 while staged), each in a
//! small (64 x 128) and a large tile (`*_large.wgsl`), [`coop_tile`]
//! choosing by the waves of workgroups each would take.
//! Operands are f16 on the matrix units (float32 activations are rounded
//! as they are staged, as [`crate::caps::Precision`] allows), accumulation
//! is f32. Elsewhere the routes of `quant.rs` and `matmul.rs` run.
//! A 4-bit linear whose output tiles leave SMs idle splits K on either
//! route ([`split_k`]: `q4_gemm_coop_splitk.wgsl`, `q4_gemm_splitk.wgsl`,
//! their partial sums added by `gemm_splitk_combine.wgsl`); on the matrix
//! units a long K may split the large tile instead
//! (`q4_gemm_coop_large_splitk.wgsl`, [`q4_coop_route`]).

use crate::caps::Product;
use crate::error::Result;
use crate::generated::shaders::Family;
use crate::ops::fused::Epilogue;
use crate::ops::quant::{Q4Linear, Q4Qkv, Q4Route};
use crate::plan::{
    Ctx, Dispatch, ElemType, Lowered, Step, TensorInfo, Uniform, Vid, WG_ELEMENTWISE, float_shader, grid_1d,
    grid_groups, to_u32,
};

/// One tiling of the cooperative-matrix kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoopTile {
    /// Output rows per workgroup.
    pub m: u64,
    /// Output columns per workgroup.
    pub n: u64,
    /// Inputs per step along K: K must be a multiple of it.
    pub k: u64,
}

impl CoopTile {
    /// Workgroups covering an `m x n` output.
    pub fn workgroups(&self, m: u64, n: u64) -> u64 {
        m.div_ceil(self.m) * n.div_ceil(self.n)
    }
}

/// The small tile of every cooperative-matrix kernel (`q4_gemm_coop.wgsl`,
/// `q4_gemm_coop_swiglu.wgsl`, `matmul_coop.wgsl`): 64 x 128, K steps of 32.
pub const COOP_SMALL: CoopTile = CoopTile { m: 64, n: 128, k: 32 };
/// The large tile of a 4-bit linear (`q4_gemm_coop_large.wgsl`): 128 x 256
/// in 4 x 4 fragments a subgroup (run ba, H100, 2,048 rows: 124-135
/// TFLOP/s, against 120-127 for the 128 x 128 tile of 4 x 2 fragments that
/// the QKV form keeps; the 1B prefill +1.3% at 2,048 tokens, +2.1% at
/// 4,096).
pub const COOP_Q4_LARGE: CoopTile = CoopTile { m: 128, n: 256, k: 32 };
/// The large tile of the fused 4-bit QKV (`q4_gemm_coop_qkv_large.wgsl`):
/// its tiles along N are each projection's, [`COOP_SMALL`]`.n` wide.
pub const COOP_QKV_LARGE: CoopTile = CoopTile { m: 128, n: 128, k: 64 };
/// The large tile of the 4-bit SwiGLU pair (`q4_gemm_coop_swiglu_large.wgsl`).
pub const COOP_SWIGLU_LARGE: CoopTile = CoopTile { m: 128, n: 128, k: 32 };
/// The large tile of a dense linear (`matmul_coop_large.wgsl`).
pub const COOP_DENSE_LARGE: CoopTile = CoopTile { m: 256, n: 128, k: 32 };
/// SMs of the GPU the tile rule models: a 132-SM H200. A call's
/// workgroups run in waves of one an SM (a second workgroup on an SM runs
/// no faster: run y, the small 4-bit tile at 2048 rows, four an SM,
/// 75-78 TFLOP/s; at 512 rows, one an SM, 83-101).
pub const COOP_SMS: u64 = 132;
/// A large-tile workgroup's time over a small-tile workgroup's, per unit
/// of tile area, in tenths: 7. Run y: the 4-bit 128 x 128 tile (twice the
/// small tile's area) with 64 workgroups ran at 0.7x the small tile's
/// speed with 128 (one wave each: 2 x 0.7 = 1.4 small workgroups' time);
/// with 256 against 512 (two waves against four) at 1.3x.
pub const COOP_LARGE_TIME_TENTHS: u64 = 7;

/// The tile a cooperative-matrix call of `m x n x k` takes (K already a
/// multiple of [`COOP_SMALL`]'s step): `large` when K is a multiple of its
/// step and its waves of [`COOP_SMS`] workgroups, each
/// [`COOP_LARGE_TIME_TENTHS`] tenths of a small one's time per unit of
/// area, take less time than the small tile's waves; else the small tile.
/// That fits both measured points (the small tile at 512 x 2048 x 2048,
/// the large one at 512 x 8192 and 2048 x 2048), and takes the large tile
/// for a call of 66 to 131 large workgroups (one wave) whose small tiles
/// need two waves (the fused QKV at 512 rows: 96 against 192). Either
/// tile bounds every index by M, N and K (rows past M and columns past N
/// are staged as zeros and never written, K is a multiple of the step),
/// so any M and N are in bounds.
pub fn coop_tile(m: u64, n: u64, k: u64, large: CoopTile) -> CoopTile {
    // Both tiles take all of K: compare per input.
    let time = |t: CoopTile| modeled_time(t, t.workgroups(m, n), 1);
    if k.is_multiple_of(large.k) && time(large) < time(COOP_SMALL) { large } else { COOP_SMALL }
}

/// The model of [`coop_tile`] and [`q4_coop_route`]: the time of
/// `workgroups` workgroups of `tile`, each over `k` inputs, as waves of
/// [`COOP_SMS`] times the tile's area times `k`, a tile other than
/// [`COOP_SMALL`] at [`COOP_LARGE_TIME_TENTHS`] tenths of the small one's
/// time per unit of area.
fn modeled_time(tile: CoopTile, workgroups: u64, k: u64) -> u64 {
    let tenths = if tile == COOP_SMALL { 10 } else { COOP_LARGE_TIME_TENTHS };
    workgroups.div_ceil(COOP_SMS) * (tile.m * tile.n) * k * tenths
}

/// Fewest inputs per split: shorter splits cost more in partial sums
/// written and added than their steps save.
pub const SPLIT_K_MIN_INPUTS: u64 = 512;
/// Most splits (bounds the scratch: [`split_k_scratch_bytes`]).
pub const SPLIT_K_MAX: u64 = 8;
/// The scratch slot of the split-K partial sums.
pub(crate) const SPLIT_K_SCRATCH: usize = 1;

/// How a call splits K: `splits` slices of `k_chunk` inputs (the last
/// possibly shorter, none empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitK {
    /// Slices of K (1: no split).
    pub splits: u64,
    /// Inputs per slice, a multiple of the route's K step.
    pub k_chunk: u64,
}

/// The split of a call with `workgroups` output tiles and `k` inputs in
/// steps of `step` (K a multiple of it): the most splits that keep the
/// workgroups within one wave of [`COOP_SMS`], at most [`SPLIT_K_MAX`],
/// each at least [`SPLIT_K_MIN_INPUTS`] inputs, in whole steps; none (one
/// split) past half of [`COOP_SMS`] workgroups. There (run z) a 4-bit
/// linear of 128 rows and 2048 outputs (32 workgroups of the small tile)
/// took as long as one of 512 rows (128 workgroups): a workgroup's time is
/// its steps along K, so K split over idle SMs divides it.
pub fn split_k(workgroups: u64, k: u64, step: u64) -> SplitK {
    split_k_min(workgroups, k, step, SPLIT_K_MIN_INPUTS)
}

/// [`split_k`] with at least `min_inputs` inputs a split.
fn split_k_min(workgroups: u64, k: u64, step: u64, min_inputs: u64) -> SplitK {
    let none = SplitK { splits: 1, k_chunk: k };
    if workgroups == 0 || step == 0 {
        return none;
    }
    let want = (COOP_SMS / workgroups).min(k / min_inputs).min(SPLIT_K_MAX);
    if want <= 1 {
        return none;
    }
    let steps = k / step;
    let chunk = steps.div_ceil(want);
    SplitK { splits: steps.div_ceil(chunk), k_chunk: chunk * step }
}

/// Fewest inputs per split of the large tile. At 2,048 (before run bo) the
/// down projection of a 256-token prompt of the 1B shape ran on the small
/// tile and its O projection (K = 2,048) at 1,024 rows could not split; at
/// 1,024 they run on the large tile in 8 and 2 slices, while the O
/// projection at 512 rows stays on the small tile (its 4 slices of 512
/// gained under 1.5% in runs bl and bm). Run bo (H100, two alternations
/// against the floor of 2,048 in one call) measured the 1B prefill +5.6 /
/// +8.7% at 256 tokens, -0.5 / +1.4% at 512 and +0.8 / +2.3% at 1,024
/// (`tools/device/NOTES.md`).
pub const LARGE_SPLIT_MIN_INPUTS: u64 = 1024;

/// How a 4-bit linear of `m x n x k` runs on the matrix units past the
/// decode rows (K a multiple of [`COOP_SMALL`]'s step).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Q4CoopRoute {
    /// One workgroup a tile over all of K ([`coop_tile`]'s choice).
    Tiles(CoopTile),
    /// K split into slices, a workgroup a tile and slice, their partial
    /// sums then added ([`q4_split_k_steps`]).
    Split(CoopTile, SplitK),
}

/// The route of a 4-bit linear of `m x n x k` on the matrix units: the
/// large tile where [`coop_tile`] takes it; else, of the small tile (split
/// by [`split_k`] when its tiles leave SMs idle) and the large tile split
/// along K (in slices of at least [`LARGE_SPLIT_MIN_INPUTS`], as many as
/// keep its workgroups within one wave), the one whose waves take less
/// time by [`coop_tile`]'s model: a wave's time is its slice's steps times
/// the tile's area, the large tile's at [`COOP_LARGE_TIME_TENTHS`]. The
/// large split takes the down projection of a 512-token prompt of the 1B
/// shape (512 x 2,048 x 8,192: 32 large tiles in 4 slices of 2,048, one
/// wave, against 128 small tiles over all of K; run ba's profile: ~63
/// TFLOP/s on the small tile, 35% of the call).
pub fn q4_coop_route(m: u64, n: u64, k: u64) -> Q4CoopRoute {
    let tile = coop_tile(m, n, k, COOP_Q4_LARGE);
    if tile != COOP_SMALL {
        return Q4CoopRoute::Tiles(tile);
    }
    // Each workgroup takes one slice of K.
    let time = |t: CoopTile, s: SplitK| modeled_time(t, t.workgroups(m, n) * s.splits, s.k_chunk);
    let small = split_k(COOP_SMALL.workgroups(m, n), k, COOP_SMALL.k);
    if k.is_multiple_of(COOP_Q4_LARGE.k) {
        let large = split_k_min(COOP_Q4_LARGE.workgroups(m, n), k, COOP_Q4_LARGE.k, LARGE_SPLIT_MIN_INPUTS);
        if large.splits > 1 && time(COOP_Q4_LARGE, large) < time(COOP_SMALL, small) {
            return Q4CoopRoute::Split(COOP_Q4_LARGE, large);
        }
    }
    if small.splits > 1 { Q4CoopRoute::Split(COOP_SMALL, small) } else { Q4CoopRoute::Tiles(COOP_SMALL) }
}

/// Scratch bytes the split-K partial sums of a 4-bit linear of `m x n`
/// may use at `m` rows or fewer: `splits x M x N` f32, at most
/// [`SPLIT_K_MAX`] splits, and (the splits times the tiles being at most
/// [`COOP_SMS`]) at most that many of the largest tile a split takes: the
/// large one (128 x 256) on the matrix units (`coop`), else 64 x 128; 0
/// on the decode rows. Non-decreasing in `m`, so the lowering at the
/// maximum shapes sizes it for every later one.
pub fn split_k_scratch_bytes(m: u64, n: u64, coop: bool) -> u64 {
    if m <= crate::ops::quant::Q4_GEMV_MAX_ROWS {
        return 0;
    }
    let tile = if coop { COOP_Q4_LARGE } else { COOP_SMALL };
    4 * (SPLIT_K_MAX * m * n).min(COOP_SMS * tile.m * tile.n)
}

/// Whether a 4-bit linear (or fused pair or triple) of `k` inputs and
/// groups of `group_size` (already accepted by the fast routes, so both
/// are multiples of 32) runs on the cooperative-matrix route on a device
/// with `c`'s capabilities.
pub(crate) fn q4_coop(c: &Ctx<'_>, x: &TensorInfo<'_>, k: u64, group_size: u64) -> bool {
    c.caps().coop(x.dtype == ElemType::F16, Product::Q4Weight)
        && k > 0
        && k.is_multiple_of(COOP_SMALL.k)
        && group_size.is_multiple_of(32)
}

/// The cooperative-matrix dispatch of a 4-bit linear (or its SwiGLU pair)
/// that [`q4_coop`] accepted; inputs as [`Q4Route`] says.
pub(crate) fn q4_coop_dispatch(
    x: &TensorInfo<'_>,
    q: &Q4Linear,
    route: Q4Route,
    layout: u32,
    inputs: Vec<Vid>,
    outputs: Vec<Vid>,
) -> Result<Dispatch> {
    let large = match route {
        Q4Route::Linear { .. } => COOP_Q4_LARGE,
        Q4Route::Swiglu => COOP_SWIGLU_LARGE,
    };
    let tile = coop_tile(q.m, q.n, q.k, large);
    let is_large = tile != COOP_SMALL;
    let tiles_n = q.n.div_ceil(tile.n);
    let mut params = Uniform::new()
        .u32(to_u32("M", q.m)?)
        .u32(to_u32("N", q.n)?)
        .u32(to_u32("K", q.k)?)
        .u32(to_u32("padded N", q.n_pad)?)
        .u32(to_u32("group_size", q.group_size)?);
    let family = match (route, is_large) {
        (Q4Route::Linear { has_bias }, large) => {
            params = params.u32(u32::from(has_bias));
            if large { Family::Q4GemmCoopLarge } else { Family::Q4GemmCoop }
        }
        (Q4Route::Swiglu, true) => Family::Q4GemmCoopSwigluLarge,
        (Q4Route::Swiglu, false) => Family::Q4GemmCoopSwiglu,
    };
    Ok(Dispatch {
        shader: float_shader(family, x, 0, "input")?.into(),
        entry: "main",
        inputs,
        outputs,
        params: params.u32(to_u32("tiles along N", tiles_n)?).u32(layout).finish(),
        workgroups: grid_groups(tile.workgroups(q.m, q.n))?,
    })
}

/// The split-K steps of a bias-optional 4-bit linear past the decode rows
/// (`q4_gemm_coop_splitk.wgsl` or `q4_gemm_coop_large_splitk.wgsl` on the
/// matrix units when [`q4_coop`] accepts it, as [`q4_coop_route`] says;
/// else `q4_gemm_splitk.wgsl` as [`split_k`] says; then
/// `gemm_splitk_combine.wgsl`), or `None` when the route does not split
/// it or no scratch is given. Inputs `[x, weights, scales, bias or
/// scales]`.
#[expect(clippy::too_many_arguments, reason = "one linear's route, sizes and buffers")]
pub(crate) fn q4_split_k_steps(
    c: &Ctx<'_>,
    x: &TensorInfo<'_>,
    q: &Q4Linear,
    coop: bool,
    has_bias: bool,
    layout: u32,
    inputs: &[Vid],
    out: Vid,
) -> Result<Option<Vec<Step>>> {
    let Some(scratch) = c.scratch(SPLIT_K_SCRATCH) else { return Ok(None) };
    let (bm, bn, split, family) = if coop {
        match q4_coop_route(q.m, q.n, q.k) {
            Q4CoopRoute::Tiles(_) => return Ok(None),
            Q4CoopRoute::Split(t, split) if t == COOP_SMALL => (t.m, t.n, split, Family::Q4GemmCoopSplitk),
            Q4CoopRoute::Split(t, split) => (t.m, t.n, split, Family::Q4GemmCoopLargeSplitk),
        }
    } else {
        let t = crate::ops::quant::Q4_GEMM_TILE;
        let tiles = q.m.div_ceil(t) * q.n.div_ceil(t);
        (t, t, split_k(tiles, q.k, crate::ops::quant::Q4_GEMM_TK), Family::Q4GemmSplitk)
    };
    let (tiles_n, tiles) = (q.n.div_ceil(bn), q.m.div_ceil(bm) * q.n.div_ceil(bn));
    if split.splits <= 1 || split.splits * q.m * q.n * 4 > split_k_scratch_bytes(q.m, q.n, coop) {
        return Ok(None);
    }
    let params = Uniform::new()
        .u32(to_u32("M", q.m)?)
        .u32(to_u32("N", q.n)?)
        .u32(to_u32("K", q.k)?)
        .u32(to_u32("padded N", q.n_pad)?)
        .u32(to_u32("group_size", q.group_size)?)
        .u32(to_u32("tiles along N", tiles_n)?)
        .u32(layout)
        .u32(to_u32("inputs per split", split.k_chunk)?)
        .u32(to_u32("tiles", tiles)?)
        .finish();
    let partial = Dispatch {
        shader: float_shader(family, x, 0, "input")?.into(),
        entry: "main",
        inputs: inputs[..3].to_vec(),
        outputs: vec![scratch],
        params,
        workgroups: grid_groups(split.splits * tiles)?,
    };
    let numel = q.m * q.n;
    let combine = Dispatch {
        shader: float_shader(Family::GemmSplitkCombine, x, 0, "input")?.into(),
        entry: "main",
        inputs: vec![scratch, inputs[3]],
        outputs: vec![out],
        params: Uniform::new()
            .u32(to_u32("output elements", numel)?)
            .u32(to_u32("N", q.n)?)
            .u32(to_u32("splits", split.splits)?)
            .u32(u32::from(has_bias))
            .finish(),
        workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
    };
    Ok(Some(vec![Step::Dispatch(partial), Step::Dispatch(combine)]))
}

/// The cooperative-matrix dispatch of a fused 4-bit Q/K/V that [`q4_coop`]
/// accepted (`q4_gemm_coop_qkv.wgsl`, `q4_gemm_coop_qkv_large.wgsl`): the
/// tiles along N are Q's, then K's, then V's, so the three projections
/// run in one dispatch with no barrier between them. Both tiles are
/// [`COOP_SMALL`]`.n` wide, so [`coop_tile`] chooses from the workgroups
/// of the concatenated tiles. `layout` bit j: weight j is word-major;
/// inputs `[x, w_q, s_q, w_k, s_k, w_v, s_v]`, outputs `[q, k, v]`.
pub(crate) fn q4_coop_qkv_dispatch(
    x: &TensorInfo<'_>,
    q: &Q4Qkv,
    layout: u32,
    inputs: Vec<Vid>,
    outputs: Vec<Vid>,
) -> Result<Dispatch> {
    let tiles = q.ns.map(|n| n.div_ceil(COOP_SMALL.n));
    let tiles_n: u64 = tiles.iter().sum();
    let tile = coop_tile(q.m, tiles_n * COOP_SMALL.n, q.k, COOP_QKV_LARGE);
    debug_assert_eq!(tile.n, COOP_SMALL.n, "the QKV tiles along N are one width");
    let family = if tile == COOP_SMALL { Family::Q4GemmCoopQkv } else { Family::Q4GemmCoopQkvLarge };
    Ok(Dispatch {
        shader: float_shader(family, x, 0, "input")?.into(),
        entry: "main",
        inputs,
        outputs,
        params: q.gemm_params(tiles, layout)?,
        workgroups: grid_groups(q.m.div_ceil(tile.m) * tiles_n)?,
    })
}

/// A dense linear `out [M, N] = x [M, K] @ w [N, K]^T (+ bias [N])`, both
/// operands contiguous, as `aten.linear` holds it.
pub(crate) struct DenseLinear<'a> {
    pub x: TensorInfo<'a>,
    pub w: TensorInfo<'a>,
    /// The bias and whether it varies along N only (strides `[0, 0, 1]`).
    pub bias: Option<(TensorInfo<'a>, bool)>,
    pub out: TensorInfo<'a>,
    pub out_shape: &'a [u64],
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub epilogue: Epilogue,
}

/// The cooperative-matrix route of a dense linear, when the device has it
/// and the call fits it (more rows than a GEMV takes, K a multiple of
/// [`COOP_SMALL`]'s step, no activation epilogue, a bias along N only); `None`
/// sends the call to the other routes.
pub(crate) fn linear_coop(c: &Ctx<'_>, l: &DenseLinear<'_>) -> Result<Option<Lowered>> {
    let fits = c.caps().coop(l.x.dtype == ElemType::F16, Product::Dense)
        && l.m > crate::ops::matmul::GEMV_MAX_ROWS
        && l.k > 0
        && l.k.is_multiple_of(COOP_SMALL.k)
        && l.epilogue == Epilogue::NONE
        && l.bias.as_ref().is_none_or(|(_, along_n)| *along_n)
        && l.w.dtype == l.x.dtype
        && l.out.dtype == l.x.dtype
        && l.bias.as_ref().is_none_or(|(b, _)| b.dtype == l.x.dtype);
    if !fits || l.m * l.n == 0 {
        return Ok(None);
    }
    let tile = coop_tile(l.m, l.n, l.k, COOP_DENSE_LARGE);
    let tiles_n = l.n.div_ceil(tile.n);
    let params = Uniform::new()
        .u32(to_u32("M", l.m)?)
        .u32(to_u32("N", l.n)?)
        .u32(to_u32("K", l.k)?)
        .u32(u32::from(l.bias.is_some()))
        .u32(to_u32("tiles along N", tiles_n)?)
        .finish();
    let step = Step::Dispatch(Dispatch {
        shader: float_shader(
            if tile == COOP_SMALL { Family::MatmulCoop } else { Family::MatmulCoopLarge },
            &l.x,
            0,
            "input",
        )?
        .into(),
        entry: "main",
        inputs: vec![l.x.id, l.w.id, l.bias.as_ref().map_or(l.w.id, |(b, _)| b.id)],
        outputs: vec![l.out.id],
        params,
        workgroups: grid_groups(tile.workgroups(l.m, l.n))?,
    });
    Ok(Some(Lowered { shapes: vec![(l.out.id, l.out_shape.to_vec())], steps: vec![step] }))
}
