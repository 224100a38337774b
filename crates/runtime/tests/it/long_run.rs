//! Long runs: 100,000 back-to-back calls on a small model keep the process's
//! memory flat (on lavapipe the device memory is host memory, so the
//! resident set covers both).

use etwgpu_format::Program;
use etwgpu_runtime::Tensor;

/// Resident set size in bytes, from `/proc/self/statm` (Linux).
fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

#[test]
fn a_hundred_thousand_runs_do_not_grow_memory() {
    if !crate::in_own_process("long_run::a_hundred_thousand_runs_do_not_grow_memory") {
        return;
    }
    let Some(rt) = crate::runtime() else { return };
    let d = crate::fixtures_dir().join("one_op");
    let program = Program::open(d.join("model.pte")).expect("fixture parses");
    let mut method = rt.load(&program, "forward").expect("loads");
    let inputs: Vec<Tensor> =
        (0..2).map(|i| Tensor::read_npy(d.join(format!("call0.in{i}.npy"))).expect("input")).collect();
    let want = Tensor::read_npy(d.join("call0.out0.npy")).expect("golden");
    for _ in 0..2_000 {
        method.run(&inputs).expect("runs");
    }
    let Some(before) = rss_bytes() else {
        eprintln!("no /proc/self/statm: memory not measured");
        return;
    };
    for i in 0..100_000 {
        let out = method.run(&inputs).expect("runs");
        if i % 10_000 == 0 {
            assert_eq!(out[0].bytes, want.bytes, "run {i}");
        }
    }
    let after = rss_bytes().expect("statm");
    let growth = after.saturating_sub(before);
    eprintln!("RSS before {before} B, after 100k runs {after} B, growth {growth} B");
    // 4 MiB: a leak of even 48 bytes per run would exceed it.
    assert!(growth < 4 << 20, "memory grew by {growth} bytes over 100,000 runs");
}
