//! The one `Rewriter` every fusion pass works on: the graph being
//! rewritten, who reads and writes each value ([`Uses`]), how a pass's
//! edits are applied, and the graph questions the passes share (views,
//! literals, linears).

use std::collections::BTreeMap;

use etwgpu_format::{DType, OpCall, ValueId, VkGraph, VkTensor, VkValue};
use etwgpu_kernels::OpId;

use super::{FuseOptions, Fusion, FusionKind, inputs_of, outputs_of};

/// Who reads and writes each value, for one pass.
pub(super) struct Uses {
    /// Per value: the op that writes it.
    pub(super) producer: Vec<Option<usize>>,
    /// Per value: the ops that read it, ascending, each once.
    pub(super) readers: Vec<Vec<usize>>,
    /// Per value: written by more than one op, written in place, or a
    /// graph input that an op writes. Never fused.
    pub(super) mutable: Vec<bool>,
    /// Per value: a graph input or output. Never removed.
    pub(super) io: Vec<bool>,
}

impl Uses {
    pub(super) fn new(g: &VkGraph) -> Self {
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
    pub(super) fn read_only_by(&self, v: ValueId, by: &[usize]) -> bool {
        self.readers[v.idx()] == by
    }

    /// Whether `v` may disappear: not an input or output, written once.
    pub(super) fn removable(&self, v: ValueId) -> bool {
        !self.io[v.idx()] && !self.mutable[v.idx()] && self.producer[v.idx()].is_some()
    }
}

/// What a pass does to one op of the chain.
pub(super) enum Edit {
    /// Drop it.
    Remove,
    /// Put these ops in its place.
    Replace(Vec<OpCall>),
}

/// A linear a fusion can take: `aten.linear` or `et_vk.linear_q4gsw`
/// (without bias).
#[derive(Debug, Clone, Copy)]
pub(super) struct Linear {
    pub(super) idx: usize,
    pub(super) q4: bool,
    pub(super) input: ValueId,
    /// `aten.linear`: weight and bias; q4: weights and scales.
    pub(super) w: ValueId,
    pub(super) b: ValueId,
    /// q4 only: the group size value.
    pub(super) group_size: Option<ValueId>,
    pub(super) out: ValueId,
}

/// An op the duplicate pass kept: its index and its (renamed) arguments.
pub(super) type Kept = (usize, Vec<ValueId>);

pub(super) fn sorted(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v.dedup();
    v
}

pub(super) struct Rewriter {
    pub(super) g: VkGraph,
    pub(super) options: FuseOptions,
    pub(super) fusions: Vec<Fusion>,
}

impl Rewriter {
    pub(super) fn op(&self, i: usize) -> Option<OpId> {
        etwgpu_kernels::from_name(&self.g.chain[i].name)
    }

    pub(super) fn args(&self, i: usize) -> &[ValueId] {
        &self.g.chain[i].args
    }

    pub(super) fn tensor(&self, v: ValueId) -> Option<&VkTensor> {
        self.g.value(v).as_tensor()
    }

    pub(super) fn dims(&self, v: ValueId) -> Option<&[u64]> {
        self.tensor(v).map(|t| t.dims.as_slice())
    }

    /// The dtype of a float tensor (f32 or f16).
    pub(super) fn float(&self, v: ValueId) -> Option<DType> {
        self.tensor(v).map(|t| t.dtype).filter(|d| matches!(d, DType::F32 | DType::F16))
    }

    pub(super) fn push(&mut self, v: VkValue) -> ValueId {
        self.g.values.push(v);
        ValueId(self.g.values.len() as u32 - 1)
    }

    pub(super) fn call(&self, like: usize, name: &str, args: Vec<ValueId>) -> OpCall {
        OpCall { node_id: self.g.chain[like].node_id, name: name.to_string(), args }
    }

    pub(super) fn record(&mut self, kind: FusionKind, ops: &[usize], op: &str) {
        let nodes = sorted(ops.to_vec()).iter().map(|&i| self.g.chain[i].node_id).collect();
        self.fusions.push(Fusion { kind, nodes, op: op.to_string() });
    }

    /// Applies a pass's edits.
    pub(super) fn apply(&mut self, mut edits: BTreeMap<usize, Edit>) {
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
    pub(super) fn view(&self, i: usize) -> Option<ValueId> {
        let is_view = matches!(self.op(i)?, OpId::ViewCopy | OpId::SqueezeCopy | OpId::UnsqueezeCopy);
        (is_view && self.args(i).len() == 3).then(|| self.args(i)[0])
    }

    /// `v` through the view that makes it, if any: `(source, view op)`.
    pub(super) fn unview(&self, u: &Uses, v: ValueId) -> (ValueId, Option<usize>) {
        match u.producer[v.idx()].and_then(|p| self.view(p).map(|src| (src, p))) {
            Some((src, p)) => (src, Some(p)),
            None => (v, None),
        }
    }

    /// Two values hold the same data: the same value, or views of one
    /// source by the same op with the same arguments and declared shape.
    pub(super) fn same_data(&self, u: &Uses, a: ValueId, b: ValueId) -> bool {
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
    pub(super) fn is_one(&self, v: ValueId) -> bool {
        matches!(self.g.value(v), VkValue::Int(1)) || *self.g.value(v) == VkValue::Double(1.0)
    }

    pub(super) fn same_literal(&self, a: ValueId, b: ValueId) -> bool {
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
    pub(super) fn linear(&self, i: usize) -> Option<Linear> {
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
    pub(super) fn compatible(&self, u: &Uses, a: &Linear, b: &Linear) -> bool {
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
    pub(super) fn movable_read(&self, u: &Uses, v: ValueId) -> bool {
        match self.g.value(v) {
            VkValue::Tensor(_) => !u.mutable[v.idx()],
            _ => true,
        }
    }
}
