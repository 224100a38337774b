//! Host-side benchmarks of `etwgpu-kernels`: how long the host rules take to
//! decode arguments, infer shapes and describe dispatches (the work redone
//! on every re-lowering, e.g. each decode step of a dynamic-shape LLM).
//! GPU kernel timings are in `cargo bench -p etwgpu-runtime`: this crate
//! never touches a GPU.
//!
//! - `lower aten.add.Tensor (broadcast)`, `lower aten.mm.default`: one op.
//! - `lower Llama-3.2-1B chain`: every op of the delegate chain a
//!   Llama-3.2-1B-shaped 4-bit export lowers (the one
//!   `etwgpu_llm::LlamaConfig::llama32_1b` writes: embedding, RoPE rows, 16
//!   decoder layers, head), for one decode token (`S = 1` at position 1000)
//!   and for a 128-token prompt. The throughput is in ops, so criterion's
//!   `Kelem/s` reads as thousands of ops lowered per second (1000 / that is
//!   µs per op).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use etwgpu_kernels::plan::Ctx;
use etwgpu_kernels::{ElemType, Graph, OpId, TensorInfo, Value, Vid, from_name};

/// A tiny graph: tensors and ints, enough for the single-op benches.
struct BenchGraph {
    tensors: Vec<Option<Vec<u64>>>,
    ints: Vec<i64>,
}

impl Graph for BenchGraph {
    fn value(&self, id: Vid) -> Value<'_> {
        match &self.tensors[id.0 as usize] {
            Some(shape) => {
                Value::Tensor(TensorInfo { id, dtype: ElemType::F32, shape, is_constant: false, q4_word_major: false })
            }
            None => Value::Int(self.ints[id.0 as usize]),
        }
    }
}

/// One value of a [`ChainGraph`].
enum Owned {
    Tensor(ElemType, Vec<u64>, bool),
    Int(i64),
    Double(f64),
    Bool(bool),
    IntList(Vec<i64>),
    List(Vec<Vid>),
    SymInt(i64),
    Null,
}

/// A graph of owned values with its chain of op calls, built the way the
/// exporter lays out a Llama decoder.
#[derive(Default)]
struct ChainGraph {
    values: Vec<Owned>,
    chain: Vec<(OpId, Vec<Vid>)>,
}

impl Graph for ChainGraph {
    fn value(&self, id: Vid) -> Value<'_> {
        match &self.values[id.0 as usize] {
            Owned::Tensor(dtype, shape, is_constant) => {
                Value::Tensor(TensorInfo { id, dtype: *dtype, shape, is_constant: *is_constant, q4_word_major: false })
            }
            Owned::Int(x) => Value::Int(*x),
            Owned::Double(x) => Value::Double(*x),
            Owned::Bool(x) => Value::Bool(*x),
            Owned::IntList(x) => Value::IntList(x),
            Owned::List(x) => Value::List(x),
            Owned::SymInt(x) => Value::SymInt(*x),
            Owned::Null => Value::Null,
        }
    }
}

/// Llama 3.2 1B's shape (`LlamaConfig::llama32_1b`): 4-bit group-32 weights.
const DIM: u64 = 2048;
const LAYERS: usize = 16;
const HEADS: u64 = 32;
const KV_HEADS: u64 = 8;
const HEAD_DIM: u64 = DIM / HEADS;
const HIDDEN: u64 = 8192;
const VOCAB: u64 = 128_256;
const CONTEXT: u64 = 8192;
const GROUP: u64 = 32;

impl ChainGraph {
    fn push(&mut self, v: Owned) -> Vid {
        self.values.push(v);
        Vid(self.values.len() as u32 - 1)
    }
    fn f32(&mut self, dims: &[u64]) -> Vid {
        self.push(Owned::Tensor(ElemType::F32, dims.to_vec(), false))
    }
    fn constant(&mut self, dtype: ElemType, dims: &[u64]) -> Vid {
        self.push(Owned::Tensor(dtype, dims.to_vec(), true))
    }
    fn op(&mut self, name: &str, args: &[Vid]) {
        self.chain.push((from_name(name).expect("registered"), args.to_vec()));
    }
    /// An op with a new f32 output `dims`, appended last.
    fn op_out(&mut self, name: &str, args: &[Vid], dims: &[u64]) -> Vid {
        let out = self.f32(dims);
        let args: Vec<Vid> = args.iter().copied().chain([out]).collect();
        self.op(name, &args);
        out
    }
    /// A 4-bit weight from `k` to `n` features: nibbles and scales.
    fn q4_weight(&mut self, n: u64, k: u64) -> (Vid, Vid) {
        (self.constant(ElemType::U8, &[n, k / 2]), self.constant(ElemType::F32, &[k / GROUP, n.div_ceil(4) * 4]))
    }
    fn linear(&mut self, x: Vid, (w, scales): (Vid, Vid), dims: &[u64]) -> Vid {
        let (gs, bias) = (self.push(Owned::Int(GROUP as i64)), self.push(Owned::Null));
        self.op_out("et_vk.linear_q4gsw.default", &[x, w, scales, gs, bias], dims)
    }
    fn view(&mut self, x: Vid, dims: &[u64]) -> Vid {
        let size = self.push(Owned::IntList(dims.iter().map(|&d| d as i64).collect()));
        self.op_out("aten.view_copy.default", &[x, size], dims)
    }
    fn rms_norm(&mut self, x: Vid, dims: &[u64]) -> Vid {
        let (w, eps) = (self.constant(ElemType::F32, &[DIM]), self.push(Owned::Double(1e-5)));
        self.op_out("et_vk.rms_norm.default", &[x, w, eps], dims)
    }

    /// The chain for `s` tokens at position `pos`.
    fn llama_1b(s: u64, pos: i64) -> Self {
        let mut g = Self::default();
        let tokens = g.push(Owned::Tensor(ElemType::I32, vec![1, s], false));
        let input_pos = g.push(Owned::Tensor(ElemType::I32, vec![1], false));
        let (one, zero, last) = (g.push(Owned::Int(1)), g.push(Owned::Int(0)), g.push(Owned::Int(-1)));
        let rope = [0, 1].map(|_| g.constant(ElemType::F32, &[CONTEXT, HEAD_DIM / 2]));
        let packed = [0, 1].map(|_| g.f32(&[CONTEXT, HEAD_DIM / 2]));
        for (table, into) in rope.iter().zip(&packed) {
            g.op("et_vk.prepack.default", &[*table, *into]);
        }
        let seq = g.push(Owned::SymInt(s as i64));
        g.op("sym_size.int", &[tokens, one, seq]);
        let (ew, es) = (g.constant(ElemType::U8, &[VOCAB, DIM / 2]), g.constant(ElemType::F32, &[VOCAB, DIM / GROUP]));
        let (gs, packing) = (g.push(Owned::Int(GROUP as i64)), g.push(Owned::Bool(true)));
        let mut h = g.op_out("et_vk.embedding_q4gsw.default", &[ew, es, gs, tokens, packing], &[1, s, DIM]);
        let first_pos = g.push(Owned::SymInt(pos));
        g.op("et_vk.select_as_symint.default", &[input_pos, zero, last, first_pos]);
        let end_pos = g.push(Owned::SymInt(pos + s as i64));
        g.op("add", &[first_pos, seq, end_pos]);
        let [cos, sin] =
            packed.map(|t| g.op_out("aten.slice_copy.Tensor", &[t, zero, first_pos, end_pos, one], &[s, HEAD_DIM / 2]));
        let start = g.push(Owned::SymInt(pos));
        g.op("et_vk.select_as_symint.default", &[input_pos, zero, zero, start]);
        let kv = KV_HEADS * HEAD_DIM;
        for _ in 0..LAYERS {
            let [k_cache, v_cache] = [0, 1].map(|_| g.constant(ElemType::F32, &[1, CONTEXT, KV_HEADS, HEAD_DIM]));
            let x = g.rms_norm(h, &[1, s, DIM]);
            let (wq, wk, wv, wo) =
                (g.q4_weight(DIM, DIM), g.q4_weight(kv, DIM), g.q4_weight(kv, DIM), g.q4_weight(DIM, DIM));
            let q = g.linear(x, wq, &[1, s, DIM]);
            let q = g.view(q, &[1, s, HEADS, HEAD_DIM]);
            let k = g.linear(x, wk, &[1, s, kv]);
            let k = g.view(k, &[1, s, KV_HEADS, HEAD_DIM]);
            let v = g.linear(x, wv, &[1, s, kv]);
            let v = g.view(v, &[1, s, KV_HEADS, HEAD_DIM]);
            let (q_rot, k_rot) = (g.f32(&[1, s, HEADS, HEAD_DIM]), g.f32(&[1, s, KV_HEADS, HEAD_DIM]));
            let rotated = g.push(Owned::List(vec![q_rot, k_rot]));
            g.op("et_vk.apply_rotary_emb.default", &[q, k, cos, sin, rotated]);
            let (mask, dropout, causal, scale) =
                (g.push(Owned::Null), g.push(Owned::Int(0)), g.push(Owned::Bool(true)), g.push(Owned::Null));
            let attn = g.op_out(
                "sdpa_with_kv_cache.default",
                &[q_rot, k_rot, v, k_cache, v_cache, start, one, mask, dropout, causal, scale],
                &[1, s, HEADS, HEAD_DIM],
            );
            let attn = g.view(attn, &[1, s, DIM]);
            let o = g.linear(attn, wo, &[1, s, DIM]);
            let o = g.view(o, &[1, s, DIM]);
            let h2 = g.op_out("aten.add.Tensor", &[h, o, one], &[1, s, DIM]);
            let x2 = g.rms_norm(h2, &[1, s, DIM]);
            let (w1, w3, w2) = (g.q4_weight(HIDDEN, DIM), g.q4_weight(HIDDEN, DIM), g.q4_weight(DIM, HIDDEN));
            let a = g.linear(x2, w1, &[1, s, HIDDEN]);
            let a = g.view(a, &[1, s, HIDDEN]);
            let sig = g.op_out("aten.sigmoid.default", &[a], &[1, s, HIDDEN]);
            let silu = g.op_out("aten.mul.Tensor", &[a, sig], &[1, s, HIDDEN]);
            let b = g.linear(x2, w3, &[1, s, HIDDEN]);
            let b = g.view(b, &[1, s, HIDDEN]);
            let gated = g.op_out("aten.mul.Tensor", &[silu, b], &[1, s, HIDDEN]);
            let down = g.linear(gated, w2, &[1, s, DIM]);
            let down = g.view(down, &[1, s, DIM]);
            h = g.op_out("aten.add.Tensor", &[h2, down, one], &[1, s, DIM]);
        }
        let h_last = g.op_out("aten.select_copy.int", &[h, one, last], &[1, DIM]);
        let x = g.rms_norm(h_last, &[1, DIM]);
        let head = g.q4_weight(VOCAB, DIM);
        g.linear(x, head, &[1, VOCAB]);
        g
    }

    /// Lowers every op of the chain once.
    fn lower_all(&self) -> usize {
        let mut n_steps = 0;
        for (op, args) in &self.chain {
            let lowered = op.lower(&Ctx::new(self, args)).unwrap_or_else(|e| panic!("{}: {e}", op.name()));
            n_steps += lowered.steps.len();
        }
        n_steps
    }
}

fn bench_op(c: &mut Criterion, name: &str, op: &str, g: &BenchGraph, args: &[Vid]) {
    let id = from_name(op).expect("op is registered");
    c.bench_function(name, |b| b.iter(|| id.lower(&Ctx::new(g, args)).expect("lowers")));
}

fn benches(c: &mut Criterion) {
    // add [64, 1, 512] + [64, 512] -> [64, 64, 512] (broadcasting), alpha 1.
    let g = BenchGraph {
        tensors: vec![Some(vec![64, 1, 512]), Some(vec![64, 512]), None, Some(vec![64, 64, 512])],
        ints: vec![0, 0, 1, 0],
    };
    bench_op(c, "lower aten.add.Tensor (broadcast)", "aten.add.Tensor", &g, &[Vid(0), Vid(1), Vid(2), Vid(3)]);
    // mm [128, 256] x [256, 64].
    let g =
        BenchGraph { tensors: vec![Some(vec![128, 256]), Some(vec![256, 64]), Some(vec![128, 64])], ints: vec![0; 3] };
    bench_op(c, "lower aten.mm.default", "aten.mm.default", &g, &[Vid(0), Vid(1), Vid(2)]);

    let mut group = c.benchmark_group("lower Llama-3.2-1B chain");
    for (label, s, pos) in [("decode (S = 1)", 1, 1000), ("prefill (S = 128)", 128, 0)] {
        let g = ChainGraph::llama_1b(s, pos);
        let n_steps = g.lower_all();
        eprintln!("Llama-3.2-1B chain, {label}: {} ops, {n_steps} steps", g.chain.len());
        group.throughput(Throughput::Elements(g.chain.len() as u64));
        group.bench_function(label, |b| b.iter(|| g.lower_all()));
    }
    group.finish();
}

criterion_group!(name = main_benches; config = Criterion::default().sample_size(20); targets = benches);
criterion_main!(main_benches);
