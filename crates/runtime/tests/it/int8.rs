//! Int8 activations in the one-row 4-bit GEMVs
//! (`LoadOptions::int8_activations`, `q4_gemv_i8.wgsl` and the `_i8`
//! forms of the normed QKV and SwiGLU and of the attention's O
//! projection, all through `common/q8_x.wgsl`): the kernels against a CPU reference
//! that rounds x to int8 per 32-input block as they do, against the float
//! path on rows the rounding leaves exact, and the size of what the
//! rounding changes on rows it does not; the route taken only where it
//! applies (one row, the option on).

use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
use etwgpu_format::{DType, Program, ValueId};
use etwgpu_runtime::{LoadOptions, LoadedMethod, Runtime, Tensor};

use crate::{data, f32s};

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Packed 4-bit weights `[n, k/2]` (their nibbles `q + 8`, low nibble the
/// even input) and `[k/32, n]` scales, as constants of `g`; returned with
/// the weights as integers `q` in `[-8, 7]`, `[n][k]`, and the scales.
fn q4(g: &mut GraphBuilder, n: u64, k: u64, seed: u32) -> (ValueId, ValueId, Vec<i32>, Vec<f32>) {
    let bytes: Vec<u8> = data((n * k / 2) as usize, seed).iter().map(|v| ((v + 2.0) * 63.0) as u8).collect();
    let scales: Vec<f32> = data((k / 32 * n) as usize, seed + 1).iter().map(|v| v * 0.05).collect();
    let q: Vec<i32> = bytes.iter().flat_map(|&b| [i32::from(b & 15) - 8, i32::from(b >> 4) - 8]).collect();
    let w = g.constant(DType::U8, &[n, k / 2], &bytes);
    let s = g.constant(DType::F32, &[k / 32, n], &f32_bytes(&scales));
    (w, s, q, scales)
}

/// x rounded as `q8_x.wgsl` rounds it: per block of 32, `round(x * 127 /
/// max|x|)` (ties to even) times `max|x| / 127`.
fn rounded(x: &[f32]) -> Vec<f32> {
    x.chunks(32)
        .flat_map(|b| {
            let amax = b.iter().fold(0f32, |m, v| m.max(v.abs()));
            let inv = if amax > 0.0 { 127.0 / amax } else { 0.0 };
            b.iter().map(move |v| (v * inv).round_ties_even() * (amax / 127.0)).collect::<Vec<_>>()
        })
        .collect()
}

/// `x · W^T` in f64 for `[n][k]` integer weights and `[k/32, n]` scales.
fn linear(x: &[f32], q: &[i32], scales: &[f32], n: usize) -> Vec<f64> {
    let k = x.len();
    (0..n)
        .map(|j| (0..k).map(|i| f64::from(x[i]) * f64::from(q[j * k + i]) * f64::from(scales[(i / 32) * n + j])).sum())
        .collect()
}

fn load(rt: &Runtime, g: GraphBuilder, int8: bool) -> LoadedMethod {
    let program = Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("crafted program parses");
    let options = LoadOptions { int8_activations: Some(int8), ..LoadOptions::default() };
    rt.load_with(&program, "forward", &options).expect("loads")
}

/// The shaders `method`'s last (profiled) call ran.
fn kernels(method: &LoadedMethod) -> Vec<String> {
    method.profile().into_iter().flat_map(|p| p.kernels).collect()
}

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

fn max_diff(a: &[f32], b: &[f64]) -> f64 {
    a.iter().zip(b).fold(0.0, |m, (x, y)| m.max((f64::from(*x) - y).abs()))
}

/// Runs `method` on `inputs` with profiling on: its first output and the
/// shaders it ran.
fn run(method: &mut LoadedMethod, inputs: &[Tensor]) -> (Vec<f32>, Vec<String>) {
    method.set_profiling(true);
    let out = method.run(inputs).expect("runs");
    (f32s(&out[0]), kernels(method))
}

/// One `et_vk.linear_q4gsw` at K inputs and N outputs (the plain GEMV:
/// K from one word a slice to several word pairs and the most the kernel
/// holds, N of 8 and 32 columns a workgroup), with a bias at one shape.
#[test]
fn plain_gemv_rounds_x_per_block() {
    let Some(rt) = crate::runtime() else { return };
    for (k, n, with_bias) in [(64, 40, false), (1600, 300, true), (2048, 8192, false), (8192, 64, false)] {
        let mut g = GraphBuilder::new();
        let x = g.tensor(DType::F32, &[1, 1, k]);
        let out = g.tensor(DType::F32, &[1, 1, n]);
        let (w, s, q, scales) = q4(&mut g, n, k, 300 + k as u32);
        let bias_values: Vec<f32> = data(n as usize, 7).iter().map(|v| v * 0.5).collect();
        let bias = if with_bias { g.constant(DType::F32, &[n], &f32_bytes(&bias_values)) } else { g.null() };
        let gs = g.int(32);
        g.op("et_vk.linear_q4gsw.default", &[x, w, s, gs, bias, out]).inputs(&[x]).outputs(&[out]);
        let biased = |mut v: Vec<f64>| {
            if with_bias {
                v.iter_mut().zip(&bias_values).for_each(|(o, b)| *o += f64::from(*b));
            }
            v
        };
        let mut int8 = load(&rt, g.clone(), true);
        let mut float = load(&rt, g, false);

        // Rows on each block's int8 grid (every block holds +-127/8, so its
        // scale is 1/8 and every x * 8 an integer): nothing to round, the
        // integer dots give the float path's sums.
        let grid: Vec<f32> = data(k as usize, 11)
            .iter()
            .enumerate()
            .map(
                |(i, v)| {
                    if i % 32 == 5 { if i % 64 == 5 { 15.875 } else { -15.875 } } else { (v * 63.0).round() / 8.0 }
                },
            )
            .collect();
        let inputs = [Tensor::from_f32(&[1, 1, k], &grid)];
        let (a, kernels_int8) = run(&mut int8, &inputs);
        let (b, kernels_float) = run(&mut float, &inputs);
        assert!(kernels_int8.iter().any(|s| s.starts_with("q4_gemv_i8")), "{kernels_int8:?}");
        assert!(!kernels_float.iter().any(|s| s.contains("_i8")), "{kernels_float:?}");
        let exact = biased(linear(&grid, &q, &scales, n as usize));
        let scale = max_abs(&exact);
        let b64: Vec<f64> = b.iter().map(|&v| f64::from(v)).collect();
        assert!(max_diff(&a, &exact) <= 1e-5 * scale, "K {k}: int8 on the grid {} vs {scale}", max_diff(&a, &exact));
        assert!(max_diff(&a, &b64) <= 1e-5 * scale, "K {k}: int8 vs float on the grid");

        // Rows off the grid: the kernel rounds them as the reference does
        // (within a few ties that f32 division may break the other way:
        // each moves one input by one step of 1/127 of its block's max),
        // and the float path differs from it by the rounding, at most
        // 1.5% of the largest output.
        let x_values = data(k as usize, 12);
        let inputs = [Tensor::from_f32(&[1, 1, k], &x_values)];
        let (a, _) = run(&mut int8, &inputs);
        let (b, _) = run(&mut float, &inputs);
        let reference = biased(linear(&rounded(&x_values), &q, &scales, n as usize));
        let exact = biased(linear(&x_values, &q, &scales, n as usize));
        let scale = max_abs(&exact);
        let to_reference = max_diff(&a, &reference);
        let to_exact = max_diff(&a, &exact);
        assert!(to_reference <= 1e-3 * scale, "K {k}: int8 vs the rounded reference: {to_reference} of {scale}");
        assert!(to_exact <= 0.015 * scale, "K {k}: int8 vs exact: {to_exact} of {scale}");
        assert!(max_diff(&b, &exact) <= 1e-5 * scale, "K {k}: the float path vs exact");
        assert!(
            to_exact > 10.0 * to_reference.max(1e-6 * scale),
            "K {k}: the rounding shows ({to_exact} vs {to_reference})"
        );

        // More than one row keeps float activations.
        let rows = [Tensor::from_f32(&[1, 2, k], &data(2 * k as usize, 13))];
        let mut two = load(
            &rt,
            {
                let mut g = GraphBuilder::new();
                let x = g.tensor(DType::F32, &[1, 2, k]);
                let out = g.tensor(DType::F32, &[1, 2, n]);
                let (w, s, _, _) = q4(&mut g, n, k, 300 + k as u32);
                let (gs, none) = (g.int(32), g.null());
                g.op("et_vk.linear_q4gsw.default", &[x, w, s, gs, none, out]).inputs(&[x]).outputs(&[out]);
                g
            },
            true,
        );
        let (_, kernels_two) = run(&mut two, &rows);
        assert!(!kernels_two.iter().any(|s| s.contains("_i8")), "two rows: {kernels_two:?}");
    }
}

/// An RMS norm (after a residual add) into the SwiGLU pair of 4-bit
/// linears, one row: the fused `_norm` GEMV's int8 form, against a
/// reference that rounds the row times the norm weight per block (the
/// kernel applies the norm's row scale after the dots) and against the
/// float path.
#[test]
fn swiglu_after_the_norm_rounds_x_per_block() {
    let Some(rt) = crate::runtime() else { return };
    let (k, f) = (576u64, 1536u64);
    let mut g = GraphBuilder::new();
    let t = |g: &mut GraphBuilder, n: u64| g.tensor(DType::F32, &[1, 1, n]);
    let (h, r, z, y) = (t(&mut g, k), t(&mut g, k), t(&mut g, k), t(&mut g, k));
    let (gs, none, one, eps) = (g.int(32), g.null(), g.int(1), g.double(1e-5));
    let norm_w: Vec<f32> = data(k as usize, 21).iter().map(|v| 1.0 + 0.25 * v).collect();
    let wn = g.constant(DType::F32, &[k], &f32_bytes(&norm_w));
    g.op("aten.add.Tensor", &[h, r, one, z]).op("et_vk.rms_norm.default", &[z, wn, eps, y]);
    let mut weights = Vec::new();
    let mut outs = Vec::new();
    for seed in [400, 410] {
        let (w, s, q, scales) = q4(&mut g, f, k, seed);
        let out = t(&mut g, f);
        g.op("et_vk.linear_q4gsw.default", &[y, w, s, gs, none, out]);
        weights.push((q, scales));
        outs.push(out);
    }
    let (sig, silu, sw) = (t(&mut g, f), t(&mut g, f), t(&mut g, f));
    g.op("aten.sigmoid.default", &[outs[0], sig])
        .op("aten.mul.Tensor", &[outs[0], sig, silu])
        .op("aten.mul.Tensor", &[silu, outs[1], sw])
        .inputs(&[h, r])
        .outputs(&[sw]);
    let mut int8 = load(&rt, g.clone(), true);
    let mut float = load(&rt, g, false);
    let (hv, rv) = (data(k as usize, 31), data(k as usize, 32));
    let inputs = [Tensor::from_f32(&[1, 1, k], &hv), Tensor::from_f32(&[1, 1, k], &rv)];
    let (a, kernels_int8) = run(&mut int8, &inputs);
    let (b, kernels_float) = run(&mut float, &inputs);
    assert!(kernels_int8.iter().any(|s| s.starts_with("q4_gemv_swiglu_norm_i8")), "{kernels_int8:?}");
    assert!(kernels_float.iter().any(|s| s.starts_with("q4_gemv_swiglu_norm.")), "{kernels_float:?}");

    let v: Vec<f32> = hv.iter().zip(&rv).map(|(a, b)| a + b).collect();
    let rstd = 1.0 / (v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>() / k as f64 + 1e-5).sqrt();
    let vw: Vec<f32> = v.iter().zip(&norm_w).map(|(a, b)| a * b).collect();
    let swiglu = |x: &[f32]| -> Vec<f64> {
        let gate = linear(x, &weights[0].0, &weights[0].1, f as usize);
        let up = linear(x, &weights[1].0, &weights[1].1, f as usize);
        gate.iter().zip(&up).map(|(g, u)| g * rstd / (1.0 + (-g * rstd).exp()) * u * rstd).collect()
    };
    let reference = swiglu(&rounded(&vw));
    let exact = swiglu(&vw);
    let scale = max_abs(&exact);
    let to_reference = max_diff(&a, &reference);
    let to_exact = max_diff(&a, &exact);
    assert!(to_reference <= 2e-3 * scale, "int8 vs the rounded reference: {to_reference} of {scale}");
    assert!(to_exact <= 0.015 * scale, "int8 vs exact: {to_exact} of {scale}");
    assert!(max_diff(&b, &exact) <= 1e-4 * scale, "the float path vs exact");
    assert!(to_exact > 5.0 * to_reference.max(1e-6 * scale), "the rounding shows ({to_exact} vs {to_reference})");
}

/// The tiny Llama 4-bit exports (float32 and float16 activations) with
/// int8 activations: the decode calls take the int8 GEMVs (plain, after
/// the norms into the QKV and SwiGLU, after the attention's merge into the
/// O projection), and every call's
/// logits keep the eager goldens' top-1 token within 2.5% of the largest
/// logit (the float path meets 5e-4; the rounding of x to 8 bits a block
/// costs about 1% here).
#[test]
fn tiny_llamas_keep_their_top1_with_int8_activations() {
    let Some(rt) = crate::runtime() else { return };
    // The split route: at the fixtures' short contexts the default runs the
    // attention inside the O projection's GEMV, which has no int8 form.
    let options = LoadOptions { int8_activations: Some(true), gemv_attention: Some(false), ..LoadOptions::default() };
    for name in ["llama_tiny_q4", "llama_tiny_q4_fp16"] {
        let (mut method, outs) = crate::trusted::run_all(&rt, name, &options);
        method.set_profiling(true);
        let dir = crate::fixtures_dir().join(name);
        let decode = [
            Tensor::read_npy(dir.join("call1.in0.npy")).expect("input"),
            Tensor::read_npy(dir.join("call1.in1.npy")).expect("input"),
        ];
        method.run(&decode).expect("a profiled decode call");
        let used = kernels(&method);
        assert!(used.iter().any(|s| s.starts_with("q4_gemv_i8")), "{name}: {used:?}");
        for family in ["q4_gemv_swiglu_norm_i8", "q4_gemv_qkv_norm_i8", "q4_gemv_attn_i8"] {
            assert!(used.iter().any(|s| s.starts_with(family)), "{name}: {family} not in {used:?}");
        }
        for (k, out) in outs.iter().enumerate() {
            let golden = f32s(&Tensor::read_npy(dir.join(format!("call{k}.out0.npy"))).expect("golden"));
            let got = f32s(&out[0]);
            let argmax = |v: &[f32]| v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i);
            assert_eq!(argmax(&got), argmax(&golden), "{name} call {k}: top-1");
            let scale = golden.iter().fold(0f32, |m, v| m.max(v.abs()));
            let err = got.iter().zip(&golden).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(err <= 0.025 * scale, "{name} call {k}: {err} of {scale}");
        }
    }
}

/// An RMS norm (after a residual add) into the Q, K and V 4-bit linears,
/// one row of K = 1,024 (the most the QKV's int8 form takes), 8,192
/// outputs in all (32 columns a workgroup: 8 slices of 32 words, so each
/// slice's loop runs past its first two words): the fused `_norm` GEMV's
/// int8 form against the rounding reference and the float path, each
/// projection; at K = 2,048 the float form.
#[test]
fn qkv_after_the_norm_rounds_x_per_block() {
    let Some(rt) = crate::runtime() else { return };
    let k = etwgpu_kernels::ops::fused::Q4_GEMV_QKV_I8_MAX_K;
    let ns = [8128u64, 32, 32];
    // At twice the K the QKV keeps its float form (the SwiGLU and plain
    // forms are not bounded so).
    {
        let wide = 2 * k;
        let mut g = GraphBuilder::new();
        let t = |g: &mut GraphBuilder, n: u64| g.tensor(DType::F32, &[1, 1, n]);
        let (x, y) = (t(&mut g, wide), t(&mut g, wide));
        let (gs, none, eps) = (g.int(32), g.null(), g.double(1e-5));
        let wn = g.constant(DType::F32, &[wide], &f32_bytes(&vec![1.0; wide as usize]));
        g.op("et_vk.rms_norm.default", &[x, wn, eps, y]);
        let mut outs = Vec::new();
        for (i, &n) in [64u64, 32, 32].iter().enumerate() {
            let (w, s, _, _) = q4(&mut g, n, wide, 560 + 10 * i as u32);
            let out = t(&mut g, n);
            g.op("et_vk.linear_q4gsw.default", &[y, w, s, gs, none, out]);
            outs.push(out);
        }
        g.inputs(&[x]).outputs(&outs);
        let mut m = load(&rt, g, true);
        let (_, used) = run(&mut m, &[Tensor::from_f32(&[1, 1, wide], &data(wide as usize, 57))]);
        assert!(used.iter().any(|s| s.starts_with("q4_gemv_qkv_norm.")), "K {wide}: {used:?}");
    }
    let mut g = GraphBuilder::new();
    let t = |g: &mut GraphBuilder, n: u64| g.tensor(DType::F32, &[1, 1, n]);
    let (h, r, z, y) = (t(&mut g, k), t(&mut g, k), t(&mut g, k), t(&mut g, k));
    let (gs, none, one, eps) = (g.int(32), g.null(), g.int(1), g.double(1e-5));
    let norm_w: Vec<f32> = data(k as usize, 41).iter().map(|v| 1.0 + 0.25 * v).collect();
    let wn = g.constant(DType::F32, &[k], &f32_bytes(&norm_w));
    g.op("aten.add.Tensor", &[h, r, one, z]).op("et_vk.rms_norm.default", &[z, wn, eps, y]);
    let mut weights = Vec::new();
    let mut outs = Vec::new();
    for (i, &n) in ns.iter().enumerate() {
        let (w, s, q, scales) = q4(&mut g, n, k, 500 + 10 * i as u32);
        let out = t(&mut g, n);
        g.op("et_vk.linear_q4gsw.default", &[y, w, s, gs, none, out]);
        weights.push((q, scales));
        outs.push(out);
    }
    g.inputs(&[h, r]).outputs(&outs);
    let mut int8 = load(&rt, g.clone(), true);
    let mut float = load(&rt, g, false);
    let (hv, rv) = (data(k as usize, 51), data(k as usize, 52));
    let inputs = [Tensor::from_f32(&[1, 1, k], &hv), Tensor::from_f32(&[1, 1, k], &rv)];
    int8.set_profiling(true);
    let a = int8.run(&inputs).expect("runs");
    let used = kernels(&int8);
    assert!(used.iter().any(|s| s.starts_with("q4_gemv_qkv_norm_i8")), "{used:?}");
    let b = float.run(&inputs).expect("runs");
    let v: Vec<f32> = hv.iter().zip(&rv).map(|(a, b)| a + b).collect();
    let rstd = 1.0 / (v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>() / k as f64 + 1e-5).sqrt();
    let vw: Vec<f32> = v.iter().zip(&norm_w).map(|(a, b)| a * b).collect();
    let xr = rounded(&vw);
    for (j, &n) in ns.iter().enumerate() {
        let (q, scales) = &weights[j];
        let reference: Vec<f64> = linear(&xr, q, scales, n as usize).iter().map(|v| v * rstd).collect();
        let exact: Vec<f64> = linear(&vw, q, scales, n as usize).iter().map(|v| v * rstd).collect();
        let scale = max_abs(&exact);
        let (got, flt) = (f32s(&a[j]), f32s(&b[j]));
        let to_reference = max_diff(&got, &reference);
        let to_exact = max_diff(&got, &exact);
        assert!(
            to_reference <= 1e-3 * scale,
            "projection {j}: int8 vs the rounded reference: {to_reference} of {scale}"
        );
        assert!(to_exact <= 0.015 * scale, "projection {j}: int8 vs exact: {to_exact} of {scale}");
        assert!(max_diff(&flt, &exact) <= 1e-4 * scale, "projection {j}: the float path vs exact");
        assert!(to_exact > 5.0 * to_reference.max(1e-6 * scale), "projection {j}: the rounding shows");
    }
}

/// The split-KV attention's merge into the O projection (16 query heads
/// over 4 kv heads of 128 dims: K = 2,048, the most the kernel holds, and
/// 4,096 outputs, so each slice's loop runs past its first two words):
/// the decode calls take `q4_gemv_attn_i8.wgsl`, within 1.5% of the float
/// path's largest output and not equal to it; the prompt keeps floats.
#[test]
fn attention_merge_into_the_o_projection_rounds_x() {
    let Some(rt) = crate::runtime() else { return };
    let (hq, hkv, d) = (16u64, 4u64, 128u64);
    let g = crate::fusion::attention_linear_graph(DType::F32, (hq, hkv, d), 96, 40, 4096);
    let calls = crate::fusion::rope_attention_calls(&[40, 1, 1], 610, hq, hkv, d);
    let mut int8 = load(&rt, g.clone(), true);
    let mut float = load(&rt, g, false);
    for (i, inputs) in calls.iter().enumerate() {
        int8.set_profiling(true);
        let a = f32s(&int8.run(inputs).expect("runs")[0]);
        let used = kernels(&int8);
        let b: Vec<f64> = float.run(inputs).expect("runs")[0].to_f64_vec();
        let diff = max_diff(&a, &b);
        let scale = max_abs(&b);
        if i == 0 {
            assert!(!used.iter().any(|s| s.contains("_i8")), "the prompt: {used:?}");
            assert!(diff <= 1e-5 * scale, "the prompt: {diff} of {scale}");
        } else {
            assert!(used.iter().any(|s| s.starts_with("q4_gemv_attn_i8")), "call {i}: {used:?}");
            assert!(diff <= 0.015 * scale && diff > 1e-4 * scale, "call {i}: int8 vs float {diff} of {scale}");
        }
    }
}
