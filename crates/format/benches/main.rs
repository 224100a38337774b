//! Benchmarks of `etwgpu-format`: opening and validating a large program,
//! in MB/s of program file.
//!
//! The program is the SmolLM2-135M fp32 export (`smollm2_fp32.pte` in
//! `$ETWGPU_SMOLLM2`, default `artifacts/smollm2/`, written by
//! `tools/export/smollm2.py`) when it is there; otherwise a synthetic
//! program of the same shape (10 of its 30 layers, fp32, about 250 MB),
//! built here with [`etwgpu_format::writer`] into a temporary file that is
//! removed afterwards (nothing is committed).
//!
//! - `open`: [`Program::open`], reading the file and parsing it.
//! - `parse`: [`Program::from_shared`] on bytes already in memory: the
//!   FlatBuffer walk and every bounds, size and reference check, which is
//!   what a web page or a memory map pays.

use std::path::PathBuf;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use etwgpu_format::program::SharedBytes;
use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
use etwgpu_format::{DType, Program, ValueId};

/// SmolLM2-135M's shape.
const HIDDEN: u64 = 576;
const KV_DIM: u64 = 192;
const INTERMEDIATE: u64 = 1536;
const VOCAB: u64 = 49152;
/// Layers of the synthetic program (SmolLM2 has 30).
const SYNTHETIC_LAYERS: usize = 10;

/// A fp32 weight `[rows, cols]` under its own key (zeros: the bytes are
/// not read by the parser, only bounds-checked).
fn weight(g: &mut GraphBuilder, key: String, rows: u64, cols: u64) -> ValueId {
    g.constant_keyed(DType::F32, &[rows, cols], key, vec![0; (rows * cols * 4) as usize])
}

/// `out = linear(x, w)` with a fresh output `[1, S, rows]`.
fn linear(g: &mut GraphBuilder, x: ValueId, w: ValueId, rows: u64) -> ValueId {
    let null = g.null();
    let out = g.tensor(DType::F32, &[1, 1, rows]);
    g.op("aten.linear.default", &[x, w, null, out]);
    out
}

/// A SmolLM2-shaped decoder: embedding, `layers` blocks of RMSNorm,
/// attention projections, SDPA with a KV cache and a SwiGLU MLP, the
/// head; about 14 MB of fp32 weights per layer plus 113 MB of embedding.
fn synthetic(layers: usize) -> Vec<u8> {
    let mut g = GraphBuilder::new();
    let tokens = g.tensor(DType::I64, &[1, 1]);
    let input_pos = g.tensor(DType::I64, &[1]);
    let embed = weight(&mut g, "embed".into(), VOCAB, HIDDEN);
    let mut x = g.tensor(DType::F32, &[1, 1, HIDDEN]);
    g.op("aten.embedding.default", &[embed, tokens, x]);
    let eps = g.double(1e-5);
    for l in 0..layers {
        let norm_w = g.constant_keyed(DType::F32, &[HIDDEN], format!("l{l}.norm"), vec![0; HIDDEN as usize * 4]);
        let h = g.tensor(DType::F32, &[1, 1, HIDDEN]);
        g.op("et_vk.rms_norm.default", &[x, norm_w, eps, h]);
        let [wq, wo] = ["q", "o"].map(|n| weight(&mut g, format!("l{l}.{n}"), HIDDEN, HIDDEN));
        let [wk, wv] = ["k", "v"].map(|n| weight(&mut g, format!("l{l}.{n}"), KV_DIM, HIDDEN));
        let q = linear(&mut g, h, wq, HIDDEN);
        let k = linear(&mut g, h, wk, KV_DIM);
        let v = linear(&mut g, h, wv, KV_DIM);
        let k_cache = g.tensor(DType::F32, &[1, 256, 3, 64]);
        let v_cache = g.tensor(DType::F32, &[1, 256, 3, 64]);
        let attn = g.tensor(DType::F32, &[1, 1, HIDDEN]);
        let (start, seq_len, zero, causal) = (g.sym_int(), g.int(1), g.double(0.0), g.bool(true));
        let (mask, scale) = (g.null(), g.null());
        g.op("aten.select_copy.int", &[input_pos, start]);
        g.op(
            "sdpa_with_kv_cache.default",
            &[q, k, v, k_cache, v_cache, start, seq_len, mask, zero, causal, scale, attn],
        );
        let o = linear(&mut g, attn, wo, HIDDEN);
        let alpha = g.int(1);
        let x1 = g.tensor(DType::F32, &[1, 1, HIDDEN]);
        g.op("aten.add.Tensor", &[x, o, alpha, x1]);
        let [wg, wu] = ["gate", "up"].map(|n| weight(&mut g, format!("l{l}.{n}"), INTERMEDIATE, HIDDEN));
        let wd = weight(&mut g, format!("l{l}.down"), HIDDEN, INTERMEDIATE);
        let gate = linear(&mut g, x1, wg, INTERMEDIATE);
        let up = linear(&mut g, x1, wu, INTERMEDIATE);
        let s = g.tensor(DType::F32, &[1, 1, INTERMEDIATE]);
        g.op("aten.sigmoid.default", &[gate, s]);
        let silu = g.tensor(DType::F32, &[1, 1, INTERMEDIATE]);
        g.op("aten.mul.Tensor", &[gate, s, silu]);
        let prod = g.tensor(DType::F32, &[1, 1, INTERMEDIATE]);
        g.op("aten.mul.Tensor", &[silu, up, prod]);
        let down = linear(&mut g, prod, wd, HIDDEN);
        x = g.tensor(DType::F32, &[1, 1, HIDDEN]);
        g.op("aten.add.Tensor", &[x1, down, alpha, x]);
    }
    let logits = linear(&mut g, x, embed, VOCAB);
    g.inputs(&[tokens, input_pos]).outputs(&[logits]);
    ProgramBuilder::single_delegate(g).into_bytes()
}

/// The program to bench: its path, a label, and whether it is a temporary
/// file to remove afterwards.
fn program() -> (PathBuf, String, bool) {
    let dir = std::env::var_os("ETWGPU_SMOLLM2")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../artifacts/smollm2"));
    let real = dir.join("smollm2_fp32.pte");
    if real.is_file() {
        return (real, "SmolLM2-135M fp32 export".into(), false);
    }
    eprintln!("no {}: benching a synthetic SmolLM2-shaped program instead", real.display());
    let path = std::env::temp_dir().join(format!("etwgpu-format-bench-{}.pte", std::process::id()));
    std::fs::write(&path, synthetic(SYNTHETIC_LAYERS)).expect("writes the synthetic program");
    (path, format!("synthetic SmolLM2 shape, {SYNTHETIC_LAYERS} layers fp32"), true)
}

fn benches(c: &mut Criterion) {
    let (path, label, temporary) = program();
    let bytes: SharedBytes = Arc::new(std::fs::read(&path).expect("reads the program"));
    let file_bytes = (*bytes).as_ref().len() as u64;
    // Fail here, not inside the timing loop, if the program does not parse.
    let program = Program::from_shared(bytes.clone(), Vec::new()).expect("the benched program parses");
    let n_ops: usize = program.methods.iter().flat_map(|m| m.vulkan_delegates()).map(|(_, _, g)| g.chain.len()).sum();
    eprintln!("{label}: {} MB, {n_ops} delegate ops", file_bytes / 1_000_000);
    drop(program);

    let mut group = c.benchmark_group(format!("format ({label})"));
    group.throughput(Throughput::Bytes(file_bytes));
    group.sample_size(10);
    group.bench_function("open", |b| b.iter(|| Program::open(&path).expect("opens")));
    group.bench_function("parse", |b| b.iter(|| Program::from_shared(bytes.clone(), Vec::new()).expect("parses")));
    group.finish();
    if temporary {
        let _ = std::fs::remove_file(&path);
    }
}

criterion_group!(name = main_benches; config = Criterion::default(); targets = benches);
criterion_main!(main_benches);
