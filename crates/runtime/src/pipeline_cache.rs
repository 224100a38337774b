//! The one place compute pipelines are created: one per generated shader
//! variant, and one per interned shader written at lowering time (fused
//! kernels, keyed by their small id, not their source), created on first
//! use and shared by every loaded method.
//!
//! Before creating a variant's pipeline, its needs (workgroup size, storage
//! and uniform buffers, workgroup memory; [`ShaderId::needs`]) are checked
//! against the device's limits, so a device too small for a kernel gives
//! [`Error::ShaderOverLimit`] at load instead of a validation error. (Every
//! variant fits WebGPU's guaranteed limits, which `cargo xtask check-wgsl`
//! enforces, so no WebGPU device, browsers included, hits it; fused kernels
//! are bounded by the device's storage-buffer limit when the graph is
//! fused.) Creation awaits each new pipeline's validation asynchronously
//! ([`PipelineCache::get_async`]); on native targets [`PipelineCache::get`]
//! blocks on it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use etwgpu_kernels::{Shader, ShaderId, ShaderKey};

use crate::error::{Error, Result};

/// Shaders are compiled without the loop guard wgpu adds to every loop (a
/// 64-bit counter per iteration, there so that a driver may not assume a
/// runaway loop ends); buffer bounds checks stay. On the H200 the guard
/// cost a 1B Llama's 512-token prefill 3.8x (2,864 -> 10,968 tokens/s
/// without it, `tools/device/NOTES.md`, run g). `ETWGPU_SHADER_CHECKS=full`
/// keeps the guard. On the web, wgpu ignores the choice.
pub const SHADER_CHECKS_ENV: &str = "ETWGPU_SHADER_CHECKS";

fn loop_checks_off() -> bool {
    std::env::var(SHADER_CHECKS_ENV).map_or(true, |v| v != "full")
}

/// Compute pipelines keyed by a shader's small key ([`Shader::key`]: the
/// variant, or an interned generated shader's id), never by its source.
#[derive(Debug)]
pub struct PipelineCache {
    device: wgpu::Device,
    adapter_name: String,
    pipelines: Mutex<BTreeMap<ShaderKey, wgpu::ComputePipeline>>,
}

impl PipelineCache {
    /// An empty cache for `device`.
    pub fn new(device: wgpu::Device, adapter_name: String) -> Self {
        Self { device, adapter_name, pipelines: Mutex::new(BTreeMap::new()) }
    }

    /// The pipeline of `shader`, created (with its shader module) on first
    /// use. Its bind group layout is derived from the shader.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn get(&self, shader: &Shader) -> Result<wgpu::ComputePipeline> {
        pollster::block_on(self.get_async(shader))
    }

    /// The pipeline of `shader` if it was created already.
    pub fn cached(&self, shader: &Shader) -> Option<wgpu::ComputePipeline> {
        self.pipelines.lock().unwrap_or_else(|e| e.into_inner()).get(&shader.key()).cloned()
    }

    /// Like [`PipelineCache::get`], awaiting the pipeline's validation
    /// without blocking.
    pub async fn get_async(&self, shader: &Shader) -> Result<wgpu::ComputePipeline> {
        if let Some(p) = self.cached(shader) {
            return Ok(p);
        }
        let pipeline = self.create(shader).await?;
        Ok(self.pipelines.lock().unwrap_or_else(|e| e.into_inner()).entry(shader.key()).or_insert(pipeline).clone())
    }

    async fn create(&self, shader: &Shader) -> Result<wgpu::ComputePipeline> {
        if shader.variant().needs_shader_f16() && !self.device.features().contains(wgpu::Features::SHADER_F16) {
            return Err(Error::MissingFeature {
                shader: shader.label(),
                feature: "SHADER_F16",
                adapter: self.adapter_name.clone(),
            });
        }
        if let Shader::Static(id) = shader {
            self.check_limits(*id)?;
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let descriptor = wgpu::ShaderModuleDescriptor {
            label: Some(shader.label()),
            source: wgpu::ShaderSource::Wgsl(shader.source().into()),
        };
        let mut checks = wgpu::ShaderRuntimeChecks::checked();
        checks.force_loop_bounding = !loop_checks_off();
        // SAFETY: buffer bounds checks stay on (done by the driver where it
        // has robustBufferAccess2, else injected by naga), so no access
        // leaves its binding. Only the loop guard may be dropped: every loop
        // of every kernel is bounded by a uniform that its host rule
        // validated (sizes, strides, counts), so none is infinite
        // (`SHADER_CHECKS_ENV` turns the guard back on). With the guard on
        // this is `create_shader_module`.
        let module = unsafe { self.device.create_shader_module_trusted(descriptor, checks) };
        let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(shader.label()),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            cache: None,
        });
        if let Some(e) = scope.pop().await {
            return Err(Error::Gpu {
                during: "creating a compute pipeline",
                reason: format!("{}: {e}", shader.label()),
            });
        }
        Ok(pipeline)
    }

    /// Fails when the device lacks a limit `shader` needs.
    fn check_limits(&self, shader: ShaderId) -> Result<()> {
        let needs = shader.needs();
        let l = self.device.limits();
        let [x, y, z] = needs.workgroup_size;
        let checks = [
            ("max_compute_invocations_per_workgroup", x * y * z, l.max_compute_invocations_per_workgroup),
            ("max_compute_workgroup_size_x", x, l.max_compute_workgroup_size_x),
            ("max_compute_workgroup_size_y", y, l.max_compute_workgroup_size_y),
            ("max_compute_workgroup_size_z", z, l.max_compute_workgroup_size_z),
            ("max_storage_buffers_per_shader_stage", needs.storage_buffers, l.max_storage_buffers_per_shader_stage),
            ("max_uniform_buffers_per_shader_stage", needs.uniform_buffers, l.max_uniform_buffers_per_shader_stage),
            ("max_compute_workgroup_storage_size", needs.workgroup_bytes, l.max_compute_workgroup_storage_size),
        ];
        match checks.into_iter().find(|&(_, needed, limit)| needed > limit) {
            Some((limit_name, needed, limit)) => Err(Error::ShaderOverLimit {
                shader: shader.label(),
                limit_name,
                needed,
                limit,
                adapter: self.adapter_name.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Number of pipelines created so far.
    pub fn len(&self) -> usize {
        self.pipelines.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether no pipeline was created yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
