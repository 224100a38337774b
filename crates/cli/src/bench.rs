//! `etwgpu bench`: speed of a program on this machine's GPU. A Llama-family
//! program (one whose metadata methods `Generator` reads) gets
//! `llama-bench`'s grid: prompt processing `ppN` and generation `tgN`, each
//! at every filled depth, over `--repeats` runs (mean ± sd and median, in
//! tokens/s) through `etwgpu_llm::bench`. Any other program gets latency
//! percentiles and throughput of one method over `--repeats` runs, on
//! random or given inputs. Both first print the adapter and its copy
//! bandwidth.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use etwgpu_format::Program;
use etwgpu_llm::bench::{Row, Summary, llama_bench, percentile};
use etwgpu_runtime::{LoadOptions, Runtime, Tensor};

use crate::{Failure, error_chain};

/// How the results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// A markdown table.
    Md,
    /// CSV with a header line.
    Csv,
    /// One JSON object.
    Json,
}

/// The flags of `bench`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  etwgpu bench smollm2_q4.pte -p 512 -n 128
  etwgpu bench llama.pte -p 128,512 -n 128 -d 0,2048 --repeats 5 -o csv
  etwgpu bench model.pte --repeats 50            (any program: latency p50/p90/p99)
  etwgpu bench model.pte --input x.npy -o json")]
pub struct BenchCli {
    /// The program (`.pte`).
    model: PathBuf,
    /// Llama-family: prompt sizes to time (`ppN` rows).
    #[arg(short = 'p', long = "n-prompt", value_name = "N,N,...", value_delimiter = ',', default_value = "512")]
    prompts: Vec<usize>,
    /// Llama-family: generated token counts to time (`tgN` rows).
    #[arg(short = 'n', long = "n-gen", value_name = "N,N,...", value_delimiter = ',', default_value = "128")]
    gens: Vec<usize>,
    /// Llama-family: tokens already in the KV cache before each test.
    #[arg(short = 'd', long = "n-depth", value_name = "N,N,...", value_delimiter = ',', default_value = "0")]
    depths: Vec<usize>,
    /// Timed runs per row (after one warm-up run).
    #[arg(short = 'r', long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    repeats: u64,
    /// Output format.
    #[arg(short = 'o', long, value_name = "md|csv|json", default_value = "md")]
    output: Output,
    /// Other programs: the method to run (default `forward`).
    #[arg(long, value_name = "NAME")]
    method: Option<String>,
    /// Other programs: an input (`.npy`, repeat in order); random inputs of the method's shapes otherwise.
    #[arg(long = "input", value_name = "IN.npy")]
    inputs: Vec<PathBuf>,
    /// Llama-family: the KV cache's storage.
    #[arg(long, value_name = "f16|f32", default_value = "f16")]
    kv_cache: crate::KvCache,
    #[command(flatten)]
    load: crate::LoadFlags,
    /// MiB copied to measure the adapter's copy bandwidth (0 skips it).
    #[arg(long, value_name = "MIB", default_value_t = 256)]
    bandwidth_mib: u64,
}

/// The adapter line and copy bandwidth (or why not), with the GEMM route
/// and the precision the loads take.
struct Device {
    name: String,
    backend: String,
    bandwidth: Option<etwgpu_runtime::Bandwidth>,
    /// `Runtime::gemm_route`.
    gemm_route: &'static str,
    /// `--precision`, else the runtime's.
    precision: etwgpu_runtime::Precision,
    /// Whether the loads take the trusted path (`--trusted-shaders` or
    /// `ETWGPU_TRUSTED_SHADERS=1`, on Vulkan: [`Runtime::trusts`]).
    trusted_shaders: bool,
}

fn device(rt: &Runtime, mib: u64, load: crate::LoadFlags) -> Result<Device, Failure> {
    let info = rt.adapter_info();
    let bandwidth = if mib == 0 {
        None
    } else {
        Some(rt.copy_bandwidth(mib << 20, 10).map_err(|e| Failure::error(error_chain(&e)))?)
    };
    Ok(Device {
        name: info.name.clone(),
        backend: format!("{:?}", info.backend),
        bandwidth,
        gemm_route: rt.gemm_route(),
        precision: load.precision.unwrap_or(rt.gemm_caps().precision),
        trusted_shaders: rt.trusts(&load.options(LoadOptions::default())),
    })
}

impl Device {
    fn line(&self) -> String {
        let trusted = if self.trusted_shaders { ", trusted shaders" } else { "" };
        let gemm = format!("GEMM route {}, precision {}{trusted}", self.gemm_route, self.precision);
        match &self.bandwidth {
            Some(b) => format!(
                "adapter: {} ({}); copy bandwidth {:.1} GB/s ({} MiB, {}); {gemm}",
                self.name,
                self.backend,
                b.gb_per_s,
                b.bytes >> 20,
                if b.gpu_timestamps { "GPU timestamps" } else { "wall time" }
            ),
            None => format!("adapter: {} ({}); {gemm}", self.name, self.backend),
        }
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "adapter": self.name, "backend": self.backend,
            "copy_gb_per_s": self.bandwidth.as_ref().map(|b| b.gb_per_s),
            "copy_bytes": self.bandwidth.as_ref().map(|b| b.bytes),
            "gemm_route": self.gemm_route, "precision": self.precision.name(),
            "trusted_shaders": self.trusted_shaders,
        })
    }
}

/// Runs `bench`, printing the results on stdout.
pub fn run(a: BenchCli) -> Result<(), Failure> {
    if a.prompts.contains(&0) || a.gens.contains(&0) {
        return Err(Failure::usage("-p and -n take positive token counts"));
    }
    let program = Program::open(&a.model).map_err(|e| Failure::error(format!("{}: {e}", a.model.display())))?;
    let rt = Runtime::new().map_err(|e| Failure::error(error_chain(&e)))?;
    let dev = device(&rt, a.bandwidth_mib, a.load)?;
    let out = match etwgpu_llm::Metadata::read(&program) {
        Ok(meta) if a.inputs.is_empty() && a.method.is_none() => {
            fits_context(&a, meta.max_context_len)?;
            llm(&a, &rt, &program, &dev)?
        }
        _ => method(&a, &rt, &program, &dev)?,
    };
    std::io::stdout().write_all(out.as_bytes()).map_err(Failure::error)
}

/// Every row's depth plus its tokens (plus the one token a `tgN` row feeds
/// first) must fit the context: checked before loading, naming the flags.
fn fits_context(a: &BenchCli, context: usize) -> Result<(), Failure> {
    let depth = a.depths.iter().copied().max().unwrap_or(0);
    let rows = a
        .prompts
        .iter()
        .map(|&p| (format!("pp{p} (-p {p})"), p))
        .chain(a.gens.iter().map(|&g| (format!("tg{g} (-n {g})"), g + 1)));
    for (row, need) in rows {
        if depth + need > context {
            return Err(Failure::error(format!(
                "{row} at depth {depth} needs {} tokens of context; {} holds {context}",
                depth + need,
                model_name(a)
            )));
        }
    }
    Ok(())
}

fn model_name(a: &BenchCli) -> String {
    a.model.file_name().map_or_else(|| a.model.display().to_string(), |n| n.to_string_lossy().into())
}

/// The `llama-bench` grid.
fn llm(a: &BenchCli, rt: &Runtime, program: &Program, dev: &Device) -> Result<String, Failure> {
    let generator = crate::load_generator(rt, program, a.kv_cache == crate::KvCache::F16, a.load)?;
    let mut generator = generator;
    let kv = if generator.kv_cache_f16() { "f16" } else { "f32" };
    let rows = llama_bench(&mut generator, &a.prompts, &a.gens, &a.depths, a.repeats as usize)
        .map_err(|e| Failure::error(error_chain(&e)))?;
    let name = model_name(a);
    let test = |r: &Row| {
        if r.depth == 0 { r.test.name() } else { format!("{} @ d{}", r.test.name(), r.depth) }
    };
    let mut out = String::new();
    match a.output {
        Output::Md => {
            let _ = writeln!(out, "{}\n", dev.line());
            let _ = writeln!(out, "| model | kv cache | test | t/s (mean ± sd) | median t/s | repeats |");
            let _ = writeln!(out, "| --- | --- | ---: | ---: | ---: | ---: |");
            for r in &rows {
                let s = r.tokens_per_s;
                let _ = writeln!(
                    out,
                    "| {name} | {kv} | {} | {:.2} ± {:.2} | {:.2} | {} |",
                    test(r),
                    s.mean,
                    s.sd,
                    s.median,
                    s.n
                );
            }
        }
        Output::Csv => {
            let _ = writeln!(
                out,
                "model,adapter,copy_gb_per_s,kv_cache,test,n_prompt,n_gen,n_depth,repeats,mean_tps,sd_tps,median_tps"
            );
            for r in &rows {
                let (p, g) = match r.test {
                    etwgpu_llm::bench::Test::Prompt(n) => (n, 0),
                    etwgpu_llm::bench::Test::Generate(n) => (0, n),
                };
                let s = r.tokens_per_s;
                let bw = dev.bandwidth.as_ref().map_or(String::new(), |b| format!("{:.2}", b.gb_per_s));
                let _ = writeln!(
                    out,
                    "{},{},{bw},{kv},{},{p},{g},{},{},{:.3},{:.3},{:.3}",
                    csv(&name),
                    csv(&dev.name),
                    r.test.name(),
                    r.depth,
                    s.n,
                    s.mean,
                    s.sd,
                    s.median
                );
            }
        }
        Output::Json => {
            let results: Vec<_> = rows
                .iter()
                .map(|r| {
                    let (p, g) = match r.test {
                        etwgpu_llm::bench::Test::Prompt(n) => (n, 0),
                        etwgpu_llm::bench::Test::Generate(n) => (0, n),
                    };
                    let s = r.tokens_per_s;
                    serde_json::json!({
                        "test": r.test.name(), "n_prompt": p, "n_gen": g, "n_depth": r.depth, "repeats": s.n,
                        "mean_tps": s.mean, "sd_tps": s.sd, "median_tps": s.median, "samples_tps": r.samples,
                    })
                })
                .collect();
            let v = serde_json::json!({"model": name, "kind": "llm", "kv_cache": kv, "device": dev.json(), "results": results});
            out = serde_json::to_string(&v).map_err(Failure::error)? + "\n";
        }
    }
    Ok(out)
}

/// A CSV field, quoted when it needs to be.
fn csv(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

/// Latency percentiles and throughput of one method.
fn method(a: &BenchCli, rt: &Runtime, program: &Program, dev: &Device) -> Result<String, Failure> {
    let name = a.method.clone().unwrap_or_else(|| "forward".to_string());
    let options = a.load.options(LoadOptions::default());
    let mut m = rt.load_with(program, &name, &options).map_err(|e| Failure::error(error_chain(&e)))?;
    let inputs: Vec<Tensor> = if a.inputs.is_empty() {
        m.input_specs()
            .iter()
            .enumerate()
            .map(|(i, (dtype, shape))| crate::run::random_input(*dtype, shape, i as u64 + 1))
            .collect::<Result<_, _>>()?
    } else {
        a.inputs
            .iter()
            .map(|p| Tensor::read_npy(p).map_err(|e| Failure::error(format!("{}: {}", p.display(), error_chain(&e)))))
            .collect::<Result<_, _>>()?
    };
    let what = if a.inputs.is_empty() { "random inputs" } else { "given inputs" };
    let mut once = || -> Result<f64, Failure> {
        let t = Instant::now();
        m.run(&inputs).map_err(|e| Failure::error(error_chain(&e)))?;
        Ok(t.elapsed().as_secs_f64() * 1e3)
    };
    once()?;
    let ms = (0..a.repeats).map(|_| once()).collect::<Result<Vec<f64>, _>>()?;
    let s = Summary::of(&ms).expect("at least one repeat");
    let p = |q| percentile(&ms, q).expect("at least one repeat");
    let (p50, p90, p99) = (p(0.5), p(0.9), p(0.99));
    let runs_per_s = 1e3 / s.mean.max(1e-9);
    let model = model_name(a);
    let mut out = String::new();
    match a.output {
        Output::Md => {
            let _ = writeln!(out, "{}\n", dev.line());
            let _ = writeln!(
                out,
                "| model | method | inputs | runs | mean ms (± sd) | p50 ms | p90 ms | p99 ms | runs/s |"
            );
            let _ = writeln!(out, "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
            let _ = writeln!(
                out,
                "| {model} | {name} | {what} | {} | {:.3} ± {:.3} | {p50:.3} | {p90:.3} | {p99:.3} | {runs_per_s:.1} |",
                s.n, s.mean, s.sd
            );
        }
        Output::Csv => {
            let _ = writeln!(
                out,
                "model,adapter,copy_gb_per_s,method,inputs,runs,mean_ms,sd_ms,p50_ms,p90_ms,p99_ms,runs_per_s"
            );
            let bw = dev.bandwidth.as_ref().map_or(String::new(), |b| format!("{:.2}", b.gb_per_s));
            let _ = writeln!(
                out,
                "{},{},{bw},{},{what},{},{:.4},{:.4},{p50:.4},{p90:.4},{p99:.4},{runs_per_s:.2}",
                csv(&model),
                csv(&dev.name),
                csv(&name),
                s.n,
                s.mean,
                s.sd
            );
        }
        Output::Json => {
            let v = serde_json::json!({
                "model": model, "kind": "method", "method": name, "inputs": what, "device": dev.json(),
                "runs": s.n, "mean_ms": s.mean, "sd_ms": s.sd, "median_ms": s.median,
                "p50_ms": p50, "p90_ms": p90, "p99_ms": p99, "runs_per_s": runs_per_s, "samples_ms": ms,
            });
            out = serde_json::to_string(&v).map_err(Failure::error)? + "\n";
        }
    }
    Ok(out)
}
