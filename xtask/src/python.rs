//! The Python package's CI step (`cargo xtask python-test`, part of `ci`):
//! build the `etwgpu` wheel, install it into a fresh virtual environment
//! with numpy and pytest, run the pytest suite of `crates/python/tests`,
//! and check the type stubs against the installed module (mypy's
//! `stubtest` on `etwgpu._etwgpu`, `mypy` on the package).
//!
//! The extension module is built by the workspace build CI has just done
//! (`cargo build --workspace --lib --tests`: the dev profile, the one target
//! dir, the workspace's dependency features, so only pyo3 and the module
//! itself compile). `maturin build` would build the crate alone, with other
//! dependency features, and rebuild wgpu, naga and every proc macro; so
//! `crates/python/ci/wheel_from_build.py` packs the built library into the
//! wheel maturin would make, with maturin's own `.dist-info`.
//!
//! Then `etwgpu serve` is tested with the `openai` client
//! ([`serve_openai_test`]).
//!
//! Needs `python3` (3.11 or newer, with `venv`) and PyPI for numpy, pytest,
//! maturin, mypy and openai. pytest's exit status fails the step, and so
//! does its status 5 (no tests ran).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::run;

/// The extension module's file name as cargo writes it.
fn library_name() -> &'static str {
    if cfg!(target_os = "macos") {
        "lib_etwgpu.dylib"
    } else if cfg!(windows) {
        "_etwgpu.dll"
    } else {
        "lib_etwgpu.so"
    }
}

/// A program inside the virtual environment.
fn venv_bin(venv: &Path, name: &str) -> PathBuf {
    if cfg!(windows) { venv.join("Scripts").join(format!("{name}.exe")) } else { venv.join("bin").join(name) }
}

/// Builds the wheel, installs it into a fresh venv and runs pytest.
pub fn test(root: &Path) -> Result<(), String> {
    let start = std::time::Instant::now();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(Command::new(&cargo).current_dir(root).args(["build", "--workspace", "--lib", "--tests"]))?;
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let library = target.join("debug").join(library_name());
    if !library.exists() {
        return Err(format!("the workspace build made no {}", library.display()));
    }
    let work = target.join("python-ci");
    let venv = work.join("venv");
    if work.exists() {
        std::fs::remove_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    }
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    run(Command::new(&python).args(["-m", "venv"]).arg(&venv))?;
    let py = venv_bin(&venv, "python");
    let pip = |args: &[&str]| {
        let mut c = Command::new(&py);
        c.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"]).args(args);
        c
    };
    run(&mut pip(&["numpy", "pytest", "maturin>=1.9,<2", "mypy"]))?;
    let dist = work.join("dist");
    let package = root.join("crates/python");
    run(Command::new(&py)
        .arg(package.join("ci/wheel_from_build.py"))
        .arg("--library")
        .arg(&library)
        .arg("--out")
        .arg(&dist)
        .arg("--maturin")
        .arg(venv_bin(&venv, "maturin")))?;
    let wheel = std::fs::read_dir(&dist)
        .map_err(|e| format!("{}: {e}", dist.display()))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| format!("no wheel in {}", dist.display()))?;
    run(pip(&[]).arg(&wheel))?;
    // From the package directory (not its `python/` sources), so that the
    // tests import the installed wheel.
    eprintln!("$ pytest crates/python/tests");
    let status = Command::new(&py)
        .current_dir(&package)
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-rs", "tests"])
        .status()
        .map_err(|e| format!("could not start pytest: {e}"))?;
    match status.code() {
        Some(0) => {}
        Some(5) => return Err("pytest collected no tests (exit status 5)".into()),
        _ => return Err(format!("pytest failed with {status}")),
    }
    // The stubs of the native module against the module itself, and the
    // package's annotations against those stubs; from `work`, so that
    // the installed wheel is what they read (and mypy's cache goes there).
    let mypy = |args: &[&str]| {
        let mut c = Command::new(&py);
        c.current_dir(&work).arg("-m").args(args);
        c
    };
    run(&mut mypy(&["mypy.stubtest", "etwgpu._etwgpu"]))?;
    run(&mut mypy(&["mypy", "-p", "etwgpu"]))?;
    // `etwgpu serve` against the `openai` client (its own pytest run).
    serve_openai_test(root, &target, &py)?;
    eprintln!("Python package build and tests took {:.1} min", start.elapsed().as_secs_f64() / 60.0);
    Ok(())
}

/// `crates/cli/tests/openai`: pip-installs `openai` into the venv and runs
/// that pytest module against the debug `etwgpu` binary the workspace build
/// above made (`cargo build --tests` builds the CLI's binary for its
/// integration tests; built here if it is missing).
fn serve_openai_test(root: &Path, target: &Path, py: &Path) -> Result<(), String> {
    let exe = target.join("debug").join(if cfg!(windows) { "etwgpu.exe" } else { "etwgpu" });
    if !exe.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        run(Command::new(cargo).current_dir(root).args(["build", "-p", "etwgpu-cli", "--bin", "etwgpu"]))?;
    }
    run(Command::new(py).args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "openai>=1.40,<4"]))?;
    eprintln!("$ pytest crates/cli/tests/openai");
    let status = Command::new(py)
        .current_dir(root)
        .env("ETWGPU_BIN", &exe)
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-rs", "crates/cli/tests/openai"])
        .status()
        .map_err(|e| format!("could not start pytest: {e}"))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(5) => Err("pytest collected no tests in crates/cli/tests/openai (exit status 5)".into()),
        _ => Err(format!("pytest crates/cli/tests/openai failed with {status}")),
    }
}
