//! Passes 3 and 4: bias and activation epilogues of linears, matmuls and
//! convolutions, and the residual add before an RMS norm.

use std::collections::{BTreeMap, BTreeSet};

use etwgpu_format::{ValueId, VkValue};
use etwgpu_kernels::OpId;
use etwgpu_kernels::ops::elementwise::UnaryOp;
use etwgpu_kernels::ops::fused::{Epilogue, Inst};

use super::FusionKind;
use super::rewriter::{Edit, Rewriter, Uses};

impl Rewriter {
    // 3. Bias and activation epilogues.

    pub(super) fn epilogues(&mut self) {
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

    pub(super) fn add_norms(&mut self) {
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
    pub(super) fn match_add_norm(&self, u: &Uses, p: usize) -> Option<(usize, [ValueId; 6])> {
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
    pub(super) fn match_bias(&self, u: &Uses, p: usize, op: OpId) -> Option<(usize, ValueId, ValueId)> {
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
    pub(super) fn match_activation(
        &self,
        u: &Uses,
        y: ValueId,
    ) -> Option<(Vec<usize>, Epilogue, Option<usize>, ValueId)> {
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
}
