//! Threads: a parsed program and a runtime are shared across threads, and
//! several loaded methods run concurrently on one device with correct
//! results.

use std::sync::Arc;

use etwgpu_format::Program;
use etwgpu_runtime::{LoadedMethod, Runtime, Tensor};

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>() {}

#[test]
fn shared_types_are_send_and_sync() {
    assert_send_sync::<Program>();
    assert_send_sync::<Runtime>();
    assert_send::<LoadedMethod>();
}

#[test]
fn methods_run_concurrently_on_one_device() {
    let Some(rt) = crate::runtime() else { return };
    let dir = crate::fixtures_dir();
    let cases: Vec<(&str, Vec<Tensor>, Tensor)> = ["worked_example", "mlp", "transformer_block", "reductions"]
        .into_iter()
        .map(|name| {
            let d = dir.join(name);
            let program = Program::open(d.join("model.pte")).expect("fixture parses");
            let n = program.method("forward").expect("forward").inputs.len();
            let inputs = (0..n).map(|i| Tensor::read_npy(d.join(format!("call0.in{i}.npy"))).expect("input")).collect();
            let want = Tensor::read_npy(d.join("call0.out0.npy")).expect("golden");
            (name, inputs, want)
        })
        .collect();
    let programs: Vec<Arc<Program>> = cases
        .iter()
        .map(|(name, _, _)| Arc::new(Program::open(dir.join(name).join("model.pte")).expect("parses")))
        .collect();
    std::thread::scope(|s| {
        for (k, ((name, inputs, want), program)) in cases.iter().zip(&programs).enumerate() {
            // Two threads per program, each with its own loaded method.
            for t in 0..2 {
                let rt = rt.clone();
                let program = Arc::clone(program);
                s.spawn(move || {
                    let mut method = rt.load(&program, "forward").expect("loads");
                    for round in 0..20 {
                        let out = method.run(inputs).expect("runs");
                        assert_eq!(out[0].shape, want.shape, "{name}");
                        for (g, w) in out[0].to_f64_vec().iter().zip(want.to_f64_vec()) {
                            // The fixtures' float32 tolerance (manifest): 1e-4 + 1e-4 |w|.
                            assert!((g - w).abs() <= 1e-4 + 1e-4 * w.abs(), "{name} thread {k}.{t} round {round}");
                        }
                    }
                });
            }
        }
    });
}
