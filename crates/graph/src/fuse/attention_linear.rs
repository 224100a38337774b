//! Pass 8: an `etwgpu.sdpa_rope_with_kv_cache` whose output only a view to
//! `[1, S, Hq * D]` reads, and that view only an `et_vk.linear_q4gsw` (the
//! O projection), as its input: one `etwgpu.sdpa_rope_linear_q4gsw` at the
//! attention, the view gone. On the decode route the split attention's
//! combine then runs inside the linear's GEMV.

use std::collections::BTreeMap;

use etwgpu_format::{ValueId, VkValue};
use etwgpu_kernels::OpId;

use super::rewriter::{Edit, Rewriter, Uses};
use super::{FusionKind, outputs_of};

/// An attention, the view and the linear after it, matched.
pub(super) struct AttentionLinear {
    /// The view's op.
    view: usize,
    /// The linear's op.
    linear: usize,
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
            if [a, m.view, m.linear].iter().any(|i| edits.contains_key(i)) {
                continue;
            }
            let name = "etwgpu.sdpa_rope_linear_q4gsw.default";
            let call = self.call(a, name, m.args);
            self.record(FusionKind::AttentionLinear, &[a, m.view, m.linear], name);
            edits.insert(a, Edit::Replace(vec![call]));
            edits.insert(m.view, Edit::Remove);
            edits.insert(m.linear, Edit::Remove);
        }
        self.apply(edits);
    }

    /// The fused attention at op `a` whose output `[1, S, Hq, D]` only one
    /// view reads, to `[1, S, Hq * D]`, which only a 4-bit linear reads, as
    /// its input. The fused op runs at the attention, so the linear's other
    /// arguments must exist there (constant weights; the rest constants or
    /// written once before `a`); its output, written once by it, has no
    /// reader before the linear.
    fn match_attention_linear(&mut self, u: &Uses, a: usize) -> Option<AttentionLinear> {
        if self.op(a)? != OpId::SdpaRopeWithKvCache {
            return None;
        }
        let (&outs, attn_args) = self.args(a).split_last()?;
        let attn_args = attn_args.to_vec();
        let VkValue::ValueList(items) = self.g.value(outs) else { return None };
        let items = items.clone();
        let &[_, _, attn] = &items[..] else { return None };
        let [v] = u.readers[attn.idx()][..] else { return None };
        let (src, xv) = (self.view(v)?, *self.args(v).last()?);
        let [l] = u.readers[xv.idx()][..] else { return None };
        let &[input, w, s, gs, bias, out] = self.args(l) else { return None };
        let flat = match (self.dims(attn)?, self.dims(xv)?) {
            (&[b, sq, h, d], &[b2, sq2, k]) => b == 1 && b2 == 1 && sq == sq2 && k == h * d,
            _ => false,
        };
        let ready = |v: ValueId| match self.g.value(v) {
            VkValue::Tensor(_) => u.producer[v.idx()].is_none_or(|p| p < a) && !u.mutable[v.idx()],
            VkValue::ValueList(_) => false,
            _ => true,
        };
        let dtype = self.float(attn)?;
        let ok = self.op(l)? == OpId::LinearQ4gsw
            && src == attn
            && v > a
            && l > v
            && input == xv
            && flat
            && u.removable(xv)
            && outputs_of(&self.g, &self.g.chain[l]) == [out]
            && ![w, s, gs, bias].contains(&xv)
            && self.tensor(w).is_some_and(|t| t.constant.is_some())
            && [s, gs, bias].iter().all(|&v| ready(v))
            && !u.mutable[out.idx()]
            && self.float(xv) == Some(dtype)
            && self.float(out) == Some(dtype);
        if !ok {
            return None;
        }
        let mut list = items;
        list.push(out);
        let list = self.push(VkValue::ValueList(list));
        let mut args = attn_args;
        args.extend([w, s, gs, bias, list]);
        Some(AttentionLinear { view: v, linear: l, args })
    }
}
