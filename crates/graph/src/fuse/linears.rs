//! Passes 1 and 2: SwiGLU (`silu(gate(x)) * up(x)` of two linears of one
//! input) and QKV (three linears of one input), each one dispatch.

use std::collections::{BTreeMap, BTreeSet};

use etwgpu_format::{OpCall, ValueId, VkValue};
use etwgpu_kernels::OpId;

use super::FusionKind;
use super::rewriter::{Edit, Linear, Rewriter, Uses, sorted};

impl Rewriter {
    // 1. SwiGLU.

    pub(super) fn swiglu(&mut self) {
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
    pub(super) fn match_swiglu(&self, u: &Uses, m: usize) -> Option<(Vec<usize>, Vec<OpCall>, String)> {
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

    pub(super) fn match_swiglu_sides(
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

    pub(super) fn qkv(&mut self) {
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
    pub(super) fn qkv_joinable(&self, u: &Uses, first: &Linear, later: &Linear) -> bool {
        let ready = |v: ValueId| match self.g.value(v) {
            VkValue::Tensor(_) => u.producer[v.idx()].is_none_or(|p| p < first.idx) && !u.mutable[v.idx()],
            _ => true,
        };
        ready(later.w) && ready(later.b) && !u.mutable[later.out.idx()] && later.out != first.out
    }
}
