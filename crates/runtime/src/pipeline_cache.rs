//! The one place compute pipelines are created: one per generated shader
//! variant, and one per distinct source of a shader written at lowering
//! time (fused kernels), created on first use and shared by every loaded
//! method.

use std::collections::BTreeMap;
use std::sync::Mutex;

use etwgpu_kernels::{Shader, ShaderId, Variant};

use crate::error::{Error, Result};

/// Compute pipelines keyed by shader variant, or by source for generated
/// shaders.
#[derive(Debug)]
pub struct PipelineCache {
    device: wgpu::Device,
    adapter_name: String,
    pipelines: Mutex<BTreeMap<ShaderId, wgpu::ComputePipeline>>,
    generated: Mutex<BTreeMap<String, wgpu::ComputePipeline>>,
}

impl PipelineCache {
    /// An empty cache for `device`.
    pub fn new(device: wgpu::Device, adapter_name: String) -> Self {
        Self { device, adapter_name, pipelines: Mutex::new(BTreeMap::new()), generated: Mutex::new(BTreeMap::new()) }
    }

    /// The pipeline of `shader`, created (with its shader module) on first
    /// use. Its bind group layout is derived from the shader.
    pub fn get(&self, shader: &Shader) -> Result<wgpu::ComputePipeline> {
        match shader {
            Shader::Static(id) => {
                let mut map = self.pipelines.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(p) = map.get(id) {
                    return Ok(p.clone());
                }
                let pipeline = self.create(shader)?;
                map.insert(*id, pipeline.clone());
                Ok(pipeline)
            }
            Shader::Generated(g) => {
                let mut map = self.generated.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(p) = map.get(&g.source) {
                    return Ok(p.clone());
                }
                let pipeline = self.create(shader)?;
                map.insert(g.source.clone(), pipeline.clone());
                Ok(pipeline)
            }
        }
    }

    fn create(&self, shader: &Shader) -> Result<wgpu::ComputePipeline> {
        if shader.variant() == Variant::F16 && !self.device.features().contains(wgpu::Features::SHADER_F16) {
            return Err(Error::MissingFeature {
                shader: shader.label(),
                feature: "SHADER_F16",
                adapter: self.adapter_name.clone(),
            });
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(shader.label()),
            source: wgpu::ShaderSource::Wgsl(shader.source().into()),
        });
        let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(shader.label()),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            cache: None,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu {
                during: "creating a compute pipeline",
                reason: format!("{}: {e}", shader.label()),
            });
        }
        Ok(pipeline)
    }

    /// Number of pipelines created so far.
    pub fn len(&self) -> usize {
        self.pipelines.lock().unwrap_or_else(|e| e.into_inner()).len()
            + self.generated.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether no pipeline was created yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
