//! GEMM routes on cooperative matrices (tensor cores), taken where the
//! device has them ([`crate::caps::DeviceCaps`]): the 4-bit weight linears
//! (`q4_gemm_coop.wgsl`, `q4_gemm_coop_swiglu.wgsl`; also every projection
//! of the fused QKV form) and dense `aten.linear` (`matmul_coop.wgsl`;
//! float32 at precision F16 only, converted to f16 while staged), each in a
//! small (64 x 128) and a large tile (`*_large.wgsl`), [`coop_tile`]
//! choosing by the workgroups the large one would give.
//! Operands are f16 on the matrix units (float32 activations are rounded
//! as they are staged, as [`crate::caps::Precision`] allows), accumulation
//! is f32. Elsewhere the routes of `quant.rs` and `matmul.rs` run.

use crate::caps::Product;
use crate::error::Result;
use crate::generated::shaders::Family;
use crate::ops::fused::Epilogue;
use crate::ops::quant::{Q4Linear, Q4Route};
use crate::plan::{
    Ctx, Dispatch, ElemType, Lowered, Step, TensorInfo, Uniform, Vid, float_shader, grid_groups, to_u32,
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
/// The large tile of a 4-bit linear (`q4_gemm_coop_large.wgsl`).
pub const COOP_Q4_LARGE: CoopTile = CoopTile { m: 128, n: 128, k: 64 };
/// The large tile of the 4-bit SwiGLU pair (`q4_gemm_coop_swiglu_large.wgsl`).
pub const COOP_SWIGLU_LARGE: CoopTile = CoopTile { m: 128, n: 128, k: 32 };
/// The large tile of a dense linear (`matmul_coop_large.wgsl`).
pub const COOP_DENSE_LARGE: CoopTile = CoopTile { m: 256, n: 128, k: 32 };
/// Fewest workgroups of the large tile for a call to take it: one per SM
/// of a 132-SM H200. There (`coop_probe`, run y) the 128 x 128 4-bit tile
/// with 64 workgroups ran at 0.7x the small tile's speed, with 256 at
/// 1.3x; between them nothing is measured.
pub const COOP_LARGE_MIN_WORKGROUPS: u64 = 132;

/// The tile a cooperative-matrix call of `m x n x k` takes (K already a
/// multiple of [`COOP_SMALL`]'s step): `large` when K is a multiple of its
/// step and it gives at least [`COOP_LARGE_MIN_WORKGROUPS`] workgroups,
/// else the small tile. Either tile bounds every index by M, N and K (rows
/// past M and columns past N are staged as zeros and never written, K is a
/// multiple of the step), so any M and N are in bounds.
pub fn coop_tile(m: u64, n: u64, k: u64, large: CoopTile) -> CoopTile {
    if k.is_multiple_of(large.k) && large.workgroups(m, n) >= COOP_LARGE_MIN_WORKGROUPS { large } else { COOP_SMALL }
}

/// Whether a 4-bit linear of `q` (already accepted by the fast routes, so
/// K and the group are multiples of 32) runs on the cooperative-matrix
/// route on a device with `c`'s capabilities.
pub(crate) fn q4_coop(c: &Ctx<'_>, x: &TensorInfo<'_>, q: &Q4Linear) -> bool {
    c.caps().coop(x.dtype == ElemType::F16, Product::Q4Weight)
        && q.k > 0
        && q.k.is_multiple_of(COOP_SMALL.k)
        && q.group_size.is_multiple_of(32)
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
