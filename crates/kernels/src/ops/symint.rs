//! SymInt ops: `sym_size.int`, the Python `operator` arithmetic on SymInts
//! (`add`, `sub`, `mul`, `floordiv`) and `et_vk.select_as_symint`. None
//! does GPU work: each sets a SymInt's live value, which later calls read
//! (view sizes, slice bounds, ...) while they are lowered.

use crate::error::{Error, Result};
use crate::plan::{Ctx, Lowered, Step, Value, norm_dim};

/// Python `operator` arithmetic on SymInts, as the exporter names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymIntOp {
    /// `add`.
    Add,
    /// `sub`.
    Sub,
    /// `mul`.
    Mul,
    /// `floordiv`: rounds toward negative infinity.
    FloorDiv,
}

/// Fails unless argument `i` is a SymInt (the value a SymInt op sets).
fn sym_out(c: &Ctx<'_>, i: usize) -> Result<crate::plan::Vid> {
    match c.value(i) {
        Value::SymInt(_) => Ok(c.id(i)),
        v => Err(Error::ArgKind { arg_idx: i, name: "out", expected: "SymInt", found: v.kind() }),
    }
}

fn set(out: crate::plan::Vid, value: i64) -> Lowered {
    Lowered { shapes: Vec::new(), steps: vec![Step::SymInt { out, value }] }
}

/// `sym_size.int(self, dim, →out)`: the live size of `dim`.
pub fn sym_size(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(3)?;
    let x = c.tensor(0, "self")?;
    let dim = c.int(1, "dim")?;
    let out = sym_out(c, 2)?;
    let d = norm_dim(dim, x.shape.len()).ok_or_else(|| Error::ArgValue {
        arg_idx: 1,
        name: "dim",
        found: dim.to_string(),
        reason: "dim out of range",
    })?;
    Ok(set(out, x.shape[d] as i64))
}

/// `add`, `sub`, `mul`, `floordiv`: `(a Int|SymInt, b Int|SymInt, →out)`.
pub fn arith(c: &Ctx<'_>, op: SymIntOp) -> Result<Lowered> {
    c.expect_args(3)?;
    let a = c.int(0, "a")?;
    let b = c.int(1, "b")?;
    let out = sym_out(c, 2)?;
    let overflow =
        || Error::ArgValue { arg_idx: 1, name: "b", found: b.to_string(), reason: "the result fits in 64 bits" };
    let value = match op {
        SymIntOp::Add => a.checked_add(b).ok_or_else(overflow)?,
        SymIntOp::Sub => a.checked_sub(b).ok_or_else(overflow)?,
        SymIntOp::Mul => a.checked_mul(b).ok_or_else(overflow)?,
        SymIntOp::FloorDiv => {
            if b == 0 {
                return Err(Error::ArgValue { arg_idx: 1, name: "b", found: "0".into(), reason: "a nonzero divisor" });
            }
            let q = a.checked_div(b).ok_or_else(overflow)?;
            if a % b != 0 && ((a < 0) != (b < 0)) { q - 1 } else { q }
        }
    };
    Ok(set(out, value))
}

/// `et_vk.select_as_symint.default(x, dim, index, →out)`: `x[.., index,
/// ..]` along `dim` (negative indices wrap) of an integer tensor whose
/// other dims are 1, read from the host copy of `x` at run time.
pub fn select_as_symint(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(4)?;
    let x = c.tensor(0, "x")?;
    let dim = c.int(1, "dim")?;
    let index = c.int(2, "index")?;
    let out = sym_out(c, 3)?;
    if !matches!(
        x.dtype,
        crate::ElemType::I32 | crate::ElemType::I64 | crate::ElemType::I16 | crate::ElemType::I8 | crate::ElemType::U8
    ) {
        return Err(Error::DType { arg_idx: 0, name: "x", expected: "an integer dtype", found: x.dtype });
    }
    let rank = x.shape.len().max(1);
    let d = norm_dim(dim, rank).ok_or_else(|| Error::ArgValue {
        arg_idx: 1,
        name: "dim",
        found: dim.to_string(),
        reason: "dim out of range",
    })?;
    let size = x.shape.get(d).copied().unwrap_or(1) as i64;
    if x.numel() != size as u64 {
        return Err(Error::Shape {
            arg_idx: 0,
            name: "x",
            expected: "size 1 in every dim but `dim`".into(),
            found: x.shape.to_vec(),
        });
    }
    let i = if index < 0 { index + size } else { index };
    if !(0..size).contains(&i) {
        return Err(Error::ArgValue { arg_idx: 2, name: "index", found: index.to_string(), reason: "index in range" });
    }
    Ok(Lowered { shapes: Vec::new(), steps: vec![Step::ReadSymInt { out, src: x.id, elem: i as u64 }] })
}
