//! Integration tests of `etwgpu-runtime`: the golden fixtures in
//! `test_data/fixtures/` (see [`fixtures`]) and crafted graphs (see
//! [`crafted`], [`llm`] for the LLM ops and [`fusion`] for fused ops).
//!
//! GPU tests skip, with a printed note, when no adapter exists, unless
//! `GPU_TESTS=require`, in which case a missing adapter fails them.

mod crafted;
mod device_loss;
mod fixtures;
mod fusion;
mod hostile;
mod limits;
mod llm;
mod long_run;
mod threads;

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
