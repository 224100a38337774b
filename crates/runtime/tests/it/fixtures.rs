//! Golden fixtures: every directory of `test_data/fixtures/` is loaded,
//! its calls run in order on one loaded method, and each output compared
//! with its `.npy` golden within the manifest's per-dtype tolerance.
//!
//! Fixtures using ops that are not in the kernel table are listed in
//! [`NOT_YET_SUPPORTED`] with the ops they miss; the test fails if that
//! list goes stale in either direction.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use etwgpu_format::{DType, Program};
use etwgpu_runtime::Tensor;

use crate::fixtures_dir;

/// Fixtures that cannot run yet, with the ops (or features) they lack.
const NOT_YET_SUPPORTED: &[(&str, &[&str])] = &[];

/// What stops a fixture from running: unsupported ops, and CPU kernels
/// with neither a GPU kernel nor a CPU fallback.
fn missing(program: &Program, method: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Some(m) = program.method(method) else { return out };
    for (k, ins) in m.instructions.iter().enumerate() {
        if let etwgpu_format::Instruction::Kernel { op_index, .. } = ins
            && etwgpu_runtime::kernel_route(m, k) == etwgpu_runtime::Route::Unsupported
        {
            out.insert(format!("CPU kernel {}", m.operators[*op_index].full_name()));
        }
    }
    for (_, _, graph) in m.vulkan_delegates() {
        for call in &graph.chain {
            if etwgpu_kernels::from_name(&call.name).is_none() {
                out.insert(call.name.clone());
            }
        }
    }
    out
}

/// `(rtol, atol)` per dtype name, from the manifest.
fn tolerance(manifest: &serde_json::Value, dtype: DType) -> (f64, f64) {
    let t = &manifest["tolerance"][dtype.torch_name()];
    match (t["rtol"].as_f64(), t["atol"].as_f64()) {
        (Some(r), Some(a)) => (r, a),
        _ => panic!("manifest has no tolerance for {dtype}"),
    }
}

/// Max abs and rel error of `got` against `want`, and whether every
/// element is within `|got - want| <= atol + rtol * |want|`.
fn compare(got: &Tensor, want: &Tensor, (rtol, atol): (f64, f64)) -> (f64, f64, bool) {
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let mut max_abs = 0f64;
    let mut max_rel = 0f64;
    let mut ok = g.len() == w.len();
    for (a, b) in g.iter().zip(&w) {
        let d = (a - b).abs();
        if d.is_nan() && !(a.is_nan() && b.is_nan()) {
            ok = false;
            max_abs = f64::NAN;
            continue;
        }
        if a.is_nan() && b.is_nan() || a == b {
            continue;
        }
        max_abs = max_abs.max(d);
        max_rel = max_rel.max(d / b.abs().max(f64::MIN_POSITIVE));
        ok &= d <= atol + rtol * b.abs();
    }
    (max_abs, max_rel, ok)
}

fn run_fixture(dir: &Path, rt: &etwgpu_runtime::Runtime) -> Result<String, String> {
    run_fixture_with(dir, rt, &mut |_, _| {})
}

/// [`run_fixture`], calling `after(k, method)` after call `k` passed.
fn run_fixture_with(
    dir: &Path,
    rt: &etwgpu_runtime::Runtime,
    after: &mut dyn FnMut(usize, &etwgpu_runtime::LoadedMethod),
) -> Result<String, String> {
    run_fixture_loaded_with(dir, rt, &etwgpu_runtime::LoadOptions::default(), after)
}

/// [`run_fixture_with`], loading with `options`.
pub(crate) fn run_fixture_loaded_with(
    dir: &Path,
    rt: &etwgpu_runtime::Runtime,
    options: &etwgpu_runtime::LoadOptions,
    after: &mut dyn FnMut(usize, &etwgpu_runtime::LoadedMethod),
) -> Result<String, String> {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    let method_name = manifest["method"].as_str().unwrap_or("forward");
    let program = Program::open(dir.join("model.pte")).map_err(|e| e.to_string())?;
    let mut method = rt.load_with(&program, method_name, options).map_err(|e| format!("load: {e}"))?;
    let mut report = String::new();
    let calls = manifest["calls"].as_array().ok_or("manifest has no calls")?;
    for (k, call) in calls.iter().enumerate() {
        let read = |name: &serde_json::Value| {
            Tensor::read_npy(dir.join(name.as_str().unwrap_or_default())).map_err(|e| e.to_string())
        };
        let inputs: Vec<Tensor> =
            call["inputs"].as_array().ok_or("call has no inputs")?.iter().map(read).collect::<Result<_, _>>()?;
        let wants: Vec<Tensor> =
            call["outputs"].as_array().ok_or("call has no outputs")?.iter().map(read).collect::<Result<_, _>>()?;
        let gots = method.run(&inputs).map_err(|e| format!("call {k}: {e}"))?;
        if gots.len() != wants.len() {
            return Err(format!("call {k}: {} outputs, expected {}", gots.len(), wants.len()));
        }
        for (i, (got, want)) in gots.iter().zip(&wants).enumerate() {
            if got.shape != want.shape || got.dtype != want.dtype {
                return Err(format!(
                    "call {k} out {i}: got {} {:?}, expected {} {:?}",
                    got.dtype, got.shape, want.dtype, want.shape
                ));
            }
            let tol = tolerance(&manifest, want.dtype);
            let (abs, rel, ok) = compare(got, want, tol);
            report.push_str(&format!("  call {k} out {i}: max abs {abs:.3e}, max rel {rel:.3e}\n"));
            if !ok {
                return Err(format!(
                    "call {k} out {i}: max abs error {abs:.3e} / rel {rel:.3e} exceeds rtol {} atol {}",
                    tol.0, tol.1
                ));
            }
        }
        after(k, &method);
    }
    report.push_str(&format!("  arena bytes after the calls: {}\n", method.arena_bytes()));
    Ok(report)
}

/// Intermediates share arenas (planned at the maximum shapes) and the
/// golden outputs still match, also over calls at several lengths. The
/// Llama fixtures' decode calls lower their norms and linears to one GEMV
/// each (reading the norm's inputs, writing the linear's outputs), and the
/// plan made at the prompt's shapes still fits them (an op's steps are
/// planned as one: `etwgpu_graph::memory::plan_ops`), so the calls keep
/// their arenas. (`dynamic_symint` has no arena: its two intermediates are
/// live together, so sharing would only add alignment padding.)
#[test]
fn intermediates_share_arenas() {
    let Some(rt) = crate::runtime() else { return };
    for name in ["transformer_block", "llama_tiny_fp32", "llama_tiny_q4", "tiny_vit", "convnet", "dynamic_seq"] {
        let report = run_fixture(&fixtures_dir().join(name), &rt).unwrap_or_else(|e| panic!("{name}: {e}"));
        let arena: u64 = report
            .lines()
            .find_map(|l| l.trim().strip_prefix("arena bytes after the calls: "))
            .and_then(|n| n.parse().ok())
            .expect("the report gives the arena bytes");
        assert!(arena > 0, "{name}: no arena in use:\n{report}");
    }
}

/// Lower once: a decode step whose only change is the position runs no
/// host rule at all (the words the position reaches are patched from its
/// affine model, built at the first step that changed it) and keeps every
/// bind group, while the outputs match the goldens. The tiny Llama
/// fixtures run a prompt (call 0; `llama_tiny_static` feeds it a token a
/// call) and then decode steps: call 1 may change the row count and
/// re-runs the rules of the ops it reaches (at most those that read a
/// SymInt or a changed shape), every later call only the position.
#[test]
fn decode_steps_do_not_lower_the_chain() {
    let Some(rt) = crate::runtime() else { return };
    let options = etwgpu_graph::FuseOptions {
        max_storage_buffers: rt.device().limits().max_storage_buffers_per_shader_stage,
        ..Default::default()
    };
    for name in ["llama_tiny_fp32", "llama_tiny_q4", "llama_tiny_8da4w", "llama_tiny_static"] {
        let dir = fixtures_dir().join(name);
        let program = Program::open(dir.join("model.pte")).expect("model");
        // The ops that can see a position: those with a SymInt argument.
        let graphs: Vec<_> = program.methods[0]
            .delegates
            .iter()
            .filter_map(|d| d.graph.as_ref())
            .map(|g| etwgpu_graph::fuse(g, &options).graph)
            .collect();
        let is_symint = |g: &etwgpu_format::VkGraph, v: &etwgpu_format::ValueId| match g.value(*v) {
            etwgpu_format::VkValue::SymInt(_) => true,
            etwgpu_format::VkValue::ValueList(items) => {
                items.iter().any(|i| matches!(g.value(*i), etwgpu_format::VkValue::SymInt(_)))
            }
            _ => false,
        };
        let n_ops: u64 = graphs.iter().map(|g| g.chain.len() as u64).sum();
        let readers: u64 = graphs
            .iter()
            .map(|g| g.chain.iter().filter(|c| c.args.iter().any(|a| is_symint(g, a))).count() as u64)
            .sum();
        let mut times = Vec::new();
        run_fixture_with(&dir, &rt, &mut |_, m| times.push(m.run_times())).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(times.len() >= 4, "{name}: a prompt and decode steps");
        assert_eq!(times[0].chain_lowerings, 1, "{name}: the chain is lowered once, at load");
        for k in 2..times.len() {
            let (before, after) = (times[k - 1], times[k]);
            let ops = after.op_lowerings - before.op_lowerings;
            eprintln!("{name} call {k}: {ops} host rules of {n_ops} ops ({readers} read a SymInt)");
            assert_eq!(after.chain_lowerings, 1, "{name} call {k}: lowered the whole chain");
            assert_eq!(after.plan_builds, before.plan_builds, "{name} call {k}: made bind groups anew");
            assert_eq!(ops, 0, "{name} call {k}: {ops} host rules run ({readers} ops read a SymInt)");
        }
    }
}

/// A profiled run gives the same outputs as a plain one, and its profile
/// has one row per op (of the fused chain) with every dispatch of the run.
#[test]
fn profiled_runs_match_plain_runs() {
    let Some(rt) = crate::runtime() else { return };
    let dir = fixtures_dir().join("transformer_block");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).expect("manifest")).expect("json");
    let program = Program::open(dir.join("model.pte")).expect("model");
    let mut method = rt.load(&program, "forward").expect("load");
    let inputs: Vec<Tensor> = manifest["calls"][0]["inputs"]
        .as_array()
        .expect("inputs")
        .iter()
        .map(|n| Tensor::read_npy(dir.join(n.as_str().unwrap())).expect("npy"))
        .collect();
    let plain = method.run(&inputs).expect("plain run");
    method.set_profiling(true);
    let profiled = method.run(&inputs).expect("profiled run");
    assert_eq!(plain, profiled);
    let rows = method.profile();
    // One row per op of the chains that ran: the fused ones.
    let options = etwgpu_graph::FuseOptions {
        max_storage_buffers: rt.device().limits().max_storage_buffers_per_shader_stage,
        ..Default::default()
    };
    let n_ops: usize = program.methods[0]
        .delegates
        .iter()
        .filter_map(|d| d.graph.as_ref())
        .map(|g| etwgpu_graph::fuse(g, &options).graph.chain.len())
        .sum();
    assert!(rows.iter().any(|r| r.op.starts_with("etwgpu.")), "fused ops are profiled");
    assert_eq!(rows.len(), n_ops);
    assert_eq!(rows.iter().map(|r| r.dispatches).sum::<usize>(), method.n_dispatches());
    assert!(rows.iter().all(|r| r.nanos >= 0.0 && (r.dispatches == 0) == r.kernels.is_empty()));
}

#[test]
fn golden_fixtures() {
    let Some(rt) = crate::runtime() else { return };
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.join("manifest.json").exists()).collect())
        .unwrap_or_default();
    dirs.sort();
    let mut failures = Vec::new();
    let mut n_passed = 0;
    for dir in &dirs {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let listed = NOT_YET_SUPPORTED.iter().find(|(n, _)| *n == name).map(|(_, ops)| ops);
        let program = match Program::open(dir.join("model.pte")) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{name}: cannot parse model.pte: {e}"));
                continue;
            }
        };
        let lacking = missing(&program, "forward");
        match (listed, lacking.is_empty()) {
            (Some(ops), false) => {
                let listed: BTreeSet<String> = ops.iter().map(|s| s.to_string()).collect();
                if listed != lacking {
                    failures.push(format!("{name}: NOT_YET_SUPPORTED lists {listed:?} but it lacks {lacking:?}"));
                } else {
                    eprintln!("{name}: not yet supported (lacks {lacking:?})");
                }
                continue;
            }
            (Some(_), true) => {
                failures.push(format!("{name}: listed as not yet supported, but every op is supported; unlist it"));
                continue;
            }
            (None, false) => {
                failures.push(format!("{name}: lacks {lacking:?}; support them or list it in NOT_YET_SUPPORTED"));
                continue;
            }
            (None, true) => {}
        }
        match run_fixture(dir, &rt) {
            Ok(report) => {
                n_passed += 1;
                eprintln!("{name}: ok\n{report}");
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    eprintln!("{n_passed} fixtures passed");
    assert!(failures.is_empty(), "fixture failures:\n{}", failures.join("\n"));
}

/// Whole methods: how many calls run on the GPU (delegates and KernelCalls
/// with a kernel-table op) and on the CPU fallback, and the host round
/// trips of one call (GPU calls that read back; outputs that only feed
/// GPU calls stay on the device).
#[test]
fn whole_method_routes_and_round_trips() {
    let Some(rt) = crate::runtime() else { return };
    // (fixture, GPU calls, CPU fallback calls, host round trips per call)
    let cases = [
        ("partial_delegate", 2, 1, 2),
        // delegate 1 -> log (GPU) -> delegate 2 stay on the device.
        ("cpu_leftovers", 4, 2, 2),
        ("three_delegates", 4, 1, 2),
        ("mha_encoder", 3, 3, 3),
        // convolution.out (GPU) -> delegate 0 stays on the device.
        ("tiny_vit", 4, 3, 3),
        // The architecture families (tools/export/fixtures_families.py).
        // scalar_tensor and index.Tensor (the attention mask) on the CPU.
        ("bert_encoder", 2, 2, 2),
        // Mask arithmetic between 5 delegates: scalar_tensor, index.Tensor,
        // cumsum, mul.Scalar and any on the CPU.
        ("gpt2_decoder", 5, 15, 5),
        ("whisper_encoder", 1, 0, 1),
        // The shifted-window mask: copy, slice_scatter, fmod and scalar_tensor
        // on the CPU between 11 delegates; the final mean.out on the GPU.
        ("swin_tiny", 12, 33, 10),
        // mean.out runs as aten.mean.dim between the delegates, on the device.
        ("shufflenet", 3, 0, 1),
        ("convnext", 2, 1, 2),
        // Three casts from uint8 on the CPU feed one delegate.
        ("uint8_image", 1, 3, 1),
    ];
    let mut failures = Vec::new();
    for (name, gpu, cpu, trips) in cases {
        let dir = fixtures_dir().join(name);
        let program = Program::open(dir.join("model.pte")).expect("fixture parses");
        let mut method = rt.load(&program, "forward").expect("fixture loads");
        let inputs: Vec<Tensor> = (0..)
            .map(|i| dir.join(format!("call0.in{i}.npy")))
            .take_while(|p| p.exists())
            .map(|p| Tensor::read_npy(p).expect("input"))
            .collect();
        method.run(&inputs).expect("fixture runs");
        let found = (method.n_gpu_calls(), method.n_cpu_calls(), method.host_round_trips());
        eprintln!("{name}: {} GPU call(s), {} CPU fallback call(s), {} host round trip(s)", found.0, found.1, found.2);
        if found != (gpu, cpu, trips) {
            failures.push(format!("{name}: found {found:?}, expected {:?}", (gpu, cpu, trips)));
        }
    }
    assert!(failures.is_empty(), "(GPU calls, CPU calls, round trips):\n{}", failures.join("\n"));
}

/// Float16 models on a device without SHADER_F16 (simulated by leaving the
/// feature off): float16 tensors are held as float32 and every kernel runs
/// its f32 variant; each fp16 fixture still matches its goldens within the
/// manifest's float16 tolerance (the math is at least as precise).
#[test]
fn float16_models_without_shader_f16() {
    if crate::runtime().is_none() {
        return;
    }
    let options = etwgpu_runtime::RuntimeOptions { adapter: None, disable_f16: true, ..Default::default() };
    let rt = etwgpu_runtime::Runtime::with_options(&options).expect("a runtime without f16");
    assert!(!rt.device().features().contains(wgpu::Features::SHADER_F16));
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .expect("fixtures")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().to_string()))
        .filter(|n| n.contains("fp16"))
        .collect();
    names.sort();
    assert!(names.len() >= 5, "{names:?}");
    for name in names {
        let report =
            run_fixture(&fixtures_dir().join(&name), &rt).unwrap_or_else(|e| panic!("{name} without f16: {e}"));
        eprintln!("{name} without f16:\n{report}");
    }
}
