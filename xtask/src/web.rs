//! The browser build and its tests.
//!
//! - `cargo xtask web-build [--release]`: builds `etwgpu-web` for
//!   `wasm32-unknown-unknown` and writes the npm package `etwgpu` into
//!   `crates/web/pkg/` (git-ignored): `wasm-bindgen --target web` output
//!   (the wasm, the JS glue, TypeScript declarations), a `package.json`
//!   versioned as the workspace, and `crates/web/npm/README.md`. The demo
//!   page (`crates/web/www/`) imports it from there.
//! - `cargo xtask web-test`: what CI runs for the browser: clippy of the
//!   library crates and `etwgpu-web` for wasm32, the wasm-bindgen tests in
//!   headless Chromium (`wasm-bindgen-test-runner` through chromedriver,
//!   `crates/web/webdriver.json` giving Chromium's path and the WebGPU
//!   flag), then the package built (debug, as the tests built it) and
//!   checked as a user gets it: `npm pack`, `npm install` of the tarball
//!   into a scratch folder, `tsc --noEmit` of `crates/web/npm/usage.ts`
//!   against its declarations, its test page in Chromium
//!   (`crates/web/e2e/package.mjs`), and the demo end to end
//!   (`crates/web/e2e/demo.mjs`), with a screenshot in the target
//!   directory (`web-demo.png`).
//!
//! Needs the `wasm32-unknown-unknown` target, `wasm-bindgen-cli` at the
//! version of `wasm-bindgen` in `Cargo.lock`, Chromium, chromedriver,
//! Node.js with npm, and TypeScript under `target/npm-tools` (`.ci/run`
//! installs them). Without them `web-test` skips with a note, unless
//! `GPU_TESTS=require`, when it fails.

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
    if Command::new("npm").arg("--version").output().is_err() {
        missing.push("npm".into());
    }
    if !tsc(root).exists() {
        missing
            .push(format!("TypeScript ({})", TSC_INSTALL.replace("TARGET", &target_dir(root).display().to_string())));
    }
    missing
}

/// How `.ci/run` installs TypeScript (`TARGET`: the target directory).
const TSC_INSTALL: &str = "npm install --prefix TARGET/npm-tools --no-audit --no-fund typescript@5";

/// The TypeScript compiler `web-test` checks the declarations with.
fn tsc(root: &Path) -> PathBuf {
    target_dir(root).join("npm-tools/node_modules/typescript/bin/tsc")
}

/// The `version`, `license` and `repository` of the workspace manifest's
/// `[workspace.package]`.
pub fn workspace_package(manifest: &str) -> Result<[String; 3], String> {
    let section = manifest
        .split("[workspace.package]")
        .nth(1)
        .ok_or("Cargo.toml has no [workspace.package]")?
        .split("\n[")
        .next()
        .unwrap_or_default();
    let field = |key: &str| {
        section
            .lines()
            .find_map(|l| {
                l.trim().strip_prefix(key)?.trim().strip_prefix('=')?.trim().strip_prefix('"')?.strip_suffix('"')
            })
            .map(str::to_string)
            .ok_or(format!("[workspace.package] has no {key}"))
    };
    Ok([field("version")?, field("license")?, field("repository")?])
}

/// The npm package's `package.json`.
pub fn package_json(version: &str, license: &str, repository: &str) -> String {
    let json = serde_json::json!({
        "name": "etwgpu",
        "version": version,
        "description": "Run ExecuTorch .pte programs (Vulkan delegate), LLMs included, in the browser on WebGPU.",
        "license": license,
        "repository": { "type": "git", "url": format!("git+{repository}.git") },
        "keywords": ["executorch", "webgpu", "wasm", "llm", "pytorch"],
        "type": "module",
        "main": "./etwgpu_web.js",
        "module": "./etwgpu_web.js",
        "types": "./etwgpu_web.d.ts",
        "exports": {
            ".": { "types": "./etwgpu_web.d.ts", "default": "./etwgpu_web.js" },
            "./etwgpu_web_bg.wasm": "./etwgpu_web_bg.wasm",
            "./package.json": "./package.json",
        },
        "files": ["etwgpu_web.js", "etwgpu_web.d.ts", "etwgpu_web_bg.wasm", "etwgpu_web_bg.wasm.d.ts", "README.md"],
        "sideEffects": false,
    });
    serde_json::to_string_pretty(&json).expect("JSON values serialize") + "\n"
}

/// Builds the wasm library and its JavaScript bindings, and writes the
/// npm package into `crates/web/pkg`.
pub fn build(root: &Path, release: bool) -> Result<(), String> {
    let mut cmd = Command::new(cargo());
    cmd.current_dir(root).args(["build", "--target", TARGET, "-p", "etwgpu-web", "--lib"]);
    if release {
        cmd.arg("--release");
    }
    run(&mut cmd)?;
    let profile = if release { "release" } else { "debug" };
    let wasm = target_dir(root).join(TARGET).join(profile).join("etwgpu_web.wasm");
    let out = root.join("crates/web/pkg");
    if out.exists() {
        std::fs::remove_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    run(Command::new("wasm-bindgen").args(["--target", "web", "--out-dir"]).arg(&out).arg(&wasm))?;
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).map_err(|e| format!("Cargo.toml: {e}"))?;
    let [version, license, repository] = workspace_package(&manifest)?;
    let write = |name: &str, text: &str| std::fs::write(out.join(name), text).map_err(|e| format!("{name}: {e}"));
    write("package.json", &package_json(&version, &license, &repository))?;
    let readme = std::fs::read_to_string(root.join("crates/web/npm/README.md")).map_err(|e| format!("README: {e}"))?;
    write("README.md", &readme)?;
    eprintln!(
        "web-build: the npm package etwgpu {version} in {} (`npm pack` there makes the tarball; \
         the demo: serve crates/web on 127.0.0.1 and open /www/)",
        out.display()
    );
    Ok(())
}

/// The package as a user gets it: packed, installed from the tarball into
/// a scratch folder, its declarations type-checked against
/// `crates/web/npm/usage.ts`, and its test page run in Chromium.
fn package_test(root: &Path) -> Result<(), String> {
    let scratch = target_dir(root).join("web-package");
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    }
    let app = scratch.join("app");
    std::fs::create_dir_all(&app).map_err(|e| format!("{}: {e}", app.display()))?;
    let pack = Command::new("npm")
        .current_dir(root.join("crates/web/pkg"))
        .args(["pack", "--json", "--pack-destination"])
        .arg(&scratch)
        .output()
        .map_err(|e| format!("npm pack: {e}"))?;
    if !pack.status.success() {
        return Err(format!("npm pack failed: {}", String::from_utf8_lossy(&pack.stderr)));
    }
    let packed: serde_json::Value =
        serde_json::from_slice(&pack.stdout).map_err(|e| format!("npm pack --json printed no JSON: {e}"))?;
    let tarball = packed[0]["filename"].as_str().ok_or("npm pack named no tarball")?;
    let files: Vec<&str> =
        packed[0]["files"].as_array().into_iter().flatten().filter_map(|f| f["path"].as_str()).collect();
    eprintln!("web-test: {tarball}, {} bytes unpacked: {}", packed[0]["unpackedSize"], files.join(", "));
    let copy = |from: &str, to: &str| {
        std::fs::copy(root.join(from), app.join(to)).map(drop).map_err(|e| format!("{from}: {e}"))
    };
    std::fs::write(app.join("package.json"), "{ \"private\": true, \"type\": \"module\" }\n")
        .map_err(|e| format!("package.json: {e}"))?;
    copy("crates/web/e2e/package/index.html", "index.html")?;
    copy("crates/web/e2e/package/main.js", "main.js")?;
    copy("crates/web/npm/usage.ts", "usage.ts")?;
    run(Command::new("npm")
        .current_dir(&app)
        .args(["install", "--offline", "--no-audit", "--no-fund", "--no-package-lock"])
        .arg(scratch.join(tarball)))?;
    run(Command::new("node").current_dir(&app).arg(tsc(root)).args([
        "--noEmit",
        "--strict",
        "--target",
        "es2022",
        "--module",
        "es2022",
        "--moduleResolution",
        "bundler",
        "--lib",
        "es2022,esnext.disposable,dom",
        "usage.ts",
    ]))?;
    run(Command::new("node").current_dir(root).arg("crates/web/e2e/package.mjs").arg(&app))
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
    package_test(root)?;
    let shot = target_dir(root).join("web-demo.png");
    run(Command::new("node").current_dir(root).arg("crates/web/e2e/demo.mjs").arg(&shot))
}
