//! The prefill GEMM routes against CPU references: 4-bit linears (with a
//! bias, and the fused SwiGLU pair) and dense linears, at shapes whose
//! edges cut through the output tiles. Whichever route the device takes
//! runs (`Runtime::gemm_route`): the tiled kernels on lavapipe, the
//! cooperative-matrix kernels where the adapter has them
//! (`ETWGPU_COOP_MATRIX=1` requires them, `0` turns them off); the profile
//! shows that the route's kernels ran.
//!
//! Tolerances (absolute plus relative): float32 on the tiled route 1e-4
//! (summation order only); f16 operands (the cooperative-matrix route, and
//! float16 programs anywhere) 2e-2. Each product runs at the precisions
//! that route it differently (`Precision`: f32, mixed the default, f16);
//! on lavapipe, which has no matrix units, all take the tiled route.

use etwgpu_format::DType;
use etwgpu_format::Program;
use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
use etwgpu_runtime::Precision;
use etwgpu_runtime::{LoadOptions, LoadedMethod, Runtime, Tensor};

use crate::{data, f32s};

fn program(g: GraphBuilder) -> Program {
    Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("crafted program parses")
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f16_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect()
}

fn round_f16(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect()
}

/// Whether the route's kernels ran: the cooperative-matrix ones on a
/// device that has them, none of them elsewhere.
fn check_route(rt: &Runtime, method: &LoadedMethod, coop_expected: bool, what: &str) {
    let kernels: Vec<String> = method.profile().into_iter().flat_map(|p| p.kernels).collect();
    let coop = kernels.iter().any(|k| k.contains("_coop"));
    assert_eq!(coop, coop_expected, "{what}: route {}, kernels {kernels:?}", rt.gemm_route());
}

fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol + tol * w.abs(), "{what}[{i}]: got {g}, want {w} (tolerance {tol})");
    }
}

/// A packed 4-bit weight `[n, k/2]`, its `[k/group, n]` scales, and the
/// dequantized `[n, k]` weights.
struct Q4 {
    packed: Vec<u8>,
    scales: Vec<f32>,
    dequant: Vec<f32>,
}

fn q4(n: usize, k: usize, group: usize, seed: u32) -> Q4 {
    let packed: Vec<u8> = data(n * k / 2, seed).iter().map(|v| ((v + 2.0) * 63.0) as u8).collect();
    let scales: Vec<f32> = data(k / group * n, seed + 1).iter().map(|v| v * 0.05).collect();
    let dequant = (0..n * k)
        .map(|i| {
            let (r, c) = (i / k, i % k);
            let nib = (packed[r * k / 2 + c / 2] >> (4 * (c % 2))) & 15;
            (f32::from(nib) - 8.0) * scales[(c / group) * n + r]
        })
        .collect();
    Q4 { packed, scales, dequant }
}

/// `x [m, k] @ w [n, k]^T + bias`.
fn linear_ref(x: &[f32], w: &[f32], bias: Option<&[f32]>, k: usize) -> Vec<f32> {
    let (m, n) = (x.len() / k, w.len() / k);
    (0..m * n)
        .map(|i| {
            let (r, c) = (i / n, i % n);
            let dot: f32 = (0..k).map(|j| x[r * k + j] * w[c * k + j]).sum();
            dot + bias.map_or(0.0, |b| b[c])
        })
        .collect()
}

#[test]
fn q4_linear_and_swiglu_prefill_match_the_cpu() {
    let (m, n, k, group) = (70u64, 160u64, 128u64, 32u64);
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, m, k]);
    let gs = g.int(group as i64);
    let lin = q4(n as usize, k as usize, group as usize, 11);
    let bias = data(n as usize, 12);
    let w = g.constant(DType::U8, &[n, k / 2], &lin.packed);
    let s = g.constant(DType::F32, &[k / group, n], &f32_bytes(&lin.scales));
    let b = g.constant(DType::F32, &[n], &f32_bytes(&bias));
    let y = g.tensor(DType::F32, &[1, m, n]);
    g.op("et_vk.linear_q4gsw.default", &[x, w, s, gs, b, y]);
    // SwiGLU of two bias-free 4-bit linears: fused into one kernel.
    let (gate, up) = (q4(n as usize, k as usize, group as usize, 13), q4(n as usize, k as usize, group as usize, 15));
    let mut ys = Vec::new();
    for q in [&gate, &up] {
        let w = g.constant(DType::U8, &[n, k / 2], &q.packed);
        let s = g.constant(DType::F32, &[k / group, n], &f32_bytes(&q.scales));
        let none = g.null();
        let t = g.tensor(DType::F32, &[1, m, n]);
        g.op("et_vk.linear_q4gsw.default", &[x, w, s, gs, none, t]);
        ys.push(t);
    }
    let (sg, a, out) =
        (g.tensor(DType::F32, &[1, m, n]), g.tensor(DType::F32, &[1, m, n]), g.tensor(DType::F32, &[1, m, n]));
    g.op("aten.sigmoid.default", &[ys[0], sg])
        .op("aten.mul.Tensor", &[ys[0], sg, a])
        .op("aten.mul.Tensor", &[a, ys[1], out]);
    g.inputs(&[x]).outputs(&[y, out]);
    let Some(rt) = crate::runtime() else { return };
    let program = program(g);
    // Float32 activations: the matrix units at precision mixed (the
    // default) and F16, not at F32; none without matrix units (lavapipe).
    for precision in [None, Some(Precision::F32), Some(Precision::Mixed), Some(Precision::F16)] {
        let coop = rt.gemm_caps().coop_matrix_f16 && precision.unwrap_or(Precision::Mixed) != Precision::F32;
        let tol = if coop { 2e-2 } else { 1e-4 };
        let options = LoadOptions { precision, ..LoadOptions::default() };
        let mut method = rt.load_with(&program, "forward", &options).expect("loads");
        method.set_profiling(true);
        for rows in [m, 33] {
            let xv = data((rows * k) as usize, 20 + rows as u32);
            let outs = method.run(&[Tensor::from_f32(&[1, rows, k], &xv)]).expect("runs");
            let k = k as usize;
            let what = |op| format!("{op} at precision {precision:?}");
            let want = linear_ref(&xv, &lin.dequant, Some(&bias), k);
            assert_close(&f32s(&outs[0]), &want, tol, &what("linear_q4gsw"));
            let (gv, uv) = (linear_ref(&xv, &gate.dequant, None, k), linear_ref(&xv, &up.dequant, None, k));
            let want: Vec<f32> = gv.iter().zip(&uv).map(|(g, u)| g / (1.0 + (-g).exp()) * u).collect();
            assert_close(&f32s(&outs[1]), &want, tol, &what("swiglu"));
            check_route(&rt, &method, coop, &what("4-bit prefill"));
        }
    }
}

/// A dense `aten.linear` with a bias over `dtype` operands, loaded with
/// `precision`; returns whether the cooperative-matrix route ran.
fn dense_linear(rt: &Runtime, dtype: DType, precision: Precision) -> bool {
    let (m, n, k) = (70u64, 160u64, 64u64);
    let f16 = dtype == DType::F16;
    let bytes = |v: &[f32]| if f16 { f16_bytes(v) } else { f32_bytes(v) };
    let round = |v: Vec<f32>| if f16 { round_f16(&v) } else { v };
    let wv = round(data((n * k) as usize, 31).iter().map(|v| v * 0.25).collect());
    let bv = round(data(n as usize, 32));
    let mut g = GraphBuilder::new();
    let x = g.tensor(dtype, &[m, k]);
    let w = g.constant(dtype, &[n, k], &bytes(&wv));
    let b = g.constant(dtype, &[n], &bytes(&bv));
    let y = g.tensor(dtype, &[m, n]);
    g.op("aten.linear.default", &[x, w, b, y]);
    g.inputs(&[x]).outputs(&[y]);
    let options = LoadOptions { precision: Some(precision), ..LoadOptions::default() };
    let mut method = rt.load_with(&program(g), "forward", &options).expect("loads");
    method.set_profiling(true);
    let xv = round(data((m * k) as usize, 33));
    let input = Tensor::new(dtype, vec![m, k], bytes(&xv)).expect("valid");
    let outs = method.run(&[input]).expect("runs");
    // Dense float32 products take f16 operands only at F16 (not at the
    // default, mixed); float16 programs at every precision.
    let coop = rt.gemm_caps().coop_matrix_f16 && (f16 || precision == Precision::F16);
    let tol = if coop || f16 { 2e-2 } else { 1e-4 };
    assert_close(&f32s(&outs[0]), &linear_ref(&xv, &wv, Some(&bv), k as usize), tol, "dense linear");
    check_route(rt, &method, coop, "dense linear");
    coop
}

#[test]
fn dense_linear_prefill_matches_the_cpu_at_each_precision() {
    let Some(rt) = crate::runtime() else { return };
    let has = rt.gemm_caps().coop_matrix_f16;
    assert!(!dense_linear(&rt, DType::F32, Precision::F32), "float32 everywhere");
    assert!(!dense_linear(&rt, DType::F32, Precision::Mixed), "the default keeps dense float32 in float32");
    assert_eq!(dense_linear(&rt, DType::F32, Precision::F16), has, "opt-in f16 operands");
    if rt.features().contains(&"shader-f16") {
        assert_eq!(dense_linear(&rt, DType::F16, Precision::F32), has, "float16 programs use the matrix units");
    }
}
