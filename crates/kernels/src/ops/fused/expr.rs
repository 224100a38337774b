//! `etwgpu.fused_elementwise`: the expression ([`Expr`]) of a chain of
//! unary and broadcasting binary ops, its parser and WGSL writer, and the
//! host rule, which parses each expression and writes its WGSL once per
//! process (interned by text; the shader by source).

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::generated::shaders::{Family, ShaderId, Variant};
use crate::ops::elementwise::{BinaryOp, UnaryOp, broadcast_shapes, broadcast_strides};
use crate::plan::{
    Ctx, Dispatch, GeneratedShader, Lowered, Shader, Step, TensorInfo, Uniform, WG_ELEMENTWISE, check_rank,
    checked_numel, dims_u32, float_shader, grid_1d, same_dtype, to_u32,
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

/// Every expression parsed so far, by text: a fused node's expression is
/// parsed once, not at each of its lowerings.
static EXPRS: Mutex<BTreeMap<String, Arc<Expr>>> = Mutex::new(BTreeMap::new());

/// The generated shader of every (expression, variant) so far: its WGSL is
/// written once ([`GeneratedShader::intern`] then shares it by source).
static SHADERS: Mutex<BTreeMap<Variant, BTreeMap<String, Arc<GeneratedShader>>>> = Mutex::new(BTreeMap::new());

/// The expression of `text`, parsed on first use.
fn parsed(text: &str) -> Result<Arc<Expr>> {
    if let Some(e) = EXPRS.lock().unwrap_or_else(|e| e.into_inner()).get(text) {
        return Ok(e.clone());
    }
    let expr = Arc::new(Expr::parse(text).map_err(|reason| Error::ArgValue {
        arg_idx: 0,
        name: "expr",
        found: text.to_string(),
        reason,
    })?);
    EXPRS.lock().unwrap_or_else(|e| e.into_inner()).insert(text.to_string(), expr.clone());
    Ok(expr)
}

/// The shader of `expr` (parsed from `text`) for `variant`, written on
/// first use.
fn shader_of(text: &str, expr: &Expr, label: &'static str, variant: Variant) -> Arc<GeneratedShader> {
    let mut all = SHADERS.lock().unwrap_or_else(|e| e.into_inner());
    let of_variant = all.entry(variant).or_default();
    if let Some(g) = of_variant.get(text) {
        return g.clone();
    }
    let g = GeneratedShader::intern(label, variant, expr.wgsl(variant));
    of_variant.insert(text.to_string(), g.clone());
    g
}

/// `etwgpu.fused_elementwise.default(expr, x0, .., xN-1, →out)`.
pub fn fused_elementwise(c: &Ctx<'_>) -> Result<Lowered> {
    let n_args = c.n_args();
    if n_args < 3 {
        return Err(Error::ArgCount { expected: 3, found: n_args });
    }
    let text = c.opt_str(0, "expr")?.unwrap_or("");
    let expr = parsed(text)?;
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
            shader: Shader::Generated(shader_of(text, &expr, template.label(), variant)),
            entry: "main",
            inputs: inputs.iter().map(|t| t.id).collect(),
            outputs: vec![out.id],
            params: params.finish(),
            workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, shape)], steps })
}
