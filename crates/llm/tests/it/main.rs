//! Integration tests of `etwgpu-llm` on the tiny Llama fixtures.
//!
//! GPU tests skip, with a printed note, when no adapter exists, unless
//! `GPU_TESTS=require`, in which case a missing adapter fails them.

use std::path::PathBuf;

use etwgpu_format::Program;
use etwgpu_llm::{Error, GenerateOptions, Generator, Sampler, SamplerConfig};
use etwgpu_runtime::{Runtime, Tensor};

mod smollm2;
mod synthetic;

/// The runtime, or `None` (after printing why) when GPU tests may skip.
fn runtime() -> Option<Runtime> {
    match Runtime::new() {
        Ok(rt) => Some(rt),
        Err(e) if std::env::var("GPU_TESTS").as_deref() == Ok("require") => {
            panic!("GPU_TESTS=require but no GPU runtime: {e}")
        }
        Err(e) => {
            eprintln!("skipping GPU test: {e} (set GPU_TESTS=require to fail instead)");
            None
        }
    }
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../test_data/fixtures").join(name)
}

fn tokens(path: PathBuf) -> Vec<u32> {
    let t = Tensor::read_npy(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    t.to_f64_vec().into_iter().map(|v| v as u32).collect()
}

#[test]
fn metadata_of_llama_tiny() {
    let dir = fixture("llama_tiny_fp32");
    let program = Program::open(dir.join("model.pte")).expect("open fixture");
    let meta = etwgpu_llm::Metadata::read(&program).expect("metadata");
    assert_eq!(meta.max_seq_len, 32);
    assert_eq!(meta.max_context_len, 32);
    assert_eq!(meta.vocab_size, Some(128));
}

#[test]
fn greedy_matches_eager_argmax_tokens() {
    let Some(rt) = runtime() else { return };
    for name in ["llama_tiny_fp32", "llama_tiny_q4", "llama_tiny_8da4w"] {
        let dir = fixture(name);
        let program = Program::open(dir.join("model.pte")).expect("open fixture");
        let prompt = tokens(dir.join("call0.in0.npy"));
        let expected: Vec<u32> = (1..=3).flat_map(|i| tokens(dir.join(format!("call{i}.in0.npy")))).collect();
        let mut generator = Generator::new(&rt, &program).expect("load");
        let mut sampler = Sampler::new(SamplerConfig::default()).expect("greedy");
        let options = GenerateOptions { max_new_tokens: 3, stop_tokens: Vec::new(), stop_at_eos: false };
        let mut streamed = Vec::new();
        let (got, stats) = generator.generate(&prompt, &options, &mut sampler, |t| streamed.push(t)).expect("generate");
        assert_eq!(got, expected, "{name}: greedy tokens vs the fixture's eager argmax");
        assert_eq!(streamed, got);
        assert_eq!(stats.prompt_tokens, prompt.len());
        assert_eq!(stats.generated_tokens, 3);
        assert_eq!(stats.decode_steps, 2);
        assert_eq!(generator.position(), prompt.len() + 2);

        // Overflow is a typed error, raised before running anything.
        generator.reset();
        let ctx = generator.metadata().max_context_len;
        let options = GenerateOptions { max_new_tokens: ctx, ..options };
        match generator.generate(&prompt, &options, &mut sampler, |_| {}) {
            Err(e @ Error::ContextOverflow { .. }) => assert_eq!(
                e.to_string(),
                format!("prompt of {} tokens + {ctx} new tokens exceeds the context of {ctx}", prompt.len())
            ),
            other => panic!("expected ContextOverflow, got {other:?}"),
        }
        assert_eq!(generator.position(), 0);
    }
}

/// A decode step runs no host rule: past the prompt and the first decode
/// step (which changes the row count, or the position first, and builds the
/// position's affine model), each step only patches uniform words. Checked
/// through `decode_step`, and through `generate` as users run it (the
/// device argmax, two runs in flight): five more tokens add no host rule.
#[test]
fn decode_steps_run_no_host_rule() {
    let Some(rt) = runtime() else { return };
    for name in ["llama_tiny_fp32", "llama_tiny_q4", "llama_tiny_8da4w", "llama_tiny_static"] {
        let program = Program::open(fixture(name).join("model.pte")).expect("open fixture");
        let prompt = tokens(fixture("llama_tiny_fp32").join("call0.in0.npy"));
        let mut generator = Generator::new(&rt, &program).expect("load");
        generator.prefill(&prompt).expect("prefill");
        generator.decode_step(1).expect("decode");
        let before = generator.run_times();
        for token in 2..8 {
            generator.decode_step(token).expect("decode");
        }
        let after = generator.run_times();
        assert_eq!(after.op_lowerings, before.op_lowerings, "{name}: decode steps ran host rules");
        assert_eq!(after.plan_builds, before.plan_builds, "{name}: decode steps made bind groups anew");

        let mut rules = Vec::new();
        for max_new_tokens in [3, 8] {
            let mut generator = Generator::new(&rt, &program).expect("load");
            let mut sampler = Sampler::new(SamplerConfig::default()).expect("greedy");
            let options = GenerateOptions { max_new_tokens, stop_tokens: Vec::new(), stop_at_eos: false };
            generator.generate(&prompt, &options, &mut sampler, |_| {}).expect("generate");
            rules.push(generator.run_times().op_lowerings);
        }
        assert_eq!(rules[0], rules[1], "{name}: 5 more generated tokens ran host rules");
    }
}

/// Back from a prompt to single-token steps, the decode chain is taken back
/// as it was (parked with its plan while the prompt's shapes ran), so the
/// decode steps after a second prompt (other tokens, the same length, so
/// the positions are inside the range the position's affine model was
/// checked over) run no host rule and make no bind group, and their logits
/// match those of a generator that never left.
#[test]
fn decode_after_another_prompt_lowers_nothing() {
    let Some(rt) = runtime() else { return };
    for name in ["llama_tiny_fp32", "llama_tiny_q4"] {
        let program = Program::open(fixture(name).join("model.pte")).expect("open fixture");
        let prompt = tokens(fixture("llama_tiny_fp32").join("call0.in0.npy"));
        let mut generator = Generator::new(&rt, &program).expect("load");
        generator.prefill(&prompt).expect("prefill");
        for token in 1..4 {
            generator.decode_step(token).expect("decode");
        }
        generator.reset();
        let second: Vec<u32> = prompt.iter().map(|&t| (t + 1) % 128).collect();
        let second = &second[..];
        generator.prefill(second).expect("second prefill");
        let before = generator.run_times();
        let mut got = Vec::new();
        for token in 1..5 {
            got.push(generator.decode_step(token).expect("decode"));
        }
        let after = generator.run_times();
        assert_eq!(after.op_lowerings, before.op_lowerings, "{name}: decode after a prompt ran host rules");
        assert_eq!(after.plan_builds, before.plan_builds, "{name}: decode after a prompt made bind groups anew");

        let mut fresh = Generator::new(&rt, &program).expect("load");
        fresh.prefill(second).expect("prefill");
        for (token, logits) in (1..5).zip(&got) {
            let want = fresh.decode_step(token).expect("decode");
            assert_eq!(logits, &want, "{name}: logits of token {token} after the parked chain came back");
        }
    }
}

/// The static-shape export (`llama_tiny_static`: `forward(tokens [1,1],
/// input_pos [1])`, `--disable_dynamic_shape`) shares `llama_tiny_fp32`'s
/// weights and prompt. The generator feeds the prompt one token per run;
/// greedy decoding gives the eager goldens' tokens, and the same tokens as
/// the dynamic export over the whole context. A prompt longer than the
/// context is a typed error, raised before running anything.
#[test]
fn static_export_generates_like_the_dynamic_one() {
    let Some(rt) = runtime() else { return };
    let (fixed, dynamic) = (fixture("llama_tiny_static"), fixture("llama_tiny_fp32"));
    let prompt = tokens(dynamic.join("call0.in0.npy"));
    let n = prompt.len();
    let fed: Vec<u32> = (0..n).flat_map(|i| tokens(fixed.join(format!("call{i}.in0.npy")))).collect();
    assert_eq!(fed, prompt, "the static fixture's single-token calls spell the dynamic fixture's prompt");
    let eager: Vec<u32> = (n..n + 3).flat_map(|i| tokens(fixed.join(format!("call{i}.in0.npy")))).collect();
    let fixed_program = Program::open(fixed.join("model.pte")).expect("open fixture");
    let dynamic_program = Program::open(dynamic.join("model.pte")).expect("open fixture");
    let mut generator = Generator::new(&rt, &fixed_program).expect("load");
    let context = generator.metadata().max_context_len;
    let mut greedy = Sampler::new(SamplerConfig::default()).expect("greedy");
    let options = GenerateOptions { max_new_tokens: context - n, stop_tokens: Vec::new(), stop_at_eos: false };
    generator.reset_run_times();
    let (got, stats) = generator.generate(&prompt, &options, &mut greedy, |_| {}).expect("generate");
    assert_eq!(got[..3], eager, "greedy tokens vs the fixture's eager argmax");
    // One run per prompt token, then one per later token.
    assert_eq!(generator.run_times().runs, (n + got.len() - 1) as u64);
    assert_eq!(stats.prompt_tokens, n);
    let mut other = Generator::new(&rt, &dynamic_program).expect("load");
    let (want, _) = other.generate(&prompt, &options, &mut greedy, |_| {}).expect("generate");
    assert_eq!(got, want, "static vs dynamic export over the whole context");

    generator.reset();
    let long: Vec<u32> = prompt.iter().copied().cycle().take(context + 1).collect();
    let options = GenerateOptions { max_new_tokens: 1, ..options };
    match generator.generate(&long, &options, &mut greedy, |_| {}) {
        Err(e @ Error::ContextOverflow { .. }) => assert_eq!(
            e.to_string(),
            format!("prompt of {} tokens + 1 new tokens exceeds the context of {context}", context + 1)
        ),
        other => panic!("expected ContextOverflow, got {other:?}"),
    }
    assert!(matches!(generator.prefill(&long), Err(Error::ContextOverflow { .. })));
    assert_eq!(generator.position(), 0);
}

/// Greedy generation takes the argmax on the device; stepping by hand
/// reads the logits and takes it on the host. Both give the same tokens,
/// on one generator switching between the two.
#[test]
fn device_argmax_agrees_with_host_argmax() {
    let Some(rt) = runtime() else { return };
    for name in ["llama_tiny_fp32", "llama_tiny_q4", "llama_tiny_8da4w_fp16"] {
        let dir = fixture(name);
        let program = Program::open(dir.join("model.pte")).expect("open fixture");
        let prompt = tokens(dir.join("call0.in0.npy"));
        let mut generator = Generator::new(&rt, &program).expect("load");
        let n = generator.metadata().max_context_len - prompt.len();
        let options = GenerateOptions { max_new_tokens: n, stop_tokens: Vec::new(), stop_at_eos: false };
        let mut greedy = Sampler::new(SamplerConfig::default()).expect("greedy");
        generator.reset_run_times();
        let (device, _) = generator.generate(&prompt, &options, &mut greedy, |_| {}).expect("generate");
        // One forward run for the prompt, one per later token.
        let times = generator.run_times();
        assert_eq!(times.runs, n as u64, "{name}: {times:?}");
        assert!(times.waiting > std::time::Duration::ZERO && times.lowering > std::time::Duration::ZERO, "{times:?}");
        generator.reset();
        let argmax = |l: &[f32]| etwgpu_llm::sampler::argmax(l) as u32;
        let mut host = vec![argmax(&generator.prefill(&prompt).expect("prefill"))];
        while host.len() < n {
            let next = argmax(&generator.decode_step(*host.last().expect("not empty")).expect("decode"));
            host.push(next);
        }
        assert_eq!(device, host, "{name}: device vs host argmax over {n} tokens");
    }
}

/// The generator's default float16 KV cache (lavapipe has SHADER_F16)
/// against the fixtures' eager float32 logits, within the float16 row of
/// the tolerance table (rtol = atol = 5e-3: keys and values rounded to an
/// 11-bit mantissa) or the fixture's own row where that is wider (8da4w:
/// int8 activation steps flip); the float32 cache stays within the
/// fixture's row (1e-4 for fp32 and q4). Prefill, then the three eager
/// decode steps.
#[test]
fn float16_kv_cache_logits() {
    let Some(rt) = runtime() else { return };
    let gpu_f16 = rt.features().contains(&"shader-f16");
    for name in ["llama_tiny_fp32", "llama_tiny_q4", "llama_tiny_8da4w"] {
        let dir = fixture(name);
        let program = Program::open(dir.join("model.pte")).expect("open fixture");
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).expect("manifest")).expect("json");
        let row = &manifest["tolerance"]["float32"];
        let (rtol, atol) = (row["rtol"].as_f64().expect("rtol") as f32, row["atol"].as_f64().expect("atol") as f32);
        for (f16, rtol, atol) in [(true, rtol.max(5e-3), atol.max(5e-3)), (false, rtol, atol)] {
            let options = etwgpu_runtime::LoadOptions { kv_cache_f16: f16, ..Generator::default_load_options() };
            let mut generator = Generator::with_options(&rt, &program, &options, &mut |_| {}).expect("load");
            assert_eq!(generator.kv_cache_f16(), f16 && gpu_f16, "{name}");
            for call in 0..4 {
                let input = tokens(dir.join(format!("call{call}.in0.npy")));
                let got = if call == 0 {
                    generator.prefill(&input).expect("prefill")
                } else {
                    generator.decode_step(input[0]).expect("decode")
                };
                let path = dir.join(format!("call{call}.out0.npy"));
                let want = Tensor::read_npy(&path).expect("golden").to_f64_vec();
                assert_eq!(got.len(), want.len(), "{name} call {call}");
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    let w = *w as f32;
                    let ok = (g - w).abs() <= atol + rtol * w.abs();
                    assert!(ok, "{name} (f16 cache {f16}) call {call} logit {i}: {g} vs {w}");
                }
            }
        }
    }
}

/// Fusion (the RMS norms taken into the 4-bit linears after them among
/// them) changes no logit beyond float rounding: the 4-bit fixtures, float32
/// and float16 activations, fused and unfused (`LoadOptions::fuse`), give
/// the same logits within 1e-5 (float32) and 5e-3 (float16, where a norm's
/// float16 rounding may move), at the prefill and the fixture's decode steps.
#[test]
fn fused_and_unfused_logits_agree() {
    let Some(rt) = runtime() else { return };
    for (name, tol) in [("llama_tiny_q4", 1e-5f32), ("llama_tiny_q4_fp16", 5e-3)] {
        let dir = fixture(name);
        let program = Program::open(dir.join("model.pte")).expect("open fixture");
        let mut runs = Vec::new();
        for fuse in [true, false] {
            let options = etwgpu_runtime::LoadOptions { fuse, ..Generator::default_load_options() };
            let mut generator = Generator::with_options(&rt, &program, &options, &mut |_| {}).expect("load");
            let mut logits = vec![generator.prefill(&tokens(dir.join("call0.in0.npy"))).expect("prefill")];
            for call in 1..4 {
                logits.push(generator.decode_step(tokens(dir.join(format!("call{call}.in0.npy")))[0]).expect("decode"));
            }
            runs.push((logits, generator.n_dispatches()));
        }
        let ((fused, fused_dispatches), (plain, plain_dispatches)) = (&runs[0], &runs[1]);
        assert!(fused_dispatches < plain_dispatches, "{name}: {fused_dispatches} vs {plain_dispatches} dispatches");
        for (call, (f, p)) in fused.iter().zip(plain).enumerate() {
            assert_eq!(f.len(), p.len(), "{name} call {call}");
            for (i, (a, b)) in f.iter().zip(p).enumerate() {
                assert!((a - b).abs() <= tol + tol * b.abs(), "{name} call {call} logit {i}: fused {a}, unfused {b}");
            }
        }
    }
}

#[test]
fn missing_metadata_is_a_clear_error() {
    let program = Program::open(fixture("mlp").join("model.pte")).expect("open fixture");
    let err = etwgpu_llm::Metadata::read(&program).expect_err("mlp has no metadata methods");
    assert!(matches!(err, Error::MissingMetadata { method: "get_max_seq_len" }), "{err}");
    assert!(err.to_string().contains("get_max_seq_len"), "{err}");
}

#[test]
fn stop_tokens_and_seeded_sampling() {
    let Some(rt) = runtime() else { return };
    let dir = fixture("llama_tiny_fp32");
    let program = Program::open(dir.join("model.pte")).expect("open fixture");
    let prompt = tokens(dir.join("call0.in0.npy"));
    let expected: Vec<u32> = (1..=3).flat_map(|i| tokens(dir.join(format!("call{i}.in0.npy")))).collect();
    let mut generator = Generator::new(&rt, &program).expect("load");

    // A stop token is emitted, then generation ends.
    let mut greedy = Sampler::new(SamplerConfig::default()).expect("greedy");
    let options = GenerateOptions { max_new_tokens: 10, stop_tokens: vec![expected[1]], stop_at_eos: false };
    let (got, stats) = generator.generate(&prompt, &options, &mut greedy, |_| {}).expect("generate");
    assert_eq!(got, expected[..2]);
    assert!(stats.stopped);
    // Decoding ran ahead (a run was in flight past the stop token), but
    // the position counts the tokens fed, and the next call starts clean.
    assert_eq!(generator.position(), prompt.len() + 1);
    generator.reset();
    let (again, _) = generator.generate(&prompt, &options, &mut greedy, |_| {}).expect("generate again");
    assert_eq!(again, got);

    // The same seed gives the same tokens; the KV cache is reused from 0.
    let config = SamplerConfig { temperature: 1.0, top_k: 40, top_p: 0.95, seed: 11 };
    let options = GenerateOptions { max_new_tokens: 12, stop_tokens: Vec::new(), stop_at_eos: false };
    let mut runs = Vec::new();
    for _ in 0..2 {
        generator.reset();
        let mut sampler = Sampler::new(config.clone()).expect("sampler");
        runs.push(generator.generate(&prompt, &options, &mut sampler, |_| {}).expect("generate").0);
    }
    assert_eq!(runs[0], runs[1]);
    assert_eq!(runs[0].len(), 12);
    assert!(runs[0].iter().all(|&t| t < 128));
}

/// The tokenizer encodes like HuggingFace `tokenizers` did when it trained
/// `test_data/tokenizers/tiny_bytelevel` (tools/export/tiny_tokenizer.py),
/// and decodes back to the text.
#[test]
fn tokenizer_matches_huggingface() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../test_data/tokenizers/tiny_bytelevel");
    let tok = etwgpu_llm::Tokenizer::from_file(dir.join("tokenizer.json")).expect("tokenizer");
    let cases: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).expect("cases")).expect("json");
    for case in cases.as_array().expect("a list") {
        let text = case["text"].as_str().expect("text");
        let want: Vec<u32> =
            case["ids"].as_array().expect("ids").iter().map(|v| v.as_u64().expect("id") as u32).collect();
        assert_eq!(tok.encode(text).expect("encode"), want, "{text:?}");
        assert_eq!(tok.decode(&want).expect("decode"), text);
    }
}

/// Resident set size in bytes, from `/proc/self/statm` (Linux).
fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// 10,000 generated tokens on the tiny Llama (context 32): each time the
/// context is full the generator is reset and starts again (context
/// wrapping), and asking for one token more than fits is a clear error.
/// Host memory (which on lavapipe includes device memory) stays flat.
#[test]
fn ten_thousand_tokens_keep_memory_flat() {
    if !in_own_process("ten_thousand_tokens_keep_memory_flat") {
        return;
    }
    let Some(rt) = runtime() else { return };
    let dir = fixture("llama_tiny_q4");
    let program = Program::open(dir.join("model.pte")).expect("open fixture");
    let prompt = tokens(dir.join("call0.in0.npy"));
    let mut generator = Generator::new(&rt, &program).expect("load");
    let context = generator.metadata().max_context_len;
    let room = context - prompt.len();
    let mut sampler =
        Sampler::new(SamplerConfig { temperature: 0.8, top_k: 40, top_p: 0.95, seed: 7 }).expect("sampler");
    let full = GenerateOptions { max_new_tokens: room, stop_tokens: Vec::new(), stop_at_eos: false };
    // Warm up, then measure.
    generator.generate(&prompt, &full, &mut sampler, |_| {}).expect("generate");
    let over = GenerateOptions { max_new_tokens: room + 1, ..full.clone() };
    generator.reset();
    match generator.generate(&prompt, &over, &mut sampler, |_| {}) {
        Err(Error::ContextOverflow { .. }) => {}
        other => panic!("expected a context overflow, got {other:?}"),
    }
    let before = rss_bytes();
    let mut total = 0;
    while total < 10_000 {
        generator.reset();
        let (got, _) = generator.generate(&prompt, &full, &mut sampler, |_| {}).expect("generate");
        assert_eq!(got.len(), room);
        assert!(got.iter().all(|&t| t < 128), "token ids stay in the vocabulary");
        total += got.len();
    }
    if let (Some(before), Some(after)) = (before, rss_bytes()) {
        let growth = after.saturating_sub(before);
        eprintln!("RSS before {before} B, after {total} tokens {after} B, growth {growth} B");
        assert!(growth < 4 << 20, "memory grew by {growth} bytes over {total} tokens");
    }
}

/// Whether the calling test should run its body here: in a process of its
/// own. Memory tests measure the whole process's resident set, which tests
/// running beside them in this binary would grow, so the first call spawns
/// this test binary again for `test` alone, checks that it passed, and
/// returns `false`; inside that child it returns `true`.
pub fn in_own_process(test: &str) -> bool {
    const CHILD: &str = "ETWGPU_TEST_OWN_PROCESS";
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = std::process::Command::new(exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("the test binary runs again");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("{test} in its own process:\n{text}");
    assert!(out.status.success(), "{test} failed in its own process");
    assert!(text.contains("1 passed"), "{test} did not run in its own process");
    false
}
