//! GPU benchmarks of `etwgpu-runtime`: GEMM, GEMV, the 8da4w linear,
//! softmax, layer norm and decode attention over a KV cache at a few
//! shapes, and whole fixture runs.
//!
//! Timing uses `iter_custom`: each sample is the wall time of `run`, which
//! uploads the inputs, submits once and waits for the queue (read-back
//! included). Throughput is reported as elements per second where an
//! element is one floating-point operation (GEMM, GEMV) or one byte moved
//! (softmax, layer norm, the cache read by decode attention). Without an adapter the benches print a note and
//! measure nothing.
//!
//! The decode GEMVs (`gemv/stream ...`) are timed differently: the sum of
//! their dispatches' GPU timestamps (each dispatch in its own pass, the
//! profiling mode), over enough copies of the weights that they do not
//! stay in the GPU's cache; throughput is bytes moved (weights, scales,
//! x and the output), in GB/s, and each prints its median share of the
//! device's copy bandwidth; then the same copies run back to back in one
//! pass with timestamps only around it (`ProfileMode::ByKernel`, `, one
//! pass` in the line), which leaves out what the timestamps between
//! dispatches add.
//!
//! Before each of those timings the GPU is kept busy with back-to-back
//! copies for `ETWGPU_BENCH_HEAT_MS` (default 1,000 with
//! `ETWGPU_BENCH_LARGE=1`, 0 without; half that before the second): an
//! idle GPU clocks down, and building each shape's weights leaves it idle
//! (runs bu and bv, an H100: the SM clock at 345-900 of 1,980 MHz through
//! timings made after host work, which came out 2-4x slow).
//!
//! `ETWGPU_BENCH_LARGE=1` adds shapes sized for a real GPU (the decode
//! GEMVs at the Llama-3.2-1B shapes); `ETWGPU_BENCH_ONLY=TEXT` keeps the
//! decode GEMV rows whose name contains TEXT;
//! `ETWGPU_FIXTURES=DIR` points at `test_data/fixtures` when the benches run
//! away from the source tree.

use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
use etwgpu_format::{DType, Program};
use etwgpu_runtime::{LoadOptions, LoadedMethod, ProfileMode, Runtime, Tensor};

fn runtime() -> Option<Runtime> {
    match Runtime::new() {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("no GPU, skipping benches: {e}");
            None
        }
    }
}

fn load(rt: &Runtime, g: GraphBuilder) -> LoadedMethod {
    let program = Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("crafted program parses");
    rt.load(&program, "forward").expect("loads")
}

fn ones(shape: &[u64]) -> Tensor {
    Tensor::from_f32(shape, &vec![0.5; shape.iter().product::<u64>() as usize])
}

/// Times `iters` runs of `method` on `inputs`.
fn time_runs(method: &mut LoadedMethod, inputs: &[Tensor], iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        method.run(inputs).expect("runs");
    }
    start.elapsed()
}

fn bench_graph(c: &mut Criterion, rt: &Runtime, name: &str, work: u64, g: GraphBuilder, inputs: Vec<Tensor>) {
    let mut method = load(rt, g);
    method.run(&inputs).expect("warm-up run");
    let mut group = c.benchmark_group("kernels");
    group.throughput(Throughput::Elements(work));
    group.bench_function(name, |b| b.iter_custom(|iters| time_runs(&mut method, &inputs, iters)));
    group.finish();
}

fn matmul(c: &mut Criterion, rt: &Runtime, m: u64, k: u64, n: u64) {
    // The weight is a constant, as in a real model: it is uploaded once at
    // load, so the timing is the kernel plus the small input upload and the
    // read-back. One row goes through `linear` (weight `[N, K]`, the decode
    // case), more rows through `mm` (weight `[K, N]`).
    let mut g = GraphBuilder::new();
    let a = g.tensor(DType::F32, &[m, k]);
    let weight: Vec<u8> = (0..k * n).flat_map(|i| ((i % 7) as f32 * 0.25).to_le_bytes()).collect();
    let out = g.tensor(DType::F32, &[m, n]);
    let kind = if m == 1 {
        let w = g.constant(DType::F32, &[n, k], &weight);
        let no_bias = g.null();
        g.op("aten.linear.default", &[a, w, no_bias, out]);
        "gemv"
    } else {
        let b = g.constant(DType::F32, &[k, n], &weight);
        g.op("aten.mm.default", &[a, b, out]);
        "gemm"
    };
    g.inputs(&[a]).outputs(&[out]);
    bench_graph(c, rt, &format!("{kind} {m}x{k}x{n}"), 2 * m * k * n, g, vec![ones(&[m, k])]);
}

/// A torchao 8da4w linear as exported: `choose_qparams_affine` of the
/// input rows (int8, asymmetric), then `et_vk.linear_dq8ca_q4gsw` with
/// 4-bit weights in groups of 32 (random nibbles, f32 scales).
fn dq8_linear(c: &mut Criterion, rt: &Runtime, m: u64, k: u64, n: u64) {
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[m, k]);
    let mapping = g.string("ASYMMETRIC");
    let block = g.int_list(&[1, k as i64]);
    let null = g.null();
    let (qmin, qmax, f) = (g.int(-128), g.int(127), g.bool(false));
    let scale = g.tensor(DType::F32, &[m]);
    let zp = g.tensor(DType::I8, &[m]);
    let qparams = g.value_list(&[scale, zp]);
    let w = g.constant(DType::U8, &[n, k / 2], &noise_bytes((n * k / 2) as usize, 5));
    let sums = g.constant(DType::I32, &[k / 32, n], &vec![0u8; (k / 32 * n * 4) as usize]);
    let scales: Vec<u8> = (0..k / 32 * n).flat_map(|i| (0.01 + (i % 5) as f32 * 0.002).to_le_bytes()).collect();
    let s = g.constant(DType::F32, &[k / 32, n], &scales);
    let gs = g.int(32);
    let out = g.tensor(DType::F32, &[m, n]);
    g.op("torchao.choose_qparams_affine.default", &[x, mapping, block, null, qmin, qmax, null, null, null, f, qparams])
        .op("et_vk.linear_dq8ca_q4gsw.default", &[x, scale, zp, w, sums, s, gs, null, out]);
    g.inputs(&[x]).outputs(&[out]);
    let input = Tensor::from_f32(&[m, k], &(0..m * k).map(|i| ((i % 13) as f32 - 6.0) * 0.1).collect::<Vec<_>>());
    bench_graph(c, rt, &format!("8da4w linear {m}x{k}x{n}"), 2 * m * k * n, g, vec![input]);
}

fn softmax(c: &mut Criterion, rt: &Runtime, rows: u64, n: u64) {
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[rows, n]);
    let dim = g.int(-1);
    let f = g.bool(false);
    let out = g.tensor(DType::F32, &[rows, n]);
    g.op("aten._softmax.default", &[x, dim, f, out]).inputs(&[x]).outputs(&[out]);
    bench_graph(c, rt, &format!("softmax {rows}x{n}"), 8 * rows * n, g, vec![ones(&[rows, n])]);
}

/// One decode step of `sdpa_with_kv_cache` (one query token, Llama-style
/// heads) at the last position of a cache of `ctx` rows: the split-KV
/// kernels.
fn decode_attention(c: &mut Criterion, rt: &Runtime, hq: u64, hkv: u64, d: u64, ctx: u64) {
    let mut g = GraphBuilder::new();
    let q = g.tensor(DType::F32, &[1, 1, hq, d]);
    let k = g.tensor(DType::F32, &[1, 1, hkv, d]);
    let v = g.tensor(DType::F32, &[1, 1, hkv, d]);
    let pos = g.tensor_staged(DType::I32, DType::I64, &[1]);
    let cache = vec![0u8; (ctx * hkv * d * 4) as usize];
    let k_cache = g.constant(DType::F32, &[1, ctx, hkv, d], &cache);
    let v_cache = g.constant(DType::F32, &[1, ctx, hkv, d], &cache);
    let (zero, one, causal, null) = (g.int(0), g.int(1), g.bool(true), g.null());
    let start = g.sym_int();
    let out = g.tensor(DType::F32, &[1, 1, hq, d]);
    g.op("et_vk.select_as_symint.default", &[pos, zero, zero, start])
        .op("sdpa_with_kv_cache.default", &[q, k, v, k_cache, v_cache, start, one, null, zero, causal, null, out]);
    g.inputs(&[q, k, v, pos]).outputs(&[out]);
    let last = Tensor::new(DType::I64, vec![1], (ctx as i64 - 1).to_le_bytes().to_vec()).expect("valid");
    let inputs = vec![ones(&[1, 1, hq, d]), ones(&[1, 1, hkv, d]), ones(&[1, 1, hkv, d]), last];
    let name = format!("decode attention {hq}/{hkv} heads x {d} at {ctx}");
    bench_graph(c, rt, &name, 2 * ctx * hkv * d * 4, g, inputs);
}

fn layer_norm(c: &mut Criterion, rt: &Runtime, rows: u64, n: u64) {
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[rows, n]);
    let shape = g.int_list(&[n as i64]);
    let null = g.null();
    let eps = g.double(1e-5);
    let out = g.tensor(DType::F32, &[rows, n]);
    let mean = g.tensor(DType::F32, &[rows, 1]);
    let rstd = g.tensor(DType::F32, &[rows, 1]);
    let outs = g.value_list(&[out, mean, rstd]);
    g.op("aten.native_layer_norm.default", &[x, shape, null, null, eps, outs]).inputs(&[x]).outputs(&[out]);
    bench_graph(c, rt, &format!("layer_norm {rows}x{n}"), 8 * rows * n, g, vec![ones(&[rows, n])]);
}

/// A 2-D convolution `[1, cin, h, w] * [cout, cin, 3, 3]`, stride 1, pad 1,
/// with bias; the weight is a constant.
fn conv2d(c: &mut Criterion, rt: &Runtime, cin: u64, cout: u64, hw: u64) {
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, cin, hw, hw]);
    let weight: Vec<u8> = (0..cout * cin * 9).flat_map(|i| ((i % 5) as f32 * 0.1).to_le_bytes()).collect();
    let w = g.constant(DType::F32, &[cout, cin, 3, 3], &weight);
    let bias_bytes: Vec<u8> = (0..cout).flat_map(|i| (i as f32 * 0.01).to_le_bytes()).collect();
    let b = g.constant(DType::F32, &[cout], &bias_bytes);
    let (stride, pad, dil) = (g.int_list(&[1, 1]), g.int_list(&[1, 1]), g.int_list(&[1, 1]));
    let transposed = g.bool(false);
    let out_pad = g.int_list(&[0, 0]);
    let groups = g.int(1);
    let out = g.tensor(DType::F32, &[1, cout, hw, hw]);
    g.op("aten.convolution.default", &[x, w, b, stride, pad, dil, transposed, out_pad, groups, out])
        .inputs(&[x])
        .outputs(&[out]);
    let flops = 2 * cout * cin * 9 * hw * hw;
    bench_graph(c, rt, &format!("conv2d 3x3 {cin}->{cout} {hw}x{hw}"), flops, g, vec![ones(&[1, cin, hw, hw])]);
}

/// `test_data/fixtures`, or `ETWGPU_FIXTURES` when the benches run away
/// from the source tree.
fn fixtures_root() -> std::path::PathBuf {
    std::env::var_os("ETWGPU_FIXTURES").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../test_data/fixtures"),
        std::path::PathBuf::from,
    )
}

/// Times loading a fixture (pipelines already cached after the first load).
fn fixture_load(c: &mut Criterion, rt: &Runtime, name: &str) {
    let root = fixtures_root();
    let Ok(program) = Program::open(root.join(name).join("model.pte")) else {
        eprintln!("fixture {name} not found, skipping");
        return;
    };
    c.bench_function(&format!("load {name}"), |b| b.iter(|| rt.load(&program, "forward").expect("fixture loads")));
}

/// Times runs of call `call` of a fixture. Stateful fixtures (Llama) may
/// repeat any call: a decode step at a fixed position rewrites the same
/// cache row.
fn fixture(c: &mut Criterion, rt: &Runtime, name: &str, call: usize) {
    let root = fixtures_root();
    let dir = root.join(name);
    let Ok(program) = Program::open(dir.join("model.pte")) else {
        eprintln!("fixture {name} not found, skipping");
        return;
    };
    let mut method = rt.load(&program, "forward").expect("fixture loads");
    let inputs: Vec<Tensor> = (0..method.n_inputs())
        .map(|i| Tensor::read_npy(dir.join(format!("call{call}.in{i}.npy"))).expect("fixture input"))
        .collect();
    method.run(&inputs).expect("warm-up run");
    c.bench_function(&format!("fixture {name} call {call}"), |b| {
        b.iter_custom(|iters| time_runs(&mut method, &inputs, iters))
    });
}

/// What a decode-GEMV bench runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GemvForm {
    /// `et_vk.linear_q4gsw`, groups of 32, f32 scales (`q4_gemv.wgsl`).
    Q4,
    /// `etwgpu.linear_q4gsw_swiglu`, gate and up (`q4_gemv_swiglu.wgsl`).
    Q4Swiglu,
    /// `aten.linear` with an f32 weight (`linear_gemv.wgsl`).
    F32,
    /// `etwgpu.linear_swiglu`, f32 gate and up (`gemv_swiglu_vec4.wgsl`).
    F32Swiglu,
    /// `etwgpu.linear_qkv`, three f32 weights of `n`, `n / 4` and `n / 4`
    /// rows, the 1B shape's grouped Q/K/V (`gemv_qkv_vec4.wgsl`).
    F32Qkv,
}

/// Deterministic bytes, cheap to make in bulk.
fn noise_bytes(n: usize, seed: u32) -> Vec<u8> {
    let mut s = seed.wrapping_mul(2_654_435_761) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            s as u8
        })
        .collect()
}

/// f32 values in [-1, 1) as bytes.
fn noise_f32(n: usize, seed: u32) -> Vec<u8> {
    noise_bytes(n, seed).iter().flat_map(|&b| (f32::from(b) / 128.0 - 1.0).to_le_bytes()).collect()
}

/// Bytes one GEMV of `form` at `n` outputs and `k` inputs moves: weights,
/// scales, one row of x and of the output.
fn gemv_bytes(form: GemvForm, n: u64, k: u64) -> u64 {
    let q4 = n * k / 2 + k.div_ceil(32) * n.next_multiple_of(8) * 4;
    let io = 4 * (k + n);
    match form {
        GemvForm::Q4 => q4 + io,
        GemvForm::Q4Swiglu => 2 * q4 + io,
        GemvForm::F32 => 4 * n * k + io,
        GemvForm::F32Swiglu => 8 * n * k + io,
        GemvForm::F32Qkv => 4 * (n + n / 2) * k + 4 * (k + n + n / 2),
    }
}

/// One decode-row GEMV of `form` (`n` outputs, `k` inputs), `copies` times
/// over distinct weights read from one input, each output a graph output.
fn gemv_graph(form: GemvForm, n: u64, k: u64, copies: u64) -> GraphBuilder {
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, k]);
    let mut outs = Vec::new();
    let n_pad = n.next_multiple_of(8);
    let groups = k.div_ceil(32);
    for i in 0..copies {
        let seed = 1 + i as u32;
        let out = g.tensor(DType::F32, &[1, n]);
        let q4 = |g: &mut GraphBuilder, seed: u32| {
            let w = g.constant(DType::U8, &[n, k / 2], &noise_bytes((n * k / 2) as usize, seed));
            let scales: Vec<u8> = noise_bytes((groups * n_pad) as usize, seed + 7)
                .iter()
                .flat_map(|&b| (f32::from(b) / 4096.0 + 0.01).to_le_bytes())
                .collect();
            let s = g.constant(DType::F32, &[groups, n_pad], &scales);
            (w, s)
        };
        match form {
            GemvForm::Q4 => {
                let (w, s) = q4(&mut g, seed);
                let (gs, none) = (g.int(32), g.null());
                g.op("et_vk.linear_q4gsw.default", &[x, w, s, gs, none, out]);
            }
            GemvForm::Q4Swiglu => {
                let (wg, sg) = q4(&mut g, seed);
                let (wu, su) = q4(&mut g, seed + 1000);
                let gs = g.int(32);
                g.op("etwgpu.linear_q4gsw_swiglu.default", &[x, gs, wg, sg, wu, su, out]);
            }
            GemvForm::F32 => {
                let w = g.constant(DType::F32, &[n, k], &noise_f32((n * k) as usize, seed));
                let none = g.null();
                g.op("aten.linear.default", &[x, w, none, out]);
            }
            GemvForm::F32Swiglu => {
                let wg = g.constant(DType::F32, &[n, k], &noise_f32((n * k) as usize, seed));
                let wu = g.constant(DType::F32, &[n, k], &noise_f32((n * k) as usize, seed + 1000));
                let none = g.null();
                g.op("etwgpu.linear_swiglu.default", &[x, wg, none, wu, none, out]);
            }
            GemvForm::F32Qkv => {
                let none = g.null();
                let mut args = vec![x];
                let mut qkv = vec![out];
                for (j, rows) in [n, n / 4, n / 4].into_iter().enumerate() {
                    let w = g.constant(DType::F32, &[rows, k], &noise_f32((rows * k) as usize, seed + 1000 * j as u32));
                    args.extend([w, none]);
                    if j > 0 {
                        qkv.push(g.tensor(DType::F32, &[1, rows]));
                    }
                }
                let list = g.value_list(&qkv);
                args.push(list);
                g.op("etwgpu.linear_qkv.default", &args);
                outs.extend(qkv.drain(1..));
            }
        }
        outs.push(out);
    }
    g.inputs(&[x]).outputs(&outs);
    g
}

/// How long [`heat`] runs: `ETWGPU_BENCH_HEAT_MS`, else 1 s with `large`
/// (a real GPU) and none without.
fn heat_time(large: bool) -> Duration {
    let default = if large { 1000 } else { 0 };
    Duration::from_millis(std::env::var("ETWGPU_BENCH_HEAT_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(default))
}

/// Keeps the GPU busy for `time` before a timing: back-to-back copies of
/// `bytes`, 200 to a submit, so the queue is rarely empty. An idle GPU
/// clocks down, and building a shape's weights leaves it idle; the
/// benched runs themselves do not keep it busy (each waits for its read
/// back). Runs bu and bv (an H100) logged the SM clock at 345-900 of
/// 1,980 MHz through timings made that way, and at 1,980 through a
/// decode, whose queue is never empty.
fn heat(rt: &Runtime, bytes: u64, time: Duration) {
    let start = Instant::now();
    while start.elapsed() < time {
        if let Err(e) = rt.copy_bandwidth(bytes, 200) {
            eprintln!("heating the GPU: {e}");
            return;
        }
    }
}

/// What every decode GEMV row of a bench run shares: the least bytes of
/// weights a run reads, the device's copy bandwidth (GB/s) and how long
/// to heat the GPU before the timings.
#[derive(Clone, Copy)]
struct StreamSetup {
    spill: u64,
    copy_gb_s: f64,
    heat_for: Duration,
}

/// Benches the decode GEMV of `form` at `n` x `k`: `copies` of it over
/// distinct weights (at least `setup.spill` bytes in all, so that they
/// come from memory rather than a cache) per run, in one pass and then
/// the sum of their per-dispatch GPU times, each after [`heat`]. Prints
/// the median GB/s of each and its share of `setup.copy_gb_s`.
fn stream_gemv(c: &mut Criterion, rt: &Runtime, form: GemvForm, n: u64, k: u64, setup: &StreamSetup) {
    let StreamSetup { spill, copy_gb_s, heat_for } = *setup;
    let form_name = match form {
        GemvForm::Q4 => "q4",
        GemvForm::Q4Swiglu => "q4 swiglu",
        GemvForm::F32 => "f32",
        GemvForm::F32Swiglu => "f32 swiglu",
        GemvForm::F32Qkv => "f32 qkv",
    };
    let name = format!("stream {form_name} n{n} k{k}");
    // `ETWGPU_BENCH_ONLY=TEXT`: only the rows whose name contains it.
    if std::env::var("ETWGPU_BENCH_ONLY").is_ok_and(|only| !name.contains(&only)) {
        return;
    }
    let bytes = gemv_bytes(form, n, k);
    let copies = spill.div_ceil(bytes).clamp(1, 64);
    let program = Program::from_bytes(ProgramBuilder::single_delegate(gemv_graph(form, n, k, copies)).to_bytes())
        .expect("crafted program parses");
    // Unfused: the fusion pass would merge linears of one input.
    let options = LoadOptions { fuse: false, ..LoadOptions::default() };
    let mut method = rt.load_with(&program, "forward", &options).expect("loads");
    method.set_profiling(true);
    let inputs = vec![ones(&[1, k])];
    method.run(&inputs).expect("warm-up run");
    let heat_bytes = 256 << 20;
    // The copies back to back in one pass, timestamps only around it
    // (`ProfileMode::ByKernel`), right after the heat: what the
    // timestamps between dispatches add to the per-dispatch figure below
    // (run bo found the f32 rows ~30 us a dispatch over their bytes).
    heat(rt, heat_bytes, heat_for);
    method.set_profile_mode(ProfileMode::ByKernel);
    let mut one_pass = Vec::new();
    for _ in 0..20 {
        method.run(&inputs).expect("runs");
        one_pass.extend(method.profiled_total_nanos());
    }
    method.set_profile_mode(ProfileMode::PerDispatch);
    // Criterion's per-dispatch samples, after another heat.
    heat(rt, heat_bytes, heat_for / 2);
    let mut per_run = Vec::new();
    let mut group = c.benchmark_group("gemv");
    group
        .throughput(Throughput::BytesDecimal(bytes * copies))
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(20))
        .measurement_time(Duration::from_millis(60));
    group.bench_function(&name, |b| {
        b.iter_custom(|iters| {
            let mut total = 0.0;
            for _ in 0..iters {
                method.run(&inputs).expect("runs");
                let nanos: f64 = method.profile().iter().map(|r| r.nanos).sum();
                per_run.push(nanos);
                total += nanos;
            }
            Duration::from_secs_f64(total * 1e-9)
        })
    });
    group.finish();
    let report = |how: &str, mut nanos: Vec<f64>| {
        nanos.sort_by(f64::total_cmp);
        if let Some(&median) = nanos.get(nanos.len() / 2) {
            let gb_s = (bytes * copies) as f64 / median.max(1.0);
            eprintln!(
                "{name}{how}: {copies} copies, {:.2} us each, {gb_s:.1} GB/s, {:.1}% of copy bandwidth ({copy_gb_s:.1} GB/s)",
                median / copies as f64 * 1e-3,
                100.0 * gb_s / copy_gb_s
            );
        }
    };
    report("", per_run);
    report(", one pass", one_pass);
}

fn stream_gemvs(c: &mut Criterion, rt: &Runtime, large: bool) {
    let (copy_bytes, spill) = if large { (1 << 30, 256 << 20) } else { (16 << 20, 0) };
    let copy_gb_s = match rt.copy_bandwidth(copy_bytes, 10) {
        Ok(b) => b.gb_per_s,
        Err(e) => {
            eprintln!("copy bandwidth: {e}; skipping the decode GEMVs");
            return;
        }
    };
    eprintln!("copy bandwidth: {copy_gb_s:.1} GB/s");
    let shapes: &[(GemvForm, u64, u64)] = if large {
        // Llama-3.2-1B: q/o projections, k/v, gate/up, down, output head.
        &[
            (GemvForm::Q4, 2048, 2048),
            (GemvForm::Q4, 512, 2048),
            (GemvForm::Q4, 8192, 2048),
            (GemvForm::Q4Swiglu, 8192, 2048),
            (GemvForm::Q4, 2048, 8192),
            (GemvForm::Q4, 128_256, 2048),
            (GemvForm::F32, 2048, 2048),
            (GemvForm::F32, 512, 2048),
            (GemvForm::F32, 8192, 2048),
            (GemvForm::F32, 2048, 8192),
            (GemvForm::F32, 128_256, 2048),
            (GemvForm::F32Swiglu, 8192, 2048),
            (GemvForm::F32Qkv, 2048, 2048),
        ]
    } else {
        &[
            (GemvForm::Q4, 256, 512),
            (GemvForm::Q4, 40, 1024),
            (GemvForm::Q4Swiglu, 256, 512),
            (GemvForm::F32, 256, 512),
            (GemvForm::F32Swiglu, 256, 512),
            (GemvForm::F32Qkv, 256, 512),
        ]
    };
    let setup = StreamSetup { spill, copy_gb_s, heat_for: heat_time(large) };
    for &(form, n, k) in shapes {
        stream_gemv(c, rt, form, n, k, &setup);
    }
}

fn benches(c: &mut Criterion) {
    let Some(rt) = runtime() else { return };
    let large = std::env::var("ETWGPU_BENCH_LARGE").is_ok_and(|v| v == "1");
    stream_gemvs(c, &rt, large);
    let mut gemms = vec![(64, 64, 64), (256, 256, 256), (1, 1024, 1024)];
    if large {
        gemms.extend([(1024, 1024, 1024), (2048, 2048, 2048), (1, 4096, 4096)]);
    }
    for (m, k, n) in gemms {
        matmul(c, &rt, m, k, n);
    }
    let mut dq8 = vec![(1, 1024, 1024), (16, 1024, 1024)];
    if large {
        dq8.extend([(1, 2048, 2048), (1, 2048, 8192), (512, 2048, 2048)]);
    }
    for (m, k, n) in dq8 {
        dq8_linear(c, &rt, m, k, n);
    }
    softmax(c, &rt, 256, 1024);
    layer_norm(c, &rt, 256, 1024);
    if large {
        softmax(c, &rt, 4096, 4096);
        layer_norm(c, &rt, 4096, 4096);
    }
    decode_attention(c, &rt, 32, 8, 64, 2048);
    if large {
        decode_attention(c, &rt, 32, 8, 64, 8192);
        decode_attention(c, &rt, 32, 8, 128, 32_768);
    }
    conv2d(c, &rt, 8, 16, 32);
    if large {
        conv2d(c, &rt, 64, 64, 56);
    }
    for name in ["mlp", "transformer_block"] {
        fixture(c, &rt, name, 0);
    }
    for name in ["transformer_block", "llama_tiny_q4"] {
        fixture_load(c, &rt, name);
    }
    // Llama: call 0 is a 5-token prefill, call 1 a one-token decode step.
    for name in ["llama_tiny_fp32", "llama_tiny_q4"] {
        fixture(c, &rt, name, 0);
        fixture(c, &rt, name, 1);
    }
}

criterion_group!(name = main_benches; config = Criterion::default().sample_size(10); targets = benches);
criterion_main!(main_benches);
