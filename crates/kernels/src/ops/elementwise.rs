//! Elementwise ops: broadcasting binary arithmetic (`binary.wgsl`) and
//! unary functions and activations (`unary.wgsl`).

use crate::error::{Error, Result};
use crate::generated::shaders::{Family, ShaderId, Variant};
use crate::plan::{
    Ctx, Dispatch, ElemType, Lowered, Step, TensorInfo, Uniform, WG_ELEMENTWISE, check_rank, contiguous_strides,
    dims_u32, float_shader, grid_1d, same_dtype, to_u32,
};

/// A binary op of `binary.wgsl`; the discriminant is the shader's op code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    /// `a + alpha * b`.
    Add = 0,
    /// `a - alpha * b`.
    Sub = 1,
    /// `a * b`.
    Mul = 2,
    /// `a / b`.
    Div = 3,
    /// `floor(a / b)`.
    FloorDiv = 4,
    /// `trunc(a / b)`.
    TruncDiv = 5,
    /// `a ** b`.
    Pow = 6,
    /// `min(a, b)`.
    Minimum = 7,
    /// `max(a, b)`.
    Maximum = 8,
}

/// A unary op of `unary.wgsl`; the discriminant is the shader's op code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    /// Identity.
    Copy = 0,
    /// `max(x, 0)`.
    Relu = 1,
    /// Exact (erf) GELU.
    GeluErf = 2,
    /// tanh-approximated GELU.
    GeluTanh = 3,
    /// `exp`.
    Exp = 4,
    /// Logistic sigmoid.
    Sigmoid = 5,
    /// `tanh`.
    Tanh = 6,
    /// `-x`.
    Neg = 7,
    /// `|x|`.
    Abs = 8,
    /// `sqrt`.
    Sqrt = 9,
    /// `1 / sqrt`.
    Rsqrt = 10,
    /// `sin`.
    Sin = 11,
    /// `cos`.
    Cos = 12,
    /// Natural log.
    Log = 13,
    /// `min(max(x, p0), p1)`.
    Clamp = 14,
    /// `x >= 0 ? x : p0 * x`.
    LeakyRelu = 15,
    /// `x * relu6(x + 3) / 6`.
    Hardswish = 16,
    /// Round half to even.
    Round = 17,
    /// `x ** p0`.
    PowScalar = 18,
    /// `relu6(x + 3) / 6`.
    Hardsigmoid = 19,
    /// `x * sigmoid(x)`: only fused kernels use it (exports decompose SiLU
    /// into `sigmoid` and `mul`).
    Silu = 20,
    /// `|x| > p0 ? x : 0`.
    Hardshrink = 21,
    /// Base-10 log.
    Log10 = 22,
}

impl UnaryOp {
    /// Every unary op, in op-code order.
    pub const ALL: [UnaryOp; 23] = [
        UnaryOp::Copy,
        UnaryOp::Relu,
        UnaryOp::GeluErf,
        UnaryOp::GeluTanh,
        UnaryOp::Exp,
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Log,
        UnaryOp::Clamp,
        UnaryOp::LeakyRelu,
        UnaryOp::Hardswish,
        UnaryOp::Round,
        UnaryOp::PowScalar,
        UnaryOp::Hardsigmoid,
        UnaryOp::Silu,
        UnaryOp::Hardshrink,
        UnaryOp::Log10,
    ];

    /// Its name in fused expressions (`etwgpu.fused_elementwise`).
    pub const fn name(self) -> &'static str {
        match self {
            UnaryOp::Copy => "copy",
            UnaryOp::Relu => "relu",
            UnaryOp::GeluErf => "gelu",
            UnaryOp::GeluTanh => "gelu_tanh",
            UnaryOp::Exp => "exp",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Log => "log",
            UnaryOp::Clamp => "clamp",
            UnaryOp::LeakyRelu => "leaky_relu",
            UnaryOp::Hardswish => "hardswish",
            UnaryOp::Round => "round",
            UnaryOp::PowScalar => "pow_scalar",
            UnaryOp::Hardsigmoid => "hardsigmoid",
            UnaryOp::Silu => "silu",
            UnaryOp::Hardshrink => "hardshrink",
            UnaryOp::Log10 => "log10",
        }
    }

    /// The op named `name` in fused expressions.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|op| op.name() == name)
    }

    /// How many scalar parameters (`p0`, `p1`) it takes.
    pub const fn n_params(self) -> usize {
        match self {
            UnaryOp::Clamp => 2,
            UnaryOp::LeakyRelu | UnaryOp::PowScalar | UnaryOp::Hardshrink => 1,
            _ => 0,
        }
    }
}

impl BinaryOp {
    /// Every binary op, in op-code order.
    pub const ALL: [BinaryOp; 9] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::FloorDiv,
        BinaryOp::TruncDiv,
        BinaryOp::Pow,
        BinaryOp::Minimum,
        BinaryOp::Maximum,
    ];

    /// Its name in fused expressions (`etwgpu.fused_elementwise`).
    pub const fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::FloorDiv => "floor_div",
            BinaryOp::TruncDiv => "trunc_div",
            BinaryOp::Pow => "pow",
            BinaryOp::Minimum => "minimum",
            BinaryOp::Maximum => "maximum",
        }
    }

    /// The op named `name` in fused expressions.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|op| op.name() == name)
    }

    /// Whether it takes `alpha` (`a op alpha * b`).
    pub const fn has_alpha(self) -> bool {
        matches!(self, BinaryOp::Add | BinaryOp::Sub)
    }
}

/// Broadcasts two shapes NumPy-style (right-aligned), or `None`.
pub fn broadcast_shapes(a: &[u64], b: &[u64]) -> Option<Vec<u64>> {
    let rank = a.len().max(b.len());
    (0..rank)
        .map(|d| {
            let da = (d + a.len()).checked_sub(rank).map_or(1, |i| a[i]);
            let db = (d + b.len()).checked_sub(rank).map_or(1, |i| b[i]);
            match (da, db) {
                (x, y) if x == y => Some(x),
                (1, y) => Some(y),
                (x, 1) => Some(x),
                _ => None,
            }
        })
        .collect()
}

/// Strides (in elements) that read a contiguous tensor of `shape` as if it
/// were broadcast to `out` (0 along broadcast dims). `shape` must
/// broadcast to `out`.
pub fn broadcast_strides(shape: &[u64], out: &[u64]) -> Vec<u64> {
    let own = contiguous_strides(shape);
    let lead = out.len() - shape.len();
    (0..out.len())
        .map(|d| match d.checked_sub(lead) {
            Some(i) if shape[i] == out[d] => own[i],
            _ => 0,
        })
        .collect()
}

fn to_u32s(what: &'static str, xs: &[u64]) -> Result<Vec<u32>> {
    xs.iter().map(|&x| to_u32(what, x)).collect()
}

/// The dispatch of `out = op(a, b)` with broadcasting.
fn binary_dispatch(
    op: BinaryOp,
    alpha: f64,
    a: &TensorInfo<'_>,
    b: &TensorInfo<'_>,
    out: &TensorInfo<'_>,
) -> Result<Lowered> {
    let int_math = a.dtype == ElemType::I32;
    let shader = if int_math {
        if op == BinaryOp::Div {
            return Err(Error::DType {
                arg_idx: 0,
                name: "self",
                expected: "float32 or float16 (true division)",
                found: a.dtype,
            });
        }
        if alpha.fract() != 0.0 || alpha.abs() > f64::from(i32::MAX) {
            return Err(Error::ArgValue {
                arg_idx: 2,
                name: "alpha",
                found: alpha.to_string(),
                reason: "an int32 for int32 tensors",
            });
        }
        ShaderId::find(Family::Binary, Variant::I32).expect("binary.wgsl has an i32 variant")
    } else {
        float_shader(Family::Binary, a, 0, "self").map_err(|_| Error::DType {
            arg_idx: 0,
            name: "self",
            expected: "float32, float16 or int32",
            found: a.dtype,
        })?
    };
    same_dtype(b, a.dtype, 1, "other")?;
    let shape = broadcast_shapes(a.shape, b.shape).ok_or_else(|| Error::Shape {
        arg_idx: 1,
        name: "other",
        expected: format!("broadcastable with {:?}", a.shape),
        found: b.shape.to_vec(),
    })?;
    check_rank(&shape)?;
    let numel = crate::plan::checked_numel(&shape)?;
    let mut steps = Vec::new();
    if numel > 0 {
        let params = Uniform::new()
            .u32(to_u32("numel", numel)?)
            .u32(shape.len() as u32)
            .u32(op as u32)
            .u32(u32::from(int_math))
            .f32(alpha as f32)
            .i32(if int_math { alpha as i32 } else { 0 })
            .f32(0.0)
            .f32(0.0)
            .dims_u32(&dims_u32(&shape)?)
            .dims_u32(&to_u32s("stride", &broadcast_strides(a.shape, &shape))?)
            .dims_u32(&to_u32s("stride", &broadcast_strides(b.shape, &shape))?)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![a.id, b.id],
            outputs: vec![out.id],
            params,
            workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, shape)], steps })
}

/// `aten.{add,sub}.Tensor(self, other, alpha, →out)` and
/// `aten.{mul,div}.Tensor`, `aten.pow.Tensor_Tensor`,
/// `aten.{minimum,maximum}.default(self, other, →out)`.
pub fn binary(c: &Ctx<'_>, op: BinaryOp) -> Result<Lowered> {
    let has_alpha = matches!(op, BinaryOp::Add | BinaryOp::Sub);
    c.expect_args(if has_alpha { 4 } else { 3 })?;
    let a = c.tensor(0, "self")?;
    let b = c.tensor(1, "other")?;
    let alpha = if has_alpha { c.num(2, "alpha")? } else { 1.0 };
    let out_idx = if has_alpha { 3 } else { 2 };
    let out = c.tensor(out_idx, "out")?;
    same_dtype(&out, a.dtype, out_idx, "out")?;
    binary_dispatch(op, alpha, &a, &b, &out)
}

/// `aten.div.Tensor_mode(self, other, rounding_mode, →out)`.
pub fn div_mode(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(4)?;
    let a = c.tensor(0, "self")?;
    let b = c.tensor(1, "other")?;
    let op = match c.opt_str(2, "rounding_mode")? {
        None => BinaryOp::Div,
        Some("floor") => BinaryOp::FloorDiv,
        Some("trunc") => BinaryOp::TruncDiv,
        Some(other) => {
            return Err(Error::ArgValue {
                arg_idx: 2,
                name: "rounding_mode",
                found: other.to_string(),
                reason: "expected \"floor\", \"trunc\" or None",
            });
        }
    };
    let out = c.tensor(3, "out")?;
    same_dtype(&out, a.dtype, 3, "out")?;
    binary_dispatch(op, 1.0, &a, &b, &out)
}

/// The dispatch of `out = op(x; p0, p1)`.
fn unary_dispatch(
    op: UnaryOp,
    p0: f32,
    p1: f32,
    x: &TensorInfo<'_>,
    (out, out_idx): (&TensorInfo<'_>, usize),
) -> Result<Lowered> {
    let shader = float_shader(Family::Unary, x, 0, "self")?;
    same_dtype(out, x.dtype, out_idx, "out")?;
    let numel = x.numel();
    let mut steps = Vec::new();
    if numel > 0 {
        let params = Uniform::new().u32(to_u32("numel", numel)?).u32(op as u32).u32(0).u32(0).f32(p0).f32(p1).finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id],
            outputs: vec![out.id],
            params,
            workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, x.shape.to_vec())], steps })
}

/// `aten.<fn>.default(self, →out)` for the parameterless functions.
pub fn unary(c: &Ctx<'_>, op: UnaryOp) -> Result<Lowered> {
    c.expect_args(2)?;
    unary_dispatch(op, 0.0, 0.0, &c.tensor(0, "self")?, (&c.tensor(1, "out")?, 1))
}

/// `aten.gelu.default(self, approximate, →out)`.
pub fn gelu(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let op = match c.opt_str(1, "approximate")? {
        None | Some("none") => UnaryOp::GeluErf,
        Some("tanh") => UnaryOp::GeluTanh,
        Some(other) => {
            return Err(Error::ArgValue {
                arg_idx: 1,
                name: "approximate",
                found: other.to_string(),
                reason: "expected \"none\" or \"tanh\"",
            });
        }
    };
    unary_dispatch(op, 0.0, 0.0, &c.tensor(0, "self")?, (&c.tensor(2, "out")?, 2))
}

/// `aten.clamp.default(self, min?, max?, →out)`: `None` is unbounded.
/// Int32 tensors clamp in integer math (`clamp_int.wgsl`).
pub fn clamp(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(4)?;
    let x = c.tensor(0, "self")?;
    if x.dtype == ElemType::I32 {
        return clamp_int(c, &x);
    }
    let lo = c.opt_num(1, "min")?.map_or(f32::MIN, |x| x as f32);
    let hi = c.opt_num(2, "max")?.map_or(f32::MAX, |x| x as f32);
    unary_dispatch(UnaryOp::Clamp, lo, hi, &c.tensor(0, "self")?, (&c.tensor(3, "out")?, 3))
}

/// `aten.hardtanh.default(self, min_val, max_val, →out)`.
pub fn hardtanh(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(4)?;
    let lo = c.num(1, "min_val")? as f32;
    let hi = c.num(2, "max_val")? as f32;
    unary_dispatch(UnaryOp::Clamp, lo, hi, &c.tensor(0, "self")?, (&c.tensor(3, "out")?, 3))
}

/// `aten.leaky_relu.default(self, negative_slope, →out)`.
pub fn leaky_relu(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let slope = c.num(1, "negative_slope")? as f32;
    unary_dispatch(UnaryOp::LeakyRelu, slope, 0.0, &c.tensor(0, "self")?, (&c.tensor(2, "out")?, 2))
}

/// `aten.pow.Tensor_Scalar(self, exponent, →out)`.
pub fn pow_scalar(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let e = c.num(1, "exponent")? as f32;
    unary_dispatch(UnaryOp::PowScalar, e, 0.0, &c.tensor(0, "self")?, (&c.tensor(2, "out")?, 2))
}

/// `aten.hardshrink.default(self, lambd, →out)`.
pub fn hardshrink(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let lambd = c.num(1, "lambd")? as f32;
    unary_dispatch(UnaryOp::Hardshrink, lambd, 0.0, &c.tensor(0, "self")?, (&c.tensor(2, "out")?, 2))
}

/// An int32 bound of `clamp` (argument `i`), or `default` for `None`.
fn int_bound(c: &Ctx<'_>, i: usize, name: &'static str, default: i32) -> Result<i32> {
    match c.opt_num(i, name)? {
        None => Ok(default),
        Some(x) if x.fract() == 0.0 && x >= f64::from(i32::MIN) && x <= f64::from(i32::MAX) => Ok(x as i32),
        Some(x) => {
            Err(Error::ArgValue { arg_idx: i, name, found: x.to_string(), reason: "an int32 for int32 tensors" })
        }
    }
}

/// `aten.clamp.default` of an int32 tensor.
fn clamp_int(c: &Ctx<'_>, x: &TensorInfo<'_>) -> Result<Lowered> {
    let lo = int_bound(c, 1, "min", i32::MIN)?;
    let hi = int_bound(c, 2, "max", i32::MAX)?;
    let out = c.tensor(3, "out")?;
    same_dtype(&out, x.dtype, 3, "out")?;
    let shader = ShaderId::find(Family::ClampInt, Variant::I32).expect("clamp_int.wgsl has an i32 variant");
    let numel = x.numel();
    let mut steps = Vec::new();
    if numel > 0 {
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id],
            outputs: vec![out.id],
            params: Uniform::new().u32(to_u32("numel", numel)?).i32(lo).i32(hi).finish(),
            workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, x.shape.to_vec())], steps })
}
