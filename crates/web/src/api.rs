//! The JavaScript classes [`Runtime`], [`JsProgram`] (`Program` in
//! JavaScript) and [`Model`].

use etwgpu_format::Program;
use etwgpu_llm::{LlamaConfig, Weights};
use etwgpu_runtime::{LoadProgress, LoadStage, LoadedMethod, RuntimeOptions, Tensor};
use js_sys::{Array, Function, Object};
use wasm_bindgen::prelude::*;

use crate::error::Error;
use crate::llm::Llm;
use crate::source::{self, ReadOptions, get, report, set};
use crate::tensor::{tensor_from_js, tensor_to_js};

/// A WebGPU device (the browser's) with etwgpu's pipeline cache.
#[wasm_bindgen]
#[derive(Debug, Clone)]
pub struct Runtime {
    rt: etwgpu_runtime::Runtime,
}

/// Passes the runtime's load progress on to `onProgress` as
/// `{ stage: "weights" | "pipelines", done, total }`.
pub(crate) fn forward_progress(on_progress: Option<&Function>) -> impl FnMut(LoadProgress) + '_ {
    move |p: LoadProgress| {
        let stage = match p.stage {
            LoadStage::Weights => "weights",
            LoadStage::Pipelines => "pipelines",
        };
        report(on_progress, stage, p.done, Some(p.total));
    }
}

#[wasm_bindgen]
impl Runtime {
    /// Opens the browser's WebGPU adapter and device. Fails when the
    /// browser has no WebGPU.
    pub async fn create() -> Result<Runtime, JsError> {
        let rt = etwgpu_runtime::Runtime::new_async(&RuntimeOptions::default()).await.map_err(Error::from)?;
        Ok(Runtime { rt })
    }

    /// The adapter and the device's limits (see `AdapterInfo`).
    #[wasm_bindgen(getter, unchecked_return_type = "AdapterInfo")]
    pub fn adapter(&self) -> JsValue {
        let info = self.rt.adapter_info();
        let features = self.rt.features();
        let limits = self.rt.device().limits();
        let obj = Object::new();
        set(&obj, "name", info.name.as_str());
        set(&obj, "backend", format!("{:?}", info.backend));
        set(&obj, "deviceType", format!("{:?}", info.device_type));
        set(&obj, "driver", format!("{} {}", info.driver, info.driver_info).trim());
        let features: Array = features.into_iter().map(JsValue::from_str).collect();
        set(&obj, "features", features);
        set(&obj, "maxBufferSize", limits.max_buffer_size as f64);
        set(&obj, "maxStorageBufferBindingSize", limits.max_storage_buffer_binding_size as f64);
        set(&obj, "maxStorageBuffersPerShaderStage", limits.max_storage_buffers_per_shader_stage);
        set(&obj, "maxComputeInvocationsPerWorkgroup", limits.max_compute_invocations_per_workgroup);
        set(&obj, "maxComputeWorkgroupStorageSize", limits.max_compute_workgroup_storage_size);
        set(&obj, "maxComputeWorkgroupsPerDimension", limits.max_compute_workgroups_per_dimension);
        obj.into()
    }

    /// The adapter's backend as wgpu names it: `"BrowserWebGpu"` in a
    /// browser with WebGPU.
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        format!("{:?}", self.rt.adapter_info().backend)
    }

    /// Loads one method of `program` (`options.method`, default
    /// `"forward"`): creates its pipelines and uploads its weights,
    /// calling `options.onProgress` as it goes; `options.splitBytes`
    /// lowers the size past which weights are split by rows.
    pub async fn load(
        &self,
        program: &JsProgram,
        #[wasm_bindgen(unchecked_optional_param_type = "LoadOptions")] options: JsValue,
    ) -> Result<Model, JsError> {
        let name = get(&options, "method").as_string().unwrap_or_else(|| "forward".into());
        let on_progress = source::on_progress(&options)?;
        let mut progress = forward_progress(on_progress.as_ref());
        let split_bytes = get(&options, "splitBytes").as_f64().filter(|b| *b >= 1.0).map(|b| b as u64);
        let options = etwgpu_runtime::LoadOptions { split_bytes, ..Default::default() };
        let method = self.rt.load_async(&program.program, &name, &options, &mut progress).await.map_err(Error::from)?;
        let methods = program.program.methods.iter().map(|m| m.name.clone()).collect();
        Ok(Model { method, name, methods })
    }

    /// Loads a Llama-family program (ExecuTorch `export_llama` layout) for
    /// generation; `tokenizerJson` (the text of a `tokenizer.json`)
    /// enables text chat. `options.onProgress` as in `load`.
    #[wasm_bindgen(js_name = loadLlm)]
    pub async fn load_llm(
        &self,
        program: &JsProgram,
        #[wasm_bindgen(js_name = tokenizerJson, unchecked_optional_param_type = "string")] tokenizer_json: Option<
            String,
        >,
        #[wasm_bindgen(unchecked_optional_param_type = "LoadOptions")] options: JsValue,
    ) -> Result<Llm, JsError> {
        let on_progress = source::on_progress(&options)?;
        Ok(Llm::load(&self.rt, &program.program, tokenizer_json.as_deref(), on_progress.as_ref()).await?)
    }
}

/// A parsed `.pte` program, held once in wasm memory; load it with
/// `Runtime.load` or `Runtime.loadLlm`, then `free()` it to let the memory
/// be reused.
#[wasm_bindgen(js_name = Program)]
#[derive(Debug, Clone)]
pub struct JsProgram {
    program: Program,
}

#[wasm_bindgen(js_class = Program)]
impl JsProgram {
    /// Reads and parses a program from `source` (a `Uint8Array`,
    /// `ArrayBuffer`, `Blob` or `File`, `fetch` `Response` or
    /// `ReadableStream`). A `Blob` is read in slices of
    /// `options.chunkBytes` (16 MiB by default) and a stream chunk by
    /// chunk, straight into wasm memory: the page never holds a second
    /// copy of the file. `options.onProgress` is called with
    /// `{ stage: "read", done, total }` (bytes; `total` is null when a
    /// stream does not say its length).
    pub async fn read(
        #[wasm_bindgen(unchecked_param_type = "ProgramSource")] source: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "ReadOptions")] options: JsValue,
    ) -> Result<JsProgram, JsError> {
        let options = ReadOptions::from_js(&options)?;
        let bytes = source::read(&source, &options).await?;
        Ok(JsProgram { program: Program::from_bytes(bytes).map_err(Error::from)? })
    }

    /// A synthetic Llama-family program built in wasm memory with seeded
    /// random weights, at the shape of `preset`: `"tiny"` (the
    /// `llama_tiny` fixtures), `"small"` (~22M parameters), `"smollm2"`
    /// (SmolLM2-135M) or `"1b"` (Llama 3.2 1B). `options`: `{ weights:
    /// "q4" (4-bit, group 32; the default) | "fp32", maxContext, seed }`.
    /// For benchmarks (the browser bench page) without a file to carry.
    pub fn synthetic(
        preset: &str,
        #[wasm_bindgen(unchecked_optional_param_type = "SyntheticOptions")] options: JsValue,
    ) -> Result<JsProgram, JsError> {
        let mut config = match preset {
            "tiny" => LlamaConfig::tiny(),
            "small" => LlamaConfig::small(),
            "smollm2" => LlamaConfig::smollm2_135m(),
            "1b" => LlamaConfig::llama32_1b(),
            _ => {
                return Err(Error::BadArgument { what: "preset".into(), expected: "tiny, small, smollm2 or 1b" }.into());
            }
        };
        match get(&options, "weights").as_string().as_deref() {
            None | Some("q4") => {}
            Some("fp32") => config.weights = Weights::Fp32,
            Some(_) => return Err(Error::BadArgument { what: "options.weights".into(), expected: "q4 or fp32" }.into()),
        }
        let count = |key: &str| -> Result<Option<usize>, Error> {
            let v = get(&options, key);
            if v.is_undefined() || v.is_null() {
                return Ok(None);
            }
            v.as_f64()
                .filter(|x| x.fract() == 0.0 && *x >= 1.0 && *x <= u32::MAX as f64)
                .map(|x| Some(x as usize))
                .ok_or(Error::BadArgument { what: format!("options.{key}"), expected: "a positive integer" })
        };
        if let Some(c) = count("maxContext")? {
            if c < 2 {
                return Err(Error::BadArgument { what: "options.maxContext".into(), expected: "at least 2" }.into());
            }
            config.max_context = c;
            config.max_seq_len = config.max_seq_len.min(c);
        }
        if let Some(seed) = count("seed")? {
            config.seed = seed as u64;
        }
        Ok(JsProgram { program: Program::from_bytes(config.build()).map_err(Error::from)? })
    }

    /// Whether this is a Llama-family program (it has the
    /// `get_max_seq_len` metadata method): load it with `Runtime.loadLlm`.
    #[wasm_bindgen(getter, js_name = isLlm)]
    pub fn is_llm(&self) -> bool {
        self.program.method("get_max_seq_len").is_some()
    }

    /// The names of the program's methods, in file order.
    #[wasm_bindgen(getter)]
    pub fn methods(&self) -> Vec<String> {
        self.program.methods.iter().map(|m| m.name.clone()).collect()
    }

    /// The size of the `.pte` file in bytes.
    #[wasm_bindgen(getter, js_name = sizeBytes)]
    pub fn size_bytes(&self) -> f64 {
        self.program.file_bytes().len() as f64
    }
}

/// The size of this module's wasm memory in bytes. Wasm memory only
/// grows, so after a load this is the load's peak.
#[wasm_bindgen(js_name = wasmMemoryBytes)]
pub fn wasm_memory_bytes() -> f64 {
    source::wasm_memory_bytes()
}

/// Reads a `.npy` file's bytes as `{ dtype, shape, data }`.
#[wasm_bindgen(js_name = readNpy, unchecked_return_type = "Tensor")]
pub fn read_npy(bytes: &[u8]) -> Result<JsValue, JsError> {
    let t = Tensor::from_npy_bytes(bytes).map_err(Error::from)?;
    Ok(tensor_to_js(&t))
}

/// One loaded method.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Model {
    method: LoadedMethod,
    name: String,
    methods: Vec<String>,
}

#[wasm_bindgen]
impl Model {
    /// The method's name.
    #[wasm_bindgen(getter)]
    pub fn method(&self) -> String {
        self.name.clone()
    }

    /// Every method of the program.
    #[wasm_bindgen(getter)]
    pub fn methods(&self) -> Vec<String> {
        self.methods.clone()
    }

    /// Per input: `{ dtype, shape }`, the shape at its maximum.
    #[wasm_bindgen(getter, unchecked_return_type = "InputSpec[]")]
    pub fn inputs(&self) -> Array {
        self.method
            .input_specs()
            .into_iter()
            .map(|(dtype, shape)| {
                let obj = Object::new();
                set(&obj, "dtype", dtype.torch_name());
                let shape: Array = shape.iter().map(|&d| JsValue::from_f64(d as f64)).collect();
                set(&obj, "shape", shape);
                JsValue::from(obj)
            })
            .collect()
    }

    /// Number of outputs.
    #[wasm_bindgen(getter, js_name = nOutputs)]
    pub fn n_outputs(&self) -> usize {
        self.method.n_outputs()
    }

    /// `{ gpuCalls, cpuCalls, dispatches, arenaBytes }` of the method.
    #[wasm_bindgen(getter, unchecked_return_type = "ModelStats")]
    pub fn stats(&self) -> JsValue {
        let obj = Object::new();
        set(&obj, "gpuCalls", self.method.n_gpu_calls());
        set(&obj, "cpuCalls", self.method.n_cpu_calls());
        set(&obj, "dispatches", self.method.n_dispatches());
        set(&obj, "arenaBytes", self.method.arena_bytes() as f64);
        obj.into()
    }

    /// Runs the method once on `inputs` (`{ data, shape, dtype? }` each);
    /// resolves to the outputs as `{ dtype, shape, data }`.
    #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
    pub async fn run(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "TensorInput[]")] inputs: Array,
    ) -> Result<Array, JsError> {
        let inputs = inputs
            .iter()
            .enumerate()
            .map(|(i, v)| tensor_from_js(&v, &format!("inputs[{i}]")))
            .collect::<Result<Vec<Tensor>, Error>>()?;
        let outputs = self.method.run_async(&inputs).await.map_err(Error::from)?;
        Ok(outputs.iter().map(tensor_to_js).collect())
    }
}
