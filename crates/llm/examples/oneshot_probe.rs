//! Where a one-shot `etwgpu generate` loses against a warmed `llm_bench`
//! cell: loads a `.pte` as the CLI does (default load options, the decode
//! warm-up), optionally keeps the GPU busy first as `llm_bench` does
//! (`--gpu-warm`), then runs `--repeats` greedy generations of `--max-tokens`
//! from the token ids 1, 2, 3, 4 in the one process, printing for each the
//! decode tokens/s, the host's time per run by stage and the period
//! between tokens (as read back) over the steps: the first ten, the median
//! and the last ten. `--bench-cell` first times `llm_bench`'s decode cell
//! (`bench::time_decode` at depth 16) in the same process; `--raw` first
//! counts the dispatches of a plain one-token call (the method loaded
//! alone, as `llm_bench`'s profiles load it).
//!
//! ```sh
//! cargo build --release -p etwgpu-llm --example oneshot_probe
//! oneshot_probe MODEL.pte [--max-tokens 64] [--repeats 3] [--gpu-warm] [--bench-cell] [--raw]
//! ```

use std::io::Write as _;
use std::time::{Duration, Instant};

use etwgpu_format::Program;
use etwgpu_llm::{GenerateOptions, Generator, Sampler, SamplerConfig};
use etwgpu_runtime::Runtime;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(model) = args.first() else {
        eprintln!("usage: oneshot_probe MODEL.pte [--max-tokens N] [--repeats N] [--gpu-warm] [--bench-cell] [--raw]");
        std::process::exit(2);
    };
    let value = |flag: &str, default: usize| {
        args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).map_or(default, |v| {
            v.parse().unwrap_or_else(|_| {
                eprintln!("oneshot_probe: {flag} takes a number, not {v:?}");
                std::process::exit(2)
            })
        })
    };
    let (max_tokens, repeats) = (value("--max-tokens", 64), value("--repeats", 3));
    let gpu_warm = args.iter().any(|a| a == "--gpu-warm");
    let mut out = std::io::stdout().lock();
    let t0 = Instant::now();
    let rt = Runtime::new().unwrap_or_else(|e| {
        eprintln!("oneshot_probe: no GPU: {e}");
        std::process::exit(1)
    });
    let program = Program::open(model).unwrap_or_else(|e| {
        eprintln!("oneshot_probe: {model}: {e}");
        std::process::exit(1)
    });
    if args.iter().any(|a| a == "--raw") {
        let mut forward = rt.load_with(&program, "forward", &Generator::default_load_options()).expect("forward loads");
        let t = |v: i64, shape: Vec<u64>| {
            etwgpu_runtime::Tensor::new(etwgpu_format::DType::I64, shape, v.to_le_bytes().to_vec()).expect("tensor")
        };
        forward.run(&[t(1, vec![1, 1]), t(0, vec![1])]).expect("runs");
        let _ = writeln!(out, "a plain 1-token call at position 0: {} dispatches", forward.n_dispatches());
    }
    let mut generator = Generator::with_options(&rt, &program, &Generator::default_load_options(), &mut |_| {})
        .expect("the program loads");
    generator.warm_up_decode().expect("the warm-up runs");
    let _ = writeln!(
        out,
        "loaded and warmed up in {:.3} s; the warm-up's last step ran {} dispatches",
        t0.elapsed().as_secs_f64(),
        generator.n_dispatches()
    );
    if gpu_warm {
        etwgpu_llm::bench::warm_up(&mut generator, 512, etwgpu_llm::bench::GPU_WARM_UP).expect("the warm-up runs");
        let _ = writeln!(out, "GPU busy for {:?} (llm_bench's warm-up)", etwgpu_llm::bench::GPU_WARM_UP);
    }
    let options = GenerateOptions { max_new_tokens: max_tokens, stop_tokens: Vec::new(), stop_at_eos: false };
    if args.iter().any(|a| a == "--bench-cell") {
        let run = etwgpu_llm::bench::time_decode(&mut generator, max_tokens, 16).expect("the cell runs");
        let _ = writeln!(
            out,
            "llm_bench's cell (depth 16): decode {:.1} tokens/s, {} dispatches a step",
            run.stats.decode_tokens_per_s(),
            generator.n_dispatches()
        );
    }
    for r in 0..repeats {
        generator.reset();
        generator.reset_run_times();
        let mut greedy = Sampler::new(SamplerConfig::default()).expect("greedy sampler");
        let mut at = Vec::with_capacity(max_tokens);
        let (_, stats) =
            generator.generate(&[1, 2, 3, 4], &options, &mut greedy, |_| at.push(Instant::now())).expect("generates");
        let t = generator.run_times();
        let per = |d: Duration| d.as_secs_f64() * 1e3 / t.runs.max(1) as f64;
        let _ = writeln!(
            out,
            "run {r}: decode {:.1} tokens/s over {} steps, {} dispatches a step; host ms a run: recording {:.3}, \
             submitting {:.3}, waiting {:.3}, lowering {:.3}; plans built {}, host rules {}",
            stats.decode_tokens_per_s(),
            stats.decode_steps,
            generator.n_dispatches(),
            per(t.recording),
            per(t.submitting),
            per(t.waiting),
            per(t.lowering),
            t.plan_builds,
            t.op_lowerings,
        );
        let gaps: Vec<f64> = at.windows(2).map(|w| (w[1] - w[0]).as_secs_f64() * 1e6).collect();
        if gaps.is_empty() {
            continue;
        }
        let mut by_size: Vec<(usize, f64)> = gaps.iter().copied().enumerate().collect();
        by_size.sort_by(|a, b| b.1.total_cmp(&a.1));
        let top: Vec<String> = by_size.iter().take(5).map(|(i, g)| format!("{g:.0} us after token {i}")).collect();
        let _ = writeln!(out, "  longest gaps: {}", top.join(", "));
        let mut sorted = gaps.clone();
        sorted.sort_by(f64::total_cmp);
        let show = |s: &[f64]| s.iter().map(|g| format!("{g:.0}")).collect::<Vec<_>>().join(" ");
        let _ = writeln!(
            out,
            "  us between tokens: first {} | median {:.0} | last {}",
            show(&gaps[..gaps.len().min(10)]),
            sorted[sorted.len() / 2],
            show(&gaps[gaps.len().saturating_sub(10)..])
        );
    }
}
