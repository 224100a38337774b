//! Pass 9: chains of unary and broadcasting binary float ops become one
//! `etwgpu.fused_elementwise`, whose kernel is generated from the
//! expression at lowering.

use std::collections::{BTreeMap, BTreeSet};

use etwgpu_format::{OpCall, ValueId, VkValue};
use etwgpu_kernels::OpId;
use etwgpu_kernels::ops::elementwise::{BinaryOp, UnaryOp};
use etwgpu_kernels::ops::fused::{Expr, FUSED_MAX_INPUTS, Inst, Operand};

use super::FusionKind;
use super::MAX_FUSED_OPS;
use super::rewriter::{Edit, Rewriter, Uses};

impl Rewriter {
    // 9. Elementwise chains.

    /// The op at `i` as one fused-expression instruction over its tensor
    /// operands (`Input(k)` for the `k`-th), with its output; only float
    /// ops whose operands and output share one dtype.
    pub(super) fn as_elementwise(&self, i: usize) -> Option<(Inst, Vec<ValueId>, ValueId)> {
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

    pub(super) fn elementwise(&mut self) {
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
    pub(super) fn fused_elementwise(&mut self, u: &Uses, root: usize, members: &[usize]) -> OpCall {
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
}
