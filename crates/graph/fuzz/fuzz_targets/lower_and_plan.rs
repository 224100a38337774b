//! Fuzz target: parse, validate (lower every op through its host rule at
//! the declared shapes), memory-plan and fuse (then lower the fused chain)
//! arbitrary bytes, without a GPU.
//! Every stage must return (a program or a typed error), never panic, hang
//! or allocate without bound.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(program) = etwgpu_format::Program::from_bytes(data.to_vec()) else { return };
    for method in &program.methods {
        for (_, _, graph) in method.vulkan_delegates() {
            for symint in [0, 1, 7] {
                if let Ok(lowered) = etwgpu_graph::lower_at_max(graph, symint) {
                    let _ = etwgpu_graph::plan_graph(graph, &lowered.steps, &lowered.nodes, &[]);
                }
            }
            let fused = etwgpu_graph::fuse(graph, &etwgpu_graph::FuseOptions::default());
            if let Ok(lowered) = etwgpu_graph::lower_at_max(&fused.graph, 0) {
                let _ = etwgpu_graph::plan_graph(&fused.graph, &lowered.steps, &lowered.nodes, &[]);
            }
        }
    }
});
