//! Host-side benchmarks of `etwgpu-kernels`: how long the host rules take to
//! decode arguments, infer shapes and describe dispatches (the work redone
//! on every re-lowering, e.g. each decode step of a dynamic-shape LLM).
//! GPU kernel timings are in `cargo bench -p etwgpu-runtime`: this crate
//! never touches a GPU.

use criterion::{Criterion, criterion_group, criterion_main};
use etwgpu_kernels::plan::Ctx;
use etwgpu_kernels::{ElemType, Graph, TensorInfo, Value, Vid, from_name};

/// A tiny graph: tensors and ints, enough for the benched ops.
struct BenchGraph {
    tensors: Vec<Option<Vec<u64>>>,
    ints: Vec<i64>,
}

impl Graph for BenchGraph {
    fn value(&self, id: Vid) -> Value<'_> {
        match &self.tensors[id.0 as usize] {
            Some(shape) => Value::Tensor(TensorInfo { id, dtype: ElemType::F32, shape, is_constant: false }),
            None => Value::Int(self.ints[id.0 as usize]),
        }
    }
}

fn bench_op(c: &mut Criterion, name: &str, op: &str, g: &BenchGraph, args: &[Vid]) {
    let id = from_name(op).expect("op is registered");
    c.bench_function(name, |b| b.iter(|| id.lower(&Ctx::new(g, args)).expect("lowers")));
}

fn benches(c: &mut Criterion) {
    // add [64, 1, 512] + [64, 512] -> [64, 64, 512] (broadcasting), alpha 1.
    let g = BenchGraph {
        tensors: vec![Some(vec![64, 1, 512]), Some(vec![64, 512]), None, Some(vec![64, 64, 512])],
        ints: vec![0, 0, 1, 0],
    };
    bench_op(c, "lower aten.add.Tensor (broadcast)", "aten.add.Tensor", &g, &[Vid(0), Vid(1), Vid(2), Vid(3)]);
    // mm [128, 256] x [256, 64].
    let g =
        BenchGraph { tensors: vec![Some(vec![128, 256]), Some(vec![256, 64]), Some(vec![128, 64])], ints: vec![0; 3] };
    bench_op(c, "lower aten.mm.default", "aten.mm.default", &g, &[Vid(0), Vid(1), Vid(2)]);
}

criterion_group!(name = main_benches; config = Criterion::default().sample_size(20); targets = benches);
criterion_main!(main_benches);
