//! Matrix products: `aten.mm`, `aten.bmm`, `aten.addmm`, `aten.linear`.
//! Every variant is one strided batched matrix product with an optional
//! broadcast bias; transposed and broadcast operands are expressed through
//! strides, never copied. The route is chosen from the live shape: few rows
//! (`M <= GEMV_MAX_ROWS`, decode) go to the split-K GEMV (`gemv.wgsl`), the
//! rest to the tiled GEMM (`matmul.wgsl`). Both take an activation
//! epilogue, used by the fused `etwgpu.linear_act` and `etwgpu.addmm_act`.

use crate::error::{Error, Result};
use crate::generated::shaders::Family;
use crate::ops::elementwise::{broadcast_shapes, broadcast_strides};
use crate::ops::fused::Epilogue;
use crate::ops::gemm::COOP_SMS;
use crate::plan::{
    Ctx, Dispatch, Lowered, MATMUL_TILE, Step, TensorInfo, Uniform, float_shader, grid_groups, same_dtype, to_u32,
};

/// Strides `[batch, row, col]` of one operand, in elements.
type Strides = [u64; 3];

/// One GEMM: `out[b] = alpha * A[b] @ B[b] + beta * bias[b]`.
struct Gemm<'a> {
    a: TensorInfo<'a>,
    a_strides: Strides,
    b: TensorInfo<'a>,
    b_strides: Strides,
    bias: Option<(TensorInfo<'a>, Strides, usize)>,
    out: TensorInfo<'a>,
    out_idx: usize,
    out_shape: Vec<u64>,
    batch: u64,
    m: u64,
    n: u64,
    k: u64,
    alpha: f64,
    beta: f64,
    epilogue: Epilogue,
}

/// Up to this many rows per batch, the GEMV route is used.
pub const GEMV_MAX_ROWS: u64 = 4;

/// The dense-linear GEMV (`linear_gemv.wgsl`) for `g`, when it is one:
/// one batch of few rows, x rows and weight rows `[N, K]` contiguous with K
/// a multiple of 4, no scaling or activation, a bias (if any) along N only.
fn linear_gemv(g: &Gemm<'_>) -> Result<Option<Lowered>> {
    let bias_along_n = match &g.bias {
        None => true,
        Some((_, s, _)) => *s == [0, 0, 1] && g.beta == 1.0,
    };
    let fits = g.batch == 1
        && g.m <= GEMV_MAX_ROWS
        && g.k.is_multiple_of(4)
        && g.a_strides[1..] == [g.k, 1]
        && g.b_strides[1..] == [1, g.k]
        && g.alpha == 1.0
        && g.epilogue == Epilogue::NONE
        && bias_along_n;
    if !fits || g.m * g.n == 0 {
        return Ok(None);
    }
    let cols = gemv_cols(g.n, g.k);
    let params = Uniform::new()
        .u32(to_u32("M", g.m)?)
        .u32(to_u32("N", g.n)?)
        .u32(to_u32("K", g.k)?)
        .u32(u32::from(g.bias.is_some()))
        .u32(to_u32("columns a workgroup", cols)?)
        .finish();
    let groups = g.n.div_ceil(cols);
    let step = Step::Dispatch(Dispatch {
        shader: float_shader(Family::LinearGemv, &g.a, 0, "self")?.into(),
        entry: "main",
        inputs: vec![g.a.id, g.b.id, g.bias.as_ref().map_or(g.b.id, |(t, _, _)| t.id)],
        outputs: vec![g.out.id],
        params,
        workgroups: grid_groups(groups)?,
    });
    Ok(Some(Lowered { shapes: vec![(g.out.id, g.out_shape.clone())], steps: vec![step] }))
}

/// Invocations per workgroup of the streaming float GEMVs (`WG` in
/// `common/gemv_lanes.wgsl`).
const GEMV_WG: u64 = 256;

/// Output columns per workgroup of the streaming float GEMVs
/// (`linear_gemv.wgsl`, `gemv_qkv_vec4.wgsl`, `gemv_swiglu_vec4.wgsl`;
/// `p.cols` there, [`GEMV_WG`] / `p.cols` invocations a column) for `columns`
/// outputs of `k` inputs: 8, or fewer (4, then 2) where 8 would leave
/// fewer workgroups than [`COOP_SMS`] and each of the column's invocations
/// still reads at least 4 `vec4` words (one whole step of the unrolled
/// loads). So a 512-wide projection of 2,048 inputs runs on 256
/// workgroups instead of 64, with four times the loads in flight; the
/// narrow layers of short K (SmolLM2's 576 inputs) keep 8.
pub(crate) fn gemv_cols(columns: u64, k: u64) -> u64 {
    let mut cols = 8;
    // Halve while too few workgroups and the halved column's invocations
    // would each still read 4 words (K / 4 words a row).
    while cols > 2 && columns.div_ceil(cols) < COOP_SMS && k / 4 >= 4 * (GEMV_WG / (cols / 2)) {
        cols /= 2;
    }
    cols
}

fn gemm(g: Gemm<'_>) -> Result<Lowered> {
    same_dtype(&g.b, g.a.dtype, 1, "mat2")?;
    same_dtype(&g.out, g.a.dtype, g.out_idx, "out")?;
    if let Some((bias, _, bias_idx)) = &g.bias {
        same_dtype(bias, g.a.dtype, *bias_idx, "bias")?;
    }
    if let Some(l) = linear_gemv(&g)? {
        return Ok(l);
    }
    let gemv = g.m <= GEMV_MAX_ROWS;
    let shader = float_shader(if gemv { Family::Gemv } else { Family::Matmul }, &g.a, 0, "self")?;
    same_dtype(&g.b, g.a.dtype, 1, "mat2")?;
    same_dtype(&g.out, g.a.dtype, g.out_idx, "out")?;
    if let Some((bias, _, bias_idx)) = &g.bias {
        same_dtype(bias, g.a.dtype, *bias_idx, "bias")?;
    }
    let mut steps = Vec::new();
    if g.batch * g.m * g.n > 0 {
        let (bias_id, bias_strides, has_bias) = match &g.bias {
            Some((t, s, _)) => (t.id, *s, 1),
            None => (g.a.id, [0; 3], 0),
        };
        let u = |what, x| to_u32(what, x);
        let params = Uniform::new()
            .u32(u("M", g.m)?)
            .u32(u("N", g.n)?)
            .u32(u("K", g.k)?)
            .u32(has_bias)
            .u32(u("stride", g.a_strides[0])?)
            .u32(u("stride", g.a_strides[1])?)
            .u32(u("stride", g.a_strides[2])?)
            .u32(u("stride", g.b_strides[0])?)
            .u32(u("stride", g.b_strides[1])?)
            .u32(u("stride", g.b_strides[2])?)
            .u32(u("stride", bias_strides[0])?)
            .u32(u("stride", bias_strides[1])?)
            .u32(u("stride", bias_strides[2])?)
            .u32(u("batch", g.batch)?)
            .f32(g.alpha as f32)
            .f32(g.beta as f32)
            .u32(g.epilogue.op as u32)
            .f32(g.epilogue.p0)
            .f32(g.epilogue.p1)
            .finish();
        let workgroups = if gemv {
            // One workgroup per output element, folded into x and y.
            let total = g.batch * g.m * g.n;
            grid_groups(total)?
        } else {
            let tile = u64::from(MATMUL_TILE);
            [
                u("workgroups along N", g.n.div_ceil(tile))?,
                u("workgroups along M", g.m.div_ceil(tile))?,
                u("batch", g.batch)?,
            ]
        };
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![g.a.id, g.b.id, bias_id],
            outputs: vec![g.out.id],
            params,
            workgroups,
        }));
    }
    Ok(Lowered { shapes: vec![(g.out.id, g.out_shape)], steps })
}

fn shape_err(arg_idx: usize, name: &'static str, expected: String, t: &TensorInfo<'_>) -> Error {
    Error::Shape { arg_idx, name, expected, found: t.shape.to_vec() }
}

/// Bias strides `[0, row, col]` for a bias broadcast to `[m, n]`.
fn bias_strides(bias: &TensorInfo<'_>, m: u64, n: u64, arg_idx: usize) -> Result<Strides> {
    let target = [m, n];
    if bias.shape.len() > 2 || broadcast_shapes(bias.shape, &target).as_deref() != Some(&target[..]) {
        return Err(shape_err(arg_idx, "bias", format!("broadcastable to [{m}, {n}]"), bias));
    }
    let s = broadcast_strides(bias.shape, &target);
    Ok([0, s[0], s[1]])
}

/// `aten.mm.default(self [M,K], mat2 [K,N], →out [M,N])`.
pub fn mm(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let a = c.tensor(0, "self")?;
    let b = c.tensor(1, "mat2")?;
    let out = c.tensor(2, "out")?;
    let [m, k] = a.shape[..] else { return Err(shape_err(0, "self", "rank 2".into(), &a)) };
    let [k2, n] = b.shape[..] else { return Err(shape_err(1, "mat2", "rank 2".into(), &b)) };
    if k2 != k {
        return Err(shape_err(1, "mat2", format!("[{k}, N]"), &b));
    }
    gemm(Gemm {
        a,
        a_strides: [0, k, 1],
        b,
        b_strides: [0, n, 1],
        bias: None,
        out,
        out_idx: 2,
        out_shape: vec![m, n],
        batch: 1,
        m,
        n,
        k,
        alpha: 1.0,
        beta: 0.0,
        epilogue: Epilogue::NONE,
    })
}

/// `aten.bmm.default(self [B,M,K], mat2 [B,K,N], →out [B,M,N])`.
pub fn bmm(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let a = c.tensor(0, "self")?;
    let b = c.tensor(1, "mat2")?;
    let out = c.tensor(2, "out")?;
    let [batch, m, k] = a.shape[..] else { return Err(shape_err(0, "self", "rank 3".into(), &a)) };
    let [b2, k2, n] = b.shape[..] else { return Err(shape_err(1, "mat2", "rank 3".into(), &b)) };
    if b2 != batch || k2 != k {
        return Err(shape_err(1, "mat2", format!("[{batch}, {k}, N]"), &b));
    }
    gemm(Gemm {
        a,
        a_strides: [m * k, k, 1],
        b,
        b_strides: [k * n, n, 1],
        bias: None,
        out,
        out_idx: 2,
        out_shape: vec![batch, m, n],
        batch,
        m,
        n,
        k,
        alpha: 1.0,
        beta: 0.0,
        epilogue: Epilogue::NONE,
    })
}

/// `aten.addmm.default(self (bias), mat1 [M,K], mat2 [K,N], beta, alpha,
/// →out [M,N])`: `beta * self + alpha * mat1 @ mat2`.
pub fn addmm(c: &Ctx<'_>) -> Result<Lowered> {
    addmm_with(c, Epilogue::NONE)
}

/// [`addmm`] with an activation epilogue (`etwgpu.addmm_act`).
pub fn addmm_with(c: &Ctx<'_>, epilogue: Epilogue) -> Result<Lowered> {
    c.expect_args(6)?;
    let bias = c.tensor(0, "self")?;
    let a = c.tensor(1, "mat1")?;
    let b = c.tensor(2, "mat2")?;
    let beta = c.num(3, "beta")?;
    let alpha = c.num(4, "alpha")?;
    let out = c.tensor(5, "out")?;
    let [m, k] = a.shape[..] else { return Err(shape_err(1, "mat1", "rank 2".into(), &a)) };
    let [k2, n] = b.shape[..] else { return Err(shape_err(2, "mat2", "rank 2".into(), &b)) };
    if k2 != k {
        return Err(shape_err(2, "mat2", format!("[{k}, N]"), &b));
    }
    let bs = bias_strides(&bias, m, n, 0)?;
    gemm(Gemm {
        a,
        a_strides: [0, k, 1],
        b,
        b_strides: [0, n, 1],
        bias: Some((bias, bs, 0)),
        out,
        out_idx: 5,
        out_shape: vec![m, n],
        batch: 1,
        m,
        n,
        k,
        alpha,
        beta,
        epilogue,
    })
}

/// `aten.linear.default(input [..., K], weight [N, K], bias? [N],
/// →out [..., N])`. Leading dims of the input are flattened into rows.
pub fn linear(c: &Ctx<'_>) -> Result<Lowered> {
    linear_with(c, Epilogue::NONE)
}

/// [`linear`] with an activation epilogue (`etwgpu.linear_act`).
pub fn linear_with(c: &Ctx<'_>, epilogue: Epilogue) -> Result<Lowered> {
    c.expect_args(4)?;
    let a = c.tensor(0, "input")?;
    let out = c.tensor(3, "out")?;
    linear_into(c, &a, &out, epilogue)
}

/// [`linear_with`] of the input `a` into `out`, the weight and bias
/// (arguments 1 and 2) read from `c` (a fused op hands the attention's
/// output here, `etwgpu.sdpa_rope_linear`).
pub(crate) fn linear_into(
    c: &Ctx<'_>,
    a: &TensorInfo<'_>,
    out: &TensorInfo<'_>,
    epilogue: Epilogue,
) -> Result<Lowered> {
    let (a, out) = (*a, *out);
    let w = c.tensor(1, "weight")?;
    let bias = c.opt_tensor(2, "bias")?;
    let Some((&k, lead)) = a.shape.split_last() else {
        return Err(shape_err(0, "input", "rank >= 1".into(), &a));
    };
    let [n, k2] = w.shape[..] else { return Err(shape_err(1, "weight", "rank 2".into(), &w)) };
    if k2 != k {
        return Err(shape_err(1, "weight", format!("[N, {k}]"), &w));
    }
    let m: u64 = lead.iter().product();
    let bias = match bias {
        Some(t) => {
            let s = bias_strides(&t, m, n, 2)?;
            Some((t, s, 2))
        }
        None => None,
    };
    let mut out_shape = lead.to_vec();
    out_shape.push(n);
    let dense = crate::ops::gemm::DenseLinear {
        x: a,
        w,
        bias: bias.as_ref().map(|(t, s, _)| (*t, *s == [0, 0, 1])),
        out,
        out_shape: &out_shape,
        m,
        n,
        k,
        epilogue,
    };
    if let Some(l) = crate::ops::gemm::linear_coop(c, &dense)? {
        return Ok(l);
    }
    gemm(Gemm {
        a,
        a_strides: [0, k, 1],
        b: w,
        b_strides: [0, 1, k],
        bias,
        out,
        out_idx: 3,
        out_shape,
        batch: 1,
        m,
        n,
        k,
        alpha: 1.0,
        beta: 1.0,
        epilogue,
    })
}
