//! Pass 6: `et_vk.apply_rotary_emb` whose rotated query and key only a
//! `sdpa_with_kv_cache` reads, taken into that attention.

use std::collections::BTreeMap;

use etwgpu_format::{ValueId, VkValue};
use etwgpu_kernels::OpId;

use super::FusionKind;
use super::rewriter::{Edit, Rewriter, Uses};

/// A rotation and the attention reading it, matched.
pub(super) struct RopeAttention {
    /// The rotation's op.
    rope: usize,
    /// The fused op's arguments but its output list.
    args: Vec<ValueId>,
    /// That list's items: the rotated query and key, the attention's output.
    outs: Vec<ValueId>,
}

impl Rewriter {
    // 6. RoPE into the attention.

    pub(super) fn rope_attention(&mut self) {
        let u = Uses::new(&self.g);
        let mut edits: BTreeMap<usize, Edit> = BTreeMap::new();
        for c in 0..self.g.chain.len() {
            let Some(m) = self.match_rope_attention(&u, c) else { continue };
            let p = m.rope;
            if edits.contains_key(&p) || edits.contains_key(&c) {
                continue;
            }
            let list = self.push(VkValue::ValueList(m.outs));
            let mut call_args = m.args;
            call_args.push(list);
            let name = "etwgpu.sdpa_rope_with_kv_cache.default";
            let call = self.call(c, name, call_args);
            self.record(FusionKind::RopeAttention, &[p, c], name);
            edits.insert(p, Edit::Remove);
            edits.insert(c, Edit::Replace(vec![call]));
        }
        self.apply(edits);
    }

    /// The attention at op `c` whose query and key are the outputs of one
    /// rotation that nothing else reads. The fused op runs at the
    /// attention, so the rotation's inputs must not change in between.
    pub(super) fn match_rope_attention(&self, u: &Uses, c: usize) -> Option<RopeAttention> {
        if self.op(c)? != OpId::SdpaWithKvCache {
            return None;
        }
        let args = self.args(c);
        let &[q_rot, k_rot, ref rest @ .., out] = args else { return None };
        if rest.len() != 9 {
            return None;
        }
        let p = u.producer[q_rot.idx()]?;
        if self.op(p)? != OpId::ApplyRotaryEmb || p >= c || u.producer[k_rot.idx()] != Some(p) {
            return None;
        }
        let &[xq, xk, cos, sin, outs] = self.args(p) else { return None };
        let VkValue::ValueList(items) = self.g.value(outs) else { return None };
        let ok = items[..] == [q_rot, k_rot]
            && u.read_only_by(q_rot, &[c])
            && u.read_only_by(k_rot, &[c])
            && !rest.contains(&q_rot)
            && !rest.contains(&k_rot)
            && u.removable(q_rot)
            && u.removable(k_rot)
            && [xq, xk, cos, sin].iter().all(|&v| self.movable_read(u, v));
        if !ok {
            return None;
        }
        let mut fused = vec![xq, xk];
        fused.extend_from_slice(rest);
        fused.extend([cos, sin]);
        Some(RopeAttention { rope: p, args: fused, outs: vec![q_rot, k_rot, out] })
    }
}
