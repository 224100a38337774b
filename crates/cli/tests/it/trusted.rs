//! `--trusted-shaders`, the opt-in of issue 14 (see
//! `etwgpu_runtime::LoadOptions::trusted_shaders`), and the other decode
//! opt-in beside it, `--int8-activations`
//! (`etwgpu_runtime::LoadOptions::int8_activations`).

use crate::{etwgpu, fixtures_dir, gpu_available, stdout};

/// `--trusted-shaders` on every command that loads a program, its
/// `--help` saying what it drops and for whom; `run` reports the
/// pipelines it made without index clamps (on Vulkan, lavapipe's backend).
#[test]
fn trusted_shaders_flag() {
    for cmd in ["run", "generate", "chat", "bench", "serve"] {
        let help = stdout(&etwgpu(&[cmd, "--help"]));
        assert!(
            help.contains("--trusted-shaders") && help.contains("programs you trust") && help.contains("index clamps"),
            "{cmd}: {help}"
        );
    }
    if !gpu_available() {
        return;
    }
    let dir = fixtures_dir().join("llama_tiny_q4");
    let call = format!("{},{}", dir.join("call0.in0.npy").display(), dir.join("call0.in1.npy").display());
    let model = dir.join("model.pte");
    let report = stdout(&etwgpu(&["run", model.to_str().unwrap(), "--call", &call, "--trusted-shaders"]));
    assert!(report.contains("trusted shaders: "), "{report}");
    let plain = stdout(&etwgpu(&["run", model.to_str().unwrap(), "--call", &call]));
    assert!(!plain.contains("trusted shaders"), "{plain}");
}

/// `--int8-activations` on every command that loads a program, its
/// `--help` saying what it rounds; `run --profile` of a decode call shows
/// the int8 GEMVs with it and not without it.
#[test]
fn int8_activations_flag() {
    for cmd in ["run", "generate", "chat", "bench", "serve"] {
        let help = stdout(&etwgpu(&[cmd, "--help"]));
        assert!(help.contains("--int8-activations") && help.contains("q8_1"), "{cmd}: {help}");
    }
    if !gpu_available() {
        return;
    }
    let dir = fixtures_dir().join("llama_tiny_q4");
    let call = format!("{},{}", dir.join("call1.in0.npy").display(), dir.join("call1.in1.npy").display());
    let model = dir.join("model.pte");
    let with = stdout(&etwgpu(&["run", model.to_str().unwrap(), "--call", &call, "--profile", "--int8-activations"]));
    assert!(with.contains("q4_gemv_i8."), "{with}");
    let plain = stdout(&etwgpu(&["run", model.to_str().unwrap(), "--call", &call, "--profile"]));
    assert!(!plain.contains("_i8."), "{plain}");
}
