//! Measures what one dispatch costs the GPU apart from its work: chains of
//! `N` tiny dispatches in one compute pass, timed by timestamps at the
//! pass's start and end (median of 7), per dispatch. "dependent": every
//! dispatch writes the same buffer, so wgpu puts a barrier between each
//! pair (as between the ops of a decode step); "independent": each writes
//! its own buffer, so none. Each at 1, 132 and 1024 workgroups of 256
//! invocations that do one multiply-add each. A decode step is ~150
//! dependent dispatches, so this says how much of it is fixed cost.
//! Run: `cargo run --release -p etwgpu-runtime --example dispatch_probe [N]`.

#[path = "common/timestamps.rs"]
mod timestamps;

use std::io::Write;

const SOURCE: &str = "
@group(0) @binding(0) var<storage, read_write> data: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let i = g.x % arrayLength(&data);
    data[i] = data[i] * 0.5 + 1.0;
}
";
const REPEATS: usize = 7;

fn main() {
    let n: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200).max(1);
    let rt = timestamps::runtime_with_timestamps("dispatch_probe");
    let (device, queue) = (rt.device(), rt.queue());
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("dispatch probe"),
        source: wgpu::ShaderSource::Wgsl(SOURCE.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("dispatch probe"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: wgpu::PipelineCompilationOptions::default(),
        cache: None,
    });
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "dispatch probe: {}, {n} dispatches per pass", rt.adapter_info().name);
    for workgroups in [1u32, 132, 1024] {
        let bytes = u64::from(workgroups) * 256 * 4;
        let buffers: Vec<wgpu::Buffer> = (0..n)
            .map(|_| {
                device.create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: bytes,
                    usage: wgpu::BufferUsages::STORAGE,
                    mapped_at_creation: false,
                })
            })
            .collect();
        let groups: Vec<wgpu::BindGroup> = buffers
            .iter()
            .map(|b| {
                device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: None,
                    layout: &pipeline.get_bind_group_layout(0),
                    entries: &[wgpu::BindGroupEntry { binding: 0, resource: b.as_entire_binding() }],
                })
            })
            .collect();
        for dependent in [true, false] {
            let t = median_pass_time(device, queue, &pipeline, &groups, n, workgroups, dependent);
            let _ = writeln!(
                stdout,
                "  {workgroups:>5} workgroups, {:<11}: {:8.1} us per pass, {:6.2} us per dispatch",
                if dependent { "dependent" } else { "independent" },
                t * 1e6,
                t * 1e6 / f64::from(n)
            );
        }
    }
}

/// The median over [`REPEATS`] passes of `n` dispatches (after one
/// warm-up), in seconds; `dependent` binds `groups[0]` every time.
fn median_pass_time(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    pipeline: &wgpu::ComputePipeline,
    groups: &[wgpu::BindGroup],
    n: u32,
    workgroups: u32,
    dependent: bool,
) -> f64 {
    let passes = REPEATS as u32 + 1;
    let queries = timestamps::pass_queries(device, passes);
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    for p in 0..passes {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: None,
            timestamp_writes: Some(timestamps::pass_timestamps(&queries, p)),
        });
        pass.set_pipeline(pipeline);
        for i in 0..n as usize {
            pass.set_bind_group(0, &groups[if dependent { 0 } else { i }], &[]);
            pass.dispatch_workgroups(workgroups, 1, 1);
        }
    }
    timestamps::median_pass_seconds(device, queue, encoder, &queries, passes)
}
