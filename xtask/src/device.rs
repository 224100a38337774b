//! `cargo xtask device-bundle`: everything one call on the lent GPU machine
//! needs, which has no Rust and no network there. Downloads Debian's Vulkan
//! loader and libglvnd (NVIDIA's Vulkan driver needs libGLdispatch; with the
//! loader alone wgpu finds no adapter) into `.gl/`, builds the release
//! `etwgpu` binary, the `llm_bench` and `coop_probe` examples and the
//! runtime's criterion benches, and copies them, stripped, into
//! `.device/`. Both folders stay out of git (`.git/info/exclude`); the device
//! tool carries them, and `tools/device/run.sh` runs there.

use std::path::Path;
use std::process::Command;

use crate::run;

/// Debian packages unpacked on the device machine.
const DEBS: &[&str] = &["libvulkan1", "libglvnd0", "libegl1", "libgl1", "libglx0", "libopengl0", "libgles2"];

/// Examples built in release: (package, example); each keeps its name in `.device/`.
const EXAMPLES: &[(&str, &str)] =
    &[("etwgpu-llm", "llm_bench"), ("etwgpu-runtime", "coop_probe"), ("etwgpu-runtime", "attention_probe")];

/// Bench targets built in release: (package, bench target, name in `.device/`).
const BENCHES: &[(&str, &str, &str)] =
    &[("etwgpu-runtime", "main", "runtime-bench"), ("etwgpu-runtime", "gemm", "gemm-bench")];

/// Builds the bundle into `root/.gl` and `root/.device`.
pub fn bundle(root: &Path) -> Result<(), String> {
    let exclude = root.join(".git/info/exclude");
    let mut text = std::fs::read_to_string(&exclude).unwrap_or_default();
    for d in ["/.gl/", "/.device/", "/.xfer/"] {
        if !text.lines().any(|l| l == d) {
            text.push_str(d);
            text.push('\n');
        }
    }
    std::fs::write(&exclude, text).map_err(|e| format!("{}: {e}", exclude.display()))?;
    let gl = root.join(".gl");
    let device = root.join(".device");
    for d in [&gl, &device] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let have = |name: &str| {
        std::fs::read_dir(&gl).is_ok_and(|mut it| {
            it.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with(&format!("{name}_"))))
        })
    };
    if !DEBS.iter().all(|d| have(d)) {
        run(Command::new("apt-get").args(["update", "-qq"]))?;
        run(Command::new("apt-get").arg("download").args(DEBS).current_dir(&gl))?;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(Command::new(&cargo).current_dir(root).args(["build", "--release", "-p", "etwgpu-cli"]))?;
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), Into::into);
    copy_stripped(&target.join("release/etwgpu"), &device.join("etwgpu"))?;
    for (package, example) in EXAMPLES {
        run(Command::new(&cargo).current_dir(root).args(["build", "--release", "-p", package, "--example", example]))?;
        copy_stripped(&target.join("release/examples").join(example), &device.join(example))?;
    }
    for (package, bench, name) in BENCHES {
        let out = Command::new(&cargo)
            .current_dir(root)
            .args(["bench", "-p", package, "--bench", bench, "--no-run", "--message-format=json"])
            .output()
            .map_err(|e| format!("cargo bench: {e}"))?;
        if !out.status.success() {
            return Err(format!("building the {package} bench failed:\n{}", String::from_utf8_lossy(&out.stderr)));
        }
        let exe = String::from_utf8_lossy(&out.stdout)
            .lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["kind"][0] == "bench")
            .find_map(|m| m["executable"].as_str().map(str::to_string))
            .ok_or_else(|| format!("no bench executable for {package}"))?;
        copy_stripped(Path::new(&exe), &device.join(name))?;
    }
    let mut total = 0;
    for dir in [&gl, &device] {
        for e in std::fs::read_dir(dir).map_err(|e| e.to_string())?.flatten() {
            let len = e.metadata().map_or(0, |m| m.len());
            total += len;
            eprintln!("{:>10} {}", len, e.path().display());
        }
    }
    eprintln!("bundle: {} MiB (the device tool carries at most 64 MiB with the working tree)", total >> 20);
    eprintln!("run with carry [\".gl\", \".device\"] and the command: bash tools/device/run.sh");
    Ok(())
}

fn copy_stripped(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to).map_err(|e| format!("{} -> {}: {e}", from.display(), to.display()))?;
    run(Command::new("strip").arg(to))
}
