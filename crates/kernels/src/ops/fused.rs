//! Fused ops: the `etwgpu.*` operators that the graph's fusion pass
//! (`etwgpu_graph::fuse`) writes in place of groups of ExecuTorch ops. Their
//! host rules infer shapes from the live inputs like any op's.
//!
//! One family of the op table (the README lists ops by this file), in
//! files by kernel kind: `fused/expr.rs` (the elementwise expression, its
//! parser, WGSL writer and rule), `fused/linears.rs` (the fused linears)
//! `fused/norm_linears.rs` (an RMS norm taken into the 4-bit linear
//! after it) and `fused/rope_attention.rs` (RoPE taken into the
//! attention); the activation epilogue shared with the matmul and
//! convolution kernels stays here.
//!
//! - `etwgpu.fused_elementwise.default(expr, x0, .., xN-1, →out)`: a chain
//!   of unary and broadcasting binary ops ([`Expr`]) as one kernel, whose
//!   WGSL is written from the expression at lowering
//!   (`fused_elementwise.wgsl` is its template).
//! - `etwgpu.{linear,addmm,convolution,conv_with_clamp}_act.default`: the
//!   plain op's arguments with an activation ([`Epilogue`]) before the
//!   output, applied in the kernel's epilogue.
//! - `etwgpu.linear_qkv.default(input, w_q, b_q?, w_k, b_k?, w_v, b_v?,
//!   →[q, k, v])`: three linears of one input in one dispatch
//!   (`linear_qkv.wgsl`; at decode `gemv_qkv_vec4.wgsl` when K is a
//!   multiple of 4, else `gemv_qkv.wgsl`).
//! - `etwgpu.linear_swiglu.default(input, w_gate, b_gate?, w_up, b_up?,
//!   →out)`: `silu(gate(x)) * up(x)` in one dispatch (`linear_swiglu.wgsl`;
//!   at decode `gemv_swiglu_vec4.wgsl` or `gemv_swiglu.wgsl`, as QKV).
//! - `etwgpu.linear_q4gsw_qkv.default(input, group_size, w_q, s_q, w_k, s_k,
//!   w_v, s_v, →[q, k, v])` and `etwgpu.linear_q4gsw_swiglu.default(input,
//!   group_size, w_gate, s_gate, w_up, s_up, →out)`: the same for
//!   `et_vk.linear_q4gsw` weights, without bias.
//! - `etwgpu.rms_norm_linear_q4gsw{,_qkv,_swiglu}.default(a, b?, norm_weight,
//!   eps, <the linear's arguments after its input>, →[sum?, normed, <the
//!   linear's outputs>])`: an RMS norm (of a residual add, or alone) and
//!   the 4-bit linear that reads it, one dispatch on the decode route
//!   (`fused/norm_linears.rs`); `etwgpu.rms_norm_linear{_qkv,_swiglu}.default`
//!   the same for `etwgpu.linear_qkv` and `etwgpu.linear_swiglu` (float
//!   weights).
//! - `etwgpu.sdpa_rope_with_kv_cache.default(xq, xk, <sdpa_with_kv_cache's
//!   arguments after the key>, freqs_cos, freqs_sin, →[xq_out, xk_out,
//!   out])`: RoPE and the attention that reads it, the rotation inside the
//!   split-KV partials kernel on the decode route (`fused/rope_attention.rs`).
//! - `etwgpu.sdpa_rope_linear_q4gsw.default(<that op's arguments but its
//!   output list>, weights, weight_scales, group_size, bias?, →[xq_out,
//!   xk_out, attn, out])`: that op and the 4-bit linear reading its output
//!   (through a view to `[1, S, Hq * D]`), the split-KV combine inside the
//!   linear's GEMV on the decode route (`fused/rope_attention.rs`);
//!   `etwgpu.sdpa_rope_linear.default(<the same>, weight, bias?, →[xq_out,
//!   xk_out, attn, out])` the same for an `aten.linear` (float weights).

mod expr;
mod linears;
mod norm_linears;
mod rope_attention;

pub use expr::{Expr, FUSED_MAX_INPUTS, Inst, Operand, fused_elementwise};
pub use linears::{linear_q4gsw_qkv, linear_q4gsw_swiglu, linear_qkv, linear_swiglu};
pub use norm_linears::{
    Q4_GEMV_NORM_MAX_ELEMS, Q4_GEMV_QKV_I8_MAX_K, rms_norm_linear_q4gsw, rms_norm_linear_q4gsw_qkv,
    rms_norm_linear_q4gsw_swiglu, rms_norm_linear_qkv, rms_norm_linear_swiglu,
};
pub use rope_attention::{sdpa_rope_linear, sdpa_rope_linear_q4gsw, sdpa_rope_with_kv_cache};

use crate::error::{Error, Result};
use crate::ops::elementwise::UnaryOp;
use crate::plan::{Ctx, Lowered, Vid};

/// An activation applied to a kernel's result before it is stored: one
/// unary op with its parameters. Its text form is an [`Expr`] of one
/// instruction on `x0` (`relu x0`, `clamp x0 0.0 6.0`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Epilogue {
    /// The op (`Copy` for none).
    pub op: UnaryOp,
    /// First parameter.
    pub p0: f32,
    /// Second parameter.
    pub p1: f32,
}

impl Epilogue {
    /// No activation.
    pub const NONE: Epilogue = Epilogue { op: UnaryOp::Copy, p0: 0.0, p1: 0.0 };

    /// Parses the text form; the reason on failure.
    pub(crate) fn parse(text: &str) -> std::result::Result<Self, &'static str> {
        match Expr::parse(text)?.insts[..] {
            [Inst::Unary { op, x: Operand::Input(0), p }] => Ok(Epilogue { op, p0: p[0], p1: p[1] }),
            _ => Err("an activation is one unary op on x0"),
        }
    }

    /// The text form.
    pub fn text(&self) -> String {
        Expr { insts: vec![Inst::Unary { op: self.op, x: Operand::Input(0), p: [self.p0, self.p1] }] }.to_string()
    }
}

/// Runs `lower` on the call without its activation argument (the one
/// before the output), with that activation as the epilogue.
pub fn with_act(c: &Ctx<'_>, lower: impl Fn(&Ctx<'_>, Epilogue) -> Result<Lowered>) -> Result<Lowered> {
    let n = c.n_args();
    if n < 2 {
        return Err(Error::ArgCount { expected: 2, found: n });
    }
    let act_idx = n - 2;
    let text = c.opt_str(act_idx, "activation")?.unwrap_or("");
    let epilogue = Epilogue::parse(text).map_err(|reason| Error::ArgValue {
        arg_idx: act_idx,
        name: "activation",
        found: text.to_string(),
        reason,
    })?;
    let args: Vec<Vid> = (0..n).filter(|&i| i != act_idx).map(|i| c.id(i)).collect();
    lower(&c.with_args(&args), epilogue)
}
