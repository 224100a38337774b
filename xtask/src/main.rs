//! Project automation for etwgpu.
//!
//! - `cargo xtask codegen`: regenerate every generated file (FlatBuffer field
//!   descriptors in `crates/format/src/generated/`, shader modules in
//!   `crates/kernels/src/generated/`).
//! - `cargo xtask check-wgsl`: fail when any generated file is stale, missing
//!   or extra, or when a WGSL shader variant does not validate.
//! - `cargo xtask tidy`: the layout and dependency rules of `STYLE.md`.
//! - `cargo xtask ci`: everything CI runs (fmt, clippy, drift, tidy, tests,
//!   the Python package's tests, bench build, then the browser build and
//!   tests of `web-test`).
//! - `cargo xtask web-build [--release]`: the wasm library, its
//!   JavaScript bindings and TypeScript declarations as the npm package
//!   `etwgpu` in `crates/web/pkg/` (the demo page imports it from there).
//! - `cargo xtask web-test`: clippy for wasm32, the browser tests in
//!   headless Chromium, the npm package packed, installed and used from a
//!   page, and the demo page end to end (see [`web`]).
//! - `cargo xtask python-test`: the `etwgpu` wheel built, installed into a
//!   fresh venv and its pytest suite run (see [`python`]).
//! - `cargo xtask device-bundle`: release binaries and the Vulkan loader for
//!   a run on the lent GPU machine (`tools/device/run.sh`).

mod codegen;
mod device;
mod fbs;
mod python;
mod tidy;
mod web;
mod wgsl;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives one level below the root").to_path_buf()
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: cargo xtask <codegen | check-wgsl | tidy | ci | device-bundle | web-build [--release] | web-test | python-test>"
    );
    ExitCode::from(2)
}

fn run(cmd: &mut Command) -> Result<(), String> {
    eprintln!("$ {cmd:?}");
    let status = cmd.status().map_err(|e| format!("could not start {cmd:?}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{cmd:?} failed with {status}")) }
}

fn ci(root: &Path) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let cargo_cmd = |args: &[&str]| {
        let mut c = Command::new(&cargo);
        c.current_dir(root).args(args);
        c
    };
    run(&mut cargo_cmd(&["fmt", "--all", "--check"]))?;
    codegen::check(root)?;
    tidy::check(root)?;
    // The README's Performance section is generated from committed raw device results.
    run(Command::new("python3").current_dir(root).args([
        "tools/device/report.py",
        "--readme",
        "README.md",
        "--check",
    ]))?;
    run(cargo_cmd(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]).env("RUSTFLAGS", ""))?;
    run(&mut cargo_cmd(&["test", "--workspace"]))?;
    python::test(root)?;
    // The benches build (and link) with the test build's dev profile:
    // `cargo bench --no-run` would build every dependency a second time in
    // release, minutes on CI's two cores. They are measured on the device.
    run(&mut cargo_cmd(&["build", "--workspace", "--benches"]))?;
    let start = std::time::Instant::now();
    web::test(root)?;
    eprintln!("browser build and tests took {:.1} min", start.elapsed().as_secs_f64() / 60.0);
    Ok(())
}

fn main() -> ExitCode {
    let root = workspace_root();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("codegen") => codegen::write(&root),
        Some("check-wgsl") | Some("check") => codegen::check(&root),
        Some("tidy") => tidy::check(&root),
        Some("ci") => ci(&root),
        Some("device-bundle") => device::bundle(&root),
        Some("web-build") => web::build(&root, args.get(1).is_some_and(|a| a == "--release")),
        Some("web-test") => web::test(&root),
        Some("python-test") => python::test(&root),
        _ => return usage(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
