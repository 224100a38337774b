//! Synthetic Llama-family programs: [`LlamaConfig::build`] writes the `.pte`
//! that ExecuTorch's `export_llama -kv --use_sdpa_with_kv_cache --vulkan`
//! (dynamic shapes, the default) produces for a given shape, filled with
//! seeded random weights, so generation can be measured at real model
//! shapes (SmolLM2 135M, Llama 3.2 1B) without a checkpoint or Python.
//!
//! Over the house limit of about 600 lines: it is one builder that writes
//! the exporter's value table and op chain op by op in the order
//! `export_llama` emits them (embedding, each layer's norm, QKV, RoPE, SDPA
//! with the cache, output and feed-forward projections, the head), so it
//! can be read against the exported fixtures line by line (the `it` tests
//! compare them value by value); the layer, the weights and the value ids
//! it hands between them would have to cross files in lock step.
//!
//! The program has what the exported fixtures `llama_tiny_fp32` and
//! `llama_tiny_q4` have, and the `it` tests check it op by op against them
//! at the tiny shape:
//!
//! - `forward(tokens int64 [1, S], input_pos int64 [1]) -> logits float32
//!   [1, vocab]` of the last token, one Vulkan delegate with
//!   `require_dynamic_shapes=1`; `S` is at most `max_seq_len - 1` (the
//!   exporter's `token_dim` bound);
//! - in the delegate: the exporter's value table (constants in the
//!   exporter's order, then the inputs, then every op's new values in
//!   argument order, scalars shared by value), its op sequence (`sym_size`,
//!   embedding, `select_as_symint` + `add` + `slice_copy` of the RoPE
//!   tables, per layer `rms_norm`, q/k/v linears, `apply_rotary_emb`,
//!   `sdpa_with_kv_cache` with the KV caches as constants mutated in place,
//!   output linear, residual `add`, SiLU-gated FFN; then `select_copy` of
//!   the last token, `rms_norm` and the output linear);
//! - the metadata methods `get_max_seq_len`, `get_max_context_len`,
//!   `get_n_layers`, `get_vocab_size`, `use_kv_cache`,
//!   `use_sdpa_with_kv_cache`, `enable_dynamic_shape`.
//!
//! What differs from an export: the weights are random (uniform with
//! standard deviation 0.02, norms 1), so identical tensors (norms, caches)
//! share one named blob; the exporter's memory-planning hint `mem_obj_id` is
//! not reproduced (etwgpu plans memory itself); RoPE is the plain
//! (unscaled) Meta-Llama layout whatever the preset.

use etwgpu_format::generated::program::tensor_shape_dynamism::{DYNAMIC_BOUND, STATIC};
use etwgpu_format::generated::vk_graph::{vk_memory_layout as layout, vk_storage_type as storage};
use etwgpu_format::writer::{
    DelegateSpec, GraphBuilder, InstructionSpec, MethodSpec, PlanValueSpec, ProgramBuilder, RawValue, sha256_hex,
};
use etwgpu_format::{DType, ValueId, vulkan::VULKAN_BACKEND_ID};

use crate::sampler::Rng;

/// How the linear and embedding weights are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weights {
    /// fp32 (`-d fp32`, no `-qmode`): `aten.embedding` and `aten.linear`
    /// between `view_copy`s to and from 2-D.
    Fp32,
    /// 4-bit symmetric group-wise (`-qmode 4w -G g -E 4,g`):
    /// `et_vk.embedding_q4gsw` and `et_vk.linear_q4gsw` on the 3-D
    /// activations (OPS.md §4.1, §4.2).
    Q4 {
        /// Weights per scale, along the input dim.
        group_size: usize,
    },
}

/// The shape of a synthetic Llama-family model and how to fill it.
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    /// Model (embedding) dim.
    pub dim: usize,
    /// Transformer blocks.
    pub n_layers: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (grouped-query attention when fewer than `n_heads`).
    pub n_kv_heads: usize,
    /// FFN hidden dim.
    pub hidden_dim: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// `--max_seq_length`: one `forward` takes at most `max_seq_len - 1`
    /// tokens.
    pub max_seq_len: usize,
    /// `--max_context_length`: positions the KV cache and RoPE tables hold.
    pub max_context: usize,
    /// RoPE base frequency.
    pub rope_theta: f64,
    /// RMSNorm epsilon (stored as the exporter does, rounded to f32).
    pub norm_eps: f64,
    /// Weight storage.
    pub weights: Weights,
    /// Seed of the random weights.
    pub seed: u64,
}

/// Standard deviation of the random weights.
const WEIGHT_STD: f64 = 0.02;

impl LlamaConfig {
    /// The shape of the `llama_tiny_*` fixtures: dim 64, 2 layers, 4 heads /
    /// 2 KV heads, hidden 128, vocab 128, context 32; 4-bit group-32 weights
    /// (`llama_tiny_q4`; set [`Weights::Fp32`] for `llama_tiny_fp32`).
    pub fn tiny() -> Self {
        Self {
            dim: 64,
            n_layers: 2,
            n_heads: 4,
            n_kv_heads: 2,
            hidden_dim: 128,
            vocab: 128,
            max_seq_len: 32,
            max_context: 32,
            rope_theta: 10_000.0,
            norm_eps: 1e-5,
            weights: Weights::Q4 { group_size: 32 },
            seed: 0,
        }
    }

    /// A ~22M-parameter shape that a software renderer (lavapipe) runs in
    /// reasonable time: dim 384, 6 layers, 6 heads / 2 KV heads (head dim
    /// 64), hidden 1024, vocab 16384; 4-bit group-32 weights, 512-token
    /// calls, context 2048.
    pub fn small() -> Self {
        Self {
            dim: 384,
            n_layers: 6,
            n_heads: 6,
            n_kv_heads: 2,
            hidden_dim: 1024,
            vocab: 16_384,
            max_seq_len: 512,
            max_context: 2048,
            ..Self::tiny()
        }
    }

    /// SmolLM2-135M's shape: dim 576, 30 layers, 9 heads / 3 KV heads,
    /// hidden 1536, vocab 49152; 4-bit group-32 weights, 2048-token calls,
    /// context 8192.
    pub fn smollm2_135m() -> Self {
        Self {
            dim: 576,
            n_layers: 30,
            n_heads: 9,
            n_kv_heads: 3,
            hidden_dim: 1536,
            vocab: 49_152,
            max_seq_len: 2048,
            max_context: 8192,
            rope_theta: 100_000.0,
            ..Self::tiny()
        }
    }

    /// Llama 3.2 1B's shape: dim 2048, 16 layers, 32 heads / 8 KV heads,
    /// hidden 8192, vocab 128256; 4-bit group-32 weights, 2048-token calls,
    /// context 8192.
    pub fn llama32_1b() -> Self {
        Self {
            dim: 2048,
            n_layers: 16,
            n_heads: 32,
            n_kv_heads: 8,
            hidden_dim: 8192,
            vocab: 128_256,
            max_seq_len: 2048,
            max_context: 8192,
            rope_theta: 500_000.0,
            ..Self::tiny()
        }
    }

    /// Dim of one attention head.
    pub fn head_dim(&self) -> usize {
        self.dim / self.n_heads
    }

    /// Most tokens one `forward` call takes (the exporter's bound on the
    /// dynamic token dim, `max_seq_len - 1`).
    pub fn max_tokens_per_call(&self) -> usize {
        self.max_seq_len - 1
    }

    /// Parameters: embedding, per-layer attention, FFN and norms, final norm
    /// and output projection (untied).
    pub fn n_params(&self) -> u64 {
        let (d, f, v) = (self.dim as u64, self.hidden_dim as u64, self.vocab as u64);
        let kv = (self.n_kv_heads * self.head_dim()) as u64;
        let layer = 2 * d * d + 2 * d * kv + 3 * d * f + 2 * d;
        2 * v * d + self.n_layers as u64 * layer + d
    }

    /// Checks the shape against what the ops support (see [`build`](Self::build)).
    fn check(&self) {
        let c = self;
        assert!(
            c.dim > 0 && c.n_layers > 0 && c.n_heads > 0 && c.n_kv_heads > 0 && c.hidden_dim > 0 && c.vocab > 0,
            "LlamaConfig: every dim must be positive: {c:?}"
        );
        assert!(c.dim.is_multiple_of(c.n_heads), "LlamaConfig: n_heads {} must divide dim {}", c.n_heads, c.dim);
        assert!(
            c.n_heads.is_multiple_of(c.n_kv_heads),
            "LlamaConfig: n_kv_heads {} must divide n_heads {}",
            c.n_kv_heads,
            c.n_heads
        );
        assert!(c.head_dim().is_multiple_of(4), "LlamaConfig: head dim {} must be a multiple of 4", c.head_dim());
        assert!(
            c.max_seq_len >= 2 && c.max_seq_len <= c.max_context,
            "LlamaConfig: max_seq_len {} must be in 2..=max_context {}",
            c.max_seq_len,
            c.max_context
        );
        if let Weights::Q4 { group_size } = c.weights {
            assert!(
                group_size > 0
                    && group_size.is_multiple_of(8)
                    && c.dim.is_multiple_of(group_size)
                    && c.hidden_dim.is_multiple_of(group_size)
                    && c.dim.is_multiple_of(32),
                "LlamaConfig: 4-bit weights need a group size that is a multiple of 8 and divides dim {} and \
                 hidden_dim {}, and dim a multiple of 32; got group size {group_size}",
                c.dim,
                c.hidden_dim
            );
        }
        for (name, x) in [("vocab", c.vocab), ("hidden_dim", c.hidden_dim), ("max_context", c.max_context)] {
            assert!(u32::try_from(x).is_ok(), "LlamaConfig: {name} {x} does not fit a VK00 dim");
        }
    }

    /// Writes the program (see the module docs). The weights are generated
    /// straight into the buffers the result is assembled from and copied
    /// once, into it; the 4-bit 1B shape takes a few seconds in release.
    ///
    /// # Panics
    ///
    /// When the shape is unsupported: a zero dim, heads that don't divide
    /// the dims, a head dim not a multiple of 4 (SDPA, RoPE pairs),
    /// `max_seq_len` outside `2..=max_context`, or, for 4-bit weights, a
    /// group size that is not a multiple of 8 dividing dim and hidden dim,
    /// or a dim not a multiple of 32 (what ExecuTorch's WebGPU 4-bit kernels
    /// accept).
    pub fn build(&self) -> Vec<u8> {
        self.check();
        let mut e = Emitter::new(self);
        e.graph();
        e.program().into_bytes()
    }
}

/// A dim of a `view_copy` target: the live token count or a fixed size.
#[derive(Debug, Clone, Copy)]
enum Dim {
    Seq,
    N(usize),
}

/// The constants of one transformer block.
#[derive(Debug)]
struct Layer {
    attn_norm: ValueId,
    wq: Linear,
    wk: Linear,
    wv: Linear,
    wo: Linear,
    ffn_norm: ValueId,
    w1: Linear,
    w3: Linear,
    w2: Linear,
}

/// A linear's constants: fp32 `[N, K]`, or 4-bit packed `[N, K/2]` with
/// scales `[K/g, N_pad]`.
#[derive(Debug, Clone, Copy)]
struct Linear {
    weight: ValueId,
    scales: Option<ValueId>,
    n: usize,
}

/// Writes the graph in the exporter's value order.
struct Emitter<'a> {
    c: &'a LlamaConfig,
    g: GraphBuilder,
    rng: Rng,
    ints: Vec<(i64, ValueId)>,
    doubles: Vec<(u64, ValueId)>,
    bools: Vec<(bool, ValueId)>,
    /// The norm weight (all ones) and its key, shared by every norm.
    ones: (Vec<u8>, String),
    /// The key of an all-zero KV cache, shared by every cache.
    zeros_key: String,
    /// The live token count (`sym_size` of the tokens), once emitted.
    seq: Option<ValueId>,
}

fn f32_bytes(xs: impl Iterator<Item = f32>) -> Vec<u8> {
    xs.flat_map(f32::to_le_bytes).collect()
}

impl<'a> Emitter<'a> {
    fn new(c: &'a LlamaConfig) -> Self {
        let ones = f32_bytes((0..c.dim).map(|_| 1.0));
        let ones_key = sha256_hex(&ones);
        let zeros_key = sha256_hex(&vec![0u8; Self::cache_bytes(c)]);
        Self {
            c,
            g: GraphBuilder::new(),
            rng: Rng::new(c.seed),
            ints: Vec::new(),
            doubles: Vec::new(),
            bools: Vec::new(),
            ones: (ones, ones_key),
            zeros_key,
            seq: None,
        }
    }

    fn cache_bytes(c: &LlamaConfig) -> usize {
        c.max_context * c.n_kv_heads * c.head_dim() * 4
    }

    /// Tokens per call at the most (the dynamic token dim's bound).
    fn s(&self) -> usize {
        self.c.max_tokens_per_call()
    }

    // ---- values -------------------------------------------------------

    /// The exporter shares scalars by value: the first use creates one.
    fn int(&mut self, x: i64) -> ValueId {
        if let Some(&(_, id)) = self.ints.iter().find(|(v, _)| *v == x) {
            return id;
        }
        let id = self.g.int(x);
        self.ints.push((x, id));
        id
    }

    fn double(&mut self, x: f64) -> ValueId {
        if let Some(&(_, id)) = self.doubles.iter().find(|(v, _)| *v == x.to_bits()) {
            return id;
        }
        let id = self.g.double(x);
        self.doubles.push((x.to_bits(), id));
        id
    }

    fn bool(&mut self, x: bool) -> ValueId {
        if let Some(&(_, id)) = self.bools.iter().find(|(v, _)| *v == x) {
            return id;
        }
        let id = self.g.bool(x);
        self.bools.push((x, id));
        id
    }

    fn int_of(&mut self, x: usize) -> ValueId {
        self.int(i64::try_from(x).expect("dims fit i64"))
    }

    /// Sets a tensor's storage hints and staging dtype as the exporter
    /// writes them.
    fn hints(&mut self, id: ValueId, storage_type: u8, memory_layout: u8) {
        let Some(RawValue::Tensor(t)) = self.g.values.get_mut(id.idx()) else {
            unreachable!("hints are set on tensors")
        };
        t.storage_type = storage_type;
        t.memory_layout = memory_layout;
        t.staging_datatype = t.datatype;
    }

    /// A non-constant tensor, with the hints the exporter gives most
    /// (3-D texture, width-packed; etwgpu ignores them).
    fn tensor(&mut self, dtype: DType, dims: &[usize]) -> ValueId {
        let dims: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        let id = self.g.tensor(dtype, &dims);
        self.hints(id, storage::TEXTURE_3D, layout::TENSOR_WIDTH_PACKED);
        id
    }

    fn f32_tensor(&mut self, dims: &[usize]) -> ValueId {
        self.tensor(DType::F32, dims)
    }

    fn constant(&mut self, dtype: DType, dims: &[usize], bytes: Vec<u8>) -> ValueId {
        let dims: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        let id = self.g.constant_owned(dtype, &dims, bytes);
        self.hints(id, storage::DEFAULT_STORAGE, layout::DEFAULT_LAYOUT);
        id
    }

    fn keyed(&mut self, dims: &[usize], key: String, bytes: Vec<u8>) -> ValueId {
        let dims: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        let id = self.g.constant_keyed(DType::F32, &dims, key, bytes);
        self.hints(id, storage::DEFAULT_STORAGE, layout::DEFAULT_LAYOUT);
        id
    }

    // ---- random data ----------------------------------------------------

    /// `n` floats uniform in `[-a, a]` with standard deviation `WEIGHT_STD`.
    fn uniform(&mut self, n: usize) -> Vec<u8> {
        let a = (WEIGHT_STD * 3f64.sqrt()) as f32;
        let mut out = vec![0u8; n * 4];
        for chunk in out.chunks_mut(8) {
            let r = self.rng.next_u64();
            for (i, x) in chunk.chunks_exact_mut(4).enumerate() {
                let u = ((r >> (32 * i + 8)) as u32 & 0xFF_FFFF) as f32 / (1u32 << 24) as f32;
                x.copy_from_slice(&((2.0 * u - 1.0) * a).to_le_bytes());
            }
        }
        out
    }

    /// `n` random bytes: two uniform 4-bit values each.
    fn nibbles(&mut self, n: usize) -> Vec<u8> {
        let mut out = vec![0u8; n];
        for chunk in out.chunks_mut(8) {
            let r = self.rng.next_u64().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
        out
    }

    /// `rows x cols` scales, zero past column `used`: uniform 4-bit values
    /// (-8..7, standard deviation ~4.6) times these have standard deviation
    /// about `WEIGHT_STD`.
    fn scales(&mut self, rows: usize, cols: usize, used: usize) -> Vec<u8> {
        let base = WEIGHT_STD / 4.61;
        let mut out = Vec::with_capacity(rows * cols * 4);
        for _ in 0..rows {
            for col in 0..cols {
                let s = if col < used { base * (0.75 + 0.5 * self.rng.next_f64()) } else { 0.0 };
                out.extend_from_slice(&(s as f32).to_le_bytes());
            }
        }
        out
    }

    // ---- constants ------------------------------------------------------

    fn norm(&mut self) -> ValueId {
        let (bytes, key) = self.ones.clone();
        self.keyed(&[self.c.dim], key, bytes)
    }

    /// The weight of a linear from `k` to `n` features.
    fn linear_weight(&mut self, n: usize, k: usize) -> Linear {
        match self.c.weights {
            Weights::Fp32 => {
                let w = self.uniform(n * k);
                Linear { weight: self.constant(DType::F32, &[n, k], w), scales: None, n }
            }
            Weights::Q4 { group_size } => {
                let w = self.nibbles(n * k / 2);
                let weight = self.constant(DType::U8, &[n, k / 2], w);
                let n_pad = n.div_ceil(4) * 4;
                let s = self.scales(k / group_size, n_pad, n);
                let scales = Some(self.constant(DType::F32, &[k / group_size, n_pad], s));
                Linear { weight, scales, n }
            }
        }
    }

    fn layer(&mut self) -> Layer {
        let (d, f) = (self.c.dim, self.c.hidden_dim);
        let kv = self.c.n_kv_heads * self.c.head_dim();
        let attn_norm = self.norm();
        let (wq, wk, wv, wo) =
            (self.linear_weight(d, d), self.linear_weight(kv, d), self.linear_weight(kv, d), self.linear_weight(d, d));
        let ffn_norm = self.norm();
        let (w1, w3, w2) = (self.linear_weight(f, d), self.linear_weight(f, d), self.linear_weight(d, f));
        Layer { attn_norm, wq, wk, wv, wo, ffn_norm, w1, w3, w2 }
    }

    /// The RoPE table `[max_context, head_dim / 2]` of cosines or sines.
    fn rope_table(&self, sin: bool) -> Vec<u8> {
        let (dh, c) = (self.c.head_dim(), self.c.max_context);
        let freqs: Vec<f64> = (0..dh / 2).map(|i| 1.0 / self.c.rope_theta.powf((2 * i) as f64 / dh as f64)).collect();
        f32_bytes((0..c).flat_map(|pos| {
            freqs.iter().map(move |f| {
                let a = pos as f64 * f;
                (if sin { a.sin() } else { a.cos() }) as f32
            })
        }))
    }

    /// A RoPE table and the tensor it is prepacked into.
    fn rope(&mut self, sin: bool) -> (ValueId, ValueId) {
        let dims = [self.c.max_context, self.c.head_dim() / 2];
        let table = self.rope_table(sin);
        let t = self.constant(DType::F32, &dims, table);
        (t, self.f32_tensor(&dims))
    }

    /// A zero KV cache `[1, max_context, n_kv_heads, head_dim]`.
    fn cache(&mut self) -> ValueId {
        let dims = [1, self.c.max_context, self.c.n_kv_heads, self.c.head_dim()];
        self.keyed(&dims, self.zeros_key.clone(), vec![0; Self::cache_bytes(self.c)])
    }

    /// The embedding table: fp32 `[V, D]`, or 4-bit `[V, D/2]` with
    /// per-row scales `[V, D/g]`.
    fn embedding_weight(&mut self) -> Linear {
        let (v, d) = (self.c.vocab, self.c.dim);
        match self.c.weights {
            Weights::Fp32 => {
                let w = self.uniform(v * d);
                Linear { weight: self.constant(DType::F32, &[v, d], w), scales: None, n: d }
            }
            Weights::Q4 { group_size } => {
                let w = self.nibbles(v * d / 2);
                let weight = self.constant(DType::U8, &[v, d / 2], w);
                let s = self.scales(v, d / group_size, d / group_size);
                Linear { weight, scales: Some(self.constant(DType::F32, &[v, d / group_size], s)), n: d }
            }
        }
    }

    // ---- ops --------------------------------------------------------------

    fn op(&mut self, name: &str, args: &[ValueId]) {
        self.g.op(name, args);
    }

    /// An op with one new f32 output of shape `dims`, created after the
    /// other args.
    fn op_out(&mut self, name: &str, args: &[ValueId], dims: &[usize]) -> ValueId {
        let out = self.f32_tensor(dims);
        let args: Vec<ValueId> = args.iter().copied().chain([out]).collect();
        self.op(name, &args);
        out
    }

    /// `view_copy(x, dims)`: the target's new ints first, then the list,
    /// then the output.
    fn view(&mut self, x: ValueId, dims: &[Dim]) -> ValueId {
        let seq = self.seq.expect("sym_size comes first");
        let items: Vec<ValueId> = dims
            .iter()
            .map(|d| match d {
                Dim::Seq => seq,
                Dim::N(n) => self.int_of(*n),
            })
            .collect();
        let list = self.g.value_list(&items);
        let s = self.s();
        let shape: Vec<usize> = dims.iter().map(|d| if let Dim::N(n) = d { *n } else { s }).collect();
        self.op_out("aten.view_copy.default", &[x, list], &shape)
    }

    /// The linear op itself on `x`, output `dims`.
    fn linear_op(&mut self, x: ValueId, w: Linear, dims: &[usize]) -> ValueId {
        match (w.scales, self.c.weights) {
            (Some(scales), Weights::Q4 { group_size }) => {
                let gs = self.int_of(group_size);
                let bias = self.g.null();
                self.op_out("et_vk.linear_q4gsw.default", &[x, w.weight, scales, gs, bias], dims)
            }
            _ => {
                let bias = self.g.null();
                self.op_out("aten.linear.default", &[x, w.weight, bias], dims)
            }
        }
    }

    /// A linear from `k` features on `[1, S, ...]` activations: 4-bit
    /// weights take them as they are (`[1, S, N]` out); fp32 views them to
    /// `[S, k]` first (`[S, N]` out). The caller's next view fixes the rank.
    fn project(&mut self, x: ValueId, w: Linear, k: usize) -> ValueId {
        let s = self.s();
        match self.c.weights {
            Weights::Q4 { .. } => self.linear_op(x, w, &[1, s, w.n]),
            Weights::Fp32 => {
                let x2 = self.view(x, &[Dim::Seq, Dim::N(k)]);
                self.linear_op(x2, w, &[s, w.n])
            }
        }
    }

    fn rms_norm(&mut self, x: ValueId, w: ValueId, dims: &[usize]) -> ValueId {
        let eps = self.double(f64::from(self.c.norm_eps as f32));
        self.op_out("et_vk.rms_norm.default", &[x, w, eps], dims)
    }

    /// The whole graph, in the exporter's value and op order.
    fn graph(&mut self) {
        let c = self.c;
        let (d, f, v, s) = (c.dim, c.hidden_dim, c.vocab, self.s());
        let (hq, hkv, dh) = (c.n_heads, c.n_kv_heads, c.head_dim());
        let q4 = matches!(c.weights, Weights::Q4 { .. });

        // Constants. The fp32 export puts the embedding first, the 4-bit
        // one after the KV caches (its quantization pass adds it late).
        let mut embedding = (!q4).then(|| self.embedding_weight());
        let layers: Vec<Layer> = (0..c.n_layers).map(|_| self.layer()).collect();
        let norm = self.norm();
        let output = self.linear_weight(v, d);
        let caches: Vec<(ValueId, ValueId)> = (0..c.n_layers).map(|_| (self.cache(), self.cache())).collect();
        if q4 {
            embedding = Some(self.embedding_weight());
        }
        let embedding = embedding.expect("emitted above");
        let (cos, cos_packed) = self.rope(false);
        let (sin, sin_packed) = self.rope(true);

        // Inputs: int64 on the host, int32 on the device.
        let tokens = self.tensor(DType::I32, &[1, s]);
        let input_pos = self.tensor(DType::I32, &[1]);
        self.hints(input_pos, storage::DEFAULT_STORAGE, layout::DEFAULT_LAYOUT);

        self.op("et_vk.prepack.default", &[cos, cos_packed]);
        self.op("et_vk.prepack.default", &[sin, sin_packed]);
        let one = self.int(1);
        let seq = self.g.sym_int();
        self.op("sym_size.int", &[tokens, one, seq]);
        self.seq = Some(seq);
        let mut h = match embedding.scales {
            Some(scales) => {
                let Weights::Q4 { group_size } = c.weights else { unreachable!("scales are 4-bit") };
                let gs = self.int_of(group_size);
                let linear_packing = self.bool(true);
                self.op_out(
                    "et_vk.embedding_q4gsw.default",
                    &[embedding.weight, scales, gs, tokens, linear_packing],
                    &[1, s, d],
                )
            }
            None => {
                let padding_idx = self.int(-1);
                let no = self.bool(false);
                self.op_out("aten.embedding.default", &[embedding.weight, tokens, padding_idx, no, no], &[1, s, d])
            }
        };
        // RoPE rows input_pos[-1] .. input_pos[-1] + S.
        let (zero, last) = (self.int(0), self.int(-1));
        let first_pos = self.g.sym_int();
        self.op("et_vk.select_as_symint.default", &[input_pos, zero, last, first_pos]);
        let end_pos = self.g.sym_int();
        self.op("add", &[first_pos, seq, end_pos]);
        let cos_rows =
            self.op_out("aten.slice_copy.Tensor", &[cos_packed, zero, first_pos, end_pos, one], &[s, dh / 2]);
        let sin_rows =
            self.op_out("aten.slice_copy.Tensor", &[sin_packed, zero, first_pos, end_pos, one], &[s, dh / 2]);

        let mut start_pos = None;
        for (layer, &(k_cache, v_cache)) in layers.iter().zip(&caches) {
            let x = self.rms_norm(h, layer.attn_norm, &[1, s, d]);
            let q = self.project(x, layer.wq, d);
            let q = self.view(q, &[Dim::N(1), Dim::Seq, Dim::N(hq), Dim::N(dh)]);
            let k = self.project(x, layer.wk, d);
            let k = self.view(k, &[Dim::N(1), Dim::Seq, Dim::N(hkv), Dim::N(dh)]);
            let vv = self.project(x, layer.wv, d);
            let vv = self.view(vv, &[Dim::N(1), Dim::Seq, Dim::N(hkv), Dim::N(dh)]);
            let q_rot = self.f32_tensor(&[1, s, hq, dh]);
            let k_rot = self.f32_tensor(&[1, s, hkv, dh]);
            let rotated = self.g.value_list(&[q_rot, k_rot]);
            self.op("et_vk.apply_rotary_emb.default", &[q, k, cos_rows, sin_rows, rotated]);
            let start = match start_pos {
                Some(p) => p,
                None => {
                    let p = self.g.sym_int();
                    self.op("et_vk.select_as_symint.default", &[input_pos, zero, zero, p]);
                    start_pos = Some(p);
                    p
                }
            };
            let mask = self.g.null();
            let dropout = self.int(0);
            let causal = self.bool(true);
            let scale = self.g.null();
            let attn = self.op_out(
                "sdpa_with_kv_cache.default",
                &[q_rot, k_rot, vv, k_cache, v_cache, start, one, mask, dropout, causal, scale],
                &[1, s, hq, dh],
            );
            let attn = if q4 { self.view(attn, &[Dim::N(1), Dim::Seq, Dim::N(d)]) } else { attn };
            let o = self.project(attn, layer.wo, d);
            let o = self.view(o, &[Dim::N(1), Dim::Seq, Dim::N(d)]);
            let h2 = self.op_out("aten.add.Tensor", &[h, o, one], &[1, s, d]);

            let x2 = self.rms_norm(h2, layer.ffn_norm, &[1, s, d]);
            let a = self.project(x2, layer.w1, d);
            let a = self.view(a, &[Dim::N(1), Dim::Seq, Dim::N(f)]);
            let sig = self.op_out("aten.sigmoid.default", &[a], &[1, s, f]);
            let silu = self.op_out("aten.mul.Tensor", &[a, sig], &[1, s, f]);
            let b = self.project(x2, layer.w3, d);
            let b = self.view(b, &[Dim::N(1), Dim::Seq, Dim::N(f)]);
            let gated = self.op_out("aten.mul.Tensor", &[silu, b], &[1, s, f]);
            let down = self.project(gated, layer.w2, f);
            let down = self.view(down, &[Dim::N(1), Dim::Seq, Dim::N(d)]);
            h = self.op_out("aten.add.Tensor", &[h2, down, one], &[1, s, d]);
        }

        let last_token = self.int(-1);
        let h_last = self.op_out("aten.select_copy.int", &[h, one, last_token], &[1, d]);
        let x = self.rms_norm(h_last, norm, &[1, d]);
        let logits = self.linear_op(x, output, &[1, v]);
        self.g.inputs(&[tokens, input_pos]).outputs(&[logits]);
        self.g.compile_specs =
            vec![("require_dynamic_shapes".to_string(), vec![1]), ("force_fp16".to_string(), vec![0])];
    }

    /// The program: `forward` running the graph as one delegate (its named
    /// data moved, not copied), then the metadata methods.
    fn program(self) -> ProgramBuilder {
        let c = self.c;
        let mut g = self.g;
        let blob = g.blob();
        let mut p = ProgramBuilder::new();
        p.named_data = std::mem::take(&mut g.named_data);
        let tensor = |dtype: DType, sizes: &[usize], dynamism: i8| PlanValueSpec::Tensor {
            scalar_type: dtype.to_scalar_type(),
            sizes: sizes.iter().map(|&x| i32::try_from(x).expect("sizes fit i32")).collect(),
            dynamism,
            data_buffer_idx: 0,
        };
        p.methods.push(MethodSpec {
            name: "forward".to_string(),
            values: vec![
                tensor(DType::I64, &[1, c.max_tokens_per_call()], DYNAMIC_BOUND),
                tensor(DType::I64, &[1], STATIC),
                tensor(DType::F32, &[1, c.vocab], STATIC),
            ],
            inputs: vec![0, 1],
            outputs: vec![2],
            operators: Vec::new(),
            delegates: vec![DelegateSpec {
                backend_id: VULKAN_BACKEND_ID.to_string(),
                blob,
                compile_specs: std::mem::take(&mut g.compile_specs),
                inline: false,
            }],
            instructions: vec![InstructionSpec::Delegate { delegate_index: 0, args: vec![0, 1, 2] }],
        });
        let int = |x: usize| PlanValueSpec::Int(i64::try_from(x).expect("fits i64"));
        for (name, value) in [
            ("get_max_seq_len", int(c.max_seq_len)),
            ("get_max_context_len", int(c.max_context)),
            ("get_n_layers", int(c.n_layers)),
            ("get_vocab_size", int(c.vocab)),
            ("use_kv_cache", PlanValueSpec::Bool(true)),
            ("use_sdpa_with_kv_cache", PlanValueSpec::Bool(true)),
            ("enable_dynamic_shape", PlanValueSpec::Bool(true)),
        ] {
            p.methods.push(MethodSpec {
                name: name.to_string(),
                values: vec![value],
                outputs: vec![0],
                ..MethodSpec::default()
            });
        }
        p
    }
}
