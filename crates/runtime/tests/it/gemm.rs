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
    // runtime's default) and F16, not at F32; none without matrix units
    // (lavapipe).
    for precision in [None, Some(Precision::F32), Some(Precision::Mixed), Some(Precision::F16)] {
        let coop = rt.gemm_caps().coop_matrix_f16 && precision.unwrap_or(rt.gemm_caps().precision) != Precision::F32;
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
    assert!(!dense_linear(&rt, DType::F32, Precision::Mixed), "mixed keeps dense float32 in float32");
    assert_eq!(dense_linear(&rt, DType::F32, Precision::F16), has, "opt-in f16 operands");
    if rt.features().contains(&"shader-f16") {
        assert_eq!(dense_linear(&rt, DType::F16, Precision::F32), has, "float16 programs use the matrix units");
    }
}

/// The fused 4-bit Q/K/V past the decode rows: one dispatch for the three
/// projections (`q4_gemm_qkv.wgsl` on the tiled route,
/// `q4_gemm_coop_qkv*.wgsl` on the matrix units) on ragged shapes:
/// projections of different widths off any tile edge, rows off the tile
/// edge and just past the GEMV's 4, groups of 32 and 64, the K weight fed
/// as a graph input (row-major) next to constant ones (word-major).
#[test]
fn q4_qkv_prefill_is_one_dispatch_and_matches_the_cpu() {
    let Some(rt) = crate::runtime() else { return };
    let coop = rt.gemm_caps().coop_matrix_f16;
    let tol = if coop { 2e-2 } else { 1e-4 };
    let cases = [(96u64, 32u64, [160u64, 48, 70], [70u64, 5, 33]), (128, 64, [64, 200, 8], [130, 9, 64])];
    for (k, group, ns, rows) in cases {
        let m_max = *rows.iter().max().expect("rows");
        let mut g = GraphBuilder::new();
        let x = g.tensor(DType::F32, &[1, m_max, k]);
        let gs = g.int(group as i64);
        let (mut args, mut outs, mut dequant, mut fed) = (vec![x, gs], Vec::new(), Vec::new(), None);
        for (j, &n) in ns.iter().enumerate() {
            let q = q4(n as usize, k as usize, group as usize, 41 + 2 * j as u32);
            let w_dims = [n, k / 2];
            let w = if j == 1 {
                fed = Some(Tensor::new(DType::U8, w_dims.to_vec(), q.packed.clone()).expect("sizes match"));
                g.tensor(DType::U8, &w_dims)
            } else {
                g.constant(DType::U8, &w_dims, &q.packed)
            };
            args.push(w);
            args.push(g.constant(DType::F32, &[k / group, n], &f32_bytes(&q.scales)));
            outs.push(g.tensor(DType::F32, &[1, m_max, n]));
            dequant.push(q.dequant);
        }
        let list = g.value_list(&outs);
        args.push(list);
        let w_k = args[4];
        g.op("etwgpu.linear_q4gsw_qkv.default", &args).inputs(&[x, w_k]).outputs(&outs);
        let options = LoadOptions { precision: Some(Precision::F16), ..LoadOptions::default() };
        let mut method = rt.load_with(&program(g), "forward", &options).expect("loads");
        method.set_profiling(true);
        for m in rows {
            let xv = data((m * k) as usize, 50 + m as u32);
            let mut inputs = vec![Tensor::from_f32(&[1, m, k], &xv)];
            inputs.extend(fed.clone());
            let got = method.run(&inputs).expect("runs");
            for j in 0..3 {
                let what = format!("qkv K {k} M {m} projection {j}");
                assert_eq!(got[j].shape, [1, m, ns[j]], "{what}");
                assert_close(&f32s(&got[j]), &linear_ref(&xv, &dequant[j], None, k as usize), tol, &what);
            }
            let profile = method.profile();
            let dispatches: usize = profile.iter().map(|p| p.dispatches).sum();
            let kernels: Vec<String> = profile.into_iter().flat_map(|p| p.kernels).collect();
            let want = if coop { "q4_gemm_coop_qkv" } else { "q4_gemm_qkv." };
            assert!(
                dispatches == 1 && kernels.len() == 1 && kernels[0].starts_with(want),
                "K {k} M {m}: one {want}* dispatch, ran {dispatches}: {kernels:?}"
            );
        }
    }
}

/// A 4-bit linear whose output tiles leave most of a GPU idle (70 rows,
/// 96 or 40 outputs) with K = 2048 splits K (`split_k`: 4 slices of 512
/// inputs): the partial sums in the scratch, then their sum and the bias
/// (`gemm_splitk_combine.wgsl`); with and without a bias, at rows off the
/// tile edge and just past the GEMV's 4.
#[test]
fn q4_linear_split_k_matches_the_cpu() {
    let Some(rt) = crate::runtime() else { return };
    let coop = rt.gemm_caps().coop_matrix_f16;
    let tol = if coop { 2e-2 } else { 1e-4 };
    let (m, k, group) = (70u64, 2048u64, 32u64);
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, m, k]);
    let gs = g.int(group as i64);
    let (mut outs, mut refs) = (Vec::new(), Vec::new());
    for (n, with_bias) in [(96u64, true), (40, false)] {
        let q = q4(n as usize, k as usize, group as usize, 70 + n as u32);
        let w = g.constant(DType::U8, &[n, k / 2], &q.packed);
        let s = g.constant(DType::F32, &[k / group, n], &f32_bytes(&q.scales));
        let bias = with_bias.then(|| data(n as usize, 71));
        let b = match &bias {
            Some(b) => g.constant(DType::F32, &[n], &f32_bytes(b)),
            None => g.null(),
        };
        let y = g.tensor(DType::F32, &[1, m, n]);
        g.op("et_vk.linear_q4gsw.default", &[x, w, s, gs, b, y]);
        outs.push(y);
        refs.push((q.dequant, bias));
    }
    g.inputs(&[x]).outputs(&outs);
    let options = LoadOptions { precision: Some(Precision::F16), ..LoadOptions::default() };
    let mut method = rt.load_with(&program(g), "forward", &options).expect("loads");
    method.set_profiling(true);
    for rows in [m, 5, 33] {
        let xv = data((rows * k) as usize, 80 + rows as u32);
        let got = method.run(&[Tensor::from_f32(&[1, rows, k], &xv)]).expect("runs");
        for (j, (w, bias)) in refs.iter().enumerate() {
            let what = format!("split-K linear {j} M {rows}");
            assert_close(&f32s(&got[j]), &linear_ref(&xv, w, bias.as_deref(), k as usize), tol, &what);
        }
        let kernels: Vec<String> = method.profile().into_iter().flat_map(|p| p.kernels).collect();
        let split = if coop { "q4_gemm_coop_splitk." } else { "q4_gemm_splitk." };
        for want in [split, "gemm_splitk_combine."] {
            assert!(kernels.iter().any(|k| k.starts_with(want)), "M {rows}: {want}* ran? {kernels:?}");
        }
    }
}
