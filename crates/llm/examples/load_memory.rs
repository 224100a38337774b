//! Peak host memory of loading a program (Linux): how much the weights'
//! way from the file to the GPU costs on top of the file itself.
//!
//! ```text
//! cargo run --release -p etwgpu-llm --example llm_bench -- --model 1b --save /tmp/1b.pte --build-only
//! cargo run --release -p etwgpu-llm --example load_memory -- /tmp/1b.pte
//! ```
//!
//! Prints the file size, the resident set after `Program::open` (the file
//! is read into memory), then resets the high-water mark
//! (`/proc/self/clear_refs`) and prints the peak resident set during
//! `Generator::new` (the load of `forward`: constants converted and written
//! to the device in bounded pieces) and the resident set after it. On a
//! software device (lavapipe) the GPU buffers are host memory too, so the
//! peak counts them: compare it with the file size plus the device bytes.

use std::io::Write;

use etwgpu_format::Program;
use etwgpu_llm::Generator;
use etwgpu_runtime::Runtime;

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

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: load_memory PROGRAM.pte");
        std::process::exit(2)
    };
    let rt = Runtime::new().unwrap_or_else(|e| panic!("no GPU runtime: {e}"));
    let (base, _) = rss();
    let size = std::fs::metadata(&path).map_or(0, |m| m.len()) as f64 / (1 << 20) as f64;
    let program = Program::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (opened, _) = rss();
    // Reset the high-water mark to the current resident set.
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let start = std::time::Instant::now();
    let generator = Generator::new(&rt, &program).unwrap_or_else(|e| panic!("load: {e}"));
    let secs = start.elapsed().as_secs_f64();
    let (after, peak) = rss();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "device: {}", rt.adapter_info().name);
    let _ = writeln!(out, "file: {size:.0} MiB; resident before open {base:.0} MiB, after open {opened:.0} MiB");
    let _ = writeln!(
        out,
        "load ({secs:.1} s): peak resident {peak:.0} MiB{}, after {after:.0} MiB; peak over the opened program {:.0} MiB",
        if reset { "" } else { " (since start: clear_refs failed)" },
        peak - opened
    );
    drop(generator);
}
