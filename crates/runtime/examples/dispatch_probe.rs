//! Measures what one dispatch costs the GPU apart from its work: chains of
//! `N` tiny dispatches in one compute pass, timed by timestamps at the
//! pass's start and end (median of 7), per dispatch. "dependent": every
//! dispatch writes the same buffer, so wgpu puts a barrier between each
//! pair (as between the ops of a decode step); "independent": each writes
//! its own buffer, so none. Each at 1, 132 and 1024 workgroups of 256
//! invocations that do one multiply-add each. A decode step is ~150
//! dependent dispatches, so this says how much of it is fixed cost.
//!
//! Then the host's side: the CPU time to record such a pass (encoder,
//! pass, `set_pipeline` + `set_bind_group` + `dispatch` per dispatch,
//! `finish`) and to submit it, per dispatch, as the runtime records a
//! plan: a bind group per dispatch over buffers of a small pool (like its
//! arenas), with 1, 4 or 8 bindings, the pipeline set at every dispatch or
//! once. This is wgpu's and the driver's encoding cost, which no change
//! to the kernels removes.
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
    let _ = writeln!(stdout, "host recording, {n} dependent dispatches per pass (median of {REPEATS}):");
    for (bindings, pipeline_each) in [(1usize, false), (1, true), (4, true), (8, true)] {
        let (record, submit) = host_recording(device, queue, n, bindings, pipeline_each);
        let _ = writeln!(
            stdout,
            "  {bindings} binding(s), pipeline {:<13}: record {:6.2} us, submit {:5.2} us per dispatch",
            if pipeline_each { "each dispatch" } else { "once" },
            record * 1e6 / f64::from(n),
            submit * 1e6 / f64::from(n)
        );
    }
}

/// The median CPU seconds to record and to submit a pass of `n`
/// dependent dispatches of a shader with `bindings` storage buffers (the
/// first written), each dispatch with its own bind group over a pool of 8
/// buffers; `pipeline_each` sets one of two pipelines before every
/// dispatch, as a plan of different kernels does.
fn host_recording(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    n: u32,
    bindings: usize,
    pipeline_each: bool,
) -> (f64, f64) {
    let mut source = String::new();
    for b in 0..bindings {
        let access = if b == 0 { "read_write" } else { "read" };
        source += &format!("@group(0) @binding({b}) var<storage, {access}> b{b}: array<f32>;\n");
    }
    let reads: String = (1..bindings).map(|b| format!(" + b{b}[i]")).collect();
    source += &format!(
        "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) g: vec3<u32>) {{\n    \
         let i = g.x % arrayLength(&b0);\n    b0[i] = b0[i] * 0.5{reads};\n}}\n"
    );
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("recording probe"),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    // One explicit layout, so that both pipelines take every bind group.
    let layout_entries: Vec<wgpu::BindGroupLayoutEntry> = (0..bindings)
        .map(|b| wgpu::BindGroupLayoutEntry {
            binding: b as u32,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: b != 0 },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        })
        .collect();
    let group_layout =
        device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: None, entries: &layout_entries });
    let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: None,
        bind_group_layouts: &[Some(&group_layout)],
        immediate_size: 0,
    });
    let pipelines: Vec<wgpu::ComputePipeline> = (0..2)
        .map(|_| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("recording probe"),
                layout: Some(&layout),
                module: &module,
                entry_point: Some("main"),
                compilation_options: wgpu::PipelineCompilationOptions::default(),
                cache: None,
            })
        })
        .collect();
    let pool: Vec<wgpu::Buffer> = (0..8)
        .map(|_| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: 1 << 16,
                usage: wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            })
        })
        .collect();
    let groups: Vec<wgpu::BindGroup> = (0..n as usize)
        .map(|i| {
            // Binding 0 (written) is always pool[0]: every dispatch
            // depends on the one before.
            let entries: Vec<wgpu::BindGroupEntry<'_>> = (0..bindings)
                .map(|b| wgpu::BindGroupEntry {
                    binding: b as u32,
                    resource: pool[if b == 0 { 0 } else { 1 + (i + b) % 7 }].as_entire_binding(),
                })
                .collect();
            device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &group_layout,
                entries: &entries,
            })
        })
        .collect();
    let mut records = Vec::new();
    let mut submits = Vec::new();
    for _ in 0..=REPEATS {
        let start = std::time::Instant::now();
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            if !pipeline_each {
                pass.set_pipeline(&pipelines[0]);
            }
            for (i, group) in groups.iter().enumerate() {
                let p = if pipeline_each { i % 2 } else { 0 };
                if pipeline_each {
                    pass.set_pipeline(&pipelines[p]);
                }
                pass.set_bind_group(0, group, &[]);
                pass.dispatch_workgroups(1, 1, 1);
            }
        }
        let commands = encoder.finish();
        let recorded = start.elapsed();
        queue.submit([commands]);
        submits.push((start.elapsed() - recorded).as_secs_f64());
        records.push(recorded.as_secs_f64());
        let _ = device.poll(wgpu::PollType::wait_indefinitely());
    }
    // The first pass is a warm-up.
    let median = |v: &mut Vec<f64>| {
        v.remove(0);
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (median(&mut records), median(&mut submits))
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
