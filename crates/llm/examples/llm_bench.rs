//! LLM throughput on a synthetic Llama-family model, without criterion: one
//! binary to build here in release and carry to a GPU machine.
//!
//! ```text
//! cargo build --release -p etwgpu-llm --example llm_bench
//! llm_bench [--model tiny|small|smollm2|1b] [--weights q4|fp32]
//!           [--prompts 128,512,1024,2048] [--contexts 128,512,2048,8192]
//!           [--steps 32] [--repeats 3] [--kv-cache f16|f32] [--timeline] [--json PATH] [--save PATH]
//!           [--build-only]
//! ```
//!
//! Builds the model (max_seq_len = largest prompt + 1, so each prompt is one
//! call; context = largest context + steps), loads it, then prints and
//! optionally writes as JSON: build, load and first-call times; prefill
//! tokens/s per prompt (after a second of untimed prefills of the largest
//! prompt, so the GPU is at its working clocks: the median of `repeats`
//! timed prefills from position 0, after a quarter second of untimed ones
//! at that length (`CELL_WARM_UP`), with the host time per stage of those
//! calls and the time the calls spent outside the runtime); decode
//! tokens/s per context C (prefill C tokens in calls of at most the
//! largest prompt, then greedy `Generator::generate`
//! of `steps` tokens as users run it: the argmax on the device, 4 bytes read
//! back per token; with the host time per stage of each call); and the
//! dispatches one decode step records, with per-op profiles of a decode step
//! at position 0 and at the largest context, and of a call of the largest
//! prompt (each twice: timestamps between dispatches, and by kernel, each
//! shader's dispatches alone in a pass; see `etwgpu_runtime::ProfileMode`). `--kv-cache` picks the KV cache's storage (default `f16`, the
//! generator's default, where the device has SHADER_F16); `ETWGPU_TRUSTED_SHADERS=1` times the
//! trusted path (`LoadOptions::trusted_shaders`, reported as `trusted shaders: on`). Prefill times are the wall time of
//! `Generator::prefill`, which waits for the GPU and reads the logits back. `--model` defaults to `small`, or
//! `1b` when `ETWGPU_BENCH_LARGE=1`. `--save` writes the `.pte`, sized as
//! the cells size it: calls of up to the largest `--prompts` + 1 rows, a
//! cache of the largest `--contexts` + `--steps` + 2 rows (so the defaults
//! save an 8,194-row cache, which decodes on other kernels than a cell at
//! `--contexts 256`: pass the cells' flags to save the model they time);
//! `--build-only` stops after building (and saving) it. `--timeline` runs
//! each decode cell once more with the step timeline on
//! (`Generator::set_step_timeline`: GPU timestamps around each step's chain
//! and device argmax as the steps run ahead) and prints the medians of a
//! step's period, its chain, the gap from chain to argmax, the argmax and
//! the gap to the next step's chain (copies, submission boundary). The measuring is
//! `etwgpu_llm::bench` (`time_prompt`, `time_decode`, `call_profile`), the
//! same code `etwgpu bench` runs.

use std::io::Write;
use std::time::{Duration, Instant};

use etwgpu_format::Program;
use etwgpu_llm::bench::{GPU_WARM_UP, bench_tokens as tokens, call_profile, time_decode, time_prompt, warm_up};
use etwgpu_llm::{Generator, LlamaConfig, Weights};
use etwgpu_runtime::{LoadOptions, ProfileMode, Runtime};

struct Args {
    model: String,
    weights: Weights,
    prompts: Vec<usize>,
    contexts: Vec<usize>,
    steps: usize,
    repeats: usize,
    json: Option<String>,
    save: Option<String>,
    build_only: bool,
    kv_cache_f16: bool,
    timeline: bool,
}

fn usage(problem: &str) -> ! {
    eprintln!(
        "llm_bench: {problem}\nusage: llm_bench [--model tiny|small|smollm2|1b] [--weights q4|fp32] \
         [--prompts N,N,...] [--contexts N,N,...] [--steps N] [--repeats N] [--kv-cache f16|f32] [--timeline] [--json PATH] \
         [--save PATH] [--build-only]"
    );
    std::process::exit(2)
}

fn list(s: &str) -> Vec<usize> {
    s.split(',').map(|x| x.trim().parse().unwrap_or_else(|_| usage(&format!("bad number {x:?}")))).collect()
}

fn parse_args() -> Args {
    let large = std::env::var("ETWGPU_BENCH_LARGE").is_ok_and(|v| v == "1");
    let mut a = Args {
        model: if large { "1b" } else { "small" }.to_string(),
        weights: Weights::Q4 { group_size: 32 },
        prompts: Vec::new(),
        contexts: Vec::new(),
        steps: 32,
        repeats: 3,
        json: None,
        save: None,
        build_only: false,
        kv_cache_f16: true,
        timeline: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        match flag.as_str() {
            "--model" => a.model = value(),
            "--weights" => {
                a.weights = match value().as_str() {
                    "q4" => Weights::Q4 { group_size: 32 },
                    "fp32" => Weights::Fp32,
                    other => usage(&format!("unknown weights {other:?}")),
                }
            }
            "--prompts" => a.prompts = list(&value()),
            "--contexts" => a.contexts = list(&value()),
            "--steps" => a.steps = list(&value())[0],
            "--repeats" => a.repeats = list(&value())[0],
            "--json" => a.json = Some(value()),
            "--save" => a.save = Some(value()),
            "--build-only" => a.build_only = true,
            "--timeline" => a.timeline = true,
            "--kv-cache" => {
                a.kv_cache_f16 = match value().as_str() {
                    "f16" => true,
                    "f32" => false,
                    other => usage(&format!("unknown KV cache type {other:?}")),
                }
            }
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    let (prompts, contexts): (&[usize], &[usize]) = match a.model.as_str() {
        "tiny" => (&[8, 16], &[8, 16]),
        "small" => (&[128, 512], &[128, 512]),
        _ => (&[128, 512, 1024, 2048], &[128, 512, 2048, 8192]),
    };
    if a.prompts.is_empty() {
        a.prompts = prompts.to_vec();
    }
    if a.contexts.is_empty() {
        a.contexts = contexts.to_vec();
    }
    if a.steps == 0 || a.repeats == 0 || a.prompts.contains(&0) {
        usage("steps, repeats and prompts must be positive");
    }
    a
}

/// The model: the preset with its call length and context fitted to the
/// prompts and contexts measured.
fn config(a: &Args) -> LlamaConfig {
    let preset = match a.model.as_str() {
        "tiny" => LlamaConfig::tiny(),
        "small" => LlamaConfig::small(),
        "smollm2" => LlamaConfig::smollm2_135m(),
        "1b" => LlamaConfig::llama32_1b(),
        other => usage(&format!("unknown model {other:?}")),
    };
    let max_prompt = a.prompts.iter().copied().max().unwrap_or(1);
    // The context, one token fed by `generate`, then `steps + 1` new tokens.
    let max_context = a.contexts.iter().copied().max().unwrap_or(0) + a.steps + 2;
    LlamaConfig {
        weights: a.weights,
        max_seq_len: max_prompt + 1,
        max_context: max_context.max(max_prompt + 1),
        ..preset
    }
}

/// Untimed prefills at a cell's own length before its timed ones. Run bb
/// (H100): in one process a call, the 512- and 1,024-token cells ran
/// 2.5-4x slow over all their repeats after a single untimed call each,
/// never the 128- or 2,048-token ones; a quarter second of work at the
/// cell's length first keeps the GPU busy at that size (whether that is
/// the cause is not known yet).
const CELL_WARM_UP: Duration = Duration::from_millis(250);

/// The median of `xs` (the upper one of an even count); NaN when empty.
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() {
    let a = parse_args();
    let c = config(&a);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "model {} ({:?}): dim {}, {} layers, {}/{} heads, hidden {}, vocab {}, {:.1}M params; \
         calls of up to {} tokens, context {}",
        a.model,
        c.weights,
        c.dim,
        c.n_layers,
        c.n_heads,
        c.n_kv_heads,
        c.hidden_dim,
        c.vocab,
        c.n_params() as f64 / 1e6,
        c.max_tokens_per_call(),
        c.max_context
    );
    let t = Instant::now();
    let bytes = c.build();
    let build_s = t.elapsed().as_secs_f64();
    let file_bytes = bytes.len();
    let _ = writeln!(out, "build {build_s:.2} s ({:.1} MB)", file_bytes as f64 / 1e6);
    if let Some(path) = &a.save {
        std::fs::write(path, &bytes).unwrap_or_else(|e| {
            eprintln!("llm_bench: writing {path}: {e}");
            std::process::exit(1)
        });
        let _ = writeln!(out, "wrote {path}");
    }
    if a.build_only {
        return;
    }
    let rt = Runtime::new().unwrap_or_else(|e| {
        eprintln!("llm_bench: no GPU runtime: {e}");
        std::process::exit(1)
    });
    let info = rt.adapter_info();
    let device = format!("{} ({:?})", info.name, info.backend);
    let options = LoadOptions { kv_cache_f16: a.kv_cache_f16, ..Generator::default_load_options() };
    let _ = writeln!(out, "device: {device}");
    // The precision the load takes (`ETWGPU_PRECISION`, else the default)
    // and the GEMM route: `report.py` labels the prefill rows by them.
    let precision = options.precision.unwrap_or(rt.gemm_caps().precision);
    let gemm_route = rt.gemm_route();
    let _ = writeln!(out, "GEMM route {gemm_route}, precision {precision}");

    let program = Program::from_bytes(bytes).expect("the synthetic program parses");
    let t = Instant::now();
    let mut generator = Generator::with_options(&rt, &program, &options, &mut |_| {}).expect("forward loads");
    let kv_cache_f16 = generator.kv_cache_f16();
    let _ = writeln!(out, "KV cache: {}", if kv_cache_f16 { "float16" } else { "float32" });
    // `ETWGPU_TRUSTED_SHADERS=1` times the trusted path (issue 14).
    let trusted_shaders = generator.trusted_shaders();
    let int8_activations = generator.int8_activations();
    let _ = writeln!(out, "trusted shaders: {}", if trusted_shaders { "on" } else { "off" });
    // `ETWGPU_INT8_ACTIVATIONS=1` times the int8 decode GEMVs.
    let _ = writeln!(out, "int8 activations: {}", if int8_activations { "on" } else { "off" });
    let load_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    generator.prefill(&tokens(1, c.vocab)).expect("first call");
    let first_call_s = t.elapsed().as_secs_f64();
    let _ = writeln!(out, "load {load_s:.2} s, first call {first_call_s:.2} s");

    // The first cell of a load would otherwise run on idle clocks.
    let largest = a.prompts.iter().copied().max().unwrap_or(1);
    warm_up(&mut generator, largest, GPU_WARM_UP).expect("warm-up");
    let mut prefill = Vec::new();
    for &p in &a.prompts {
        warm_up(&mut generator, p, CELL_WARM_UP).expect("cell warm-up");
        // The host's share of the timed calls, per stage (means over the
        // repeats): what the wall time holds beyond the GPU's work.
        generator.reset_run_times();
        let times: Vec<f64> =
            (0..a.repeats).map(|_| time_prompt(&mut generator, p, 0).expect("prefill").as_secs_f64()).collect();
        let host = generator.run_times();
        let per_call = |d: Duration| d.as_secs_f64() * 1e3 / host.runs.max(1) as f64;
        // The calls' mean wall time outside the runtime's stages (means
        // too): the generator's own work, the inputs' tensors and the
        // logits' row.
        let mean_ms = times.iter().sum::<f64>() * 1e3 / times.len().max(1) as f64;
        let stages = [host.inputs, host.lowering, host.recording, host.submitting, host.waiting, host.reading];
        let outside = mean_ms - stages.into_iter().map(per_call).sum::<f64>();
        let m = median(times);
        let _ = writeln!(
            out,
            "prefill {p:>6} tokens: {:>10.1} tok/s ({:.1} ms); host ms per call: inputs {:.3}, lowering {:.3}, \
             recording {:.3}, submit {:.3}, GPU wait {:.3}, read-back {:.3}, outside the runtime {:.3}; \
             host rules run {}, plans built {}",
            p as f64 / m,
            m * 1e3,
            per_call(host.inputs),
            per_call(host.lowering),
            per_call(host.recording),
            per_call(host.submitting),
            per_call(host.waiting),
            per_call(host.reading),
            outside,
            host.op_lowerings,
            host.plan_builds,
        );
        prefill.push(serde_json::json!({
            "prompt": p, "seconds": m, "tokens_per_s": p as f64 / m,
            "host_ms_per_call": {
                "inputs": per_call(host.inputs), "lowering": per_call(host.lowering),
                "recording": per_call(host.recording), "submit": per_call(host.submitting),
                "gpu_wait": per_call(host.waiting), "read_back": per_call(host.reading),
                "outside_runtime": outside,
            },
            "host_rules_run": host.op_lowerings, "plans_built": host.plan_builds,
        }));
    }

    // Decode as `generate` does it: greedy, the argmax on the device (4
    // bytes read back per token), one forward call per token.
    let mut decode = Vec::new();
    for &ctx in &a.contexts {
        let run = time_decode(&mut generator, a.steps, ctx).expect("decode");
        // The dispatches of the decode plan the steps recorded.
        let n_dispatches = generator.n_dispatches();
        let (fill_s, stats, times) = (run.fill_s, run.stats, run.run_times);
        let per_call = |d: Duration| d.as_secs_f64() * 1e3 / times.runs.max(1) as f64;
        let tps = stats.decode_tokens_per_s();
        let _ = writeln!(
            out,
            "decode at {ctx:>6}: {tps:>10.1} tok/s (filled in {fill_s:.2} s); host ms per call: inputs {:.3}, \
             lowering {:.3}, recording {:.3} ({:.2} us per dispatch), submit {:.3}, GPU wait {:.3}, read-back {:.3}; \
             host rules run {}, plans built {}",
            per_call(times.inputs),
            per_call(times.lowering),
            per_call(times.recording),
            per_call(times.recording) * 1e3 / n_dispatches.max(1) as f64,
            per_call(times.submitting),
            per_call(times.waiting),
            per_call(times.reading),
            times.op_lowerings,
            times.plan_builds,
        );
        decode.push(serde_json::json!({
            "context": ctx, "steps": stats.decode_steps, "tokens_per_s": tps,
            "seconds": stats.decode_time.as_secs_f64(), "fill_s": fill_s,
            "host_ms_per_call": {
                "inputs": per_call(times.inputs), "lowering": per_call(times.lowering),
                "recording": per_call(times.recording), "submit": per_call(times.submitting),
                "recording_us_per_dispatch": per_call(times.recording) * 1e3 / n_dispatches.max(1) as f64,
                "gpu_wait": per_call(times.waiting),
                "read_back": per_call(times.reading),
            },
            "host_rules_run": times.op_lowerings, "plans_built": times.plan_builds,
        }));
    }
    // The step timeline of each decode cell, when asked.
    let mut timelines = Vec::new();
    if a.timeline {
        for &ctx in &a.contexts {
            // Room for `time_decode`'s warm-up and fill calls before the
            // timed steps (the fill's calls are at most `ctx`).
            let runs = u32::try_from(a.steps + 16 + ctx).unwrap_or(u32::MAX);
            generator.set_step_timeline(Some(runs)).expect("a device with timestamps");
            time_decode(&mut generator, a.steps, ctx).expect("decode");
            let steps = generator.take_step_timeline().expect("timeline");
            generator.set_step_timeline(None).expect("timeline off");
            // The timed generation's steps are the last runs: its feed and
            // first step (the pipeline filling) are left out.
            let s = &steps[steps.len().saturating_sub(a.steps.saturating_sub(1))..];
            // Step pairs (each gap reads a step and the next).
            let n = s.len().saturating_sub(1);
            let us = |f: &dyn Fn(usize) -> f64| median((0..n).map(f).collect()) / 1e3;
            let period = us(&|i| s[i + 1].chain_begin - s[i].chain_begin);
            let chain = us(&|i| s[i].chain_end - s[i].chain_begin);
            let to_argmax = us(&|i| s[i].argmax_begin - s[i].chain_end);
            let argmax = us(&|i| s[i].argmax_end - s[i].argmax_begin);
            let between = us(&|i| s[i + 1].chain_begin - s[i].argmax_end);
            let _ = writeln!(
                out,
                "timeline at {ctx:>5}: period {period:.1} us = chain {chain:.1} + to argmax {to_argmax:.1} + argmax \
                 {argmax:.1} + to the next step {between:.1} (medians of {n} steps)"
            );
            timelines.push(serde_json::json!({
                "context": ctx, "steps": n, "period_us": period, "chain_us": chain,
                "chain_to_argmax_us": to_argmax, "argmax_us": argmax, "to_next_step_us": between,
            }));
        }
    }

    drop(generator);
    let mut profiles = Vec::new();
    let mut dispatches = 0;
    // The attention of a decode step reads the whole context: profile one
    // at the end of the largest context too (the cache's contents do not
    // change the work).
    let last_pos = a.contexts.iter().copied().max().unwrap_or(0).min(c.max_context - 1);
    let mut calls = vec![(1, 0), (1, last_pos), (c.max_tokens_per_call(), 0)];
    calls.dedup();
    let mut kernel_profiles = Vec::new();
    for (n, pos) in calls {
        for mode in [ProfileMode::PerDispatch, ProfileMode::ByKernel] {
            let p = call_profile(&rt, &program, &options, n, pos, mode).expect("the profiled calls run");
            let (d, profile, kernels) = (p.dispatches, p.by_op, p.by_kernel);
            if n == 1 && pos == 0 {
                dispatches = d;
            }
            let how = match (mode, p.total_nanos) {
                (ProfileMode::ByKernel, Some(t)) => {
                    format!("by kernel, each alone ({:.3} ms for the whole call in one pass)", t / 1e6)
                }
                _ => "per dispatch".to_string(),
            };
            let _ = writeln!(out, "one call of {n} tokens at position {pos}: {d} dispatches; profiled {how}:");
            for (op, nodes, nanos) in profile.iter().take(8) {
                let _ = writeln!(out, "  {:>10.3} ms  {nodes:>4} x {op}", nanos / 1e6);
            }
            let _ = writeln!(out, "  by shader:");
            for (kernel, nodes, nanos) in kernels.iter().take(8) {
                let _ = writeln!(out, "  {:>10.3} ms  {nodes:>4} x {kernel}", nanos / 1e6);
            }
            let by_op: Vec<_> = profile
                .iter()
                .map(|(op, nodes, nanos)| serde_json::json!({"op": op, "nodes": nodes, "ms": nanos / 1e6}))
                .collect();
            let by_kernel: Vec<_> = kernels
                .iter()
                .map(|(kernel, nodes, nanos)| serde_json::json!({"kernel": kernel, "nodes": nodes, "ms": nanos / 1e6}))
                .collect();
            let row = serde_json::json!({
                "tokens": n, "position": pos, "dispatches": d, "by_op": by_op, "by_kernel": by_kernel,
                "total_ms": p.total_nanos.map(|t| t / 1e6),
            });
            match mode {
                ProfileMode::PerDispatch => profiles.push(row),
                ProfileMode::ByKernel => kernel_profiles.push(row),
            }
        }
    }

    if let Some(path) = &a.json {
        let report = serde_json::json!({
            "model": a.model,
            "weights": format!("{:?}", c.weights),
            "config": {
                "dim": c.dim, "n_layers": c.n_layers, "n_heads": c.n_heads, "n_kv_heads": c.n_kv_heads,
                "hidden_dim": c.hidden_dim, "vocab": c.vocab, "max_seq_len": c.max_seq_len,
                "max_context": c.max_context, "n_params": c.n_params(),
            },
            "device": device,
            "precision": precision.name(),
            "gemm_route": gemm_route,
            "kv_cache_f16": kv_cache_f16,
            "trusted_shaders": trusted_shaders,
            "int8_activations": int8_activations,
            "file_bytes": file_bytes,
            "build_s": build_s,
            "load_s": load_s,
            "first_call_s": first_call_s,
            "prefill": prefill,
            "decode": decode,
            "dispatches_per_decode_step": dispatches,
            "call_profiles": profiles,
            "kernel_profiles": kernel_profiles,
            "decode_timeline": timelines,
        });
        let text = serde_json::to_string_pretty(&report).expect("serializable");
        std::fs::write(path, text + "\n").unwrap_or_else(|e| {
            eprintln!("llm_bench: writing {path}: {e}");
            std::process::exit(1)
        });
        let _ = writeln!(out, "wrote {path}");
    }
}
