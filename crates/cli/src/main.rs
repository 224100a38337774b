//! The `etwgpu` command-line tool.
//!
//! ```text
//! etwgpu inspect MODEL.pte [--ptd FILE]... [--json | --plan [--no-fuse]]
//! etwgpu run MODEL.pte [--method NAME] [--ptd FILE]... (--call A.npy,B.npy | --input A.npy | --random-inputs)
//!            [--output-dir DIR] [--repeat N] [--profile [--json] [--profile-by dispatch|kernel]] [--no-fuse]
//!            [--precision f32|mixed|f16] [--trusted-shaders] [--int8-activations]
//! etwgpu generate --model MODEL.pte (--tokenizer T.json --prompt TEXT [--chat] [--system TEXT] | --tokens ID,ID,...)
//!                 [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--kv-cache f16|f32]
//!                 [--precision f32|mixed|f16] [--trusted-shaders] [--int8-activations]
//! etwgpu chat --model MODEL.pte --tokenizer T.json [--system TEXT] [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]
//!             [--kv-cache f16|f32] [--precision f32|mixed|f16] [--trusted-shaders] [--int8-activations]
//! etwgpu devices [--json] [--bandwidth]
//! etwgpu bench MODEL.pte [-p 128,512] [-n 128] [-d 0,2048] [--repeats N] [-o md|csv|json] [--input IN.npy]...
//!              [--precision f32|mixed|f16] [--trusted-shaders] [--int8-activations]
//! etwgpu serve --model MODEL.pte --tokenizer T.json [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--queue N]
//!              [--max-tokens N] [--model-name NAME] [--shutdown-grace S] [--kv-cache f16|f32]
//!              [--precision f32|mixed|f16] [--trusted-shaders] [--int8-activations]
//! etwgpu completions bash|zsh|fish
//! ```
//!
//! Flags are read by clap (`--help` on every command).
//!
//! Errors print one line on stderr and exit with status 1; usage errors exit
//! with status 2.

mod bench;
mod chat;
mod generate;
mod inspect;
mod run;
mod serve;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::CommandFactory as _;

/// The command line.
#[derive(Debug, clap::Parser)]
#[command(
    name = "etwgpu",
    about = "Run ExecuTorch programs (Vulkan delegate) on any GPU through wgpu.",
    version,
    after_help = "Examples:
  etwgpu inspect model.pte
  etwgpu run model.pte --input x.npy --output-dir out/
  etwgpu generate --model llama.pte --tokenizer tokenizer.json --prompt \"Hello\"
  etwgpu serve --model smollm2.pte --tokenizer tokenizer.json --port 8080
  etwgpu bench llama.pte -p 128,512 -n 128
Run `etwgpu COMMAND --help` for a command's flags."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The commands.
#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Print a program's methods, delegates, ops and constants (no GPU needed).
    Inspect(InspectCli),
    /// Load a method once, make calls on it and write the outputs.
    Run(run::RunCli),
    /// Generate text (or token ids) with a Llama-family program.
    Generate(generate::GenerateCli),
    /// An interactive ChatML conversation on stdin/stdout.
    Chat(chat::ChatCli),
    /// Measure a program: llama-bench tables for Llama-family programs, latency percentiles for others.
    Bench(bench::BenchCli),
    /// Serve a Llama-family program over an OpenAI-compatible HTTP API.
    Serve(serve::ServeCli),
    /// List the GPU adapters wgpu finds (and measure copy bandwidth).
    Devices(DevicesCli),
    /// Print a shell completion script.
    #[command(after_help = "Examples:
  etwgpu completions bash > /etc/bash_completion.d/etwgpu
  etwgpu completions zsh > ~/.zfunc/_etwgpu
  etwgpu completions fish > ~/.config/fish/completions/etwgpu.fish")]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// The version line: the crate version and the git revision, taken from
/// `ETWGPU_GIT_REV` at build time when the builder set it, else asked of
/// `git` at run time in the source tree this binary was built from (marked
/// so, since that tree may have moved on), else `unknown`. No `build.rs`:
/// the house style has none, and a build script would rerun on every
/// commit for one string.
fn version() -> String {
    let v = env!("CARGO_PKG_VERSION");
    if let Some(rev) = option_env!("ETWGPU_GIT_REV").filter(|r| !r.is_empty()) {
        return format!("{v} ({rev})");
    }
    let git = std::process::Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "--short=12", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output();
    match git {
        Ok(o) if o.status.success() => {
            format!("{v} (source tree at {})", String::from_utf8_lossy(&o.stdout).trim())
        }
        _ => format!("{v} (git revision unknown)"),
    }
}

/// A command-line failure: the message and the exit status.
struct Failure {
    message: String,
    status: u8,
}

impl Failure {
    fn usage(message: impl Into<String>) -> Self {
        Self { message: format!("error: {}\n\nFor more information, try '--help'.", message.into()), status: 2 }
    }
    fn error(message: impl std::fmt::Display) -> Self {
        Self { message: format!("error: {message}"), status: 1 }
    }
}

/// An error's message followed by its sources' messages (those it does not
/// already end with), so a one-line report keeps the root cause.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let m = s.to_string();
        if !msg.ends_with(&m) {
            msg.push_str(": ");
            msg.push_str(&m);
        }
        cur = s.source();
    }
    msg
}

/// The flags of `inspect`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  etwgpu inspect model.pte
  etwgpu inspect model.pte --json
  etwgpu inspect model.pte --plan --no-fuse")]
struct InspectCli {
    /// The program (`.pte`).
    model: PathBuf,
    /// External data files (`.ptd`) the program's constants live in.
    #[arg(long = "ptd", value_name = "FILE")]
    ptds: Vec<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Print each delegate's dispatches before and after fusion and its memory plan.
    #[arg(long)]
    plan: bool,
    /// With `--plan`: plan the chains as exported, without fusion.
    #[arg(long)]
    no_fuse: bool,
}

fn inspect(a: InspectCli) -> Result<(), Failure> {
    if a.json && a.plan {
        return Err(Failure::usage("inspect takes --json or --plan, not both"));
    }
    if a.no_fuse && !a.plan {
        return Err(Failure::usage("--no-fuse needs --plan"));
    }
    let program = etwgpu_format::Program::open_with_external(&a.model, &a.ptds)
        .map_err(|e| Failure::error(format!("{}: {e}", a.model.display())))?;
    let out = if a.json {
        let mut s = serde_json::to_string(&inspect::to_json(&program)).map_err(Failure::error)?;
        s.push('\n');
        s
    } else {
        let name = a.model.file_name().map_or_else(|| a.model.display().to_string(), |n| n.to_string_lossy().into());
        if a.plan { inspect::plan_text(&name, &program, !a.no_fuse) } else { inspect::to_text(&name, &program) }
    };
    use std::io::Write as _;
    std::io::stdout().write_all(out.as_bytes()).map_err(Failure::error)
}

/// Loads a [`etwgpu_llm::Generator`], drawing a progress bar on stderr
/// while weights upload and pipelines compile (when stderr is a terminal),
/// then warms its decode path up ([`etwgpu_llm::Generator::warm_up_decode`]:
/// the decode chain's lowering and plan at load, not inside the first
/// reply).
fn load_generator(
    rt: &etwgpu_runtime::Runtime,
    program: &etwgpu_format::Program,
    kv_cache_f16: bool,
    load: LoadFlags,
) -> Result<etwgpu_llm::Generator, Failure> {
    use std::io::{IsTerminal as _, Write as _};
    let start = std::time::Instant::now();
    let tty = std::io::stderr().is_terminal();
    let mut last = None;
    let mut draw = |p: etwgpu_runtime::LoadProgress| {
        let (what, done, total) = match p.stage {
            etwgpu_runtime::LoadStage::Weights => ("weights", p.done >> 20, format!("{} MiB", p.total >> 20)),
            etwgpu_runtime::LoadStage::Pipelines => ("pipelines", p.done, p.total.to_string()),
        };
        let frac = if p.total == 0 { 1.0 } else { p.done as f64 / p.total as f64 };
        let filled = (frac * 30.0) as usize;
        let line = format!("loading {what:9} [{}{}] {done}/{total}", "#".repeat(filled), " ".repeat(30 - filled));
        if tty && last.as_ref() != Some(&line) {
            let _ = write!(std::io::stderr(), "\r{line}");
            last = Some(line);
        }
    };
    let options =
        load.options(etwgpu_runtime::LoadOptions { kv_cache_f16, ..etwgpu_llm::Generator::default_load_options() });
    let mut generator =
        etwgpu_llm::Generator::with_options(rt, program, &options, &mut draw).map_err(Failure::error)?;
    generator.warm_up_decode().map_err(Failure::error)?;
    if tty {
        let _ = writeln!(std::io::stderr(), "\rloaded in {:.2} s{}", start.elapsed().as_secs_f64(), " ".repeat(40));
    }
    Ok(generator)
}

/// `--precision`'s values, as [`etwgpu_runtime::Precision::from_name`]
/// takes them.
fn parse_precision(v: &str) -> Result<etwgpu_runtime::Precision, String> {
    etwgpu_runtime::Precision::from_name(v)
        .ok_or_else(|| format!("takes {}, not {v:?}", etwgpu_runtime::Precision::ACCEPTED))
}

/// `--precision`, `--trusted-shaders` and `--int8-activations`, on every
/// command that loads a program.
#[derive(Debug, Clone, Copy, clap::Args)]
struct LoadFlags {
    /// Which float32 matrix products may round their operands to f16 (with
    /// f32 accumulation) on the GPU's matrix units: `f32` none (float32
    /// everywhere), `mixed` only the 4-bit weight linears and prompt
    /// attention over a float16 KV cache (the default: fast prefill of 4-bit
    /// LLMs; dense float32 products stay float32), `f16` all of them.
    /// Float16 programs use the matrix units at every setting; GPUs without
    /// them compute float32 at every setting. Default: `ETWGPU_PRECISION`,
    /// else mixed.
    #[arg(long, value_name = "f32|mixed|f16", value_parser = parse_precision)]
    precision: Option<etwgpu_runtime::Precision>,
    /// For programs you trust only: create the kernels whose every index
    /// is proven in bounds by the checks on the program's shapes (the
    /// 4-bit GEMV and GEMM, matmul and decode attention kernels) without
    /// the shader's index clamps (wgpu's unchecked path). This drops a
    /// guard against hostile programs reading outside their buffers
    /// (storage buffers stay bounded by the driver's robust buffer
    /// access). Vulkan only, ignored elsewhere. Default:
    /// ETWGPU_TRUSTED_SHADERS=1, else off.
    #[arg(long)]
    trusted_shaders: bool,
    /// Round the input row of one-row 4-bit linears (decode's plain
    /// linears, output head and SwiGLU pair) to int8 per 32 inputs and
    /// take their dot products in integers: faster decode GEMVs, at the
    /// cost of that rounding (as llama.cpp's q8_1 activations; within
    /// 1.5% of the largest output in the tests; SmolLM2-135M 4-bit keeps
    /// PyTorch's top-1 token at 93% of positions, 100% without). Default:
    /// ETWGPU_INT8_ACTIVATIONS=1, else off.
    #[arg(long)]
    int8_activations: bool,
}

impl LoadFlags {
    /// `base` with the flags' choices: `--precision` where given (`None`
    /// takes the runtime's), the trusted path and int8 activations where
    /// asked (absent, the load follows `ETWGPU_TRUSTED_SHADERS` and
    /// `ETWGPU_INT8_ACTIVATIONS`).
    fn options(self, base: etwgpu_runtime::LoadOptions) -> etwgpu_runtime::LoadOptions {
        etwgpu_runtime::LoadOptions {
            precision: self.precision.or(base.precision),
            trusted_shaders: self.trusted_shaders.then_some(true).or(base.trusted_shaders),
            int8_activations: self.int8_activations.then_some(true).or(base.int8_activations),
            ..base
        }
    }
}

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

/// The flags of `devices`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  etwgpu devices
  ETWGPU_ADAPTER=1 etwgpu devices --json --bandwidth")]
struct DevicesCli {
    /// Print JSON (one line per part) instead of text.
    #[arg(long)]
    json: bool,
    /// Also measure the chosen adapter's copy bandwidth.
    #[arg(long)]
    bandwidth: bool,
}

/// `etwgpu devices`: the adapters wgpu finds and the limits that matter.
fn devices(a: DevicesCli) -> Result<(), Failure> {
    use std::fmt::Write as _;
    let (json, bandwidth) = (a.json, a.bandwidth);
    let list = etwgpu_runtime::adapters();
    if list.is_empty() {
        return Err(Failure::error("no GPU adapter found (install a Vulkan driver, e.g. mesa-vulkan-drivers)"));
    }
    let mut out = String::new();
    if json {
        let v: Vec<serde_json::Value> = list
            .iter()
            .map(|a| {
                serde_json::json!({
                    "index": a.index, "name": a.name, "backend": a.backend, "device_type": a.device_type,
                    "driver": a.driver, "default": a.default_choice,
                    "max_storage_binding_bytes": a.max_storage_binding_bytes, "max_buffer_bytes": a.max_buffer_bytes,
                    "max_workgroup_storage_bytes": a.max_workgroup_storage_bytes,
                    "max_invocations_per_workgroup": a.max_invocations_per_workgroup,
                    "max_storage_buffers_per_stage": a.max_storage_buffers_per_stage, "features": a.features,
                })
            })
            .collect();
        out = serde_json::to_string(&v).map_err(Failure::error)? + "\n";
    } else {
        for a in &list {
            let _ = writeln!(
                out,
                "{}: {} ({}, {}){}\n   driver: {}\n   storage binding {}, buffer {}, workgroup memory {} KiB, {} invocations, {} storage buffers/stage\n   features: {}",
                a.index,
                a.name,
                a.backend,
                a.device_type,
                if a.default_choice { "  [default]" } else { "" },
                a.driver,
                mib(a.max_storage_binding_bytes),
                mib(a.max_buffer_bytes),
                a.max_workgroup_storage_bytes / 1024,
                a.max_invocations_per_workgroup,
                a.max_storage_buffers_per_stage,
                if a.features.is_empty() { "none".to_string() } else { a.features.join(", ") },
            );
        }
    }
    if bandwidth {
        // The adapter `Runtime::new` picks; 1 GiB or the largest binding.
        let rt = etwgpu_runtime::Runtime::new().map_err(Failure::error)?;
        let b = rt.copy_bandwidth(1 << 30, 20).map_err(Failure::error)?;
        let timer = if b.gpu_timestamps { "GPU timestamps" } else { "wall time" };
        if json {
            let v = serde_json::json!({
                "adapter": rt.adapter_info().name, "copy_bytes": b.bytes, "seconds": b.seconds,
                "gb_per_s": b.gb_per_s, "gpu_timestamps": b.gpu_timestamps,
            });
            out += &(serde_json::to_string(&v).map_err(Failure::error)? + "\n");
        } else {
            let _ = writeln!(
                out,
                "copy bandwidth on {}: {:.1} GB/s read+write ({} copied in {:.3} ms, median of 20, {timer})",
                rt.adapter_info().name,
                b.gb_per_s,
                mib(b.bytes),
                b.seconds * 1e3
            );
        }
    }
    use std::io::Write as _;
    std::io::stdout().write_all(out.as_bytes()).map_err(Failure::error)
}

fn main() -> ExitCode {
    let version: &'static str = Box::leak(version().into_boxed_str());
    let cli = match Cli::command().version(version).try_get_matches() {
        Ok(m) => <Cli as clap::FromArgMatches>::from_arg_matches(&m).unwrap_or_else(|e| e.exit()),
        // Help and version print and exit 0; usage errors exit 2.
        Err(e) => e.exit(),
    };
    let result = match cli.command {
        Command::Inspect(a) => inspect(a),
        Command::Run(a) => a.into_args().and_then(|a| run::run(&a)).and_then(|report| {
            use std::io::Write as _;
            std::io::stdout().write_all(report.as_bytes()).map_err(Failure::error)
        }),
        Command::Generate(a) => a.into_args().and_then(|a| generate::run(&a)),
        Command::Chat(a) => chat::run(&a.into_args()),
        Command::Bench(a) => bench::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Devices(a) => devices(a),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "etwgpu", &mut std::io::stdout());
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("{}", f.message);
            ExitCode::from(f.status)
        }
    }
}

/// The flags `generate` and `chat` share: the token budget, sampling and
/// the KV cache's storage.
#[derive(Debug, clap::Args)]
struct GenFlags {
    /// The most tokens to generate (default: 128 for generate, 256 per chat reply).
    #[arg(long, value_name = "N")]
    max_tokens: Option<usize>,
    /// Softmax temperature; 0 (the default) is greedy.
    #[arg(long, value_name = "T", default_value_t = 0.0)]
    temperature: f32,
    /// Sample from the K most likely tokens only; 0 keeps all.
    #[arg(long, value_name = "K", default_value_t = 0)]
    top_k: usize,
    /// Sample from the smallest set of tokens whose probability reaches P.
    #[arg(long, value_name = "P", default_value_t = 1.0)]
    top_p: f32,
    /// The sampler's seed.
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// The KV cache's storage: f16 (where the device has SHADER_F16) or f32 (as exported).
    #[arg(long, value_name = "f16|f32", default_value = "f16")]
    kv_cache: KvCache,
    #[command(flatten)]
    load: LoadFlags,
}

/// `--kv-cache`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum KvCache {
    /// Float16 where the device has SHADER_F16.
    F16,
    /// As exported.
    F32,
}

/// [`GenFlags`] with the command's default token budget filled in.
#[derive(Debug)]
struct GenSettings {
    /// `--max-tokens N`.
    max_tokens: usize,
    /// `--temperature`, `--top-k`, `--top-p`, `--seed`.
    sampler: etwgpu_llm::SamplerConfig,
    /// `--kv-cache f16` (the default) or `f32`.
    kv_cache_f16: bool,
    /// `--precision` (`None`: the runtime's) and `--trusted-shaders`.
    load: LoadFlags,
}

impl GenFlags {
    fn with_default_max_tokens(self, max_tokens: usize) -> GenSettings {
        GenSettings {
            max_tokens: self.max_tokens.unwrap_or(max_tokens),
            sampler: etwgpu_llm::SamplerConfig {
                temperature: self.temperature,
                top_k: self.top_k,
                top_p: self.top_p,
                seed: self.seed,
            },
            kv_cache_f16: self.kv_cache == KvCache::F16,
            load: self.load,
        }
    }
}
