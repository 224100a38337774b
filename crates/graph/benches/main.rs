//! Planning-time benchmarks of `etwgpu-graph`: the memory planner on large
//! synthetic chains, so planning never dominates load time.

use std::collections::{BTreeMap, BTreeSet};

use criterion::{Criterion, criterion_group, criterion_main};
use etwgpu_graph::plan_memory;
use etwgpu_kernels::{Dispatch, ShaderId, Step, Vid};

/// A transformer-like chain: each step reads the previous output and a
/// residual from a few steps back; every eighth step is a view.
fn chain(n_steps: u32) -> (Vec<Step>, BTreeMap<Vid, u64>, BTreeSet<Vid>) {
    let mut steps = Vec::new();
    let mut sizes = BTreeMap::from([(Vid(0), 1 << 20)]);
    let mut next = 1u32;
    for i in 0..n_steps {
        let prev = Vid(next - 1);
        let residual = Vid(next.saturating_sub(7));
        let out = Vid(next);
        next += 1;
        sizes.insert(out, (1 + u64::from(i % 5)) << 18);
        if i % 8 == 7 {
            steps.push(Step::Alias { out, src: prev });
        } else {
            steps.push(Step::Dispatch(Dispatch {
                shader: ShaderId::ALL[0].into(),
                entry: "main",
                inputs: vec![prev, residual],
                outputs: vec![out],
                params: Vec::new(),
                workgroups: [1, 1, 1],
            }));
        }
    }
    (steps, sizes, BTreeSet::from([Vid(0), Vid(next - 1)]))
}

fn benches(c: &mut Criterion) {
    for n in [1_000, 5_000] {
        let (steps, sizes, pinned) = chain(n);
        c.bench_function(&format!("memory plan {n} steps"), |b| b.iter(|| plan_memory(&steps, &sizes, &pinned)));
    }
}

criterion_group!(name = main_benches; config = Criterion::default().sample_size(10); targets = benches);
criterion_main!(main_benches);
