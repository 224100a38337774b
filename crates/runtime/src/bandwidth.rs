//! The device's copy bandwidth, the roofline reference for memory-bound
//! kernels: [`Runtime::copy_bandwidth`] times `copy.wgsl` (16-byte words,
//! one per invocation) between two buffers.

use etwgpu_kernels::ShaderId;

use crate::device::Runtime;
use crate::error::{Error, Result};

/// What [`Runtime::copy_bandwidth`] measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Bandwidth {
    /// Bytes copied by one dispatch (the source buffer's size).
    pub bytes: u64,
    /// Median seconds of one copy.
    pub seconds: f64,
    /// Bytes read plus bytes written per second, in GB/s (1e9 bytes), as
    /// copy benchmarks count them.
    pub gb_per_s: f64,
    /// Whether the times come from GPU timestamps (else the wall time of
    /// all copies in one submit, divided).
    pub gpu_timestamps: bool,
}

impl Runtime {
    /// Copies `bytes` (rounded down to 16, capped at the largest storage
    /// binding) from one buffer to another `iterations` times after one
    /// warm-up and reports the median.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn copy_bandwidth(&self, bytes: u64, iterations: u32) -> Result<Bandwidth> {
        pollster::block_on(self.copy_bandwidth_async(bytes, iterations))
    }

    /// [`Runtime::copy_bandwidth`] without blocking.
    pub async fn copy_bandwidth_async(&self, bytes: u64, iterations: u32) -> Result<Bandwidth> {
        let limits = self.device.limits();
        let bytes = bytes.min(limits.max_storage_buffer_binding_size).min(limits.max_buffer_size) / 16 * 16;
        let n_words = u32::try_from(bytes / 16).map_err(|_| Error::Gpu {
            during: "sizing the bandwidth copy",
            reason: format!("{bytes} bytes is over 2^32 words"),
        })?;
        let iterations = iterations.max(1);
        let pipeline = self.pipelines.get_async(&ShaderId::CopyF32.into()).await?;
        let buffer = |label: &str, usage: wgpu::BufferUsages| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes.max(16),
                usage,
                mapped_at_creation: false,
            })
        };
        let src = buffer("bandwidth source", wgpu::BufferUsages::STORAGE);
        let dst = buffer("bandwidth destination", wgpu::BufferUsages::STORAGE);
        let mut params = n_words.to_le_bytes().to_vec();
        params.resize(16, 0);
        let uniforms = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("bandwidth uniforms"),
            size: 16,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.queue.write_buffer(&uniforms, 0, &params);
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("bandwidth bind group"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: uniforms.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 1, resource: src.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 2, resource: dst.as_entire_binding() },
            ],
        });
        let groups = n_words.div_ceil(etwgpu_kernels::plan::WG_ELEMENTWISE).max(1);
        let x = groups.min(etwgpu_kernels::plan::MAX_GROUPS_PER_DIM);
        let grid = [x, groups.div_ceil(x), 1];
        let gpu = self.device.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        let n = iterations + 1;
        let queries = gpu.then(|| {
            self.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("bandwidth timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: 2 * n,
            })
        });
        let mut encoder =
            self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("bandwidth copies") });
        for i in 0..n {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("bandwidth copy"),
                timestamp_writes: queries.as_ref().map(|q| wgpu::ComputePassTimestampWrites {
                    query_set: q,
                    beginning_of_pass_write_index: Some(2 * i),
                    end_of_pass_write_index: Some(2 * i + 1),
                }),
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(grid[0], grid[1], grid[2]);
        }
        let read = queries.as_ref().map(|q| {
            let size = 16 * u64::from(n);
            let resolve = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("bandwidth timestamp resolve"),
                size,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let read = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("bandwidth timestamp read-back"),
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            encoder.resolve_query_set(q, 0..2 * n, &resolve, 0);
            encoder.copy_buffer_to_buffer(&resolve, 0, &read, 0, size);
            read
        });
        let start = web_time::Instant::now();
        self.queue.submit([encoder.finish()]);
        match &read {
            Some(read) => self.map_read(&[read.slice(..)]).await?,
            None => self.wait_idle_async().await?,
        }
        let wall = start.elapsed().as_secs_f64();
        let mut times: Vec<f64> = match &read {
            Some(read) => {
                let view = read.slice(..).get_mapped_range().map_err(|e| Error::Map { reason: e.to_string() })?;
                let period = f64::from(self.queue.get_timestamp_period());
                let ticks: Vec<u64> =
                    view.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
                // Skip the warm-up copy.
                ticks.chunks_exact(2).skip(1).map(|t| t[1].saturating_sub(t[0]) as f64 * period * 1e-9).collect()
            }
            None => vec![wall / f64::from(n)],
        };
        times.sort_by(f64::total_cmp);
        let seconds = times[times.len() / 2].max(1e-12);
        Ok(Bandwidth { bytes, seconds, gb_per_s: 2.0 * bytes as f64 / seconds / 1e9, gpu_timestamps: gpu })
    }
}
