//! Browser tests of etwgpu: the golden fixtures, embedded in the test
//! binary ([`embedded`]), run in headless Chromium on its WebGPU through
//! `wasm-bindgen-test-runner` and compared with the same goldens and
//! tolerances as the native `golden_fixtures` test
//! (`|got - want| <= atol + rtol * |want|`, per-dtype tolerances from each
//! manifest, never loosened). Every test first checks that the adapter is
//! the browser's WebGPU (`BrowserWebGpu`), so a WebGL fallback cannot pass.
//!
//! Run with `cargo xtask web-test` (what CI runs), which sets the runner
//! up. On native targets only the check that [`embedded`] lists every
//! fixture file runs.

mod embedded;

#[cfg(target_arch = "wasm32")]
mod browser {
    use std::cell::RefCell;

    use etwgpu_format::{DType, Program};
    use etwgpu_llm::{GenerateOptions, Generator, Sampler, SamplerConfig};
    use etwgpu_runtime::{LoadOptions, Runtime, RuntimeOptions, Tensor};
    use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

    use crate::embedded::{FIXTURES, Fixture, fixture};

    wasm_bindgen_test_configure!(run_in_browser);

    thread_local! {
        static RT: RefCell<Option<Runtime>> = const { RefCell::new(None) };
    }

    /// The browser's WebGPU runtime (opened once); fails unless the adapter
    /// is WebGPU.
    async fn runtime() -> Runtime {
        if let Some(rt) = RT.with(|r| r.borrow().clone()) {
            return rt;
        }
        let rt = Runtime::new_async(&RuntimeOptions::default()).await.expect("a WebGPU adapter in the browser");
        let backend = format!("{:?}", rt.adapter_info().backend);
        assert_eq!(backend, "BrowserWebGpu", "the adapter must be the browser's WebGPU, not a fallback");
        RT.with(|r| *r.borrow_mut() = Some(rt.clone()));
        rt
    }

    /// `(rtol, atol)` per dtype, from the manifest.
    fn tolerance(manifest: &serde_json::Value, dtype: DType) -> (f64, f64) {
        let t = &manifest["tolerance"][dtype.torch_name()];
        match (t["rtol"].as_f64(), t["atol"].as_f64()) {
            (Some(r), Some(a)) => (r, a),
            _ => panic!("manifest has no tolerance for {dtype}"),
        }
    }

    /// Max abs error, and whether every element is within
    /// `|got - want| <= atol + rtol * |want|` (NaN only where the golden has
    /// NaN), as the native test compares.
    fn compare(got: &Tensor, want: &Tensor, (rtol, atol): (f64, f64)) -> (f64, bool) {
        let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
        let mut max_abs = 0f64;
        let mut ok = g.len() == w.len();
        for (a, b) in g.iter().zip(&w) {
            let d = (a - b).abs();
            if d.is_nan() && !(a.is_nan() && b.is_nan()) {
                ok = false;
                max_abs = f64::NAN;
                continue;
            }
            if a.is_nan() && b.is_nan() || a == b {
                continue;
            }
            max_abs = max_abs.max(d);
            ok &= d <= atol + rtol * b.abs();
        }
        (max_abs, ok)
    }

    /// Loads the fixture's method and runs its calls in order on one loaded
    /// method, comparing every output with its golden.
    async fn run_fixture(f: &Fixture) -> Result<String, String> {
        run_fixture_loaded_with(f, &Default::default()).await
    }

    /// [`run_fixture`], loading with `options`.
    async fn run_fixture_loaded_with(f: &Fixture, options: &LoadOptions) -> Result<String, String> {
        let rt = runtime().await;
        let manifest: serde_json::Value = serde_json::from_str(f.manifest).map_err(|e| e.to_string())?;
        let method_name = manifest["method"].as_str().unwrap_or("forward");
        let program = Program::from_bytes(f.model).map_err(|e| format!("parse: {e}"))?;
        let mut method =
            rt.load_async(&program, method_name, options, &mut |_| {}).await.map_err(|e| format!("load: {e}"))?;
        let calls = manifest["calls"].as_array().ok_or("manifest has no calls")?;
        let npy = |name: &serde_json::Value| {
            Tensor::from_npy_bytes(f.file(name.as_str().unwrap_or_default())).map_err(|e| e.to_string())
        };
        let mut report = String::new();
        for (k, call) in calls.iter().enumerate() {
            let inputs: Vec<Tensor> =
                call["inputs"].as_array().ok_or("call has no inputs")?.iter().map(npy).collect::<Result<_, _>>()?;
            let wants: Vec<Tensor> =
                call["outputs"].as_array().ok_or("call has no outputs")?.iter().map(npy).collect::<Result<_, _>>()?;
            let gots = method.run_async(&inputs).await.map_err(|e| format!("call {k}: {e}"))?;
            if gots.len() != wants.len() {
                return Err(format!("call {k}: {} outputs, expected {}", gots.len(), wants.len()));
            }
            for (i, (got, want)) in gots.iter().zip(&wants).enumerate() {
                if got.shape != want.shape || got.dtype != want.dtype {
                    return Err(format!(
                        "call {k} out {i}: got {} {:?}, expected {} {:?}",
                        got.dtype, got.shape, want.dtype, want.shape
                    ));
                }
                let tol = tolerance(&manifest, want.dtype);
                let (abs, ok) = compare(got, want, tol);
                report.push_str(&format!("call {k} out {i}: max abs {abs:.3e}; "));
                if !ok {
                    return Err(format!(
                        "call {k} out {i}: max abs error {abs:.3e} exceeds rtol {} atol {}",
                        tol.0, tol.1
                    ));
                }
            }
        }
        Ok(report)
    }

    /// Every embedded fixture matches its goldens in the browser.
    #[wasm_bindgen_test]
    async fn golden_fixtures_in_the_browser() {
        let rt = runtime().await;
        web_sys_log(&format!(
            "adapter: {:?} ({:?}), features {:?}",
            rt.adapter_info().name,
            rt.adapter_info().backend,
            rt.features()
        ));
        let mut failures = Vec::new();
        for f in FIXTURES {
            match run_fixture(f).await {
                Ok(report) => web_sys_log(&format!("{}: ok ({report})", f.name)),
                Err(e) => failures.push(format!("{}: {e}", f.name)),
            }
        }
        web_sys_log(&format!("{} of {} fixtures passed", FIXTURES.len() - failures.len(), FIXTURES.len()));
        assert!(failures.is_empty(), "fixture failures in the browser:\n{}", failures.join("\n"));
    }

    /// The tiny Llamas match their goldens with their tables split by rows
    /// at a lowered `split_bytes`, as natively (`etwgpu-runtime`'s
    /// `exported_llamas_match_their_goldens_with_tables_split`).
    #[wasm_bindgen_test]
    async fn tables_split_by_rows_in_the_browser() {
        for (name, split_bytes) in [("llama_tiny_fp32", 16_000), ("llama_tiny_q4", 2000)] {
            let options = LoadOptions { split_bytes: Some(split_bytes), ..LoadOptions::default() };
            match run_fixture_loaded_with(fixture(name), &options).await {
                Ok(report) => web_sys_log(&format!("{name} split at {split_bytes} bytes: ok ({report})")),
                Err(e) => panic!("{name} split at {split_bytes} bytes: {e}"),
            }
        }
    }

    /// Greedy generation gives the fixture's eager argmax tokens, as on
    /// native (`etwgpu-llm`'s `greedy_matches_eager_argmax_tokens`).
    #[wasm_bindgen_test]
    async fn greedy_generation_in_the_browser() {
        let rt = runtime().await;
        for name in ["llama_tiny_fp32", "llama_tiny_q4", "llama_tiny_8da4w"] {
            let f = fixture(name);
            let tokens = |file: &str| -> Vec<u32> {
                let t = Tensor::from_npy_bytes(f.file(file)).expect("npy");
                t.to_f64_vec().into_iter().map(|v| v as u32).collect()
            };
            let program = Program::from_bytes(f.model).expect("parse");
            let prompt = tokens("call0.in0.npy");
            let expected: Vec<u32> = (1..=3).flat_map(|i| tokens(&format!("call{i}.in0.npy"))).collect();
            let mut generator = Generator::new_async(&rt, &program, &mut |_| {}).await.expect("load");
            let mut sampler = Sampler::new(SamplerConfig::default()).expect("greedy");
            let options = GenerateOptions { max_new_tokens: 3, stop_tokens: Vec::new(), stop_at_eos: false };
            let mut streamed = Vec::new();
            let (got, stats) = generator
                .generate_async(&prompt, &options, &mut sampler, |t| streamed.push(t))
                .await
                .expect("generate");
            assert_eq!(got, expected, "{name}: greedy tokens vs the fixture's eager argmax");
            assert_eq!(streamed, got);
            assert_eq!(stats.decode_steps, 2);
        }
    }

    /// The JavaScript API's tensors round-trip through typed arrays.
    #[wasm_bindgen_test]
    fn tensors_round_trip_through_typed_arrays() {
        for t in [
            Tensor::from_f32(&[2, 3], &[1.0, -2.0, 3.5, 0.0, 5.0, 6.25]),
            Tensor::new(DType::I64, vec![2], [7i64, -1].iter().flat_map(|v| v.to_le_bytes()).collect()).expect("i64"),
            Tensor::new(DType::F16, vec![1], vec![0x00, 0x3c]).expect("f16"),
        ] {
            let js = etwgpu_web::tensor_to_js(&t);
            assert_eq!(etwgpu_web::tensor_from_js(&js, "t").expect("back"), t);
        }
    }

    fn web_sys_log(s: &str) {
        wasm_bindgen_test::console_log!("{s}");
    }
}
