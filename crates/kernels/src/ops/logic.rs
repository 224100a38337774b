//! Comparisons, logical and bitwise ops and `where`: everything that makes
//! or consumes bool tensors (`compare.wgsl`, `bitwise.wgsl`, `where.wgsl`).
//!
//! Bools are one `u32` (0 or 1) per element on the device
//! ([`ElemType::device_size_bytes`]), so they are the `u32` variant of a
//! kernel. All of these broadcast NumPy-style.

use crate::error::{Error, Result};
use crate::generated::shaders::{Family, ShaderId, Variant};
use crate::ops::elementwise::{broadcast_shapes, broadcast_strides};
use crate::plan::{
    Ctx, Dispatch, ElemType, Lowered, Step, TensorInfo, Uniform, Value, WG_ELEMENTWISE, check_rank, dims_u32, grid_1d,
    to_u32,
};

/// An op of `compare.wgsl`; the discriminant is the shader's op code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `a == b`.
    Eq = 0,
    /// `a != b`.
    Ne = 1,
    /// `a > b`.
    Gt = 2,
    /// `a >= b`.
    Ge = 3,
    /// `a < b`.
    Lt = 4,
    /// `a <= b`.
    Le = 5,
    /// `a && b` on truthiness.
    And = 6,
    /// `a || b` on truthiness.
    Or = 7,
    /// `a != b` on truthiness.
    Xor = 8,
}

/// An op of `bitwise.wgsl`; the discriminant is the shader's op code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitOp {
    /// `a & b`.
    And = 0,
    /// `a | b`.
    Or = 1,
    /// `a ^ b`.
    Xor = 2,
}

/// `~a` of `bitwise.wgsl`.
const BIT_NOT: u32 = 3;
/// `a ^ 1` of `bitwise.wgsl`: `~` of a bool.
const BOOL_NOT: u32 = 4;

/// The variant of a kernel that works on the raw elements of `dtype`.
fn elem_variant(dtype: ElemType) -> Option<Variant> {
    match dtype {
        ElemType::F32 => Some(Variant::F32),
        ElemType::F16 => Some(Variant::F16),
        ElemType::I32 => Some(Variant::I32),
        ElemType::Bool => Some(Variant::U32),
        _ => None,
    }
}

fn shader_for(
    family: Family,
    t: &TensorInfo<'_>,
    arg_idx: usize,
    name: &'static str,
    expected: &'static str,
) -> Result<ShaderId> {
    elem_variant(t.dtype).and_then(|v| ShaderId::find(family, v)).ok_or(Error::DType {
        arg_idx,
        name,
        expected,
        found: t.dtype,
    })
}

fn need_dtype(
    t: &TensorInfo<'_>,
    want: ElemType,
    arg_idx: usize,
    name: &'static str,
    expected: &'static str,
) -> Result<()> {
    if t.dtype == want { Ok(()) } else { Err(Error::DType { arg_idx, name, expected, found: t.dtype }) }
}

/// The broadcast shape of `shapes` (argument positions for errors).
fn broadcast_all(shapes: &[(&[u64], usize, &'static str)]) -> Result<Vec<u64>> {
    let mut out: Vec<u64> = Vec::new();
    for &(shape, arg_idx, name) in shapes {
        out = broadcast_shapes(&out, shape).ok_or_else(|| Error::Shape {
            arg_idx,
            name,
            expected: format!("broadcastable with {out:?}"),
            found: shape.to_vec(),
        })?;
    }
    check_rank(&out)?;
    Ok(out)
}

fn strides_u32(shape: &[u64], out: &[u64]) -> Result<Vec<u32>> {
    broadcast_strides(shape, out).into_iter().map(|s| to_u32("stride", s)).collect()
}

/// What the second operand of a comparison is.
#[derive(Debug, Clone, Copy)]
enum Rhs<'a> {
    Tensor(TensorInfo<'a>),
    /// Compared in f32.
    Float(f32),
    /// Compared in i32.
    Int(i32),
}

fn compare_dispatch(
    op: CmpOp,
    a: &TensorInfo<'_>,
    rhs: Rhs<'_>,
    (out, out_idx): (&TensorInfo<'_>, usize),
) -> Result<Lowered> {
    let shader = shader_for(Family::Compare, a, 0, "self", "float32, float16, int32 or bool")?;
    need_dtype(out, ElemType::Bool, out_idx, "out", "bool")?;
    let (b, mode, scalar_f, scalar_i) = match rhs {
        Rhs::Tensor(b) => {
            if b.dtype != a.dtype {
                return Err(Error::DType { arg_idx: 1, name: "other", expected: "the dtype of self", found: b.dtype });
            }
            (b, 0, 0.0, 0)
        }
        Rhs::Float(x) => (*a, 1, x, 0),
        Rhs::Int(x) => (*a, 2, 0.0, x),
    };
    let shape = match rhs {
        Rhs::Tensor(_) => broadcast_all(&[(a.shape, 0, "self"), (b.shape, 1, "other")])?,
        _ => broadcast_all(&[(a.shape, 0, "self")])?,
    };
    let numel = crate::plan::checked_numel(&shape)?;
    let mut steps = Vec::new();
    if numel > 0 {
        let params = Uniform::new()
            .u32(to_u32("numel", numel)?)
            .u32(shape.len() as u32)
            .u32(op as u32)
            .u32(mode)
            .f32(scalar_f)
            .i32(scalar_i)
            .u32(0)
            .u32(0)
            .dims_u32(&dims_u32(&shape)?)
            .dims_u32(&strides_u32(a.shape, &shape)?)
            .dims_u32(&strides_u32(b.shape, &shape)?)
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

/// `aten.{eq,ne,gt,ge,lt,le}.Tensor(self, other, →out bool)` and
/// `aten.logical_{and,or,xor}.default(self, other, →out bool)`: both
/// operands of one dtype.
pub fn compare_tensor(c: &Ctx<'_>, op: CmpOp) -> Result<Lowered> {
    c.expect_args(3)?;
    let a = c.tensor(0, "self")?;
    let b = c.tensor(1, "other")?;
    compare_dispatch(op, &a, Rhs::Tensor(b), (&c.tensor(2, "out")?, 2))
}

/// The scalar operand of a comparison: an `Int` (or `Bool`) is compared
/// with an integer or bool tensor in i32; a `Double`, or any number against
/// a float tensor, in f32 (PyTorch promotes an integer tensor compared with
/// a float scalar to float).
fn scalar_rhs<'a>(c: &Ctx<'a>, a: &TensorInfo<'_>, arg_idx: usize, name: &'static str) -> Result<Rhs<'a>> {
    let int_tensor = matches!(a.dtype, ElemType::I32 | ElemType::Bool);
    let int = match c.value(arg_idx) {
        Value::Bool(b) => Some(i64::from(b)),
        Value::Int(x) | Value::SymInt(x) => Some(x),
        _ => None,
    };
    match int {
        Some(x) if int_tensor => i32::try_from(x).map(Rhs::Int).map_err(|_| Error::ArgValue {
            arg_idx,
            name,
            found: x.to_string(),
            reason: "an integer scalar compared with an int32 tensor must fit int32",
        }),
        Some(x) => Ok(Rhs::Float(x as f32)),
        None => Ok(Rhs::Float(c.num(arg_idx, name)? as f32)),
    }
}

/// `aten.{eq,ne,gt,ge,lt,le}.Scalar(self, other Num, →out bool)`.
pub fn compare_scalar(c: &Ctx<'_>, op: CmpOp) -> Result<Lowered> {
    c.expect_args(3)?;
    let a = c.tensor(0, "self")?;
    let rhs = scalar_rhs(c, &a, 1, "other")?;
    compare_dispatch(op, &a, rhs, (&c.tensor(2, "out")?, 2))
}

/// `aten.logical_not.default(self, →out bool)`: `self == 0`.
pub fn logical_not(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(2)?;
    let a = c.tensor(0, "self")?;
    let rhs = if matches!(a.dtype, ElemType::I32 | ElemType::Bool) { Rhs::Int(0) } else { Rhs::Float(0.0) };
    compare_dispatch(CmpOp::Eq, &a, rhs, (&c.tensor(1, "out")?, 1))
}

fn bitwise_dispatch(
    op: u32,
    a: &TensorInfo<'_>,
    b: Option<&TensorInfo<'_>>,
    (out, out_idx): (&TensorInfo<'_>, usize),
) -> Result<Lowered> {
    let shader = match a.dtype {
        ElemType::I32 | ElemType::Bool => shader_for(Family::Bitwise, a, 0, "self", "int32 or bool")?,
        found => return Err(Error::DType { arg_idx: 0, name: "self", expected: "int32 or bool", found }),
    };
    let b = match b {
        Some(b) => {
            need_dtype(b, a.dtype, 1, "other", "the dtype of self")?;
            *b
        }
        None => *a,
    };
    need_dtype(out, a.dtype, out_idx, "out", "the dtype of self")?;
    let shape = broadcast_all(&[(a.shape, 0, "self"), (b.shape, 1, "other")])?;
    let numel = crate::plan::checked_numel(&shape)?;
    let mut steps = Vec::new();
    if numel > 0 {
        let params = Uniform::new()
            .u32(to_u32("numel", numel)?)
            .u32(shape.len() as u32)
            .u32(op)
            .u32(0)
            .dims_u32(&dims_u32(&shape)?)
            .dims_u32(&strides_u32(a.shape, &shape)?)
            .dims_u32(&strides_u32(b.shape, &shape)?)
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

/// `aten.bitwise_{and,or,xor}.Tensor(self, other, →out)` on int32 or bool.
pub fn bitwise(c: &Ctx<'_>, op: BitOp) -> Result<Lowered> {
    c.expect_args(3)?;
    let a = c.tensor(0, "self")?;
    let b = c.tensor(1, "other")?;
    bitwise_dispatch(op as u32, &a, Some(&b), (&c.tensor(2, "out")?, 2))
}

/// `aten.bitwise_not.default(self, →out)`: `~x` on int32, `!x` on bool.
pub fn bitwise_not(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(2)?;
    let a = c.tensor(0, "self")?;
    let op = if a.dtype == ElemType::Bool { BOOL_NOT } else { BIT_NOT };
    bitwise_dispatch(op, &a, None, (&c.tensor(1, "out")?, 1))
}

/// `aten.where.self(condition bool, self, other, →out)`.
pub fn where_self(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(4)?;
    let cond = c.tensor(0, "condition")?;
    let a = c.tensor(1, "self")?;
    let b = c.tensor(2, "other")?;
    let out = c.tensor(3, "out")?;
    need_dtype(&cond, ElemType::Bool, 0, "condition", "bool")?;
    let shader = shader_for(Family::Where, &a, 1, "self", "float32, float16, int32 or bool")?;
    need_dtype(&b, a.dtype, 2, "other", "the dtype of self")?;
    need_dtype(&out, a.dtype, 3, "out", "the dtype of self")?;
    let shape = broadcast_all(&[(cond.shape, 0, "condition"), (a.shape, 1, "self"), (b.shape, 2, "other")])?;
    let numel = crate::plan::checked_numel(&shape)?;
    let mut steps = Vec::new();
    if numel > 0 {
        let params = Uniform::new()
            .u32(to_u32("numel", numel)?)
            .u32(shape.len() as u32)
            .u32(0)
            .u32(0)
            .dims_u32(&dims_u32(&shape)?)
            .dims_u32(&strides_u32(cond.shape, &shape)?)
            .dims_u32(&strides_u32(a.shape, &shape)?)
            .dims_u32(&strides_u32(b.shape, &shape)?)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![cond.id, a.id, b.id],
            outputs: vec![out.id],
            params,
            workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, shape)], steps })
}
