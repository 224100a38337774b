//! Measuring a [`Generator`]: prompt processing and token generation speed
//! the way `llama-bench` reports them (`pp512`, `tg128`, each at a filled
//! depth of the KV cache, over repeats: mean, standard deviation, median),
//! plus the timings and per-op profiles the `llm_bench` example prints.
//! `etwgpu bench` and `crates/llm/examples/llm_bench.rs` both measure
//! through this module, so their numbers mean the same thing.
//!
//! Timing rules: a prompt is timed as the wall time of
//! [`Generator::prefill`] from the filled depth (it waits for the GPU and
//! reads the last logits back); generation is greedy
//! [`Generator::generate`] as users run it (the argmax taken on the device,
//! 4 bytes read back per token), timed over its decode steps only. The
//! depth's own fill is never timed into either.

use std::time::{Duration, Instant};

use etwgpu_format::{DType, Program};
use etwgpu_runtime::{LoadOptions, ProfileMode, RunTimes, Runtime, Tensor};

use crate::{Error, GenerateOptions, Generator, Result, Sampler, SamplerConfig};

/// Deterministic token ids below `vocab` for benchmark prompts (a fixed
/// stride through the vocabulary, so no two runs differ in work).
pub fn bench_tokens(n: usize, vocab: usize) -> Vec<u32> {
    (0..n).map(|i| ((i * 7919 + 13) % vocab.max(1)) as u32).collect()
}

/// Mean, sample standard deviation and median of some measurements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Number of measurements.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (`n - 1` in the denominator; 0 for one
    /// measurement).
    pub sd: f64,
    /// Median (the mean of the two middle values for an even count).
    pub median: f64,
}

impl Summary {
    /// Summarizes `xs`; `None` when it is empty.
    pub fn of(xs: &[f64]) -> Option<Self> {
        if xs.is_empty() {
            return None;
        }
        let n = xs.len();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let sd = if n > 1 { (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt() } else { 0.0 };
        let mut sorted = xs.to_vec();
        sorted.sort_by(f64::total_cmp);
        let median = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
        Some(Self { n, mean, sd, median })
    }
}

/// The `q`-quantile (`0..=1`) of `xs` by the nearest-rank rule; `None`
/// when `xs` is empty.
pub fn percentile(xs: &[f64], q: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Fills the KV cache from position 0 with `depth` benchmark tokens (not
/// timed by the callers); the time it took.
pub fn fill(generator: &mut Generator, depth: usize) -> Result<Duration> {
    generator.reset();
    let t = Instant::now();
    if depth > 0 {
        let vocab = generator.metadata().vocab_size.unwrap_or(2);
        generator.prefill(&bench_tokens(depth, vocab))?;
    }
    Ok(t.elapsed())
}

/// The wall time of one [`Generator::prefill`] of `n_prompt` benchmark
/// tokens after filling `depth` (the fill is not timed).
pub fn time_prompt(generator: &mut Generator, n_prompt: usize, depth: usize) -> Result<Duration> {
    fill(generator, depth)?;
    let vocab = generator.metadata().vocab_size.unwrap_or(2);
    let prompt = bench_tokens(n_prompt, vocab);
    let t = Instant::now();
    generator.prefill(&prompt)?;
    Ok(t.elapsed())
}

/// One timed greedy generation.
#[derive(Debug, Clone)]
pub struct DecodeRun {
    /// Seconds the fill of the depth took (untimed in `stats`).
    pub fill_s: f64,
    /// The generation's counts and times (`decode_steps` tokens in
    /// `decode_time`).
    pub stats: crate::GenerationStats,
    /// Host time per stage of the forward runs of the generation.
    pub run_times: RunTimes,
}

/// How long [`warm_up`] keeps the GPU busy before the first timed call. On
/// the H200 the clocks sit at 345 MHz when idle and a short first cell ran
/// at a tenth of its speed (run ac: 128 tokens in 34.7 ms as the first cell
/// of a load, against ~4 ms warm); a second of work brings them up.
pub const GPU_WARM_UP: Duration = Duration::from_secs(1);

/// Runs prefills of `n_prompt` benchmark tokens from position 0 (at least
/// one, and until `min` has passed), so the timed calls after it find the
/// GPU at its working clocks and every pipeline of the prompt's shape
/// built. Leaves the KV cache reset.
pub fn warm_up(generator: &mut Generator, n_prompt: usize, min: Duration) -> Result<()> {
    let t = Instant::now();
    loop {
        time_prompt(generator, n_prompt, 0)?;
        if t.elapsed() >= min {
            break;
        }
    }
    generator.reset();
    Ok(())
}

/// Greedy generation of `n_gen` tokens after filling `depth`: one token is
/// fed, then `n_gen` decode steps run (the argmax on the device), as
/// `Generator::generate` runs them for users.
pub fn time_decode(generator: &mut Generator, n_gen: usize, depth: usize) -> Result<DecodeRun> {
    let mut greedy = Sampler::new(SamplerConfig::default())?;
    // Warm-up, untimed: the first decode steps of a load lower the chain
    // of each attention route, build their plans and model the position
    // (see `etwgpu_graph::affine`); the rows they write are filled again
    // below.
    generator.warm_up_decode()?;
    let fill_s = fill(generator, depth)?.as_secs_f64();
    let options = GenerateOptions { max_new_tokens: n_gen + 1, stop_tokens: Vec::new(), stop_at_eos: false };
    generator.reset_run_times();
    let (_, stats) = generator.generate(&[1], &options, &mut greedy, |_| {})?;
    Ok(DecodeRun { fill_s, stats, run_times: generator.run_times() })
}

/// What a `llama-bench` row measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    /// Prompt processing of this many tokens (`ppN`).
    Prompt(usize),
    /// Generation of this many tokens (`tgN`).
    Generate(usize),
}

impl Test {
    /// `pp512` or `tg128`.
    pub fn name(&self) -> String {
        match self {
            Test::Prompt(n) => format!("pp{n}"),
            Test::Generate(n) => format!("tg{n}"),
        }
    }

    /// The tokens timed.
    pub fn n_tokens(&self) -> usize {
        match *self {
            Test::Prompt(n) | Test::Generate(n) => n,
        }
    }
}

/// One row of a `llama-bench` table: a test at a depth, over repeats.
#[derive(Debug, Clone)]
pub struct Row {
    /// The test.
    pub test: Test,
    /// Tokens in the KV cache before the test.
    pub depth: usize,
    /// Tokens per second of each repeat.
    pub samples: Vec<f64>,
    /// Their summary.
    pub tokens_per_s: Summary,
}

/// The `llama-bench` grid: every prompt size and every generation length,
/// each at every depth, after [`warm_up`] with the largest prompt; one
/// warm-up run per row, then `repeats` timed runs.
/// A row whose depth plus tokens exceed the context is a
/// [`Error::ContextOverflow`].
pub fn llama_bench(
    generator: &mut Generator,
    prompts: &[usize],
    gens: &[usize],
    depths: &[usize],
    repeats: usize,
) -> Result<Vec<Row>> {
    let context = generator.metadata().max_context_len;
    warm_up(generator, prompts.iter().copied().max().unwrap_or(1).clamp(1, context.max(1)), GPU_WARM_UP)?;
    let mut rows = Vec::new();
    for &depth in depths {
        let tests = prompts.iter().map(|&p| Test::Prompt(p)).chain(gens.iter().map(|&g| Test::Generate(g)));
        for test in tests {
            // `generate` feeds one token before the `n` it times.
            let need = depth + test.n_tokens() + usize::from(matches!(test, Test::Generate(_)));
            if need > context {
                return Err(Error::ContextOverflow { prompt: depth, new: need - depth, context });
            }
            let once = |g: &mut Generator| -> Result<f64> {
                Ok(match test {
                    Test::Prompt(n) => n as f64 / time_prompt(g, n, depth)?.as_secs_f64().max(1e-9),
                    Test::Generate(n) => time_decode(g, n, depth)?.stats.decode_tokens_per_s(),
                })
            };
            once(generator)?;
            let samples = (0..repeats.max(1)).map(|_| once(generator)).collect::<Result<Vec<f64>>>()?;
            let tokens_per_s = Summary::of(&samples).expect("at least one repeat");
            rows.push(Row { test, depth, samples, tokens_per_s });
        }
    }
    generator.reset();
    Ok(rows)
}

/// One call's dispatch count and profile.
#[derive(Debug, Clone)]
pub struct CallProfile {
    /// Dispatches the call records.
    pub dispatches: usize,
    /// Per op name (with its kernels): nodes and total nanoseconds, slowest
    /// first.
    pub by_op: Vec<(String, usize, f64)>,
    /// Per shader label: the nodes that run it and its total nanoseconds, slowest first
    /// (in [`ProfileMode::ByKernel`] a shader's pass time spread evenly
    /// over its dispatches, whichever ops they serve).
    pub by_kernel: Vec<(String, usize, f64)>,
    /// GPU nanoseconds of the whole call in one pass ([`ProfileMode::ByKernel`]
    /// only).
    pub total_nanos: Option<f64>,
}

/// How long [`call_profile`] runs its call plainly before profiling it.
pub const PROFILE_WARM_UP: Duration = Duration::from_millis(300);

/// Dispatches one `forward` call of `n` tokens at position `pos` records,
/// and its time per op name and kernels (summed over nodes, slowest first),
/// from a second copy of `forward` run plainly for [`PROFILE_WARM_UP`]
/// (at least once), then again profiled
/// as `mode` says (per dispatch, the times include per-dispatch overhead;
/// both are wall times where the adapter has no timestamps).
pub fn call_profile(
    rt: &Runtime,
    program: &Program,
    options: &LoadOptions,
    n: usize,
    pos: usize,
    mode: ProfileMode,
) -> Result<CallProfile> {
    let runtime = |during| move |source| Error::Runtime { during, source };
    let mut forward = rt.load_with(program, "forward", options).map_err(runtime("loading method forward"))?;
    let inputs = || -> Result<[Tensor; 2]> {
        let ids: Vec<u8> = (0..n as i64).flat_map(|t| (t % 100).to_le_bytes()).collect();
        let token = Tensor::new(DType::I64, vec![1, n as u64], ids).map_err(runtime("building the tokens input"))?;
        let pos = Tensor::new(DType::I64, vec![1], (pos as i64).to_le_bytes().to_vec())
            .map_err(runtime("building the input_pos input"))?;
        Ok([token, pos])
    };
    // Plain runs for at least `PROFILE_WARM_UP` first: a GPU that was
    // idle runs its first calls at low clocks (on the H200 a decode step
    // profiled right after one plain run took twice as long as one of a
    // generation).
    let warm = Instant::now();
    while warm.elapsed() < PROFILE_WARM_UP {
        forward.run(&inputs()?).map_err(runtime("running forward"))?;
    }
    let dispatches = forward.n_dispatches();
    forward.set_profiling(true);
    forward.set_profile_mode(mode);
    forward.run(&inputs()?).map_err(runtime("running forward"))?;
    let mut by_op: Vec<(String, usize, f64)> = Vec::new();
    let mut by_kernel: Vec<(String, usize, f64)> = Vec::new();
    for node in forward.profile() {
        for (kernel, &nanos) in node.kernels.iter().zip(&node.kernel_nanos) {
            match by_kernel.iter_mut().find(|(k, _, _)| k == kernel) {
                Some(entry) => {
                    entry.1 += 1;
                    entry.2 += nanos;
                }
                None => by_kernel.push((kernel.clone(), 1, nanos)),
            }
        }
        let key = if node.kernels.is_empty() { node.op } else { format!("{} [{}]", node.op, node.kernels.join(", ")) };
        match by_op.iter_mut().find(|(k, _, _)| *k == key) {
            Some(entry) => {
                entry.1 += 1;
                entry.2 += node.nanos;
            }
            None => by_op.push((key, 1, node.nanos)),
        }
    }
    by_op.sort_by(|a, b| b.2.total_cmp(&a.2));
    by_kernel.sort_by(|a, b| b.2.total_cmp(&a.2));
    Ok(CallProfile { dispatches, by_op, by_kernel, total_nanos: forward.profiled_total_nanos() })
}

#[cfg(test)]
mod tests;
