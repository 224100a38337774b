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
//!
//! Loads of programs the user trusts (`LoadOptions::trusted_shaders`) go
//! through a trusted view of the cache ([`PipelineCache::trusted`]), which
//! creates the kernels whose families carry `// bounds: host-checked`
//! ([`Shader::bounds_host_checked`]) with wgpu's unchecked path, see
//! [`UNCHECKED`]; checked and unchecked pipelines are keyed apart, so a
//! load without the option never gets an unchecked one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use etwgpu_kernels::{Shader, ShaderId, ShaderKey};

use crate::error::{Error, Result};

/// Shaders are compiled without the loop guard wgpu adds to every loop (a
/// 64-bit counter per iteration, there so that a driver may not assume a
/// runaway loop ends); buffer bounds checks stay (but in a trusted load's
/// host-checked kernels, see [`UNCHECKED`]). On the H200 the guard
/// cost a 1B Llama's 512-token prefill 3.8x (2,864 -> 10,968 tokens/s
/// without it, `tools/device/NOTES.md`, run g). `ETWGPU_SHADER_CHECKS=full`
/// keeps the guard for every kernel. Families marked `// loop-guard: on`
/// ([`Shader::loop_guard`]) keep it always: for them the guard was
/// measured faster (run be: the 4-bit large tile's float32 variant 15-22%
/// on an H100), the driver scheduling their loops better with its counter.
/// On the web, wgpu ignores the choice.
pub const SHADER_CHECKS_ENV: &str = "ETWGPU_SHADER_CHECKS";

fn loop_checks_off() -> bool {
    std::env::var(SHADER_CHECKS_ENV).map_or(true, |v| v != "full")
}

/// `ETWGPU_TRUSTED_SHADERS=1`: loads whose `LoadOptions::trusted_shaders`
/// is `None` take the trusted path (see [`UNCHECKED`]); unset or anything
/// else, they don't. For timing a program both ways without a rebuild
/// (`llm_bench`, `etwgpu bench`); only for programs the user trusts.
pub const TRUSTED_SHADERS_ENV: &str = "ETWGPU_TRUSTED_SHADERS";

/// Whether [`TRUSTED_SHADERS_ENV`] asks loads to trust their programs.
pub(crate) fn trusted_shaders_env() -> bool {
    std::env::var(TRUSTED_SHADERS_ENV).is_ok_and(|v| v == "1")
}

/// The checks a trusted load's host-checked kernels are created with:
/// [`wgpu::ShaderRuntimeChecks::unchecked`], but for the integer division
/// guard. In wgpu 30 / naga 30, `bounds_checks: false` turns every naga
/// bounds-check policy to `Unchecked`. On Vulkan, with `bounds_checks` on,
/// indices into fixed-size arrays (workgroup memory, private arrays,
/// vectors, matrices) are clamped (`Restrict`) and storage buffers are left
/// to the driver's `robustBufferAccess2` where the device has it (wgpu
/// enables it), else clamped too; off drops the clamps, so fixed-size
/// arrays are then as safe as the host rules' checks ([`Shader::bounds_host_checked`]
/// says which families have them) and storage buffers as safe as the
/// driver's robust buffer access (`robustBufferAccess2`, else
/// `robustBufferAccess`, which wgpu enables and the Vulkan specification
/// requires of every device but portability ones such as MoltenVK:
/// accesses stay within the bound buffer). On Metal and DX12 it would drop
/// the buffer checks as well, which nothing here proves, so the trusted
/// path is Vulkan only ([`PipelineCache::trusted`]); on the web wgpu
/// ignores the choice and the browser checks everything. The integer
/// division guard (`int_div_checks`, naga's `naga_div`/`naga_mod` wrappers
/// that turn a zero divisor into one) stays on: the markers prove indices,
/// not divisors. The loop guard follows [`SHADER_CHECKS_ENV`] and the
/// family's marker as for every other kernel ([`runtime_checks`]).
pub const UNCHECKED: wgpu::ShaderRuntimeChecks = {
    let mut c = wgpu::ShaderRuntimeChecks::unchecked();
    c.int_div_checks = true;
    c
};

/// The checks `shader`'s module is created with: `checks`' bounds checks,
/// and the loop guard unless `loop_checks_off` (the default, see
/// [`SHADER_CHECKS_ENV`]) and the family does not ask for it
/// ([`Shader::loop_guard`]).
pub(crate) fn runtime_checks(shader: &Shader, checks: Checks, loop_checks_off: bool) -> wgpu::ShaderRuntimeChecks {
    let mut c = match checks {
        Checks::Checked => wgpu::ShaderRuntimeChecks::checked(),
        Checks::Unchecked => UNCHECKED,
    };
    c.force_loop_bounding = shader.loop_guard() || !loop_checks_off;
    c
}

/// Whether loads on `backend` may take the trusted path
/// ([`PipelineCache::trusted`]): native Vulkan only.
pub fn trusted_path(backend: wgpu::Backend) -> bool {
    !cfg!(target_arch = "wasm32") && backend == wgpu::Backend::Vulkan
}

/// How a pipeline's shader module was created; part of its cache key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Checks {
    /// Bounds checks on ([`wgpu::ShaderRuntimeChecks::checked`], loop
    /// guard per [`runtime_checks`]).
    Checked,
    /// [`UNCHECKED`]: a trusted load's host-checked kernel.
    Unchecked,
}

/// The pipelines of a cache and its views, by key and checks.
type Pipelines = Mutex<BTreeMap<(ShaderKey, Checks), wgpu::ComputePipeline>>;

/// Compute pipelines keyed by a shader's small key ([`Shader::key`]: the
/// variant, or an interned generated shader's id), never by its source,
/// and by the checks its module was created with. A [`trusted`](Self::trusted)
/// view shares the pipelines of the cache it was made from.
#[derive(Debug)]
pub struct PipelineCache {
    device: wgpu::Device,
    adapter_name: String,
    pipelines: Arc<Pipelines>,
    /// Whether this view creates host-checked kernels unchecked.
    trusted: bool,
}

impl PipelineCache {
    /// An empty cache for `device`.
    pub fn new(device: wgpu::Device, adapter_name: String) -> Self {
        Self { device, adapter_name, pipelines: Arc::new(Mutex::new(BTreeMap::new())), trusted: false }
    }

    /// A view of this cache, sharing its pipelines, for the loads of
    /// programs the user trusts: it creates the kernels whose host rules
    /// prove their fixed-size array indices in bounds
    /// ([`Shader::bounds_host_checked`]) with [`UNCHECKED`], the rest as
    /// this cache does. `None` where that path is not taken: on the web,
    /// and on backends other than Vulkan (where dropping the bounds checks
    /// would drop the storage buffers' too).
    pub fn trusted(&self, backend: wgpu::Backend) -> Option<Self> {
        trusted_path(backend).then(|| Self {
            device: self.device.clone(),
            adapter_name: self.adapter_name.clone(),
            pipelines: self.pipelines.clone(),
            trusted: true,
        })
    }

    /// Whether this is a trusted view ([`PipelineCache::trusted`]).
    pub fn is_trusted(&self) -> bool {
        self.trusted
    }

    /// The checks this view creates `shader` with.
    fn checks_of(&self, shader: &Shader) -> Checks {
        if self.trusted && shader.bounds_host_checked() { Checks::Unchecked } else { Checks::Checked }
    }

    /// Whether this view creates `shader`'s pipeline unchecked.
    pub fn is_unchecked(&self, shader: &Shader) -> bool {
        self.checks_of(shader) == Checks::Unchecked
    }

    /// The pipeline of `shader`, created (with its shader module) on first
    /// use. Its bind group layout is derived from the shader.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn get(&self, shader: &Shader) -> Result<wgpu::ComputePipeline> {
        pollster::block_on(self.get_async(shader))
    }

    /// The pipeline of `shader` if it was created already (with the checks
    /// this view takes).
    pub fn cached(&self, shader: &Shader) -> Option<wgpu::ComputePipeline> {
        self.lock().get(&(shader.key(), self.checks_of(shader))).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(ShaderKey, Checks), wgpu::ComputePipeline>> {
        self.pipelines.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Like [`PipelineCache::get`], awaiting the pipeline's validation
    /// without blocking.
    pub async fn get_async(&self, shader: &Shader) -> Result<wgpu::ComputePipeline> {
        if let Some(p) = self.cached(shader) {
            return Ok(p);
        }
        let checks = self.checks_of(shader);
        let pipeline = self.create(shader, checks).await?;
        Ok(self.lock().entry((shader.key(), checks)).or_insert(pipeline).clone())
    }

    async fn create(&self, shader: &Shader, checks: Checks) -> Result<wgpu::ComputePipeline> {
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
        #[cfg(feature = "shader-override")]
        let source: std::borrow::Cow<'_, str> = match overridden_source(shader.label()) {
            Some(text) => text.into(),
            None => shader.source().into(),
        };
        #[cfg(not(feature = "shader-override"))]
        let source: std::borrow::Cow<'_, str> = shader.source().into();
        let descriptor =
            wgpu::ShaderModuleDescriptor { label: Some(shader.label()), source: wgpu::ShaderSource::Wgsl(source) };
        let runtime_checks = runtime_checks(shader, checks, loop_checks_off());
        // SAFETY: checked, buffer bounds checks stay on (done by the driver
        // where it has robustBufferAccess2, else injected by naga), so no
        // access leaves its binding. Only the loop guard may be dropped:
        // every loop of every kernel is bounded by a uniform that its host
        // rule validated (sizes, strides, counts), so none is infinite
        // (`SHADER_CHECKS_ENV` turns the guard back on). With the guard on
        // this is `create_shader_module`. Unchecked (a trusted view, on
        // Vulkan only): the kernel's family carries `// bounds:
        // host-checked`, whose `Bounds:` docs show every index into its
        // fixed-size arrays bounded by a constant or by a uniform its host
        // rule checked; its storage-buffer accesses stay within their
        // bindings by the driver's robust buffer access (see `UNCHECKED`);
        // integer divisions keep their guard.
        let module = unsafe { self.device.create_shader_module_trusted(descriptor, runtime_checks) };
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

    /// Number of pipelines created so far (by this cache and its views).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Number of those created unchecked, by trusted views
    /// ([`PipelineCache::trusted`]).
    pub fn unchecked_len(&self) -> usize {
        self.lock().keys().filter(|(_, c)| *c == Checks::Unchecked).count()
    }

    /// Whether no pipeline was created yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The development feature `shader-override`: the text of
/// `$ETWGPU_SHADER_OVERRIDE/<label>.wgsl` where that file exists (see the
/// feature's note in `Cargo.toml`), announced once per label on stderr.
#[cfg(feature = "shader-override")]
fn overridden_source(label: &str) -> Option<String> {
    let dir = std::env::var_os("ETWGPU_SHADER_OVERRIDE")?;
    let path = std::path::Path::new(&dir).join(format!("{label}.wgsl"));
    let text = std::fs::read_to_string(&path).ok()?;
    eprintln!("etwgpu: shader {label} from {}", path.display());
    Some(text)
}
