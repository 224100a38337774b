//! Browser tests of etwgpu: the golden fixtures, embedded in the test
//! binary ([`embedded`]), run in headless Chromium on its WebGPU through
//! `wasm-bindgen-test-runner` and compared with the same goldens and
//! tolerances as the native `golden_fixtures` test
//! (`|got - want| <= atol + rtol * |want|`, per-dtype tolerances from each
//! manifest, never loosened). Every test first checks that the adapter is
//! the browser's WebGPU (`BrowserWebGpu`), so a WebGL fallback cannot pass.
//!
//! A table of 200 MiB and more, built in wasm memory, checks the browser
//! at full size (`a_table_over_200_mib_runs_in_the_browser`).
//!
//! Run with `cargo xtask web-test` (what CI runs), which sets the runner
//! up. On native targets only the check that [`embedded`] lists every
//! fixture file runs.

mod embedded;

#[cfg(target_arch = "wasm32")]
mod browser {
    use std::cell::RefCell;

    use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
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

    /// Rows and columns of the table of
    /// [`a_table_over_200_mib_runs_in_the_browser`]: a model dim of 2048
    /// (Llama 3.2 1B's) and 200 MiB and 100 rows, 210 MB.
    const TABLE_DIMS: [usize; 2] = [(200 << 20) / (2048 * 4) + 100, 2048];

    /// WebGPU's default `maxStorageBufferBindingSize` (128 MiB): what a
    /// device gets that asks for no more, and what many adapters report.
    const WEBGPU_DEFAULT_BINDING_BYTES: u64 = 128 << 20;

    /// A float32 table of 210 MB, read by an embedding and by a linear
    /// (tied weights, as SmolLM2's are) and built here in wasm memory, runs
    /// at the device's limits (Chromium's SwiftShader binds 1 GiB: one
    /// buffer) and split by rows at WebGPU's default 128 MiB binding limit
    /// (two chunks, as on an adapter with that limit), and matches a CPU
    /// reference computed here from the same numbers: the looked-up rows
    /// (in the first chunk, at the end and start of the second, the last
    /// row) exactly, the logits (accumulated in f64) within rtol = atol =
    /// 1e-4, the float32 row of `tools/export/tolerances.py`. Natively, past
    /// lavapipe's own 128 MiB limit: `etwgpu-runtime`'s
    /// `a_table_past_the_device_binding_limit_runs_split`.
    #[wasm_bindgen_test]
    async fn a_table_over_200_mib_runs_in_the_browser() {
        let rt = runtime().await;
        let limits = rt.device().limits();
        web_sys_log(&format!(
            "limits: maxStorageBufferBindingSize {} MiB, maxBufferSize {} MiB",
            limits.max_storage_buffer_binding_size >> 20,
            limits.max_buffer_size >> 20
        ));
        let t0 = js_sys::Date::now();
        let [v, d] = TABLE_DIMS;
        // The table's bytes (values in [-2, 2), xorshift), generated once;
        // the references are read from them before they move into the
        // program.
        let mut table = vec![0u8; v * d * 4];
        let mut s = 41u32.wrapping_mul(2_654_435_761).wrapping_add(1);
        for x in table.chunks_exact_mut(4) {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            x.copy_from_slice(&((s % 4000) as f32 / 1000.0 - 2.0).to_le_bytes());
        }
        let t_gen = js_sys::Date::now();
        let at = |i: usize| f32::from_le_bytes([table[4 * i], table[4 * i + 1], table[4 * i + 2], table[4 * i + 3]]);
        let xv: Vec<f32> = (0..d).map(|j| ((j * 37 % 101) as f32 - 50.0) / 25.0).collect();
        let second = (WEBGPU_DEFAULT_BINDING_BYTES / (d as u64 * 4)) as i64;
        let ids = [3i64, second - 1, second, v as i64 - 1];
        let want_rows: Vec<f32> = ids.iter().flat_map(|&t| (0..d).map(move |j| t as usize * d + j)).map(at).collect();
        let want_logits: Vec<f64> =
            (0..v).map(|r| (0..d).map(|j| f64::from(at(r * d + j)) * f64::from(xv[j])).sum()).collect();
        let t_data = js_sys::Date::now();

        let mut g = GraphBuilder::new();
        let idx = g.tensor_staged(DType::I32, DType::I64, &[1, ids.len() as u64]);
        let x = g.tensor(DType::F32, &[1, d as u64]);
        let t = g.constant_keyed(DType::F32, &[v as u64, d as u64], "table".into(), table);
        let pad = g.int(-1);
        let no = g.bool(false);
        let none = g.null();
        let emb = g.tensor(DType::F32, &[1, ids.len() as u64, d as u64]);
        let logits = g.tensor(DType::F32, &[1, v as u64]);
        g.op("aten.embedding.default", &[t, idx, pad, no, no, emb]).op("aten.linear.default", &[x, t, none, logits]);
        g.inputs(&[idx, x]).outputs(&[emb, logits]);
        let program = Program::from_bytes(ProgramBuilder::single_delegate(g).into_bytes()).expect("parses");
        let t_program = js_sys::Date::now();
        let inputs = [
            Tensor::new(DType::I64, vec![1, ids.len() as u64], ids.iter().flat_map(|i| i.to_le_bytes()).collect())
                .expect("ids"),
            Tensor::from_f32(&[1, d as u64], &xv),
        ];
        let mut report = format!(
            "a {} MiB table [{v}, {d}]: data {:.1} s, reference {:.1} s, program {:.1} s",
            (v * d * 4) >> 20,
            (t_gen - t0) / 1e3,
            (t_data - t_gen) / 1e3,
            (t_program - t_data) / 1e3
        );
        for split_bytes in [None, Some(WEBGPU_DEFAULT_BINDING_BYTES)] {
            let what = match split_bytes {
                None => "at the device's limits".to_string(),
                Some(b) => format!("split at {} MiB", b >> 20),
            };
            let t_start = js_sys::Date::now();
            let options = LoadOptions { split_bytes, ..LoadOptions::default() };
            let mut method = rt
                .load_async(&program, "forward", &options, &mut |_| {})
                .await
                .unwrap_or_else(|e| panic!("{what}: load: {e}"));
            let t_load = js_sys::Date::now();
            let outs = method.run_async(&inputs).await.unwrap_or_else(|e| panic!("{what}: run: {e}"));
            let t_run = js_sys::Date::now();
            assert_eq!(outs[0].shape, [1, ids.len() as u64, d as u64], "{what}");
            assert_eq!(outs[1].shape, [1, v as u64], "{what}");
            for (i, (g, w)) in outs[0].to_f64_vec().iter().zip(&want_rows).enumerate() {
                assert!(*g == f64::from(*w), "{what}: embedding element {i}: got {g}, want {w}");
            }
            let mut max_abs = 0f64;
            for (i, (g, w)) in outs[1].to_f64_vec().iter().zip(&want_logits).enumerate() {
                let err = (g - w).abs();
                max_abs = max_abs.max(err);
                assert!(err <= 1e-4 + 1e-4 * w.abs(), "{what}: logit {i}: got {g}, want {w}");
            }
            report.push_str(&format!(
                "; {what}: {} dispatches, load {:.1} s, run {:.1} s, rows exact, logits max abs error {max_abs:.3e}",
                method.n_dispatches(),
                (t_load - t_start) / 1e3,
                (t_run - t_load) / 1e3
            ));
        }
        web_sys_log(&format!("{report}; wasm memory {} MiB", etwgpu_web::wasm_memory_bytes() as u64 >> 20));
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
