//! Fusion (`etwgpu_graph::fuse`, on by default): for each kind of rewrite a
//! crafted graph is fused, the rewritten chain is snapshotted (insta,
//! deterministic text), and the fused and unfused methods run on the same
//! inputs, at the declared shapes and at smaller live shapes, must agree
//! and the fused one must record fewer dispatches. Graphs where an
//! intermediate has another reader or is a graph output are left alone.
//!
//! The file is past 700 lines because the house style keeps a crate's
//! integration tests in its one `tests/it/`, and each kind of rewrite has
//! its crafted graph here.

use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
use etwgpu_format::{DType, Program, ValueId, VkGraph};
use etwgpu_graph::{FuseOptions, Fused, FusionKind};
use etwgpu_runtime::{LoadOptions, Tensor};

use crate::data;

fn program(g: GraphBuilder) -> Program {
    Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("crafted program parses")
}

fn graph(p: &Program) -> &VkGraph {
    p.methods[0].vulkan_delegates().next().expect("one delegate").2
}

fn fused(p: &Program) -> Fused {
    etwgpu_graph::fuse(graph(p), &FuseOptions::default())
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f16_tensor(shape: &[u64], values: &[f32]) -> Tensor {
    let bytes = values.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect();
    Tensor::new(DType::F16, shape.to_vec(), bytes).expect("valid")
}

/// Fuses `g`, snapshots the rewrite as `name`, checks the kinds of the
/// fusions (dead ops aside), then runs each call of `calls` on the fused
/// and the unfused method: outputs must agree within `tol` (relative and
/// absolute) and fusion must save dispatches.
fn check(name: &str, g: GraphBuilder, kinds: &[FusionKind], calls: &[Vec<Tensor>], tol: f64) {
    check_saving(name, g, kinds, calls, tol, |_| true);
}

/// [`check`] where fusion must save dispatches on the calls `saves` picks
/// (by index) and may only match the unfused count on the others (a
/// fusion that takes effect on one route only).
fn check_saving(
    name: &str,
    g: GraphBuilder,
    kinds: &[FusionKind],
    calls: &[Vec<Tensor>],
    tol: f64,
    saves: impl Fn(usize) -> bool,
) {
    let p = program(g);
    let f = fused(&p);
    let mut got: Vec<FusionKind> = f.fusions.iter().map(|f| f.kind).filter(|k| *k != FusionKind::DeadOp).collect();
    got.sort();
    assert_eq!(got, kinds, "{name}: fusions");
    insta::assert_snapshot!(name, format!("{}\n{}", f.summary(), etwgpu_graph::describe(&f.graph)));
    let Some(rt) = crate::runtime() else { return };
    let mut on =
        rt.load_with(&p, "forward", &LoadOptions { fuse: true, ..LoadOptions::default() }).expect("fused loads");
    let mut off =
        rt.load_with(&p, "forward", &LoadOptions { fuse: false, ..LoadOptions::default() }).expect("unfused loads");
    for (k, inputs) in calls.iter().enumerate() {
        let a = on.run(inputs).expect("fused runs");
        let b = off.run(inputs).expect("unfused runs");
        let fewer =
            if saves(k) { on.n_dispatches() < off.n_dispatches() } else { on.n_dispatches() <= off.n_dispatches() };
        assert!(fewer, "{name} call {k}: {} dispatches fused, {} unfused", on.n_dispatches(), off.n_dispatches());
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_eq!(x.shape, y.shape, "{name} call {k} output {i}: shape");
            for (j, (u, v)) in x.to_f64_vec().iter().zip(y.to_f64_vec()).enumerate() {
                assert!(
                    (u - v).abs() <= tol + tol * v.abs(),
                    "{name} call {k} output {i} element {j}: fused {u}, unfused {v}"
                );
            }
        }
    }
}

/// `clamp(silu(x * s + 0.5 * y), -0.5, None)` over `x [B, 3, 5]` (B up to
/// 4), `y [5]` and a scalar `s`: five ops, one kernel, three inputs.
fn elementwise_graph(dtype: DType) -> GraphBuilder {
    let mut g = GraphBuilder::new();
    let x = g.tensor(dtype, &[4, 3, 5]);
    let y = g.tensor(dtype, &[5]);
    let s = g.tensor(dtype, &[]);
    let (t0, t1, t2, t3, out) = (
        g.tensor(dtype, &[4, 3, 5]),
        g.tensor(dtype, &[4, 3, 5]),
        g.tensor(dtype, &[4, 3, 5]),
        g.tensor(dtype, &[4, 3, 5]),
        g.tensor(dtype, &[4, 3, 5]),
    );
    let (half, lo, none) = (g.double(0.5), g.double(-0.5), g.null());
    g.op("aten.mul.Tensor", &[x, s, t0])
        .op("aten.add.Tensor", &[t0, y, half, t1])
        .op("aten.sigmoid.default", &[t1, t2])
        .op("aten.mul.Tensor", &[t1, t2, t3])
        .op("aten.clamp.default", &[t3, lo, none, out]);
    g.inputs(&[x, y, s]).outputs(&[out]);
    g
}

#[test]
fn elementwise_chain_is_one_kernel() {
    let calls: Vec<Vec<Tensor>> = [4u64, 1]
        .iter()
        .map(|&b| {
            vec![
                Tensor::from_f32(&[b, 3, 5], &data(b as usize * 15, 1)),
                Tensor::from_f32(&[5], &data(5, 2)),
                Tensor::from_f32(&[], &[0.75]),
            ]
        })
        .collect();
    check("elementwise_chain", elementwise_graph(DType::F32), &[FusionKind::Elementwise], &calls, 1e-6);
}

#[test]
fn elementwise_chain_in_f16() {
    let calls =
        vec![vec![f16_tensor(&[4, 3, 5], &data(60, 3)), f16_tensor(&[5], &data(5, 4)), f16_tensor(&[], &[1.25])]];
    // f16 intermediates round between unfused ops, not in the fused kernel.
    check("elementwise_chain_f16", elementwise_graph(DType::F16), &[FusionKind::Elementwise], &calls, 2e-2);
}

/// `y = linear(x, w) + b` (a bias add), then relu; and a second linear with
/// its own bias, a view and SiLU (`mul(v, sigmoid(v))`), as exported.
#[test]
fn linear_takes_bias_and_activations() {
    let (k, n) = (24u64, 20u64);
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[9, k]);
    let w1 = g.constant(DType::F32, &[n, k], &f32_bytes(&data((n * k) as usize, 5)));
    let b1 = g.constant(DType::F32, &[n], &f32_bytes(&data(n as usize, 6)));
    let w2 = g.constant(DType::F32, &[n, n], &f32_bytes(&data((n * n) as usize, 7)));
    let b2 = g.constant(DType::F32, &[n], &f32_bytes(&data(n as usize, 8)));
    let (none, one) = (g.null(), g.int(1));
    let (y, yb, r) = (g.tensor(DType::F32, &[9, n]), g.tensor(DType::F32, &[9, n]), g.tensor(DType::F32, &[9, n]));
    let (z, size, zv) =
        (g.tensor(DType::F32, &[9, n]), g.int_list(&[1, -1, n as i64]), g.tensor(DType::F32, &[1, 9, n]));
    let (s, out) = (g.tensor(DType::F32, &[1, 9, n]), g.tensor(DType::F32, &[1, 9, n]));
    g.op("aten.linear.default", &[x, w1, none, y])
        .op("aten.add.Tensor", &[y, b1, one, yb])
        .op("aten.relu.default", &[yb, r])
        .op("aten.linear.default", &[r, w2, b2, z])
        .op("aten.view_copy.default", &[z, size, zv])
        .op("aten.sigmoid.default", &[zv, s])
        .op("aten.mul.Tensor", &[zv, s, out]);
    g.inputs(&[x]).outputs(&[out]);
    let calls = vec![
        vec![Tensor::from_f32(&[9, k], &data((9 * k) as usize, 9))],
        vec![Tensor::from_f32(&[2, k], &data((2 * k) as usize, 10))],
    ];
    check(
        "linear_bias_activations",
        g,
        &[FusionKind::Bias, FusionKind::Activation, FusionKind::Activation],
        &calls,
        1e-5,
    );
}

/// `mm + add(bias)` becomes `addmm`, which takes a hardtanh; `addmm` then
/// gelu(tanh).
#[test]
fn mm_and_addmm_take_bias_and_activations() {
    let (m, k, n) = (17u64, 12u64, 6u64);
    let mut g = GraphBuilder::new();
    let a = g.tensor(DType::F32, &[m, k]);
    let b = g.constant(DType::F32, &[k, n], &f32_bytes(&data((k * n) as usize, 11)));
    let bias = g.constant(DType::F32, &[n], &f32_bytes(&data(n as usize, 12)));
    let b2 = g.constant(DType::F32, &[n, n], &f32_bytes(&data((n * n) as usize, 13)));
    let (one, beta, alpha, lo, hi, tanh) =
        (g.int(1), g.double(0.5), g.double(2.0), g.double(-1.0), g.double(1.5), g.string("tanh"));
    let t: Vec<_> = (0..5).map(|_| g.tensor(DType::F32, &[m, n])).collect();
    g.op("aten.mm.default", &[a, b, t[0]])
        .op("aten.add.Tensor", &[bias, t[0], one, t[1]])
        .op("aten.hardtanh.default", &[t[1], lo, hi, t[2]])
        .op("aten.addmm.default", &[bias, t[2], b2, beta, alpha, t[3]])
        .op("aten.gelu.default", &[t[3], tanh, t[4]]);
    g.inputs(&[a]).outputs(&[t[4]]);
    let calls = vec![vec![Tensor::from_f32(&[m, k], &data((m * k) as usize, 14))]];
    check(
        "mm_addmm_bias_activations",
        g,
        &[FusionKind::Bias, FusionKind::Activation, FusionKind::Activation],
        &calls,
        1e-5,
    );
}

/// A convolution then hardswish; a clamped convolution then sigmoid.
#[test]
fn convolutions_take_activations() {
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, 3, 9, 7]);
    let w = g.constant(DType::F32, &[4, 3, 3, 3], &f32_bytes(&data(108, 15)));
    let bias = g.constant(DType::F32, &[4], &f32_bytes(&data(4, 16)));
    let w2 = g.constant(DType::F32, &[4, 1, 3, 3], &f32_bytes(&data(36, 17)));
    let (ones, zeros, f, groups, dw) = (g.int_list(&[1, 1]), g.int_list(&[0, 0]), g.bool(false), g.int(1), g.int(4));
    let (lo, none) = (g.double(-0.25), g.null());
    let t: Vec<_> = (0..4).map(|_| g.tensor(DType::F32, &[1, 4, 9, 7])).collect();
    g.op("aten.convolution.default", &[x, w, bias, ones, ones, ones, f, zeros, groups, t[0]])
        .op("aten.hardswish.default", &[t[0], t[1]])
        .op("et_vk.conv_with_clamp.default", &[t[1], w2, none, ones, ones, ones, f, zeros, dw, lo, none, t[2]])
        .op("aten.sigmoid.default", &[t[2], t[3]]);
    g.inputs(&[x]).outputs(&[t[3]]);
    let calls = vec![vec![Tensor::from_f32(&[1, 3, 9, 7], &data(189, 18))]];
    check("convolution_activations", g, &[FusionKind::Activation, FusionKind::Activation], &calls, 1e-5);
}

/// Three linears (with biases) of identical views of one input, as
/// exported: one dispatch writing Q, K and V. Runs at 8 rows (tiled) and
/// at 3 (matrix-vector route).
#[test]
fn qkv_linears_are_one_dispatch() {
    let k = 32u64;
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, 8, k]);
    let mut outs = Vec::new();
    for (j, n) in [32u64, 16, 16].into_iter().enumerate() {
        let size = g.int_list(&[-1, k as i64]);
        let xv = g.tensor(DType::F32, &[8, k]);
        let w = g.constant(DType::F32, &[n, k], &f32_bytes(&data((n * k) as usize, 20 + j as u32)));
        let b = g.constant(DType::F32, &[n], &f32_bytes(&data(n as usize, 30 + j as u32)));
        let y = g.tensor(DType::F32, &[8, n]);
        g.op("aten.view_copy.default", &[x, size, xv]).op("aten.linear.default", &[xv, w, b, y]);
        outs.push(y);
    }
    g.inputs(&[x]).outputs(&outs);
    let calls: Vec<Vec<Tensor>> =
        [8u64, 3].iter().map(|&s| vec![Tensor::from_f32(&[1, s, k], &data((s * k) as usize, 40))]).collect();
    // The views repeat each other: two go as duplicates. 1e-5: at 3 rows
    // the unfused linears take the dense GEMV (`linear_gemv.wgsl`), which
    // sums K in another order than the fused kernel.
    check("qkv_fp32", g, &[FusionKind::Duplicate, FusionKind::Duplicate, FusionKind::Qkv], &calls, 1e-5);
}

/// Packed 4-bit weights `[n, k/2]` and their `[k/group, n]` scales.
fn q4_weight(
    g: &mut GraphBuilder,
    n: u64,
    k: u64,
    group: u64,
    seed: u32,
) -> (etwgpu_format::ValueId, etwgpu_format::ValueId) {
    let bytes: Vec<u8> = data((n * k / 2) as usize, seed).iter().map(|v| ((v + 2.0) * 63.0) as u8).collect();
    let scales: Vec<f32> = data((k / group * n) as usize, seed + 1).iter().map(|v| v * 0.05).collect();
    let w = g.constant(DType::U8, &[n, k / 2], &bytes);
    let s = g.constant(DType::F32, &[k / group, n], &f32_bytes(&scales));
    (w, s)
}

/// Three `et_vk.linear_q4gsw` of one input: one dispatch. (K = 48 with
/// groups of 16: shapes the fast 4-bit routes do not take, so the fused
/// kernel runs; where they do, the fused op lowers to one fast dispatch
/// per projection, which `fused_q4_qkv_on_fast_shapes_matches` checks.)
#[test]
fn q4gsw_qkv_linears_are_one_dispatch() {
    let k = 48u64;
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, 6, k]);
    let (gs, none) = (g.int(16), g.null());
    let mut outs = Vec::new();
    for (j, n) in [64u64, 32, 32].into_iter().enumerate() {
        let (w, s) = q4_weight(&mut g, n, k, 16, 50 + 2 * j as u32);
        let y = g.tensor(DType::F32, &[1, 6, n]);
        g.op("et_vk.linear_q4gsw.default", &[x, w, s, gs, none, y]);
        outs.push(y);
    }
    g.inputs(&[x]).outputs(&outs);
    let calls: Vec<Vec<Tensor>> =
        [6u64, 1].iter().map(|&s| vec![Tensor::from_f32(&[1, s, k], &data((s * k) as usize, 60))]).collect();
    check("qkv_q4gsw", g, &[FusionKind::Qkv], &calls, 1e-6);
}

/// `silu(gate(x)) * up(x)` as the Llama export writes it: both linears
/// read identical views of `x`, their outputs are viewed back, then
/// sigmoid, mul, mul. Runs at 7 rows (tiled) and 2 (matrix-vector).
#[test]
fn swiglu_is_one_dispatch() {
    let (k, n) = (32u64, 48u64);
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, 7, k]);
    let mut views = Vec::new();
    for j in 0..2u32 {
        let size = g.int_list(&[-1, k as i64]);
        let xv = g.tensor(DType::F32, &[7, k]);
        let w = g.constant(DType::F32, &[n, k], &f32_bytes(&data((n * k) as usize, 70 + j)));
        let none = g.null();
        let y = g.tensor(DType::F32, &[7, n]);
        let back = g.int_list(&[1, -1, n as i64]);
        let yv = g.tensor(DType::F32, &[1, 7, n]);
        g.op("aten.view_copy.default", &[x, size, xv])
            .op("aten.linear.default", &[xv, w, none, y])
            .op("aten.view_copy.default", &[y, back, yv]);
        views.push(yv);
    }
    let (s, a, out) =
        (g.tensor(DType::F32, &[1, 7, n]), g.tensor(DType::F32, &[1, 7, n]), g.tensor(DType::F32, &[1, 7, n]));
    g.op("aten.sigmoid.default", &[views[0], s])
        .op("aten.mul.Tensor", &[views[0], s, a])
        .op("aten.mul.Tensor", &[a, views[1], out]);
    g.inputs(&[x]).outputs(&[out]);
    let calls: Vec<Vec<Tensor>> =
        [7u64, 2].iter().map(|&s| vec![Tensor::from_f32(&[1, s, k], &data((s * k) as usize, 80))]).collect();
    check("swiglu_fp32", g, &[FusionKind::Duplicate, FusionKind::Swiglu], &calls, 1e-5);
}

/// Where the fast 4-bit routes apply (K and the group multiples of 32), the
/// fused QKV op runs one fast dispatch per projection: same outputs as the
/// unfused method, on the GEMV (1 row) and the tiled GEMM (70 rows).
#[test]
fn fused_q4_qkv_on_fast_shapes_matches() {
    let k = 64u64;
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, 70, k]);
    let (gs, none) = (g.int(32), g.null());
    let mut outs = Vec::new();
    for (j, n) in [64u64, 32, 32].into_iter().enumerate() {
        let (w, s) = q4_weight(&mut g, n, k, 32, 150 + 2 * j as u32);
        let y = g.tensor(DType::F32, &[1, 70, n]);
        g.op("et_vk.linear_q4gsw.default", &[x, w, s, gs, none, y]);
        outs.push(y);
    }
    g.inputs(&[x]).outputs(&outs);
    let p = program(g);
    assert_eq!(fused(&p).fusions.iter().filter(|f| f.kind == FusionKind::Qkv).count(), 1);
    let Some(rt) = crate::runtime() else { return };
    let mut on =
        rt.load_with(&p, "forward", &LoadOptions { fuse: true, ..LoadOptions::default() }).expect("fused loads");
    let mut off =
        rt.load_with(&p, "forward", &LoadOptions { fuse: false, ..LoadOptions::default() }).expect("unfused loads");
    for rows in [1u64, 70] {
        let inputs = vec![Tensor::from_f32(&[1, rows, k], &data((rows * k) as usize, 160))];
        let (a, b) = (on.run(&inputs).expect("fused runs"), off.run(&inputs).expect("unfused runs"));
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.bytes, y.bytes, "{rows} rows: the same kernels give the same bits");
        }
    }
}

/// SwiGLU of two `et_vk.linear_q4gsw`, the product's operands swapped.
#[test]
fn q4gsw_swiglu_is_one_dispatch() {
    let (k, n) = (64u64, 32u64);
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, 5, k]);
    let (gs, none) = (g.int(32), g.null());
    let mut ys = Vec::new();
    for j in 0..2u32 {
        let (w, s) = q4_weight(&mut g, n, k, 32, 90 + 2 * j);
        let y = g.tensor(DType::F32, &[1, 5, n]);
        g.op("et_vk.linear_q4gsw.default", &[x, w, s, gs, none, y]);
        ys.push(y);
    }
    let (s, a, out) =
        (g.tensor(DType::F32, &[1, 5, n]), g.tensor(DType::F32, &[1, 5, n]), g.tensor(DType::F32, &[1, 5, n]));
    g.op("aten.sigmoid.default", &[ys[0], s])
        .op("aten.mul.Tensor", &[s, ys[0], a])
        .op("aten.mul.Tensor", &[ys[1], a, out]);
    g.inputs(&[x]).outputs(&[out]);
    let calls: Vec<Vec<Tensor>> =
        [5u64, 1].iter().map(|&s| vec![Tensor::from_f32(&[1, s, k], &data((s * k) as usize, 100))]).collect();
    check("swiglu_q4gsw", g, &[FusionKind::Swiglu], &calls, 1e-5);
}

/// A residual add whose sum an RMS norm reads and the next residual add
/// reads too (a Llama block's seam): one `etwgpu.add_rms_norm` writing the
/// sum and the norm, in float32 and float16, at the declared and a shorter
/// live length (rows of 300: more than one pass of the workgroup, in
/// registers; rows of 2100: the loop past 8 elements per invocation).
#[test]
fn residual_add_and_rms_norm_are_one_dispatch() {
    for (dtype, n) in [(DType::F32, 300u64), (DType::F16, 300), (DType::F32, 2100)] {
        let mut g = GraphBuilder::new();
        let shape = [1, 5, n];
        let (h, r) = (g.tensor(dtype, &shape), g.tensor(dtype, &shape));
        let (z, y, out, one) = (g.tensor(dtype, &shape), g.tensor(dtype, &shape), g.tensor(dtype, &shape), g.int(1));
        let weights = data(n as usize, 120);
        let w = match dtype {
            DType::F16 => {
                let bytes: Vec<u8> = weights.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect();
                g.constant(dtype, &[n], &bytes)
            }
            _ => g.constant(dtype, &[n], &f32_bytes(&weights)),
        };
        let eps = g.double(1e-5);
        g.op("aten.add.Tensor", &[h, r, one, z])
            .op("et_vk.rms_norm.default", &[z, w, eps, y])
            .op("aten.add.Tensor", &[z, y, one, out]);
        g.inputs(&[h, r]).outputs(&[out]);
        let calls: Vec<Vec<Tensor>> = [5u64, 2]
            .iter()
            .map(|&s| {
                let len = (s * n) as usize;
                let (a, b) = (data(len, 121), data(len, 122));
                match dtype {
                    DType::F16 => vec![f16_tensor(&[1, s, n], &a), f16_tensor(&[1, s, n], &b)],
                    _ => vec![Tensor::from_f32(&[1, s, n], &a), Tensor::from_f32(&[1, s, n], &b)],
                }
            })
            .collect();
        let name = match (dtype, n) {
            (DType::F16, _) => "add_rms_norm_f16",
            (_, 300) => "add_rms_norm",
            _ => "add_rms_norm_long",
        };
        check(name, g, &[FusionKind::AddNorm], &calls, 1e-6);
    }
}

/// Another reader of a decoder tail's intermediates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TailReader {
    None,
    /// The sum is a graph output.
    SumOutput,
    /// An op reads the sum.
    SumOp,
    /// An op reads the selected row.
    RowOp,
}

/// A decoder's tail over `[1, 7, n]` residuals: `z = h + r`, the row
/// `select_copy(z, dim, index)`, its RMS norm `y`, and with `head` outputs a
/// 4-bit output head reading `y` (groups of 32); the graph's output is the
/// head's, or `y` without one, and what `reader` adds.
fn last_row_norm_graph(
    dtype: DType,
    n: u64,
    head: Option<u64>,
    (dim, index): (i64, i64),
    reader: TailReader,
) -> GraphBuilder {
    let mut g = GraphBuilder::new();
    let (h, r, z) = (g.tensor(dtype, &[1, 7, n]), g.tensor(dtype, &[1, 7, n]), g.tensor(dtype, &[1, 7, n]));
    let row_dims: &[u64] = if dim == 0 { &[7, n] } else { &[1, n] };
    let (row, y) = (g.tensor(dtype, row_dims), g.tensor(dtype, row_dims));
    let (one, dim, index, eps) = (g.int(1), g.int(dim), g.int(index), g.double(1e-5));
    let weights: Vec<f32> = data(n as usize, 130).iter().map(|v| 1.0 + 0.25 * v).collect();
    let w = g.constant(dtype, &[n], &float_bytes(dtype, &weights));
    g.op("aten.add.Tensor", &[h, r, one, z])
        .op("aten.select_copy.int", &[z, dim, index, row])
        .op("et_vk.rms_norm.default", &[row, w, eps, y]);
    let mut outputs = vec![y];
    if let Some(head) = head {
        let (gs, none, logits) = (g.int(32), g.null(), g.tensor(dtype, &[row_dims[0], head]));
        let (wh, sh) = q4_weight(&mut g, head, n, 32, 131);
        g.op("et_vk.linear_q4gsw.default", &[y, wh, sh, gs, none, logits]);
        outputs = vec![logits];
    }
    match reader {
        TailReader::None => {}
        TailReader::SumOutput => outputs.push(z),
        TailReader::SumOp | TailReader::RowOp => {
            let (x, dims) = if reader == TailReader::SumOp { (z, &[1, 7, n][..]) } else { (row, row_dims) };
            let neg = g.tensor(dtype, dims);
            g.op("aten.neg.default", &[x, neg]);
            outputs.push(neg);
        }
    }
    g.inputs(&[h, r]).outputs(&outputs);
    g
}

/// The last residual add, the last row of its sum (`select_copy` on the
/// sequence dim at index -1, or at S - 1 of the declared S) and its RMS
/// norm are one `etwgpu.add_select_rms_norm` reading only the last rows,
/// and a 4-bit head after it stays a plain linear (the GEMV on one row), in
/// float32 and float16, on rows in registers and past them (2112), at the
/// declared 7 rows, a shorter prompt and one token (a decode step).
#[test]
fn last_row_add_and_rms_norm_are_one_dispatch() {
    let cases = [
        ("last_row_norm", DType::F32, 64u64, Some(40u64), -1i64),
        ("last_row_norm_f16", DType::F16, 300, None, -1),
        ("last_row_norm_long", DType::F32, 2112, Some(24), 6),
    ];
    for (name, dtype, n, head, index) in cases {
        let g = last_row_norm_graph(dtype, n, head, (1, index), TailReader::None);
        // Index 6 is the last row of the declared 7 only.
        let seqs: &[u64] = if index == -1 { &[7, 3, 1] } else { &[7] };
        let calls: Vec<Vec<Tensor>> = seqs
            .iter()
            .map(|&s| {
                let len = (s * n) as usize;
                let (a, b) = (data(len, 132), data(len, 133));
                match dtype {
                    DType::F16 => vec![f16_tensor(&[1, s, n], &a), f16_tensor(&[1, s, n], &b)],
                    _ => vec![Tensor::from_f32(&[1, s, n], &a), Tensor::from_f32(&[1, s, n], &b)],
                }
            })
            .collect();
        check(name, g, &[FusionKind::LastRowNorm], &calls, 1e-6);
    }
}

/// The tail stays as exported where the row is not the last along the
/// sequence dim, or the sum or the row has another reader.
#[test]
fn last_row_norm_needs_the_last_row_and_no_other_reader() {
    let fires = |dim: i64, index: i64, reader: TailReader| {
        let p = program(last_row_norm_graph(DType::F32, 64, Some(40), (dim, index), reader));
        let f = fused(&p);
        let fired = f.fusions.iter().any(|f| f.kind == FusionKind::LastRowNorm);
        let selects = f.graph.chain.iter().filter(|c| c.name == "aten.select_copy.int").count();
        assert_eq!(selects, usize::from(!fired), "{dim}, {index}, {reader:?}");
        fired
    };
    assert!(fires(1, -1, TailReader::None));
    assert!(fires(-2, 6, TailReader::None));
    for index in [0, 5, -2] {
        assert!(!fires(1, index, TailReader::None), "index {index} is not the last row");
    }
    assert!(!fires(0, -1, TailReader::None), "dim 0 is not the sequence dim");
    for reader in [TailReader::SumOutput, TailReader::SumOp, TailReader::RowOp] {
        assert!(!fires(1, -1, reader), "{reader:?}: another reader");
    }
}

/// Float bytes of `values` in `dtype` (f32 or f16).
fn float_bytes(dtype: DType, values: &[f32]) -> Vec<u8> {
    match dtype {
        DType::F16 => values.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect(),
        _ => f32_bytes(values),
    }
}

/// The inputs `[h, r]` (`[1, s, k]` each) of the norm-linear graphs, a
/// call for each of `seqs`, from seeds `seed` and `seed + 1`.
fn residual_calls(dtype: DType, k: u64, seqs: &[u64], seed: u32) -> Vec<Vec<Tensor>> {
    seqs.iter()
        .map(|&s| {
            let len = (s * k) as usize;
            let (a, b) = (data(len, seed), data(len, seed + 1));
            match dtype {
                DType::F16 => vec![f16_tensor(&[1, s, k], &a), f16_tensor(&[1, s, k], &b)],
                _ => vec![Tensor::from_f32(&[1, s, k], &a), Tensor::from_f32(&[1, s, k], &b)],
            }
        })
        .collect()
}

/// A constant RMS-norm weight of `n` near 1.
fn norm_weight(g: &mut GraphBuilder, dtype: DType, n: u64, seed: u32) -> ValueId {
    let w: Vec<f32> = data(n as usize, seed).iter().map(|v| 1.0 + 0.25 * v).collect();
    g.constant(dtype, &[n], &float_bytes(dtype, &w))
}

/// The tolerance of a norm fused into the linear after it: the fused
/// kernels sum the squares in another order and scale the dot products
/// instead of the input, which in float16 may move a rounding of the
/// normed input.
fn norm_linear_tol(dtype: DType) -> f64 {
    if dtype == DType::F32 { 1e-5 } else { 1e-2 }
}

/// A Llama block's norms and linears: `z = h + r`, its RMS norm into the
/// Q/K/V 4-bit linears, `t = z + q` and its norm into the SwiGLU pair,
/// the plain RMS norm of the SwiGLU output into a 4-bit head. Each norm
/// goes into the linear after it (after the residual adds are taken into
/// the norms and the linears fused); on the decode rows (1 and 3) each pair
/// is one dispatch, on 7 rows the norm and the tiled GEMMs. Float32 and
/// float16 activations (f16 scales), K = 64 and 96 in groups of 32.
#[test]
fn rms_norms_go_into_the_4bit_linears_after_them() {
    for dtype in [DType::F32, DType::F16] {
        let name = if dtype == DType::F32 { "norm_linears" } else { "norm_linears_f16" };
        norm_linears(name, dtype, (64, 96, 40), &[1, 3, 7]);
    }
    // Rows of 1,600 (50 words a column: the QKV kernel's slices end at
    // different words) and a SwiGLU of 8,192 (32 columns a workgroup, 8
    // slices: its loop over the word pairs), on the GEMV routes those
    // loops are in (1 and 3 rows).
    norm_linears("norm_linears_wide", DType::F32, (1600, 8192, 40), &[1, 3]);
}

/// [`rms_norms_go_into_the_4bit_linears_after_them`] at rows of `k`, a
/// SwiGLU of `f` and a head of `head` outputs, called with `seqs` rows.
fn norm_linears(name: &str, dtype: DType, (k, f, head): (u64, u64, u64), seqs: &[u64]) {
    let mut g = GraphBuilder::new();
    let t = |g: &mut GraphBuilder, n: u64| g.tensor(dtype, &[1, 7, n]);
    let (h, r) = (t(&mut g, k), t(&mut g, k));
    let (gs, none, one, eps) = (g.int(32), g.null(), g.int(1), g.double(1e-5));
    let mut seed = 200;
    let mut q4 = |g: &mut GraphBuilder, n: u64, kk: u64| {
        seed += 2;
        let bytes: Vec<u8> = data((n * kk / 2) as usize, seed).iter().map(|v| ((v + 2.0) * 63.0) as u8).collect();
        let scales: Vec<f32> = data((kk / 32 * n) as usize, seed + 1).iter().map(|v| v * 0.05).collect();
        (g.constant(DType::U8, &[n, kk / 2], &bytes), g.constant(dtype, &[kk / 32, n], &float_bytes(dtype, &scales)))
    };
    let norm_w = |g: &mut GraphBuilder, n: u64, seed: u32| norm_weight(g, dtype, n, seed);
    let (z, y) = (t(&mut g, k), t(&mut g, k));
    let w1 = norm_w(&mut g, k, 210);
    g.op("aten.add.Tensor", &[h, r, one, z]).op("et_vk.rms_norm.default", &[z, w1, eps, y]);
    let mut qkv = Vec::new();
    for n in [k, 32, 32] {
        let (w, s) = q4(&mut g, n, k);
        let out = t(&mut g, n);
        g.op("et_vk.linear_q4gsw.default", &[y, w, s, gs, none, out]);
        qkv.push(out);
    }
    let (sum2, y2) = (t(&mut g, k), t(&mut g, k));
    let w2 = norm_w(&mut g, k, 211);
    g.op("aten.add.Tensor", &[z, qkv[0], one, sum2]).op("et_vk.rms_norm.default", &[sum2, w2, eps, y2]);
    let mut gate_up = Vec::new();
    for _ in 0..2 {
        let (w, s) = q4(&mut g, f, k);
        let out = t(&mut g, f);
        g.op("et_vk.linear_q4gsw.default", &[y2, w, s, gs, none, out]);
        gate_up.push(out);
    }
    let (sig, silu, sw) = (t(&mut g, f), t(&mut g, f), t(&mut g, f));
    g.op("aten.sigmoid.default", &[gate_up[0], sig])
        .op("aten.mul.Tensor", &[gate_up[0], sig, silu])
        .op("aten.mul.Tensor", &[silu, gate_up[1], sw]);
    let (y3, logits) = (t(&mut g, f), t(&mut g, head));
    let w3 = norm_w(&mut g, f, 212);
    let (wh, sh) = q4(&mut g, head, f);
    g.op("et_vk.rms_norm.default", &[sw, w3, eps, y3])
        .op("et_vk.linear_q4gsw.default", &[y3, wh, sh, gs, none, logits]);
    g.inputs(&[h, r]).outputs(&[sum2, qkv[1], qkv[2], logits]);
    let calls = residual_calls(dtype, k, seqs, 221);
    let kinds = [
        FusionKind::Swiglu,
        FusionKind::Qkv,
        FusionKind::AddNorm,
        FusionKind::AddNorm,
        FusionKind::NormLinear,
        FusionKind::NormLinear,
        FusionKind::NormLinear,
    ];
    let tol = norm_linear_tol(dtype);
    check(name, g, &kinds, &calls, tol);
}

/// A Llama block's norms and float linears: `z = h + r`, its RMS norm into
/// the Q/K/V linears (Q with a bias), `t = z + q` and its norm into the
/// SwiGLU pair. After the linears fuse and the residual adds go into the
/// norms, each norm goes into the fused linear after it: on the decode
/// rows (1 and 3, K a multiple of 4) each pair is one dispatch
/// (`gemv_qkv_norm_vec4.wgsl`, `gemv_swiglu_norm_vec4.wgsl`), on 7 rows the
/// norm and the tiled kernels. Float32 at K = 64 and SmolLM2's 576 (its
/// 1,536-wide SwiGLU; 3 rows of 576 are past the normed kernels' 3,072
/// elements, so the norm's own dispatch), float16 at K = 64; at K = 66 the
/// fused op lowers to the norm and the non-vec4 GEMVs, as unfused. As an
/// fp32 export has them, the linears read the normed rows through views to
/// `[S, K]` (the norm takes the view in), and in a graph without views too.
#[test]
fn rms_norms_go_into_the_float_linears_after_them() {
    norm_float_linears("norm_float_linears", DType::F32, (64, 96), &[1, 3, 7], (true, true));
    norm_float_linears("norm_float_linears_3d", DType::F32, (64, 96), &[1, 3, 7], (false, true));
    norm_float_linears("norm_float_linears_f16", DType::F16, (64, 96), &[1, 3, 7], (true, true));
    norm_float_linears("norm_float_linears_576", DType::F32, (576, 1536), &[1, 3], (true, true));
    norm_float_linears("norm_float_linears_k66", DType::F32, (66, 96), &[1, 3], (true, false));
}

/// [`rms_norms_go_into_the_float_linears_after_them`] at rows of `k` and a
/// SwiGLU of `f`, called with `seqs` rows; `viewed`: the linears read the
/// normed rows through views to `[S, K]` (and the residual add reads Q
/// through a view back); `one_dispatch`: the normed kernels take the
/// one-row call (its fused method then records two dispatches, not the
/// norms' two more).
fn norm_float_linears(
    name: &str,
    dtype: DType,
    (k, f): (u64, u64),
    seqs: &[u64],
    (viewed, one_dispatch): (bool, bool),
) {
    let mut g = GraphBuilder::new();
    let t = |g: &mut GraphBuilder, n: u64| g.tensor(dtype, &[1, 7, n]);
    // A linear's input and output: `[S, N]` with the views, else `[1, S, N]`.
    let lin = |g: &mut GraphBuilder, n: u64| if viewed { g.tensor(dtype, &[7, n]) } else { t(g, n) };
    let (h, r) = (t(&mut g, k), t(&mut g, k));
    let (none, one, eps) = (g.null(), g.int(1), g.double(1e-5));
    let (to_2d, to_3d) = (g.int_list(&[-1, k as i64]), g.int_list(&[1, -1, k as i64]));
    let flat = |g: &mut GraphBuilder, y: ValueId| {
        if !viewed {
            return y;
        }
        let y2 = lin(g, k);
        g.op("aten.view_copy.default", &[y, to_2d, y2]);
        y2
    };
    let mut seed = 300;
    let mut dense = |g: &mut GraphBuilder, shape: &[u64]| {
        seed += 1;
        let n: u64 = shape.iter().product();
        let v: Vec<f32> = data(n as usize, seed).iter().map(|v| v * 0.05).collect();
        g.constant(dtype, shape, &float_bytes(dtype, &v))
    };
    let norm_w = |g: &mut GraphBuilder, n: u64, seed: u32| norm_weight(g, dtype, n, seed);
    let (z, y) = (t(&mut g, k), t(&mut g, k));
    let w1 = norm_w(&mut g, k, 310);
    g.op("aten.add.Tensor", &[h, r, one, z]).op("et_vk.rms_norm.default", &[z, w1, eps, y]);
    let mut qkv = Vec::new();
    for (j, n) in [k, 32, 32].into_iter().enumerate() {
        let w = dense(&mut g, &[n, k]);
        let b = if j == 0 { dense(&mut g, &[n]) } else { none };
        let (x, out) = (flat(&mut g, y), lin(&mut g, n));
        g.op("aten.linear.default", &[x, w, b, out]);
        qkv.push(out);
    }
    let q = if viewed {
        let q3 = t(&mut g, k);
        g.op("aten.view_copy.default", &[qkv[0], to_3d, q3]);
        q3
    } else {
        qkv[0]
    };
    let (sum2, y2) = (t(&mut g, k), t(&mut g, k));
    let w2 = norm_w(&mut g, k, 311);
    g.op("aten.add.Tensor", &[z, q, one, sum2]).op("et_vk.rms_norm.default", &[sum2, w2, eps, y2]);
    let mut gate_up = Vec::new();
    for _ in 0..2 {
        let w = dense(&mut g, &[f, k]);
        let (x, out) = (flat(&mut g, y2), lin(&mut g, f));
        g.op("aten.linear.default", &[x, w, none, out]);
        gate_up.push(out);
    }
    let (sig, silu, sw) = (lin(&mut g, f), lin(&mut g, f), lin(&mut g, f));
    g.op("aten.sigmoid.default", &[gate_up[0], sig])
        .op("aten.mul.Tensor", &[gate_up[0], sig, silu])
        .op("aten.mul.Tensor", &[silu, gate_up[1], sw]);
    g.inputs(&[h, r]).outputs(&[sum2, qkv[1], qkv[2], sw]);
    let calls = residual_calls(dtype, k, seqs, 321);
    let mut kinds = vec![
        FusionKind::Swiglu,
        FusionKind::Qkv,
        FusionKind::AddNorm,
        FusionKind::AddNorm,
        FusionKind::NormLinear,
        FusionKind::NormLinear,
    ];
    if viewed {
        // The views of the QKV's and the SwiGLU's inputs repeat the first.
        kinds.extend([FusionKind::Duplicate; 3]);
        kinds.sort();
    }
    let tol = norm_linear_tol(dtype);
    let p = program(g.clone());
    check(name, g, &kinds, &calls, tol);
    // The one-row call's dispatches: the normed kernels' two, or with the
    // norms apart two more.
    let Some(rt) = crate::runtime() else { return };
    let mut m = rt.load_with(&p, "forward", &LoadOptions::default()).expect("loads");
    m.run(&calls[0]).expect("runs");
    assert_eq!(m.n_dispatches(), if one_dispatch { 2 } else { 4 }, "{name}: dispatches of one row");
}

/// What [`rope_attention`] made: the inputs `[xq, xk, v, pos]`, the
/// attention's output, and values a graph built on it reuses.
struct RopeAttention {
    inputs: [ValueId; 4],
    attn: ValueId,
    one: ValueId,
    seq: ValueId,
    null: ValueId,
}

/// Appends to `g` RoPE of the query and key (tables of unit rotations of
/// angle `t * (j + 1) / 8` at row `t`, `cache` rows, sliced at the
/// position as the Llama export does) and `sdpa_with_kv_cache` over zeroed
/// caches of `cache` rows, for calls of up to `max_s` rows of `hq` query
/// heads over `hkv` kv heads of `d`; `attn` makes the attention's output.
fn rope_attention(
    g: &mut GraphBuilder,
    dtype: DType,
    (hq, hkv, d): (u64, u64, u64),
    cache: u64,
    max_s: u64,
    attn: impl FnOnce(&mut GraphBuilder) -> ValueId,
) -> RopeAttention {
    let xq = g.tensor_staged(dtype, DType::F32, &[1, max_s, hq, d]);
    let xk = g.tensor_staged(dtype, DType::F32, &[1, max_s, hkv, d]);
    let v = g.tensor_staged(dtype, DType::F32, &[1, max_s, hkv, d]);
    let pos = g.tensor_staged(DType::I32, DType::I64, &[1]);
    let table = |f: fn(f32) -> f32| -> Vec<f32> {
        (0..cache).flat_map(|t| (0..d / 2).map(move |j| f((t * (j + 1)) as f32 / 8.0))).collect()
    };
    let cos_t = g.constant(dtype, &[cache, d / 2], &float_bytes(dtype, &table(f32::cos)));
    let sin_t = g.constant(dtype, &[cache, d / 2], &float_bytes(dtype, &table(f32::sin)));
    let elem_bytes = if dtype == DType::F16 { 2 } else { 4 };
    let zeros = vec![0u8; (cache * hkv * d * elem_bytes) as usize];
    let k_cache = g.constant(dtype, &[1, cache, hkv, d], &zeros);
    let v_cache = g.constant(dtype, &[1, cache, hkv, d], &zeros);
    let (q_rot, k_rot) = (g.tensor(dtype, &[1, max_s, hq, d]), g.tensor(dtype, &[1, max_s, hkv, d]));
    let (cos, sin) = (g.tensor(dtype, &[max_s, d / 2]), g.tensor(dtype, &[max_s, d / 2]));
    let rotated = g.value_list(&[q_rot, k_rot]);
    let (zero, one, causal, null) = (g.int(0), g.int(1), g.bool(true), g.null());
    let (start, seq, end) = (g.sym_int(), g.sym_int(), g.sym_int());
    let out = attn(g);
    g.op("et_vk.select_as_symint.default", &[pos, zero, zero, start])
        .op("sym_size.int", &[xq, one, seq])
        .op("add", &[start, seq, end])
        .op("aten.slice_copy.Tensor", &[cos_t, zero, start, end, one, cos])
        .op("aten.slice_copy.Tensor", &[sin_t, zero, start, end, one, sin])
        .op("et_vk.apply_rotary_emb.default", &[xq, xk, cos, sin, rotated])
        .op(
            "sdpa_with_kv_cache.default",
            &[q_rot, k_rot, v, k_cache, v_cache, start, one, null, zero, causal, null, out],
        );
    RopeAttention { inputs: [xq, xk, v, pos], attn: out, one, seq, null }
}

/// RoPE of the query and key that `sdpa_with_kv_cache` reads, its tables
/// sliced at the position as the Llama export does (constant tables of the
/// cache's rows, rows `start .. start + S`): one
/// `etwgpu.sdpa_rope_with_kv_cache` reading the whole tables from `start`
/// (the slices go), whose decode calls (1 and 3 rows, the split-KV route)
/// rotate inside the attention's first kernel, which writes the rotated
/// keys into the cache; a prompt of 5 rows runs the rotation first. The
/// calls run in order on the caches of each method (the later ones attend
/// over the keys the earlier stored), in float32 and float16 (float32 at
/// the method's edges), 4 query heads over 2 kv heads of 16.
#[test]
fn rope_goes_into_the_attention_after_it() {
    for dtype in [DType::F32, DType::F16] {
        let (hq, hkv, d) = (4u64, 2u64, 16u64);
        let mut g = GraphBuilder::new();
        let r =
            rope_attention(&mut g, dtype, (hq, hkv, d), 32, 6, |g| g.tensor_staged(dtype, DType::F32, &[1, 6, hq, d]));
        g.inputs(&r.inputs).outputs(&[r.attn]);
        let calls = rope_attention_calls(&[5, 1, 3, 1], 300, hq, hkv, d);
        let (name, tol) = match dtype {
            DType::F32 => ("rope_attention", 1e-5),
            _ => ("rope_attention_f16", 1e-2),
        };
        // The prompt (call 0) rotates in a dispatch of its own.
        check_saving(name, g, &[FusionKind::RopeAttention], &calls, tol, |k| k > 0);
    }
}

/// The calls of the RoPE-then-attention graphs: for each row count in
/// `rows`, queries `[1, S, hq, d]`, keys and values `[1, S, hkv, d]` (data
/// seeded from `seed`, 10 apart a call) and the position, each call
/// starting where the last ended.
pub(crate) fn rope_attention_calls(rows: &[u64], seed: u32, hq: u64, hkv: u64, d: u64) -> Vec<Vec<Tensor>> {
    let mut at = 0u64;
    rows.iter()
        .enumerate()
        .map(|(i, &s)| {
            let seed = seed + 10 * i as u32;
            let call = vec![
                Tensor::from_f32(&[1, s, hq, d], &data((s * hq * d) as usize, seed)),
                Tensor::from_f32(&[1, s, hkv, d], &data((s * hkv * d) as usize, seed + 1)),
                Tensor::from_f32(&[1, s, hkv, d], &data((s * hkv * d) as usize, seed + 2)),
                crate::llm::int_tensor(DType::I64, &[1], &[at as i64]),
            ];
            at += s;
            call
        })
        .collect()
}

/// The attention of [`rope_goes_into_the_attention_after_it`] viewed to
/// `[1, S, Hq * D]` and read by a 4-bit linear (the O projection, N = 40,
/// K = 64 in groups of 32): one `etwgpu.sdpa_rope_linear_q4gsw`, whose
/// decode calls (1 and 3 rows) run the split partials then the GEMV that
/// merges them (`q4_gemv_attn.wgsl`): two dispatches where the unfused
/// chain runs four (RoPE, partials, combine, GEMV); or, for one row where
/// the device allows it, the whole attention inside the GEMV
/// (`q4_gemv_sdpa.wgsl`): one. A prompt of 130 rows
/// first, so that the decode calls merge several splits (5 at 131 keys in
/// a cache of 160: a batch of four and one more); the prompt runs the
/// attention's steps then the linear's.
/// The graph of [`attention_goes_into_the_4bit_linear_after_it`]: RoPE,
/// `sdpa_with_kv_cache` over a cache of `cache` rows, the view and a 4-bit
/// linear of `n` outputs (K = `hq * d` in groups of 32), for calls of up
/// to `max_s` rows; inputs `[xq, xk, v, pos]`, output the linear's.
pub(crate) fn attention_linear_graph(
    dtype: DType,
    (hq, hkv, d): (u64, u64, u64),
    cache: u64,
    max_s: u64,
    n: u64,
) -> GraphBuilder {
    let k = hq * d;
    let mut g = GraphBuilder::new();
    let r = rope_attention(&mut g, dtype, (hq, hkv, d), cache, max_s, |g| g.tensor(dtype, &[1, max_s, hq, d]));
    let bytes: Vec<u8> = data((n * k / 2) as usize, 401).iter().map(|v| ((v + 2.0) * 63.0) as u8).collect();
    let scales: Vec<f32> = data((k / 32 * n) as usize, 402).iter().map(|v| v * 0.05).collect();
    let w = g.constant(DType::U8, &[n, k / 2], &bytes);
    let s = g.constant(dtype, &[k / 32, n], &float_bytes(dtype, &scales));
    let (gs, k_int) = (g.int(32), g.int(k as i64));
    let (flat, x) = (g.value_list(&[r.one, r.seq, k_int]), g.tensor(dtype, &[1, max_s, k]));
    let out = g.tensor_staged(dtype, DType::F32, &[1, max_s, n]);
    g.op("aten.view_copy.default", &[r.attn, flat, x]).op("et_vk.linear_q4gsw.default", &[x, w, s, gs, r.null, out]);
    g.inputs(&r.inputs).outputs(&[out]);
    g
}

#[test]
fn attention_goes_into_the_4bit_linear_after_it() {
    // Groups of two query heads a kv head at head dim 16, then of four
    // (`q4_gemv_sdpa.wgsl`'s most, where its fourth head's scores and
    // values count) at head dim 32 (where its unrolled key loop runs, a
    // float16 key cache's `vec4`s read in pairs) and 36 (an odd count of
    // `vec4`s a row: the unrolled loop reads them one by one, then the
    // remainder loop runs).
    for ((hq, hkv, d), dtype) in
        [(4u64, 2u64, 16u64), (8, 2, 32), (8, 2, 36)].into_iter().flat_map(|g| [(g, DType::F32), (g, DType::F16)])
    {
        let g = attention_linear_graph(dtype, (hq, hkv, d), 160, 132, 40);
        let calls = rope_attention_calls(&[130, 1, 3, 1], 410, hq, hkv, d);
        let (name, tol) = match dtype {
            DType::F32 => ("attention_linear", 1e-5),
            _ => ("attention_linear_f16", 1e-2),
        };
        // The fusions against the unfused ops at the first geometry (the
        // split route below is what the second's GEMV route is held to).
        if hq == 4 {
            check_saving(
                name,
                g.clone(),
                &[FusionKind::RopeAttention, FusionKind::AttentionLinear],
                &calls,
                tol,
                |k| k > 0,
            );
        }
        // The decode calls on both routes (`q4_gemv_sdpa.wgsl` in the GEMV).
        both_attention_routes(&format!("{name} {hq}/{hkv} heads"), &program(g), &calls, tol);
    }
}

/// [`attention_linear_graph`] with a float O projection (`aten.linear` of
/// `n` outputs with a bias) reading the attention's output through a view
/// to `[1, S, Hq * D]` and, as an fp32 export has it, another to `[S, Hq *
/// D]` (`two_views`; the linear's output is then `[S, N]`).
fn float_attention_linear_graph(
    dtype: DType,
    (hq, hkv, d): (u64, u64, u64),
    (cache, max_s, n): (u64, u64, u64),
    two_views: bool,
) -> GraphBuilder {
    let k = hq * d;
    let mut g = GraphBuilder::new();
    let r = rope_attention(&mut g, dtype, (hq, hkv, d), cache, max_s, |g| g.tensor(dtype, &[1, max_s, hq, d]));
    let weights: Vec<f32> = data((n * k) as usize, 403).iter().map(|v| v * 0.05).collect();
    let w = g.constant(dtype, &[n, k], &float_bytes(dtype, &weights));
    let b = g.constant(dtype, &[n], &float_bytes(dtype, &data(n as usize, 404)));
    let k_int = g.int(k as i64);
    let (flat, x) = (g.value_list(&[r.one, r.seq, k_int]), g.tensor(dtype, &[1, max_s, k]));
    g.op("aten.view_copy.default", &[r.attn, flat, x]);
    let (x, out) = if two_views {
        let (rows, x2) = (g.value_list(&[r.seq, k_int]), g.tensor(dtype, &[max_s, k]));
        g.op("aten.view_copy.default", &[x, rows, x2]);
        (x2, g.tensor_staged(dtype, DType::F32, &[max_s, n]))
    } else {
        (x, g.tensor_staged(dtype, DType::F32, &[1, max_s, n]))
    };
    g.op("aten.linear.default", &[x, w, b, out]);
    g.inputs(&r.inputs).outputs(&[out]);
    g
}

/// The attention and a float O projection after it, through the view an
/// exported attention has and the fp32 export's second one: one
/// `etwgpu.sdpa_rope_linear`, whose decode calls (1 and 3 rows) run the
/// split partials then the GEMV that merges them (`linear_gemv_attn.wgsl`):
/// two dispatches where the unfused chain runs four; or, for one row where
/// the device allows it, the whole attention inside the GEMV
/// (`linear_gemv_sdpa.wgsl`): one. A prompt of 130 rows runs the
/// attention's steps then the linear's. Float32 and float16, two
/// and four query heads a kv head (head dims 16 and 32).
#[test]
fn attention_goes_into_the_float_linear_after_it() {
    for ((hq, hkv, d), two_views) in [((4u64, 2u64, 16u64), true), ((8, 2, 32), false)] {
        for dtype in [DType::F32, DType::F16] {
            let g = float_attention_linear_graph(dtype, (hq, hkv, d), (160, 132, 40), two_views);
            let calls = rope_attention_calls(&[130, 1, 3, 1], 420, hq, hkv, d);
            let (name, tol) = match (dtype, two_views) {
                (DType::F32, true) => ("attention_float_linear", 1e-5),
                (DType::F32, false) => ("attention_float_linear_3d", 1e-5),
                (_, true) => ("attention_float_linear_f16", 1e-2),
                _ => ("attention_float_linear_3d_f16", 1e-2),
            };
            let p = program(g.clone());
            check_saving(name, g, &[FusionKind::RopeAttention, FusionKind::AttentionLinear], &calls, tol, |k| k > 0);
            // The decode calls on both routes (`linear_gemv_sdpa.wgsl` in the GEMV).
            both_attention_routes(name, &p, &calls, tol);
        }
    }
}

/// The calls of an attention fused with the O projection after it, on the
/// split route (the partials and the merging GEMV: two dispatches for each
/// decode call, the calls after the first) and with the whole attention in
/// the GEMV (where the device allows it: one dispatch for one row, the
/// split route's two for three): the two routes agree within `tol`.
fn both_attention_routes(name: &str, p: &Program, calls: &[Vec<Tensor>], tol: f64) {
    let Some(rt) = crate::runtime() else { return };
    let in_gemv = rt.gemm_caps().gemv_attention;
    let load = |on| {
        let options = LoadOptions { gemv_attention: Some(on), ..LoadOptions::default() };
        rt.load_with(p, "forward", &options).expect("loads")
    };
    let (mut split, mut attends) = (load(false), load(true));
    for (k, inputs) in calls.iter().enumerate() {
        let (a, b) = (split.run(inputs).expect("runs"), attends.run(inputs).expect("runs"));
        if k > 0 {
            assert_eq!(split.n_dispatches(), 2, "{name} call {k}: dispatches on the split route");
            let want = if in_gemv && inputs[0].shape[1] == 1 { 1 } else { 2 };
            assert_eq!(attends.n_dispatches(), want, "{name} call {k}: dispatches, attention in the GEMV");
        }
        for (u, v) in a[0].to_f64_vec().iter().zip(b[0].to_f64_vec()) {
            assert!((u - v).abs() <= tol + tol * v.abs(), "{name} call {k}: split {u}, in the GEMV {v}");
        }
    }
}

/// The attention inside the 4-bit GEMV (`q4_gemv_sdpa.wgsl`) at SmolLM2's
/// geometry (9 query heads over 3 kv heads of 64 dims) past one tile of
/// keys: after a prompt of 460 rows, decode calls at 461 to 463 keys walk
/// two tiles (455 keys, then the rest), with the online softmax carried
/// between them; 200 outputs, so four workgroups, each walking the keys
/// from its own place. Float32 over a float32 and a float16 cache, and float16:
/// the outputs agree with the split route's (the fusion test above checks
/// that route against the unfused ops).
#[test]
fn attention_in_the_gemv_walks_several_key_tiles() {
    let Some(rt) = crate::runtime() else { return };
    if !rt.gemm_caps().gemv_attention {
        return;
    }
    let (hq, hkv, d) = (9u64, 3u64, 64u64);
    for (dtype, kv_f16, tol) in [(DType::F32, false, 1e-5), (DType::F32, true, 1e-5), (DType::F16, false, 1e-2)] {
        let p = program(attention_linear_graph(dtype, (hq, hkv, d), 600, 460, 200));
        let mut calls = rope_attention_calls(&[460, 1, 1, 1], 520, hq, hkv, d);
        // The prompt's keys small, so the decode rows' keys in the second
        // tile hold the heads' maxima: the first tile's sums are rescaled.
        let small: Vec<f32> = data((460 * hkv * d) as usize, 521).iter().map(|v| v * 0.05).collect();
        calls[0][1] = Tensor::from_f32(&[1, 460, hkv, d], &small);
        let load = |on| {
            let options = LoadOptions { gemv_attention: Some(on), kv_cache_f16: kv_f16, ..LoadOptions::default() };
            rt.load_with(&p, "forward", &options).expect("loads")
        };
        let (mut split, mut attends) = (load(false), load(true));
        for (k, inputs) in calls.iter().enumerate() {
            let (a, b) = (split.run(inputs).expect("runs"), attends.run(inputs).expect("runs"));
            if k > 0 {
                assert_eq!(attends.n_dispatches(), 1, "{dtype:?} call {k}: one dispatch");
            }
            for (u, v) in a[0].to_f64_vec().iter().zip(b[0].to_f64_vec()) {
                assert!(
                    (u - v).abs() <= tol + tol * v.abs(),
                    "{dtype:?} kv f16 {kv_f16} call {k}: split {u}, in the GEMV {v}"
                );
            }
        }
    }
}

/// `exp(x) + exp(x)`: the second `exp` repeats the first and goes; the
/// sum then reads one value twice and fuses with it.
#[test]
fn duplicate_ops_are_dropped() {
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[2, 9]);
    let (a, b, out, one) =
        (g.tensor(DType::F32, &[2, 9]), g.tensor(DType::F32, &[2, 9]), g.tensor(DType::F32, &[2, 9]), g.int(1));
    g.op("aten.exp.default", &[x, a]).op("aten.exp.default", &[x, b]).op("aten.add.Tensor", &[a, b, one, out]);
    g.inputs(&[x]).outputs(&[out]);
    let calls = vec![vec![Tensor::from_f32(&[2, 9], &data(18, 110))]];
    check("duplicate_ops", g, &[FusionKind::Duplicate, FusionKind::Elementwise], &calls, 1e-6);
}

/// An intermediate read outside the group, or a graph output, stays.
#[test]
fn shared_or_output_intermediates_are_not_fused() {
    let build = |second_reader: bool| {
        let mut g = GraphBuilder::new();
        let x = g.tensor(DType::F32, &[8]);
        let (t, u, v) = (g.tensor(DType::F32, &[8]), g.tensor(DType::F32, &[8]), g.tensor(DType::F32, &[8]));
        g.op("aten.relu.default", &[x, t]).op("aten.neg.default", &[t, u]);
        if second_reader {
            g.op("aten.exp.default", &[t, v]);
            g.inputs(&[x]).outputs(&[u, v]);
        } else {
            g.inputs(&[x]).outputs(&[t, u]);
        }
        program(g)
    };
    for second_reader in [true, false] {
        let p = build(second_reader);
        let f = fused(&p);
        assert!(f.fusions.is_empty(), "{:?}", f.fusions);
        assert_eq!(f.graph.chain, graph(&p).chain);
    }
}

/// Fusion is deterministic, keeps graph inputs, outputs and value ids, and
/// the values it removes are not allocated by the memory planner, whose
/// plan still fits a decode step's lowering.
#[test]
fn fused_fixtures_plan_without_the_removed_intermediates() {
    let p = Program::open(crate::fixtures_dir().join("llama_tiny_fp32/model.pte")).expect("fixture");
    let g = graph(&p);
    let f = fused(&p);
    assert_eq!(f.summary(), fused(&p).summary());
    assert_eq!(etwgpu_graph::describe(&f.graph), etwgpu_graph::describe(&fused(&p).graph));
    assert_eq!((&f.graph.input_ids, &f.graph.output_ids), (&g.input_ids, &g.output_ids));
    assert_eq!(f.graph.values[..g.values.len()], g.values[..]);
    let plain = etwgpu_graph::lower_at_max(g, 0).expect("lowers");
    let lowered = etwgpu_graph::lower_at_max(&f.graph, 0).expect("fused lowers");
    let plan = etwgpu_graph::plan_graph(&f.graph, &lowered.steps, &lowered.nodes, &[]).expect("plans");
    let touched = |steps: &[etwgpu_kernels::Step]| {
        let mut vs = std::collections::BTreeSet::new();
        for s in steps {
            match s {
                etwgpu_kernels::Step::Dispatch(d) => vs.extend(d.inputs.iter().chain(&d.outputs).copied()),
                etwgpu_kernels::Step::Alias { out, src } => vs.extend([*out, *src]),
                etwgpu_kernels::Step::Prepack { out, .. } => {
                    vs.insert(*out);
                }
                _ => {}
            }
        }
        vs
    };
    let removed: Vec<_> = touched(&plain.steps).difference(&touched(&lowered.steps)).copied().collect();
    assert!(removed.len() >= 10, "fusion removes intermediates: {removed:?}");
    for v in removed {
        assert_eq!(plan.placement(v), None, "%{} is removed by fusion but planned", v.0);
    }
    let unfused = etwgpu_graph::plan_graph(g, &plain.steps, &plain.nodes, &[]).expect("plans");
    assert!(plan.naive_bytes < unfused.naive_bytes, "fusion leaves fewer bytes to plan");
    // A decode step (one token at position 5) lowers each norm and the
    // linear after it to one GEMV reading the norm's inputs and writing the
    // linear's outputs; the plan made at the maximum shapes still fits it,
    // so the call keeps its arenas.
    let decode = etwgpu_graph::Lowerer::new(&f.graph)
        .expect("lowerer")
        .lower(
            &f.graph,
            &[
                etwgpu_graph::InputRef { value: f.graph.input_ids[0], shape: Some(&[1, 1]) },
                etwgpu_graph::InputRef { value: f.graph.input_ids[1], shape: Some(&[1]) },
            ],
            |_, _| 5,
        )
        .expect("decode lowers");
    assert!(decode.steps.len() < lowered.steps.len(), "the decode step's GEMVs take the norms in");
    assert!(plan.fits(&decode.steps), "the decode step fits the plan at the maximum shapes");
}

/// Three torchao 8da4w linears of one input, as exported: one
/// `choose_qparams_affine`, then `et_vk.linear_dq8ca_q4gsw` each. Each is
/// split into the rounding of the input (`etwgpu.dq8_rows`) and a 4-bit
/// linear; two roundings repeat the first and go, and the three linears
/// become one QKV op. K = 64 in groups of 32 (the fast 4-bit routes), at
/// 5 rows (GEMM) and 1 (GEMV).
#[test]
fn dq8_linears_share_one_rounding_and_fuse() {
    let k = 64u64;
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, 5, k]);
    let mapping = g.string("ASYMMETRIC");
    let block = g.int_list(&[1, 1, k as i64]);
    let null = g.null();
    let (qmin, qmax, f) = (g.int(-128), g.int(127), g.bool(false));
    let scale = g.tensor(DType::F32, &[1, 5]);
    let zp = g.tensor(DType::I8, &[1, 5]);
    let qparams = g.value_list(&[scale, zp]);
    let gs = g.int(32);
    g.op("torchao.choose_qparams_affine.default", &[x, mapping, block, null, qmin, qmax, null, null, null, f, qparams]);
    let mut outs = Vec::new();
    for (j, n) in [64u64, 32, 32].into_iter().enumerate() {
        let (w, s) = q4_weight(&mut g, n, k, 32, 70 + 2 * j as u32);
        let sums = g.constant(DType::I32, &[k / 32, n], &vec![0u8; (k / 32 * n * 4) as usize]);
        let y = g.tensor(DType::F32, &[1, 5, n]);
        g.op("et_vk.linear_dq8ca_q4gsw.default", &[x, scale, zp, w, sums, s, gs, null, y]);
        outs.push(y);
    }
    g.inputs(&[x]).outputs(&outs);
    let calls: Vec<Vec<Tensor>> =
        [5u64, 1].iter().map(|&s| vec![Tensor::from_f32(&[1, s, k], &data((s * k) as usize, 80))]).collect();
    let kinds = [
        FusionKind::Dq8Split,
        FusionKind::Dq8Split,
        FusionKind::Dq8Split,
        FusionKind::Duplicate,
        FusionKind::Duplicate,
        FusionKind::Qkv,
    ];
    check("dq8_qkv", g, &kinds, &calls, 1e-5);
}
