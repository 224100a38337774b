//! `attention_probe emulate`: `sdpa_prefill_coop.wgsl` as shipped, its
//! cooperative-matrix operations replaced by plain WGSL that gives each
//! invocation its share of each 16 x 16 fragment (`Frag`: 8 elements,
//! f32; multiply-adds sum 16 products of f16 operands in f32), so the
//! kernel's tiling, staging, masks, rescales and output run on any
//! adapter with `shader-f16` and 32 KiB of workgroup memory (lavapipe
//! too: the scores and the multiply-adds' operands move to storage
//! buffers). It checks the algorithm against the f64 reference, not the
//! matrix units: the layouts the emulation gives `coopLoad` (column-major)
//! and `coopLoadT` / `coopStoreT` (row-major, strides in elements of the
//! pointed-to type) are those of `VK_KHR_cooperative_matrix` as naga
//! writes them.

use etwgpu_kernels::ShaderId;

/// Plain-WGSL stand-ins of the operations the kernel uses, one per
/// (workgroup array, layout). A fragment is spread over its subgroup's 32
/// invocations as on the hardware: invocation `lane` holds elements
/// `8 lane .. 8 lane + 7` in row-major order, so loads and stores touch
/// only the invocation's own elements; a multiply-add passes the operands
/// (rounded to f16) through the subgroup's slot of `emu_ab`, a storage
/// buffer with a region of [`AB_SLOTS`] per workgroup (up to 8 subgroups),
/// between two storage barriers (the kernel calls every operation in
/// uniform control flow, so every invocation reaches them).
const EMULATION: &str = r"
struct Frag { v: array<f32, 8> }

var<private> emu_lid: u32;
@group(0) @binding(6) var<storage, read_write> emu_ab: array<f32>;
var<private> emu_abs: u32;

fn emu_mma(a: Frag, b: Frag, c: Frag) -> Frag {
    let slot = emu_abs + (emu_lid / 32u) * 512u;
    let lane = emu_lid % 32u;
    for (var e = 0u; e < 8u; e++) {
        emu_ab[slot + lane * 8u + e] = f32(f16(a.v[e]));
        emu_ab[slot + 256u + lane * 8u + e] = f32(f16(b.v[e]));
    }
    storageBarrier();
    var o = c;
    for (var e = 0u; e < 8u; e++) {
        let r = (lane * 8u + e) / 16u;
        let n = (lane * 8u + e) % 16u;
        var acc = 0.0;
        for (var k = 0u; k < 16u; k++) {
            acc += emu_ab[slot + r * 16u + k] * emu_ab[slot + 256u + k * 16u + n];
        }
        o.v[e] += acc;
    }
    storageBarrier();
    return o;
}

/// Element `e` of this invocation's share: (row, column).
fn emu_rc(e: u32) -> vec2<u32> {
    let i = (emu_lid % 32u) * 8u + e;
    return vec2<u32>(i / 16u, i % 16u);
}

fn emu_kv_half(h: u32) -> f32 {
    return f32(kv[h / 4u][h % 4u]);
}

fn emu_load_kv_row(base: u32, stride: u32) -> Frag {
    var f: Frag;
    for (var e = 0u; e < 8u; e++) {
        let rc = emu_rc(e);
        f.v[e] = emu_kv_half(base * 4u + rc.x * stride * 4u + rc.y);
    }
    return f;
}

fn emu_load_kv_col(base: u32, stride: u32) -> Frag {
    var f: Frag;
    for (var e = 0u; e < 8u; e++) {
        let rc = emu_rc(e);
        f.v[e] = emu_kv_half(base * 4u + rc.y * stride * 4u + rc.x);
    }
    return f;
}

fn emu_load_ps_row(base: u32, stride: u32) -> Frag {
    var f: Frag;
    for (var e = 0u; e < 8u; e++) {
        let rc = emu_rc(e);
        let h = base * 4u + rc.x * stride * 4u + rc.y;
        f.v[e] = f32(ps[h / 4u][h % 4u]);
    }
    return f;
}

fn emu_load_ss_row(base: u32, stride: u32) -> Frag {
    var f: Frag;
    for (var e = 0u; e < 8u; e++) {
        let rc = emu_rc(e);
        f.v[e] = ss[base + rc.x * stride + rc.y];
    }
    return f;
}

fn emu_store_ss_row(f: Frag, base: u32, stride: u32) {
    for (var e = 0u; e < 8u; e++) {
        let rc = emu_rc(e);
        ss[base + rc.x * stride + rc.y] = f.v[e];
    }
}
";

/// `emu_ab`'s elements per workgroup: 8 subgroups' slots of 512 (the
/// operands of one multiply-add, 2 x 16 x 16).
const AB_SLOTS: u64 = 8 * 512;

/// `source` with every cooperative-matrix operation replaced by its
/// stand-in: `coopLoad[T]<..>(&ARR[EXPR], STRIDE)` ->
/// `emu_load_ARR_{col,row}(EXPR, STRIDE)`, `coopStoreT(X, &ARR[EXPR],
/// STRIDE)` -> `emu_store_ARR_row(X, EXPR, STRIDE)`, `coopMultiplyAdd` ->
/// `emu_mma`. Panics on a form it does not know (the probe's own input).
pub fn emulate(source: &str) -> String {
    let mut out = String::new();
    let mut rest = source.replace("enable wgpu_cooperative_matrix;", "");
    loop {
        let next = ["coopLoadT<", "coopLoad<", "coopStoreT(", "coopMultiplyAdd("]
            .iter()
            .filter_map(|p| rest.find(p).map(|i| (i, *p)))
            .min();
        let Some((at, pattern)) = next else { break };
        out.push_str(&rest[..at]);
        let mut tail = &rest[at + pattern.len()..];
        match pattern {
            "coopMultiplyAdd(" => out.push_str("emu_mma("),
            "coopStoreT(" => {
                let comma = tail.find(", &").expect("coopStoreT(value, &array[..], stride)");
                let value = &tail[..comma];
                tail = &tail[comma + 3..];
                let (array, expr, after) = split_pointer(tail);
                out.push_str(&format!("emu_store_{array}_row({value}, {expr}, "));
                tail = after;
            }
            _ => {
                let layout = if pattern == "coopLoadT<" { "row" } else { "col" };
                let open = tail.find(">>(&").expect("coopLoad<type>>(&array[..], stride)");
                tail = &tail[open + 4..];
                let (array, expr, after) = split_pointer(tail);
                out.push_str(&format!("emu_load_{array}_{layout}({expr}, "));
                tail = after;
            }
        }
        rest = tail.to_string();
    }
    out.push_str(&rest);
    out.push_str(EMULATION);
    // The scores live in a storage buffer, a region per workgroup (the
    // kernel's 45 KiB of workgroup memory is more than lavapipe's 32),
    // as the multiply-adds' operands do (`emu_ab`, [`AB_SLOTS`] a workgroup).
    let ss_decl = "var<workgroup> ss: array<f32, BQ * LDS>;";
    assert!(out.contains(ss_decl), "the kernel declares its scores as {ss_decl}");
    let mut out = out
        .replace(ss_decl, "@group(0) @binding(5) var<storage, read_write> ss: array<f32>;\nvar<private> emu_ss: u32;")
        .replace("ss[", "ss[emu_ss + ");
    // Every invocation knows its index and its region before anything else runs.
    let main = out.find("fn main(").expect("the kernel's entry point");
    let body = main + out[main..].find(") {\n").expect("main's body") + 4;
    let group = "(wid.y * groups.x + wid.x)";
    out.insert_str(
        body,
        &format!("    emu_lid = lid;\n    emu_ss = {group} * BQ * LDS;\n    emu_abs = {group} * {AB_SLOTS}u;\n"),
    );
    out
}

/// `ARR[EXPR], rest` -> (`ARR`, `EXPR`, `rest`).
fn split_pointer(s: &str) -> (&str, &str, &str) {
    let open = s.find('[').expect("an indexed array");
    let close = s.find("], ").expect("an index without brackets, then the stride");
    (&s[..open], &s[open + 1..close], &s[close + 3..])
}

/// The emulated source of the kernel variant `id`.
pub fn source(id: ShaderId) -> String {
    emulate(id.source())
}

/// What a dispatch runs: the shipped kernel variant emulated (its scores
/// in a storage buffer), or a kernel's full source (`raw`), named, as
/// given (its own cooperative-matrix operations, scores in workgroup
/// memory) or emulated.
pub enum Kernel<'a> {
    Emulated(ShaderId),
    Raw { name: &'a str, source: &'a str, emulate: bool },
}

/// One emulated dispatch's shape and data.
pub struct Dispatch<'a> {
    pub kernel: Kernel<'a>,
    /// Queries and output float16 (else float32 queries over f16 caches).
    pub f16_q: bool,
    pub s: u64,
    pub start: u64,
    pub hq: u64,
    pub hkv: u64,
    pub d: u64,
    /// Queries `[s, hq, d]` as held.
    pub q: &'a [f32],
    /// Cache rows `[>= start + s, hkv, d]` (float16 values).
    pub k: &'a [f32],
    pub v: &'a [f32],
}

fn f16_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect()
}

/// Pipelines of the kernels run, made once each, by name.
pub type Pipelines = Vec<(String, wgpu::ComputePipeline)>;

/// A dispatch's device objects, made by [`prepare`].
pub struct Prepared {
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    out: wgpu::Buffer,
    groups: u32,
    out_len: usize,
    f16_q: bool,
}

/// Makes `a`'s buffers (its data uploaded), pipeline (once per kernel name,
/// kept in `pipelines`) and bind group on `rt`'s device.
pub fn prepare(rt: &etwgpu_runtime::Runtime, pipelines: &mut Pipelines, a: &Dispatch<'_>) -> Prepared {
    let (device, queue) = (rt.device(), rt.queue());
    let f16_q = a.f16_q;
    let storage = |label: &str, bytes: &[u8], extra: wgpu::BufferUsages| {
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: (bytes.len() as u64).next_multiple_of(16).max(16),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | extra,
            mapped_at_creation: false,
        });
        queue.write_buffer(&buffer, 0, bytes);
        buffer
    };
    let q_bytes: Vec<u8> = if f16_q { f16_bytes(a.q) } else { a.q.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let out_len = (a.s * a.hq * a.d) as usize;
    let out_bytes = vec![0u8; out_len * if f16_q { 2 } else { 4 }];
    let params: Vec<u8> = [a.s as u32, a.hq as u32, a.hkv as u32, a.d as u32, a.start as u32]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .chain((1.0 / (a.d as f32).sqrt()).to_le_bytes())
        .chain([0u8; 8])
        .collect();
    let uniform = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("params"),
        size: 32,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    queue.write_buffer(&uniform, 0, &params);
    let q = storage("q", &q_bytes, wgpu::BufferUsages::empty());
    let k = storage("k", &f16_bytes(a.k), wgpu::BufferUsages::empty());
    let v = storage("v", &f16_bytes(a.v), wgpu::BufferUsages::empty());
    let out = storage("out", &out_bytes, wgpu::BufferUsages::COPY_SRC);
    let groups = a.s.div_ceil(64) * a.hq;
    let raw = matches!(a.kernel, Kernel::Raw { emulate: false, .. });
    // The emulation's scores and operand slots live in storage buffers; a
    // raw kernel has none.
    let ss =
        (!raw).then(|| storage("scores", &vec![0u8; (groups * 64 * 68 * 4) as usize], wgpu::BufferUsages::empty()));
    let ab =
        (!raw).then(|| storage("operands", &vec![0u8; (groups * AB_SLOTS * 4) as usize], wgpu::BufferUsages::empty()));
    let (name, text) = match a.kernel {
        Kernel::Emulated(id) => (id.label().to_string(), source(id)),
        Kernel::Raw { name, source, emulate: true } => (name.to_string(), emulate(source)),
        Kernel::Raw { name, source, emulate: false } => (name.to_string(), source.to_string()),
    };
    if !pipelines.iter().any(|(n, _)| *n == name) {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("sdpa_prefill_coop emulated"),
            source: wgpu::ShaderSource::Wgsl(text.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("sdpa_prefill_coop emulated"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            cache: None,
        });
        pipelines.push((name.clone(), pipeline));
    }
    let pipeline = pipelines.iter().find(|(n, _)| *n == name).expect("made above").1.clone();
    let mut buffers: Vec<&wgpu::Buffer> = vec![&uniform, &q, &k, &v, &out];
    buffers.extend(ss.as_ref());
    buffers.extend(ab.as_ref());
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32, resource: b.as_entire_binding() })
            .collect::<Vec<_>>(),
    });
    Prepared { pipeline, bind_group, out, groups: groups as u32, out_len, f16_q }
}

impl Prepared {
    /// Records `reps` dispatches of the kernel into one pass of `encoder`.
    pub fn record(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        reps: u32,
        ts: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: ts });
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        for _ in 0..reps {
            pass.dispatch_workgroups(self.groups, 1, 1);
        }
    }

    /// Runs the kernel once; the output `[s, hq, d]`.
    pub fn run(&self, rt: &etwgpu_runtime::Runtime) -> Vec<f32> {
        let (device, queue) = (rt.device(), rt.queue());
        let read = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: self.out.size(),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        self.record(&mut encoder, 1, None);
        encoder.copy_buffer_to_buffer(&self.out, 0, &read, 0, self.out.size());
        queue.submit([encoder.finish()]);
        read.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        let _ = device.poll(wgpu::PollType::wait_indefinitely());
        let view = read.slice(..).get_mapped_range().expect("mapped");
        let n = self.out_len;
        if self.f16_q {
            view.chunks_exact(2).take(n).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect()
        } else {
            view.chunks_exact(4).take(n).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect()
        }
    }
}

/// Runs the emulated kernel once on `rt`'s device; the output `[s, hq, d]`.
pub fn run(rt: &etwgpu_runtime::Runtime, pipelines: &mut Pipelines, a: &Dispatch<'_>) -> Vec<f32> {
    prepare(rt, pipelines, a).run(rt)
}
