//! Times variants of the 4-bit decode GEMV on one shape (by default the
//! 128256 x 2048 output head of Llama-3.2-1B, 164 MB of weights and
//! scales, more than the GPU's caches) to see what limits it: the whole
//! kernel, x from workgroup memory, no dequantization, the weights alone,
//! more words in flight, a cheaper dequantization, x rounded to int8 with
//! integer dot products (`dot4I8Packed`), the shipped float and int8
//! kernels (`q4_gemv.wgsl`, `q4_gemv_i8.wgsl`), each with wgpu's shader
//! bounds checks on and off, at 8, 16 and 32 columns per workgroup.
//! Each timing is a pass of `CHAIN` dispatches that all write one output
//! (so each waits for the one before, as a decode step's ops do), GPU
//! timestamps around the pass, per dispatch, median of 10 passes after a
//! warm-up. Run: `cargo run --release -p etwgpu-runtime --example gemv_probe [N K]`.

#[path = "common/timestamps.rs"]
mod timestamps;

use std::io::Write;

const SOURCE: &str = include_str!("gemv_probe.wgsl");
const MODES: [(u32, &str); 12] = [
    (0, "whole kernel"),
    (1, "x in workgroup memory"),
    (2, "no dequantization"),
    (3, "weights alone"),
    (4, "4 words in flight"),
    (5, "1 + q/16 dequantization"),
    (6, "2 columns an invocation"),
    (7, "4 columns an invocation"),
    (9, "q4_gemv.wgsl as shipped"),
    (10, "x int8, dot4I8Packed"),
    (11, "x int8 from storage"),
    (12, "q4_gemv_i8.wgsl as shipped"),
];
/// Dependent dispatches per timed pass.
const CHAIN: u32 = 16;

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (n, k) = (args.first().copied().unwrap_or(128_256), args.get(1).copied().unwrap_or(2048));
    let rt = timestamps::runtime_with_timestamps("gemv_probe");
    let (device, queue) = (rt.device(), rt.queue());
    let group = 32u64;
    let storage = |label: &str, bytes: u64, seed: u32| {
        let mut data = vec![0u8; bytes as usize];
        let mut s = seed.wrapping_mul(2_654_435_761) | 1;
        for chunk in data.chunks_exact_mut(4) {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            chunk.copy_from_slice(&(s & 0x3C3C_3C3C).to_le_bytes());
        }
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        queue.write_buffer(&buffer, 0, &data);
        buffer
    };
    let w_bytes = n * k / 2;
    let s_bytes = k / group * n * 4;
    let x = storage("x", k * 4, 1);
    let weights = storage("weights", w_bytes, 2);
    let scales = storage("scales", s_bytes, 3);
    let out = storage("out", n * 4, 4);
    let bias = storage("bias", n * 4, 5);
    // Mode 11's x, already rounded: any bytes, and each block's (scale, sum).
    let xq = storage("xq", k, 6);
    let xd = storage("xd", k / 32 * 8, 7);
    let uniform = |words: &[u32]| {
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("params"),
            size: 4 * words.len() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let bytes: Vec<u8> = words.iter().flat_map(|v| v.to_le_bytes()).collect();
        queue.write_buffer(&buffer, 0, &bytes);
        buffer
    };
    let uniforms = uniform(&[n as u32, k as u32, group as u32, 0]);
    let iterations = 11u32;
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(
        stdout,
        "gemv probe: {} ({n} x {k}, {:.1} MB of weights and scales)",
        rt.adapter_info().name,
        (w_bytes + s_bytes) as f64 / 1e6
    );
    for (cols, (mode, what), checked) in [8u64, 16, 32]
        .into_iter()
        .flat_map(|c| MODES.into_iter().flat_map(move |m| [true, false].into_iter().map(move |on| (c, m, on))))
    {
        let per_invocation = match mode {
            6 => 2,
            7 => 4,
            _ => 1,
        };
        let wgs = n.div_ceil(cols * per_invocation) as u32;
        let grid = [wgs.min(65_535), wgs.div_ceil(65_535), 1];
        // Modes 9 and 12: the kernels the runtime dispatches (float, int8
        // activations).
        let shipped = mode == 9 || mode == 12;
        let source = if mode == 12 {
            etwgpu_kernels::ShaderId::Q4GemvI8F32.source().to_string()
        } else if shipped {
            etwgpu_kernels::ShaderId::Q4GemvF32.source().to_string()
        } else {
            SOURCE
                .replace("const MODE: u32 = 0u;", &format!("const MODE: u32 = {mode}u;"))
                .replace("const COLS: u32 = 32u;", &format!("const COLS: u32 = {cols}u;"))
                .replace("const R: u32 = 1u;", &format!("const R: u32 = {per_invocation}u;"))
        };
        let descriptor =
            wgpu::ShaderModuleDescriptor { label: Some("gemv probe"), source: wgpu::ShaderSource::Wgsl(source.into()) };
        let module = if checked {
            device.create_shader_module(descriptor)
        } else {
            // SAFETY: the probe's indices stay inside its buffers (the
            // grid covers N columns, x holds K, the scales K/32 rows).
            unsafe { device.create_shader_module_trusted(descriptor, wgpu::ShaderRuntimeChecks::unchecked()) }
        };
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("gemv probe"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            cache: None,
        });
        // The buffers in binding order: the shipped kernel has its own
        // uniforms (one row, no bias, word-major weights) and a bias.
        let shipped_uniforms;
        let bound: Vec<&wgpu::Buffer> = if shipped {
            shipped_uniforms = uniform(&[1, n as u32, k as u32, n as u32, group as u32, 0, cols as u32, 1]);
            vec![&shipped_uniforms, &x, &weights, &scales, &bias, &out]
        } else {
            vec![&uniforms, &x, &weights, &scales, &out, &xq, &xd]
        };
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &bound
                .iter()
                .enumerate()
                .map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32, resource: b.as_entire_binding() })
                .collect::<Vec<_>>(),
        });
        let queries = timestamps::pass_queries(device, iterations);
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        for i in 0..iterations {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: Some(timestamps::pass_timestamps(&queries, i)),
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            for _ in 0..CHAIN {
                pass.dispatch_workgroups(grid[0], grid[1], grid[2]);
            }
        }
        let t = timestamps::median_pass_seconds(device, queue, encoder, &queries, iterations) / f64::from(CHAIN);
        let _ = writeln!(
            stdout,
            "  cols {cols:>2} mode {mode} {what:<24} checks {:<3}: {:8.2} us, {:7.1} GB/s",
            if checked { "on" } else { "off" },
            t * 1e6,
            (w_bytes + s_bytes) as f64 / t / 1e9
        );
    }
}
