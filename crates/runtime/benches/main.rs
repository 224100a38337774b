//! GPU benchmarks of `etwgpu-runtime`: GEMM, GEMV, softmax, layer norm
//! and decode attention over a KV cache at a few shapes, and whole fixture
//! runs.
//!
//! Timing uses `iter_custom`: each sample is the wall time of `run`, which
//! uploads the inputs, submits once and waits for the queue (read-back
//! included). Throughput is reported as elements per second where an
//! element is one floating-point operation (GEMM, GEMV) or one byte moved
//! (softmax, layer norm, the cache read by decode attention). Without an adapter the benches print a note and
//! measure nothing.
//!
//! `ETWGPU_BENCH_LARGE=1` adds shapes sized for a real GPU;
//! `ETWGPU_FIXTURES=DIR` points at `test_data/fixtures` when the benches run
//! away from the source tree.

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
use etwgpu_format::{DType, Program};
use etwgpu_runtime::{LoadedMethod, Runtime, Tensor};

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

fn benches(c: &mut Criterion) {
    let Some(rt) = runtime() else { return };
    let large = std::env::var("ETWGPU_BENCH_LARGE").is_ok_and(|v| v == "1");
    let mut gemms = vec![(64, 64, 64), (256, 256, 256), (1, 1024, 1024)];
    if large {
        gemms.extend([(1024, 1024, 1024), (2048, 2048, 2048), (1, 4096, 4096)]);
    }
    for (m, k, n) in gemms {
        matmul(c, &rt, m, k, n);
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
