//! Profiling a delegate call: [`NodeProfile`] rows, and recording a run
//! timed by GPU timestamps where the device has them: written between the
//! dispatches of the one pass a run records where the device can write
//! them inside passes (`TIMESTAMP_QUERY_INSIDE_PASSES`), so each dispatch
//! is timed as it runs in the chain (with the barrier before the next),
//! else around a pass per dispatch (which adds a pass's start and end to
//! each); without timestamps, by the wall time of each dispatch run alone.
//!
//! Timestamps between small dispatches inflate them (a timestamp write
//! waits for the work before it), so [`ProfileMode::ByKernel`] times
//! instead, with timestamps only around passes, for each shader a pass of
//! only that shader's dispatches in chain order and then the whole chain,
//! each pass repeated [`KERNEL_REPS`] times: a kernel's share of a run
//! without the timing in its way (its dispatches still wait on each other
//! as in the chain, but no longer on the other kernels' work).

use etwgpu_format::VkGraph;

use crate::device::Runtime;
use crate::error::{Error, Result};
use crate::plan::{CompiledDispatch, Plan};

/// One op of a GPU call in a profiled run (see
/// `LoadedMethod::set_profiling`).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeProfile {
    /// The GPU call (delegate) label.
    pub call: String,
    /// ExecuTorch op name.
    pub op: String,
    /// Node id of the op in its graph.
    pub node_id: u32,
    /// Shader labels of its dispatches, first use order.
    pub kernels: Vec<String>,
    /// Time of each of `kernels`' dispatches, nanoseconds (the same order).
    pub kernel_nanos: Vec<f64>,
    /// Dispatches it recorded (0 for views and host-only ops).
    pub dispatches: usize,
    /// Time of its dispatches, nanoseconds.
    pub nanos: f64,
    /// Whether the time comes from GPU timestamps (else wall time of each
    /// dispatch submitted alone).
    pub gpu_timestamps: bool,
}

/// How a profiled run is timed (see `LoadedMethod::set_profile_mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ProfileMode {
    /// A timestamp between every two dispatches of the run's one pass (or
    /// a pass per dispatch): each dispatch as it runs in the chain, the
    /// small ones inflated by the timestamps.
    #[default]
    PerDispatch,
    /// Timestamps around passes only: per shader a pass of only its
    /// dispatches, then the whole chain (each pass run [`KERNEL_REPS`] times);
    /// a dispatch's time is its shader's pass time over its dispatches.
    /// Without timestamps on the device, as `PerDispatch`.
    ByKernel,
}

/// Times each pass of a [`ProfileMode::ByKernel`] run is repeated.
pub const KERNEL_REPS: u32 = 8;

/// Per-dispatch timing of one delegate call: whether it is on, and the
/// times of the last profiled run.
#[derive(Debug, Default)]
pub(crate) struct Profiling {
    /// Time every dispatch of each run.
    pub(crate) on: bool,
    pub(crate) mode: ProfileMode,
    /// Per dispatch of the last profiled run: nanoseconds.
    times: Vec<f64>,
    /// Whether `times` come from GPU timestamps (else wall time).
    gpu_timestamps: bool,
    /// GPU time of the whole chain in one pass (by-kernel runs only).
    pub(crate) total: Option<f64>,
}

impl Profiling {
    /// The last profiled run of `graph`'s chain (recorded as `plan`), one
    /// row per op in chain order; `call` labels the rows.
    pub(crate) fn rows(&self, call: &str, graph: &VkGraph, plan: &Plan) -> Vec<NodeProfile> {
        let mut rows: Vec<NodeProfile> = graph
            .chain
            .iter()
            .map(|c| NodeProfile {
                call: call.to_string(),
                op: c.name.clone(),
                node_id: c.node_id,
                kernels: Vec::new(),
                kernel_nanos: Vec::new(),
                dispatches: 0,
                nanos: 0.0,
                gpu_timestamps: self.gpu_timestamps,
            })
            .collect();
        for (i, &CompiledDispatch { node, label, .. }) in plan.dispatches.iter().enumerate() {
            let row = &mut rows[node];
            row.dispatches += 1;
            let nanos = self.times.get(i).copied().unwrap_or(0.0);
            match row.kernels.iter().position(|k| k == label) {
                Some(k) => row.kernel_nanos[k] += nanos,
                None => {
                    row.kernels.push(label.to_string());
                    row.kernel_nanos.push(nanos);
                }
            }
            row.nanos += nanos;
        }
        rows
    }

    pub(crate) async fn record(
        &mut self,
        rt: &Runtime,
        name: &str,
        plan: &Plan,
        mut encoder: wgpu::CommandEncoder,
    ) -> Result<wgpu::CommandEncoder> {
        let n = plan.dispatches.len();
        let gpu = rt.device.features().contains(wgpu::Features::TIMESTAMP_QUERY) && n > 0;
        let new_encoder = || {
            rt.device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some(&format!("{} profiled run", name)),
            })
        };
        self.total = None;
        if gpu && self.mode == ProfileMode::ByKernel {
            self.record_by_kernel(rt, name, plan, encoder).await?;
            return Ok(new_encoder());
        }
        if gpu {
            let inside = rt.device.features().contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES);
            // Inside one pass: a timestamp before each dispatch and one after
            // the last; else a (begin, end) pair around each dispatch's pass.
            let count = if inside { n as u32 + 1 } else { 2 * n as u32 };
            let queries = rt.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some(&format!("{} timestamps", name)),
                ty: wgpu::QueryType::Timestamp,
                count,
            });
            if inside {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(&format!("{name} profiled pass")),
                    timestamp_writes: None,
                });
                for (i, d) in plan.dispatches.iter().enumerate() {
                    pass.write_timestamp(&queries, i as u32);
                    d.record(&mut pass);
                }
                pass.write_timestamp(&queries, n as u32);
            } else {
                for (i, d) in plan.dispatches.iter().enumerate() {
                    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some(&format!("{name} dispatch {i}")),
                        timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                            query_set: &queries,
                            beginning_of_pass_write_index: Some(2 * i as u32),
                            end_of_pass_write_index: Some(2 * i as u32 + 1),
                        }),
                    });
                    d.record(&mut pass);
                }
            }
            let ticks = read_ticks(rt, name, encoder, &queries, count).await?;
            let period = f64::from(rt.queue.get_timestamp_period());
            let times = if inside {
                ticks.windows(2).map(|t| t[1].saturating_sub(t[0]) as f64 * period).collect()
            } else {
                ticks.chunks_exact(2).map(|t| t[1].saturating_sub(t[0]) as f64 * period).collect()
            };
            self.times = times;
            self.gpu_timestamps = true;
            Ok(new_encoder())
        } else {
            rt.queue.submit([encoder.finish()]);
            rt.wait_idle_async().await?;
            let mut times = Vec::with_capacity(n);
            for (i, d) in plan.dispatches.iter().enumerate() {
                let t = web_time::Instant::now();
                let mut e = new_encoder();
                {
                    let mut pass = e.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some(&format!("{name} dispatch {i}")),
                        timestamp_writes: None,
                    });
                    d.record(&mut pass);
                }
                rt.queue.submit([e.finish()]);
                rt.wait_idle_async().await?;
                times.push(t.elapsed().as_secs_f64() * 1e9);
            }
            self.times = times;
            self.gpu_timestamps = false;
            Ok(new_encoder())
        }
    }

    /// A [`ProfileMode::ByKernel`] run: per shader (first use order) a
    /// pass of its dispatches, then the whole chain, each pass recorded
    /// [`KERNEL_REPS`] times with timestamps at its start and end; the
    /// whole chain last, so the run's outputs are the chain's.
    async fn record_by_kernel(
        &mut self,
        rt: &Runtime,
        name: &str,
        plan: &Plan,
        mut encoder: wgpu::CommandEncoder,
    ) -> Result<()> {
        // Each shader, first use order, with its dispatch count.
        let mut labels: Vec<(&'static str, usize)> = Vec::new();
        for d in &plan.dispatches {
            match labels.iter_mut().find(|(l, _)| *l == d.label) {
                Some((_, uses)) => *uses += 1,
                None => labels.push((d.label, 1)),
            }
        }
        let passes = labels.len() as u32 + 1;
        let count = 2 * passes;
        let queries = rt.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some(&format!("{name} kernel timestamps")),
            ty: wgpu::QueryType::Timestamp,
            count,
        });
        for (j, label) in labels.iter().map(|(l, _)| Some(l)).chain([None]).enumerate() {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(&format!("{name} kernel pass {}", label.copied().unwrap_or("(all)"))),
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &queries,
                    beginning_of_pass_write_index: Some(2 * j as u32),
                    end_of_pass_write_index: Some(2 * j as u32 + 1),
                }),
            });
            for _ in 0..KERNEL_REPS {
                for d in plan.dispatches.iter().filter(|d| label.is_none_or(|l| d.label == *l)) {
                    d.record(&mut pass);
                }
            }
        }
        let ticks = read_ticks(rt, name, encoder, &queries, count).await?;
        let period = f64::from(rt.queue.get_timestamp_period());
        let pass_ns: Vec<f64> =
            ticks.chunks_exact(2).map(|t| t[1].saturating_sub(t[0]) as f64 * period / f64::from(KERNEL_REPS)).collect();
        self.times = plan
            .dispatches
            .iter()
            .map(|d| {
                let j = labels.iter().position(|(l, _)| *l == d.label).expect("every label listed");
                pass_ns[j] / labels[j].1 as f64
            })
            .collect();
        self.total = pass_ns.last().copied();
        self.gpu_timestamps = true;
        Ok(())
    }
}

/// Resolves the `count` timestamps `encoder` wrote into `queries`, submits
/// it, waits, and reads them back (ticks).
pub(crate) async fn read_ticks(
    rt: &Runtime,
    name: &str,
    mut encoder: wgpu::CommandEncoder,
    queries: &wgpu::QuerySet,
    count: u32,
) -> Result<Vec<u64>> {
    let bytes = 8 * u64::from(count);
    let resolve = rt.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(&format!("{} timestamp resolve", name)),
        size: bytes,
        usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let read = rt.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(&format!("{} timestamp read-back", name)),
        size: bytes,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    encoder.resolve_query_set(queries, 0..count, &resolve, 0);
    encoder.copy_buffer_to_buffer(&resolve, 0, &read, 0, bytes);
    rt.queue.submit([encoder.finish()]);
    rt.map_read(&[read.slice(..)]).await?;
    let view = read.slice(..).get_mapped_range().map_err(|e| Error::Map { reason: e.to_string() })?;
    let ticks = view.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
    drop(view);
    read.unmap();
    Ok(ticks)
}
