//! Integration tests of `etwgpu-graph`: inputs that once made lowering or
//! planning panic (found by the `lower_and_plan` fuzz target in
//! `crates/graph/fuzz`) and the committed fuzz corpus must give a program
//! and a plan, or a typed error (and fuse without panicking); every fixture
//! fuses into a chain that lowers and plans.

use std::path::Path;

/// Every input the fuzzer once crashed on, and the committed corpus (the
/// small inputs of a minimized one-hour run), goes through the fuzz
/// target's stages again: parse, lower at three SymInt values, plan.
#[test]
fn fuzz_regressions_do_not_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut n = 0;
    let entries = std::fs::read_dir(root.join("regressions"))
        .expect("regressions dir")
        .chain(std::fs::read_dir(root.join("corpus/lower_and_plan")).expect("corpus dir"));
    for entry in entries {
        let bytes = std::fs::read(entry.expect("entry").path()).expect("read");
        n += 1;
        let Ok(program) = etwgpu_format::Program::from_bytes(bytes) else { continue };
        for method in &program.methods {
            for (_, _, graph) in method.vulkan_delegates() {
                for symint in [0, 1, 7] {
                    if let Ok(lowered) = etwgpu_graph::lower_at_max(graph, symint) {
                        let _ = etwgpu_graph::plan_graph(graph, &lowered.steps, &lowered.nodes, &[]);
                    }
                }
                let _ = etwgpu_graph::fuse(graph, &etwgpu_graph::FuseOptions::default());
            }
        }
    }
    assert!(n >= 600, "only {n} regression and corpus inputs");
}

/// Every fixture fuses deterministically into a chain that lowers and
/// plans at its declared shapes, keeping the graph's inputs, outputs and
/// value ids; SwiGLU and QKV fire on every Llama fixture with float or
/// `linear_q4gsw` weights, the layers' norms go into the 4-bit linears,
/// the final one with the last residual add and row into one op, and RoPE
/// into the attention.
#[test]
fn fixtures_fuse_into_chains_that_lower_and_plan() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../test_data/fixtures");
    let mut names: Vec<_> = std::fs::read_dir(&dir).expect("fixtures").map(|e| e.expect("entry").path()).collect();
    names.sort();
    assert!(names.len() >= 30);
    for path in names {
        let name = path.file_name().expect("name").to_string_lossy().to_string();
        let program = etwgpu_format::Program::open(path.join("model.pte")).expect("fixture parses");
        let mut kinds = Vec::new();
        for method in &program.methods {
            for (_, _, graph) in method.vulkan_delegates() {
                // As the runtime loads it: int64 held as int32.
                let narrowed = etwgpu_graph::retype::narrow_i64(graph);
                let graph = narrowed.as_ref().map_or(graph, |(g, _)| g);
                let options = etwgpu_graph::FuseOptions::default();
                let fused = etwgpu_graph::fuse(graph, &options);
                let again = etwgpu_graph::fuse(graph, &options);
                assert_eq!(etwgpu_graph::describe(&fused.graph), etwgpu_graph::describe(&again.graph), "{name}");
                assert_eq!(fused.fusions, again.fusions, "{name}");
                assert_eq!(fused.graph.input_ids, graph.input_ids, "{name}");
                assert_eq!(fused.graph.output_ids, graph.output_ids, "{name}");
                assert_eq!(fused.graph.values[..graph.values.len()], graph.values[..], "{name}");
                let lowered = etwgpu_graph::lower_at_max(&fused.graph, 0).unwrap_or_else(|e| panic!("{name}: {e}"));
                etwgpu_graph::plan_graph(&fused.graph, &lowered.steps, &lowered.nodes, &[])
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                kinds.extend(fused.fusions.iter().map(|f| f.kind));
            }
        }
        if name.starts_with("llama_tiny") && !name.contains("8da4w") {
            for kind in [etwgpu_graph::FusionKind::Swiglu, etwgpu_graph::FusionKind::Qkv] {
                assert_eq!(kinds.iter().filter(|k| **k == kind).count(), 2, "{name}: {kind:?} per layer");
            }
        }
        // With 4-bit linears each norm of a layer goes into the linear
        // after it (two a layer); the final norm goes with the last residual
        // add and the last token's row into one op, before the output head.
        // RoPE goes into the attention in every layer.
        if name.starts_with("llama_tiny") {
            let n = kinds.iter().filter(|k| **k == etwgpu_graph::FusionKind::RopeAttention).count();
            assert_eq!(n, 2, "{name}: RoPE into the attention");
            let n = kinds.iter().filter(|k| **k == etwgpu_graph::FusionKind::LastRowNorm).count();
            assert_eq!(n, 1, "{name}: the last row's add and norm");
        }
        if name.starts_with("llama_tiny_q4") {
            let n = kinds.iter().filter(|k| **k == etwgpu_graph::FusionKind::NormLinear).count();
            assert_eq!(n, 4, "{name}: norms into linears");
        }
    }
}

/// `narrow_i64` on a `downcast_64_bit=False` export: every int64 tensor
/// (inputs, outputs, constants, intermediates) becomes int32 with int64
/// host I/O and is marked as int64 before, nothing else changes, and a
/// graph without int64 tensors is left alone.
#[test]
fn int64_tensors_are_held_as_int32() {
    use etwgpu_format::{DType, VkValue};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../test_data/fixtures");
    let program = etwgpu_format::Program::open(dir.join("int64_ops/model.pte")).expect("fixture parses");
    let (_, _, graph) = program.methods[0].vulkan_delegates().next().expect("a delegate");
    let (narrowed, before) = etwgpu_graph::retype::narrow_i64(graph).expect("the export keeps int64");
    let mut n = 0;
    for (i, (was, now)) in graph.values.iter().zip(&narrowed.values).enumerate() {
        match (was, now) {
            (VkValue::Tensor(a), VkValue::Tensor(b)) if a.dtype == DType::I64 => {
                n += 1;
                assert_eq!((b.dtype, b.io_dtype(), before[i]), (DType::I32, DType::I64, Some(DType::I64)), "%{i}");
                assert_eq!((&a.dims, a.constant), (&b.dims, b.constant), "%{i}");
            }
            _ => assert_eq!((was, before[i]), (now, None), "%{i}"),
        }
    }
    let constants = graph
        .values
        .iter()
        .filter(|v| matches!(v, VkValue::Tensor(t) if t.dtype == DType::I64 && t.constant.is_some()));
    assert!(n >= 10 && constants.count() >= 2, "{n} int64 tensors");
    assert_eq!(narrowed.chain, graph.chain);
    let plain = etwgpu_format::Program::open(dir.join("int32_ops/model.pte")).expect("fixture parses");
    let (_, _, graph) = plain.methods[0].vulkan_delegates().next().expect("a delegate");
    assert!(etwgpu_graph::retype::narrow_i64(graph).is_none());
}
