//! Pass 6: an RMS norm (`etwgpu.add_rms_norm` or `et_vk.rms_norm`) whose
//! output only a 4-bit linear, or a fused float QKV or SwiGLU, reads,
//! taken into that linear.

use std::collections::BTreeMap;

use etwgpu_format::{ValueId, VkValue};
use etwgpu_kernels::OpId;

use super::rewriter::{Edit, Rewriter, Uses};
use super::{FusionKind, outputs_of};

impl Rewriter {
    // 6. RMS norm into a 4-bit linear or a fused float one.

    pub(super) fn norm_linears(&mut self) {
        let u = Uses::new(&self.g);
        let mut edits: BTreeMap<usize, Edit> = BTreeMap::new();
        for p in 0..self.g.chain.len() {
            let Some((gone, args, name)) = self.match_norm_linear(&u, p) else { continue };
            if edits.contains_key(&p) || gone.iter().any(|c| edits.contains_key(c)) {
                continue;
            }
            let call = self.call(p, name, args);
            let mut ops = vec![p];
            ops.extend(&gone);
            self.record(FusionKind::NormLinear, &ops, name);
            edits.insert(p, Edit::Replace(vec![call]));
            for c in gone {
                edits.insert(c, Edit::Remove);
            }
        }
        self.apply(edits);
    }

    /// The norm at op `p` and the one linear `c` reading its output, as its
    /// input only, directly or through one view that flattens its leading
    /// dims (`[1, S, K]` to `[S, K]`: the float linears of an fp32 export,
    /// a `view_copy`, or a `squeeze_copy` in a static one): `(the ops that
    /// go (the view if any, then c), the fused op's arguments, its name)`.
    /// The fused op's normed output is the view's (the linear's input). It
    /// runs at the norm, so the linear's other arguments must exist there
    /// (constants, or written once before `p`); its outputs, written once
    /// by it, have no reader before `c`.
    pub(super) fn match_norm_linear(&mut self, u: &Uses, p: usize) -> Option<(Vec<usize>, Vec<ValueId>, &'static str)> {
        // (a, b or None, weight, eps, the sum if any, the normed output).
        let (a, b, weight, eps, sum, normed) = match (self.op(p)?, self.args(p)) {
            (OpId::AddRmsNorm, &[a, b, weight, eps, outs]) => match self.g.value(outs) {
                VkValue::ValueList(items) if items.len() == 2 => (a, Some(b), weight, eps, Some(items[0]), items[1]),
                _ => return None,
            },
            (OpId::RmsNorm, &[x, weight, eps, out]) => (x, None, weight, eps, None, out),
            _ => return None,
        };
        let [r] = u.readers[normed.idx()][..] else { return None };
        let (view, c, x) = match self.view(r) {
            Some(src) => {
                let out = *self.args(r).last()?;
                let (from, to) = (self.dims(normed)?, self.dims(out)?);
                let (&k, lead) = from.split_last()?;
                let flattens = to == [lead.iter().product(), k];
                let [c] = u.readers[out.idx()][..] else { return None };
                if src != normed || !flattens || !u.removable(out) {
                    return None;
                }
                (Some(r), c, out)
            }
            None => (None, r, normed),
        };
        let (name, buffers) = match self.op(c)? {
            OpId::LinearQ4gsw => ("etwgpu.rms_norm_linear_q4gsw.default", 8),
            OpId::LinearQ4gswQkv => ("etwgpu.rms_norm_linear_q4gsw_qkv.default", 13),
            OpId::LinearQ4gswSwiglu => ("etwgpu.rms_norm_linear_q4gsw_swiglu.default", 9),
            OpId::LinearQkv => ("etwgpu.rms_norm_linear_qkv.default", 13),
            OpId::LinearSwiglu => ("etwgpu.rms_norm_linear_swiglu.default", 9),
            _ => return None,
        };
        let linear = self.g.chain[c].clone();
        let (&input, rest) = linear.args.split_first()?;
        let (_, params) = rest.split_last()?;
        let ready = |v: ValueId| match self.g.value(v) {
            VkValue::Tensor(_) => u.producer[v.idx()].is_none_or(|q| q < p) && !u.mutable[v.idx()],
            VkValue::ValueList(_) => false,
            _ => true,
        };
        let outs = outputs_of(&self.g, &linear);
        let dtype = self.float(a)?;
        let ok = c > p
            && input == x
            && !params.contains(&x)
            && u.removable(normed)
            && self.options.max_storage_buffers >= buffers
            && self.tensor(weight).is_some_and(|t| t.constant.is_some())
            && self.float(normed) == Some(dtype)
            && self.float(x) == Some(dtype)
            && params.iter().all(|&v| ready(v))
            && outs.iter().all(|v| !u.mutable[v.idx()] && self.float(*v) == Some(dtype));
        if !ok {
            return None;
        }
        let mut items: Vec<ValueId> = sum.into_iter().collect();
        items.push(x);
        items.extend(outs);
        let list = self.push(VkValue::ValueList(items));
        let b = match b {
            Some(b) => b,
            None => self.push(VkValue::Null),
        };
        let mut args = vec![a, b, weight, eps];
        args.extend_from_slice(params);
        args.push(list);
        Some((view.into_iter().chain([c]).collect(), args, name))
    }
}
