//! The first half of pass 0: each torchao 8da4w linear (`et_vk.linear_dq8ca_q4gsw`) split
//! into the rounding of its input rows to their int8 grids
//! (`etwgpu.dq8_rows`) and an `et_vk.linear_q4gsw` of the rounded rows.
//! The duplicate-op pass then leaves one rounding per input (the linears
//! of one input round it with the same scale and zero point, from one
//! `choose_qparams_affine`), and the SwiGLU and QKV passes fuse the 4-bit
//! linears that read it.

use std::collections::BTreeMap;

use etwgpu_format::{VkTensor, VkValue};
use etwgpu_kernels::OpId;

use super::FusionKind;
use super::rewriter::{Edit, Rewriter};

impl Rewriter {
    pub(super) fn dq8_linears(&mut self) {
        let mut edits = BTreeMap::new();
        for i in 0..self.g.chain.len() {
            if self.op(i) != Some(OpId::LinearDq8caQ4gsw) {
                continue;
            }
            let &[x, scale, zp, w, _sums, scales, gs, bias, out] = self.args(i) else { continue };
            if self.float(x).is_none() {
                continue;
            }
            let Some(t) = self.tensor(x) else { continue };
            // The rounded rows: the input's dtype and (maximum) shape, no
            // constant, no exporter memory object.
            let rounded = VkTensor { constant: None, mem_obj_id: None, ..t.clone() };
            let rounded = self.push(VkValue::Tensor(rounded));
            let calls = vec![
                self.call(i, OpId::Dq8Rows.name(), vec![x, scale, zp, rounded]),
                self.call(i, OpId::LinearQ4gsw.name(), vec![rounded, w, scales, gs, bias, out]),
            ];
            self.record(FusionKind::Dq8Split, &[i], OpId::Dq8Rows.name());
            edits.insert(i, Edit::Replace(calls));
        }
        self.apply(edits);
    }
}
