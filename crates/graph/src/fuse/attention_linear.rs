//! Pass 8: an `etwgpu.sdpa_rope_with_kv_cache` whose output only a view to
//! `[1, S, Hq * D]` reads, and that view only an `et_vk.linear_q4gsw` (the
//! O projection), as its input: one `etwgpu.sdpa_rope_linear_q4gsw` at the
//! attention, the view gone; or, through one or two views to `[1, S, Hq *
//! D]` or `[S, Hq * D]` (an fp32 export views the attention's output to
//! `[1, S, Hq * D]`, then to `[S, Hq * D]` for its linear), an
//! `aten.linear`: one `etwgpu.sdpa_rope_linear`, the views gone. On the
//! decode route the split attention's combine then runs inside the
//! linear's GEMV.

use std::collections::BTreeMap;

use etwgpu_format::{ValueId, VkValue};
use etwgpu_kernels::OpId;

use super::rewriter::{Edit, Rewriter, Uses};
use super::{FusionKind, outputs_of};

/// An attention, the views and the linear after it, matched.
pub(super) struct AttentionLinear {
    /// The views' ops, in order.
    views: Vec<usize>,
    /// The linear's op.
    linear: usize,
    /// The fused op's name.
    name: &'static str,
    /// The fused op's arguments, its output list included.
    args: Vec<ValueId>,
}

impl Rewriter {
    // 8. The attention into the linear after it.

    pub(super) fn attention_linears(&mut self) {
        if !self.options.attention_linear {
            return;
        }
        let u = Uses::new(&self.g);
        let mut edits: BTreeMap<usize, Edit> = BTreeMap::new();
        for a in 0..self.g.chain.len() {
            let Some(m) = self.match_attention_linear(&u, a) else { continue };
            let mut ops = vec![a];
            ops.extend(&m.views);
            ops.push(m.linear);
            if ops.iter().any(|i| edits.contains_key(i)) {
                continue;
            }
            let call = self.call(a, m.name, m.args);
            self.record(FusionKind::AttentionLinear, &ops, m.name);
            edits.insert(a, Edit::Replace(vec![call]));
            for &o in &ops[1..] {
                edits.insert(o, Edit::Remove);
            }
        }
        self.apply(edits);
    }

    /// The fused attention at op `a` whose output `[1, S, Hq, D]` only one
    /// view reads, to `[1, S, Hq * D]`, which only a 4-bit linear reads, as
    /// its input; or a chain of one or two views (each read only by the
    /// next), the last to `[1, S, Hq * D]` or `[S, Hq * D]`, which only an
    /// `aten.linear` reads, as its input. The fused op runs at the
    /// attention, so the linear's other arguments must exist there
    /// (constant weights; the rest constants or written once before `a`);
    /// its output, written once by it, has no reader before the linear.
    fn match_attention_linear(&mut self, u: &Uses, a: usize) -> Option<AttentionLinear> {
        if self.op(a)? != OpId::SdpaRopeWithKvCache {
            return None;
        }
        let (&outs, attn_args) = self.args(a).split_last()?;
        let attn_args = attn_args.to_vec();
        let VkValue::ValueList(items) = self.g.value(outs) else { return None };
        let items = items.clone();
        let &[_, _, attn] = &items[..] else { return None };
        // The views from the attention's output, in chain order, each read
        // only by the next; then the linear (`l`) reading the last.
        let (mut views, mut xv, mut at) = (Vec::new(), attn, a);
        let l = loop {
            let [r] = u.readers[xv.idx()][..] else { return None };
            if r <= at {
                return None;
            }
            match self.view(r) {
                Some(src) if src == xv && views.len() < 2 && (xv == attn || u.removable(xv)) => {
                    views.push(r);
                    (xv, at) = (*self.args(r).last()?, r);
                }
                Some(_) => return None,
                None => break r,
            }
        };
        // The linear's input: `[1, S, Hq * D]` (`true`) or `[S, Hq * D]`.
        let &[1, sq, h, d] = self.dims(attn)? else { return None };
        let three_d = match *self.dims(xv)? {
            [1, sq2, k] if sq2 == sq && k == h * d => true,
            [sq2, k] if sq2 == sq && k == h * d => false,
            _ => return None,
        };
        let ready = |v: ValueId| match self.g.value(v) {
            VkValue::Tensor(_) => u.producer[v.idx()].is_none_or(|p| p < a) && !u.mutable[v.idx()],
            VkValue::ValueList(_) => false,
            _ => true,
        };
        let dtype = self.float(attn)?;
        let common = !views.is_empty() && u.removable(xv) && self.float(xv) == Some(dtype);
        let (name, args, out) = match (self.op(l)?, self.args(l)) {
            (OpId::LinearQ4gsw, &[input, w, s, gs, bias, out]) => {
                let ok = views.len() == 1
                    && three_d
                    && input == xv
                    && ![w, s, gs, bias].contains(&xv)
                    && self.tensor(w).is_some_and(|t| t.constant.is_some())
                    && [s, gs, bias].iter().all(|&v| ready(v));
                (ok.then_some("etwgpu.sdpa_rope_linear_q4gsw.default")?, vec![w, s, gs, bias], out)
            }
            (OpId::Linear, &[input, w, bias, out]) => {
                let ok = input == xv
                    && ![w, bias].contains(&xv)
                    && self.tensor(w).is_some_and(|t| t.constant.is_some())
                    && ready(bias);
                (ok.then_some("etwgpu.sdpa_rope_linear.default")?, vec![w, bias], out)
            }
            _ => return None,
        };
        let ok = common
            && outputs_of(&self.g, &self.g.chain[l]) == [out]
            && !u.mutable[out.idx()]
            && self.float(out) == Some(dtype);
        if !ok {
            return None;
        }
        let mut list = items;
        list.push(out);
        let list = self.push(VkValue::ValueList(list));
        let mut fused_args = attn_args;
        fused_args.extend(args);
        fused_args.push(list);
        Some(AttentionLinear { views, linear: l, name, args: fused_args })
    }
}
