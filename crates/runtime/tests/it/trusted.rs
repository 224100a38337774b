//! The trusted path (`LoadOptions::trusted_shaders`, issue 14): fixtures
//! loaded with it give the outputs they give without it, bit for bit (the
//! clamps it drops never fire on their in-bounds indices), and match their
//! goldens; on Vulkan their host-checked kernels really are created
//! unchecked; and a load without it never gets an unchecked pipeline, even
//! on a runtime whose cache holds the unchecked ones of a trusted load of
//! the same program.
//!
//! Each test opens a runtime of its own, so that its pipeline cache counts
//! only its own loads.

use etwgpu_format::Program;
use etwgpu_runtime::{LoadOptions, LoadedMethod, Runtime, Tensor};

use crate::fixtures::run_fixture_loaded_with;
use crate::fixtures_dir;

/// Fixtures that reach the marked families on a software adapter: the
/// 4-bit GEMV and GEMM routes (float32 and float16), the split-KV decode
/// attention and its combine (on the subgroup route too where the device
/// has subgroups), and the tiled matmul.
const FIXTURES: &[&str] = &["llama_tiny_q4", "llama_tiny_q4_fp16", "llama_tiny_fp32", "matmul", "et_vk_sdpa"];

/// A runtime of its own, or `None` where GPU tests skip.
fn own_runtime() -> Option<Runtime> {
    crate::runtime()?;
    Some(Runtime::new().expect("a second runtime on the adapter that opened the first"))
}

/// Loads fixture `name` with `options` and runs all its calls (the inputs
/// its manifest lists); returns the loaded method and every call's
/// outputs.
pub(crate) fn run_all(rt: &Runtime, name: &str, options: &LoadOptions) -> (LoadedMethod, Vec<Vec<Tensor>>) {
    let dir = fixtures_dir().join(name);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).expect("manifest")).expect("json");
    let method_name = manifest["method"].as_str().unwrap_or("forward");
    let program = Program::open(dir.join("model.pte")).expect("model");
    let mut method = rt.load_with(&program, method_name, options).unwrap_or_else(|e| panic!("{name}: load: {e}"));
    let read = |n: &serde_json::Value| Tensor::read_npy(dir.join(n.as_str().expect("a file name"))).expect("input");
    let outs = manifest["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .enumerate()
        .map(|(k, call)| {
            let inputs: Vec<Tensor> = call["inputs"].as_array().expect("inputs").iter().map(read).collect();
            method.run(&inputs).unwrap_or_else(|e| panic!("{name}: call {k}: {e}"))
        })
        .collect();
    (method, outs)
}

fn trusted(on: bool) -> LoadOptions {
    LoadOptions { trusted_shaders: Some(on), ..LoadOptions::default() }
}

/// With and without the option, the fixtures' outputs are the same bytes,
/// and the trusted loads pass the goldens; on Vulkan the loads took the
/// trusted path and created unchecked pipelines (elsewhere neither).
#[test]
fn trusted_loads_match_checked_loads() {
    let Some(rt) = own_runtime() else { return };
    let vulkan = rt.adapter_info().backend == wgpu::Backend::Vulkan;
    let subgroups = [None, Some(true)];
    for name in FIXTURES {
        for sg in subgroups.into_iter().filter(|s| s.is_none() || rt.subgroup_sizes().is_some()) {
            let off = LoadOptions { subgroups: sg, ..trusted(false) };
            let on = LoadOptions { subgroups: sg, ..trusted(true) };
            let (checked, want) = run_all(&rt, name, &off);
            let (unchecked, got) = run_all(&rt, name, &on);
            assert!(!checked.trusted_shaders(), "{name}");
            assert_eq!(unchecked.trusted_shaders(), vulkan, "{name}: the trusted path is Vulkan's");
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g, w, "{name} (subgroups {sg:?}) call {k}: trusted outputs differ");
            }
            run_fixture_loaded_with(&fixtures_dir().join(name), &rt, &on, &mut |_, _| {})
                .unwrap_or_else(|e| panic!("{name} trusted against the goldens: {e}"));
        }
    }
    let cache = rt.pipeline_cache();
    eprintln!("{} pipelines, {} unchecked (subgroups {:?})", cache.len(), cache.unchecked_len(), rt.subgroup_sizes());
    if vulkan {
        assert!(cache.unchecked_len() > 0, "trusted loads created no unchecked pipeline");
    } else {
        assert_eq!(cache.unchecked_len(), 0, "only Vulkan takes the trusted path");
    }
    assert!(cache.len() > cache.unchecked_len(), "unmarked kernels stay checked");
}

/// Loads without the option create no unchecked pipeline; after a trusted
/// load, a load of the same program without it creates a checked pipeline
/// for each unchecked one (keyed apart: it never reuses them) and no
/// unchecked one; the base cache never creates anything unchecked.
#[test]
fn untrusted_loads_never_get_unchecked_pipelines() {
    let Some(rt) = own_runtime() else { return };
    let cache = rt.pipeline_cache();
    assert!(!cache.is_trusted());
    for name in ["matmul", "et_vk_sdpa"] {
        run_all(&rt, name, &trusted(false));
        run_all(&rt, name, &LoadOptions::default());
    }
    assert!(!cache.is_empty());
    assert_eq!(cache.unchecked_len(), 0, "loads without the option created unchecked pipelines");
    let before = cache.len();
    run_all(&rt, "llama_tiny_q4", &trusted(true));
    let unchecked = cache.unchecked_len();
    if rt.adapter_info().backend != wgpu::Backend::Vulkan {
        assert_eq!(unchecked, 0, "only Vulkan takes the trusted path");
        return;
    }
    assert!(unchecked > 0, "the trusted load created no unchecked pipeline");
    let checked = cache.len() - unchecked;
    let (method, _) = run_all(&rt, "llama_tiny_q4", &trusted(false));
    assert!(!method.trusted_shaders());
    assert_eq!(cache.unchecked_len(), unchecked, "the load without the option created unchecked pipelines");
    assert_eq!(
        cache.len() - unchecked,
        checked + unchecked,
        "the load without the option made its own checked pipeline of every kernel the trusted load made \
         unchecked (it had {before} before the trusted load)"
    );
    for id in etwgpu_kernels::ShaderId::ALL {
        assert!(!cache.is_unchecked(&(*id).into()), "{}", id.label());
    }
}
