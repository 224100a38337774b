//! `etwgpu inspect`: what a `.pte` holds, as text or JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use etwgpu_format::{
    BlobLocation, ConstantSource, DataFile, Delegate, Dynamism, Instruction, Method, PlanValue, Program, VkGraph,
};
use etwgpu_graph::method_plan::{MethodStep, Unrunnable, plan_method};
use serde_json::{Value, json};

/// How a value is described in listings: `float32[2, 4]` or its kind.
fn io_json(v: &PlanValue) -> Value {
    match v {
        PlanValue::Tensor(t) => {
            let mut o = json!({ "dtype": t.scalar_type.name(), "shape": t.sizes });
            if t.dynamism != Dynamism::Static {
                o["dynamic"] = json!(true);
            }
            o
        }
        PlanValue::Int(x) => json!({ "kind": "int", "value": x }),
        PlanValue::Bool(x) => json!({ "kind": "bool", "value": x }),
        PlanValue::Double(x) => json!({ "kind": "double", "value": x }),
        other => json!({ "kind": other.kind() }),
    }
}

fn io_text(v: &PlanValue) -> String {
    match v {
        PlanValue::Tensor(t) => {
            let dims: Vec<String> = t.sizes.iter().map(i64::to_string).collect();
            let dynamic = if t.dynamism == Dynamism::Static { "" } else { " (dynamic; sizes are upper bounds)" };
            format!("{}[{}]{dynamic}", t.scalar_type.name(), dims.join(", "))
        }
        PlanValue::Int(x) => format!("int = {x}"),
        PlanValue::Bool(x) => format!("bool = {x}"),
        PlanValue::Double(x) => format!("double = {x}"),
        other => other.kind().to_string(),
    }
}

/// Constant statistics of one Vulkan graph.
struct ConstantStats {
    count: usize,
    bytes: u64,
    /// Where they live: program named data, external data, delegate bytes, missing.
    by_place: BTreeMap<&'static str, (usize, u64)>,
}

fn constant_stats(g: &VkGraph) -> ConstantStats {
    let mut by_place: BTreeMap<&'static str, (usize, u64)> = BTreeMap::new();
    let mut bytes = 0;
    for c in &g.constants {
        let place = match &c.source {
            ConstantSource::Named { data, .. } if data.file == DataFile::Program => "program named data",
            ConstantSource::Named { .. } => "external data",
            ConstantSource::DelegateBytes(_) => "delegate bytes section",
            ConstantSource::Missing { .. } => "missing",
        };
        let e = by_place.entry(place).or_default();
        e.0 += 1;
        e.1 += c.len;
        bytes += c.len;
    }
    ConstantStats { count: g.constants.len(), bytes, by_place }
}

fn op_histogram(g: &VkGraph) -> BTreeMap<&str, usize> {
    let mut ops = BTreeMap::new();
    for call in &g.chain {
        *ops.entry(call.name.as_str()).or_default() += 1;
    }
    ops
}

fn unsupported<'a>(ops: &BTreeMap<&'a str, usize>) -> Vec<&'a str> {
    ops.keys().copied().filter(|name| etwgpu_kernels::ops::from_name(name).is_none()).collect()
}

fn location(d: &Delegate) -> String {
    match d.location {
        BlobLocation::Inline(i) => format!("inline data {i}"),
        BlobLocation::Segment(i) => format!("segment {i}"),
    }
}

fn kernel_calls(m: &Method) -> Vec<String> {
    m.instructions
        .iter()
        .filter_map(|i| match i {
            Instruction::Kernel { op_index, .. } => Some(m.operators[*op_index].full_name()),
            _ => None,
        })
        .collect()
}

/// Where each KernelCall runs, as the method plan says: its op name and
/// `GPU (kernel)`, `CPU fallback` or `not supported`, in chain order.
fn kernel_routes(m: &Method) -> Vec<(String, String)> {
    plan_method(m)
        .steps
        .into_iter()
        .filter_map(|step| match step {
            MethodStep::GpuKernel { op, graph, .. } => Some((op, format!("GPU ({})", graph.chain[0].name))),
            MethodStep::CpuCall { op, .. } => Some((op, "CPU fallback".to_string())),
            MethodStep::Unrunnable(Unrunnable::NoKernel(op)) => Some((op, "not supported".to_string())),
            _ => None,
        })
        .collect()
}

fn compile_spec_value(v: &[u8]) -> Value {
    match v.len() {
        1 => json!(v[0]),
        4 => json!(i32::from_le_bytes([v[0], v[1], v[2], v[3]])),
        8 => json!(u64::from_le_bytes([v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]])),
        _ => json!(v),
    }
}

/// The JSON report (one object).
pub fn to_json(program: &Program) -> Value {
    let methods: Vec<Value> = program
        .methods
        .iter()
        .map(|m| {
            let delegates: Vec<Value> = m
                .delegates
                .iter()
                .map(|d| {
                    let mut o = json!({
                        "backend_id": d.backend_id,
                        "location": location(d),
                        "blob_bytes": d.blob.len(),
                        "compile_specs": d.compile_specs.iter()
                            .map(|c| (c.key.clone(), compile_spec_value(&c.value)))
                            .collect::<serde_json::Map<_, _>>(),
                    });
                    if let Some(g) = &d.graph {
                        let ops = op_histogram(g);
                        let stats = constant_stats(g);
                        o["n_values"] = json!(g.values.len());
                        o["n_nodes"] = json!(g.chain.len());
                        o["n_inputs"] = json!(g.input_ids.len());
                        o["n_outputs"] = json!(g.output_ids.len());
                        o["unsupported_ops"] = json!(unsupported(&ops));
                        o["ops"] = json!(ops);
                        o["n_constants"] = json!(stats.count);
                        o["constant_bytes"] = json!(stats.bytes);
                        o["constants_by_place"] = json!(
                            stats
                                .by_place
                                .iter()
                                .map(|(k, (n, b))| (k.to_string(), json!({"count": n, "bytes": b})))
                                .collect::<serde_json::Map<_, _>>()
                        );
                    }
                    o
                })
                .collect();
            json!({
                "name": m.name,
                "inputs": m.inputs.iter().map(|&i| io_json(&m.values[i])).collect::<Vec<_>>(),
                "outputs": m.outputs.iter().map(|&i| io_json(&m.values[i])).collect::<Vec<_>>(),
                "n_instructions": m.instructions.len(),
                "fully_delegated": m.is_fully_delegated(),
                "delegates": delegates,
                "kernel_calls": kernel_calls(m),
                "kernel_call_routes": kernel_routes(m)
                    .into_iter()
                    .map(|(op, runs_on)| json!({"op": op, "runs_on": runs_on}))
                    .collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "file_bytes": program.file_bytes().len(),
        "segments": program.segments.len(),
        "named_data": program.named_data.len(),
        "methods": methods,
    })
}

/// The human-readable report.
pub fn to_text(name: &str, program: &Program) -> String {
    let mut o = String::new();
    let w = &mut o;
    let _ = writeln!(
        w,
        "{name}: {} bytes, {} method(s), {} segment(s), {} named blob(s)",
        program.file_bytes().len(),
        program.methods.len(),
        program.segments.len(),
        program.named_data.len()
    );
    for m in &program.methods {
        let _ = writeln!(w, "\nmethod {:?}", m.name);
        let _ = writeln!(w, "  inputs:");
        for (k, &i) in m.inputs.iter().enumerate() {
            let _ = writeln!(w, "    {k}: {}", io_text(&m.values[i]));
        }
        let _ = writeln!(w, "  outputs:");
        for (k, &i) in m.outputs.iter().enumerate() {
            let _ = writeln!(w, "    {k}: {}", io_text(&m.values[i]));
        }
        let calls = kernel_calls(m);
        let n_delegate_calls = m.instructions.iter().filter(|i| matches!(i, Instruction::Delegate { .. })).count();
        let _ = writeln!(
            w,
            "  instructions: {} ({} delegate call(s), {} CPU kernel call(s))",
            m.instructions.len(),
            n_delegate_calls,
            calls.len()
        );
        if m.instructions.is_empty() {
            let _ = writeln!(w, "  no instructions: the outputs are stored values");
        } else if m.is_fully_delegated() {
            let _ = writeln!(w, "  fully delegated: every instruction runs on the GPU");
        } else {
            let _ = writeln!(w, "  partly delegated: some instructions are not Vulkan delegate calls");
            let mut hist: BTreeMap<(String, String), usize> = BTreeMap::new();
            for c in kernel_routes(m) {
                *hist.entry(c).or_default() += 1;
            }
            for ((op, runs_on), n) in hist {
                let _ = writeln!(w, "    kernel {n:>4}  {op}: {runs_on}");
            }
        }
        for (d, del) in m.delegates.iter().enumerate() {
            let _ = writeln!(w, "  delegate {d}: {} ({}, {} bytes)", del.backend_id, location(del), del.blob.len());
            if !del.compile_specs.is_empty() {
                let specs: Vec<String> =
                    del.compile_specs.iter().map(|c| format!("{}={}", c.key, compile_spec_value(&c.value))).collect();
                let _ = writeln!(w, "    compile specs: {}", specs.join(", "));
            }
            let Some(g) = &del.graph else {
                let _ = writeln!(w, "    (not a Vulkan delegate: etwgpu cannot run it)");
                continue;
            };
            let _ = writeln!(
                w,
                "    graph: {} values, {} nodes, {} inputs, {} outputs",
                g.values.len(),
                g.chain.len(),
                g.input_ids.len(),
                g.output_ids.len()
            );
            let stats = constant_stats(g);
            let places: Vec<String> =
                stats.by_place.iter().map(|(k, (n, b))| format!("{n} in {k} ({b} bytes)")).collect();
            let _ = writeln!(
                w,
                "    constants: {} ({} bytes){}{}",
                stats.count,
                stats.bytes,
                if places.is_empty() { "" } else { ": " },
                places.join(", ")
            );
            let ops = op_histogram(g);
            let _ = writeln!(w, "    ops ({} distinct):", ops.len());
            for (op, n) in &ops {
                let _ = writeln!(w, "      {n:>4}  {op}");
            }
            let missing = unsupported(&ops);
            if missing.is_empty() {
                let _ = writeln!(w, "    every op is supported by this build");
            } else {
                let _ = writeln!(w, "    not supported by this build yet ({}): {}", missing.len(), missing.join(", "));
            }
        }
    }
    o
}

/// `inspect --plan`: per Vulkan delegate, the chain lowered at the declared
/// (maximum) shapes without a GPU, its dispatches before and after fusion,
/// and the memory plan of the chain that runs (fused unless `fuse` is off).
pub fn plan_text(name: &str, program: &Program, fuse: bool) -> String {
    let mut o = String::new();
    let w = &mut o;
    let _ = writeln!(
        w,
        "{name}: memory plan at the declared (maximum) shapes, {}",
        if fuse { "fused" } else { "not fused (--no-fuse)" }
    );
    let counts = |steps: &[etwgpu_kernels::Step]| {
        let dispatches = steps.iter().filter(|s| matches!(s, etwgpu_kernels::Step::Dispatch(_))).count();
        let aliases = steps.iter().filter(|s| matches!(s, etwgpu_kernels::Step::Alias { .. })).count();
        (dispatches, aliases)
    };
    // Lowered as at load: with the ops' scratch, host-read SymInts
    // (positions) 0.
    let lower = |g: &etwgpu_format::VkGraph| {
        let mut g = g.clone();
        let lowerer = etwgpu_graph::Lowerer::with_scratch(&mut g, 0)?;
        let lowered = lowerer.lower_at_max(&g, 0)?;
        Ok::<_, etwgpu_graph::LowerError>((lowered, lowerer.scratch(), g))
    };
    for m in &program.methods {
        let _ = writeln!(w, "\nmethod {:?}", m.name);
        // Dispatches of all delegates per call: as exported, and fused.
        let mut totals: Option<(usize, usize)> = None;
        for (d, del) in m.delegates.iter().enumerate() {
            let Some(original) = &del.graph else {
                let _ = writeln!(w, "  delegate {d}: not a Vulkan delegate");
                continue;
            };
            // As at load: int64 tensors held as int32, then fused.
            let narrowed = etwgpu_graph::retype::narrow_i64(original);
            let original = narrowed.as_ref().map_or(original, |(g, _)| g);
            let lowered = match lower(original) {
                Ok(l) => l,
                Err(e) => {
                    let _ = writeln!(w, "  delegate {d}: cannot lower: {e}");
                    continue;
                }
            };
            let (dispatches, aliases) = counts(&lowered.0.steps);
            let _ =
                writeln!(w, "  delegate {d}: {} nodes, {dispatches} dispatches, {aliases} views", original.chain.len());
            let fused = etwgpu_graph::fuse(original, &etwgpu_graph::FuseOptions::default());
            let before = dispatches;
            let (lowered, scratch, g) = if fuse {
                match lower(&fused.graph) {
                    Ok(l) => {
                        let (dispatches, aliases) = counts(&l.0.steps);
                        let t = totals.get_or_insert((0, 0));
                        *t = (t.0 + before, t.1 + dispatches);
                        let _ = writeln!(
                            w,
                            "    fused ({}): {} nodes, {dispatches} dispatches, {aliases} views",
                            fused.summary(),
                            fused.graph.chain.len()
                        );
                        l
                    }
                    Err(e) => {
                        let _ = writeln!(w, "    fused: cannot lower: {e}");
                        continue;
                    }
                }
            } else {
                lowered
            };
            let plan = match etwgpu_graph::plan_graph(&g, &lowered.steps, &lowered.nodes, &scratch) {
                Ok(p) => p,
                Err(e) => {
                    let _ = writeln!(w, "  delegate {d}: cannot plan: {e}");
                    continue;
                }
            };
            let arena_classes =
                plan.classes.values().filter(|c| matches!(c.placement, etwgpu_graph::Placement::Arena { .. })).count();
            let ratio = |a: u64, b: u64| if b == 0 { "-".to_string() } else { format!("{:.3}", a as f64 / b as f64) };
            let _ = writeln!(w, "    naive:       {:>10} bytes", plan.naive_bytes);
            let _ = writeln!(
                w,
                "    planned:     {:>10} bytes ({} dedicated + {} in {} arena(s) shared by {} storage class(es))",
                plan.planned_bytes(),
                plan.dedicated_bytes,
                plan.arena_bytes,
                plan.arenas.len(),
                arena_classes
            );
            let _ = writeln!(w, "    lower bound: {:>10} bytes", plan.lower_bound_bytes);
            let _ = writeln!(
                w,
                "    planned / lower bound: {}, planned / naive: {}",
                ratio(plan.planned_bytes(), plan.lower_bound_bytes),
                ratio(plan.planned_bytes(), plan.naive_bytes)
            );
        }
        if let Some((before, after)) = totals {
            let _ = writeln!(w, "  dispatches per call: {before} before fusion, {after} after");
        }
    }
    o
}
