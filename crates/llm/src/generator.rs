//! [`Generator`]: prefill then token-by-token decode over a loaded
//! Llama-family program, with sampling, stop tokens and streaming.
//!
//! Every step is `async` underneath (the web awaits each read-back); on
//! native targets the blocking methods wrap their `_async` twins.

use std::time::Duration;

use web_time::Instant;

use etwgpu_format::{DType, PlanValue, Program};
use etwgpu_runtime::{LoadedMethod, Runtime, Tensor};

use crate::error::{Error, Result};
use crate::sampler::Sampler;

/// The model's constants, read from `export_llama`'s metadata methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// Most tokens one `forward` call takes (`get_max_seq_len`).
    pub max_seq_len: usize,
    /// Most tokens the KV cache holds (`get_max_context_len`; falls back to
    /// `max_seq_len` when absent, as older exports lack it).
    pub max_context_len: usize,
    /// Vocabulary size (`get_vocab_size`), if exported.
    pub vocab_size: Option<usize>,
    /// Beginning-of-sequence token (`get_bos_id`), if exported.
    pub bos_id: Option<u32>,
    /// End-of-sequence tokens (`get_eos_ids`), empty if not exported.
    pub eos_ids: Vec<u32>,
}

/// The constant int outputs of metadata method `name`, or `None` when the
/// program lacks it.
fn metadata_ints(program: &Program, name: &'static str) -> Result<Option<Vec<i64>>> {
    let Some(m) = program.method(name) else { return Ok(None) };
    let mut out = Vec::new();
    for &o in &m.outputs {
        match m.values.get(o) {
            Some(PlanValue::Int(v)) => out.push(*v),
            Some(PlanValue::IntList(v)) => out.extend_from_slice(v),
            Some(other) => return Err(Error::BadMetadata { method: name, found: other.kind() }),
            None => return Err(Error::BadMetadata { method: name, found: "missing" }),
        }
    }
    Ok(Some(out))
}

fn metadata_int(program: &Program, name: &'static str) -> Result<Option<i64>> {
    match metadata_ints(program, name)? {
        None => Ok(None),
        Some(v) if v.len() == 1 => Ok(Some(v[0])),
        Some(_) => Err(Error::BadMetadata { method: name, found: "int list" }),
    }
}

fn to_usize(name: &'static str, v: i64) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::BadMetadata { method: name, found: "negative int" })
}

fn to_token(name: &'static str, v: i64) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::BadMetadata { method: name, found: "out-of-range int" })
}

impl Metadata {
    /// Reads the metadata methods of `program`. `get_max_seq_len` is
    /// required; the rest are optional.
    pub fn read(program: &Program) -> Result<Self> {
        const SEQ: &str = "get_max_seq_len";
        const CTX: &str = "get_max_context_len";
        const VOCAB: &str = "get_vocab_size";
        const BOS: &str = "get_bos_id";
        const EOS: &str = "get_eos_ids";
        let max_seq_len = to_usize(SEQ, metadata_int(program, SEQ)?.ok_or(Error::MissingMetadata { method: SEQ })?)?;
        let max_context_len = match metadata_int(program, CTX)? {
            Some(v) => to_usize(CTX, v)?,
            None => max_seq_len,
        };
        let vocab_size = metadata_int(program, VOCAB)?.map(|v| to_usize(VOCAB, v)).transpose()?;
        let bos_id = metadata_int(program, BOS)?.map(|v| to_token(BOS, v)).transpose()?;
        let eos_ids = metadata_ints(program, EOS)?
            .unwrap_or_default()
            .into_iter()
            .map(|v| to_token(EOS, v))
            .collect::<Result<Vec<_>>>()?;
        if max_seq_len == 0 {
            return Err(Error::BadMetadata { method: SEQ, found: "zero" });
        }
        Ok(Self { max_seq_len, max_context_len, vocab_size, bos_id, eos_ids })
    }
}

/// Options of [`Generator::generate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerateOptions {
    /// Most tokens to generate.
    pub max_new_tokens: usize,
    /// Extra tokens that stop generation (emitted, then stop).
    pub stop_tokens: Vec<u32>,
    /// Whether the model's EOS ids stop generation too.
    pub stop_at_eos: bool,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        Self { max_new_tokens: 128, stop_tokens: Vec::new(), stop_at_eos: true }
    }
}

/// Counts and timings of one [`Generator::generate`] call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenerationStats {
    /// Prompt tokens prefilled.
    pub prompt_tokens: usize,
    /// Tokens generated (sampled), including a final stop token.
    pub generated_tokens: usize,
    /// Single-token decode calls run.
    pub decode_steps: usize,
    /// Wall time of the prefill (including sampling the first token).
    pub prefill_time: Duration,
    /// Wall time of the decode steps.
    pub decode_time: Duration,
    /// Whether a stop token ended generation.
    pub stopped: bool,
}

impl GenerationStats {
    /// Prompt tokens per second of the prefill.
    pub fn prefill_tokens_per_s(&self) -> f64 {
        self.prompt_tokens as f64 / self.prefill_time.as_secs_f64().max(1e-9)
    }

    /// Decode steps per second.
    pub fn decode_tokens_per_s(&self) -> f64 {
        self.decode_steps as f64 / self.decode_time.as_secs_f64().max(1e-9)
    }
}

/// The last `vocab` values of float `logits` as f32 (with full logits,
/// `[1, S, vocab]`, the last row is the last token's), converted straight
/// from their bytes: a prompt's call returns after this, and widening all
/// of a 128,256-entry row to f64 and back cost about as much again as the
/// read-back itself. `None` for an empty row or fewer values than `vocab`.
fn last_row_f32(logits: &Tensor, vocab: usize) -> Option<Vec<f32>> {
    let size = logits.dtype.size_bytes();
    let n = logits.bytes.len() / size;
    if vocab == 0 || n < vocab {
        return None;
    }
    let row = logits.bytes.get((n - vocab) * size..n * size)?.chunks_exact(size);
    Some(match logits.dtype {
        DType::F32 => row.map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
        DType::F16 => row.map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
        DType::BF16 => row.map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
        DType::F64 => {
            row.map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) as f32).collect()
        }
        _ => return None,
    })
}

/// What [`Generator::feed`] gives for the last token fed.
enum Fed {
    /// Its logits.
    Logits(Vec<f32>),
    /// The argmax of its logits, taken on the device.
    Token(u32),
}

impl Fed {
    fn into_logits(self) -> Vec<f32> {
        match self {
            Fed::Logits(l) => l,
            Fed::Token(_) => unreachable!("fed without greedy, so logits come back"),
        }
    }

    /// The next token: the device's argmax, or `sampler`'s pick.
    fn pick(self, sampler: &mut Sampler) -> u32 {
        match self {
            Fed::Logits(l) => sampler.sample(&l),
            Fed::Token(t) => t,
        }
    }
}

/// Generation over a loaded `forward` method whose KV cache persists across
/// calls: the generator tracks the next position (`input_pos`).
#[derive(Debug)]
pub struct Generator {
    forward: LoadedMethod,
    meta: Metadata,
    pos: usize,
    /// Whether `forward` returns token ids (device argmax) instead of
    /// logits.
    argmax: bool,
}

impl Generator {
    /// Loads `forward` of `program` on `runtime` and reads its metadata.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new(runtime: &Runtime, program: &Program) -> Result<Self> {
        Self::with_progress(runtime, program, &mut |_| {})
    }

    /// Like [`Generator::new`], reporting the load's progress (weights
    /// uploaded, pipelines compiled) to `progress`.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn with_progress(
        runtime: &Runtime,
        program: &Program,
        progress: &mut dyn FnMut(etwgpu_runtime::LoadProgress),
    ) -> Result<Self> {
        Self::with_options(runtime, program, &Self::default_load_options(), progress)
    }

    /// Like [`Generator::with_progress`], loading with `options` instead of
    /// [`Generator::default_load_options`].
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use etwgpu_llm::Generator;
    /// use etwgpu_runtime::{LoadOptions, Runtime};
    ///
    /// let rt = Runtime::new()?;
    /// let program = etwgpu_format::Program::open("llama.pte")?;
    /// // Keep the KV cache in float32, exactly as exported.
    /// let options = LoadOptions { kv_cache_f16: false, ..Generator::default_load_options() };
    /// let generator = Generator::with_options(&rt, &program, &options, &mut |_| {})?;
    /// assert!(!generator.kv_cache_f16());
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(not(target_arch = "wasm32"))]
    pub fn with_options(
        runtime: &Runtime,
        program: &Program,
        options: &etwgpu_runtime::LoadOptions,
        progress: &mut dyn FnMut(etwgpu_runtime::LoadProgress),
    ) -> Result<Self> {
        pollster::block_on(Self::load_async(runtime, program, options, progress))
    }

    /// How [`Generator::new`] loads `forward`: fused, with float32 KV
    /// caches stored as float16 where the device has SHADER_F16 (half the
    /// cache memory and attention reads; the math stays float32).
    pub fn default_load_options() -> etwgpu_runtime::LoadOptions {
        etwgpu_runtime::LoadOptions { kv_cache_f16: true, ..etwgpu_runtime::LoadOptions::default() }
    }

    /// [`Generator::with_progress`] without blocking.
    pub async fn new_async(
        runtime: &Runtime,
        program: &Program,
        progress: &mut dyn FnMut(etwgpu_runtime::LoadProgress),
    ) -> Result<Self> {
        Self::load_async(runtime, program, &Self::default_load_options(), progress).await
    }

    /// [`Generator::with_options`] without blocking.
    pub async fn load_async(
        runtime: &Runtime,
        program: &Program,
        options: &etwgpu_runtime::LoadOptions,
        progress: &mut dyn FnMut(etwgpu_runtime::LoadProgress),
    ) -> Result<Self> {
        let meta = Metadata::read(program)?;
        let forward = runtime
            .load_async(program, "forward", options, progress)
            .await
            .map_err(|source| Error::Runtime { during: "loading method forward", source })?;
        Ok(Self { forward, meta, pos: 0, argmax: false })
    }

    /// Whether `forward` was loaded on the trusted path
    /// (`LoadOptions::trusted_shaders`, or `ETWGPU_TRUSTED_SHADERS=1` with
    /// the default options, on Vulkan): its host-checked kernels run without
    /// index clamps.
    pub fn trusted_shaders(&self) -> bool {
        self.forward.trusted_shaders()
    }

    /// Whether `forward`'s one-row 4-bit GEMVs take int8 activations
    /// (`LoadOptions::int8_activations`, or `ETWGPU_INT8_ACTIVATIONS=1`
    /// with the default options).
    pub fn int8_activations(&self) -> bool {
        self.forward.int8_activations()
    }

    /// Whether the KV caches are stored as float16 (see
    /// [`Generator::default_load_options`]).
    pub fn kv_cache_f16(&self) -> bool {
        self.forward.kv_cache_f16()
    }

    /// The model's metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.meta
    }

    /// Tokens in the KV cache: the next `input_pos`.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Host time per stage of the `forward` runs since load or the last
    /// [`reset_run_times`](Self::reset_run_times).
    pub fn run_times(&self) -> etwgpu_runtime::RunTimes {
        self.forward.run_times()
    }

    /// Zeroes the counters of [`run_times`](Self::run_times).
    pub fn reset_run_times(&mut self) {
        self.forward.reset_run_times();
    }

    /// Turns the step timeline of `forward` on for its next `runs` runs (or
    /// off with `None`): GPU timestamps around each decode step's chain and
    /// device argmax as the steps run ahead
    /// ([`etwgpu_runtime::LoadedMethod::set_step_timeline`]).
    pub fn set_step_timeline(&mut self, runs: Option<u32>) -> Result<()> {
        self.forward
            .set_step_timeline(runs)
            .map_err(|source| Error::Runtime { during: "setting the step timeline", source })
    }

    /// The steps the timeline holds, oldest first (it stays on, emptied).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn take_step_timeline(&mut self) -> Result<Vec<etwgpu_runtime::StepTimes>> {
        pollster::block_on(self.forward.take_step_timeline_async())
            .map_err(|source| Error::Runtime { during: "reading the step timeline", source })
    }

    /// Dispatches one `forward` run records at the current shapes.
    pub fn n_dispatches(&self) -> usize {
        self.forward.n_dispatches()
    }

    /// Starts a new sequence (later calls overwrite the KV cache from 0).
    pub fn reset(&mut self) {
        self.pos = 0;
    }

    /// Runs the decode path once, as [`Generator::generate`] does (a
    /// one-token call and two greedy decode steps, their tokens dropped),
    /// then starts a new sequence and clears [`Generator::run_times`]. A
    /// load's first decode steps lower the decode chain, build its plan,
    /// model its position and create its pipelines (tens of milliseconds
    /// on a 30-layer model); a caller that streams replies (`etwgpu
    /// generate`, `chat`, `serve`) pays that here, at load, instead of
    /// between a reply's first tokens, as llama.cpp's warm-up run does.
    /// The decode attention changes kernels past
    /// [`etwgpu_runtime::GEMV_ATTN_AUTO_KEYS`] keys of context (on devices
    /// that take the route below it, with the default route options:
    /// `LoadedMethod::gemv_attention_keys`), so where the context reaches
    /// past that, the same three steps run again from that position: a reply's
    /// first crossing then swaps to a chain lowered, planned and modelled
    /// here instead of lowering it (~11 ms on SmolLM2-135M). The KV cache
    /// rows it writes are overwritten by the next sequence (the steps past
    /// the bound attend to whatever rows the cache holds). A program whose
    /// context holds fewer than the four positions this takes is left as
    /// it is.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn warm_up_decode(&mut self) -> Result<()> {
        if self.meta.max_context_len < 4 {
            return Ok(());
        }
        let mut greedy = Sampler::new(crate::sampler::SamplerConfig::default())?;
        let options = GenerateOptions { max_new_tokens: 3, stop_tokens: Vec::new(), stop_at_eos: false };
        // Where the load's decode attention changes route by the live
        // context (0: it does not), the steps past that bound too.
        let bound = self.forward.gemv_attention_keys() as usize;
        let starts: &[usize] = if bound > 0 && bound + 4 <= self.meta.max_context_len { &[0, bound] } else { &[0] };
        for &start in starts {
            self.pos = start;
            self.generate(&[0], &options, &mut greedy, |_| {})?;
        }
        self.reset();
        self.reset_run_times();
        Ok(())
    }

    fn check_tokens(&self, tokens: &[u32]) -> Result<()> {
        if let Some(vocab) = self.meta.vocab_size
            && let Some(&token) = tokens.iter().find(|&&t| t as usize >= vocab)
        {
            return Err(Error::TokenOutOfRange { token, vocab });
        }
        Ok(())
    }

    /// Switches `forward` between returning logits and returning the
    /// device argmax of the logits.
    async fn use_argmax(&mut self, on: bool) -> Result<()> {
        if self.argmax != on {
            self.forward
                .set_output_argmax_async(0, on)
                .await
                .map_err(|source| Error::Runtime { during: "setting up the device argmax", source })?;
            self.argmax = on;
        }
        Ok(())
    }

    /// Runs `forward` on `tokens` (at most `max_seq_len`) at the current
    /// position; returns the logits of the last token.
    async fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.use_argmax(false).await?;
        let logits = self.run_forward(tokens).await?;
        if !matches!(logits.dtype, DType::F32 | DType::F16 | DType::BF16 | DType::F64) || logits.shape.is_empty() {
            return Err(Error::BadLogits { found: format!("{:?} {:?}", logits.dtype, logits.shape) });
        }
        let vocab = *logits.shape.last().expect("non-empty shape") as usize;
        last_row_f32(&logits, vocab)
            .ok_or_else(|| Error::BadLogits { found: format!("{:?} {:?}", logits.dtype, logits.shape) })
    }

    /// Runs `forward` like [`Self::forward`] but returns the argmax of the
    /// last token's logits, computed on the device (4 bytes read back).
    async fn forward_greedy(&mut self, tokens: &[u32]) -> Result<u32> {
        self.use_argmax(true).await?;
        let ids = self.run_forward(tokens).await?;
        Self::argmax_id(&ids)
    }

    /// One `forward` call on `tokens` at the current position: its one
    /// output.
    async fn run_forward(&mut self, tokens: &[u32]) -> Result<Tensor> {
        let outs = self
            .forward
            .run_async(&forward_inputs(tokens, self.pos)?)
            .await
            .map_err(|source| Error::Runtime { during: "running forward", source })?;
        self.pos += tokens.len();
        self.one_output(outs)
    }

    fn one_output(&self, outs: Vec<Tensor>) -> Result<Tensor> {
        let mut outs = outs.into_iter();
        match (outs.next(), outs.next()) {
            (Some(out), None) => Ok(out),
            _ => Err(Error::BadLogits { found: format!("{} outputs", self.forward.n_outputs()) }),
        }
    }

    /// The token id a device-argmax output holds.
    fn argmax_id(ids: &Tensor) -> Result<u32> {
        match (ids.dtype, ids.to_f64_vec().last().copied()) {
            (DType::I64, Some(id)) if id >= 0.0 && id <= f64::from(u32::MAX) => Ok(id as u32),
            _ => Err(Error::BadLogits { found: format!("device argmax gave {:?} {:?}", ids.dtype, ids.shape) }),
        }
    }

    /// Whether generation ends at `token` (a stop token, or an EOS id when
    /// `options` stop at EOS).
    fn stops(&self, options: &GenerateOptions, token: u32) -> bool {
        options.stop_tokens.contains(&token) || (options.stop_at_eos && self.meta.eos_ids.contains(&token))
    }

    /// Greedy decoding from `first` (the prompt's token, emitted first),
    /// two `forward` runs in flight: run `n + 1` is submitted (its token
    /// taken on the device from run `n`'s argmax) before run `n`'s token is
    /// read, so the host's work for a token (lowering for the new position,
    /// recording) overlaps the GPU's. Stops like the one-at-a-time loop; runs started past the stop
    /// only wrote cache rows past the position, which are written again
    /// before anything reads them.
    async fn decode_ahead(
        &mut self,
        first: u32,
        options: &GenerateOptions,
        out: &mut Vec<u32>,
        stats: &mut GenerationStats,
        on_token: &mut impl FnMut(u32),
    ) -> Result<()> {
        let mut in_flight = 0;
        let result = self.decode_ahead_runs(first, options, out, stats, on_token, &mut in_flight).await;
        // Read back (and drop) what is still in flight, even after an
        // error, so the next call starts clean.
        for _ in 0..in_flight {
            let drained = self.forward.finish_async().await;
            if result.is_ok() {
                drained.map_err(|source| Error::Runtime { during: "running forward", source })?;
            }
        }
        result
    }

    async fn decode_ahead_runs(
        &mut self,
        first: u32,
        options: &GenerateOptions,
        out: &mut Vec<u32>,
        stats: &mut GenerationStats,
        on_token: &mut impl FnMut(u32),
        in_flight: &mut usize,
    ) -> Result<()> {
        out.push(first);
        on_token(first);
        if self.stops(options, first) {
            stats.stopped = true;
            return Ok(());
        }
        let runtime = |source| Error::Runtime { during: "running forward", source };
        let mut host_token = Some(first);
        let mut next_pos = self.pos;
        loop {
            while *in_flight < 2 && out.len() + *in_flight < options.max_new_tokens {
                // The first run takes `first` from the host, later ones the
                // previous run's argmax.
                let (token, fed) = match host_token.take() {
                    Some(t) => (t, None),
                    None => (0, Some(0)),
                };
                self.forward.submit_async(&forward_inputs(&[token], next_pos)?, fed).await.map_err(runtime)?;
                next_pos += 1;
                *in_flight += 1;
            }
            if *in_flight == 0 {
                return Ok(());
            }
            let outs = self.forward.finish_async().await.map_err(runtime)?;
            *in_flight -= 1;
            self.pos += 1;
            stats.decode_steps += 1;
            let token = Self::argmax_id(&self.one_output(outs)?)?;
            out.push(token);
            on_token(token);
            if self.stops(options, token) {
                stats.stopped = true;
                return Ok(());
            }
        }
    }

    fn check_fits(&self, prompt: usize, new: usize) -> Result<()> {
        let context = self.meta.max_context_len;
        if self.pos + prompt + new > context {
            return Err(Error::ContextOverflow { prompt: self.pos + prompt, new, context });
        }
        Ok(())
    }

    /// Feeds `tokens` (in chunks of at most `max_seq_len`, or of the
    /// method's own bound on the token dim when lower: `export_llama` bounds
    /// it at `max_seq_len - 1`) at the current position; returns the logits
    /// of the last one.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn prefill(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        pollster::block_on(self.prefill_async(tokens))
    }

    /// [`Generator::prefill`] without blocking.
    pub async fn prefill_async(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        Ok(self.feed(tokens, false).await?.into_logits())
    }

    /// Feeds `tokens` (in chunks the forward method takes) at the current
    /// position, checked first against the context and the vocabulary;
    /// gives the last token's logits, or with `greedy` their argmax taken
    /// on the device.
    async fn feed(&mut self, tokens: &[u32], greedy: bool) -> Result<Fed> {
        if tokens.is_empty() {
            return Err(Error::EmptyPrompt);
        }
        self.check_fits(tokens.len(), 0)?;
        self.check_tokens(tokens)?;
        let bound = self.forward.input_specs().first().and_then(|(_, shape)| shape.last().copied());
        let chunk_len = bound.map_or(self.meta.max_seq_len, |b| (b as usize).clamp(1, self.meta.max_seq_len));
        let mut fed = Fed::Token(0);
        for chunk in tokens.chunks(chunk_len) {
            fed = if greedy {
                Fed::Token(self.forward_greedy(chunk).await?)
            } else {
                Fed::Logits(self.forward(chunk).await?)
            };
        }
        Ok(fed)
    }

    /// Feeds one token at the current position; returns its logits.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn decode_step(&mut self, token: u32) -> Result<Vec<f32>> {
        pollster::block_on(self.decode_step_async(token))
    }

    /// [`Generator::decode_step`] without blocking.
    pub async fn decode_step_async(&mut self, token: u32) -> Result<Vec<f32>> {
        Ok(self.feed(&[token], false).await?.into_logits())
    }

    /// Prefills `prompt`, then samples up to `options.max_new_tokens`
    /// tokens, calling `on_token` with each as soon as it is sampled. Fails
    /// before running anything when the prompt plus the new tokens exceed
    /// the context.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn generate(
        &mut self,
        prompt: &[u32],
        options: &GenerateOptions,
        sampler: &mut Sampler,
        on_token: impl FnMut(u32),
    ) -> Result<(Vec<u32>, GenerationStats)> {
        pollster::block_on(self.generate_async(prompt, options, sampler, on_token))
    }

    /// [`Generator::generate`] without blocking: `on_token` is called as
    /// each token is sampled, between the awaited decode steps (so a
    /// browser can draw it before the next one).
    pub async fn generate_async(
        &mut self,
        prompt: &[u32],
        options: &GenerateOptions,
        sampler: &mut Sampler,
        mut on_token: impl FnMut(u32),
    ) -> Result<(Vec<u32>, GenerationStats)> {
        if prompt.is_empty() {
            return Err(Error::EmptyPrompt);
        }
        self.check_fits(prompt.len(), options.max_new_tokens)?;
        let mut stats = GenerationStats { prompt_tokens: prompt.len(), ..GenerationStats::default() };
        let mut out = Vec::new();
        if options.max_new_tokens == 0 {
            return Ok((out, stats));
        }
        // Greedy decoding takes the argmax on the device: the logits never
        // leave it.
        let greedy = sampler.is_greedy();
        let start = Instant::now();
        let mut token = self.feed(prompt, greedy).await?.pick(sampler);
        stats.prefill_time = start.elapsed();
        let decode_start = Instant::now();
        if greedy && self.forward.can_feed(0) {
            self.decode_ahead(token, options, &mut out, &mut stats, &mut on_token).await?;
        } else {
            loop {
                out.push(token);
                on_token(token);
                if self.stops(options, token) {
                    stats.stopped = true;
                    break;
                }
                if out.len() == options.max_new_tokens {
                    break;
                }
                token = self.feed(&[token], greedy).await?.pick(sampler);
                stats.decode_steps += 1;
            }
        }
        stats.decode_time = decode_start.elapsed();
        stats.generated_tokens = out.len();
        Ok((out, stats))
    }
}

/// `forward`'s inputs: `tokens` as int64 `[1, S]` and `input_pos` int64
/// `[1]`.
fn forward_inputs(tokens: &[u32], pos: usize) -> Result<[Tensor; 2]> {
    let ids: Vec<u8> = tokens.iter().flat_map(|&t| i64::from(t).to_le_bytes()).collect();
    let tok = Tensor::new(DType::I64, vec![1, tokens.len() as u64], ids)
        .map_err(|source| Error::Runtime { during: "building the tokens input", source })?;
    let pos = Tensor::new(DType::I64, vec![1], (pos as i64).to_le_bytes().to_vec())
        .map_err(|source| Error::Runtime { during: "building the input_pos input", source })?;
    Ok([tok, pos])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(dtype: DType, shape: &[u64], bytes: Vec<u8>) -> Tensor {
        Tensor { dtype, shape: shape.to_vec(), bytes }
    }

    #[test]
    fn last_row_is_the_last_tokens_in_each_float_dtype() {
        let rows = [[1.5f32, -2.0, 3.25], [0.5, 7.0, -0.125]];
        let f32_bytes: Vec<u8> = rows.iter().flatten().flat_map(|v| v.to_le_bytes()).collect();
        let f16_bytes: Vec<u8> = rows.iter().flatten().flat_map(|v| half::f16::from_f32(*v).to_le_bytes()).collect();
        let bf16_bytes: Vec<u8> = rows.iter().flatten().flat_map(|v| half::bf16::from_f32(*v).to_le_bytes()).collect();
        let f64_bytes: Vec<u8> = rows.iter().flatten().flat_map(|v| f64::from(*v).to_le_bytes()).collect();
        for (dtype, bytes) in
            [(DType::F32, f32_bytes), (DType::F16, f16_bytes), (DType::BF16, bf16_bytes), (DType::F64, f64_bytes)]
        {
            let t = tensor(dtype, &[1, 2, 3], bytes);
            assert_eq!(last_row_f32(&t, 3), Some(rows[1].to_vec()), "{dtype:?}");
        }
    }

    #[test]
    fn last_row_refuses_short_or_non_float_logits() {
        let t = tensor(DType::F32, &[1, 2], [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect());
        assert_eq!(last_row_f32(&t, 3), None);
        assert_eq!(last_row_f32(&t, 0), None);
        assert_eq!(last_row_f32(&tensor(DType::I32, &[1, 2], vec![0; 8]), 2), None);
    }
}
