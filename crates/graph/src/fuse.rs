//! Fusion: a deterministic rewrite of a VK00 op chain, before lowering.
//!
//! The passes live one family a file, each an `impl` of the one
//! `Rewriter` (`fuse/rewriter.rs`: the graph, value uses, edits and the
//! questions they share): `fuse/dq8.rs` (8da4w linears split),
//! `fuse/cleanup.rs` (duplicate and dead ops),
//! `fuse/linears.rs` (SwiGLU, QKV), `fuse/epilogues.rs` (bias and
//! activation epilogues, residual add + RMS norm), `fuse/last_row_norm.rs`
//! (a decoder's last residual add, last row and final norm),
//! `fuse/norm_linears.rs` (an RMS norm into the linear after it),
//! `fuse/rope_attention.rs` (RoPE into the attention),
//! `fuse/attention_linear.rs` (the attention into the 4-bit linear after
//! it), `fuse/elementwise.rs` (elementwise chains).
//!
//! [`fuse`] replaces groups of ops with the `etwgpu.*` ops of the kernel
//! table (`etwgpu_kernels::ops::fused`), appending the values they need
//! (expressions, activations, output lists) to the value table. Existing
//! value ids keep their meaning and graph inputs and outputs are untouched,
//! so a fused graph loads, lowers and plans like any other; the values that
//! fusion removes are touched by no step, so the memory planner never
//! allocates them. The passes, in order:
//!
//! 0. **8da4w linears and duplicate ops**: first each
//!    `et_vk.linear_dq8ca_q4gsw` becomes `etwgpu.dq8_rows` (its input rows
//!    rounded to their int8 grids) and an `et_vk.linear_q4gsw` of the
//!    rounded rows, which the passes below treat as any 4-bit linear
//!    (`fuse/dq8.rs`); then an op that repeats an earlier one (same name,
//!    same inputs, same argument literals; `choose_qparams_affine` of one
//!    activation before each 8da4w linear, then their roundings) is
//!    dropped and its results' readers read the earlier op's.
//! 1. **SwiGLU**: `mul(mul(g, sigmoid(g)), u)` where `g` and `u` are
//!    linears (`aten.linear` or `et_vk.linear_q4gsw`, optionally through a
//!    view) of one input: `etwgpu.linear_swiglu` / `_q4gsw_swiglu`.
//! 2. **QKV**: three linears of one kind reading one input (the same value,
//!    or identical views of one): `etwgpu.linear_qkv` / `_q4gsw_qkv`, one
//!    dispatch writing three outputs, placed at the first.
//! 3. **Bias and activation epilogues**: `aten.linear` without a bias or
//!    `aten.mm` followed by `add` of a constant `[N]` takes it as its bias;
//!    `aten.linear`, `aten.addmm`, `aten.convolution` or
//!    `et_vk.conv_with_clamp` followed (directly or through a view) by a
//!    unary activation or SiLU (`mul(y, sigmoid(y))`) become the `_act`
//!    variants, the activation applied in the kernel's epilogue.
//! 4. **Residual add and RMS norm**: `et_vk.rms_norm` of the output of an
//!    `aten.add` (alpha 1) of two tensors of the same shape and dtype, with
//!    a constant weight, becomes one `etwgpu.add_rms_norm` at the add,
//!    which still writes the sum for its other readers (the next residual).
//! 5. **The last row's residual add and RMS norm**: `et_vk.rms_norm` of
//!    `aten.select_copy.int(sum, 1, -1)` (or index `S - 1`), the last row
//!    along the sequence dim of a `[1, S, D]` `sum = aten.add(a, b)`
//!    (alpha 1, same shapes and dtype), where nothing else reads the sum or
//!    the row (a decoder's tail), becomes one `etwgpu.add_select_rms_norm`
//!    at the norm: one dispatch reading only the last rows of `a` and `b`
//!    and writing only the normed row, so the output head after it stays a
//!    plain linear (pass 6 does not take this norm).
//! 6. **RMS norm into a linear**: an `etwgpu.add_rms_norm` or an
//!    `et_vk.rms_norm` with a constant weight whose output only an
//!    `et_vk.linear_q4gsw`, `etwgpu.linear_q4gsw_qkv` or
//!    `etwgpu.linear_q4gsw_swiglu` reads, as its input, becomes one
//!    `etwgpu.rms_norm_linear_q4gsw{,_qkv,_swiglu}` at the norm (still
//!    writing the sum); one that only an `etwgpu.linear_qkv` or
//!    `etwgpu.linear_swiglu` (float weights) reads, one
//!    `etwgpu.rms_norm_linear{_qkv,_swiglu}`. One dispatch on the decode
//!    route, where each workgroup of the GEMV normalizes the input itself.
//! 7. **RoPE into the attention**: an `et_vk.apply_rotary_emb` whose
//!    rotated query and key only one `sdpa_with_kv_cache` reads (as its
//!    query and key) becomes, with it, one `etwgpu.sdpa_rope_with_kv_cache`
//!    at the attention: on the decode route the split-KV kernel rotates the
//!    query and the new keys as it loads them; on a prompt's route the
//!    rotation and the KV-cache update are one dispatch.
//! 8. **Attention into the O projection**: an
//!    `etwgpu.sdpa_rope_with_kv_cache` whose output only a view to
//!    `[1, S, Hq * D]` reads, read only by an `et_vk.linear_q4gsw` as its
//!    input (with constant weights), becomes one
//!    `etwgpu.sdpa_rope_linear_q4gsw` at the attention; read (through one
//!    or two views, to `[1, S, Hq * D]` or `[S, Hq * D]`) only by an
//!    `aten.linear`, one `etwgpu.sdpa_rope_linear`. On the decode route,
//!    the split-KV combine runs inside the linear's GEMV (one dispatch
//!    fewer a layer). Off with [`FuseOptions::attention_linear`].
//! 9. **Elementwise chains**: unary and broadcasting binary float ops whose
//!    results feed only the next op become one `etwgpu.fused_elementwise`
//!    whose kernel is generated from the expression at lowering.
//! 10. **Dead ops**: ops none of whose results is read (the views that
//!     fused inputs no longer need) are dropped.
//!
//! Matches are on graph structure only (op names, how values flow,
//! declared dtypes and matching ranks), never on a model's sizes. A value
//! that disappears must have no reader outside its group and not be a
//! graph input or output; no fused op reads a value written by two ops or
//! in place ([`etwgpu_kernels::OpId::mutated_args`]), so moving reads
//! within the chain is safe. Fused ops infer their shapes from live inputs like any op, so
//! dynamic shapes work unchanged.

mod attention_linear;
mod cleanup;
mod dq8;
mod elementwise;
mod epilogues;
mod last_row_norm;
mod linears;
mod norm_linears;
mod rewriter;
mod rope_attention;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use etwgpu_format::{OpCall, ValueId, VkGraph, VkValue};

use rewriter::Rewriter;

/// Most ops in one fused elementwise kernel (so a long chain does not
/// become one huge shader).
const MAX_FUSED_OPS: usize = 32;

/// Storage buffers per shader stage that [`FuseOptions::default`] assumes:
/// what desktop and Apple GPUs offer at least. A QKV kernel needs 10.
pub const DEFAULT_MAX_STORAGE_BUFFERS: u32 = 16;

/// What fusion may assume about the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FuseOptions {
    /// Most storage buffers one dispatch may bind (the device's
    /// `max_storage_buffers_per_shader_stage`); fusions that need more are
    /// skipped.
    pub max_storage_buffers: u32,
    /// Fuse the decode attention into the 4-bit linear after it (pass 8),
    /// whose GEMV then merges the split partials itself; on by default
    /// (the runtime turns it off with `ETWGPU_FOLD_ATTENTION=0`).
    pub attention_linear: bool,
}

impl Default for FuseOptions {
    fn default() -> Self {
        Self { max_storage_buffers: DEFAULT_MAX_STORAGE_BUFFERS, attention_linear: true }
    }
}

/// What one fusion matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FusionKind {
    /// An 8da4w linear split into its input's int8 rounding and a 4-bit
    /// linear.
    Dq8Split,
    /// An op computing what an earlier one did.
    Duplicate,
    /// Gate and up linears with SiLU and the product.
    Swiglu,
    /// Three linears of one input.
    Qkv,
    /// A constant bias add taken into a linear or mm.
    Bias,
    /// An activation taken into a linear, addmm or convolution.
    Activation,
    /// A residual add and the RMS norm of its result.
    AddNorm,
    /// A residual add, the last row of its result and that row's RMS norm.
    LastRowNorm,
    /// An RMS norm and the 4-bit linear that reads it.
    NormLinear,
    /// RoPE and the attention that reads it.
    RopeAttention,
    /// The attention and the 4-bit linear that reads its output.
    AttentionLinear,
    /// A chain of elementwise ops.
    Elementwise,
    /// An op whose results nothing reads.
    DeadOp,
}

impl FusionKind {
    /// Short name, for reports.
    pub const fn name(self) -> &'static str {
        match self {
            FusionKind::Dq8Split => "8da4w split",
            FusionKind::Duplicate => "duplicate op",
            FusionKind::Swiglu => "swiglu",
            FusionKind::Qkv => "qkv",
            FusionKind::Bias => "bias",
            FusionKind::Activation => "activation",
            FusionKind::AddNorm => "add norm",
            FusionKind::LastRowNorm => "last row norm",
            FusionKind::NormLinear => "norm linear",
            FusionKind::RopeAttention => "rope attention",
            FusionKind::AttentionLinear => "attention linear",
            FusionKind::Elementwise => "elementwise",
            FusionKind::DeadOp => "dead op",
        }
    }
}

/// One rewrite [`fuse`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fusion {
    /// What it matched.
    pub kind: FusionKind,
    /// Node ids of the ops it replaced or removed, in chain order.
    pub nodes: Vec<u32>,
    /// The op written in their place (empty for dead ops).
    pub op: String,
}

/// A fused graph and what was fused.
#[derive(Debug, Clone)]
pub struct Fused {
    /// The rewritten graph.
    pub graph: VkGraph,
    /// The rewrites, in the order they were made.
    pub fusions: Vec<Fusion>,
}

impl Fused {
    /// How many rewrites of each kind, e.g. `2 swiglu, 2 qkv, 4 dead op`
    /// (`none` when nothing was fused).
    pub fn summary(&self) -> String {
        let mut counts: BTreeMap<FusionKind, usize> = BTreeMap::new();
        for f in &self.fusions {
            *counts.entry(f.kind).or_default() += 1;
        }
        if counts.is_empty() {
            return "none".to_string();
        }
        counts.iter().map(|(k, n)| format!("{n} {}", k.name())).collect::<Vec<_>>().join(", ")
    }
}

/// Rewrites `graph` (see the module docs). Deterministic; ops the kernel
/// table does not know are left alone and fused around, and a graph that
/// does not lower at its declared shapes (or whose fused chain would not)
/// is returned as it is.
pub fn fuse(graph: &VkGraph, options: &FuseOptions) -> Fused {
    // Only a graph that lowers as exported is rewritten: its errors keep
    // naming the exported ops, and every op a pattern looks at has passed
    // its host rule.
    if crate::lower::lower_at_max(graph, 0).is_err() {
        return Fused { graph: graph.clone(), fusions: Vec::new() };
    }
    let mut rw = Rewriter { g: graph.clone(), options: *options, fusions: Vec::new() };
    rw.dq8_linears();
    rw.duplicates();
    rw.swiglu();
    rw.qkv();
    rw.epilogues();
    rw.add_norms();
    rw.last_row_norms();
    rw.norm_linears();
    rw.rope_attention();
    rw.attention_linears();
    rw.elementwise();
    rw.dead_ops();
    // A fused chain that does not lower where the exported one did would
    // be a bug in a pattern; the model then runs as exported.
    if crate::lower::lower_at_max(&rw.g, 0).is_err() {
        return Fused { graph: graph.clone(), fusions: Vec::new() };
    }
    Fused { graph: rw.g, fusions: rw.fusions }
}

/// The chain as text, one op per line (`node name(args)`), tensors and
/// SymInts as `%id`, other values inline: for snapshots and debugging.
pub fn describe(graph: &VkGraph) -> String {
    let mut o = String::new();
    for call in &graph.chain {
        let args: Vec<String> = call.args.iter().map(|&a| describe_value(graph, a)).collect();
        let _ = writeln!(o, "{:>5}  {}({})", call.node_id, call.name, args.join(", "));
    }
    let ids = |ids: &[ValueId]| ids.iter().map(ValueId::to_string).collect::<Vec<_>>().join(", ");
    let _ = writeln!(o, "inputs [{}], outputs [{}]", ids(&graph.input_ids), ids(&graph.output_ids));
    o
}

fn describe_value(graph: &VkGraph, id: ValueId) -> String {
    match graph.value(id) {
        VkValue::Null => "None".into(),
        VkValue::Int(x) => x.to_string(),
        VkValue::Double(x) => format!("{x:?}"),
        VkValue::Bool(x) => x.to_string(),
        VkValue::Tensor(_) | VkValue::SymInt(_) => id.to_string(),
        VkValue::IntList(xs) => format!("{xs:?}"),
        VkValue::DoubleList(xs) => format!("{xs:?}"),
        VkValue::BoolList(xs) => format!("{xs:?}"),
        VkValue::ValueList(ids) => {
            let item = |&i: &ValueId| match graph.value(i) {
                VkValue::Int(x) => x.to_string(),
                VkValue::Null => "None".into(),
                _ => i.to_string(),
            };
            format!("[{}]", ids.iter().map(item).collect::<Vec<_>>().join(", "))
        }
        VkValue::String(s) => format!("{s:?}"),
    }
}

/// The values an op writes: its last argument, or the items of a
/// ValueList there.
fn outputs_of(graph: &VkGraph, call: &OpCall) -> Vec<ValueId> {
    match call.args.last() {
        Some(&last) => match graph.value(last) {
            VkValue::ValueList(items) => items.clone(),
            _ => vec![last],
        },
        None => Vec::new(),
    }
}

/// The values an op reads: every argument but the last, and the items of
/// ValueLists among them.
fn inputs_of(graph: &VkGraph, call: &OpCall) -> Vec<ValueId> {
    let mut out = Vec::new();
    for &a in call.args.iter().take(call.args.len().saturating_sub(1)) {
        out.push(a);
        if let VkValue::ValueList(items) = graph.value(a) {
            out.extend(items);
        }
    }
    out
}
