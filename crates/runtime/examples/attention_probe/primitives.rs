//! `attention_probe primitives`: one 16 x 16 x 16 product `D = A B + C`
//! per cooperative-matrix form the kernels use (where the operands live,
//! their layout, their stride), each in a workgroup of one subgroup of 32,
//! against the same product on the CPU. The operands are small multiples
//! of 1/8, exact in f16, so every sum is exact in f32: any difference is
//! the form, not rounding. On the H200 this tells which form a wrong
//! kernel used (run ad: `sdpa_prefill_coop.wgsl` gave wrong results while
//! a plain-WGSL emulation of its layouts did not).

use std::io::Write;

/// One product's form: how its entry point stages A and B (WGSL
/// statements, run by every invocation), the loads of its A and B
/// fragments, and C's stride and offset in `c1` (in and out).
struct Form {
    name: &'static str,
    what: &'static str,
    stage: &'static str,
    a: &'static str,
    b: &'static str,
    c: (u32, u32),
}

/// The forms whose entry points [`source`] writes from [`ENTRY`]; their
/// results sit in `dst` in this order, then those of [`HELD_FORMS`].
const FORMS: [Form; 7] = [
    Form {
        name: "gemm",
        what: "A row-major, B column-major from vec4<f16> (stride 6), C f32 (stride 16): q4_gemm_coop's forms",
        stage: "stage_a4(lane, 6u, 0u);\nstage_b4(lane, 6u, 0u, false);",
        a: "coopLoadT<coop_mat16x16<f16, A>>(&a4[0], 6u)",
        b: "coopLoad<coop_mat16x16<f16, B>>(&b4[0], 6u)",
        c: (16, 0),
    },
    Form {
        name: "a_f16",
        what: "A row-major from an f16 array (stride 72 halves, at half 32)",
        stage: "for (var e = lane; e < 256u; e += 32u) {\n    a1[32u + (e / 16u) * 72u + e % 16u] = a_(e / 16u, e % 16u);\n}\nstage_b4(lane, 6u, 0u, false);",
        a: "coopLoadT<coop_mat16x16<f16, A>>(&a1[32], 72u)",
        b: "coopLoad<coop_mat16x16<f16, B>>(&b4[0], 6u)",
        c: (16, 0),
    },
    Form {
        name: "a_kvs",
        what: "A row-major from vec4<f16> (stride 34, at vec4 4)",
        stage: "stage_a4(lane, 34u, 4u);\nstage_b4(lane, 6u, 0u, false);",
        a: "coopLoadT<coop_mat16x16<f16, A>>(&a4[4], 34u)",
        b: "coopLoad<coop_mat16x16<f16, B>>(&b4[0], 6u)",
        c: (16, 0),
    },
    Form {
        name: "b_row",
        what: "B row-major (coopLoadT) from vec4<f16> (stride 34)",
        stage: "stage_a4(lane, 6u, 0u);\nstage_b4(lane, 34u, 0u, true);",
        a: "coopLoadT<coop_mat16x16<f16, A>>(&a4[0], 6u)",
        b: "coopLoadT<coop_mat16x16<f16, B>>(&b4[0], 34u)",
        c: (16, 0),
    },
    Form {
        name: "b_col",
        what: "B column-major from vec4<f16> (stride 34, at vec4 4)",
        stage: "stage_a4(lane, 6u, 0u);\nstage_b4(lane, 34u, 4u, false);",
        a: "coopLoadT<coop_mat16x16<f16, A>>(&a4[0], 6u)",
        b: "coopLoad<coop_mat16x16<f16, B>>(&b4[4], 34u)",
        c: (16, 0),
    },
    Form {
        name: "b_col18",
        what: "B column-major from vec4<f16> (stride 18, at vec4 4)",
        stage: "stage_a4(lane, 6u, 0u);\nstage_b4(lane, 18u, 4u, false);",
        a: "coopLoadT<coop_mat16x16<f16, A>>(&a4[0], 6u)",
        b: "coopLoad<coop_mat16x16<f16, B>>(&b4[4], 18u)",
        c: (16, 0),
    },
    Form {
        name: "c_wide",
        what: "C in and out of an f32 array with stride 68, at element 16",
        stage: "stage_a4(lane, 6u, 0u);\nstage_b4(lane, 6u, 0u, false);",
        a: "coopLoadT<coop_mat16x16<f16, A>>(&a4[0], 6u)",
        b: "coopLoad<coop_mat16x16<f16, B>>(&b4[0], 6u)",
        c: (68, 16),
    },
];
/// The forms of [`HELD`]'s entry points (name, what it checks).
const HELD_FORMS: [(&str, &str); 3] = [
    ("a_held", "A loaded, then its array overwritten (barriers around), then used"),
    ("c_held", "C (the accumulator) loaded, then its array overwritten, then used"),
    ("held_loop", "A and C held over 4 loop steps that overwrite their arrays"),
];

/// Bindings, workgroup arrays and staging helpers of every entry point.
const PRELUDE: &str = r"
enable f16;
enable wgpu_cooperative_matrix;

@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;

var<workgroup> a4: array<vec4<f16>, 16u * 34u + 8u>;
var<workgroup> a1: array<f16, 16u * 72u + 32u>;
var<workgroup> b4: array<vec4<f16>, 16u * 34u + 8u>;
var<workgroup> c1: array<f32, 16u * 68u + 16u>;

fn a_(r: u32, c: u32) -> f16 { return f16(src[r * 16u + c]); }
fn b_(r: u32, c: u32) -> f16 { return f16(src[256u + r * 16u + c]); }
fn c_(r: u32, c: u32) -> f32 { return src[512u + r * 16u + c]; }

/// A row-major into `a4` (vec4 stride `s`, from vec4 `o`).
fn stage_a4(lane: u32, s: u32, o: u32) {
    for (var e = lane; e < 256u; e += 32u) {
        let r = e / 16u;
        let c = e % 16u;
        a4[o + r * s + c / 4u][c % 4u] = a_(r, c);
    }
}
/// B row-major (`rm`) or column-major into `b4` (vec4 stride `s`, from `o`).
fn stage_b4(lane: u32, s: u32, o: u32, rm: bool) {
    for (var e = lane; e < 256u; e += 32u) {
        let r = e / 16u;
        let c = e % 16u;
        if rm {
            b4[o + r * s + c / 4u][c % 4u] = b_(r, c);
        } else {
            b4[o + c * s + r / 4u][r % 4u] = b_(r, c);
        }
    }
}
/// C row-major into `c1` (stride `s`, from `o`).
fn stage_c(lane: u32, s: u32, o: u32) {
    for (var e = lane; e < 256u; e += 32u) {
        c1[o + (e / 16u) * s + e % 16u] = c_(e / 16u, e % 16u);
    }
}
/// `c1` (stride `s`, from `o`) to test `t`'s slot of `dst`.
fn out_c(lane: u32, s: u32, o: u32, t: u32) {
    for (var e = lane; e < 256u; e += 32u) {
        dst[t * 256u + e] = c1[o + (e / 16u) * s + e % 16u];
    }
}
";

/// The entry point of a [`Form`]: `NAME`, `STAGE`, `A`, `B`, `CS`, `CA`
/// and `T` (its slot of `dst`) replaced.
const ENTRY: &str = r"
@compute @workgroup_size(32)
fn NAME(@builtin(local_invocation_index) lane: u32) {
STAGE
    stage_c(lane, CSu, CAu);
    workgroupBarrier();
    let a = A;
    let b = B;
    let c = coopLoadT<coop_mat16x16<f32, C>>(&c1[CA], CSu);
    let d = coopMultiplyAdd(a, b, c);
    workgroupBarrier();
    coopStoreT(d, &c1[CA], CSu);
    workgroupBarrier();
    out_c(lane, CSu, CAu, Tu);
}
";

/// The entry points that hold fragments while their arrays change.
const HELD: &str = r"@compute @workgroup_size(32)
fn a_held(@builtin(local_invocation_index) lane: u32) {
    stage_a4(lane, 6u, 0u);
    stage_b4(lane, 6u, 0u, false);
    stage_c(lane, 16u, 0u);
    workgroupBarrier();
    let a = coopLoadT<coop_mat16x16<f16, A>>(&a4[0], 6u);
    workgroupBarrier();
    for (var e = lane; e < 16u * 34u; e += 32u) {
        a4[e] = vec4<f16>(f16(3.0));
    }
    workgroupBarrier();
    let b = coopLoad<coop_mat16x16<f16, B>>(&b4[0], 6u);
    let c = coopLoadT<coop_mat16x16<f32, C>>(&c1[0], 16u);
    let d = coopMultiplyAdd(a, b, c);
    workgroupBarrier();
    coopStoreT(d, &c1[0], 16u);
    workgroupBarrier();
    out_c(lane, 16u, 0u, 7u);
}

@compute @workgroup_size(32)
fn c_held(@builtin(local_invocation_index) lane: u32) {
    stage_a4(lane, 6u, 0u);
    stage_b4(lane, 6u, 0u, false);
    stage_c(lane, 16u, 0u);
    workgroupBarrier();
    let c = coopLoadT<coop_mat16x16<f32, C>>(&c1[0], 16u);
    workgroupBarrier();
    for (var e = lane; e < 256u; e += 32u) {
        c1[e] = 5.0;
    }
    workgroupBarrier();
    let a = coopLoadT<coop_mat16x16<f16, A>>(&a4[0], 6u);
    let b = coopLoad<coop_mat16x16<f16, B>>(&b4[0], 6u);
    let d = coopMultiplyAdd(a, b, c);
    workgroupBarrier();
    coopStoreT(d, &c1[0], 16u);
    workgroupBarrier();
    out_c(lane, 16u, 0u, 8u);
}

/// As the attention kernel holds its query fragments and zero accumulator:
/// loaded once, used at every step of a loop whose steps overwrite the
/// arrays they came from (the product is added once, at the last step; the
/// other steps add zero products from a B of zeros).
@compute @workgroup_size(32)
fn held_loop(@builtin(local_invocation_index) lane: u32) {
    stage_a4(lane, 6u, 0u);
    stage_c(lane, 16u, 0u);
    workgroupBarrier();
    let a = coopLoadT<coop_mat16x16<f16, A>>(&a4[0], 6u);
    let c = coopLoadT<coop_mat16x16<f32, C>>(&c1[0], 16u);
    var acc = c;
    for (var step = 0u; step < 4u; step++) {
        workgroupBarrier();
        for (var e = lane; e < 16u * 34u; e += 32u) {
            a4[e] = vec4<f16>(f16(f32(step) + 1.0));
            b4[e] = vec4<f16>();
        }
        for (var e = lane; e < 256u; e += 32u) {
            c1[e] = f32(step) + 7.0;
        }
        workgroupBarrier();
        if step == 3u {
            stage_b4(lane, 6u, 0u, false);
        }
        workgroupBarrier();
        let b = coopLoad<coop_mat16x16<f16, B>>(&b4[0], 6u);
        acc = coopMultiplyAdd(a, b, acc);
    }
    workgroupBarrier();
    coopStoreT(acc, &c1[0], 16u);
    workgroupBarrier();
    out_c(lane, 16u, 0u, 9u);
}
";

/// The module: [`PRELUDE`], an entry point per [`FORMS`], then [`HELD`].
fn source() -> String {
    let mut out = PRELUDE.to_string();
    for (t, f) in FORMS.iter().enumerate() {
        let stage: String = f.stage.lines().map(|l| format!("    {l}\n")).collect();
        out += &ENTRY
            .replace("NAME", f.name)
            .replace("STAGE\n", &stage)
            .replace("CSu", &format!("{}u", f.c.0))
            .replace("CAu", &format!("{}u", f.c.1))
            .replace("CA]", &format!("{}]", f.c.1))
            .replace("Tu", &format!("{t}u"))
            .replace("= A;", &format!("= {};", f.a))
            .replace("= B;", &format!("= {};", f.b));
    }
    out + HELD
}

/// Runs every form on `rt`'s device; prints PASS / FAIL each and returns
/// how many failed.
pub fn run(rt: &etwgpu_runtime::Runtime, stdout: &mut impl Write) -> usize {
    let (device, queue) = (rt.device(), rt.queue());
    let forms: Vec<(&str, &str)> = FORMS.iter().map(|f| (f.name, f.what)).chain(HELD_FORMS).collect();
    // A, B, C: multiples of 1/8 in [-2, 2), exact in f16; the pattern
    // differs by row and column so a transposed or shifted operand shows.
    let val = |t: usize, r: usize, c: usize| ((r * 7 + c * 3 + t * 5) % 32) as f32 / 8.0 - 2.0;
    let src: Vec<f32> = (0..3).flat_map(|t| (0..256).map(move |i| val(t, i / 16, i % 16))).collect();
    let expect: Vec<f32> = (0..256)
        .map(|i| {
            let (r, n) = (i / 16, i % 16);
            (0..16).map(|k| src[r * 16 + k] * src[256 + k * 16 + n]).sum::<f32>() + src[512 + i]
        })
        .collect();
    let src_buf = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("primitives src"),
        size: (src.len() * 4) as u64,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    queue.write_buffer(&src_buf, 0, &src.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>());
    let size = (forms.len() * 256 * 4) as u64;
    let dst = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("primitives dst"),
        size,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let read = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("coop primitives"),
        source: wgpu::ShaderSource::Wgsl(source().into()),
    });
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    for &(entry, _) in &forms {
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: None,
            module: &module,
            entry_point: Some(entry),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            cache: None,
        });
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: src_buf.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 1, resource: dst.as_entire_binding() },
            ],
        });
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None });
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(1, 1, 1);
    }
    encoder.copy_buffer_to_buffer(&dst, 0, &read, 0, size);
    queue.submit([encoder.finish()]);
    read.slice(..).map_async(wgpu::MapMode::Read, |_| {});
    let _ = device.poll(wgpu::PollType::wait_indefinitely());
    let view = read.slice(..).get_mapped_range().expect("mapped");
    let got: Vec<f32> = view.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
    let mut failed = 0;
    for (t, (entry, what)) in forms.iter().enumerate() {
        let out = &got[t * 256..(t + 1) * 256];
        let bad = out.iter().zip(&expect).filter(|(g, e)| (*g - *e).abs() > 1e-3).count();
        let first = out.iter().zip(&expect).position(|(g, e)| (g - e).abs() > 1e-3);
        let verdict = if bad == 0 { "PASS" } else { "FAIL" };
        failed += usize::from(bad > 0);
        let detail = first.map_or(String::new(), |i| {
            format!(" ({bad} of 256 wrong; first at row {} col {}: {} not {})", i / 16, i % 16, out[i], expect[i])
        });
        let _ = writeln!(stdout, "  {verdict} {entry:8} {what}{detail}");
    }
    failed
}
