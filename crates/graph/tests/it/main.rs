//! Inputs that once made lowering or planning panic (found by the
//! `lower_and_plan` fuzz target in `crates/graph/fuzz`): each must now give
//! a program and a plan, or a typed error.

use std::path::Path;

#[test]
fn fuzz_regressions_do_not_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("regressions dir") {
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
    assert!(n >= 3, "only {n} regression inputs");
}
