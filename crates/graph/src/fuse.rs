//! Fusion: a deterministic rewrite of a VK00 op chain, before lowering.
//!
//! Over the house limit of about 600 lines: each rewrite (duplicates, SwiGLU,
//! QKV, epilogues, residual add + RMS norm, elementwise chains) still lives
//! here, on the one `Rewriter`; splitting them into files is open with the
//! runtime-rooms issue.
//!
//! [`fuse`] replaces groups of ops with the `etwgpu.*` ops of the kernel
//! table (`etwgpu_kernels::ops::fused`), appending the values they need
//! (expressions, activations, output lists) to the value table. Existing
//! value ids keep their meaning and graph inputs and outputs are untouched,
//! so a fused graph loads, lowers and plans like any other; the values that
//! fusion removes are touched by no step, so the memory planner never
//! allocates them. The passes, in order:
//!
//! 0. **Duplicate ops**: an op that repeats an earlier one (same name, same
//!    inputs, same argument literals; `choose_qparams_affine` of one
//!    activation before each 8da4w linear) is dropped and its results'
//!    readers read the earlier op's.
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
//! 5. **Elementwise chains**: unary and broadcasting binary float ops whose
//!    results feed only the next op become one `etwgpu.fused_elementwise`
//!    whose kernel is generated from the expression at lowering.
//! 6. **Dead ops**: ops none of whose results is read (the views that fused
//!    inputs no longer need) are dropped.
//!
//! Matches are on graph structure only (op names, how values flow,
//! declared dtypes and matching ranks), never on a model's sizes. A value
//! that disappears must have no reader outside its group and not be a
//! graph input or output; no fused op reads a value written by two ops or
//! in place ([`OpId::mutated_args`]), so moving reads within the chain is
//! safe. Fused ops infer their shapes from live inputs like any op, so
//! dynamic shapes work unchanged.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use etwgpu_format::{DType, OpCall, ValueId, VkGraph, VkTensor, VkValue};
use etwgpu_kernels::OpId;
use etwgpu_kernels::ops::elementwise::{BinaryOp, UnaryOp};
use etwgpu_kernels::ops::fused::{Epilogue, Expr, FUSED_MAX_INPUTS, Inst, Operand};

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
}

impl Default for FuseOptions {
    fn default() -> Self {
        Self { max_storage_buffers: DEFAULT_MAX_STORAGE_BUFFERS }
    }
}

/// What one fusion matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FusionKind {
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
    /// A chain of elementwise ops.
    Elementwise,
    /// An op whose results nothing reads.
    DeadOp,
}

impl FusionKind {
    /// Short name, for reports.
    pub const fn name(self) -> &'static str {
        match self {
            FusionKind::Duplicate => "duplicate op",
            FusionKind::Swiglu => "swiglu",
            FusionKind::Qkv => "qkv",
            FusionKind::Bias => "bias",
            FusionKind::Activation => "activation",
            FusionKind::AddNorm => "add norm",
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
    rw.duplicates();
    rw.swiglu();
    rw.qkv();
    rw.epilogues();
    rw.add_norms();
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

/// Who reads and writes each value, for one pass.
struct Uses {
    /// Per value: the op that writes it.
    producer: Vec<Option<usize>>,
    /// Per value: the ops that read it, ascending, each once.
    readers: Vec<Vec<usize>>,
    /// Per value: written by more than one op, written in place, or a
    /// graph input that an op writes. Never fused.
    mutable: Vec<bool>,
    /// Per value: a graph input or output. Never removed.
    io: Vec<bool>,
}

impl Uses {
    fn new(g: &VkGraph) -> Self {
        let n = g.values.len();
        let mut u =
            Uses { producer: vec![None; n], readers: vec![Vec::new(); n], mutable: vec![false; n], io: vec![false; n] };
        for id in g.input_ids.iter().chain(&g.output_ids) {
            u.io[id.idx()] = true;
        }
        for (i, call) in g.chain.iter().enumerate() {
            for v in inputs_of(g, call) {
                let r = &mut u.readers[v.idx()];
                if r.last() != Some(&i) {
                    r.push(i);
                }
            }
            if let Some(op) = etwgpu_kernels::from_name(&call.name) {
                for &a in op.mutated_args() {
                    if let Some(v) = call.args.get(a) {
                        u.mutable[v.idx()] = true;
                    }
                }
            }
            for v in outputs_of(g, call) {
                if u.producer[v.idx()].is_some() {
                    u.mutable[v.idx()] = true;
                }
                u.producer[v.idx()] = Some(i);
            }
        }
        for id in &g.input_ids {
            if u.producer[id.idx()].is_some() {
                u.mutable[id.idx()] = true;
            }
        }
        u
    }

    /// Whether `v` is read by exactly the ops `by` (ascending).
    fn read_only_by(&self, v: ValueId, by: &[usize]) -> bool {
        self.readers[v.idx()] == by
    }

    /// Whether `v` may disappear: not an input or output, written once.
    fn removable(&self, v: ValueId) -> bool {
        !self.io[v.idx()] && !self.mutable[v.idx()] && self.producer[v.idx()].is_some()
    }
}

/// What a pass does to one op of the chain.
enum Edit {
    /// Drop it.
    Remove,
    /// Put these ops in its place.
    Replace(Vec<OpCall>),
}

/// A linear a fusion can take: `aten.linear` or `et_vk.linear_q4gsw`
/// (without bias).
#[derive(Debug, Clone, Copy)]
struct Linear {
    idx: usize,
    q4: bool,
    input: ValueId,
    /// `aten.linear`: weight and bias; q4: weights and scales.
    w: ValueId,
    b: ValueId,
    /// q4 only: the group size value.
    group_size: Option<ValueId>,
    out: ValueId,
}

/// An op the duplicate pass kept: its index and its (renamed) arguments.
type Kept = (usize, Vec<ValueId>);

fn sorted(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v.dedup();
    v
}

struct Rewriter {
    g: VkGraph,
    options: FuseOptions,
    fusions: Vec<Fusion>,
}

impl Rewriter {
    fn op(&self, i: usize) -> Option<OpId> {
        etwgpu_kernels::from_name(&self.g.chain[i].name)
    }

    fn args(&self, i: usize) -> &[ValueId] {
        &self.g.chain[i].args
    }

    fn tensor(&self, v: ValueId) -> Option<&VkTensor> {
        self.g.value(v).as_tensor()
    }

    fn dims(&self, v: ValueId) -> Option<&[u64]> {
        self.tensor(v).map(|t| t.dims.as_slice())
    }

    /// The dtype of a float tensor (f32 or f16).
    fn float(&self, v: ValueId) -> Option<DType> {
        self.tensor(v).map(|t| t.dtype).filter(|d| matches!(d, DType::F32 | DType::F16))
    }

    fn push(&mut self, v: VkValue) -> ValueId {
        self.g.values.push(v);
        ValueId(self.g.values.len() as u32 - 1)
    }

    fn call(&self, like: usize, name: &str, args: Vec<ValueId>) -> OpCall {
        OpCall { node_id: self.g.chain[like].node_id, name: name.to_string(), args }
    }

    fn record(&mut self, kind: FusionKind, ops: &[usize], op: &str) {
        let nodes = sorted(ops.to_vec()).iter().map(|&i| self.g.chain[i].node_id).collect();
        self.fusions.push(Fusion { kind, nodes, op: op.to_string() });
    }

    /// Applies a pass's edits.
    fn apply(&mut self, mut edits: BTreeMap<usize, Edit>) {
        let chain = std::mem::take(&mut self.g.chain);
        for (i, call) in chain.into_iter().enumerate() {
            match edits.remove(&i) {
                None => self.g.chain.push(call),
                Some(Edit::Remove) => {}
                Some(Edit::Replace(calls)) => self.g.chain.extend(calls),
            }
        }
    }

    /// A view op (aliases its input) with its input: `view_copy`,
    /// `squeeze_copy.dims`, `unsqueeze_copy`.
    fn view(&self, i: usize) -> Option<ValueId> {
        let is_view = matches!(self.op(i)?, OpId::ViewCopy | OpId::SqueezeCopy | OpId::UnsqueezeCopy);
        (is_view && self.args(i).len() == 3).then(|| self.args(i)[0])
    }

    /// `v` through the view that makes it, if any: `(source, view op)`.
    fn unview(&self, u: &Uses, v: ValueId) -> (ValueId, Option<usize>) {
        match u.producer[v.idx()].and_then(|p| self.view(p).map(|src| (src, p))) {
            Some((src, p)) => (src, Some(p)),
            None => (v, None),
        }
    }

    /// Two values hold the same data: the same value, or views of one
    /// source by the same op with the same arguments and declared shape.
    fn same_data(&self, u: &Uses, a: ValueId, b: ValueId) -> bool {
        if a == b {
            return true;
        }
        let (Some(pa), Some(pb)) = (u.producer[a.idx()], u.producer[b.idx()]) else { return false };
        let (ca, cb) = (&self.g.chain[pa], &self.g.chain[pb]);
        self.view(pa).is_some()
            && ca.name == cb.name
            && ca.args.len() == cb.args.len()
            && ca.args[0] == cb.args[0]
            && self.same_literal(ca.args[1], cb.args[1])
            && self.tensor(a).map(|t| (t.dtype, &t.dims)) == self.tensor(b).map(|t| (t.dtype, &t.dims))
    }

    /// Two argument values are equal literals (or the same value); lists
    /// are equal when their items are the same values or equal scalars.
    /// Whether `v` is the literal 1 (an `add`'s alpha that changes nothing).
    fn is_one(&self, v: ValueId) -> bool {
        matches!(self.g.value(v), VkValue::Int(1)) || *self.g.value(v) == VkValue::Double(1.0)
    }

    fn same_literal(&self, a: ValueId, b: ValueId) -> bool {
        let scalar = |a: ValueId, b: ValueId| {
            a == b
                || match (self.g.value(a), self.g.value(b)) {
                    (VkValue::SymInt(_) | VkValue::Tensor(_) | VkValue::ValueList(_), _) => false,
                    (x, y) => x == y,
                }
        };
        match (self.g.value(a), self.g.value(b)) {
            (VkValue::ValueList(x), VkValue::ValueList(y)) if a != b => {
                x.len() == y.len() && x.iter().zip(y).all(|(&p, &q)| scalar(p, q))
            }
            _ => scalar(a, b),
        }
    }

    /// The linear at op `i`, if a fusion can take it.
    fn linear(&self, i: usize) -> Option<Linear> {
        let args = self.args(i);
        let rank2 = |v: ValueId| self.dims(v).is_some_and(|d| d.len() == 2);
        match (self.op(i)?, args) {
            (OpId::Linear, &[input, w, b, out]) => {
                // The fused kernels take a bias of exactly `[N]`.
                let n = self.dims(w).and_then(|d| d.first().copied());
                let bias_ok = match self.g.value(b) {
                    VkValue::Null => true,
                    VkValue::Tensor(t) => Some(t.dims.as_slice()) == n.as_ref().map(std::slice::from_ref),
                    _ => false,
                };
                (rank2(w) && bias_ok && self.float(input).is_some()).then_some(Linear {
                    idx: i,
                    q4: false,
                    input,
                    w,
                    b,
                    group_size: None,
                    out,
                })
            }
            (OpId::LinearQ4gsw, &[input, w, s, gs, bias, out]) => {
                let plain = matches!(self.g.value(bias), VkValue::Null) && matches!(self.g.value(gs), VkValue::Int(_));
                (plain && rank2(w) && rank2(s) && self.float(input).is_some()).then_some(Linear {
                    idx: i,
                    q4: true,
                    input,
                    w,
                    b: s,
                    group_size: Some(gs),
                    out,
                })
            }
            _ => None,
        }
    }

    /// Two linears can share one kernel: same kind, input data, dtype and K
    /// (and group size for 4-bit weights).
    fn compatible(&self, u: &Uses, a: &Linear, b: &Linear) -> bool {
        let k = |l: &Linear| self.dims(l.input).and_then(|d| d.last().copied());
        a.q4 == b.q4
            && self.same_data(u, a.input, b.input)
            && self.float(a.out).is_some()
            && self.float(a.out) == self.float(b.out)
            && self.float(a.input) == self.float(a.out)
            && k(a) == k(b)
            && match (a.group_size, b.group_size) {
                (Some(x), Some(y)) => self.same_literal(x, y),
                (None, None) => true,
                _ => false,
            }
    }

    /// `v` may be read somewhere else in the chain than where it was.
    fn movable_read(&self, u: &Uses, v: ValueId) -> bool {
        match self.g.value(v) {
            VkValue::Tensor(_) => !u.mutable[v.idx()],
            _ => true,
        }
    }

    // 0. Duplicate ops.

    fn duplicates(&mut self) {
        let u = Uses::new(&self.g);
        // Values read in place of the results of dropped duplicates, and
        // the lists rebuilt with them.
        let mut rename: BTreeMap<ValueId, ValueId> = BTreeMap::new();
        let mut lists: BTreeMap<ValueId, ValueId> = BTreeMap::new();
        // Per op name and first argument: the pure ops kept so far, with
        // their renamed arguments.
        let mut kept: BTreeMap<(String, ValueId), Vec<Kept>> = BTreeMap::new();
        let mut edits = BTreeMap::new();
        for i in 0..self.g.chain.len() {
            let call = self.g.chain[i].clone();
            let n = call.args.len();
            let mut args = call.args.clone();
            for a in args.iter_mut().take(n.saturating_sub(1)) {
                if let Some(&r) = rename.get(a) {
                    *a = r;
                } else if let VkValue::ValueList(items) = self.g.value(*a)
                    && items.iter().any(|v| rename.contains_key(v))
                {
                    let renamed: Vec<ValueId> = items.iter().map(|v| *rename.get(v).unwrap_or(v)).collect();
                    let list = *lists.entry(*a).or_insert_with(|| {
                        self.g.values.push(VkValue::ValueList(renamed));
                        ValueId(self.g.values.len() as u32 - 1)
                    });
                    *a = list;
                }
            }
            let pure = self.op(i).is_some_and(|op| op.mutated_args().is_empty()) && n > 0;
            let key = (call.name.clone(), args.first().copied().unwrap_or(ValueId(0)));
            let earlier = kept.get(&key).and_then(|js| {
                js.iter()
                    .find(|(j, first)| pure && self.repeats(&u, &call, &args, &self.g.chain[*j], first))
                    .map(|p| p.0)
            });
            match earlier {
                Some(j) => {
                    let (ours, theirs) = (outputs_of(&self.g, &call), outputs_of(&self.g, &self.g.chain[j]));
                    rename.extend(ours.into_iter().zip(theirs));
                    self.record(FusionKind::Duplicate, &[i], "");
                    edits.insert(i, Edit::Remove);
                }
                None => {
                    if pure {
                        kept.entry(key).or_default().push((i, args.clone()));
                    }
                    if args != call.args {
                        edits.insert(i, Edit::Replace(vec![OpCall { args, ..call }]));
                    }
                }
            }
        }
        self.apply(edits);
    }

    /// The op `call`, with arguments `args` (inputs renamed), computes what
    /// the earlier `first` (with `first_args`) does: same name, the same
    /// input values or equal literals, results of the same kinds, shapes
    /// and dtypes that may disappear (and no reader of a result list).
    fn repeats(&self, u: &Uses, call: &OpCall, args: &[ValueId], first: &OpCall, first_args: &[ValueId]) -> bool {
        let n = args.len();
        if first.name != call.name || first_args.len() != n || n == 0 {
            return false;
        }
        let last = args[n - 1];
        if matches!(self.g.value(last), VkValue::ValueList(_)) && !u.readers[last.idx()].is_empty() {
            return false;
        }
        let inputs_same = args[..n - 1].iter().zip(&first_args[..n - 1]).all(|(&a, &b)| {
            a == b
                || match (self.g.value(a), self.g.value(b)) {
                    (VkValue::ValueList(x), VkValue::ValueList(y)) => x == y,
                    _ => self.same_literal(a, b),
                }
        });
        let inputs_stable = inputs_of(&self.g, call).iter().all(|&v| !u.mutable[v.idx()]);
        let (ours, theirs) = (outputs_of(&self.g, call), outputs_of(&self.g, first));
        let outputs_alike = ours.len() == theirs.len()
            && ours.iter().zip(&theirs).all(|(&a, &b)| {
                let shape = |v: ValueId| match self.g.value(v) {
                    VkValue::Tensor(t) => Some((Some(t.dtype), t.dims.clone())),
                    VkValue::SymInt(_) => Some((None, Vec::new())),
                    _ => None,
                };
                u.removable(a) && !u.mutable[b.idx()] && shape(a).is_some() && shape(a) == shape(b)
            });
        inputs_same && inputs_stable && outputs_alike
    }

    // 1. SwiGLU.

    fn swiglu(&mut self) {
        // x, two weights, two biases or scales, the output.
        if self.options.max_storage_buffers < 6 {
            return;
        }
        let u = Uses::new(&self.g);
        let mut edits = BTreeMap::new();
        let mut claimed = BTreeSet::new();
        for m in 0..self.g.chain.len() {
            if claimed.contains(&m) {
                continue;
            }
            let Some((ops, calls, name)) = self.match_swiglu(&u, m) else { continue };
            if ops.iter().any(|o| claimed.contains(o)) {
                continue;
            }
            self.record(FusionKind::Swiglu, &ops, &name);
            for &o in &ops {
                claimed.insert(o);
                edits.insert(o, Edit::Remove);
            }
            edits.insert(m, Edit::Replace(calls));
        }
        self.apply(edits);
    }

    /// A SwiGLU ending at the `mul` at op `m`: the ops it replaces, what
    /// goes in their place (at `m`) and the fused op's name.
    fn match_swiglu(&self, u: &Uses, m: usize) -> Option<(Vec<usize>, Vec<OpCall>, String)> {
        if self.op(m)? != OpId::Mul {
            return None;
        }
        let &[a, b, out] = self.args(m) else { return None };
        for (left, right) in [(a, b), (b, a)] {
            let Some(found) = self.match_swiglu_sides(u, m, left, right, out) else { continue };
            return Some(found);
        }
        None
    }

    fn match_swiglu_sides(
        &self,
        u: &Uses,
        m: usize,
        left: ValueId,
        right: ValueId,
        out: ValueId,
    ) -> Option<(Vec<usize>, Vec<OpCall>, String)> {
        // left = mul(g', sigmoid(g')).
        let pa = u.producer[left.idx()]?;
        if self.op(pa)? != OpId::Mul {
            return None;
        }
        let &[p, q, _] = self.args(pa) else { return None };
        let (gv, sv, ps) = [(p, q), (q, p)].into_iter().find_map(|(gv, sv)| {
            let ps = u.producer[sv.idx()]?;
            (self.op(ps)? == OpId::Sigmoid && self.args(ps).first() == Some(&gv)).then_some((gv, sv, ps))
        })?;
        let (g, view_g) = self.unview(u, gv);
        let (up, view_u) = self.unview(u, right);
        let lg = self.linear(u.producer[g.idx()]?)?;
        let lu = self.linear(u.producer[up.idx()]?)?;
        if lg.idx == lu.idx || lg.out != g || lu.out != up || !self.compatible(u, &lg, &lu) {
            return None;
        }
        // 4-bit gate and up weights share one packing.
        if lg.q4 && (self.dims(lg.w) != self.dims(lu.w) || self.dims(lg.b) != self.dims(lu.b)) {
            return None;
        }
        // Shapes: the product has the gate's and the up's shape.
        let dtype = self.float(out)?;
        let same = |x: ValueId, y: ValueId| self.tensor(x).is_some() && self.dims(x) == self.dims(y);
        if !(same(gv, right) && same(gv, out) && same(g, up)) || self.float(gv) != Some(dtype) {
            return None;
        }
        if self.float(right) != Some(dtype) || self.float(g) != Some(dtype) {
            return None;
        }
        // Every intermediate is read only inside the pattern.
        let sig_mul = sorted(vec![ps, pa]);
        let reads_ok = match view_g {
            Some(v) => u.read_only_by(g, &[v]) && u.read_only_by(gv, &sig_mul),
            None => u.read_only_by(g, &sig_mul),
        } && u.read_only_by(sv, &[pa])
            && u.read_only_by(left, &[m])
            && match view_u {
                Some(v) => u.read_only_by(up, &[v]) && u.read_only_by(right, &[m]),
                None => u.read_only_by(up, &[m]),
            };
        let gone = [g, gv, sv, left, up, right];
        if !reads_ok || !gone.iter().all(|&v| u.removable(v)) {
            return None;
        }
        let mut reads = vec![lg.input, lg.w, lg.b, lu.w, lu.b];
        reads.extend(lg.group_size);
        if !reads.iter().all(|&v| self.movable_read(u, v)) {
            return None;
        }
        let mut ops = vec![lg.idx, lu.idx, ps, pa];
        ops.extend(view_g);
        ops.extend(view_u);
        let target = if view_g.is_some() { g } else { out };
        let (name, args) = if lg.q4 {
            let gs = lg.group_size.expect("q4 linears have a group size");
            ("etwgpu.linear_q4gsw_swiglu.default", vec![lg.input, gs, lg.w, lg.b, lu.w, lu.b, target])
        } else {
            ("etwgpu.linear_swiglu.default", vec![lg.input, lg.w, lg.b, lu.w, lu.b, target])
        };
        let mut calls = vec![self.call(m, name, args)];
        if let Some(v) = view_g {
            let view = &self.g.chain[v];
            calls.push(self.call(m, &view.name, vec![g, view.args[1], out]));
        }
        ops.push(m);
        Some((sorted(ops), calls, name.to_string()))
    }

    // 2. QKV.

    fn qkv(&mut self) {
        let u = Uses::new(&self.g);
        let linears: Vec<Linear> = (0..self.g.chain.len()).filter_map(|i| self.linear(i)).collect();
        let mut claimed: BTreeSet<usize> = BTreeSet::new();
        let mut edits = BTreeMap::new();
        for (i, first) in linears.iter().enumerate() {
            if claimed.contains(&first.idx) {
                continue;
            }
            let mut group = vec![*first];
            for other in &linears[i + 1..] {
                if group.len() == 3 {
                    break;
                }
                if !claimed.contains(&other.idx)
                    && self.compatible(&u, first, other)
                    && self.qkv_joinable(&u, first, other)
                {
                    group.push(*other);
                }
            }
            // x, three weights, three biases or scales, three outputs.
            if group.len() < 3 || self.options.max_storage_buffers < 10 || !self.movable_read(&u, first.input) {
                continue;
            }
            let list = self.push(VkValue::ValueList(group.iter().map(|l| l.out).collect()));
            let (name, mut args) = if first.q4 {
                ("etwgpu.linear_q4gsw_qkv.default", vec![first.input, first.group_size.expect("q4 group size")])
            } else {
                ("etwgpu.linear_qkv.default", vec![first.input])
            };
            for l in &group {
                args.extend([l.w, l.b]);
            }
            args.push(list);
            let ops: Vec<usize> = group.iter().map(|l| l.idx).collect();
            self.record(FusionKind::Qkv, &ops, name);
            edits.insert(first.idx, Edit::Replace(vec![self.call(first.idx, name, args)]));
            for l in &group[1..] {
                edits.insert(l.idx, Edit::Remove);
            }
            claimed.extend(ops);
        }
        self.apply(edits);
    }

    /// `later` can be computed at `first`'s place: its weights exist by then
    /// and its output is written once.
    fn qkv_joinable(&self, u: &Uses, first: &Linear, later: &Linear) -> bool {
        let ready = |v: ValueId| match self.g.value(v) {
            VkValue::Tensor(_) => u.producer[v.idx()].is_none_or(|p| p < first.idx) && !u.mutable[v.idx()],
            _ => true,
        };
        ready(later.w) && ready(later.b) && !u.mutable[later.out.idx()] && later.out != first.out
    }

    // 3. Bias and activation epilogues.

    fn epilogues(&mut self) {
        let u = Uses::new(&self.g);
        let mut edits: BTreeMap<usize, Edit> = BTreeMap::new();
        let mut claimed: BTreeSet<usize> = BTreeSet::new();
        for p in 0..self.g.chain.len() {
            let Some(op) = self.op(p) else { continue };
            if claimed.contains(&p)
                || !matches!(op, OpId::Linear | OpId::Mm | OpId::Addmm | OpId::Convolution | OpId::ConvWithClamp)
            {
                continue;
            }
            let mut call = self.g.chain[p].clone();
            let mut removed: Vec<usize> = Vec::new();
            if let Some((add, bias, z)) = self.match_bias(&u, p, op).filter(|m| !claimed.contains(&m.0)) {
                if op == OpId::Linear {
                    call.args[2] = bias;
                    call.args[3] = z;
                } else {
                    let one = self.push(VkValue::Int(1));
                    call.name = "aten.addmm.default".into();
                    call.args = vec![bias, call.args[0], call.args[1], one, one, z];
                }
                self.record(FusionKind::Bias, &[p, add], &call.name);
                removed.push(add);
            }
            let out = *call.args.last().expect("matched ops have arguments");
            let act_name = match call.name.as_str() {
                "aten.linear.default" => Some("etwgpu.linear_act.default"),
                "aten.addmm.default" => Some("etwgpu.addmm_act.default"),
                "aten.convolution.default" => Some("etwgpu.convolution_act.default"),
                "et_vk.conv_with_clamp.default" => Some("etwgpu.conv_with_clamp_act.default"),
                _ => None,
            };
            if let Some(act_name) = act_name
                && let Some((ops, epilogue, view, act_out)) = self.match_activation(&u, out)
                && !ops.iter().chain(&view).any(|o| claimed.contains(o))
            {
                let act = self.push(VkValue::String(epilogue.text()));
                let n = call.args.len();
                call.name = act_name.to_string();
                call.args.insert(n - 1, act);
                match view {
                    Some(v) => {
                        // The activation runs before the view, which now
                        // makes the activation's output from the op's.
                        let view_call = &self.g.chain[v];
                        let moved = self.call(v, &view_call.name, vec![out, view_call.args[1], act_out]);
                        edits.insert(v, Edit::Replace(vec![moved]));
                        claimed.insert(v);
                    }
                    None => *call.args.last_mut().expect("arguments") = act_out,
                }
                let mut all = vec![p];
                all.extend(&ops);
                self.record(FusionKind::Activation, &all, act_name);
                removed.extend(ops);
            }
            if !removed.is_empty() {
                for &o in &removed {
                    edits.insert(o, Edit::Remove);
                    claimed.insert(o);
                }
                edits.insert(p, Edit::Replace(vec![call]));
                claimed.insert(p);
            }
        }
        self.apply(edits);
    }

    // 4. Residual add and RMS norm.

    fn add_norms(&mut self) {
        // a, b, the weight, the sum and the normed output.
        if self.options.max_storage_buffers < 5 {
            return;
        }
        let u = Uses::new(&self.g);
        let mut edits: BTreeMap<usize, Edit> = BTreeMap::new();
        for p in 0..self.g.chain.len() {
            let Some((add, [a, b, weight, eps, sum, out])) = self.match_add_norm(&u, p) else { continue };
            if edits.contains_key(&add) || edits.contains_key(&p) {
                continue;
            }
            let outs = self.push(VkValue::ValueList(vec![sum, out]));
            let call = self.call(add, "etwgpu.add_rms_norm.default", vec![a, b, weight, eps, outs]);
            self.record(FusionKind::AddNorm, &[add, p], "etwgpu.add_rms_norm.default");
            edits.insert(add, Edit::Replace(vec![call]));
            edits.insert(p, Edit::Remove);
        }
        self.apply(edits);
    }

    /// `et_vk.rms_norm(z, weight, eps, out)` at op `p` whose input is the
    /// output of an `aten.add(a, b, alpha 1)` of two tensors of z's shape
    /// and dtype, with a constant weight: the add's index and the fused op's
    /// arguments `[a, b, weight, eps, z, out]`. The fused op runs at the
    /// add, where `a` and `b` are read today; the norm's output is written
    /// once, by the norm, so its readers all come later.
    fn match_add_norm(&self, u: &Uses, p: usize) -> Option<(usize, [ValueId; 6])> {
        if self.op(p)? != OpId::RmsNorm {
            return None;
        }
        let &[z, weight, eps, out] = self.args(p) else { return None };
        let add = u.producer[z.idx()]?;
        if self.op(add)? != OpId::Add || add >= p {
            return None;
        }
        let &[a, b, alpha, sum] = self.args(add) else { return None };
        let one = self.is_one(alpha);
        let dtype = self.float(z)?;
        let dims = self.dims(z)?;
        let same = |v: ValueId| self.float(v) == Some(dtype) && self.dims(v) == Some(dims);
        let ok = one
            && sum == z
            && same(a)
            && same(b)
            && self.float(out) == Some(dtype)
            && self.tensor(weight).is_some_and(|t| t.constant.is_some())
            && [z, out, a, b].iter().all(|v| !u.mutable[v.idx()]);
        ok.then_some((add, [a, b, weight, eps, z, out]))
    }

    /// `y = op(..)` read only by `add(y, b)` (either order, alpha 1) with a
    /// constant `b` of shape `[N]`, for a bias-less `aten.linear` or an
    /// `aten.mm`: `(add op, b, add's output)`.
    fn match_bias(&self, u: &Uses, p: usize, op: OpId) -> Option<(usize, ValueId, ValueId)> {
        let args = self.args(p);
        match op {
            OpId::Linear if args.len() == 4 && matches!(self.g.value(args[2]), VkValue::Null) => {}
            OpId::Mm if args.len() == 3 => {}
            _ => return None,
        }
        let y = *args.last()?;
        let dtype = self.float(y)?;
        let [add] = u.readers[y.idx()][..] else { return None };
        if self.op(add)? != OpId::Add || !u.removable(y) {
            return None;
        }
        let &[s, o, alpha, z] = self.args(add) else { return None };
        let one = self.is_one(alpha);
        let bias = if s == y { o } else { s };
        let t = self.tensor(bias)?;
        let n = *self.dims(y)?.last()?;
        let ok = one
            && (s == y) != (o == y)
            && t.constant.is_some()
            && t.dtype == dtype
            && t.dims == [n]
            && self.dims(z) == self.dims(y)
            && self.float(z) == Some(dtype)
            && !u.mutable[z.idx()];
        ok.then_some((add, bias, z))
    }

    /// The activation applied to `y` (directly or through one view): the
    /// ops it takes, the epilogue, the view (re-targeted by the caller) and
    /// the activation's output.
    fn match_activation(&self, u: &Uses, y: ValueId) -> Option<(Vec<usize>, Epilogue, Option<usize>, ValueId)> {
        let dtype = self.float(y)?;
        if !u.removable(y) {
            return None;
        }
        let (pre, view) = match u.readers[y.idx()][..] {
            [r] if self.view(r) == Some(y) => {
                let yv = *self.args(r).last()?;
                (u.removable(yv) && self.float(yv) == Some(dtype)).then_some((yv, Some(r)))?
            }
            _ => (y, None),
        };
        let (ops, epilogue, out) = match u.readers[pre.idx()][..] {
            [r] => {
                let (inst, operands, out) = self.as_elementwise(r)?;
                match inst {
                    Inst::Unary { op, p, .. } if operands == [pre] => {
                        (vec![r], Epilogue { op, p0: p[0], p1: p[1] }, out)
                    }
                    _ => return None,
                }
            }
            [a, b] => {
                // SiLU: s = sigmoid(pre); out = mul(pre, s) or mul(s, pre).
                let (s_op, m_op) = if self.op(a)? == OpId::Sigmoid { (a, b) } else { (b, a) };
                let s = *self.args(s_op).last()?;
                let silu = self.op(s_op)? == OpId::Sigmoid
                    && self.args(s_op).first() == Some(&pre)
                    && self.op(m_op)? == OpId::Mul
                    && matches!(self.args(m_op), &[x, y2, _] if (x == pre && y2 == s) || (x == s && y2 == pre))
                    && u.read_only_by(s, &[m_op])
                    && u.removable(s);
                if !silu {
                    return None;
                }
                (vec![s_op, m_op], Epilogue { op: UnaryOp::Silu, p0: 0.0, p1: 0.0 }, *self.args(m_op).last()?)
            }
            _ => return None,
        };
        let ok = self.float(out) == Some(dtype) && self.dims(out) == self.dims(pre) && !u.mutable[out.idx()];
        ok.then_some((ops, epilogue, view, out))
    }

    // 4. Elementwise chains.

    /// The op at `i` as one fused-expression instruction over its tensor
    /// operands (`Input(k)` for the `k`-th), with its output; only float
    /// ops whose operands and output share one dtype.
    fn as_elementwise(&self, i: usize) -> Option<(Inst, Vec<ValueId>, ValueId)> {
        let args = self.args(i);
        let num = |v: ValueId| match self.g.value(v) {
            VkValue::Int(x) => Some(*x as f64),
            VkValue::Double(x) => Some(*x),
            _ => None,
        };
        let opt_num = |v: ValueId| match self.g.value(v) {
            VkValue::Null => Some(None),
            _ => num(v).map(Some),
        };
        let unary = |op: UnaryOp, p0: f32, p1: f32| Inst::Unary { op, x: Operand::Input(0), p: [p0, p1] };
        let binary = |op: BinaryOp, alpha: f64| Inst::Binary {
            op,
            a: Operand::Input(0),
            b: Operand::Input(1),
            alpha: alpha as f32,
        };
        let op = self.op(i)?;
        // The table's `@unary` rows: exactly one parameterless `UnaryOp`.
        let simple = op.unary();
        let (inst, n_operands) = match (op, args) {
            (_, &[_, _]) if simple.is_some() => (unary(simple?, 0.0, 0.0), 1),
            (OpId::Gelu, &[_, approx, _]) => {
                let op = match self.g.value(approx) {
                    VkValue::Null => UnaryOp::GeluErf,
                    VkValue::String(s) if s == "none" => UnaryOp::GeluErf,
                    VkValue::String(s) if s == "tanh" => UnaryOp::GeluTanh,
                    _ => return None,
                };
                (unary(op, 0.0, 0.0), 1)
            }
            (OpId::Clamp, &[_, lo, hi, _]) => {
                let lo = opt_num(lo)?.map_or(f32::MIN, |x| x as f32);
                let hi = opt_num(hi)?.map_or(f32::MAX, |x| x as f32);
                (unary(UnaryOp::Clamp, lo, hi), 1)
            }
            (OpId::Hardtanh, &[_, lo, hi, _]) => (unary(UnaryOp::Clamp, num(lo)? as f32, num(hi)? as f32), 1),
            (OpId::LeakyRelu, &[_, slope, _]) => (unary(UnaryOp::LeakyRelu, num(slope)? as f32, 0.0), 1),
            (OpId::PowTensorScalar, &[_, e, _]) => (unary(UnaryOp::PowScalar, num(e)? as f32, 0.0), 1),
            (OpId::Add, &[_, _, alpha, _]) => (binary(BinaryOp::Add, num(alpha)?), 2),
            (OpId::Sub, &[_, _, alpha, _]) => (binary(BinaryOp::Sub, num(alpha)?), 2),
            (OpId::Mul, &[_, _, _]) => (binary(BinaryOp::Mul, 1.0), 2),
            (OpId::Div, &[_, _, _]) => (binary(BinaryOp::Div, 1.0), 2),
            (OpId::PowTensorTensor, &[_, _, _]) => (binary(BinaryOp::Pow, 1.0), 2),
            (OpId::Minimum, &[_, _, _]) => (binary(BinaryOp::Minimum, 1.0), 2),
            (OpId::Maximum, &[_, _, _]) => (binary(BinaryOp::Maximum, 1.0), 2),
            (OpId::DivMode, &[_, _, mode, _]) => {
                let op = match self.g.value(mode) {
                    VkValue::Null => BinaryOp::Div,
                    VkValue::String(s) if s == "floor" => BinaryOp::FloorDiv,
                    VkValue::String(s) if s == "trunc" => BinaryOp::TruncDiv,
                    _ => return None,
                };
                (binary(op, 1.0), 2)
            }
            _ => return None,
        };
        let operands = args[..n_operands].to_vec();
        let out = *args.last()?;
        let dtype = self.float(out)?;
        operands.iter().all(|&v| self.float(v) == Some(dtype)).then_some((inst, operands, out))
    }

    fn elementwise(&mut self) {
        let u = Uses::new(&self.g);
        // Groups by root (the op whose result leaves the group) with their
        // members, in chain order; the roots' results may join later groups.
        let mut groups: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
        let max_inputs = FUSED_MAX_INPUTS.min(self.options.max_storage_buffers.saturating_sub(1) as usize);
        // The tensors a group reads from outside.
        let inputs_of_group = |rw: &Self, members: &BTreeSet<usize>| -> BTreeSet<ValueId> {
            let mut inputs = BTreeSet::new();
            for &m in members {
                let (_, operands, _) = rw.as_elementwise(m).expect("members are elementwise");
                inputs.extend(
                    operands.into_iter().filter(|v| !u.producer[v.idx()].is_some_and(|p| members.contains(&p))),
                );
            }
            inputs
        };
        for e in 0..self.g.chain.len() {
            let Some((_, operands, _)) = self.as_elementwise(e) else { continue };
            if !operands.iter().all(|&v| self.movable_read(&u, v)) {
                continue;
            }
            // Take in the groups whose results only this group reads (to a
            // fixpoint: `mul(t, sigmoid(t))` takes `sigmoid`, then `t`),
            // while the inputs fit one kernel.
            let mut members: BTreeSet<usize> = BTreeSet::from([e]);
            loop {
                let candidates: BTreeSet<(usize, ValueId)> = inputs_of_group(self, &members)
                    .into_iter()
                    .filter_map(|v| u.producer[v.idx()].filter(|p| groups.contains_key(p)).map(|p| (p, v)))
                    .collect();
                let mut grew = false;
                for (p, v) in candidates {
                    if !u.removable(v) || !u.readers[v.idx()].iter().all(|r| members.contains(r)) {
                        continue;
                    }
                    let trial: BTreeSet<usize> = members.union(&groups[&p]).copied().collect();
                    if trial.len() <= MAX_FUSED_OPS && inputs_of_group(self, &trial).len() <= max_inputs {
                        members = trial;
                        groups.remove(&p);
                        grew = true;
                    }
                }
                if !grew {
                    break;
                }
            }
            if inputs_of_group(self, &members).len() <= max_inputs {
                groups.insert(e, members);
            }
        }
        let mut edits = BTreeMap::new();
        for (root, members) in groups {
            if members.len() < 2 {
                continue;
            }
            let members: Vec<usize> = members.into_iter().collect();
            let call = self.fused_elementwise(&u, root, &members);
            self.record(FusionKind::Elementwise, &members, &call.name);
            for &m in &members {
                edits.insert(m, Edit::Remove);
            }
            edits.insert(root, Edit::Replace(vec![call]));
        }
        self.apply(edits);
    }

    /// The `etwgpu.fused_elementwise` call of a group (members in chain
    /// order, the last one its root).
    fn fused_elementwise(&mut self, u: &Uses, root: usize, members: &[usize]) -> OpCall {
        let mut inputs: Vec<ValueId> = Vec::new();
        let mut temps: Vec<ValueId> = Vec::new();
        let mut insts = Vec::new();
        for &m in members {
            let (inst, operands, out) = self.as_elementwise(m).expect("members are elementwise");
            let mut operand = |v: ValueId| match temps.iter().position(|&t| t == v) {
                Some(j) if u.producer[v.idx()].is_some_and(|p| members.contains(&p)) => Operand::Temp(j),
                _ => Operand::Input(match inputs.iter().position(|&i| i == v) {
                    Some(k) => k,
                    None => {
                        inputs.push(v);
                        inputs.len() - 1
                    }
                }),
            };
            insts.push(match inst {
                Inst::Unary { op, p, .. } => Inst::Unary { op, x: operand(operands[0]), p },
                Inst::Binary { op, alpha, .. } => {
                    let a = operand(operands[0]);
                    Inst::Binary { op, a, b: operand(operands[1]), alpha }
                }
            });
            temps.push(out);
        }
        let expr = self.push(VkValue::String(Expr { insts }.to_string()));
        let mut args = vec![expr];
        args.extend(&inputs);
        args.push(*self.args(root).last().expect("an output"));
        self.call(root, "etwgpu.fused_elementwise.default", args)
    }

    // 5. Dead ops.

    fn dead_ops(&mut self) {
        let u = Uses::new(&self.g);
        let mut live_readers: Vec<usize> = u.readers.iter().map(Vec::len).collect();
        let mut edits = BTreeMap::new();
        let mut dead = Vec::new();
        for i in (0..self.g.chain.len()).rev() {
            let call = &self.g.chain[i];
            let Some(op) = self.op(i) else { continue };
            let outs = outputs_of(&self.g, call);
            let unused = op.mutated_args().is_empty()
                && !outs.is_empty()
                && outs.iter().all(|v| live_readers[v.idx()] == 0 && !u.io[v.idx()] && !u.mutable[v.idx()]);
            if !unused {
                continue;
            }
            let mut seen = BTreeSet::new();
            for v in inputs_of(&self.g, call) {
                if seen.insert(v) {
                    live_readers[v.idx()] -= 1;
                }
            }
            edits.insert(i, Edit::Remove);
            dead.push(i);
        }
        for &i in dead.iter().rev() {
            let name = String::new();
            self.record(FusionKind::DeadOp, &[i], &name);
        }
        self.apply(edits);
    }
}
