//! Passes 0 and 8: duplicate ops (an op that repeats an earlier one) and
//! dead ops (none of whose results is read).

use std::collections::{BTreeMap, BTreeSet};

use etwgpu_format::{OpCall, ValueId, VkValue};

use super::rewriter::{Edit, Kept, Rewriter, Uses};
use super::{FusionKind, inputs_of, outputs_of};

impl Rewriter {
    // 0. Duplicate ops.

    pub(super) fn duplicates(&mut self) {
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
    pub(super) fn repeats(
        &self,
        u: &Uses,
        call: &OpCall,
        args: &[ValueId],
        first: &OpCall,
        first_args: &[ValueId],
    ) -> bool {
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

    // 10. Dead ops.

    pub(super) fn dead_ops(&mut self) {
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
