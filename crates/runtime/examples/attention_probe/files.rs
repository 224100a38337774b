//! The probe's modes that take kernel variants from files (`raw`, `time`,
//! `dump`): float32-query versions of `sdpa_prefill_coop.wgsl` run as
//! written (emulated on a device without cooperative matrices), for trying
//! a change on the H200 without a build.

use std::io::Write;

use etwgpu_format::DType;
use etwgpu_runtime::Runtime;

use super::{Case, TOLERANCE, call_data, check_kernel, emulated, reference, timestamps, values};

/// The runtime kernels from files run on, and whether they run emulated
/// there (without cooperative matrices, as on lavapipe); `None` (said on
/// `stdout` for `mode`) without a runtime.
fn file_runtime(stdout: &mut impl Write, mode: &str) -> Option<(Runtime, bool)> {
    match Runtime::new() {
        Ok(rt) => {
            let emulate = !rt.gemm_caps().coop_matrix_f16;
            Some((rt, emulate))
        }
        Err(e) => {
            let _ = writeln!(stdout, "{mode}: FAIL no runtime ({e})");
            None
        }
    }
}

/// `attention_probe raw FILE...`: each file a whole float32-query
/// variant of `sdpa_prefill_coop.wgsl` (as `ShaderId::source` gives it:
/// `Elem = f32`, `KvElem = f16`), run as written on a device with
/// cooperative matrices (emulated on one without), checked as the
/// emulation is. For trying a change to the kernel on the H200 without a
/// build.
pub(crate) fn run_raw(stdout: &mut impl Write, files: &[String]) -> usize {
    let Some((rt, emulate)) = file_runtime(stdout, "raw") else { return 1 };
    let mut pipelines = emulated::Pipelines::new();
    let mut failed = 0;
    for file in files {
        let source = match std::fs::read_to_string(file) {
            Ok(s) => s,
            Err(e) => {
                let _ = writeln!(stdout, "raw: FAIL {file}: {e}");
                failed += 1;
                continue;
            }
        };
        let how = if emulate { "emulated" } else { "as written" };
        let _ = writeln!(stdout, "raw {file} on {}, {how}:", rt.adapter_info().name);
        let kernel = || emulated::Kernel::Raw { name: file, source: &source, emulate };
        failed += check_kernel(stdout, &rt, &mut pipelines, &kernel, DType::F32, &[(4, 1, 64), (2, 2, 128)]);
    }
    failed
}

/// Shapes `attention_probe time` runs each file at: (query heads, kv heads,
/// head dim, rows) at position 0; the last only for files that hold head
/// dims past 64 (a name without `_d64`).
const TIMED: &[(u64, u64, u64, u64)] = &[(32, 8, 64, 512), (32, 8, 64, 2048), (16, 4, 128, 2048)];
/// The same where the kernel runs emulated (a CPU adapter): small shapes,
/// to check a variant before a device run.
const TIMED_EMULATED: &[(u64, u64, u64, u64)] = &[(4, 1, 64, 130), (2, 1, 128, 130)];
/// Timed rounds per shape (each file one pass a round), and dispatches a
/// pass.
const TIMED_ROUNDS: usize = 7;
const TIMED_REPS: u32 = 8;
/// How long the files' passes run untimed first, so the GPU's clocks are
/// up (a GPU that was idle runs its first work at low clocks).
const TIMED_WARM_UP: std::time::Duration = std::time::Duration::from_millis(400);

/// `attention_probe time FILE...`: each file a whole float32-query variant
/// of `sdpa_prefill_coop.wgsl` (as `raw` takes them), run at the
/// Llama-3.2-1B attention shapes of [`TIMED`] on uniform data: checked
/// at sampled rows (the first, 63, 64, the last and random ones, every
/// head) against the f64 reference, then, per shape, after
/// [`TIMED_WARM_UP`] of untimed passes, [`TIMED_ROUNDS`] rounds in which
/// each file runs one pass of [`TIMED_REPS`] dispatches, all in one
/// submission with GPU timestamps around each pass: the median per file,
/// as ms per dispatch and TFLOP/s of causal attention (4 * heads * D *
/// keys seen, summed over rows). Files named `*_d64*` hold head dims up to
/// 64 only. Emulated (no cooperative matrices) at the small shapes of
/// [`TIMED_EMULATED`], one round of one dispatch. For comparing variants of
/// the kernel on the H200 without a build.
pub(crate) fn run_time(stdout: &mut impl Write, files: &[String]) -> usize {
    let Some((rt, emulate)) = file_runtime(stdout, "time") else { return 1 };
    let device = rt.device();
    let mut pipelines = emulated::Pipelines::new();
    let mut failed = 0;
    let mut sources = Vec::new();
    for file in files {
        match std::fs::read_to_string(file) {
            Ok(s) => sources.push((file.as_str(), s)),
            Err(e) => {
                let _ = writeln!(stdout, "time: FAIL {file}: {e}");
                failed += 1;
            }
        }
    }
    let how = if emulate { "emulated" } else { "as written" };
    let _ = writeln!(stdout, "time: {} files on {}, {how}", sources.len(), rt.adapter_info().name);
    let timestamps = device.features().contains(wgpu::Features::TIMESTAMP_QUERY);
    let (shapes, rounds, reps) = if emulate { (TIMED_EMULATED, 1, 1) } else { (TIMED, TIMED_ROUNDS, TIMED_REPS) };
    for &(hq, hkv, d, s) in shapes {
        let c = Case { dtype: DType::F32, hq, hkv, d, rope: false, spiky: false };
        let (q, k, v) = call_data(c, s, 0);
        let su = s as usize;
        let mut rows = vec![0, 63, 64, su - 1];
        rows.extend(values(8, s as u32, 0.0, 1.0).iter().map(|x| (x * su as f32) as usize % su));
        let want: Vec<Vec<f64>> = rows
            .iter()
            .flat_map(|&i| (0..hq as usize).map(move |h| (i, h)))
            .map(|(i, h)| reference(c, &q, &(k.clone(), v.clone()), 0, i, h))
            .collect();
        let _ = writeln!(stdout, "Hq {hq} Hkv {hkv} D {d} S {s}:");
        let mut timed = Vec::new();
        for (file, source) in &sources {
            let d64_only = std::path::Path::new(file).file_name().is_some_and(|n| n.to_string_lossy().contains("_d64"));
            if d64_only && d > 64 {
                continue;
            }
            let kernel = emulated::Kernel::Raw { name: file, source, emulate };
            let dispatch = emulated::Dispatch { kernel, f16_q: false, s, start: 0, hq, hkv, d, q: &q, k: &k, v: &v };
            let prepared = emulated::prepare(&rt, &mut pipelines, &dispatch);
            let got = prepared.run(&rt);
            let (mut err, mut scale) = (0f64, 0f64);
            for ((i, h), want) in rows.iter().flat_map(|&i| (0..hq as usize).map(move |h| (i, h))).zip(&want) {
                for (j, w) in want.iter().enumerate() {
                    let g = f64::from(got[(i * hq as usize + h) * d as usize + j]);
                    err = err.max(if g.is_finite() { (g - w).abs() } else { f64::INFINITY });
                    scale = scale.max(w.abs());
                }
            }
            let err = err / scale.max(1e-30);
            let pass = err <= TOLERANCE;
            failed += usize::from(!pass);
            let _ = writeln!(stdout, "  {} {file}: err {err:.1e}", if pass { "PASS" } else { "FAIL" });
            timed.push((*file, prepared));
        }
        if !timestamps || timed.is_empty() {
            let _ = writeln!(stdout, "  (no timestamps: not timed)");
            continue;
        }
        // Untimed passes until the clocks are up, then the timed rounds in
        // one submission.
        let warm = std::time::Instant::now();
        while warm.elapsed() < TIMED_WARM_UP {
            let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            for (_, p) in &timed {
                p.record(&mut encoder, reps, None);
            }
            rt.queue().submit([encoder.finish()]);
            let _ = device.poll(wgpu::PollType::wait_indefinitely());
        }
        let passes = (rounds * timed.len()) as u32;
        let queries = timestamps::pass_queries(device, passes);
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        for round in 0..rounds {
            for (j, (_, p)) in timed.iter().enumerate() {
                let at = (round * timed.len() + j) as u32;
                p.record(&mut encoder, reps, Some(timestamps::pass_timestamps(&queries, at)));
            }
        }
        let seconds = timestamps::pass_seconds(device, rt.queue(), encoder, &queries, passes);
        let flop = 4.0 * (hq * d) as f64 * (s * (s + 1) / 2) as f64;
        for (j, (file, _)) in timed.iter().enumerate() {
            let mut t: Vec<f64> = (0..rounds).map(|r| seconds[r * timed.len() + j] / f64::from(reps)).collect();
            t.sort_by(f64::total_cmp);
            let (lo, med, hi) = (t[0], t[t.len() / 2], t[t.len() - 1]);
            let _ = writeln!(
                stdout,
                "  {:.3} ms ({:.3}-{:.3}), {:.1} TFLOP/s  {file}",
                med * 1e3,
                lo * 1e3,
                hi * 1e3,
                flop / med * 1e-12
            );
        }
    }
    failed
}

/// `attention_probe dump FILE...`: one call (64 query rows at position 0,
/// 4 query heads over 1 kv head, head dim 64, the emulation's data) of each
/// file's kernel (float32 queries over f16 caches; run as written, or
/// emulated without cooperative matrices), its output buffer written raw
/// (f32, little-endian) to `$OUT/<file name>.out.bin`, and the call's
/// queries, keys and values to `$OUT/dump.{q,k,v}.bin`. For kernels edited
/// to write a stage (scores, probabilities, ...) into their output, to be
/// compared with numpy.
pub(crate) fn run_dump(stdout: &mut impl Write, files: &[String]) -> usize {
    let Some((rt, emulate)) = file_runtime(stdout, "dump") else { return 1 };
    let dir = std::path::PathBuf::from(std::env::var_os("OUT").unwrap_or_else(|| ".".into()));
    let (s, start, hq, hkv, d) = (64u64, 0u64, 4u64, 1u64, 64u64);
    let (q, k, v) = call_data(Case { dtype: DType::F32, hq, hkv, d, rope: false, spiky: false }, s, start);
    let raw = |x: &[f32]| -> Vec<u8> { x.iter().flat_map(|f| f.to_le_bytes()).collect() };
    let write = |name: String, data: &[f32], stdout: &mut dyn Write| -> usize {
        let path = dir.join(name);
        match std::fs::write(&path, raw(data)) {
            Ok(()) => {
                let _ = writeln!(stdout, "dump: wrote {}", path.display());
                0
            }
            Err(e) => {
                let _ = writeln!(stdout, "dump: FAIL {}: {e}", path.display());
                1
            }
        }
    };
    let mut failed = write("dump.q.bin".into(), &q, stdout);
    failed += write("dump.k.bin".into(), &k, stdout);
    failed += write("dump.v.bin".into(), &v, stdout);
    let mut pipelines = emulated::Pipelines::new();
    for file in files {
        let Ok(source) = std::fs::read_to_string(file) else {
            let _ = writeln!(stdout, "dump: FAIL cannot read {file}");
            failed += 1;
            continue;
        };
        let kernel = emulated::Kernel::Raw { name: file, source: &source, emulate };
        let dispatch = emulated::Dispatch { kernel, f16_q: false, s, start, hq, hkv, d, q: &q, k: &k, v: &v };
        let got = emulated::run(&rt, &mut pipelines, &dispatch);
        let name = std::path::Path::new(file).file_name().map_or("kernel".into(), |n| n.to_string_lossy().to_string());
        failed += write(format!("{name}.out.bin"), &got, stdout);
    }
    failed
}
