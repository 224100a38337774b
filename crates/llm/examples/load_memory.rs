//! Peak host memory of loading a program (Linux): how much the weights'
//! way from the file to the GPU costs on top of the file itself.
//!
//! ```text
//! cargo run --release -p etwgpu-llm --example llm_bench -- --model 1b --save /tmp/1b.pte --build-only
//! cargo run --release -p etwgpu-llm --example load_memory -- /tmp/1b.pte
//! ```
//!
//! Prints the file size; the peak and resulting resident set of
//! `Program::open` (the file is read into memory once); then, the
//! high-water mark reset again (`/proc/self/clear_refs`), the peak resident
//! set during `Generator::new` (the load of `forward`: constants converted
//! and written to the device in bounded pieces), the resident set after it,
//! and the bytes of constants uploaded. On a software device (lavapipe) the
//! GPU buffers are host memory too, so the peak counts them: what the load
//! costs on top of the file and the device's own copy is the last figure
//! (staging, pieces in flight, pipelines).

use std::io::Write;

use etwgpu_format::Program;
use etwgpu_llm::Generator;
use etwgpu_runtime::{LoadProgress, LoadStage, Runtime};

/// `VmRSS` and `VmHWM` of this process in MiB.
fn rss() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Resets this process's high-water mark to its resident set; false where
/// the kernel refuses (`VmHWM` then counts from the start).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: load_memory PROGRAM.pte");
        std::process::exit(2)
    };
    let rt = Runtime::new().unwrap_or_else(|e| panic!("no GPU runtime: {e}"));
    let (base, _) = rss();
    let size = std::fs::metadata(&path).map_or(0, |m| m.len()) as f64 / (1 << 20) as f64;
    let reset_open = reset_peak();
    let program = Program::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (opened, open_peak) = rss();
    let reset_load = reset_peak();
    let start = std::time::Instant::now();
    // The weights' bytes on the device: each delegate call's total, taken
    // when its upload completes.
    let mut uploaded = 0u64;
    let mut progress = |p: LoadProgress| {
        if p.stage == LoadStage::Weights && p.done == p.total {
            uploaded += p.total;
        }
    };
    let generator = Generator::with_progress(&rt, &program, &mut progress).unwrap_or_else(|e| panic!("load: {e}"));
    let secs = start.elapsed().as_secs_f64();
    let (after, peak) = rss();
    let uploaded = uploaded as f64 / (1 << 20) as f64;
    let since = |ok: bool| if ok { "" } else { " (since start: clear_refs failed)" };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "device: {} ({:?})", rt.adapter_info().name, rt.adapter_info().device_type);
    let _ = writeln!(
        out,
        "file: {size:.0} MiB; resident before open {base:.0} MiB; open: peak {open_peak:.0} MiB{}, after {opened:.0} MiB",
        since(reset_open)
    );
    let _ = writeln!(
        out,
        "load ({secs:.1} s): peak resident {peak:.0} MiB{}, after {after:.0} MiB; peak over the opened program {:.0} MiB; \
         constants uploaded {uploaded:.0} MiB (host memory too on a CPU device); peak over the opened program and \
         the constants {:.0} MiB",
        since(reset_load),
        peak - opened,
        peak - opened - uploaded
    );
    drop(generator);
    drop(program);
    let (dropped, _) = rss();
    let _ = writeln!(out, "after dropping the generator and the program: resident {dropped:.0} MiB");
}
