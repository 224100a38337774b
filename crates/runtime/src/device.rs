//! Picking an adapter and opening a device: [`Runtime`].

use std::sync::Arc;

use etwgpu_format::Program;

use crate::error::{Error, Result};
use crate::method::LoadOptions;
use crate::pipeline_cache::PipelineCache;
use crate::program::LoadedMethod;

/// Environment variable selecting the adapter: an index into the
/// enumeration order, or a case-insensitive substring of its name.
pub const ADAPTER_ENV: &str = "ETWGPU_ADAPTER";

/// Environment variable that, set to `1`, leaves SHADER_F16 off.
pub const DISABLE_F16_ENV: &str = "ETWGPU_DISABLE_F16";

/// How [`Runtime::with_options`] opens a device.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeOptions {
    /// Adapter selector: an index into the enumeration order or a
    /// case-insensitive name substring; `None` picks automatically.
    pub adapter: Option<String>,
    /// Leave SHADER_F16 off even when the adapter has it: float16 models
    /// then run as on adapters without it (float16 tensors held as float32,
    /// f32 kernels), which tests that fallback anywhere.
    pub disable_f16: bool,
}

/// Features the kernels use when the adapter has them.
pub const OPTIONAL_FEATURES: wgpu::Features =
    wgpu::Features::SHADER_F16.union(wgpu::Features::SUBGROUP).union(wgpu::Features::TIMESTAMP_QUERY);

/// A wgpu device with its queue and pipeline cache.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) info: wgpu::AdapterInfo,
    pub(crate) pipelines: Arc<PipelineCache>,
}

fn type_rank(t: wgpu::DeviceType) -> u8 {
    match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    }
}

fn backend_rank(b: wgpu::Backend) -> u8 {
    match b {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
        _ => 1,
    }
}

/// What `etwgpu devices` reports about one adapter.
#[derive(Debug, Clone)]
pub struct AdapterSummary {
    /// Index in enumeration order (what `ETWGPU_ADAPTER` takes).
    pub index: usize,
    /// Adapter name.
    pub name: String,
    /// Backend (Vulkan, Metal, ...).
    pub backend: String,
    /// Device type (DiscreteGpu, Cpu, ...).
    pub device_type: String,
    /// Driver name and version.
    pub driver: String,
    /// Largest storage buffer binding, in bytes.
    pub max_storage_binding_bytes: u64,
    /// Largest buffer, in bytes.
    pub max_buffer_bytes: u64,
    /// Workgroup shared memory, in bytes.
    pub max_workgroup_storage_bytes: u32,
    /// Invocations per workgroup.
    pub max_invocations_per_workgroup: u32,
    /// Storage buffers per shader stage.
    pub max_storage_buffers_per_stage: u32,
    /// Which of the optional features (f16, subgroups, timestamps) it has.
    pub features: Vec<&'static str>,
    /// Whether [`Runtime::new`] would pick it without `ETWGPU_ADAPTER`.
    pub default_choice: bool,
}

/// Lists the adapters wgpu finds, with the limits that matter to etwgpu.
pub fn adapters() -> Vec<AdapterSummary> {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    let best = adapters
        .iter()
        .enumerate()
        .min_by_key(|(_, a)| {
            let i = a.get_info();
            (type_rank(i.device_type), backend_rank(i.backend))
        })
        .map(|(i, _)| i);
    adapters
        .iter()
        .enumerate()
        .map(|(index, a)| {
            let info = a.get_info();
            let limits = a.limits();
            let f = a.features();
            let features = [
                (wgpu::Features::SHADER_F16, "shader-f16"),
                (wgpu::Features::SUBGROUP, "subgroup"),
                (wgpu::Features::TIMESTAMP_QUERY, "timestamp-query"),
            ]
            .into_iter()
            .filter(|(flag, _)| f.contains(*flag))
            .map(|(_, name)| name)
            .collect();
            AdapterSummary {
                index,
                name: info.name.clone(),
                backend: format!("{:?}", info.backend),
                device_type: format!("{:?}", info.device_type),
                driver: format!("{} {}", info.driver, info.driver_info).trim().to_string(),
                max_storage_binding_bytes: limits.max_storage_buffer_binding_size,
                max_buffer_bytes: limits.max_buffer_size,
                max_workgroup_storage_bytes: limits.max_compute_workgroup_storage_size,
                max_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
                max_storage_buffers_per_stage: limits.max_storage_buffers_per_shader_stage,
                features,
                default_choice: Some(index) == best,
            }
        })
        .collect()
}

impl Runtime {
    /// Opens a device on the adapter chosen by `ETWGPU_ADAPTER`, else on a
    /// discrete GPU if any, else on the best other adapter.
    /// `ETWGPU_DISABLE_F16=1` leaves SHADER_F16 off (see
    /// [`RuntimeOptions::disable_f16`]).
    pub fn new() -> Result<Self> {
        Self::with_options(&RuntimeOptions {
            adapter: std::env::var(ADAPTER_ENV).ok(),
            disable_f16: std::env::var(DISABLE_F16_ENV).is_ok_and(|v| v == "1"),
        })
    }

    /// Like [`Runtime::new`] with an explicit selector (index or name
    /// substring); `None` picks automatically.
    pub fn with_adapter(selector: Option<&str>) -> Result<Self> {
        Self::with_options(&RuntimeOptions { adapter: selector.map(str::to_string), disable_f16: false })
    }

    /// Opens a device as `options` say.
    pub fn with_options(options: &RuntimeOptions) -> Result<Self> {
        let selector = options.adapter.as_deref();
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
        if adapters.is_empty() {
            return Err(Error::NoAdapter);
        }
        let adapter = match selector.map(str::trim).filter(|s| !s.is_empty()) {
            Some(sel) => {
                let by_index = sel.parse::<usize>().ok().and_then(|i| adapters.get(i));
                let lower = sel.to_lowercase();
                by_index
                    .or_else(|| adapters.iter().find(|a| a.get_info().name.to_lowercase().contains(&lower)))
                    .ok_or_else(|| Error::AdapterNotFound {
                        selector: sel.to_string(),
                        available: adapters.iter().map(|a| a.get_info().name).collect(),
                    })?
            }
            None => adapters
                .iter()
                .min_by_key(|a| {
                    let i = a.get_info();
                    (type_rank(i.device_type), backend_rank(i.backend))
                })
                .expect("adapters is not empty"),
        };
        let info = adapter.get_info();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("etwgpu device"),
            required_features: adapter.features()
                & OPTIONAL_FEATURES
                & if options.disable_f16 { !wgpu::Features::SHADER_F16 } else { wgpu::Features::all() },
            required_limits: adapter.limits(),
            ..Default::default()
        }))
        .map_err(|e| Error::RequestDevice { adapter: info.name.clone(), reason: e.to_string() })?;
        let pipelines = Arc::new(PipelineCache::new(device.clone(), info.name.clone()));
        Ok(Self { device, queue, info, pipelines })
    }

    /// The adapter in use.
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }

    /// The device.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// The shared pipeline cache.
    pub fn pipeline_cache(&self) -> &PipelineCache {
        &self.pipelines
    }

    /// Loads `method` of `program`: checks every instruction can run (on
    /// the GPU or the CPU fallback), creates the pipelines, allocates the
    /// buffers and uploads the constants of each GPU call.
    pub fn load(&self, program: &Program, method: &str) -> Result<LoadedMethod> {
        LoadedMethod::load(self, program, method, &LoadOptions::default(), &mut |_| {})
    }

    /// [`Runtime::load`] with options (fusion off, for debugging).
    pub fn load_with(&self, program: &Program, method: &str, options: &LoadOptions) -> Result<LoadedMethod> {
        LoadedMethod::load(self, program, method, options, &mut |_| {})
    }

    /// [`Runtime::load_with`], calling `progress` as weights are uploaded
    /// and pipelines compiled (for a progress bar on large models).
    pub fn load_with_progress(
        &self,
        program: &Program,
        method: &str,
        options: &LoadOptions,
        progress: &mut dyn FnMut(crate::LoadProgress),
    ) -> Result<LoadedMethod> {
        LoadedMethod::load(self, program, method, options, progress)
    }

    /// Blocks until the queue is idle.
    pub fn wait_idle(&self) -> Result<()> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| Error::Gpu { during: "waiting for the queue", reason: e.to_string() })
    }
}
