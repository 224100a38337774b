//! Generation throughput of `etwgpu-llm` on synthetic Llama-family models
//! ([`LlamaConfig`]): prefill tokens/s per prompt length and decode tokens/s
//! per context length, through the [`Generator`].
//!
//! Timing uses `iter_custom` around `Generator` calls, which wait for the
//! queue and read the logits back. Throughput is in tokens (elements) per
//! second.
//!
//! - `prefill/P`: a prompt of P tokens from position 0, one call.
//! - `decode/C`: single-token steps at positions C, C+1, ...: the cache is
//!   filled to C first (untimed, in calls of the largest prompt), and
//!   refilled after a window of C/4 steps (16 to 256) so the context stays
//!   near C.
//!
//! By default the model is the tiny fixtures' shape (4-bit) with prompts of
//! 128 and contexts of 128 and 512, which a software renderer (lavapipe)
//! runs in a few minutes. `ETWGPU_BENCH_LARGE=1` benches Llama 3.2 1B's
//! shape (4-bit group 32) at prompts 128, 512, 1024, 2048 and contexts 128,
//! 512, 2048, 8192. Without an adapter the benches print a note and measure
//! nothing.

use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use etwgpu_format::Program;
use etwgpu_llm::{Generator, LlamaConfig};
use etwgpu_runtime::Runtime;

fn runtime() -> Option<Runtime> {
    match Runtime::new() {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("no GPU, skipping benches: {e}");
            None
        }
    }
}

/// Decode steps between refills of the cache to context `c`.
fn window(c: usize) -> usize {
    (c / 4).clamp(16, 256)
}

fn tokens(n: usize, vocab: usize) -> Vec<u32> {
    (0..n).map(|i| ((i * 7919 + 13) % vocab) as u32).collect()
}

fn benches(c: &mut Criterion) {
    let Some(rt) = runtime() else { return };
    let large = std::env::var("ETWGPU_BENCH_LARGE").is_ok_and(|v| v == "1");
    let (preset, name, prompts, contexts): (_, _, &[usize], &[usize]) = if large {
        (LlamaConfig::llama32_1b(), "llama32_1b", &[128, 512, 1024, 2048], &[128, 512, 2048, 8192])
    } else {
        (LlamaConfig::tiny(), "tiny", &[128], &[128, 512])
    };
    let max_prompt = *prompts.iter().max().expect("prompts");
    let max_context = contexts.iter().map(|&c| c + window(c)).max().expect("contexts");
    let config = LlamaConfig { max_seq_len: max_prompt + 1, max_context: max_context.max(max_prompt + 1), ..preset };
    let start = Instant::now();
    let program = Program::from_bytes(config.build()).expect("the synthetic program parses");
    eprintln!("built {name} ({:.1}M parameters) in {:.2?}", config.n_params() as f64 / 1e6, start.elapsed());
    let mut generator = Generator::new(&rt, &program).expect("forward loads");

    let mut group = c.benchmark_group(format!("{name} prefill"));
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    for &p in prompts {
        let prompt = tokens(p, config.vocab);
        group.throughput(Throughput::Elements(p as u64));
        group.bench_function(format!("{p}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    generator.reset();
                    let t = Instant::now();
                    generator.prefill(&prompt).expect("prefill");
                    total += t.elapsed();
                }
                total
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group(format!("{name} decode"));
    group.sample_size(10).sampling_mode(SamplingMode::Flat).throughput(Throughput::Elements(1));
    for &ctx in contexts {
        let fill = tokens(ctx, config.vocab);
        generator.reset();
        generator.prefill(&fill).expect("fill the cache");
        group.bench_function(format!("{ctx}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for i in 0..iters {
                    if generator.position() >= ctx + window(ctx) {
                        generator.reset();
                        generator.prefill(&fill).expect("refill the cache");
                    }
                    let token = (i % config.vocab as u64) as u32;
                    let t = Instant::now();
                    generator.decode_step(token).expect("decode step");
                    total += t.elapsed();
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(name = main_benches; config = Criterion::default(); targets = benches);
criterion_main!(main_benches);
