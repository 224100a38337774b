//! Integration tests of `etwgpu-runtime`: the golden fixtures in
//! `test_data/fixtures/` (see [`fixtures`]) and crafted graphs (see
//! [`crafted`], [`llm`] for the LLM ops and [`fusion`] for fused ops), and
//! the trusted path (see [`trusted`]).
//!
//! GPU tests skip, with a printed note, when no adapter exists, unless
//! `GPU_TESTS=require`, in which case a missing adapter fails them.

mod conv;
mod crafted;
mod decode_attention;
mod device_loss;
mod fixtures;
mod fusion;
mod gemm;
mod hostile;
mod int8;
mod limits;
mod llm;
mod long_run;
mod q8_cnn;
mod split;
mod threads;
mod train;
mod trusted;

use std::path::{Path, PathBuf};

use etwgpu_runtime::{Error, Runtime, Tensor};

/// `test_data/fixtures`.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../test_data/fixtures")
}

/// Deterministic test data in [-2, 2).
pub fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 4000) as f32 / 1000.0 - 2.0
        })
        .collect()
}

/// A tensor's values as f32.
pub fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_f64_vec().into_iter().map(|x| x as f32).collect()
}

/// The runtime, or `None` (after printing why) when GPU tests may skip.
pub fn runtime() -> Option<Runtime> {
    static RT: std::sync::OnceLock<Result<Runtime, String>> = std::sync::OnceLock::new();
    let rt = RT.get_or_init(|| Runtime::new().map_err(|e: Error| e.to_string()));
    match rt {
        Ok(rt) => Some(rt.clone()),
        Err(e) if std::env::var("GPU_TESTS").as_deref() == Ok("require") => {
            panic!("GPU_TESTS=require but no GPU runtime: {e}")
        }
        Err(e) => {
            eprintln!("skipping GPU test: {e} (set GPU_TESTS=require to fail instead)");
            None
        }
    }
}

/// Whether the calling test should run its body here: in a process of its
/// own. Memory tests measure the whole process's resident set, which tests
/// running beside them in this binary would grow, so the first call spawns
/// this test binary again for `test` alone, checks that it passed, and
/// returns `false`; inside that child it returns `true`.
pub fn in_own_process(test: &str) -> bool {
    const CHILD: &str = "ETWGPU_TEST_OWN_PROCESS";
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = std::process::Command::new(exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("the test binary runs again");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("{test} in its own process:\n{text}");
    assert!(out.status.success(), "{test} failed in its own process");
    assert!(text.contains("1 passed"), "{test} did not run in its own process");
    false
}
