//! Fused ops: the `etwgpu.*` operators that the graph's fusion pass
//! (`etwgpu_graph::fuse`) writes in place of groups of ExecuTorch ops. Their
//! host rules infer shapes from the live inputs like any op's.
//!
//! Over the house limit of about 600 lines: the fused elementwise
//! expression (its parser and WGSL writer) and the fused linears' host rules
//! are one family of the op table (the README lists ops by family file);
//! moving the linears to a file of their own is open with the runtime-rooms
//! issue.
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
//!   (`linear_qkv.wgsl`, `gemv_qkv.wgsl`).
//! - `etwgpu.linear_swiglu.default(input, w_gate, b_gate?, w_up, b_up?,
//!   →out)`: `silu(gate(x)) * up(x)` in one dispatch (`linear_swiglu.wgsl`,
//!   `gemv_swiglu.wgsl`).
//! - `etwgpu.linear_q4gsw_qkv.default(input, group_size, w_q, s_q, w_k, s_k,
//!   w_v, s_v, →[q, k, v])` and `etwgpu.linear_q4gsw_swiglu.default(input,
//!   group_size, w_gate, s_gate, w_up, s_up, →out)`: the same for
//!   `et_vk.linear_q4gsw` weights, without bias.

use std::fmt::{self, Write as _};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::generated::shaders::{Family, ShaderId, Variant};
use crate::ops::elementwise::{BinaryOp, UnaryOp, broadcast_shapes, broadcast_strides};
use crate::ops::matmul::GEMV_MAX_ROWS;
use crate::ops::quant::{Q4Linear, Q4Route, check_q4_weight, q4_fast, q4_fast_dispatch};
use crate::plan::{
    Ctx, Dispatch, GeneratedShader, Lowered, MATMUL_TILE, Shader, Step, TensorInfo, Uniform, Vid, WG_ELEMENTWISE,
    check_rank, checked_numel, dims_u32, float_shader, grid_1d, grid_groups, same_dtype, to_u32,
};

/// Most inputs of one fused elementwise kernel (its uniform holds this
/// many stride sets).
pub const FUSED_MAX_INPUTS: usize = 7;

/// The line of `fused_elementwise.wgsl` after which the host writes.
const MARKER: &str = "// generated below\n";

/// An operand of an [`Inst`]: input `k` of the fused op, or the result of
/// instruction `j`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    /// `x<k>`: the `k`-th tensor argument.
    Input(usize),
    /// `t<j>`: the result of instruction `j` (an earlier one).
    Temp(usize),
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Input(k) => write!(f, "x{k}"),
            Operand::Temp(j) => write!(f, "t{j}"),
        }
    }
}

/// One instruction of a fused elementwise expression.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Inst {
    /// `op(x; p0, p1)`, the ops of `unary.wgsl`.
    Unary {
        /// The op.
        op: UnaryOp,
        /// Its operand.
        x: Operand,
        /// Its scalar parameters (unused ones are 0).
        p: [f32; 2],
    },
    /// `op(a, b)` with NumPy broadcasting, the ops of `binary.wgsl`.
    Binary {
        /// The op.
        op: BinaryOp,
        /// Left operand.
        a: Operand,
        /// Right operand.
        b: Operand,
        /// `alpha` of `add`/`sub` (1 for the others).
        alpha: f32,
    },
}

/// A fused elementwise expression: instructions in evaluation order, the
/// last one's result is the output. Its text form, the fused op's first
/// argument, is one instruction per `;`, e.g. `sigmoid x0; mul x0 t0;
/// add t1 x1 1.0` (parameters follow the operands).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Expr {
    /// The instructions.
    pub insts: Vec<Inst>,
}

/// Exact text of a float parameter (an `f32` printed through `f64`, so it
/// parses back to the same bits).
fn fmt_param(x: f32) -> String {
    format!("{:?}", f64::from(x))
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (j, inst) in self.insts.iter().enumerate() {
            if j > 0 {
                f.write_str("; ")?;
            }
            match inst {
                Inst::Unary { op, x, p } => {
                    write!(f, "{} {x}", op.name())?;
                    for v in &p[..op.n_params()] {
                        write!(f, " {}", fmt_param(*v))?;
                    }
                }
                Inst::Binary { op, a, b, alpha } => {
                    write!(f, "{} {a} {b}", op.name())?;
                    if op.has_alpha() {
                        write!(f, " {}", fmt_param(*alpha))?;
                    }
                }
            }
        }
        Ok(())
    }
}

impl Expr {
    /// Parses the text form; the reason on failure.
    pub(crate) fn parse(text: &str) -> std::result::Result<Self, &'static str> {
        let mut insts = Vec::new();
        for part in text.split(';') {
            let j = insts.len();
            let operand = |tok: &str| -> std::result::Result<Operand, &'static str> {
                let (kind, idx) = tok.split_at_checked(1).ok_or("empty operand")?;
                let idx: usize = idx.parse().map_err(|_| "operands are x<k> or t<j>")?;
                match kind {
                    "x" if idx < FUSED_MAX_INPUTS => Ok(Operand::Input(idx)),
                    "t" if idx < j => Ok(Operand::Temp(idx)),
                    "x" => Err("input index past the most inputs of a fused kernel"),
                    "t" => Err("an instruction reads a later one"),
                    _ => Err("operands are x<k> or t<j>"),
                }
            };
            let param = |tok: &str| tok.parse::<f32>().map_err(|_| "parameters are numbers");
            let toks: Vec<&str> = part.split_whitespace().collect();
            let Some((&name, rest)) = toks.split_first() else { return Err("empty instruction") };
            let inst = if let Some(op) = UnaryOp::from_name(name) {
                if rest.len() != 1 + op.n_params() {
                    return Err("wrong operand or parameter count");
                }
                let mut p = [0.0; 2];
                for (slot, tok) in p.iter_mut().zip(&rest[1..]) {
                    *slot = param(tok)?;
                }
                Inst::Unary { op, x: operand(rest[0])?, p }
            } else if let Some(op) = BinaryOp::from_name(name) {
                if rest.len() != 2 + usize::from(op.has_alpha()) {
                    return Err("wrong operand or parameter count");
                }
                let alpha = if op.has_alpha() { param(rest[2])? } else { 1.0 };
                Inst::Binary { op, a: operand(rest[0])?, b: operand(rest[1])?, alpha }
            } else {
                return Err("unknown op");
            };
            insts.push(inst);
        }
        Ok(Self { insts })
    }

    /// Number of inputs: one past the highest input index read.
    pub fn n_inputs(&self) -> usize {
        let idx = |o: &Operand| match o {
            Operand::Input(k) => k + 1,
            Operand::Temp(_) => 0,
        };
        self.insts
            .iter()
            .map(|i| match i {
                Inst::Unary { x, .. } => idx(x),
                Inst::Binary { a, b, .. } => idx(a).max(idx(b)),
            })
            .max()
            .unwrap_or(0)
    }

    /// Whether every input below [`Expr::n_inputs`] is read.
    pub fn reads_every_input(&self) -> bool {
        let mut read = vec![false; self.n_inputs()];
        for inst in &self.insts {
            let ops: &[Operand] = match inst {
                Inst::Unary { x, .. } => std::slice::from_ref(x),
                Inst::Binary { a, b, .. } => &[*a, *b],
            };
            for o in ops {
                if let Operand::Input(k) = o {
                    read[*k] = true;
                }
            }
        }
        read.iter().all(|&r| r)
    }

    /// The WGSL of this expression for `variant`:
    /// the template's head, then the bindings and `main`.
    pub fn wgsl(&self, variant: Variant) -> String {
        let template = ShaderId::find(Family::FusedElementwise, variant)
            .expect("fused_elementwise has the float variants")
            .source();
        let head = template.find(MARKER).map(|at| &template[..at + MARKER.len()]).expect("the template has its marker");
        let mut o = head.to_string();
        o.push_str(&self.wgsl_main());
        o
    }

    /// What the host writes after the template's marker.
    fn wgsl_main(&self) -> String {
        let n = self.n_inputs();
        let mut o = String::new();
        let w = &mut o;
        for k in 0..n {
            let _ = writeln!(w, "@group(0) @binding({}) var<storage, read> x{k}: array<Elem>;", k + 1);
        }
        let _ = writeln!(w, "@group(0) @binding({}) var<storage, read_write> out: array<Elem>;", n + 1);
        let _ = writeln!(w);
        let _ = writeln!(w, "@compute @workgroup_size(WG)");
        let _ = writeln!(
            w,
            "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{"
        );
        let _ = writeln!(w, "    let i = gid.x + gid.y * nwg.x * WG;");
        let _ = writeln!(w, "    if i >= p.numel {{\n        return;\n    }}");
        let _ = writeln!(w, "    var rem = i;");
        for k in 0..n {
            let _ = writeln!(w, "    var o{k} = 0u;");
        }
        let _ = writeln!(w, "    for (var d = i32(p.rank) - 1; d >= 0; d = d - 1) {{");
        let _ = writeln!(w, "        let du = u32(d);");
        let _ = writeln!(w, "        let size = p.shape[du / 4u][du % 4u];");
        let _ = writeln!(w, "        let c = rem % size;");
        let _ = writeln!(w, "        rem = rem / size;");
        for k in 0..n {
            let _ = writeln!(w, "        o{k} += c * stride({k}u, du);");
        }
        let _ = writeln!(w, "    }}");
        for k in 0..n {
            let _ = writeln!(w, "    let v{k} = f32(x{k}[o{k}]);");
        }
        let val = |o: &Operand| match o {
            Operand::Input(k) => format!("v{k}"),
            Operand::Temp(j) => format!("t{j}"),
        };
        for (j, inst) in self.insts.iter().enumerate() {
            let rhs = match inst {
                Inst::Unary { op, x, p } => {
                    format!("act({}u, {}, {}, {})", *op as u32, val(x), wgsl_f32(p[0]), wgsl_f32(p[1]))
                }
                Inst::Binary { op, a, b, alpha } => {
                    format!("bin({}u, {}, {}, {})", *op as u32, val(a), val(b), wgsl_f32(*alpha))
                }
            };
            let _ = writeln!(w, "    let t{j} = {rhs};");
        }
        let _ = writeln!(w, "    out[i] = Elem(t{});", self.insts.len().saturating_sub(1));
        let _ = writeln!(w, "}}");
        o
    }
}

/// An exact WGSL `f32` expression for `x`.
fn wgsl_f32(x: f32) -> String {
    if x.is_finite() { format!("{:?}", f64::from(x)) } else { format!("bitcast<f32>(0x{:08x}u)", x.to_bits()) }
}

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

/// Merges adjacent dims that every input walks contiguously (and drops
/// size-1 dims), so the kernel's index loop runs over as few dims as
/// possible: one for same-shape inputs.
fn collapse(shape: &[u64], strides: &[Vec<u64>]) -> (Vec<u64>, Vec<Vec<u64>>) {
    let mut out_shape: Vec<u64> = Vec::new();
    let mut out_strides: Vec<Vec<u64>> = vec![Vec::new(); strides.len()];
    for (d, &size) in shape.iter().enumerate() {
        if size == 1 {
            continue;
        }
        let mergeable =
            !out_shape.is_empty() && strides.iter().zip(&out_strides).all(|(s, o)| o.last() == Some(&(s[d] * size)));
        if mergeable {
            *out_shape.last_mut().expect("not empty") *= size;
            for (s, o) in strides.iter().zip(&mut out_strides) {
                *o.last_mut().expect("not empty") = s[d];
            }
        } else {
            out_shape.push(size);
            for (s, o) in strides.iter().zip(&mut out_strides) {
                o.push(s[d]);
            }
        }
    }
    (out_shape, out_strides)
}

/// `etwgpu.fused_elementwise.default(expr, x0, .., xN-1, →out)`.
pub fn fused_elementwise(c: &Ctx<'_>) -> Result<Lowered> {
    let n_args = c.n_args();
    if n_args < 3 {
        return Err(Error::ArgCount { expected: 3, found: n_args });
    }
    let text = c.opt_str(0, "expr")?.unwrap_or("");
    let expr = Expr::parse(text).map_err(|reason| Error::ArgValue {
        arg_idx: 0,
        name: "expr",
        found: text.to_string(),
        reason,
    })?;
    let n_in = n_args - 2;
    if expr.n_inputs() != n_in {
        return Err(Error::ArgCount { expected: expr.n_inputs() + 2, found: n_args });
    }
    if !expr.reads_every_input() {
        return Err(Error::ArgValue {
            arg_idx: 0,
            name: "expr",
            found: text.to_string(),
            reason: "every input must be read",
        });
    }
    let inputs: Vec<TensorInfo<'_>> = (0..n_in).map(|k| c.tensor(k + 1, "input")).collect::<Result<_>>()?;
    let out = c.tensor(n_args - 1, "out")?;
    let template = float_shader(Family::FusedElementwise, &inputs[0], 1, "input")?;
    for (k, t) in inputs.iter().enumerate() {
        same_dtype(t, inputs[0].dtype, k + 1, "input")?;
    }
    same_dtype(&out, inputs[0].dtype, n_args - 1, "out")?;
    let operand_shape = |shapes: &[Vec<u64>], o: &Operand| match o {
        Operand::Input(k) => inputs[*k].shape.to_vec(),
        Operand::Temp(j) => shapes[*j].clone(),
    };
    let mut shapes: Vec<Vec<u64>> = Vec::with_capacity(expr.insts.len());
    for inst in &expr.insts {
        let shape = match inst {
            Inst::Unary { x, .. } => operand_shape(&shapes, x),
            Inst::Binary { a, b, .. } => {
                let (sa, sb) = (operand_shape(&shapes, a), operand_shape(&shapes, b));
                broadcast_shapes(&sa, &sb).ok_or_else(|| Error::Shape {
                    arg_idx: 0,
                    name: "expr",
                    expected: format!("operands broadcastable with {sa:?}"),
                    found: sb,
                })?
            }
        };
        shapes.push(shape);
    }
    let shape = shapes.pop().expect("an expression has an instruction");
    check_rank(&shape)?;
    let numel = checked_numel(&shape)?;
    let mut steps = Vec::new();
    if numel > 0 {
        let strides: Vec<Vec<u64>> = inputs.iter().map(|t| broadcast_strides(t.shape, &shape)).collect();
        let (dims, strides) = collapse(&shape, &strides);
        let mut params = Uniform::new()
            .u32(to_u32("numel", numel)?)
            .u32(dims.len() as u32)
            .u32(0)
            .u32(0)
            .dims_u32(&dims_u32(&dims)?);
        for k in 0..FUSED_MAX_INPUTS {
            let s = strides.get(k).map(|s| dims_u32(s)).transpose()?.unwrap_or_default();
            params = params.dims_u32(&s);
        }
        let variant = template.variant();
        steps.push(Step::Dispatch(Dispatch {
            shader: Shader::Generated(Arc::new(GeneratedShader {
                label: template.label(),
                variant,
                source: expr.wgsl(variant),
            })),
            entry: "main",
            inputs: inputs.iter().map(|t| t.id).collect(),
            outputs: vec![out.id],
            params: params.finish(),
            workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, shape)], steps })
}

fn shape_err(arg_idx: usize, name: &'static str, expected: String, t: &TensorInfo<'_>) -> Error {
    Error::Shape { arg_idx, name, expected, found: t.shape.to_vec() }
}

/// A linear weight `[N, K]` (and its bias `[N]`, if any) of a fused
/// linear: returns N.
fn check_weight(
    x: &TensorInfo<'_>,
    k: u64,
    w: &TensorInfo<'_>,
    w_idx: usize,
    bias: Option<&TensorInfo<'_>>,
) -> Result<u64> {
    same_dtype(w, x.dtype, w_idx, "weight")?;
    let [n, k2] = w.shape[..] else { return Err(shape_err(w_idx, "weight", "rank 2".into(), w)) };
    if k2 != k {
        return Err(shape_err(w_idx, "weight", format!("[N, {k}]"), w));
    }
    if let Some(b) = bias {
        same_dtype(b, x.dtype, w_idx + 1, "bias")?;
        if b.shape != [n] {
            return Err(shape_err(w_idx + 1, "bias", format!("[{n}]"), b));
        }
    }
    Ok(n)
}

/// The input `[..., K]` of a fused linear: `(M, K, leading dims)`.
fn linear_input<'a>(x: &TensorInfo<'a>) -> Result<(u64, u64, &'a [u64])> {
    let Some((&k, lead)) = x.shape.split_last() else {
        return Err(shape_err(0, "input", "rank >= 1".into(), x));
    };
    Ok((lead.iter().product(), k, lead))
}

/// The three outputs of a fused QKV call.
fn qkv_outputs<'a>(c: &Ctx<'a>, idx: usize, x: &TensorInfo<'_>) -> Result<Vec<TensorInfo<'a>>> {
    let outs = c.tensor_list(idx, "out")?;
    if outs.len() != 3 {
        return Err(Error::ArgValue {
            arg_idx: idx,
            name: "out",
            found: format!("{} tensors", outs.len()),
            reason: "expected 3 (q, k, v)",
        });
    }
    for o in &outs {
        same_dtype(o, x.dtype, idx, "out")?;
    }
    Ok(outs)
}

/// `etwgpu.linear_qkv.default(input [..., K], w_q [Nq, K], b_q? [Nq], w_k,
/// b_k?, w_v, b_v?, →[q [..., Nq], k, v])`.
pub fn linear_qkv(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(8)?;
    let x = c.tensor(0, "input")?;
    let outs = qkv_outputs(c, 7, &x)?;
    let (m, k, lead) = linear_input(&x)?;
    let mut ns = [0u64; 3];
    let mut weights = Vec::with_capacity(3);
    let mut biases = Vec::with_capacity(3);
    let mut has_bias = 0u32;
    for (j, n) in ns.iter_mut().enumerate() {
        let w = c.tensor(1 + 2 * j, "weight")?;
        let b = c.opt_tensor(2 + 2 * j, "bias")?;
        *n = check_weight(&x, k, &w, 1 + 2 * j, b.as_ref())?;
        if b.is_some() {
            has_bias |= 1 << j;
        }
        biases.push(b.map_or(w.id, |b| b.id));
        weights.push(w);
    }
    let gemv = m <= GEMV_MAX_ROWS;
    let shader = float_shader(if gemv { Family::GemvQkv } else { Family::LinearQkv }, &x, 0, "input")?;
    let shapes: Vec<(Vid, Vec<u64>)> = outs
        .iter()
        .zip(ns)
        .map(|(o, n)| {
            let mut s = lead.to_vec();
            s.push(n);
            (o.id, s)
        })
        .collect();
    let total: u64 = ns.iter().sum::<u64>() * m;
    let mut steps = Vec::new();
    if total > 0 {
        let u = |what, x| to_u32(what, x);
        let params = Uniform::new()
            .u32(u("M", m)?)
            .u32(u("K", k)?)
            .u32(u("N", ns[0])?)
            .u32(u("N", ns[1])?)
            .u32(u("N", ns[2])?)
            .u32(has_bias)
            .finish();
        let workgroups = if gemv {
            grid_groups(total)?
        } else {
            let tile = u64::from(MATMUL_TILE);
            let n_max = ns.iter().copied().max().unwrap_or(0);
            [u("workgroups along N", n_max.div_ceil(tile))?, u("workgroups along M", m.div_ceil(tile))?, 3]
        };
        let mut inputs = vec![x.id];
        inputs.extend(weights.iter().map(|w| w.id));
        inputs.extend(biases);
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs,
            outputs: outs.iter().map(|o| o.id).collect(),
            params,
            workgroups,
        }));
    }
    Ok(Lowered { shapes, steps })
}

/// `etwgpu.linear_swiglu.default(input [..., K], w_gate [N, K], b_gate?,
/// w_up [N, K], b_up?, →out [..., N])`.
pub fn linear_swiglu(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(6)?;
    let x = c.tensor(0, "input")?;
    let out = c.tensor(5, "out")?;
    same_dtype(&out, x.dtype, 5, "out")?;
    let (m, k, lead) = linear_input(&x)?;
    let wg = c.tensor(1, "w_gate")?;
    let bg = c.opt_tensor(2, "b_gate")?;
    let wu = c.tensor(3, "w_up")?;
    let bu = c.opt_tensor(4, "b_up")?;
    let n = check_weight(&x, k, &wg, 1, bg.as_ref())?;
    if check_weight(&x, k, &wu, 3, bu.as_ref())? != n {
        return Err(shape_err(3, "w_up", format!("[{n}, {k}] (the gate's shape)"), &wu));
    }
    let gemv = m <= GEMV_MAX_ROWS;
    let shader = float_shader(if gemv { Family::GemvSwiglu } else { Family::LinearSwiglu }, &x, 0, "input")?;
    let mut shape = lead.to_vec();
    shape.push(n);
    let mut steps = Vec::new();
    if m * n > 0 {
        let u = |what, x| to_u32(what, x);
        let has_bias = u32::from(bg.is_some()) | u32::from(bu.is_some()) << 1;
        let params = Uniform::new().u32(u("M", m)?).u32(u("N", n)?).u32(u("K", k)?).u32(has_bias).finish();
        let workgroups = if gemv {
            grid_groups(m * n)?
        } else {
            let tile = u64::from(MATMUL_TILE);
            [u("workgroups along N", n.div_ceil(tile))?, u("workgroups along M", m.div_ceil(tile))?, 1]
        };
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id, wg.id, bg.map_or(wg.id, |b| b.id), wu.id, bu.map_or(wu.id, |b| b.id)],
            outputs: vec![out.id],
            params,
            workgroups,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, shape)], steps })
}

/// `etwgpu.linear_q4gsw_qkv.default(input [..., K], group_size, w_q u8
/// [Nq, K/2], s_q [G, Nq_pad], w_k, s_k, w_v, s_v, →[q [..., Nq], k, v])`.
pub fn linear_q4gsw_qkv(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(9)?;
    let x = c.tensor(0, "input")?;
    let group_size = c.int(1, "group_size")?;
    let outs = qkv_outputs(c, 8, &x)?;
    let shader = float_shader(Family::LinearQ4gswQkv, &x, 0, "input")?;
    let Some(&k) = x.shape.last() else { return Err(shape_err(0, "input", "[..., K]".into(), &x)) };
    let m = x.numel().checked_div(k).unwrap_or(0);
    let mut ns = [0u64; 3];
    let mut k_packed = [0u64; 3];
    let mut n_pads = [0u64; 3];
    let mut inputs = vec![x.id];
    for j in 0..3 {
        let w = c.tensor(2 + 2 * j, "weights")?;
        let s = c.tensor(3 + 2 * j, "weight_scales")?;
        same_dtype(&s, x.dtype, 3 + 2 * j, "weight_scales")?;
        (ns[j], n_pads[j]) = check_q4_weight(k, &w, 2 + 2 * j, &s, 3 + 2 * j, group_size, 1)?;
        k_packed[j] = w.shape[1];
        inputs.extend([w.id, s.id]);
    }
    let shapes: Vec<(Vid, Vec<u64>)> = outs
        .iter()
        .zip(ns)
        .map(|(o, n)| {
            let mut s = x.shape.to_vec();
            *s.last_mut().expect("rank >= 1") = n;
            (o.id, s)
        })
        .collect();
    let total: u64 = ns.iter().sum::<u64>() * m;
    let mut steps = Vec::new();
    let gs = group_size as u64;
    let fast = total > 0 && (0..3).all(|j| q4_fast(k, k_packed[j], gs));
    let out_ids: Vec<Vid> = outs.iter().map(|o| o.id).collect();
    let gemv = if fast {
        crate::ops::quant::q4_gemv_qkv_dispatch(c, &x, m, k, gs, ns, n_pads, inputs.clone(), out_ids)?
    } else {
        None
    };
    if let Some(d) = gemv {
        steps.push(Step::Dispatch(d));
    } else if fast {
        // The fast 4-bit routes beat one slow kernel for all three: one
        // fast dispatch per projection.
        for j in 0..3 {
            let q = Q4Linear { m, n: ns[j], k, n_pad: n_pads[j], group_size: gs };
            let (w, sc) = (inputs[1 + 2 * j], inputs[2 + 2 * j]);
            let d = q4_fast_dispatch(
                c,
                &x,
                &q,
                Q4Route::Linear { has_bias: false },
                vec![x.id, w, sc, sc],
                vec![outs[j].id],
            )?;
            steps.push(Step::Dispatch(d));
        }
    } else if total > 0 {
        let u = |what, x| to_u32(what, x);
        let mut params = Uniform::new().u32(u("M", m)?).u32(u("K", k)?).u32(u("group_size", group_size as u64)?).u32(0);
        for xs in [ns, k_packed, n_pads] {
            for v in xs {
                params = params.u32(u("weight dims", v)?);
            }
            params = params.u32(0);
        }
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs,
            outputs: outs.iter().map(|o| o.id).collect(),
            params: params.finish(),
            workgroups: grid_groups(total)?,
        }));
    }
    Ok(Lowered { shapes, steps })
}

/// `etwgpu.linear_q4gsw_swiglu.default(input [..., K], group_size, w_gate u8
/// [N, K/2], s_gate [G, N_pad], w_up, s_up, →out [..., N])`.
pub fn linear_q4gsw_swiglu(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(7)?;
    let x = c.tensor(0, "input")?;
    let group_size = c.int(1, "group_size")?;
    let out = c.tensor(6, "out")?;
    same_dtype(&out, x.dtype, 6, "out")?;
    let shader = float_shader(Family::LinearQ4gswSwiglu, &x, 0, "input")?;
    let Some(&k) = x.shape.last() else { return Err(shape_err(0, "input", "[..., K]".into(), &x)) };
    let m = x.numel().checked_div(k).unwrap_or(0);
    let (wg, sg) = (c.tensor(2, "w_gate")?, c.tensor(3, "s_gate")?);
    let (wu, su) = (c.tensor(4, "w_up")?, c.tensor(5, "s_up")?);
    same_dtype(&sg, x.dtype, 3, "s_gate")?;
    same_dtype(&su, x.dtype, 5, "s_up")?;
    let (n, n_pad) = check_q4_weight(k, &wg, 2, &sg, 3, group_size, 1)?;
    check_q4_weight(k, &wu, 4, &su, 5, group_size, 1)?;
    if wu.shape != wg.shape {
        return Err(shape_err(4, "w_up", format!("{:?} (the gate's shape)", wg.shape), &wu));
    }
    if su.shape != sg.shape {
        return Err(shape_err(5, "s_up", format!("{:?} (the gate's shape)", sg.shape), &su));
    }
    let mut shape = x.shape.to_vec();
    *shape.last_mut().expect("rank >= 1") = n;
    let mut steps = Vec::new();
    let gs = group_size as u64;
    if m * n > 0 && q4_fast(k, wg.shape[1], gs) {
        let q = Q4Linear { m, n, k, n_pad, group_size: gs };
        let inputs = vec![x.id, wg.id, sg.id, wu.id, su.id];
        steps.push(Step::Dispatch(q4_fast_dispatch(c, &x, &q, Q4Route::Swiglu, inputs, vec![out.id])?));
    } else if m * n > 0 {
        let u = |what, x| to_u32(what, x);
        let params = Uniform::new()
            .u32(u("M", m)?)
            .u32(u("N", n)?)
            .u32(u("K", k)?)
            .u32(u("packed K", wg.shape[1])?)
            .u32(u("padded N", n_pad)?)
            .u32(u("group_size", group_size as u64)?)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![x.id, wg.id, sg.id, wu.id, su.id],
            outputs: vec![out.id],
            params,
            workgroups: grid_groups(m * n)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, shape)], steps })
}
