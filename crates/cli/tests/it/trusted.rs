//! `--trusted-shaders`, the opt-in of issue 14 (see
//! `etwgpu_runtime::LoadOptions::trusted_shaders`).

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
