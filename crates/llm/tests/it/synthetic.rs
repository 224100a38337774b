//! The synthetic Llama builder against the exported tiny Llama fixtures:
//! the same program, op by op, at the fixtures' shape; and it runs.

use etwgpu_format::{PlanValue, Program, VkGraph, VkValue};
use etwgpu_llm::{Generator, LlamaConfig, Weights};

use crate::{fixture, runtime};

/// A value as the comparison sees it: kind, scalar value, and for tensors
/// dtype, dims, constant byte length, staging dtype and storage hints
/// (everything but the constant bytes and the memory-planning hint
/// `mem_obj_id`). Lists show their items.
fn value(g: &VkGraph, id: usize) -> String {
    match &g.values[id] {
        VkValue::Tensor(t) => {
            let constant = t.constant.map_or(String::new(), |c| format!(" const {}B", g.constants[c.0 as usize].len));
            format!(
                "v{id}:{}{:?}{constant} io {:?} hints {}/{}",
                t.dtype.torch_name(),
                t.dims,
                t.staging_dtype.map(|d| d.torch_name()),
                t.storage_type,
                t.memory_layout
            )
        }
        VkValue::ValueList(items) => {
            let items: Vec<String> = items.iter().map(|i| value(g, i.idx())).collect();
            format!("v{id}:[{}]", items.join(", "))
        }
        VkValue::SymInt(_) => format!("v{id}:Sym"),
        other => format!("v{id}:{other:?}"),
    }
}

/// The program in comparable lines: each method's plan inputs, outputs and
/// constant outputs, then for each Vulkan delegate its compile specs, graph
/// inputs and outputs, value count, and one line per op with every
/// argument described by [`value`] (so value ids, wiring, kinds, dtypes,
/// shapes and scalars all take part).
fn describe(program: &Program) -> Vec<String> {
    let mut lines = Vec::new();
    for m in &program.methods {
        let plan = |ids: &[usize]| -> Vec<String> {
            ids.iter()
                .map(|&i| match &m.values[i] {
                    PlanValue::Tensor(t) => format!("{:?}{:?} {:?}", t.scalar_type.dtype(), t.sizes, t.dynamism),
                    other => format!("{other:?}"),
                })
                .collect()
        };
        lines.push(format!("method {}: {:?} -> {:?}", m.name, plan(&m.inputs), plan(&m.outputs)));
        for (idx, d, g) in m.vulkan_delegates() {
            let specs: Vec<_> = d.compile_specs.iter().map(|s| (&s.key, &s.value)).collect();
            lines.push(format!("delegate {idx} {}: compile specs {specs:?}", d.backend_id));
            let io =
                |ids: &[etwgpu_format::ValueId]| -> Vec<String> { ids.iter().map(|i| value(g, i.idx())).collect() };
            lines.push(format!("inputs {:?} outputs {:?}", io(&g.input_ids), io(&g.output_ids)));
            lines.push(format!("{} values, {} constants", g.values.len(), g.constants.len()));
            for (n, op) in g.chain.iter().enumerate() {
                let args: Vec<String> = op.args.iter().map(|a| value(g, a.idx())).collect();
                lines.push(format!("op {n} {}({})", op.name, args.join(", ")));
            }
        }
    }
    lines
}

fn compare(fixture_name: &str, config: &LlamaConfig) {
    let exported = Program::open(fixture(fixture_name).join("model.pte")).expect("open fixture");
    let built = Program::from_bytes(config.build()).expect("the synthetic program parses");
    let (want, got) = (describe(&exported), describe(&built));
    for (n, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(g, w, "{fixture_name}: line {n} of the description differs (left: built, right: exported)");
    }
    assert_eq!(got.len(), want.len(), "{fixture_name}: description lengths differ");
    // Sanity: the description covers every op.
    let forward = exported.method("forward").expect("forward");
    let (_, _, g) = forward.vulkan_delegates().next().expect("one delegate");
    assert_eq!(want.iter().filter(|l| l.starts_with("op ")).count(), g.chain.len());
}

#[test]
fn synthetic_fp32_matches_exported_llama_tiny() {
    compare("llama_tiny_fp32", &LlamaConfig { weights: Weights::Fp32, ..LlamaConfig::tiny() });
}

#[test]
fn synthetic_q4_matches_exported_llama_tiny() {
    compare("llama_tiny_q4", &LlamaConfig::tiny());
}

#[test]
fn synthetic_weights_follow_the_seed() {
    let a = LlamaConfig::tiny().build();
    assert_eq!(a, LlamaConfig::tiny().build());
    assert_ne!(a, LlamaConfig { seed: 1, ..LlamaConfig::tiny() }.build());
    let meta = etwgpu_llm::Metadata::read(&Program::from_bytes(a).expect("parses")).expect("metadata");
    assert_eq!((meta.max_seq_len, meta.max_context_len, meta.vocab_size), (32, 32, Some(128)));
}

/// The synthetic tiny models run through the generator: a prefill, a
/// full-length call and decode steps give finite logits.
#[test]
fn synthetic_tiny_generates() {
    let Some(rt) = runtime() else { return };
    for weights in [Weights::Fp32, Weights::Q4 { group_size: 32 }] {
        let config = LlamaConfig { weights, seed: 7, ..LlamaConfig::tiny() };
        let program = Program::from_bytes(config.build()).expect("parses");
        let mut generator = Generator::new(&rt, &program).expect("loads");
        let check = |logits: &[f32], what: &str| {
            assert_eq!(logits.len(), config.vocab, "{weights:?} {what}");
            assert!(logits.iter().all(|x| x.is_finite()), "{weights:?} {what}: non-finite logits");
            assert!(logits.iter().any(|&x| x != logits[0]), "{weights:?} {what}: constant logits");
        };
        let prompt: Vec<u32> = (0..5).map(|i| i * 17 % 128).collect();
        let mut logits = generator.prefill(&prompt).expect("prefill");
        check(&logits, "prefill");
        for step in 0..3 {
            let token = etwgpu_llm::sampler::argmax(&logits) as u32;
            logits = generator.decode_step(token).expect("decode");
            check(&logits, &format!("decode step {step}"));
        }
        assert_eq!(generator.position(), prompt.len() + 3);
        // The longest call the export allows is max_seq_len - 1 tokens; a
        // prompt of max_seq_len (the whole context here) takes two calls.
        for n in [config.max_tokens_per_call(), config.max_seq_len] {
            generator.reset();
            let prompt: Vec<u32> = (0..n as u32).map(|i| i * 5 % 128).collect();
            check(&generator.prefill(&prompt).expect("long prefill"), &format!("prefill of {n}"));
            assert_eq!(generator.position(), n);
        }
    }
}

/// A plan of many dispatches recorded on several threads (one command
/// buffer each, submitted in order) runs as the one pass of one thread
/// does: a 72-layer tiny model (292 dispatches a decode step, the
/// attention inside the O projection's GEMV at its short context; over
/// the 288 that three threads of at least 96 take) gives the
/// same logits bit for bit with 1 and 3 recording threads, in prefill and
/// in decode.
#[test]
fn threaded_recording_gives_the_same_logits() {
    let Some(rt) = runtime() else { return };
    let config = LlamaConfig { n_layers: 72, seed: 3, ..LlamaConfig::tiny() };
    let program = Program::from_bytes(config.build()).expect("parses");
    let prompt: Vec<u32> = (0..6).map(|i| i * 11 % 128).collect();
    let mut runs = Vec::new();
    for threads in [1, 3] {
        let options = etwgpu_runtime::LoadOptions {
            record_threads: Some(threads),
            early_submit: Some(false),
            ..Generator::default_load_options()
        };
        let mut generator = Generator::with_options(&rt, &program, &options, &mut |_| {}).expect("loads");
        assert!(generator.n_dispatches() >= 3 * 96, "{} dispatches", generator.n_dispatches());
        let mut logits = vec![generator.prefill(&prompt).expect("prefill")];
        for token in [5, 9, 77] {
            logits.push(generator.decode_step(token).expect("decode"));
        }
        // One command buffer a run, or the inputs, 3 threads' and the read-backs'.
        let times = generator.run_times();
        assert_eq!(times.command_buffers, times.runs * if threads == 1 { 1 } else { 5 }, "{threads} threads");
        runs.push(logits);
    }
    assert_eq!(runs[0], runs[1], "logits with 3 recording threads differ from 1");
}

/// A run with nothing in flight submits its first dispatches before it
/// records the rest (two command buffers where it took one): the same
/// logits bit for bit as one submission, in prefill and in decode.
#[test]
fn early_submission_gives_the_same_logits() {
    let Some(rt) = runtime() else { return };
    let config = LlamaConfig { n_layers: 12, seed: 5, ..LlamaConfig::tiny() };
    let program = Program::from_bytes(config.build()).expect("parses");
    let prompt: Vec<u32> = (0..7).map(|i| i * 17 % 128).collect();
    let mut runs = Vec::new();
    for early in [false, true] {
        let options = etwgpu_runtime::LoadOptions {
            record_threads: Some(1),
            early_submit: Some(early),
            ..Generator::default_load_options()
        };
        let mut generator = Generator::with_options(&rt, &program, &options, &mut |_| {}).expect("loads");
        assert!(generator.n_dispatches() >= 48, "{} dispatches", generator.n_dispatches());
        let mut logits = vec![generator.prefill(&prompt).expect("prefill")];
        for token in [3, 8, 100] {
            logits.push(generator.decode_step(token).expect("decode"));
        }
        let times = generator.run_times();
        assert_eq!(times.command_buffers, times.runs * if early { 2 } else { 1 }, "early submission {early}");
        runs.push(logits);
    }
    assert_eq!(runs[0], runs[1], "logits with the first dispatches submitted early differ");
}

/// Dispatches per decode step of synthetic 4-bit Llamas with the layer
/// counts of Llama-3.2-1B (16) and SmolLM2-135M (30), at the tiny dims
/// (which take the same decode routes: fast 4-bit GEMVs, split-KV
/// attention): 5 a layer (the Q/K/V GEMV with the RMS norm before it, the
/// attention's split partials with RoPE inside, the O projection's GEMV
/// merging the partials (the combine folded in), the SwiGLU GEMV with the
/// residual add and norm before it, the down projection) and 3 outside the
/// layers (the embedding; the last residual add, the last token's row and
/// the final norm, for that row only; the output head, a plain GEMV; the
/// attention reads the rotation tables at the position, so they are not
/// sliced): 83 and 153 (6 a layer with the combine apart: 99 and 183; 4
/// outside the layers, the add and the row apart and the final norm in
/// the head's GEMV: 84 and 154; 9 a layer and 7 before the norms went into
/// the GEMVs and RoPE into the attention: 151 and 277). These are the
/// split route's counts (`LoadOptions::gemv_attention` off); by default, at
/// these short contexts, the attention runs inside the O projection's GEMV
/// instead of the partials and merge: 4 a layer, 67 and 123.
/// The fp32 programs (float linears between views to `[S, K]`) take the
/// same routes with float GEMVs: 5 a layer and 3 outside on the split route
/// (8 a layer before the norms and the combine went into their GEMVs: 243
/// for SmolLM2's 30 layers), 4 a layer by default. Fused and unfused runs,
/// and the default, give the same logits within 1e-4.
#[test]
fn decode_dispatches_per_token() {
    let Some(rt) = runtime() else { return };
    for (n_layers, weights) in [16, 30].into_iter().flat_map(|n| [(n, None), (n, Some(Weights::Fp32))]) {
        let tiny = LlamaConfig::tiny();
        let config = LlamaConfig { n_layers, seed: 11, weights: weights.unwrap_or(tiny.weights), ..tiny };
        let program = Program::from_bytes(config.build()).expect("parses");
        let prompt: Vec<u32> = (0..5).map(|i| i * 13 % 128).collect();
        let mut runs = Vec::new();
        for (fuse, gemv_attention) in [(true, Some(false)), (false, Some(false)), (true, None)] {
            let options = etwgpu_runtime::LoadOptions { fuse, gemv_attention, ..Generator::default_load_options() };
            let mut generator = Generator::with_options(&rt, &program, &options, &mut |_| {}).expect("loads");
            let mut logits = vec![generator.prefill(&prompt).expect("prefill")];
            for token in [3, 50, 99] {
                logits.push(generator.decode_step(token).expect("decode"));
            }
            runs.push((logits, generator.n_dispatches()));
        }
        assert_eq!(runs[0].1, 5 * n_layers + 3, "{n_layers} layers: fused dispatches per decode step");
        assert!(runs[1].1 > runs[0].1, "{n_layers} layers: unfused {} dispatches", runs[1].1);
        if rt.gemm_caps().gemv_attention {
            assert_eq!(runs[2].1, 4 * n_layers + 3, "{n_layers} layers: dispatches by default");
        }
        for (call, (f, p)) in runs[0].0.iter().zip(&runs[1].0).chain(runs[2].0.iter().zip(&runs[0].0)).enumerate() {
            for (i, (a, b)) in f.iter().zip(p).enumerate() {
                assert!((a - b).abs() <= 1e-4 + 1e-4 * b.abs(), "{n_layers} layers call {call} logit {i}: {a} vs {b}");
            }
        }
    }
}

/// The runtime, a tiny Llama (seed `seed`, a cache of the bound plus 16
/// rows, so the steps past the bound fit) and a prompt
/// of [`etwgpu_runtime::GEMV_ATTN_AUTO_KEYS`] - 6 tokens (`i * stride %
/// 128`) after which eight decode steps straddle the GEMV route's bound;
/// `None` without a GPU or where the device does not take that route.
fn crossing(seed: u64, stride: u32) -> Option<(etwgpu_runtime::Runtime, LlamaConfig, Program, Vec<u32>)> {
    let rt = runtime()?;
    if !rt.gemm_caps().gemv_attention {
        return None;
    }
    let bound = etwgpu_runtime::GEMV_ATTN_AUTO_KEYS;
    let config =
        LlamaConfig { max_seq_len: bound as usize, max_context: bound as usize + 16, seed, ..LlamaConfig::tiny() };
    let program = Program::from_bytes(config.build()).expect("parses");
    let prompt = (0..bound - 6).map(|i| i * stride % 128).collect();
    Some((rt, config, program, prompt))
}

/// The default decode route follows the live context: the attention
/// inside the O projection's GEMV while a step attends to at most
/// [`etwgpu_runtime::GEMV_ATTN_AUTO_KEYS`] keys (4 dispatches a layer),
/// the split partials and the merging GEMV past them (5). After
/// [`crossing`]'s prompt (the bound less 6 tokens), eight decode steps
/// attend to the bound less 5 to the bound plus 2 keys: six on one side,
/// two on the other; each step's logits equal the split route's
/// (`LoadOptions::gemv_attention` off) within 1e-4; the method reports the
/// bound (`LoadedMethod::gemv_attention_keys`) only with the default route
/// options. The first generation
/// lowers the plan again where it crosses; the method keeps the chain of
/// each side, so a second generation over the same positions runs its
/// decode steps with no host rule and no new plan.
#[test]
fn decode_route_follows_the_live_context() {
    let Some((rt, config, program, prompt)) = crossing(5, 7) else { return };
    let bound = etwgpu_runtime::GEMV_ATTN_AUTO_KEYS as usize;
    // The bound the method reports (the decode warm-up's): only where the
    // route follows the live context.
    for (gemv_attention, want) in [(None, bound), (Some(false), 0), (Some(true), 0)] {
        let options = etwgpu_runtime::LoadOptions { gemv_attention, ..Generator::default_load_options() };
        let forward = rt.load_with(&program, "forward", &options).expect("loads");
        assert_eq!(forward.gemv_attention_keys() as usize, want, "gemv_attention {gemv_attention:?}: the bound");
    }
    let mut runs = Vec::new();
    for gemv_attention in [None, Some(false)] {
        let options = etwgpu_runtime::LoadOptions { gemv_attention, ..Generator::default_load_options() };
        let mut generator = Generator::with_options(&rt, &program, &options, &mut |_| {}).expect("loads");
        let mut generations = Vec::new();
        for _ in 0..2 {
            generator.reset();
            generator.prefill(&prompt).expect("prefill");
            generator.reset_run_times();
            let mut steps = Vec::new();
            for k in 0..8 {
                let logits = generator.decode_step((k * 13 % 128) as u32).expect("decode");
                steps.push((logits, generator.n_dispatches()));
            }
            let times = generator.run_times();
            generations.push((steps, times.op_lowerings, times.plan_builds));
        }
        runs.push(generations);
    }
    let n = config.n_layers;
    let (second, lowerings, plans) = &runs[0][1];
    assert_eq!((*lowerings, *plans), (0, 0), "the second generation's host rules and plans, by default");
    for (generation, (auto, split)) in runs[0].iter().zip(&runs[1]).enumerate() {
        for (k, ((a, a_n), (b, b_n))) in auto.0.iter().zip(&split.0).enumerate() {
            let keys = prompt.len() + k + 1;
            let want = if keys <= bound { 4 * n + 3 } else { 5 * n + 3 };
            assert_eq!(*a_n, want, "generation {generation}, step at {keys} keys: dispatches by default");
            assert_eq!(*b_n, 5 * n + 3, "generation {generation}, step at {keys} keys: split route");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert!((x - y).abs() <= 1e-4 + 1e-4 * y.abs(), "generation {generation}, {keys} keys, logit {i}");
            }
        }
    }
    assert_eq!(second.len(), 8);
}

/// [`Generator::warm_up_decode`] moves the decode chain's lowering, plan
/// and affine model to load: after it, a reply's decode steps (after its
/// prompt) run no host rule and build no plan; without it, the first of
/// them lowers the chain and builds its plan. The warm-up leaves a new
/// sequence: the reply's logits are the same with and without it.
#[test]
fn decode_warm_up_at_load() {
    let Some(rt) = runtime() else { return };
    let config = LlamaConfig { seed: 9, ..LlamaConfig::tiny() };
    let program = Program::from_bytes(config.build()).expect("parses");
    let prompt: Vec<u32> = (0..7).map(|i| i * 5 % 128).collect();
    let (warm, cold) =
        (reply(&rt, &program, &prompt, &[4, 40, 90], true), reply(&rt, &program, &prompt, &[4, 40, 90], false));
    assert_eq!((warm.rules, warm.plans), (0, 0), "decode steps after the warm-up: host rules, plans");
    assert!(cold.plans > 0, "without the warm-up the first decode step builds a plan");
    assert_eq!(warm.prompt_logits, cold.prompt_logits, "the prompt's logits with and without the warm-up");
    assert_eq!(warm.steps, cold.steps, "the steps' logits with and without the warm-up");
}

/// One reply of a fresh load of `program`, warmed up first
/// ([`Generator::warm_up_decode`]) or not: `prompt`'s logits, then per
/// decode step of `tokens` its logits and dispatches, and the host rules
/// and plans of the reply's runs after its prompt.
struct Reply {
    prompt_logits: Vec<f32>,
    steps: Vec<(Vec<f32>, usize)>,
    rules: u64,
    plans: u64,
}

fn reply(rt: &etwgpu_runtime::Runtime, program: &Program, prompt: &[u32], tokens: &[u32], warm: bool) -> Reply {
    let mut generator = Generator::new(rt, program).expect("loads");
    if warm {
        generator.warm_up_decode().expect("warm-up");
        assert_eq!(generator.position(), 0, "a new sequence after the warm-up");
    }
    let prompt_logits = generator.prefill(prompt).expect("prefill");
    generator.reset_run_times();
    let steps = tokens.iter().map(|&t| (generator.decode_step(t).expect("decode"), generator.n_dispatches())).collect();
    let times = generator.run_times();
    Reply { prompt_logits, steps, rules: times.op_lowerings, plans: times.plan_builds }
}

/// With int8 activations (`LoadOptions::int8_activations`), the O
/// projection rounds its input to int8 as the other decode GEMVs do, so
/// the decode attention keeps the split route even where the default
/// takes it inside the O projection's GEMV (whose attention output is
/// float): 5 dispatches a layer at a short context, as with
/// `gemv_attention` off.
#[test]
fn int8_activations_keep_the_split_route() {
    let Some(rt) = runtime() else { return };
    if !rt.gemm_caps().gemv_attention || !rt.gemm_caps().int8_activations {
        return;
    }
    let config = LlamaConfig { seed: 12, ..LlamaConfig::tiny() };
    let program = Program::from_bytes(config.build()).expect("parses");
    let mut counts = Vec::new();
    for gemv_attention in [None, Some(false)] {
        let options = etwgpu_runtime::LoadOptions {
            int8_activations: Some(true),
            gemv_attention,
            ..Generator::default_load_options()
        };
        let mut generator = Generator::with_options(&rt, &program, &options, &mut |_| {}).expect("loads");
        generator.prefill(&[5, 6, 7]).expect("prefill");
        let logits = generator.decode_step(8).expect("decode");
        counts.push((generator.n_dispatches(), logits));
    }
    let n = config.n_layers;
    assert_eq!(counts[0].0, 5 * n + 3, "int8 activations, default route: dispatches a decode step");
    assert_eq!(counts[0], counts[1], "int8 activations: the default and the split route");
}

/// [`Generator::warm_up_decode`] also runs the decode steps past
/// [`etwgpu_runtime::GEMV_ATTN_AUTO_KEYS`] where the context reaches there
/// (on devices that take the GEMV route below it), so a reply's first
/// crossing swaps to a chain lowered, planned and modelled at load: after
/// a prompt of [`crossing`]'s, eight decode steps across the bound change route
/// (4, then 5 dispatches a layer) with no host rule and no new plan; without
/// the warm-up the crossing builds a plan. The logits are the same.
#[test]
fn decode_warm_up_covers_both_routes() {
    let Some((rt, config, program, prompt)) = crossing(6, 11) else { return };
    let n = config.n_layers;
    let tokens: Vec<u32> = (0..8).map(|k| k * 17 % 128).collect();
    let (warm, cold) = (reply(&rt, &program, &prompt, &tokens, true), reply(&rt, &program, &prompt, &tokens, false));
    assert_eq!((warm.rules, warm.plans), (0, 0), "the crossing after the warm-up: host rules, plans");
    assert!(cold.plans > 0, "without the warm-up the crossing builds a plan");
    for (k, ((a, a_n), (b, b_n))) in warm.steps.iter().zip(&cold.steps).enumerate() {
        let keys = prompt.len() + k + 1;
        let want = if keys <= etwgpu_runtime::GEMV_ATTN_AUTO_KEYS as usize { 4 * n + 3 } else { 5 * n + 3 };
        assert_eq!((*a_n, *b_n), (want, want), "step at {keys} keys: dispatches with and without the warm-up");
        assert_eq!(a, b, "step at {keys} keys: logits with and without the warm-up");
    }
}

/// A prompt of a few rows and the decode steps take the same kernels on
/// the split route (`LoadOptions::gemv_attention` off), so their chains
/// have one structure; each keeps its own plan all the same, so a second
/// generation (a 4-token prompt, then decode steps) swaps both chains back
/// and runs no host rule and builds no plan, with the first generation's
/// logits.
#[test]
fn chains_of_one_structure_keep_their_plans() {
    let Some(rt) = runtime() else { return };
    let config = LlamaConfig { seed: 8, ..LlamaConfig::tiny() };
    let program = Program::from_bytes(config.build()).expect("parses");
    let options = etwgpu_runtime::LoadOptions { gemv_attention: Some(false), ..Generator::default_load_options() };
    let mut generator = Generator::with_options(&rt, &program, &options, &mut |_| {}).expect("loads");
    let mut runs = Vec::new();
    for _ in 0..2 {
        generator.reset();
        generator.reset_run_times();
        let mut logits = vec![generator.prefill(&[3, 30, 60, 90]).expect("prefill")];
        let prompt_dispatches = generator.n_dispatches();
        for token in [4, 40, 90] {
            logits.push(generator.decode_step(token).expect("decode"));
        }
        let times = generator.run_times();
        runs.push((logits, prompt_dispatches, generator.n_dispatches(), times.op_lowerings, times.plan_builds));
    }
    let (first, second) = (&runs[0], &runs[1]);
    assert_eq!(first.1, first.2, "the prompt and the decode steps: dispatches (one structure)");
    assert!(first.3 > 0 && first.4 > 0, "the first generation lowers and plans");
    assert_eq!((second.3, second.4), (0, 0), "the second generation: host rules, plans");
    assert_eq!(first.0, second.0, "the logits of both generations");
}
