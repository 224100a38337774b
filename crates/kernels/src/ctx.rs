//! What a host rule reads: [`Ctx`], one operator call's arguments with
//! typed accessors (tensors, ints, lists, scratch, device capabilities), and
//! the argument checks every rule shares. The data types they return and the
//! rules build are in [`crate::plan`].

use crate::error::{Error, Result};
use crate::generated::shaders::{Family, ShaderId};
use crate::plan::{ElemType, Graph, MAX_RANK, TensorInfo, Value, Vid, to_u32};

/// An operator call being lowered: its arguments and typed accessors.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    graph: &'a dyn Graph,
    args: &'a [crate::plan::Vid],
    scratch: &'a [Vid],
    caps: crate::caps::DeviceCaps,
}

impl std::fmt::Debug for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx").field("args", &self.args).finish_non_exhaustive()
    }
}

impl<'a> Ctx<'a> {
    /// A call with these argument ids (outputs last), without scratch.
    pub fn new(graph: &'a dyn Graph, args: &'a [Vid]) -> Self {
        Self { graph, args, scratch: &[], caps: crate::caps::DeviceCaps::default() }
    }

    /// The same call on a device with these capabilities (which GEMM
    /// routes it has); without them the portable routes are taken.
    pub fn with_caps(self, caps: crate::caps::DeviceCaps) -> Self {
        Self { caps, ..self }
    }

    /// Whether tensor `id` is a packed 4-bit weight held word-major
    /// ([`TensorInfo::q4_word_major`]).
    pub fn q4_word_major(&self, id: Vid) -> bool {
        matches!(self.graph.value(id), Value::Tensor(t) if t.q4_word_major)
    }

    /// The device's capabilities.
    pub fn caps(&self) -> crate::caps::DeviceCaps {
        self.caps
    }

    /// The same call with scratch tensors: f32, 1-D, at most
    /// [`N_SCRATCH`](crate::plan::N_SCRATCH), shared by every op of the chain (ops run in order and
    /// no op's scratch contents outlive it), each as large as the largest
    /// [`Step::Scratch`](crate::plan::Step::Scratch) declared for its slot.
    pub fn with_scratch(self, scratch: &'a [Vid]) -> Self {
        Self { scratch, ..self }
    }

    /// Scratch tensor `slot`, when the caller provides one (an op falls
    /// back to a kernel without scratch when it does not). An op using it
    /// declares its bytes with [`Step::Scratch`](crate::plan::Step::Scratch).
    pub fn scratch(&self, slot: usize) -> Option<Vid> {
        self.scratch.get(slot).copied()
    }

    /// Number of arguments (outputs included).
    pub fn n_args(&self) -> usize {
        self.args.len()
    }

    /// The same graph with other arguments (a fused op handing part of its
    /// arguments to a plain op's rule).
    pub fn with_args<'b>(&self, args: &'b [Vid]) -> Ctx<'b>
    where
        'a: 'b,
    {
        Ctx { graph: self.graph, args, scratch: self.scratch, caps: self.caps }
    }

    /// Fails unless there are exactly `n` arguments.
    pub fn expect_args(&self, n: usize) -> Result<()> {
        if self.args.len() == n { Ok(()) } else { Err(Error::ArgCount { expected: n, found: self.args.len() }) }
    }

    /// The id of argument `i` (checked by [`Ctx::expect_args`] first).
    pub fn id(&self, i: usize) -> Vid {
        self.args[i]
    }

    /// The value of argument `i`.
    pub fn value(&self, i: usize) -> Value<'a> {
        self.graph.value(self.args[i])
    }

    /// The value with id `id`.
    pub fn value_of(&self, id: Vid) -> Value<'a> {
        self.graph.value(id)
    }

    fn kind_err(&self, i: usize, name: &'static str, expected: &'static str) -> Error {
        Error::ArgKind { arg_idx: i, name, expected, found: self.value(i).kind() }
    }

    /// Argument `i` as a tensor.
    pub fn tensor(&self, i: usize, name: &'static str) -> Result<TensorInfo<'a>> {
        match self.value(i) {
            Value::Tensor(t) => Ok(t),
            _ => Err(self.kind_err(i, name, "Tensor")),
        }
    }

    /// Argument `i` as a tensor or `None`.
    pub fn opt_tensor(&self, i: usize, name: &'static str) -> Result<Option<TensorInfo<'a>>> {
        match self.value(i) {
            Value::Tensor(t) => Ok(Some(t)),
            Value::Null => Ok(None),
            _ => Err(self.kind_err(i, name, "Tensor or Null")),
        }
    }

    /// Argument `i` as a number (Int and Double are interchangeable).
    pub fn num(&self, i: usize, name: &'static str) -> Result<f64> {
        match self.value(i) {
            Value::Int(x) => Ok(x as f64),
            Value::Double(x) => Ok(x),
            Value::SymInt(x) => Ok(x as f64),
            _ => Err(self.kind_err(i, name, "Int or Double")),
        }
    }

    /// Argument `i` as a number or `None`.
    pub fn opt_num(&self, i: usize, name: &'static str) -> Result<Option<f64>> {
        match self.value(i) {
            Value::Null => Ok(None),
            _ => self.num(i, name).map(Some),
        }
    }

    /// Argument `i` as an integer.
    pub fn int(&self, i: usize, name: &'static str) -> Result<i64> {
        match self.value(i) {
            Value::Int(x) | Value::SymInt(x) => Ok(x),
            Value::Double(x) if x.fract() == 0.0 => Ok(x as i64),
            _ => Err(self.kind_err(i, name, "Int")),
        }
    }

    /// Argument `i` as a bool.
    pub fn bool(&self, i: usize, name: &'static str) -> Result<bool> {
        match self.value(i) {
            Value::Bool(b) => Ok(b),
            _ => Err(self.kind_err(i, name, "Bool")),
        }
    }

    /// Argument `i` as a string or `None`.
    pub fn opt_str(&self, i: usize, name: &'static str) -> Result<Option<&'a str>> {
        match self.value(i) {
            Value::String(s) => Ok(Some(s)),
            Value::Null => Ok(None),
            _ => Err(self.kind_err(i, name, "String or Null")),
        }
    }

    /// Argument `i` as a list of integers: an IntList, or a ValueList of
    /// Ints and SymInts (read at their live values).
    pub fn int_list(&self, i: usize, name: &'static str) -> Result<Vec<i64>> {
        match self.value(i) {
            Value::IntList(xs) => Ok(xs.to_vec()),
            Value::List(ids) => ids
                .iter()
                .map(|id| match self.graph.value(*id) {
                    Value::Int(x) | Value::SymInt(x) => Ok(x),
                    _ => Err(self.kind_err(i, name, "IntList or ValueList of Int/SymInt")),
                })
                .collect(),
            _ => Err(self.kind_err(i, name, "IntList")),
        }
    }

    /// Argument `i` as a ValueList of tensors (the outputs of multi-output
    /// ops).
    pub fn tensor_list(&self, i: usize, name: &'static str) -> Result<Vec<TensorInfo<'a>>> {
        match self.value(i) {
            Value::List(ids) => ids
                .iter()
                .map(|id| match self.graph.value(*id) {
                    Value::Tensor(t) => Ok(t),
                    _ => Err(self.kind_err(i, name, "ValueList of Tensor")),
                })
                .collect(),
            _ => Err(self.kind_err(i, name, "ValueList")),
        }
    }
}

/// The shader of `family` for a float tensor argument, or a dtype error.
pub fn float_shader(family: Family, t: &TensorInfo<'_>, arg_idx: usize, name: &'static str) -> Result<ShaderId> {
    t.dtype.float_variant().and_then(|v| ShaderId::find(family, v)).ok_or(Error::DType {
        arg_idx,
        name,
        expected: "float32 or float16",
        found: t.dtype,
    })
}

/// Fails unless `t` has dtype `expected` (outputs follow their inputs).
pub fn same_dtype(t: &TensorInfo<'_>, expected: ElemType, arg_idx: usize, name: &'static str) -> Result<()> {
    if t.dtype == expected {
        Ok(())
    } else {
        Err(Error::DType { arg_idx, name, expected: "the same dtype as the input", found: t.dtype })
    }
}

/// Fails when a rank exceeds [`MAX_RANK`].
pub fn check_rank(shape: &[u64]) -> Result<()> {
    if shape.len() > MAX_RANK { Err(Error::Rank { max: MAX_RANK, found: shape.len() }) } else { Ok(()) }
}

/// Shape dims as `u32`s, checked.
pub fn dims_u32(shape: &[u64]) -> Result<Vec<u32>> {
    shape.iter().map(|&d| to_u32("a dim", d)).collect()
}
