//! Integration tests of `etwgpu-runtime`: the golden fixtures in
//! `test_data/fixtures/` (see [`fixtures`]) and crafted graphs (see
//! [`crafted`], and [`llm`] for the LLM ops).
//!
//! GPU tests skip, with a printed note, when no adapter exists, unless
//! `GPU_TESTS=require`, in which case a missing adapter fails them.

mod crafted;
mod device_loss;
mod fixtures;
mod hostile;
mod limits;
mod llm;
mod long_run;
mod threads;

use etwgpu_runtime::{Error, Runtime};

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
