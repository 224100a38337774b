//! The compiled dispatch plan of one delegate call: each dispatch of the
//! lowered chain as a [`CompiledDispatch`] (pipeline, bind group,
//! workgroups), the uniforms of all of them in one buffer with a host
//! copy, and the one [`CompiledDispatch::record`] that every path (run,
//! submit, profile, argmax) records through.
//!
//! A re-lowering that keeps every shader and binding ([`Plan::patch`])
//! writes the uniforms that changed with one queue write and sets the new
//! workgroup counts; anything else builds the plan anew ([`Plan::build`]).

use etwgpu_format::VkGraph;
use etwgpu_graph::LiveChain;
use etwgpu_kernels::Step;

use crate::buffers::{DeviceBuffers, align4};
use crate::device::Runtime;
use crate::error::{Error, Result};
use crate::options::{LoadProgress, LoadStage};

/// One dispatch, ready to record: what [`CompiledDispatch::record`] needs,
/// with the chain op it comes from and its shader label for profiles.
#[derive(Debug, Clone)]
pub(crate) struct CompiledDispatch {
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) bind_group: wgpu::BindGroup,
    pub(crate) workgroups: [u32; 3],
    /// Chain index of its op (`usize::MAX` for a device argmax).
    pub(crate) node: usize,
    pub(crate) label: &'static str,
}

impl CompiledDispatch {
    /// Records it into `pass`: the one way every path (run, submit,
    /// profile, argmax) records a dispatch.
    pub(crate) fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        let [x, y, z] = self.workgroups;
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(x, y, z);
    }
}

/// The recorded form of a lowered chain: its dispatches ready to record,
/// and its uniforms with a host copy, so a re-lowering that keeps the
/// structure patches them in one queue write.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub(crate) dispatches: Vec<CompiledDispatch>,
    /// Per chain op: the index of its first dispatch (one more entry at the
    /// end: the number of dispatches).
    node_dispatch: Vec<usize>,
    /// Per dispatch: the offset of its slice of `uniforms`.
    offsets: Vec<u64>,
    /// The bytes of `uniforms`, as last written.
    uniform_bytes: Vec<u8>,
    uniforms: Option<wgpu::Buffer>,
}

/// The dispatches among some steps, in order.
fn dispatches_of<'a>(steps: impl IntoIterator<Item = &'a Step>) -> impl Iterator<Item = &'a etwgpu_kernels::Dispatch> {
    steps.into_iter().filter_map(|s| match s {
        Step::Dispatch(d) => Some(d),
        _ => None,
    })
}

/// Offsets of each dispatch's uniforms in one buffer, and its bytes.
fn uniform_layout<'a>(params: impl Iterator<Item = &'a [u8]>, align: u64) -> (Vec<u64>, Vec<u8>) {
    let mut offsets = Vec::new();
    let mut bytes = Vec::new();
    for p in params {
        offsets.push(bytes.len() as u64);
        bytes.extend_from_slice(p);
        bytes.resize(align4(bytes.len() as u64).next_multiple_of(align) as usize, 0);
    }
    (offsets, bytes)
}

/// Compiles the pipelines of `steps` (into the runtime's cache), in order
/// of first use, calling `progress` per pipeline.
pub(crate) async fn compile_pipelines(
    rt: &Runtime,
    steps: &[Step],
    progress: &mut dyn FnMut(LoadProgress),
) -> Result<()> {
    let mut shaders = Vec::new();
    for d in dispatches_of(steps) {
        if !shaders.contains(&d.shader) {
            shaders.push(d.shader.clone());
        }
    }
    let total = shaders.len() as u64;
    for (i, shader) in shaders.into_iter().enumerate() {
        rt.pipelines.get_async(&shader).await?;
        progress(LoadProgress { stage: LoadStage::Pipelines, done: i as u64 + 1, total });
    }
    Ok(())
}

impl Plan {
    /// Creates the uniforms and bind groups of the dispatches of `live`,
    /// bound to `buffers` (the buffers of `graph`); `name` labels them.
    pub(crate) async fn build(
        rt: &Runtime,
        name: &str,
        graph: &VkGraph,
        live: &LiveChain,
        buffers: &DeviceBuffers,
    ) -> Result<Self> {
        let align = u64::from(rt.device.limits().min_uniform_buffer_offset_alignment).max(16);
        let mut node_dispatch = Vec::with_capacity(live.n_nodes() + 1);
        let mut dispatches: Vec<(usize, &etwgpu_kernels::Dispatch)> = Vec::new();
        for node in 0..live.n_nodes() {
            node_dispatch.push(dispatches.len());
            for step in live.node_steps(node) {
                match step {
                    Step::Dispatch(d) => dispatches.push((node, d)),
                    Step::Alias { out, src } => assert_eq!(
                        buffers.root_of(*out),
                        buffers.root_of(*src),
                        "aliasing is structural and must not change with shapes"
                    ),
                    Step::Prepack { .. } | Step::SymInt { .. } | Step::ReadSymInt { .. } | Step::Scratch { .. } => {}
                }
            }
        }
        node_dispatch.push(dispatches.len());
        let (offsets, uniform_bytes) = uniform_layout(dispatches.iter().map(|(_, d)| d.params.as_slice()), align);
        let uniforms = (!uniform_bytes.is_empty()).then(|| {
            let b = rt.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(&format!("{name} uniforms")),
                size: uniform_bytes.len() as u64,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            rt.queue.write_buffer(&b, 0, &uniform_bytes);
            b
        });
        let scope = rt.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut out = Vec::with_capacity(dispatches.len());
        for (i, &(node, d)) in dispatches.iter().enumerate() {
            let pipeline = rt.pipelines.get_async(&d.shader).await?;
            let uniforms = uniforms.as_ref().expect("dispatches have uniforms");
            let mut entries = vec![wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: uniforms,
                    offset: offsets[i],
                    size: wgpu::BufferSize::new(d.params.len() as u64),
                }),
            }];
            let read_roots: Vec<usize> = d.inputs.iter().map(|v| buffers.root_of(*v)).collect();
            for (j, v) in d.inputs.iter().chain(&d.outputs).enumerate() {
                let root = buffers.root_of(*v);
                if j >= d.inputs.len() {
                    assert!(
                        !read_roots.contains(&root),
                        "{}: output %{} shares a buffer with an input",
                        d.shader.label(),
                        v.0
                    );
                }
                entries.push(wgpu::BindGroupEntry { binding: j as u32 + 1, resource: buffers.binding(graph, root)? });
            }
            let bind_group = rt.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(&format!("{name} dispatch {i} ({})", d.shader.label())),
                layout: &pipeline.get_bind_group_layout(0),
                entries: &entries,
            });
            out.push(CompiledDispatch {
                pipeline,
                bind_group,
                workgroups: d.workgroups,
                node,
                label: d.shader.label(),
            });
        }
        if let Some(e) = scope.pop().await {
            return Err(Error::Gpu { during: "creating bind groups", reason: e.to_string() });
        }
        Ok(Plan { dispatches: out, node_dispatch, offsets, uniform_bytes, uniforms })
    }

    /// Writes the uniforms and workgroup counts of the re-lowered ops
    /// `nodes` of `live` (whose structure held) into the plan, with one
    /// queue write of the bytes that changed.
    pub(crate) fn patch(&mut self, queue: &wgpu::Queue, live: &LiveChain, nodes: &[usize]) {
        let mut span: Option<(usize, usize)> = None;
        for &node in nodes {
            for (j, d) in dispatches_of(live.node_steps(node)).enumerate() {
                let i = self.node_dispatch[node] + j;
                self.dispatches[i].workgroups = d.workgroups;
                let at = self.offsets[i] as usize;
                let slot = &mut self.uniform_bytes[at..at + d.params.len()];
                if slot != d.params.as_slice() {
                    slot.copy_from_slice(&d.params);
                    span =
                        Some(span.map_or((at, at + d.params.len()), |(a, b)| (a.min(at), b.max(at + d.params.len()))));
                }
            }
        }
        if let (Some((a, b)), Some(u)) = (span, &self.uniforms) {
            queue.write_buffer(u, a as u64, &self.uniform_bytes[a..b]);
        }
    }

    /// Records dispatches `range`, in order, into one compute pass.
    pub(crate) fn record_range(&self, pass: &mut wgpu::ComputePass<'_>, range: std::ops::Range<usize>) {
        for d in &self.dispatches[range] {
            d.record(pass);
        }
    }

    /// How many of the first dispatches a run with nothing in flight
    /// submits on their own before recording the rest, so the GPU starts
    /// while the host records (see [`EARLY_SUBMIT_ENV`]); 0 for plans too
    /// short to gain or where `on` is false.
    pub(crate) fn early_dispatches(&self, on: bool) -> usize {
        if on && self.dispatches.len() >= EARLY_SUBMIT_MIN { EARLY_DISPATCHES } else { 0 }
    }

    /// Records every dispatch, in order, into `threads` command buffers of
    /// one compute pass each, recorded at once on as many threads (the
    /// host's share of a run is mostly the driver and wgpu encoding
    /// dispatches, which parallelizes across command buffers); submitted
    /// in the order returned, they run as one pass of
    /// [`record_range`](Self::record_range) over them all does. `None` when it would not split: fewer than
    /// `MIN_PER_THREAD` dispatches a thread, or one thread.
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn record_threaded(
        &self,
        device: &wgpu::Device,
        label: &str,
        threads: usize,
    ) -> Option<Vec<wgpu::CommandBuffer>> {
        let threads = threads.min(self.dispatches.len() / MIN_PER_THREAD);
        if threads < 2 {
            return None;
        }
        let per = self.dispatches.len().div_ceil(threads);
        let record = |part: &[CompiledDispatch]| {
            let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
            {
                let mut pass = encoder
                    .begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(label), timestamp_writes: None });
                for d in part {
                    d.record(&mut pass);
                }
            }
            encoder.finish()
        };
        let mut parts = self.dispatches.chunks(per);
        let first = parts.next()?;
        Some(std::thread::scope(|scope| {
            let others: Vec<_> = parts.map(|part| scope.spawn(move || record(part))).collect();
            // This thread takes the first part while the others record.
            let mut buffers = vec![record(first)];
            for h in others {
                buffers.push(h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
            }
            buffers
        }))
    }
}

/// Fewest dispatches [`Plan::record_threaded`] gives a thread. Measured on
/// the H200 (run m in `tools/device/NOTES.md`): the 1B shape's 151
/// dispatches on 3 threads took longer to record than on one (0.70 against
/// 0.45 ms: wgpu's recording contends across threads, and starting them
/// costs), the SmolLM2 shape's 277 on 2 to 8 threads less (0.63 against
/// 0.97 ms, decode 3% faster).
#[cfg(not(target_arch = "wasm32"))]
const MIN_PER_THREAD: usize = 96;

/// Dispatches a run with nothing in flight records and submits before the
/// rest ([`Plan::early_dispatches`]): a 1B prefill records its 148
/// dispatches in ~0.4-0.6 ms on the H200's host, all of it before the GPU
/// started (~4% of a 512-token prefill, run am); its first 16 (the
/// embedding, the first norm and QKV GEMM, ...) keep the GPU busy longer
/// than the rest takes to record.
const EARLY_DISPATCHES: usize = 16;
/// Plans shorter than this record and submit in one piece.
const EARLY_SUBMIT_MIN: usize = 48;

/// `ETWGPU_EARLY_SUBMIT=0`: a run's dispatches are all recorded before
/// any is submitted (as before run am); unset or anything else: a run with
/// nothing in flight submits its first dispatches while it records the
/// rest ([`Plan::early_dispatches`]).
pub const EARLY_SUBMIT_ENV: &str = "ETWGPU_EARLY_SUBMIT";

/// Whether [`EARLY_SUBMIT_ENV`] leaves the early submission on.
pub(crate) fn early_submit() -> bool {
    std::env::var(EARLY_SUBMIT_ENV).map_or(true, |v| v != "0")
}

/// `ETWGPU_RECORD_THREADS=N`: threads that record a run's dispatches (1:
/// one pass on the calling thread). Unset: 2 (1 on hosts of fewer than 4
/// cores), so only plans of 192 dispatches or more split.
pub const RECORD_THREADS_ENV: &str = "ETWGPU_RECORD_THREADS";

/// The recording threads [`RECORD_THREADS_ENV`] asks for, or the default.
pub(crate) fn record_threads() -> usize {
    if cfg!(target_arch = "wasm32") {
        return 1;
    }
    if let Some(n) = std::env::var(RECORD_THREADS_ENV).ok().and_then(|v| v.parse::<usize>().ok()) {
        return n.max(1);
    }
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).clamp(1, 2))
}
