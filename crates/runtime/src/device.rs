//! Picking an adapter and opening a device: [`Runtime`]; waiting for the
//! device without blocking the browser ([`Runtime::wait_idle_async`],
//! mapped read-backs).
//!
//! Every GPU wait is `async` underneath, so the same code runs on the web
//! (where `device.poll` does nothing and callbacks fire from the browser's
//! event loop). On native targets the blocking methods ([`Runtime::new`],
//! [`Runtime::load`], `LoadedMethod::run`, ...) are thin
//! `pollster::block_on` wrappers of their `_async` twins; on `wasm32` only
//! the `_async` methods exist.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::error::{Error, Result};
use crate::pipeline_cache::PipelineCache;

/// Environment variable selecting the adapter: an index into the
/// enumeration order, or a case-insensitive substring of its name.
pub const ADAPTER_ENV: &str = "ETWGPU_ADAPTER";

/// Environment variable that, set to `1`, leaves SHADER_F16 off.
pub const DISABLE_F16_ENV: &str = "ETWGPU_DISABLE_F16";

/// Environment variable choosing the cooperative-matrix GEMM routes:
/// `0` leaves them off (the portable routes run), `1` requires them (a
/// device without them is an error), unset or `auto` uses them where the
/// adapter has them.
pub const COOP_MATRIX_ENV: &str = "ETWGPU_COOP_MATRIX";

/// Environment variable switching off the prompt attention on cooperative
/// matrices (`0`; [`RuntimeOptions::coop_attention_off`]), for A/B runs.
pub const COOP_ATTENTION_ENV: &str = "ETWGPU_COOP_ATTENTION";

/// Environment variable setting the default [`etwgpu_kernels::Precision`]
/// of loads: `f32` keeps float32 numerics in every float32 matrix product,
/// `mixed` (or unset: the default) lets the 4-bit weight linears and
/// prompt attention over a float16 KV cache use f16 operands on
/// cooperative matrices, `f16` lets every float32 matrix product use them.
/// Any other value is [`Error::BadEnv`]. Devices without cooperative
/// matrices compute the same at every setting.
pub const PRECISION_ENV: &str = "ETWGPU_PRECISION";

/// Environment variable choosing the kernels' subgroup forms (today the
/// split-KV decode attention's, `sdpa_split_sg.wgsl`): `1` requires
/// subgroups (a device without them is an error) and makes the subgroup
/// forms the loads' default; `0` leaves them off even for loads that ask
/// (`LoadOptions::subgroups`); unset, loads use them only when they ask
/// (the workgroup kernel measured faster on the H200, run ad).
pub const SUBGROUPS_ENV: &str = "ETWGPU_SUBGROUPS";

/// Environment variable choosing the convolutions' kernel
/// ([`etwgpu_kernels::ConvKernels`]): `auto` (or unset: the default) the
/// implicit GEMM (`conv_gemm.wgsl`) for convolutions that fill its tiles
/// and have few output pixels, the direct kernel (`conv.wgsl`) for the
/// rest; `direct` the direct kernel for all (the A/B baseline); `gemm` the
/// implicit GEMM for every ungrouped, untransposed convolution. Any other value is
/// [`Error::BadEnv`].
pub const CONV_ENV: &str = "ETWGPU_CONV";

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
    /// The cooperative-matrix GEMM routes: `None` where the adapter has
    /// them (16 x 16 x 16 f16 operands with f32 accumulation, subgroups of
    /// 32), `Some(false)` never, `Some(true)` required
    /// ([`Error::RequestDevice`] without them).
    pub coop_matrix: Option<bool>,
    /// The precision of loads whose `LoadOptions::precision` is `None`
    /// (default [`etwgpu_kernels::Precision::Mixed`]).
    pub precision: etwgpu_kernels::Precision,
    /// The kernels' subgroup forms: `None` available where the adapter has
    /// subgroups (`SUBGROUP`, with the sizes it reports) to loads that ask
    /// for them, `Some(false)` never, `Some(true)` required
    /// ([`Error::RequestDevice`] without them) and every load's default.
    pub subgroups: Option<bool>,
    /// Keeps prompt attention off the cooperative matrices (the tiled
    /// `sdpa_prefill.wgsl` for every prompt) where it would take them
    /// ([`etwgpu_kernels::DeviceCaps::coop_attention`]; `ETWGPU_COOP_ATTENTION=0`).
    pub coop_attention_off: bool,
    /// The convolutions' kernel for loads whose `LoadOptions::conv` is
    /// `None` ([`CONV_ENV`]; default [`etwgpu_kernels::ConvKernels::Auto`]).
    pub conv: etwgpu_kernels::ConvKernels,
}

/// Features the kernels use when the adapter has them.
pub const OPTIONAL_FEATURES: wgpu::Features = wgpu::Features::SHADER_F16
    .union(wgpu::Features::SUBGROUP)
    .union(wgpu::Features::TIMESTAMP_QUERY)
    .union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES);

/// A wgpu device with its queue and pipeline cache.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) info: wgpu::AdapterInfo,
    pub(crate) pipelines: Arc<PipelineCache>,
    pub(crate) caps: etwgpu_kernels::DeviceCaps,
    /// Whether loads that don't say (`LoadOptions::subgroups` `None`) take
    /// the subgroup forms (`ETWGPU_SUBGROUPS=1`).
    pub(crate) subgroups_by_default: bool,
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
#[cfg(not(target_arch = "wasm32"))]
pub fn adapters() -> Vec<AdapterSummary> {
    pollster::block_on(adapters_async())
}

/// Like [`adapters`], without blocking (the web has one adapter at most).
pub async fn adapters_async() -> Vec<AdapterSummary> {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapters = instance.enumerate_adapters(wgpu::Backends::all()).await;
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
            let features = feature_names(a.features());
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

/// The names of the optional features in `f`.
fn feature_names(f: wgpu::Features) -> Vec<&'static str> {
    [
        (wgpu::Features::SHADER_F16, "shader-f16"),
        (wgpu::Features::SUBGROUP, "subgroup"),
        (wgpu::Features::TIMESTAMP_QUERY, "timestamp-query"),
        (wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX, "cooperative-matrix"),
    ]
    .into_iter()
    .filter(|(flag, _)| f.contains(*flag))
    .map(|(_, name)| name)
    .collect()
}

impl Runtime {
    /// Opens a device on the adapter chosen by `ETWGPU_ADAPTER`, else on a
    /// discrete GPU if any, else on the best other adapter.
    /// `ETWGPU_DISABLE_F16=1` leaves SHADER_F16 off (see
    /// [`RuntimeOptions::disable_f16`]).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new() -> Result<Self> {
        Self::with_options(&RuntimeOptions::from_env()?)
    }

    /// Like [`Runtime::new`] with an explicit selector (index or name
    /// substring); `None` picks automatically.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn with_adapter(selector: Option<&str>) -> Result<Self> {
        Self::with_options(&RuntimeOptions { adapter: selector.map(str::to_string), ..RuntimeOptions::default() })
    }

    /// Opens a device as `options` say.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn with_options(options: &RuntimeOptions) -> Result<Self> {
        pollster::block_on(Self::new_async(options))
    }

    /// Opens a device as `options` say, without blocking: what the web
    /// uses (its one adapter is the browser's WebGPU).
    pub async fn new_async(options: &RuntimeOptions) -> Result<Self> {
        let selector = options.adapter.as_deref();
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapters = instance.enumerate_adapters(wgpu::Backends::all()).await;
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
        let coop = coop_matrix_usable(adapter) && !options.disable_f16;
        if options.coop_matrix == Some(true) && !coop {
            return Err(Error::RequestDevice {
                adapter: info.name.clone(),
                reason: format!(
                    "{COOP_MATRIX_ENV}=1 (cooperative matrices required), but the adapter has no 16x16x16 f16 \
                     configuration with f32 accumulation, subgroups of 32 and SHADER_F16"
                ),
            });
        }
        let coop = coop && options.coop_matrix != Some(false);
        let mut required_features = adapter.features()
            & OPTIONAL_FEATURES
            & if options.disable_f16 { !wgpu::Features::SHADER_F16 } else { wgpu::Features::all() };
        if coop {
            required_features |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
        }
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("etwgpu device"),
                required_features,
                required_limits: adapter.limits(),
                experimental_features: if coop {
                    // SAFETY: the one experimental feature requested is
                    // cooperative matrices, used only by the kernels of
                    // `etwgpu_kernels::ops::gemm`, which the fixtures'
                    // goldens check on such devices (`tools/device/goldens.py`).
                    unsafe { wgpu::ExperimentalFeatures::enabled() }
                } else {
                    wgpu::ExperimentalFeatures::disabled()
                },
                ..Default::default()
            })
            .await
            .map_err(|e| Error::RequestDevice { adapter: info.name.clone(), reason: e.to_string() })?;
        #[cfg_attr(
            target_arch = "wasm32",
            expect(
                clippy::arc_with_non_send_sync,
                reason = "wgpu objects are neither Send nor Sync on the web, which has one thread; the Arc only shares the cache between clones"
            )
        )]
        let pipelines = Arc::new(PipelineCache::new(device.clone(), info.name.clone()));
        let subgroups = subgroup_sizes(&info, device.features());
        if options.subgroups == Some(true) && subgroups.is_none() {
            return Err(Error::RequestDevice {
                adapter: info.name.clone(),
                reason: format!(
                    "{SUBGROUPS_ENV}=1 (subgroups required), but the adapter has no SUBGROUP feature with its \
                     subgroup sizes"
                ),
            });
        }
        // The decode attention inside the O projection's GEMV binds more
        // storage buffers than WebGPU guarantees: loads may opt in
        // (`LoadOptions::gemv_attention`) where the device has them and the
        // workgroup memory.
        let gemv_attention = {
            let needs = etwgpu_kernels::ShaderId::Q4GemvSdpaF32.needs();
            let limits = device.limits();
            limits.max_storage_buffers_per_shader_stage >= needs.storage_buffers
                && limits.max_compute_workgroup_storage_size >= needs.workgroup_bytes
        };
        // The int8-activation GEMVs hold the rounded row in workgroup
        // memory (the SwiGLU form more than WebGPU guarantees): loads may
        // opt in where the device has it.
        let int8_activations = {
            use etwgpu_kernels::ShaderId as S;
            [S::Q4GemvI8F32, S::Q4GemvSwigluNormI8F32, S::Q4GemvQkvNormI8F32, S::Q4GemvAttnI8F32]
                .iter()
                .all(|s| s.needs().workgroup_bytes <= device.limits().max_compute_workgroup_storage_size)
        };
        let caps = etwgpu_kernels::DeviceCaps {
            coop_matrix_f16: coop,
            precision: options.precision,
            subgroups: subgroups.filter(|_| options.subgroups != Some(false)),
            coop_attention: coop && !options.coop_attention_off,
            conv: options.conv,
            gemv_attention,
            gemv_attention_keys: if gemv_attention { etwgpu_kernels::GEMV_ATTN_AUTO_KEYS } else { 0 },
            int8_activations,
        };
        Ok(Self { device, queue, info, pipelines, caps, subgroups_by_default: options.subgroups == Some(true) })
    }

    /// What the GEMM routes may use on this device, at the default
    /// precision of its loads ([`RuntimeOptions::precision`]; a load's
    /// `LoadOptions::precision` may set another).
    pub fn gemm_caps(&self) -> etwgpu_kernels::DeviceCaps {
        self.caps
    }

    /// The subgroup sizes the kernels' subgroup forms may take here
    /// (`None`: the device has none, or they are switched off).
    pub fn subgroup_sizes(&self) -> Option<etwgpu_kernels::SubgroupSizes> {
        self.caps.subgroups
    }

    /// The GEMM route the prefill linears take here: `"cooperative-matrix"`
    /// (tensor cores) or `"tiled"` (the portable kernels).
    pub fn gemm_route(&self) -> &'static str {
        if self.caps.coop_matrix_f16 { "cooperative-matrix" } else { "tiled" }
    }

    /// The adapter in use.
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }

    /// The optional features the device has on (`shader-f16`, `subgroup`,
    /// `timestamp-query`).
    pub fn features(&self) -> Vec<&'static str> {
        feature_names(self.device.features())
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

    /// Whether a load with `options` takes the trusted path: it asks
    /// (`LoadOptions::trusted_shaders`, or `ETWGPU_TRUSTED_SHADERS=1` where
    /// that is `None`) and the runtime is on native Vulkan.
    pub fn trusts(&self, options: &crate::LoadOptions) -> bool {
        crate::pipeline_cache::trusted_path(self.info.backend)
            && options.trusted_shaders.unwrap_or_else(crate::pipeline_cache::trusted_shaders_env)
    }

    /// This runtime with its pipeline cache's trusted view
    /// ([`PipelineCache::trusted`]), for the load of a program the user
    /// trusts (`LoadOptions::trusted_shaders`); `None` where that path is
    /// not taken (backends other than Vulkan).
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn trusting(&self) -> Option<Runtime> {
        let view = self.pipelines.trusted(self.info.backend)?;
        Some(Runtime { pipelines: Arc::new(view), ..self.clone() })
    }

    /// Blocks until the queue is idle.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn wait_idle(&self) -> Result<()> {
        self.poll_wait()
    }

    /// Waits until the queue is idle without blocking: polls the device
    /// on native targets, awaits the browser's `onSubmittedWorkDone` on the
    /// web.
    pub async fn wait_idle_async(&self) -> Result<()> {
        let (done, wait) = oneshot();
        self.queue.on_submitted_work_done(move || done(()));
        self.poll_wait()?;
        wait.await;
        Ok(())
    }

    /// Drives the device until the queue is idle (native); returns at once
    /// on the web, where the browser polls.
    fn poll_wait(&self) -> Result<()> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| Error::Gpu { during: "waiting for the queue", reason: e.to_string() })
    }

    /// Maps each slice for reading once the work submitted so far is done,
    /// and waits for every mapping (see [`Runtime::wait_idle_async`]).
    pub(crate) async fn map_read(&self, slices: &[wgpu::BufferSlice<'_>]) -> Result<()> {
        self.map_read_after(slices, None).await
    }

    /// [`map_read`](Self::map_read), waiting (on native) only for
    /// `submission` when given, not for work submitted after it: a run's
    /// read-back does not wait for the next run, already queued.
    pub(crate) async fn map_read_after(
        &self,
        slices: &[wgpu::BufferSlice<'_>],
        submission: Option<wgpu::SubmissionIndex>,
    ) -> Result<()> {
        let mut pending = Vec::with_capacity(slices.len());
        for slice in slices {
            let (done, wait) = oneshot();
            slice.map_async(wgpu::MapMode::Read, move |r| done(r.map_err(|e| e.to_string())));
            pending.push(wait);
        }
        match submission {
            Some(index) => self
                .device
                .poll(wgpu::PollType::Wait { submission_index: Some(index), timeout: None })
                .map(|_| ())
                .map_err(|e| Error::Gpu { during: "waiting for a run", reason: e.to_string() })?,
            None => self.poll_wait()?,
        }
        for wait in pending {
            wait.await.map_err(|reason| Error::Map { reason })?;
        }
        Ok(())
    }
}

/// Workgroup memory the largest cooperative-matrix kernel stages
/// (`q4_gemm_coop_swiglu_large.wgsl`: 47,104 bytes), rounded up to 48 KiB.
const COOP_WORKGROUP_BYTES: u32 = 48 * 1024;

/// Whether `adapter` has what the cooperative-matrix kernels need: the
/// experimental feature, a 16 x 16 x 16 configuration of f16 operands with
/// f32 accumulation, subgroups of exactly 32 invocations, SHADER_F16, and
/// the workgroup memory of the largest tiles ([`COOP_WORKGROUP_BYTES`];
/// the route has no smaller fallback once chosen).
fn coop_matrix_usable(adapter: &wgpu::Adapter) -> bool {
    use wgpu::CooperativeScalarType as T;
    let info = adapter.get_info();
    adapter.features().contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SHADER_F16)
        && adapter.limits().max_compute_workgroup_storage_size >= COOP_WORKGROUP_BYTES
        && info.subgroup_min_size == 32
        && info.subgroup_max_size == 32
        && adapter
            .cooperative_matrix_properties()
            .iter()
            .any(|p| (p.m_size, p.n_size, p.k_size) == (16, 16, 16) && p.ab_type == T::F16 && p.cr_type == T::F32)
}

/// The subgroup sizes of a device opened with `features`: those the
/// adapter reports (`subgroup_min_size ..= subgroup_max_size`), when it
/// has `SUBGROUP` and reports sizes (`None` otherwise).
fn subgroup_sizes(info: &wgpu::AdapterInfo, features: wgpu::Features) -> Option<etwgpu_kernels::SubgroupSizes> {
    let (min, max) = (info.subgroup_min_size, info.subgroup_max_size);
    (features.contains(wgpu::Features::SUBGROUP) && min > 0 && min <= max)
        .then_some(etwgpu_kernels::SubgroupSizes { min, max })
}

impl RuntimeOptions {
    /// Options from `ETWGPU_ADAPTER`, `ETWGPU_DISABLE_F16`,
    /// `ETWGPU_COOP_MATRIX`, `ETWGPU_PRECISION`, `ETWGPU_SUBGROUPS` and
    /// `ETWGPU_CONV` (all unset on the web); [`Error::BadEnv`] when
    /// `ETWGPU_PRECISION` names no precision or `ETWGPU_CONV` no setting.
    pub fn from_env() -> Result<Self> {
        Ok(Self {
            adapter: std::env::var(ADAPTER_ENV).ok(),
            disable_f16: std::env::var(DISABLE_F16_ENV).is_ok_and(|v| v == "1"),
            coop_matrix: match std::env::var(COOP_MATRIX_ENV).as_deref() {
                Ok("0") => Some(false),
                Ok("1") => Some(true),
                _ => None,
            },
            precision: precision_from_env(std::env::var(PRECISION_ENV).ok().as_deref())?,
            subgroups: match std::env::var(SUBGROUPS_ENV).as_deref() {
                Ok("0") => Some(false),
                Ok("1") => Some(true),
                _ => None,
            },
            coop_attention_off: std::env::var(COOP_ATTENTION_ENV).is_ok_and(|v| v == "0"),
            conv: conv_from_env(std::env::var(CONV_ENV).ok().as_deref())?,
        })
    }
}

/// The convolutions' kernel `ETWGPU_CONV` (`value`, `None` when unset)
/// names: the default when unset, [`Error::BadEnv`] for a name
/// [`etwgpu_kernels::ConvKernels::from_name`] does not take.
pub(crate) fn conv_from_env(value: Option<&str>) -> Result<etwgpu_kernels::ConvKernels> {
    use etwgpu_kernels::ConvKernels;
    setting_from_env(CONV_ENV, value, ConvKernels::from_name, ConvKernels::ACCEPTED)
}

/// The precision `ETWGPU_PRECISION` (`value`, `None` when unset) names:
/// the default when unset, [`Error::BadEnv`] for a name
/// [`etwgpu_kernels::Precision::from_name`] does not take.
pub(crate) fn precision_from_env(value: Option<&str>) -> Result<etwgpu_kernels::Precision> {
    use etwgpu_kernels::Precision;
    setting_from_env(PRECISION_ENV, value, Precision::from_name, Precision::ACCEPTED)
}

/// The setting environment variable `var` (`value`, `None` when unset)
/// names: the default when unset, [`Error::BadEnv`] (listing `accepted`)
/// for a name `from_name` does not take.
fn setting_from_env<T: Default>(
    var: &'static str,
    value: Option<&str>,
    from_name: fn(&str) -> Option<T>,
    accepted: &'static str,
) -> Result<T> {
    let Some(v) = value else { return Ok(T::default()) };
    from_name(v).ok_or_else(|| Error::BadEnv { var, value: v.to_string(), accepted })
}

/// A value handed over once, from a wgpu callback to the task awaiting it.
type Slot<T> = Arc<Mutex<(Option<T>, Option<Waker>)>>;

/// A callback to give wgpu and the future that completes when it is
/// called (on native, during `device.poll`; on the web, from the event
/// loop).
fn oneshot<T: Send + 'static>() -> (impl FnOnce(T) + Send + 'static, Oneshot<T>) {
    let slot: Slot<T> = Arc::new(Mutex::new((None, None)));
    let sender = slot.clone();
    let send = move |value| {
        let mut s = sender.lock().unwrap_or_else(|e| e.into_inner());
        s.0 = Some(value);
        if let Some(waker) = s.1.take() {
            waker.wake();
        }
    };
    (send, Oneshot(slot))
}

/// The receiving half of [`oneshot`].
struct Oneshot<T>(Slot<T>);

impl<T> Future for Oneshot<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match s.0.take() {
            Some(value) => Poll::Ready(value),
            None => {
                s.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
