//! Profiling a delegate call: [`NodeProfile`] rows, and recording a run
//! timed by GPU timestamps where the device has them: written between the
//! dispatches of the one pass a run records where the device can write
//! them inside passes (`TIMESTAMP_QUERY_INSIDE_PASSES`), so each dispatch
//! is timed as it runs in the chain (with the barrier before the next),
//! else around a pass per dispatch (which adds a pass's start and end to
//! each); without timestamps, by the wall time of each dispatch run alone.

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
    /// Dispatches it recorded (0 for views and host-only ops).
    pub dispatches: usize,
    /// Time of its dispatches, nanoseconds.
    pub nanos: f64,
    /// Whether the time comes from GPU timestamps (else wall time of each
    /// dispatch submitted alone).
    pub gpu_timestamps: bool,
}

/// Per-dispatch timing of one delegate call: whether it is on, and the
/// times of the last profiled run.
#[derive(Debug, Default)]
pub(crate) struct Profiling {
    /// Time every dispatch of each run.
    pub(crate) on: bool,
    /// Per dispatch of the last profiled run: nanoseconds.
    times: Vec<f64>,
    /// Whether `times` come from GPU timestamps (else wall time).
    gpu_timestamps: bool,
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
                dispatches: 0,
                nanos: 0.0,
                gpu_timestamps: self.gpu_timestamps,
            })
            .collect();
        for (i, &CompiledDispatch { node, label, .. }) in plan.dispatches.iter().enumerate() {
            let row = &mut rows[node];
            row.dispatches += 1;
            if !row.kernels.iter().any(|k| k == label) {
                row.kernels.push(label.to_string());
            }
            row.nanos += self.times.get(i).copied().unwrap_or(0.0);
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
            encoder.resolve_query_set(&queries, 0..count, &resolve, 0);
            encoder.copy_buffer_to_buffer(&resolve, 0, &read, 0, bytes);
            rt.queue.submit([encoder.finish()]);
            rt.map_read(&[read.slice(..)]).await?;
            let view = read.slice(..).get_mapped_range().map_err(|e| Error::Map { reason: e.to_string() })?;
            let ticks: Vec<u64> =
                view.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
            drop(view);
            read.unmap();
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
}
