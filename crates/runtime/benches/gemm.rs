//! Prefill GEMM throughput, per route: each case runs on a device with the
//! cooperative-matrix routes where the adapter has them (`coop`) and on one
//! with them off (`tiled`, the portable kernels), so the two figures sit
//! side by side. Cases: dense f16 and f32 `aten.linear` and the 4-bit linears of the
//! Llama-3.2-1B shapes (q/o projection 2048 -> 2048, the fused gate/up
//! SwiGLU 2048 -> 2 x 8192, down projection 8192 -> 2048) over float32
//! activations at 512 and 2048 rows (loaded with `Precision::F16` on the
//! `coop` device, so they take the matrix units; float32 on `tiled`).
//!
//! Timing: one iteration is one run of a method holding `REPEATS` copies
//! of the op (same input, each its own output, only the last read back,
//! loaded without fusion so none is dropped); the time reported is the sum
//! of those dispatches' GPU timestamps (the run's upload and read-back are
//! not counted), and the throughput counts 2·M·N·K floating-point
//! operations per op (SwiGLU: both products), so criterion's elem/s is
//! FLOP/s. A one-line TFLOP/s summary per case follows criterion's output.
//!
//! Convolutions as implicit GEMMs (`conv ...` cases): the 3x3 layers of a
//! ResNet-18 at 224x224 (64 channels at 56x56 to 512 at 7x7, stride 1,
//! padding 1, with bias) and its 7x7 stride-2 stem, at batch 1 and 8, each
//! on the direct kernel (`direct`, `conv.wgsl`) and the implicit GEMM
//! (`gemm`, `conv_gemm.wgsl`), float32, and where the adapter has
//! cooperative matrices the implicit GEMM on them (`coop`,
//! `conv_gemm_coop.wgsl`, f16 operands: `Precision::F16`); throughput
//! 2·N·OH·OW·OC·C·KH·KW.
//!
//! Without `ETWGPU_BENCH_LARGE=1` only small shapes run (lavapipe);
//! without an adapter nothing is measured. `ETWGPU_BENCH_ONLY=TEXT` keeps
//! the cells whose name (`conv 3x3/1 64->64 56x56 batch 1 gemm`) contains
//! TEXT: unlike criterion's filter, which only skips the timing, the other
//! cells are then not loaded or run at all (on lavapipe the large linears'
//! warm-up runs alone take minutes).

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
use etwgpu_format::{DType, Program};
use etwgpu_runtime::{ConvKernels, LoadOptions, LoadedMethod, Precision, Runtime, RuntimeOptions, Tensor};

/// Copies of the op per run.
const REPEATS: usize = 8;

/// One case: a graph builder for `REPEATS` ops, its FLOPs per op.
struct Case {
    name: String,
    flops: u64,
    build: Box<dyn Fn() -> (GraphBuilder, Vec<Tensor>)>,
}

fn bytes_f32(n: u64, scale: f32) -> Vec<u8> {
    (0..n).flat_map(|i| ((i % 13) as f32 * scale - 6.0 * scale).to_le_bytes()).collect()
}

fn bytes_f16(n: u64, scale: f32) -> Vec<u8> {
    (0..n).flat_map(|i| half::f16::from_f32((i % 13) as f32 * scale - 6.0 * scale).to_le_bytes()).collect()
}

/// `REPEATS` dense linears `[m, k] x [n, k]^T` over `dtype` (float16: the
/// direct cooperative-matrix kernel; float32: the staged one, at precision
/// F16).
fn dense(dtype: DType, m: u64, n: u64, k: u64) -> Case {
    let bytes = move |n: u64, scale: f32| if dtype == DType::F16 { bytes_f16(n, scale) } else { bytes_f32(n, scale) };
    Case {
        name: format!("linear {dtype} {m}x{n}x{k}"),
        flops: 2 * m * n * k,
        build: Box::new(move || {
            let mut g = GraphBuilder::new();
            let x = g.tensor(dtype, &[m, k]);
            let none = g.null();
            let mut last = x;
            for r in 0..REPEATS {
                let w = g.constant(dtype, &[n, k], &bytes(n * k, 0.01 + r as f32 * 1e-3));
                last = g.tensor(dtype, &[m, n]);
                g.op("aten.linear.default", &[x, w, none, last]);
            }
            g.inputs(&[x]).outputs(&[last]);
            let input = Tensor::new(dtype, vec![m, k], bytes(m * k, 0.05)).expect("valid");
            (g, vec![input])
        }),
    }
}

/// `REPEATS` 4-bit linears (groups of 32) of float32 activations `[1, m,
/// k]`, or their fused SwiGLU pairs.
fn q4(m: u64, n: u64, k: u64, swiglu: bool) -> Case {
    let kind = if swiglu { "q4 swiglu" } else { "q4 linear" };
    Case {
        name: format!("{kind} {m}x{n}x{k}"),
        flops: 2 * m * n * k * if swiglu { 2 } else { 1 },
        build: Box::new(move || {
            let mut g = GraphBuilder::new();
            let x = g.tensor(DType::F32, &[1, m, k]);
            let (gs, none) = (g.int(32), g.null());
            let weight = |g: &mut GraphBuilder, r: usize| {
                let packed: Vec<u8> =
                    (0..n * k / 2).map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8 ^ r as u8).collect();
                let w = g.constant(DType::U8, &[n, k / 2], &packed);
                let s = g.constant(DType::F32, &[k / 32, n], &bytes_f32(k / 32 * n, 1e-3));
                (w, s)
            };
            let mut last = x;
            for r in 0..REPEATS {
                last = g.tensor(DType::F32, &[1, m, n]);
                let (w, s) = weight(&mut g, r);
                if swiglu {
                    let (wu, su) = weight(&mut g, r + 100);
                    g.op("etwgpu.linear_q4gsw_swiglu.default", &[x, gs, w, s, wu, su, last]);
                } else {
                    g.op("et_vk.linear_q4gsw.default", &[x, w, s, gs, none, last]);
                }
            }
            g.inputs(&[x]).outputs(&[last]);
            let input = Tensor::new(DType::F32, vec![1, m, k], bytes_f32(m * k, 0.05)).expect("valid");
            (g, vec![input])
        }),
    }
}

/// `REPEATS` convolutions `[n, c, hw, hw] * [oc, c, k, k]` with bias,
/// stride `stride`, padding `k / 2`.
fn conv(n: u64, c: u64, oc: u64, hw: u64, k: u64, stride: u64) -> Case {
    let o = (hw + 2 * (k / 2) - k) / stride + 1;
    Case {
        name: format!("conv {k}x{k}/{stride} {c}->{oc} {hw}x{hw} batch {n}"),
        flops: 2 * n * o * o * oc * c * k * k,
        build: Box::new(move || {
            let mut g = GraphBuilder::new();
            let x = g.tensor(DType::F32, &[n, c, hw, hw]);
            let (s, p, d) = (g.int_list(&[stride as i64; 2]), g.int_list(&[(k / 2) as i64; 2]), g.int_list(&[1, 1]));
            let (f, op, groups) = (g.bool(false), g.int_list(&[0, 0]), g.int(1));
            let mut last = x;
            for r in 0..REPEATS {
                let w = g.constant(DType::F32, &[oc, c, k, k], &bytes_f32(oc * c * k * k, 0.01 + r as f32 * 1e-3));
                let b = g.constant(DType::F32, &[oc], &bytes_f32(oc, 0.1));
                last = g.tensor(DType::F32, &[n, oc, o, o]);
                g.op("aten.convolution.default", &[x, w, b, s, p, d, f, op, groups, last]);
            }
            g.inputs(&[x]).outputs(&[last]);
            let input = Tensor::new(DType::F32, vec![n, c, hw, hw], bytes_f32(n * c * hw * hw, 0.05)).expect("valid");
            (g, vec![input])
        }),
    }
}

fn conv_cases() -> Vec<Case> {
    if std::env::var("ETWGPU_BENCH_LARGE").as_deref() != Ok("1") {
        return vec![conv(1, 16, 32, 16, 3, 1)];
    }
    let mut out = Vec::new();
    for n in [1, 8] {
        out.push(conv(n, 3, 64, 224, 7, 2));
        for (c, hw) in [(64, 56), (128, 28), (256, 14), (512, 7)] {
            out.push(conv(n, c, c, hw, 3, 1));
        }
    }
    out
}

fn cases() -> Vec<Case> {
    if std::env::var("ETWGPU_BENCH_LARGE").as_deref() != Ok("1") {
        return vec![dense(DType::F16, 128, 128, 128), q4(64, 128, 128, false), q4(64, 128, 128, true)];
    }
    let mut out = vec![dense(DType::F16, 4096, 4096, 4096), dense(DType::F32, 4096, 4096, 4096)];
    for m in [512, 2048] {
        out.extend([q4(m, 2048, 2048, false), q4(m, 8192, 2048, true), q4(m, 2048, 8192, false)]);
    }
    out
}

/// Whether the cell `name` (case and label) is kept by `ETWGPU_BENCH_ONLY`.
fn wanted(name: &str) -> bool {
    std::env::var("ETWGPU_BENCH_ONLY").map_or(true, |only| name.contains(&only))
}

/// GPU nanoseconds of the last run's dispatches.
fn gpu_nanos(method: &LoadedMethod) -> f64 {
    method.profile().iter().map(|p| p.nanos).sum()
}

/// Loads `g` without fusion; float32 programs at `precision`.
fn load(rt: &Runtime, g: GraphBuilder, precision: Precision) -> LoadedMethod {
    let program = Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("crafted program parses");
    let options = LoadOptions { fuse: false, precision: Some(precision), ..LoadOptions::default() };
    let mut method = rt.load_with(&program, "forward", &options).expect("loads");
    method.set_profiling(true);
    method
}

/// Times `case` (loaded as `method`) on the GPU; its summary line.
fn time_case(c: &mut Criterion, method: &mut LoadedMethod, inputs: &[Tensor], case: &Case, label: &str) -> String {
    method.run(inputs).expect("warm-up run");
    let mut group = c.benchmark_group("gemm");
    group.sample_size(10).warm_up_time(Duration::from_millis(200)).measurement_time(Duration::from_secs(1));
    group.throughput(Throughput::Elements(case.flops * REPEATS as u64));
    let mut best = f64::INFINITY;
    group.bench_function(format!("{} {label}", case.name), |b| {
        b.iter_custom(|iters| {
            let mut total = 0.0;
            for _ in 0..iters {
                method.run(inputs).expect("runs");
                let t = gpu_nanos(method);
                best = best.min(t);
                total += t;
            }
            Duration::from_nanos(total as u64)
        })
    });
    group.finish();
    let tflops = (case.flops * REPEATS as u64) as f64 / best / 1e3;
    let us = best / REPEATS as f64 / 1e3;
    let line = format!("{:<40} {label:<6} {tflops:9.3} TFLOP/s {us:9.1} us an op (best run)", case.name);
    eprintln!("{line}");
    line
}

fn bench(c: &mut Criterion) {
    let runtimes: Vec<(&str, Runtime)> = [("coop", None), ("tiled", Some(false))]
        .into_iter()
        .filter_map(|(label, coop_matrix)| {
            match Runtime::with_options(&RuntimeOptions {
                coop_matrix,
                ..RuntimeOptions::from_env().expect("ETWGPU_PRECISION names a precision")
            }) {
                Ok(rt) => Some((label, rt)),
                Err(e) => {
                    eprintln!("no GPU for the {label} route, skipping: {e}");
                    None
                }
            }
        })
        .collect();
    let mut summary = Vec::new();
    // The float32 convolution kernels on the device without the matrix
    // units, and the implicit GEMM on them (f16 operands) where there are.
    let tiled = runtimes.last().map(|(_, rt)| rt);
    let coop = runtimes.iter().find(|(label, rt)| *label == "coop" && rt.gemm_caps().coop_matrix_f16).map(|(_, rt)| rt);
    let conv_routes = [
        ("direct", ConvKernels::Direct, Precision::F32, tiled),
        ("gemm", ConvKernels::Gemm, Precision::F32, tiled),
        ("coop", ConvKernels::Gemm, Precision::F16, coop),
    ];
    for case in conv_cases() {
        for (label, kernels, precision, rt) in conv_routes {
            let Some(rt) = rt.filter(|_| wanted(&format!("{} {label}", case.name))) else { continue };
            let (g, inputs) = (case.build)();
            let program =
                Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("crafted program parses");
            let options =
                LoadOptions { fuse: false, conv: Some(kernels), precision: Some(precision), ..LoadOptions::default() };
            let mut method = rt.load_with(&program, "forward", &options).expect("loads");
            method.set_profiling(true);
            summary.push(time_case(c, &mut method, &inputs, &case, label));
        }
    }
    for case in cases() {
        for (label, rt) in &runtimes {
            if (*label == "coop" && !rt.gemm_caps().coop_matrix_f16) || !wanted(&format!("{} {label}", case.name)) {
                continue;
            }
            let (g, inputs) = (case.build)();
            // The coop route rounds float32 activations to f16 (opt-in); the
            // tiled one keeps them float32.
            let precision = if *label == "coop" { Precision::F16 } else { Precision::F32 };
            let mut method = load(rt, g, precision);
            summary.push(time_case(c, &mut method, &inputs, &case, label));
        }
    }
    eprintln!(
        "GEMM summary ({}):",
        runtimes.first().map_or("no adapter".into(), |(_, rt)| rt.adapter_info().name.clone())
    );
    for line in summary {
        eprintln!("  {line}");
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
