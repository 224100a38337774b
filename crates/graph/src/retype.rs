//! Retyping passes: a graph with some tensors' dtypes changed, and per
//! value the dtype it had, for the runtime to convert constants' bytes on
//! upload. The runtime picks a pass for its device (int64 held as int32
//! always, float16 promotion without SHADER_F16, KV caches stored as
//! float16 on request) and never rewrites a graph itself.

use etwgpu_format::{DType, VkGraph, VkValue};

/// `graph` with every int64 tensor made int32, and per value its dtype
/// before, where it changed; `None` when the graph has no int64 tensor.
///
/// Exports with `downcast_64_bit=False` keep int64 tensors inside the
/// delegate (token and position ids, argmax indices, lifted constants);
/// every kernel's integer variant is 32-bit, as ExecuTorch's own
/// `downcast_64_bit=True` (the default) makes them at export. The host side
/// stays int64: a narrowed tensor's host I/O dtype
/// ([`VkTensor::io_dtype`](etwgpu_format::VkTensor::io_dtype)) stays int64,
/// so the runtime narrows inputs and constants (a value outside the int32
/// range is its error, never wrapped) and widens outputs on read-back.
/// Intermediates are computed in int32 as in a downcast export.
pub fn narrow_i64(graph: &VkGraph) -> Option<(VkGraph, Vec<Option<DType>>)> {
    let is_i64 = |v: &VkValue| matches!(v, VkValue::Tensor(t) if t.dtype == DType::I64);
    if !graph.values.iter().any(is_i64) {
        return None;
    }
    let mut g = graph.clone();
    let before = g
        .values
        .iter_mut()
        .map(|v| match v {
            VkValue::Tensor(t) if t.dtype == DType::I64 => {
                t.staging_dtype = Some(t.io_dtype());
                t.dtype = DType::I32;
                Some(DType::I64)
            }
            _ => None,
        })
        .collect();
    Some((g, before))
}

/// Per value, the dtype of its bytes in the file when two passes ran one
/// after the other: `first`'s where it changed the value, else `then`'s.
pub fn merge_before(first: &[Option<DType>], then: &[Option<DType>]) -> Vec<Option<DType>> {
    (0..first.len().max(then.len()))
        .map(|i| first.get(i).copied().flatten().or_else(|| then.get(i).copied().flatten()))
        .collect()
}

/// `graph` with every float16 tensor made float32 (for devices without
/// SHADER_F16), and per value its dtype before, where it changed.
pub fn promote_f16(graph: &VkGraph) -> (VkGraph, Vec<Option<DType>>) {
    let mut g = graph.clone();
    let promoted = g
        .values
        .iter_mut()
        .map(|v| match v {
            VkValue::Tensor(t) if t.dtype == DType::F16 => {
                t.dtype = DType::F32;
                Some(DType::F16)
            }
            _ => None,
        })
        .collect();
    (g, promoted)
}

/// `graph` with its float32 KV caches made float16, and per value its
/// dtype before, where it changed. The caches are the arguments the
/// kernel table marks as KV caches ([`etwgpu_kernels::OpId::kv_cache_args`]),
/// with the constants prepacked into them. Nothing changes unless every
/// use of every such value is as a cache (or that prepack) and none is a
/// graph input or output: all caches or none.
pub fn narrow_kv_caches(graph: &VkGraph) -> Option<(VkGraph, Vec<Option<DType>>)> {
    // Per call: the argument positions that are KV caches.
    let cache_args: Vec<&[usize]> = graph
        .chain
        .iter()
        .map(|call| etwgpu_kernels::from_name(&call.name).map_or(&[][..], |op| op.kv_cache_args()))
        .collect();
    let mut caches = std::collections::BTreeSet::new();
    for (call, args) in graph.chain.iter().zip(&cache_args) {
        for &i in *args {
            caches.insert(call.args.get(i)?.0);
        }
    }
    if caches.is_empty() {
        return None;
    }
    let prepacks_into = |call: &etwgpu_format::OpCall, caches: &std::collections::BTreeSet<u32>| {
        call.name == "et_vk.prepack.default" && call.args.get(1).is_some_and(|out| caches.contains(&out.0))
    };
    for call in &graph.chain {
        if prepacks_into(call, &caches) {
            caches.insert(call.args.first()?.0);
        }
    }
    // Every use is a cache argument or a prepack into a cache.
    for (call, args) in graph.chain.iter().zip(&cache_args) {
        for (i, arg) in call.args.iter().enumerate() {
            let allowed = args.contains(&i) || prepacks_into(call, &caches);
            if caches.contains(&arg.0) && !allowed {
                return None;
            }
            if let VkValue::ValueList(items) = graph.value(*arg)
                && items.iter().any(|v| caches.contains(&v.0))
            {
                return None;
            }
        }
    }
    let io = graph.input_ids.iter().chain(&graph.output_ids);
    if io.clone().any(|v| caches.contains(&v.0)) {
        return None;
    }
    let mut g = graph.clone();
    let mut before = vec![None; g.values.len()];
    for &c in &caches {
        match g.values.get_mut(c as usize) {
            Some(VkValue::Tensor(t)) if t.dtype == DType::F32 => {
                t.dtype = DType::F16;
                before[c as usize] = Some(DType::F32);
            }
            _ => return None,
        }
    }
    Some((g, before))
}
