//! Pass 5: a decoder's tail, the last residual add, the last token's row of
//! its sum and that row's RMS norm, as one `etwgpu.add_select_rms_norm`
//! that adds and normalizes only the last row. It runs before pass 6
//! would take the norm into the output head, which then stays a plain
//! linear.

use std::collections::BTreeMap;

use etwgpu_format::{ValueId, VkValue};
use etwgpu_kernels::OpId;

use super::FusionKind;
use super::rewriter::{Edit, Rewriter, Uses};

/// The op the pass writes.
const ADD_SELECT_RMS_NORM: &str = "etwgpu.add_select_rms_norm.default";

impl Rewriter {
    // 5. The last row's residual add and RMS norm.

    pub(super) fn last_row_norms(&mut self) {
        // a, b, the weight and the normed row.
        if self.options.max_storage_buffers < 4 {
            return;
        }
        let u = Uses::new(&self.g);
        let mut edits: BTreeMap<usize, Edit> = BTreeMap::new();
        for p in 0..self.g.chain.len() {
            let Some((add, select, args)) = self.match_last_row_norm(&u, p) else { continue };
            if [add, select, p].iter().any(|i| edits.contains_key(i)) {
                continue;
            }
            let call = self.call(p, ADD_SELECT_RMS_NORM, args);
            self.record(FusionKind::LastRowNorm, &[add, select, p], ADD_SELECT_RMS_NORM);
            edits.insert(add, Edit::Remove);
            edits.insert(select, Edit::Remove);
            edits.insert(p, Edit::Replace(vec![call]));
        }
        self.apply(edits);
    }

    /// `et_vk.rms_norm(row, weight, eps, normed)` at op `p` where
    /// `row = aten.select_copy.int(sum, 1, -1 or S - 1)` is the last row
    /// along the sequence dim of a `[1, S, D]` `sum = aten.add(a, b, alpha
    /// 1)` of two tensors of that shape, all of one float dtype, and `sum`
    /// and `row` have no other reader: the add's and the select's indices
    /// and the fused op's arguments `[a, b, dim, index, weight, eps,
    /// normed]`. The fused op runs at the norm; `a` and `b`, written once
    /// before the add and never in place, hold there what the add read.
    pub(super) fn match_last_row_norm(&self, u: &Uses, p: usize) -> Option<(usize, usize, Vec<ValueId>)> {
        if self.op(p)? != OpId::RmsNorm {
            return None;
        }
        let &[row, weight, eps, normed] = self.args(p) else { return None };
        let select = u.producer[row.idx()]?;
        if self.op(select)? != OpId::SelectCopy {
            return None;
        }
        let &[sum, dim, index, row_out] = self.args(select) else { return None };
        let add = u.producer[sum.idx()]?;
        if self.op(add)? != OpId::Add {
            return None;
        }
        let &[a, b, alpha, sum_out] = self.args(add) else { return None };
        let dtype = self.float(sum)?;
        let dims = self.dims(sum)?;
        let &[1, s, d] = dims else { return None };
        let seq_dim = matches!(self.g.value(dim), VkValue::Int(1 | -2));
        let last = match self.g.value(index) {
            VkValue::Int(i) => *i == -1 || (s > 0 && u64::try_from(*i) == Ok(s - 1)),
            _ => false,
        };
        let same = |v: ValueId| self.float(v) == Some(dtype) && self.dims(v) == Some(dims);
        let a_row = |v: ValueId| self.float(v) == Some(dtype) && self.dims(v) == Some(&[1, d][..]);
        let ok = add < select
            && select < p
            && sum_out == sum
            && row_out == row
            && seq_dim
            && last
            && self.is_one(alpha)
            && same(a)
            && same(b)
            && a_row(row)
            && a_row(normed)
            && self.float(weight) == Some(dtype)
            && u.read_only_by(sum, &[select])
            && u.read_only_by(row, &[p])
            && u.removable(sum)
            && u.removable(row)
            && [a, b, weight, normed].iter().all(|v| !u.mutable[v.idx()]);
        ok.then(|| (add, select, vec![a, b, dim, index, weight, eps, normed]))
    }
}
