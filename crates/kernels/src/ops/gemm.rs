//! GEMM routes on cooperative matrices (tensor cores), taken where the
//! device has them ([`crate::caps::DeviceCaps`]): the 4-bit weight linears
//! (`q4_gemm_coop.wgsl`, `q4_gemm_coop_swiglu.wgsl`; also every projection
//! of the fused QKV form) and dense `aten.linear` (float16:
//! `matmul_coop_direct.wgsl`, fragments loaded from the buffers; float32
//! at precision F16: `matmul_coop.wgsl`, converted to f16 while staged).
//! Operands are f16 on the matrix units (float32 activations are rounded
//! as they are staged, as [`crate::caps::Precision`] allows), accumulation
//! is f32. Elsewhere the routes of `quant.rs` and `matmul.rs` run.

use crate::error::Result;
use crate::generated::shaders::Family;
use crate::ops::fused::Epilogue;
use crate::ops::quant::{Q4Linear, Q4Route};
use crate::plan::{
    Ctx, Dispatch, ElemType, Lowered, Step, TensorInfo, Uniform, Vid, float_shader, grid_groups, to_u32,
};

/// Output rows per workgroup of the cooperative-matrix kernels.
pub const COOP_TILE_M: u64 = 64;
/// Output columns per workgroup of the cooperative-matrix kernels.
pub const COOP_TILE_N: u64 = 128;
/// Inputs per step along K of the cooperative-matrix kernels: K (and a
/// 4-bit linear's group) must be a multiple of it.
pub const COOP_TILE_K: u64 = 32;

/// Whether a 4-bit linear of `q` (already accepted by the fast routes, so
/// K and the group are multiples of 32) runs on the cooperative-matrix
/// route on a device with `c`'s capabilities.
pub(crate) fn q4_coop(c: &Ctx<'_>, x: &TensorInfo<'_>, q: &Q4Linear) -> bool {
    c.caps().coop(x.dtype == ElemType::F16)
        && q.k.is_multiple_of(COOP_TILE_K)
        && q.group_size.is_multiple_of(COOP_TILE_K)
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
    let tiles_n = q.n.div_ceil(COOP_TILE_N);
    let mut params = Uniform::new()
        .u32(to_u32("M", q.m)?)
        .u32(to_u32("N", q.n)?)
        .u32(to_u32("K", q.k)?)
        .u32(to_u32("padded N", q.n_pad)?)
        .u32(to_u32("group_size", q.group_size)?);
    let family = match route {
        Q4Route::Linear { has_bias } => {
            params = params.u32(u32::from(has_bias));
            Family::Q4GemmCoop
        }
        Q4Route::Swiglu => Family::Q4GemmCoopSwiglu,
    };
    Ok(Dispatch {
        shader: float_shader(family, x, 0, "input")?.into(),
        entry: "main",
        inputs,
        outputs,
        params: params.u32(to_u32("tiles along N", tiles_n)?).u32(layout).finish(),
        workgroups: grid_groups(q.m.div_ceil(COOP_TILE_M) * tiles_n)?,
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
/// [`COOP_TILE_K`], no activation epilogue, a bias along N only); `None`
/// sends the call to the other routes.
pub(crate) fn linear_coop(c: &Ctx<'_>, l: &DenseLinear<'_>) -> Result<Option<Lowered>> {
    let fits = c.caps().coop(l.x.dtype == ElemType::F16)
        && l.m > crate::ops::matmul::GEMV_MAX_ROWS
        && l.k.is_multiple_of(COOP_TILE_K)
        && l.epilogue == Epilogue::NONE
        && l.bias.as_ref().is_none_or(|(_, along_n)| *along_n)
        && l.w.dtype == l.x.dtype
        && l.out.dtype == l.x.dtype
        && l.bias.as_ref().is_none_or(|(b, _)| b.dtype == l.x.dtype);
    if !fits || l.m * l.n == 0 {
        return Ok(None);
    }
    let tiles_n = l.n.div_ceil(COOP_TILE_N);
    let params = Uniform::new()
        .u32(to_u32("M", l.m)?)
        .u32(to_u32("N", l.n)?)
        .u32(to_u32("K", l.k)?)
        .u32(u32::from(l.bias.is_some()))
        .u32(to_u32("tiles along N", tiles_n)?)
        .finish();
    let step = Step::Dispatch(Dispatch {
        shader: float_shader(
            if l.x.dtype == ElemType::F16 { Family::MatmulCoopDirect } else { Family::MatmulCoop },
            &l.x,
            0,
            "input",
        )?
        .into(),
        entry: "main",
        inputs: vec![l.x.id, l.w.id, l.bias.as_ref().map_or(l.w.id, |(b, _)| b.id)],
        outputs: vec![l.out.id],
        params,
        workgroups: grid_groups(l.m.div_ceil(COOP_TILE_M) * tiles_n)?,
    });
    Ok(Some(Lowered { shapes: vec![(l.out.id, l.out_shape.to_vec())], steps: vec![step] }))
}
