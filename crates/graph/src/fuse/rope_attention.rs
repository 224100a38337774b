//! Pass 7: `et_vk.apply_rotary_emb` whose rotated query and key only a
//! `sdpa_with_kv_cache` reads, taken into that attention, with the slices
//! of the rotation tables it reads (`aten.slice_copy` of rows `start..`,
//! step 1: the fused op reads the whole tables from row `start`, and the
//! slices, read by no op then, go as dead ops).

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
    // 7. RoPE into the attention.

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
    pub(super) fn match_rope_attention(&mut self, u: &Uses, c: usize) -> Option<RopeAttention> {
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
        match (self.table_rows(u, cos), self.table_rows(u, sin)) {
            (Some((cos_t, row)), Some((sin_t, row2))) if self.same_literal(row, row2) => {
                fused.extend([cos_t, sin_t, row]);
            }
            _ => {
                let zero = self.push(VkValue::Int(0));
                fused.extend([cos, sin, zero]);
            }
        }
        Some(RopeAttention { rope: p, args: fused, outs: vec![q_rot, k_rot, out] })
    }

    /// `t = aten.slice_copy(table, 0, start, end, 1)`, of a 2-D table that
    /// does not change: `(table, start)`. The end is not looked at: the
    /// rotation reads `S` rows of its tables, so a graph that lowers had
    /// `end - start = S`, and the fused op checks that the table has them.
    fn table_rows(&self, u: &Uses, t: ValueId) -> Option<(ValueId, ValueId)> {
        let p = u.producer[t.idx()]?;
        if self.op(p)? != OpId::SliceCopy {
            return None;
        }
        let &[table, dim, start, _end, step, out] = self.args(p) else { return None };
        let ok = out == t
            && matches!(self.g.value(dim), VkValue::Int(0))
            && matches!(self.g.value(step), VkValue::Int(1))
            && matches!(self.g.value(start), VkValue::Int(0..) | VkValue::SymInt(_))
            && self.dims(table).is_some_and(|d| d.len() == 2)
            && self.float(table) == self.float(t)
            && self.movable_read(u, table);
        ok.then_some((table, start))
    }
}
