//! Checks and times prompt attention on the cooperative-matrix route
//! (`sdpa_prefill_coop.wgsl`, issue 15) end to end: small programs built
//! with the format crate's writer (`sdpa_with_kv_cache` over caches inside
//! the program, and the same behind `et_vk.apply_rotary_emb` with its
//! tables sliced at the position, which the graph fuses into
//! `etwgpu.sdpa_rope_with_kv_cache`), float32 queries over float16 caches
//! (`LoadOptions::kv_cache_f16`, precision F16) and float16 throughout,
//! GQA 4 at head dims 64 (32 query heads over 8, the Llama-3.2-1B shape)
//! and 128 (16 over 4), loaded on a device opened with cooperative
//! matrices required where the adapter has them (as
//! `ETWGPU_COOP_MATRIX=1`). Each load runs a sequence of calls on its
//! caches: prompts of 1, 9, 17, 64, 100, 512 and 2048 rows at position 0,
//! then chunks at positions past 0 (5, 37, 1000, 2048, 2100: keys before
//! the position come from the cache, query tiles start mid key tile). Two
//! kinds of data: uniform values, and "spiky" keys (a few positions whose
//! keys score far above the rest, later ones higher), which make the
//! kernel rescale its accumulators at key tiles past the first.
//!
//! Each call is compared with an f64 CPU reference from the values the
//! program holds (float16 caches; float16 inputs in float16 programs; the
//! float32 queries unrounded, so their rounding to f16 operands counts as
//! error) at sampled query rows (the first, the last, rows 63 and 64, and
//! random ones), every head and dim: PASS when the max abs error over the
//! largest reference magnitude is <= `TOLERANCE` and, on a device with
//! cooperative matrices, prompts of at least 9 rows ran
//! `sdpa_prefill_coop`; a FAIL exits 1. Prompts of 512 and more rows at
//! position 0 are also timed by kernel (the op's cache update and
//! attention, GPU timestamps, `ProfileMode::ByKernel`), as TFLOP/s of
//! causal attention (4 * heads * D * keys seen, summed over rows), next
//! to the tiled kernel (`sdpa_prefill.wgsl`, the same load on a runtime
//! without cooperative matrices).
//!
//! On a device with cooperative matrices it first checks each
//! cooperative-matrix form the kernels use on one 16 x 16 x 16 product
//! (`attention_probe/primitives.rs`).
//!
//! Run: `cargo run --release -p etwgpu-runtime --example attention_probe
//! [quick] [primitives]` (`quick`: prompts up to 100 rows and 8 query
//! heads, for CPU adapters; on one without cooperative matrices it checks
//! the tiled route the same way; `primitives`: the forms only; `raw
//! FILE...`: float32-query variants of the kernel's source, from files,
//! run as written: for trying a change on the H200 without a build;
//! `time FILE...`: such variants checked and timed at the Llama-3.2-1B
//! shapes (see `files::run_time`);
//! `dump FILE...`: one call of each, its output buffer written raw, for
//! kernels edited to write a stage of their work there).

#[path = "attention_probe/emulated.rs"]
mod emulated;
#[path = "attention_probe/files.rs"]
mod files;
#[path = "attention_probe/primitives.rs"]
mod primitives;
#[path = "common/timestamps.rs"]
#[expect(dead_code, reason = "this probe opens its own runtime and reads every pass time")]
mod timestamps;

use std::io::Write;

use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
use etwgpu_format::{DType, Program};
use etwgpu_runtime::{LoadOptions, LoadedMethod, Precision, ProfileMode, Runtime, RuntimeOptions, Tensor};

/// Largest accepted max abs error over the largest reference magnitude
/// (f16 operands: the queries and probabilities rounded to f16).
const TOLERANCE: f64 = 2e-2;
/// Random query rows checked per call, besides the first, the last and
/// rows 63 and 64.
const SAMPLED_ROWS: usize = 24;
/// Calls in order on one load: (start_pos, rows).
const CALLS: &[(u64, u64)] = &[
    (0, 1),
    (0, 9),
    (0, 17),
    (0, 64),
    (0, 100),
    (0, 512),
    (0, 2048),
    (5, 9),
    (37, 100),
    (1000, 512),
    (2048, 64),
    (2100, 17),
];
/// Cache rows (the last call ends at 2117).
const CACHE: u64 = 2176;
/// `quick`: calls within this many rows, a smaller cache and 8 heads.
const QUICK_ROWS: u64 = 200;
const QUICK_CACHE: u64 = 256;
/// Key positions of the spiky data, and how far each scores above the
/// rest: every key dim is `SPIKES[i].1` there (queries are in [0, 1)).
const SPIKES: [(u64, f32); 4] = [(70, 1.0), (130, 2.0), (700, 3.0), (1900, 5.0)];
/// Prompts timed (at position 0).
const TIMED_ROWS: u64 = 512;
/// Rows the prefill kernels take (`PREFILL_MIN_SEQ`).
const PREFILL_MIN_ROWS: u64 = 9;

/// One attention shape and what runs it.
#[derive(Clone, Copy, Debug)]
struct Case {
    dtype: DType,
    hq: u64,
    hkv: u64,
    d: u64,
    rope: bool,
    spiky: bool,
}

impl Case {
    fn name(&self) -> String {
        let dtype = if self.dtype == DType::F16 { "f16" } else { "f32 q, f16 kv" };
        format!(
            "{dtype} Hq {} Hkv {} D {}{}{}",
            self.hq,
            self.hkv,
            self.d,
            if self.rope { " rope" } else { "" },
            if self.spiky { " spiky" } else { "" }
        )
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "quick");
    let mut stdout = std::io::stdout().lock();
    if args.first().is_some_and(|a| a == "dump") {
        let failed = files::run_dump(&mut stdout, &args[1..]);
        std::process::exit(i32::from(failed > 0));
    }
    if args.first().is_some_and(|a| a == "raw") {
        let failed = files::run_raw(&mut stdout, &args[1..]);
        if failed > 0 {
            let _ = stdout.flush();
            eprintln!("attention_probe: {failed} raw calls FAIL");
            std::process::exit(1);
        }
        return;
    }
    if args.first().is_some_and(|a| a == "time") {
        let failed = files::run_time(&mut stdout, &args[1..]);
        if failed > 0 {
            let _ = stdout.flush();
            eprintln!("attention_probe: {failed} timed calls FAIL");
            std::process::exit(1);
        }
        return;
    }
    if args.iter().any(|a| a == "emulate") {
        let failed = run_emulated(&mut stdout);
        if failed > 0 {
            let _ = stdout.flush();
            eprintln!("attention_probe: {failed} emulated cases FAIL");
            std::process::exit(1);
        }
        return;
    }
    let coop = Runtime::new().is_ok_and(|rt| rt.gemm_caps().coop_matrix_f16);
    let open = |coop_matrix| {
        Runtime::with_options(&RuntimeOptions {
            coop_matrix,
            precision: Precision::F16,
            coop_attention_off: false,
            ..RuntimeOptions::default()
        })
    };
    let rt = match open(coop.then_some(true)) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("attention_probe: no runtime: {e}");
            std::process::exit(1);
        }
    };
    // The tiled kernel on the same device, for the timings.
    let tiled = if coop { open(Some(false)).ok() } else { None };
    let info = rt.adapter_info();
    let _ = writeln!(
        stdout,
        "attention_probe: {} ({:?}), cooperative matrices {}, precision F16, tolerance {TOLERANCE:.0e} of the output \
         scale{}",
        info.name,
        info.backend,
        if coop { "on (required)" } else { "off: the tiled route only" },
        if quick { ", quick" } else { "" }
    );
    let mut forms_failed = 0;
    if coop {
        let _ = writeln!(stdout, "\ncooperative-matrix forms, one 16 x 16 x 16 product each:");
        forms_failed = primitives::run(&rt, &mut stdout);
    }
    if args.iter().any(|a| a == "primitives") {
        if !coop {
            eprintln!("attention_probe: the device has no cooperative matrices: no forms to check");
        }
        let _ = stdout.flush();
        std::process::exit(i32::from(!coop || forms_failed > 0));
    }
    let f16 = rt.features().contains(&"shader-f16");
    if !f16 {
        eprintln!("attention_probe: the device has no shader-f16, so no float16 caches: nothing to check");
        std::process::exit(1);
    }
    let mut cases = Vec::new();
    for dtype in [DType::F32, DType::F16] {
        let (hq, hkv) = if quick { (8, 2) } else { (32, 8) };
        for spiky in [false, true] {
            cases.push(Case { dtype, hq, hkv, d: 64, rope: false, spiky });
        }
        cases.push(Case { dtype, hq: hq / 2, hkv: hkv / 2, d: 128, rope: false, spiky: true });
        cases.push(Case { dtype, hq, hkv, d: 64, rope: true, spiky: false });
    }
    let (mut total, mut failed) = (0, 0);
    for case in cases {
        let (t, f) = run_case(&mut stdout, &rt, tiled.as_ref(), case, coop, quick);
        total += t;
        failed += f;
    }
    let _ = writeln!(stdout, "attention_probe: {} of {total} calls PASS", total - failed);
    if forms_failed > 0 {
        let _ = writeln!(stdout, "attention_probe: {forms_failed} cooperative-matrix forms FAIL");
    }
    if failed > 0 || forms_failed > 0 {
        let _ = stdout.flush();
        eprintln!("attention_probe: {failed} calls FAIL");
        std::process::exit(1);
    }
}

/// Uniform values in `[lo, hi)` (xorshift32).
fn values(n: usize, seed: u32, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            lo + (hi - lo) * (s >> 8) as f32 / (1u32 << 24) as f32
        })
        .collect()
}

fn to_f16(x: f32) -> f32 {
    half::f16::from_f32(x).to_f32()
}

fn bytes(dtype: DType, v: &[f32]) -> Vec<u8> {
    if dtype == DType::F16 {
        v.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect()
    } else {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
}

/// Llama's rotation tables `[cache, d / 2]`: angle `t * 10000^(-2j / d)`.
fn tables(cache: u64, d: u64) -> (Vec<f32>, Vec<f32>) {
    let angle = |t: u64, j: u64| t as f64 * 10000f64.powf(-2.0 * j as f64 / d as f64);
    let mut cos = Vec::new();
    let mut sin = Vec::new();
    for t in 0..cache {
        for j in 0..d / 2 {
            cos.push(angle(t, j).cos() as f32);
            sin.push(angle(t, j).sin() as f32);
        }
    }
    (cos, sin)
}

/// The program: `sdpa_with_kv_cache(q, k, v, caches, pos[0], ...)` with
/// q/k/v and `pos` as inputs, zero caches of `cache` rows (float32 in a
/// float32 program: the load stores them as float16), q/k/v/out `dtype`
/// on the device and float32 at the method's edges; with `rope`, q and k
/// rotated first by tables sliced at the position.
fn graph(c: Case, cache: u64, max_s: u64) -> GraphBuilder {
    let (hq, hkv, d) = (c.hq, c.hkv, c.d);
    let mut g = GraphBuilder::new();
    let q = g.tensor_staged(c.dtype, DType::F32, &[1, max_s, hq, d]);
    let k = g.tensor_staged(c.dtype, DType::F32, &[1, max_s, hkv, d]);
    let v = g.tensor_staged(c.dtype, DType::F32, &[1, max_s, hkv, d]);
    let pos = g.tensor_staged(DType::I32, DType::I64, &[1]);
    let elem_bytes = if c.dtype == DType::F16 { 2 } else { 4 };
    let zeros = vec![0u8; (cache * hkv * d * elem_bytes) as usize];
    let k_cache = g.constant(c.dtype, &[1, cache, hkv, d], &zeros);
    let v_cache = g.constant(c.dtype, &[1, cache, hkv, d], &zeros);
    let (zero, one, causal, null) = (g.int(0), g.int(1), g.bool(true), g.null());
    let start = g.sym_int();
    let out = g.tensor_staged(c.dtype, DType::F32, &[1, max_s, hq, d]);
    g.op("et_vk.select_as_symint.default", &[pos, zero, zero, start]);
    let (q_in, k_in) = if c.rope {
        let (cos_v, sin_v) = tables(cache, d);
        let cos_t = g.constant(c.dtype, &[cache, d / 2], &bytes(c.dtype, &cos_v));
        let sin_t = g.constant(c.dtype, &[cache, d / 2], &bytes(c.dtype, &sin_v));
        let (q_rot, k_rot) = (g.tensor(c.dtype, &[1, max_s, hq, d]), g.tensor(c.dtype, &[1, max_s, hkv, d]));
        let (cos, sin) = (g.tensor(c.dtype, &[max_s, d / 2]), g.tensor(c.dtype, &[max_s, d / 2]));
        let rotated = g.value_list(&[q_rot, k_rot]);
        let (seq, end) = (g.sym_int(), g.sym_int());
        g.op("sym_size.int", &[q, one, seq])
            .op("add", &[start, seq, end])
            .op("aten.slice_copy.Tensor", &[cos_t, zero, start, end, one, cos])
            .op("aten.slice_copy.Tensor", &[sin_t, zero, start, end, one, sin])
            .op("et_vk.apply_rotary_emb.default", &[q, k, cos, sin, rotated]);
        (q_rot, k_rot)
    } else {
        (q, k)
    };
    g.op("sdpa_with_kv_cache.default", &[q_in, k_in, v, k_cache, v_cache, start, one, null, zero, causal, null, out]);
    g.inputs(&[q, k, v, pos]).outputs(&[out]);
    g
}

/// Rotates `x` (`[s, heads, d]`, rows at positions `start ..`) in place
/// as `et_vk.apply_rotary_emb` does.
fn rotate(x: &mut [f32], start: u64, heads: u64, d: u64, (cos, sin): &(Vec<f32>, Vec<f32>)) {
    let (heads, d, half) = (heads as usize, d as usize, d as usize / 2);
    for (row, chunk) in x.chunks_mut(heads * d).enumerate() {
        let t = start as usize + row;
        for head in chunk.chunks_mut(d) {
            for j in 0..half {
                let (c, s) = (f64::from(cos[t * half + j]), f64::from(sin[t * half + j]));
                let (re, im) = (f64::from(head[2 * j]), f64::from(head[2 * j + 1]));
                head[2 * j] = (re * c - im * s) as f32;
                head[2 * j + 1] = (re * s + im * c) as f32;
            }
        }
    }
}

/// The reference of query row `i` (position `start + i`) of head `h`:
/// softmax over the cache rows `0..=start + i` in f64.
fn reference(c: Case, q: &[f32], caches: &(Vec<f32>, Vec<f32>), start: usize, i: usize, h: usize) -> Vec<f64> {
    let (hq, hkv, d) = (c.hq as usize, c.hkv as usize, c.d as usize);
    let kvh = h / (hq / hkv);
    let scale = 1.0 / (d as f64).sqrt();
    let qb = (i * hq + h) * d;
    let scores: Vec<f64> = (0..=start + i)
        .map(|key| {
            let kb = (key * hkv + kvh) * d;
            (0..d).map(|j| f64::from(q[qb + j]) * f64::from(caches.0[kb + j])).sum::<f64>() * scale
        })
        .collect();
    let m = scores.iter().copied().fold(f64::MIN, f64::max);
    let weights: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
    let sum: f64 = weights.iter().sum();
    (0..d)
        .map(|j| {
            weights.iter().enumerate().map(|(key, w)| w * f64::from(caches.1[(key * hkv + kvh) * d + j])).sum::<f64>()
                / sum
        })
        .collect()
}

/// Emulated runs (`emulated.rs`): (S, start_pos) with uniform or spiky
/// data, for each variant and (Hq, Hkv, D); returns the failures.
fn run_emulated(stdout: &mut impl Write) -> usize {
    let rt = match Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            let _ = writeln!(stdout, "emulate: FAIL no runtime ({e})");
            return 1;
        }
    };
    let _ = writeln!(stdout, "emulated sdpa_prefill_coop on {}, tolerance {TOLERANCE:.0e}", rt.adapter_info().name);
    let _ = writeln!(stdout, "  workgroup memory: {} bytes", rt.device().limits().max_compute_workgroup_storage_size);
    let mut pipelines = emulated::Pipelines::new();
    let mut failed = 0;
    for (id, dtype) in [
        (etwgpu_kernels::ShaderId::SdpaPrefillCoopF32Kvf16, DType::F32),
        (etwgpu_kernels::ShaderId::SdpaPrefillCoopF16, DType::F16),
    ] {
        let shapes = [(4u64, 1u64, 64u64), (2, 2, 128), (3, 1, 80)];
        failed += check_kernel(stdout, &rt, &mut pipelines, &|| emulated::Kernel::Emulated(id), dtype, &shapes);
    }
    failed
}

/// The queries, keys and values of a call of `s` rows at `start` on
/// `c`'s shape (keys and values as the f16 cache holds them, queries as
/// `c`'s dtype does; spiky keys where `c` asks), the same for every kernel
/// run on that call.
fn call_data(c: Case, s: u64, start: u64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (su, st, row) = (s as usize, start as usize, (c.hkv * c.d) as usize);
    let seed = (s * 31 + start) as u32 + if c.spiky { 5 } else { 0 };
    let mut q = values(su * (c.hq * c.d) as usize, seed, if c.spiky { 0.0 } else { -1.0 }, 1.0);
    if c.dtype == DType::F16 {
        q = q.into_iter().map(to_f16).collect();
    }
    let mut k: Vec<f32> = values((st + su) * row, seed + 1, -1.0, 1.0).into_iter().map(to_f16).collect();
    let v: Vec<f32> = values((st + su) * row, seed + 2, -1.0, 1.0).into_iter().map(to_f16).collect();
    if c.spiky {
        for &(at, height) in &SPIKES {
            if (at as usize) < st + su {
                k[at as usize * row..(at as usize + 1) * row].fill(height);
            }
        }
    }
    (q, k, v)
}

/// Runs `kernel` on the emulation's calls at each (query heads, kv heads,
/// head dim) of `shapes` against the f64 reference; returns the failures.
fn check_kernel<'a>(
    stdout: &mut impl Write,
    rt: &Runtime,
    pipelines: &mut emulated::Pipelines,
    kernel: &dyn Fn() -> emulated::Kernel<'a>,
    dtype: DType,
    shapes: &[(u64, u64, u64)],
) -> usize {
    let calls: [(u64, u64, bool); 6] =
        [(9, 0, false), (64, 0, false), (150, 0, true), (100, 37, true), (17, 200, false), (70, 61, true)];
    let mut failed = 0;
    for &(hq, hkv, d) in shapes {
        for &(s, start, spiky) in &calls {
            let c = Case { dtype, hq, hkv, d, rope: false, spiky };
            let (su, st, hq_u) = (s as usize, start as usize, hq as usize);
            let (q, k, v) = call_data(c, s, start);
            let f16_q = dtype == DType::F16;
            let dispatch = emulated::Dispatch { kernel: kernel(), f16_q, s, start, hq, hkv, d, q: &q, k: &k, v: &v };
            let got = emulated::run(rt, pipelines, &dispatch);
            let caches = (k, v);
            let (mut err, mut scale) = (0f64, 0f64);
            for i in 0..su {
                for h in 0..hq_u {
                    let want = reference(c, &q, &caches, st, i, h);
                    for (j, w) in want.iter().enumerate() {
                        let g = f64::from(got[(i * hq_u + h) * d as usize + j]);
                        err = err.max(if g.is_finite() { (g - w).abs() } else { f64::INFINITY });
                        scale = scale.max(w.abs());
                    }
                }
            }
            let err = err / scale.max(1e-30);
            let pass = err <= TOLERANCE;
            failed += usize::from(!pass);
            let _ = writeln!(
                stdout,
                "  {} {} S {s:>3} at {start:>3}: err {err:.1e}",
                if pass { "PASS" } else { "FAIL" },
                c.name()
            );
        }
    }
    failed
}

/// Loads `case` and runs its calls; returns (calls, failures).
fn run_case(
    stdout: &mut impl Write,
    rt: &Runtime,
    tiled: Option<&Runtime>,
    c: Case,
    coop: bool,
    quick: bool,
) -> (usize, usize) {
    let cache = if quick { QUICK_CACHE } else { CACHE };
    let calls: Vec<(u64, u64)> = CALLS.iter().copied().filter(|&(p, s)| !quick || p + s <= QUICK_ROWS).collect();
    let max_s = calls.iter().map(|&(_, s)| s).max().expect("calls");
    let program = match Program::from_bytes(ProgramBuilder::single_delegate(graph(c, cache, max_s)).to_bytes()) {
        Ok(p) => p,
        Err(e) => {
            let _ = writeln!(stdout, "  FAIL {}: the built program does not parse: {e}", c.name());
            return (1, 1);
        }
    };
    let options =
        LoadOptions { precision: Some(Precision::F16), kv_cache_f16: c.dtype == DType::F32, ..LoadOptions::default() };
    let load = |rt: &Runtime| -> Result<LoadedMethod, String> {
        let mut m = rt.load_with(&program, "forward", &options).map_err(|e| format!("load: {e}"))?;
        if !m.kv_cache_f16() && c.dtype == DType::F32 {
            return Err("the caches are not stored as float16".into());
        }
        m.set_profiling(true);
        m.set_profile_mode(ProfileMode::ByKernel);
        Ok(m)
    };
    let mut method = match load(rt) {
        Ok(m) => m,
        Err(e) => {
            let _ = writeln!(stdout, "  FAIL {}: {e}", c.name());
            return (1, 1);
        }
    };
    let mut baseline = tiled.and_then(|t| load(t).ok());
    let _ = writeln!(stdout, "\n{}:", c.name());
    let (hq, hkv, d) = (c.hq as usize, c.hkv as usize, c.d as usize);
    let rope_tables = c.rope.then(|| tables(cache, c.d));
    // The caches as the program holds them (float16 either way).
    let mut caches = (vec![0f32; cache as usize * hkv * d], vec![0f32; cache as usize * hkv * d]);
    let mut failed = 0;
    for (n, &(start, s)) in calls.iter().enumerate() {
        let (su, st) = (s as usize, start as usize);
        let seed = 1000 * n as u32 + if c.spiky { 7 } else { 0 };
        let q_lo = if c.spiky { 0.0 } else { -1.0 };
        let q = values(su * hq * d, seed, q_lo, 1.0);
        let mut k = values(su * hkv * d, seed + 1, -1.0, 1.0);
        let v = values(su * hkv * d, seed + 2, -1.0, 1.0);
        if c.spiky {
            for &(at, height) in &SPIKES {
                if (start..start + s).contains(&at) {
                    let row = (at - start) as usize * hkv * d;
                    k[row..row + hkv * d].fill(height);
                }
            }
        }
        let inputs = [
            Tensor::from_f32(&[1, s, c.hq, c.d], &q),
            Tensor::from_f32(&[1, s, c.hkv, c.d], &k),
            Tensor::from_f32(&[1, s, c.hkv, c.d], &v),
            Tensor::new(DType::I64, vec![1], (start as i64).to_le_bytes().to_vec()).expect("position"),
        ];
        // What the program holds: float16 inputs in a float16 program, the
        // rotation of the held values, the caches' float16 rows.
        let held = |x: &[f32]| -> Vec<f32> {
            if c.dtype == DType::F16 { x.iter().copied().map(to_f16).collect() } else { x.to_vec() }
        };
        let (mut qh, mut kh, vh) = (held(&q), held(&k), held(&v));
        if let Some(t) = &rope_tables {
            rotate(&mut qh, start, c.hq, c.d, t);
            rotate(&mut kh, start, c.hkv, c.d, t);
            qh = held(&qh);
        }
        let row = hkv * d;
        for (cache_rows, new) in [(&mut caches.0, &kh), (&mut caches.1, &vh)] {
            for (slot, x) in cache_rows[st * row..(st + su) * row].iter_mut().zip(new.iter()) {
                *slot = to_f16(*x);
            }
        }
        let label = format!("S {s:>4} at {start:>4}");
        let got = match method.run(&inputs) {
            Ok(outs) => outs[0].to_f64_vec(),
            Err(e) => {
                let _ = writeln!(stdout, "  FAIL {label}: run: {e}");
                failed += 1;
                continue;
            }
        };
        if got.len() != su * hq * d {
            let _ = writeln!(stdout, "  FAIL {label}: {} outputs, want {}", got.len(), su * hq * d);
            failed += 1;
            continue;
        }
        let mut rng = seed | 1;
        let mut rows: Vec<usize> = vec![0, su - 1, 63.min(su - 1), 64.min(su - 1)];
        rows.extend((0..SAMPLED_ROWS).map(|_| {
            rng ^= rng << 13;
            rng ^= rng >> 17;
            rng ^= rng << 5;
            rng as usize % su
        }));
        rows.sort_unstable();
        rows.dedup();
        let (mut err, mut scale) = (0f64, 0f64);
        for &i in &rows {
            for h in 0..hq {
                let want = reference(c, &qh, &caches, st, i, h);
                for (j, w) in want.iter().enumerate() {
                    let g = got[(i * hq + h) * d + j];
                    err = err.max(if g.is_finite() { (g - w).abs() } else { f64::INFINITY });
                    scale = scale.max(w.abs());
                }
            }
        }
        let err = err / scale.max(1e-30);
        let profile = method.profile();
        let kernels: Vec<&str> = profile.iter().flat_map(|p| p.kernels.iter().map(String::as_str)).collect();
        let attention = kernels.iter().copied().filter(|k| k.starts_with("sdpa")).collect::<Vec<_>>().join(" ");
        let want_coop = coop && s >= PREFILL_MIN_ROWS;
        let route_ok = !want_coop || kernels.iter().any(|k| k.starts_with("sdpa_prefill_coop."));
        let pass = err <= TOLERANCE && route_ok;
        failed += usize::from(!pass);
        let _ = write!(
            stdout,
            "  {} {label} err {err:.1e}  {attention}{}",
            if pass { "PASS" } else { "FAIL" },
            if route_ok { "" } else { "  (want sdpa_prefill_coop)" }
        );
        if start == 0 && s >= TIMED_ROWS {
            let flop = 4.0 * (hq * d) as f64 * (1..=su).map(|r| (st + r) as f64).sum::<f64>();
            let time = |m: &LoadedMethod| -> f64 {
                m.profile().iter().filter(|p| p.kernels.iter().any(|k| k.starts_with("sdpa"))).map(|p| p.nanos).sum()
            };
            let ns = time(&method);
            let _ = write!(stdout, "  attention op {:.3} ms, {:.1} TFLOP/s", ns * 1e-6, flop / ns * 1e-3);
            if let Some(b) = baseline.as_mut()
                && b.run(&inputs).is_ok()
            {
                let bns = time(b);
                let _ = write!(stdout, "; tiled {:.3} ms, {:.1} TFLOP/s", bns * 1e-6, flop / bns * 1e-3);
            }
        }
        let _ = writeln!(stdout);
    }
    (calls.len(), failed)
}
