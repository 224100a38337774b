//! 2-D (and 1-D) convolutions on both kernels against an f64 reference:
//! the implicit GEMM (`conv_gemm.wgsl`, forced by `ConvKernels::Gemm`) and
//! the direct kernel (`conv.wgsl`, `ConvKernels::Direct`), over shapes
//! that cut through the GEMM's 64 x 64 tiles and its 16-input steps:
//! 1x1, 3x3, 7x7 and 1x5 windows, strides 1 to 3, padding, dilation,
//! channels off the tile edges, batches past 1; with a bias, a clamp
//! (`conv_with_clamp`) and a fused activation (a ReLU after the
//! convolution); with K long over few tiles, the split-K form and its
//! combine pass (float32). The profile shows which kernels ran, and the
//! default setting (`auto`) is checked to route by size. On a device with
//! cooperative matrices, float16 programs and float32 ones at
//! `--precision f16` take the implicit GEMM on them
//! (`conv_gemm_coop.wgsl`) instead of `conv_gemm.wgsl`, over the same
//! cases (on lavapipe, which has none, the route is checked on the host).
//!
//! Tolerance (absolute plus relative): float32 1e-4 (summation order only:
//! at most 2,700 products of values under 1 per output); float16 programs
//! 1e-2 of the output's scale (inputs and outputs rounded to f16, the
//! sums in f32 on both kernels); float32 programs at f16 operands on the
//! matrix units 1e-2 of the output's scale.

use etwgpu_format::DType;
use etwgpu_format::Program;
use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
use etwgpu_runtime::{ConvKernels, LoadOptions, Precision, Runtime, Tensor};

use crate::{data, f32s};

/// One convolution: input `[n, c, h, w]` (rank 3 `[n, c, w]` when `h` is
/// `None`), `oc` output channels, window `kh x kw`, per-dim stride,
/// padding and dilation.
#[derive(Clone, Copy, Debug)]
struct Case {
    n: usize,
    c: usize,
    h: Option<usize>,
    w: usize,
    oc: usize,
    k: [usize; 2],
    stride: [usize; 2],
    pad: [usize; 2],
    dil: [usize; 2],
    bias: bool,
    /// `conv_with_clamp`'s bounds (else `aten.convolution`).
    clamp: Option<(f64, f64)>,
    /// A ReLU after the convolution (fused into its epilogue).
    relu: bool,
}

impl Case {
    fn h(&self) -> usize {
        self.h.unwrap_or(1)
    }

    fn out_hw(&self) -> [usize; 2] {
        let len =
            |size: usize, i: usize| (size + 2 * self.pad[i] - self.dil[i] * (self.k[i] - 1) - 1) / self.stride[i] + 1;
        [len(self.h(), 0), len(self.w, 1)]
    }

    fn in_shape(&self) -> Vec<u64> {
        let (n, c, w) = (self.n as u64, self.c as u64, self.w as u64);
        match self.h {
            Some(h) => vec![n, c, h as u64, w],
            None => vec![n, c, w],
        }
    }

    fn out_shape(&self) -> Vec<u64> {
        let [oh, ow] = self.out_hw();
        let (n, oc) = (self.n as u64, self.oc as u64);
        if self.h.is_some() { vec![n, oc, oh as u64, ow as u64] } else { vec![n, oc, ow as u64] }
    }

    fn w_shape(&self) -> Vec<u64> {
        let (oc, c) = (self.oc as u64, self.c as u64);
        if self.h.is_some() { vec![oc, c, self.k[0] as u64, self.k[1] as u64] } else { vec![oc, c, self.k[1] as u64] }
    }

    /// The f64 reference of the whole case (bias, clamp, ReLU).
    fn reference(&self, x: &[f32], wt: &[f32], bias: &[f32]) -> Vec<f32> {
        let [oh, ow] = self.out_hw();
        let (h, w, [kh, kw]) = (self.h(), self.w, self.k);
        let mut out = Vec::with_capacity(self.n * self.oc * oh * ow);
        for n in 0..self.n {
            for (o, &b) in bias.iter().enumerate().take(self.oc) {
                for y in 0..oh {
                    for xx in 0..ow {
                        let mut acc = if self.bias { f64::from(b) } else { 0.0 };
                        for c in 0..self.c {
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let iy = (y * self.stride[0] + ky * self.dil[0]) as isize - self.pad[0] as isize;
                                    let ix = (xx * self.stride[1] + kx * self.dil[1]) as isize - self.pad[1] as isize;
                                    if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                        continue;
                                    }
                                    let xi = ((n * self.c + c) * h + iy as usize) * w + ix as usize;
                                    let wi = ((o * self.c + c) * kh + ky) * kw + kx;
                                    acc += f64::from(x[xi]) * f64::from(wt[wi]);
                                }
                            }
                        }
                        if let Some((lo, hi)) = self.clamp {
                            acc = acc.clamp(lo, hi);
                        }
                        if self.relu {
                            acc = acc.max(0.0);
                        }
                        out.push(acc as f32);
                    }
                }
            }
        }
        out
    }
}

fn bytes(v: &[f32], dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F16 => v.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect(),
        _ => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

fn round(v: Vec<f32>, dtype: DType) -> Vec<f32> {
    match dtype {
        DType::F16 => v.into_iter().map(|x| half::f16::from_f32(x).to_f32()).collect(),
        _ => v,
    }
}

/// The case's program (weights and bias constant) and its data.
fn program(case: &Case, dtype: DType, seed: u32) -> (Program, Vec<f32>, Vec<f32>, Vec<f32>) {
    let numel = |s: &[u64]| s.iter().product::<u64>() as usize;
    let wv = round(data(numel(&case.w_shape()), seed).iter().map(|v| v * 0.2).collect(), dtype);
    let bv = round(data(case.oc, seed + 1), dtype);
    let xv = round(data(numel(&case.in_shape()), seed + 2).iter().map(|v| v * 0.4).collect(), dtype);
    let mut g = GraphBuilder::new();
    let x = g.tensor(dtype, &case.in_shape());
    let w = g.constant(dtype, &case.w_shape(), &bytes(&wv, dtype));
    let b = if case.bias { g.constant(dtype, &[case.oc as u64], &bytes(&bv, dtype)) } else { g.null() };
    let one_d = case.h.is_none();
    let list = |g: &mut GraphBuilder, v: [usize; 2]| {
        if one_d { g.int_list(&[v[1] as i64]) } else { g.int_list(&[v[0] as i64, v[1] as i64]) }
    };
    let (s, p, d) = (list(&mut g, case.stride), list(&mut g, case.pad), list(&mut g, case.dil));
    let op = list(&mut g, [0, 0]);
    let (f, groups) = (g.bool(false), g.int(1));
    let conv = g.tensor(dtype, &case.out_shape());
    match case.clamp {
        Some((lo, hi)) => {
            let (lo, hi) = (g.double(lo), g.double(hi));
            g.op("et_vk.conv_with_clamp.default", &[x, w, b, s, p, d, f, op, groups, lo, hi, conv])
        }
        None => g.op("aten.convolution.default", &[x, w, b, s, p, d, f, op, groups, conv]),
    };
    let out = if case.relu {
        let y = g.tensor(dtype, &case.out_shape());
        g.op("aten.relu.default", &[conv, y]);
        y
    } else {
        conv
    };
    g.inputs(&[x]).outputs(&[out]);
    let program = Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("crafted program parses");
    (program, xv, wv, bv)
}

/// Runs `case` with `kernels` at `precision`, checking that the kernel
/// they name ran (the implicit GEMM on cooperative matrices where the
/// device has them and the operands may be f16); returns its output, the
/// reference and whether the implicit GEMM split K (its combine pass ran).
fn run(
    rt: &Runtime,
    case: &Case,
    dtype: DType,
    kernels: ConvKernels,
    precision: Precision,
    seed: u32,
) -> (Vec<f32>, Vec<f32>, bool) {
    let (program, xv, wv, bv) = program(case, dtype, seed);
    let options = LoadOptions { conv: Some(kernels), precision: Some(precision), ..LoadOptions::default() };
    let mut method = rt.load_with(&program, "forward", &options).expect("loads");
    method.set_profiling(true);
    let input = Tensor::new(dtype, case.in_shape(), bytes(&xv, dtype)).expect("valid");
    let outs = method.run(&[input]).expect("runs");
    assert_eq!(outs[0].shape, case.out_shape(), "{case:?}");
    let kernels_ran: Vec<String> = method.profile().into_iter().flat_map(|p| p.kernels).collect();
    let ran = |prefix: &str| kernels_ran.iter().any(|k| k.starts_with(prefix));
    let gemm = kernels != ConvKernels::Direct;
    let coop = gemm && on_matrix_units(rt, dtype, precision);
    assert_eq!(
        (ran("conv_gemm."), ran("conv_gemm_coop."), ran("conv.")),
        (gemm && !coop, coop, !gemm),
        "{kernels:?} {case:?}: kernels {kernels_ran:?}"
    );
    (f32s(&outs[0]), case.reference(&xv, &wv, &bv), ran("conv_gemm_combine."))
}

/// Whether an implicit GEMM of `dtype` at `precision` runs on the matrix
/// units here (`conv_gemm_coop.wgsl`).
fn on_matrix_units(rt: &Runtime, dtype: DType, precision: Precision) -> bool {
    rt.gemm_caps().coop_matrix_f16 && (dtype == DType::F16 || precision == Precision::F16)
}

fn assert_close(got: &[f32], want: &[f32], atol: f32, rtol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= atol + rtol * w.abs(), "{what}[{i}]: got {g}, want {w}");
    }
}

const fn case(n: usize, c: usize, h: Option<usize>, w: usize, oc: usize, k: [usize; 2]) -> Case {
    Case { n, c, h, w, oc, k, stride: [1, 1], pad: [0, 0], dil: [1, 1], bias: false, clamp: None, relu: false }
}

/// The awkward shapes: every one has channels or pixels off the GEMM's
/// tile edges, and inputs per output off its 16-input step.
fn cases() -> Vec<Case> {
    vec![
        // 1x1, bias, batch 2: K = 5 (one partial step), 84 pixels.
        Case { bias: true, ..case(2, 5, Some(7), 6, 20, [1, 1]) },
        // 3x3 stride 2 padding 1, 70 channels (two column tiles), batch 3.
        Case { stride: [2, 2], pad: [1, 1], bias: true, ..case(3, 7, Some(11), 9, 70, [3, 3]) },
        // A ResNet stem in small: 7x7 stride 2 padding 3, ReLU fused.
        Case { stride: [2, 2], pad: [3, 3], bias: true, relu: true, ..case(1, 3, Some(23), 21, 17, [7, 7]) },
        // 3x3 dilation 2, padding (1, 2), stride (2, 1), clamped.
        Case {
            stride: [2, 1],
            pad: [1, 2],
            dil: [2, 2],
            clamp: Some((-0.5, 0.75)),
            ..case(2, 19, Some(10), 13, 33, [3, 3])
        },
        // 1-D: window 5, stride 3, padding 2, dilation 2, bias and ReLU.
        Case { stride: [1, 3], pad: [0, 2], dil: [1, 2], bias: true, relu: true, ..case(2, 6, None, 40, 24, [1, 5]) },
        // K = 360 (22.5 steps), 67 channels, 288 pixels (five row tiles).
        Case { pad: [1, 1], bias: true, ..case(2, 40, Some(12), 12, 67, [3, 3]) },
        // Non-square window 3x2, output of one row.
        Case { stride: [3, 2], ..case(1, 9, Some(4), 9, 65, [3, 2]) },
        // One tile of K = 1080: split in 2 (float32), bias and ReLU in the
        // combine pass.
        Case { pad: [1, 1], bias: true, relu: true, ..case(1, 120, Some(5), 6, 40, [3, 3]) },
        // K = 2700 over 2 tiles: split in 5, clamped.
        Case { pad: [1, 1], bias: true, clamp: Some((-1.0, 1.0)), ..case(1, 300, Some(4), 4, 70, [3, 3]) },
    ]
}

/// The cases whose float32 programs split K on the implicit GEMM.
const SPLIT_CASES: [usize; 2] = [7, 8];

#[test]
fn convolutions_match_the_reference_on_both_kernels() {
    let Some(rt) = crate::runtime() else { return };
    for (i, case) in cases().iter().enumerate() {
        let seed = 40 + 3 * i as u32;
        let (gemm, want, split) = run(&rt, case, DType::F32, ConvKernels::Gemm, Precision::F32, seed);
        let (direct, want2, _) = run(&rt, case, DType::F32, ConvKernels::Direct, Precision::F32, seed);
        assert_eq!(want, want2, "one reference");
        assert_eq!(split, SPLIT_CASES.contains(&i), "case {i}: split K");
        assert!(want.iter().any(|&v| v != 0.0), "case {i}: something to compare");
        assert_close(&gemm, &want, 1e-4, 1e-4, &format!("implicit GEMM, case {i} {case:?}"));
        assert_close(&direct, &want, 1e-4, 1e-4, &format!("direct, case {i} {case:?}"));
        assert_close(&gemm, &direct, 1e-4, 1e-4, &format!("implicit GEMM against direct, case {i}"));
    }
}

#[test]
fn float16_convolutions_match_the_reference_on_both_kernels() {
    let Some(rt) = crate::runtime() else { return };
    if !rt.features().contains(&"shader-f16") {
        eprintln!("skipping: no SHADER_F16 (float16 programs run as float32, tested elsewhere)");
        return;
    }
    for (i, case) in cases().iter().enumerate().filter(|(i, _)| [1, 3, 5, 7].contains(i)) {
        let seed = 70 + 3 * i as u32;
        let (gemm, want, split) = run(&rt, case, DType::F16, ConvKernels::Gemm, Precision::F32, seed);
        let (direct, _, _) = run(&rt, case, DType::F16, ConvKernels::Direct, Precision::F32, seed);
        assert!(!split, "case {i}: float16 programs never split K");
        let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert_close(&gemm, &want, 1e-2 * scale, 0.0, &format!("f16 implicit GEMM, case {i}"));
        assert_close(&direct, &want, 1e-2 * scale, 0.0, &format!("f16 direct, case {i}"));
    }
}

/// Float32 programs at `--precision f16`: on a device with cooperative
/// matrices the implicit GEMM takes f16 operands on them
/// (`conv_gemm_coop.wgsl`, every case, K split as on the float32 kernel),
/// checked at float16
/// operands' tolerance (1e-2 of the output's scale: inputs and weights
/// rounded to f16, sums in f32, the output float32); elsewhere the float32
/// kernel, at float32's.
#[test]
fn f16_operand_convolutions_match_the_reference() {
    let Some(rt) = crate::runtime() else { return };
    let coop = on_matrix_units(&rt, DType::F32, Precision::F16);
    for (i, case) in cases().iter().enumerate() {
        let seed = 110 + 3 * i as u32;
        let (gemm, want, split) = run(&rt, case, DType::F32, ConvKernels::Gemm, Precision::F16, seed);
        assert!(want.iter().any(|&v| v != 0.0), "case {i}: something to compare");
        // The same cases split on both kernels (their tiles differ, but
        // not where it changes the rule's count).
        assert_eq!(split, SPLIT_CASES.contains(&i), "case {i}: split K");
        if coop {
            let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
            assert_close(&gemm, &want, 1e-2 * scale, 0.0, &format!("f16-operand implicit GEMM, case {i} {case:?}"));
        } else {
            assert_close(&gemm, &want, 1e-4, 1e-4, &format!("implicit GEMM, case {i} {case:?}"));
        }
    }
}

/// The default (`auto`) sends convolutions that fill the GEMM's tiles to
/// it, whatever their pixels, and small ones (few output channels, few
/// inputs an output) and grouped ones to the direct kernel.
#[test]
fn auto_routes_convolutions_by_size() {
    let Some(rt) = crate::runtime() else { return };
    let routed = |case: &Case, groups_dw: bool| {
        let (program, xv, _, _) = if groups_dw { depthwise(case) } else { program(case, DType::F32, 90) };
        let options = LoadOptions { conv: Some(ConvKernels::Auto), ..LoadOptions::default() };
        let mut method = rt.load_with(&program, "forward", &options).expect("loads");
        method.set_profiling(true);
        method.run(&[Tensor::from_f32(&case.in_shape(), &xv)]).expect("runs");
        let kernels: Vec<String> = method.profile().into_iter().flat_map(|p| p.kernels).collect();
        kernels.iter().any(|k| k.starts_with("conv_gemm."))
    };
    let big = Case { pad: [1, 1], ..case(1, 16, Some(8), 8, 32, [3, 3]) };
    assert!(routed(&big, false), "32 channels, 144 inputs an output: the implicit GEMM");
    assert!(!routed(&Case { oc: 8, ..big }, false), "8 output channels: direct");
    let wide = Case { pad: [1, 1], ..case(1, 16, Some(24), 24, 32, [3, 3]) };
    assert!(routed(&wide, false), "576 output pixels: the implicit GEMM too");
    assert!(!routed(&case(1, 3, Some(8), 8, 32, [1, 1]), false), "3 inputs an output: direct");
    assert!(!routed(&Case { c: 32, ..big }, true), "depthwise: direct");
}

/// A depthwise 3x3 convolution of `case`'s input (`oc` = `c`).
fn depthwise(case: &Case) -> (Program, Vec<f32>, Vec<f32>, Vec<f32>) {
    let c = case.c as u64;
    let wv = data(case.c * 9, 91);
    let xv = data(case.in_shape().iter().product::<u64>() as usize, 92);
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &case.in_shape());
    let w = g.constant(DType::F32, &[c, 1, 3, 3], &bytes(&wv, DType::F32));
    let none = g.null();
    let (ones, zeros, f, groups) = (g.int_list(&[1, 1]), g.int_list(&[0, 0]), g.bool(false), g.int(case.c as i64));
    let [h, w_] = [case.h() as u64, case.w as u64];
    let out = g.tensor(DType::F32, &[case.n as u64, c, h, w_]);
    g.op("aten.convolution.default", &[x, w, none, ones, ones, ones, f, zeros, groups, out]);
    g.inputs(&[x]).outputs(&[out]);
    let program = Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("crafted program parses");
    (program, xv, wv, Vec::new())
}
