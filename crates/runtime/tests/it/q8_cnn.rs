//! Real-shape int8 CNNs end to end: `tools/export/q8_cnn.py` exports a
//! ResNet-18-class network (random weights, widths 64..512, 224x224) with
//! the PT2E static-int8 flow and as float32, each with its eager
//! reference; the int8 program must land within one output quantization
//! step of eager quantized on every logit, the float32 one within the
//! float32 row. Ignored by default (the export takes minutes and 60 MB);
//! run it with
//!
//! ```sh
//! cargo test -p etwgpu-runtime --test it q8_cnn -- --ignored --nocapture
//! ```
//!
//! It skips, saying so, when the exporter environment (`.venv-export`,
//! or the Python named by `ETWGPU_EXPORT_PYTHON`) is absent. With
//! `ETWGPU_Q8_CNN_DIR` set it reads (and, where missing, writes) the
//! programs there instead of a fresh temporary folder.

use std::path::{Path, PathBuf};

use etwgpu_format::Program;
use etwgpu_runtime::Tensor;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The exporter's Python, or `None` after printing why the test skips.
fn export_python() -> Option<PathBuf> {
    let python = std::env::var_os("ETWGPU_EXPORT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv-export/bin/python"));
    if python.exists() {
        Some(python)
    } else {
        eprintln!(
            "skipping: no exporter environment at {} (link .venv-export or set ETWGPU_EXPORT_PYTHON)",
            python.display()
        );
        None
    }
}

/// `q8_cnn.py --only NET --res RES` into `out` unless its programs are there.
fn export(python: &Path, net: &str, res: u32, out: &Path) {
    let done = ["q8", "fp32"].iter().all(|s| out.join(format!("{net}_{s}/model.pte")).exists());
    if done {
        return;
    }
    let status = std::process::Command::new(python)
        .arg(repo().join("tools/export/q8_cnn.py"))
        .args(["--only", net, "--res", &res.to_string(), "--out"])
        .arg(out)
        .status()
        .expect("the exporter starts");
    assert!(status.success(), "q8_cnn.py --only {net} failed");
}

/// Runs `dir/model.pte` on `call0.in0.npy`: the output and the golden.
fn run(rt: &etwgpu_runtime::Runtime, dir: &Path) -> (Vec<f64>, Vec<f64>, serde_json::Value) {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).expect("manifest")).expect("JSON");
    let program = Program::open(dir.join("model.pte")).expect("program");
    let mut method = rt.load(&program, "forward").expect("load");
    let input = Tensor::read_npy(dir.join("call0.in0.npy")).expect("input");
    let want = Tensor::read_npy(dir.join("call0.out0.npy")).expect("golden");
    let t = std::time::Instant::now();
    let got = method.run(&[input]).expect("run");
    eprintln!("{}: one run {:.2} s", dir.display(), t.elapsed().as_secs_f64());
    assert_eq!(got[0].shape, want.shape);
    (got[0].to_f64_vec(), want.to_f64_vec(), manifest)
}

#[test]
#[ignore = "exports a 224x224 ResNet-18 (minutes): cargo test -p etwgpu-runtime --test it q8_cnn -- --ignored"]
fn q8_cnn_resnet18_224_matches_eager_quantized() {
    let Some(python) = export_python() else { return };
    let Some(rt) = crate::runtime() else { return };
    let out = std::env::var_os("ETWGPU_Q8_CNN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("q8_cnn"));
    export(&python, "resnet", 224, &out);

    let (got, want, manifest) = run(&rt, &out.join("resnet_q8"));
    let step = manifest["export"]["output_step"].as_f64().expect("the manifest records the output step");
    let steps: Vec<f64> = got.iter().zip(&want).map(|(g, w)| (g - w).abs() / step).collect();
    let max_steps = steps.iter().cloned().fold(0.0, f64::max);
    let exact = steps.iter().filter(|&&s| s < 1e-3).count();
    let within_one = steps.iter().filter(|&&s| s <= 1.001).count();
    eprintln!(
        "resnet_q8 (224x224): {exact} of {n} logits exact, {within_one} within one output step ({step:.4e}), \
         max {max_steps:.2} steps (max |diff| {:.3e})",
        max_steps * step,
        n = steps.len()
    );
    assert_eq!(within_one, steps.len(), "int8 logits more than one output step from eager quantized");

    let (got, want, _) = run(&rt, &out.join("resnet_fp32"));
    let max_abs = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max);
    let ok = got.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 1e-4 + 1e-4 * w.abs());
    eprintln!("resnet_fp32 (224x224): max |diff| {max_abs:.3e}");
    assert!(ok, "fp32 logits outside the float32 row (rtol 1e-4, atol 1e-4): max |diff| {max_abs:.3e}");
}
