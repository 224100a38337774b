//! The browser build and its tests.
//!
//! - `cargo xtask web-build [--release]`: builds `etwgpu-web` for
//!   `wasm32-unknown-unknown` and runs `wasm-bindgen --target web` into
//!   `crates/web/www/pkg/` (git-ignored), next to the demo page.
//! - `cargo xtask web-test`: what CI runs for the browser: clippy of the
//!   library crates and `etwgpu-web` for wasm32, the wasm-bindgen tests in
//!   headless Chromium (`wasm-bindgen-test-runner` through chromedriver,
//!   `crates/web/webdriver.json` giving Chromium's path and the WebGPU
//!   flag), then the demo built and checked end to end
//!   (`crates/web/e2e/demo.mjs`, Node.js), with a screenshot in the target
//!   directory (`web-demo.png`).
//!
//! Needs the `wasm32-unknown-unknown` target, `wasm-bindgen-cli` at the
//! version of `wasm-bindgen` in `Cargo.lock`, Chromium, chromedriver and
//! Node.js (`.ci/run` installs them). Without them `web-test` skips with a
//! note, unless `GPU_TESTS=require`, when it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::run;

const TARGET: &str = "wasm32-unknown-unknown";

/// The library crates that must build (and pass clippy) for the web.
const WEB_CRATES: &[&str] =
    &["etwgpu-format", "etwgpu-kernels", "etwgpu-graph", "etwgpu-runtime", "etwgpu-llm", "etwgpu-web"];

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), Into::into)
}

/// The version of `wasm-bindgen` in `Cargo.lock`.
pub fn locked_wasm_bindgen(lock: &str) -> Option<String> {
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "name = \"wasm-bindgen\"" {
            return lines.next()?.trim().strip_prefix("version = \"")?.strip_suffix('"').map(str::to_string);
        }
    }
    None
}

/// What is missing to run the browser tests, if anything.
fn missing_tools(root: &Path) -> Vec<String> {
    let mut missing = Vec::new();
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap_or_default();
    let want = locked_wasm_bindgen(&lock).unwrap_or_default();
    let version = Command::new("wasm-bindgen").arg("--version").output().ok();
    let found = version.as_ref().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if found.as_deref().is_none_or(|v| !v.ends_with(&want)) {
        missing.push(format!(
            "wasm-bindgen {want} (found {:?}; cargo install wasm-bindgen-cli --version {want})",
            found.unwrap_or_default()
        ));
    }
    let installed = Command::new("rustup").args(["target", "list", "--installed"]).output().ok();
    if !installed.is_some_and(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l == TARGET)) {
        missing.push(format!("the {TARGET} target (rustup target add {TARGET})"));
    }
    for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
        if !Path::new(tool).exists() {
            missing.push(format!("{tool} (apt-get install chromium chromium-driver)"));
        }
    }
    if Command::new("node").arg("--version").output().is_err() {
        missing.push("node (Node.js)".into());
    }
    missing
}

/// Builds the wasm library and its JavaScript bindings into
/// `crates/web/www/pkg`.
pub fn build(root: &Path, release: bool) -> Result<(), String> {
    let mut cmd = Command::new(cargo());
    cmd.current_dir(root).args(["build", "--target", TARGET, "-p", "etwgpu-web", "--lib"]);
    if release {
        cmd.arg("--release");
    }
    run(&mut cmd)?;
    let profile = if release { "release" } else { "debug" };
    let wasm = target_dir(root).join(TARGET).join(profile).join("etwgpu_web.wasm");
    let out = root.join("crates/web/www/pkg");
    run(Command::new("wasm-bindgen").args(["--target", "web", "--no-typescript", "--out-dir"]).arg(&out).arg(&wasm))?;
    eprintln!("web-build: {} (serve crates/web/www on 127.0.0.1 and open it)", out.display());
    Ok(())
}

/// Clippy for wasm32, the browser tests, and the demo end to end.
pub fn test(root: &Path) -> Result<(), String> {
    let missing = missing_tools(root);
    if !missing.is_empty() {
        let list = missing.join("\n  ");
        if std::env::var("GPU_TESTS").as_deref() == Ok("require") {
            return Err(format!("GPU_TESTS=require but the browser tests lack:\n  {list}"));
        }
        eprintln!("skipping the browser tests (set GPU_TESTS=require to fail instead); missing:\n  {list}");
        return Ok(());
    }
    let mut clippy = Command::new(cargo());
    clippy.current_dir(root).args(["clippy", "--target", TARGET, "--lib"]);
    for c in WEB_CRATES {
        clippy.args(["-p", c]);
    }
    run(clippy.args(["--", "-D", "warnings"]).env("RUSTFLAGS", ""))?;
    run(Command::new(cargo())
        .current_dir(root)
        .args(["clippy", "--target", TARGET, "-p", "etwgpu-web", "--tests", "--", "-D", "warnings"])
        .env("RUSTFLAGS", ""))?;
    run(Command::new(cargo())
        .current_dir(root)
        .args(["test", "--target", TARGET, "-p", "etwgpu-web"])
        .env("CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER", "wasm-bindgen-test-runner")
        .env("CHROMEDRIVER", "/usr/bin/chromedriver")
        .env("WASM_BINDGEN_TEST_WEBDRIVER_JSON", root.join("crates/web/webdriver.json"))
        .env("WASM_BINDGEN_TEST_TIMEOUT", "900"))?;
    build(root, false)?;
    let shot = target_dir(root).join("web-demo.png");
    run(Command::new("node").current_dir(root).arg("crates/web/e2e/demo.mjs").arg(&shot))
}
