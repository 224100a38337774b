//! The JavaScript classes [`Runtime`] and [`Model`].

use etwgpu_format::Program;
use etwgpu_runtime::{LoadedMethod, RuntimeOptions, Tensor};
use js_sys::{Array, Object, Reflect};
use wasm_bindgen::prelude::*;

use crate::error::Error;
use crate::llm::Llm;
use crate::tensor::{tensor_from_js, tensor_to_js};

fn set(obj: &Object, key: &str, value: impl Into<JsValue>) {
    Reflect::set(obj, &JsValue::from_str(key), &value.into()).expect("setting a field of a plain object");
}

/// A WebGPU device (the browser's) with etwgpu's pipeline cache.
#[wasm_bindgen]
#[derive(Debug, Clone)]
pub struct Runtime {
    rt: etwgpu_runtime::Runtime,
}

/// Parses `bytes` as a program (the `.pte` file's bytes).
fn program(bytes: Vec<u8>) -> Result<Program, Error> {
    Ok(Program::from_bytes(bytes)?)
}

#[wasm_bindgen]
impl Runtime {
    /// Opens the browser's WebGPU adapter and device. Fails when the
    /// browser has no WebGPU.
    pub async fn create() -> Result<Runtime, JsError> {
        let rt = etwgpu_runtime::Runtime::new_async(&RuntimeOptions::default()).await.map_err(Error::from)?;
        Ok(Runtime { rt })
    }

    /// The adapter: `{ name, backend, deviceType, driver, features,
    /// maxStorageBufferBindingSize,
    /// maxComputeInvocationsPerWorkgroup, maxStorageBuffersPerShaderStage }`.
    #[wasm_bindgen(getter)]
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
        set(&obj, "maxStorageBufferBindingSize", limits.max_storage_buffer_binding_size as f64);
        set(&obj, "maxComputeInvocationsPerWorkgroup", limits.max_compute_invocations_per_workgroup);
        set(&obj, "maxStorageBuffersPerShaderStage", limits.max_storage_buffers_per_shader_stage);
        obj.into()
    }

    /// The adapter's backend as wgpu names it: `"BrowserWebGpu"` in a
    /// browser with WebGPU.
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        format!("{:?}", self.rt.adapter_info().backend)
    }

    /// Loads `method` (default `"forward"`) of the program in `bytes`:
    /// creates its pipelines and uploads its weights.
    pub async fn load(&self, bytes: Vec<u8>, method: Option<String>) -> Result<Model, JsError> {
        let program = program(bytes)?;
        let name = method.unwrap_or_else(|| "forward".into());
        let method =
            self.rt.load_async(&program, &name, &Default::default(), &mut |_| {}).await.map_err(Error::from)?;
        let methods = program.methods.iter().map(|m| m.name.clone()).collect();
        Ok(Model { method, name, methods })
    }

    /// Loads a Llama-family program (ExecuTorch `export_llama` layout) for
    /// generation; `tokenizer_json` (the text of a `tokenizer.json`) enables
    /// text chat.
    #[wasm_bindgen(js_name = loadLlm)]
    pub async fn load_llm(&self, bytes: Vec<u8>, tokenizer_json: Option<String>) -> Result<Llm, JsError> {
        Ok(Llm::load(&self.rt, program(bytes)?, tokenizer_json.as_deref()).await?)
    }
}

/// Whether `bytes` hold a Llama-family program (it has the
/// `get_max_seq_len` metadata method).
#[wasm_bindgen(js_name = isLlm)]
pub fn is_llm(bytes: Vec<u8>) -> Result<bool, JsError> {
    Ok(program(bytes)?.method("get_max_seq_len").is_some())
}

/// Reads a `.npy` file's bytes as `{ dtype, shape, data }`.
#[wasm_bindgen(js_name = readNpy)]
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
    #[wasm_bindgen(getter)]
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
    #[wasm_bindgen(getter)]
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
    pub async fn run(&mut self, inputs: Array) -> Result<Array, JsError> {
        let inputs = inputs
            .iter()
            .enumerate()
            .map(|(i, v)| tensor_from_js(&v, &format!("inputs[{i}]")))
            .collect::<Result<Vec<Tensor>, Error>>()?;
        let outputs = self.method.run_async(&inputs).await.map_err(Error::from)?;
        Ok(outputs.iter().map(tensor_to_js).collect())
    }
}
