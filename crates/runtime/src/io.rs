//! A delegate's inputs and outputs as the graph sees them: [`IoSpec`] per
//! method-level value (graph value, device and host dtypes, maximum shape),
//! the mapping through the delegate call's arguments, and the integer
//! reads of input tensors the host rules take.

use etwgpu_format::{DType, PlanValue, ValueId, VkGraph, VkValue};
use etwgpu_graph::InputRef;

use crate::buffers::tensor_of;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// One method input or output, mapped onto the graph.
#[derive(Debug, Clone)]
pub(crate) struct IoSpec {
    /// Graph value id.
    pub(crate) value: ValueId,
    /// Dtype on the device.
    pub(crate) device_dtype: DType,
    /// Dtype the caller sees (the method's tensor dtype).
    pub(crate) host_dtype: DType,
    /// Maximum shape.
    pub(crate) max_shape: Vec<u64>,
    /// A SymInt input (given as a one-element integer tensor), not a tensor.
    pub(crate) symint: bool,
}

/// Element `elem` of an integer tensor, as i64.
pub(crate) fn int_at(t: &Tensor, elem: u64) -> Option<i64> {
    let size = t.dtype.size_bytes();
    let at = usize::try_from(elem).ok()?.checked_mul(size)?;
    let b = t.bytes.get(at..at + size)?;
    Some(match t.dtype {
        DType::I64 => i64::from_le_bytes(b.try_into().ok()?),
        DType::I32 => i64::from(i32::from_le_bytes(b.try_into().ok()?)),
        DType::I16 => i64::from(i16::from_le_bytes(b.try_into().ok()?)),
        DType::I8 => i64::from(b[0] as i8),
        DType::U8 | DType::Bool => i64::from(b[0]),
        _ => return None,
    })
}

/// Maps method-level values onto graph values through the call's args.
pub(crate) fn io_specs(
    m: &etwgpu_format::Method,
    graph: &VkGraph,
    args: &[usize],
    plan_values: &[usize],
    graph_ids: &[ValueId],
    arg_range: std::ops::Range<usize>,
) -> Result<Vec<IoSpec>> {
    plan_values
        .iter()
        .map(|&p| {
            let pos = args[arg_range.clone()]
                .iter()
                .position(|&a| a == p)
                .ok_or_else(|| Error::NotADelegateArg { method: m.name.clone(), value: p })?;
            let value = graph_ids[pos];
            if let VkValue::SymInt(_) = graph.value(value) {
                return Ok(IoSpec {
                    value,
                    device_dtype: DType::I64,
                    host_dtype: DType::I64,
                    max_shape: Vec::new(),
                    symint: true,
                });
            }
            let t = tensor_of(graph, value)?;
            let host_dtype = match &m.values.get(p) {
                Some(PlanValue::Tensor(pt)) => pt.scalar_type.dtype().unwrap_or(t.io_dtype()),
                _ => t.io_dtype(),
            };
            Ok(IoSpec { value, device_dtype: t.dtype, host_dtype, max_shape: t.dims.clone(), symint: false })
        })
        .collect()
}

/// The graph inputs at these live shapes, as the lowerer takes them.
pub(crate) fn input_refs<'a>(specs: &[IoSpec], shapes: &'a [Vec<u64>]) -> Vec<InputRef<'a>> {
    specs
        .iter()
        .zip(shapes)
        .map(|(spec, shape)| InputRef { value: spec.value, shape: (!spec.symint).then_some(shape.as_slice()) })
        .collect()
}
