//! Inputs that once made lowering or planning panic (found by the
//! `lower_and_plan` fuzz target in `crates/graph/fuzz`) and the committed
//! fuzz corpus: each must give a program and a plan, or a typed error.

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
                        let _ = etwgpu_graph::plan_graph(graph, &lowered.steps);
                    }
                }
            }
        }
    }
    assert!(n >= 600, "only {n} regression and corpus inputs");
}
