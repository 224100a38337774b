//! Device layouts of constants, chosen at load: a graph with some
//! tensors' `memory_layout` set to a layout etwgpu's kernels read, for the
//! runtime to rearrange those constants' bytes on upload. Like the
//! retyping passes, the runtime picks this pass and never rewrites a graph
//! itself.
//!
//! The one layout today is [`Q4_WORD_MAJOR`]: the packed 4-bit weights of
//! the fast 4-bit linears stored with word `w` of every row side by side,
//! so that adjacent invocations of the GEMV (one column each) and the GEMM
//! staging loops read adjacent 16-byte words.

use etwgpu_format::{DType, VkGraph, VkValue};

/// `VkTensor::memory_layout` of a packed 4-bit weight `[N, K/2]` held
/// word-major on the device: 16-byte word `w` of row `n` at word
/// `w * N + n`. No exporter writes this value; [`q4_word_major`] clears a
/// file's own use of it.
pub const Q4_WORD_MAJOR: u8 = 0xE4;

/// For each call, the packed 4-bit weight arguments the fast 4-bit routes
/// read (all of them, or none where the call takes another route): the
/// linears' weights whose `K` (the input's last dim), row bytes and group
/// size pass [`etwgpu_kernels::q4_fast`].
fn fast_q4_weights(graph: &VkGraph, call: &etwgpu_format::OpCall) -> Vec<u32> {
    let tensor = |i: usize| match call.args.get(i).map(|v| graph.value(*v)) {
        Some(VkValue::Tensor(t)) => Some(t),
        _ => None,
    };
    let int = |i: usize| match call.args.get(i).map(|v| graph.value(*v)) {
        Some(VkValue::Int(x)) => u64::try_from(*x).ok(),
        _ => None,
    };
    // (input, group size, weights) argument positions.
    let (group, weights): (usize, &[usize]) = match call.name.as_str() {
        "et_vk.linear_q4gsw.default" => (3, &[1]),
        "etwgpu.linear_q4gsw_swiglu.default" => (1, &[2, 4]),
        "etwgpu.linear_q4gsw_qkv.default" => (1, &[2, 4, 6]),
        "etwgpu.rms_norm_linear_q4gsw.default" => (6, &[4]),
        "etwgpu.rms_norm_linear_q4gsw_qkv.default" => (4, &[5, 7, 9]),
        "etwgpu.rms_norm_linear_q4gsw_swiglu.default" => (4, &[5, 7]),
        _ => return Vec::new(),
    };
    let (Some(x), Some(gs)) = (tensor(0), int(group)) else { return Vec::new() };
    let Some(&k) = x.dims.last() else { return Vec::new() };
    let mut out = Vec::new();
    for &i in weights {
        let Some(w) = tensor(i) else { return Vec::new() };
        let [_, k_packed] = w.dims[..] else { return Vec::new() };
        if w.dtype != DType::U8 || !etwgpu_kernels::q4_fast(k, k_packed, gs) {
            return Vec::new();
        }
        out.push(call.args[i].0);
    }
    out
}

/// Marks the constant 4-bit weights that only the fast 4-bit routes read
/// (no other op, no graph input or output) as [`Q4_WORD_MAJOR`]; returns
/// how many. The host rules then index them word-major and the runtime
/// uploads them so.
pub fn q4_word_major(graph: &mut VkGraph) -> usize {
    for v in &mut graph.values {
        if let VkValue::Tensor(t) = v
            && t.memory_layout == Q4_WORD_MAJOR
        {
            t.memory_layout = 255;
        }
    }
    let n = graph.values.len();
    let (mut uses, mut fast) = (vec![0u32; n], vec![0u32; n]);
    for call in &graph.chain {
        for arg in &call.args {
            if let Some(u) = uses.get_mut(arg.0 as usize) {
                *u += 1;
            }
            if let VkValue::ValueList(items) = graph.value(*arg) {
                for item in items {
                    if let Some(u) = uses.get_mut(item.0 as usize) {
                        *u += 1;
                    }
                }
            }
        }
        for w in fast_q4_weights(graph, call) {
            fast[w as usize] += 1;
        }
    }
    for v in graph.input_ids.iter().chain(&graph.output_ids) {
        if let Some(u) = uses.get_mut(v.0 as usize) {
            *u += 1;
        }
    }
    let mut marked = 0;
    for (i, v) in graph.values.iter_mut().enumerate() {
        if let VkValue::Tensor(t) = v
            && t.constant.is_some()
            && fast[i] > 0
            && fast[i] == uses[i]
        {
            t.memory_layout = Q4_WORD_MAJOR;
            marked += 1;
        }
    }
    marked
}

/// The bytes of a packed 4-bit weight of `n` rows of `row_bytes` (a
/// multiple of 16) rearranged word-major ([`Q4_WORD_MAJOR`]).
pub fn to_q4_word_major(bytes: &[u8], n: usize, row_bytes: usize) -> Vec<u8> {
    let words = row_bytes / 16;
    let mut out = vec![0u8; bytes.len()];
    for (r, row) in bytes.chunks_exact(row_bytes).take(n).enumerate() {
        for (w, word) in row.chunks_exact(16).enumerate() {
            let at = (w * n + r) * 16;
            out[at..at + 16].copy_from_slice(word);
        }
    }
    debug_assert_eq!(words * 16, row_bytes);
    out
}
