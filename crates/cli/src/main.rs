//! The `etwgpu` command-line tool.
//!
//! ```text
//! etwgpu inspect MODEL.pte [--ptd FILE]... [--json | --plan [--no-fuse]]
//! etwgpu run MODEL.pte [--method NAME] [--ptd FILE]... (--call A.npy,B.npy | --input A.npy | --random-inputs)
//!            [--output-dir DIR] [--repeat N] [--profile [--json]] [--no-fuse] [--precision f32|f16]
//! etwgpu generate --model MODEL.pte (--tokenizer T.json --prompt TEXT [--chat] [--system TEXT] | --tokens ID,ID,...)
//!                 [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--kv-cache f16|f32]
//! etwgpu chat --model MODEL.pte --tokenizer T.json [--system TEXT] [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]
//!             [--kv-cache f16|f32]
//! etwgpu devices [--json] [--bandwidth]
//! ```
//!
//! Errors print one line on stderr and exit with status 1; usage errors exit
//! with status 2.

mod chat;
mod generate;
mod inspect;
mod run;

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage:
  etwgpu inspect MODEL.pte [--ptd FILE]... [--json | --plan [--no-fuse]]
  etwgpu run MODEL.pte [--method NAME] [--ptd FILE]... (--call IN0.npy[,IN1.npy...]... | --input IN.npy... | --random-inputs) [--output-dir DIR] [--repeat N] [--profile [--json]] [--no-fuse] [--precision f32|f16]
  etwgpu generate --model MODEL.pte (--tokenizer T.json --prompt TEXT [--chat] [--system TEXT] | --tokens ID,ID,...) [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--kv-cache f16|f32]
  etwgpu chat --model MODEL.pte --tokenizer T.json [--system TEXT] [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--kv-cache f16|f32]
  etwgpu devices [--json] [--bandwidth]";

/// A command-line failure: the message and the exit status.
struct Failure {
    message: String,
    status: u8,
}

impl Failure {
    fn usage(message: impl Into<String>) -> Self {
        Self { message: format!("{}\n{USAGE}", message.into()), status: 2 }
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

/// Options of `inspect`.
struct InspectArgs {
    model: PathBuf,
    ptds: Vec<PathBuf>,
    json: bool,
    /// Print the memory plan of each delegate instead.
    plan: bool,
    /// With `plan`: plan the chains as exported, without fusion.
    no_fuse: bool,
}

fn parse_inspect(args: &[String]) -> Result<InspectArgs, Failure> {
    let mut model = None;
    let mut ptds = Vec::new();
    let mut json = false;
    let mut plan = false;
    let mut no_fuse = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--json" => json = true,
            "--plan" => plan = true,
            "--no-fuse" => no_fuse = true,
            "--ptd" => ptds.push(PathBuf::from(it.next().ok_or_else(|| Failure::usage("--ptd needs a file"))?)),
            flag if flag.starts_with("--") => return Err(Failure::usage(format!("unknown option {flag}"))),
            path if model.is_none() => model = Some(PathBuf::from(path)),
            extra => return Err(Failure::usage(format!("unexpected argument {extra}"))),
        }
    }
    let model = model.ok_or_else(|| Failure::usage("inspect needs a model file"))?;
    if json && plan {
        return Err(Failure::usage("inspect takes --json or --plan, not both"));
    }
    if no_fuse && !plan {
        return Err(Failure::usage("--no-fuse needs --plan"));
    }
    Ok(InspectArgs { model, ptds, json, plan, no_fuse })
}

fn inspect(args: &[String]) -> Result<(), Failure> {
    let a = parse_inspect(args)?;
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
/// while weights upload and pipelines compile (when stderr is a terminal).
fn load_generator(
    rt: &etwgpu_runtime::Runtime,
    program: &etwgpu_format::Program,
    kv_cache_f16: bool,
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
    let options = etwgpu_runtime::LoadOptions { kv_cache_f16, ..etwgpu_llm::Generator::default_load_options() };
    let generator = etwgpu_llm::Generator::with_options(rt, program, &options, &mut draw).map_err(Failure::error)?;
    if tty {
        let _ = writeln!(std::io::stderr(), "\rloaded in {:.2} s{}", start.elapsed().as_secs_f64(), " ".repeat(40));
    }
    Ok(generator)
}

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

/// `etwgpu devices`: the adapters wgpu finds and the limits that matter.
fn devices(args: &[String]) -> Result<(), Failure> {
    use std::fmt::Write as _;
    let mut json = false;
    let mut bandwidth = false;
    for a in args {
        match a.as_str() {
            "--json" => json = true,
            "--bandwidth" => bandwidth = true,
            _ => return Err(Failure::usage(format!("devices takes --json and --bandwidth, not {a}"))),
        }
    }
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
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("inspect") => inspect(&args[1..]),
        Some("run") => run::parse(&args[1..]).and_then(|a| run::run(&a)).and_then(|report| {
            use std::io::Write as _;
            std::io::stdout().write_all(report.as_bytes()).map_err(Failure::error)
        }),
        Some("generate") => generate::parse(&args[1..]).and_then(|a| generate::run(&a)),
        Some("chat") => chat::parse(&args[1..]).and_then(|a| chat::run(&a)),
        Some("devices") => devices(&args[1..]),
        Some("--help" | "-h" | "help") => {
            use std::io::Write as _;
            writeln!(std::io::stdout(), "{USAGE}").map_err(Failure::error)
        }
        Some(other) => Err(Failure::usage(format!("unknown command {other}"))),
        None => Err(Failure::usage("no command given")),
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
#[derive(Debug)]
struct GenFlags {
    /// `--max-tokens N`.
    max_tokens: usize,
    /// `--temperature`, `--top-k`, `--top-p`, `--seed`.
    sampler: etwgpu_llm::SamplerConfig,
    /// `--kv-cache f16` (the default: float16 where the device has
    /// SHADER_F16) or `f32` (as exported).
    kv_cache_f16: bool,
}

impl GenFlags {
    fn new(max_tokens: usize) -> Self {
        Self { max_tokens, sampler: etwgpu_llm::SamplerConfig::default(), kv_cache_f16: true }
    }

    /// Takes `flag` and its value from `rest` when it is one of these
    /// flags; `false` (nothing taken) otherwise.
    fn take(&mut self, flag: &str, rest: &mut std::slice::Iter<'_, String>) -> Result<bool, Failure> {
        fn num<T: std::str::FromStr>(rest: &mut std::slice::Iter<'_, String>, flag: &str) -> Result<T, Failure> {
            let v = flag_value(rest, flag)?;
            v.parse().map_err(|_| Failure::usage(format!("{flag}: {v:?} is not a valid number")))
        }
        match flag {
            "--max-tokens" => self.max_tokens = num(rest, flag)?,
            "--temperature" => self.sampler.temperature = num(rest, flag)?,
            "--top-k" => self.sampler.top_k = num(rest, flag)?,
            "--top-p" => self.sampler.top_p = num(rest, flag)?,
            "--seed" => self.sampler.seed = num(rest, flag)?,
            "--kv-cache" => {
                self.kv_cache_f16 = match flag_value(rest, flag)?.as_str() {
                    "f16" => true,
                    "f32" => false,
                    other => return Err(Failure::usage(format!("--kv-cache takes f16 or f32, not {other:?}"))),
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// The value after `flag`.
fn flag_value(rest: &mut std::slice::Iter<'_, String>, flag: &str) -> Result<String, Failure> {
    rest.next().cloned().ok_or_else(|| Failure::usage(format!("{flag} needs a value")))
}
