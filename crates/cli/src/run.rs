//! `etwgpu run`: load a method once, make calls on it, write the outputs.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use etwgpu_format::DType;
use etwgpu_runtime::{LoadOptions, Runtime, Tensor};

use crate::{Failure, error_chain};

/// Options of `run`.
#[derive(Debug)]
pub struct RunArgs {
    model: PathBuf,
    method: Option<String>,
    ptds: Vec<PathBuf>,
    calls: Vec<Vec<PathBuf>>,
    output_dir: Option<PathBuf>,
    random_inputs: bool,
    repeat: usize,
    /// Print a per-op table of the last run of each call.
    profile: bool,
    /// With `profile`: print only the profile, as JSON.
    json: bool,
    /// With `profile`: how it is timed.
    profile_by: etwgpu_runtime::ProfileMode,
    /// Run the ops as exported, without fusion (for debugging).
    no_fuse: bool,
    /// `--precision` (which float32 matrix products may use f16 operands
    /// on matrix units; `None`: the runtime's default) and
    /// `--trusted-shaders`.
    load: crate::LoadFlags,
}

/// The flags of `run`, as clap reads them.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  etwgpu run model.pte --input x.npy --output-dir out/
  etwgpu run model.pte --call a0.npy,a1.npy --call b0.npy,b1.npy --repeat 10
  etwgpu run model.pte --random-inputs --profile --json
  etwgpu run model.pte --random-inputs --profile --profile-by kernel")]
pub struct RunCli {
    /// The program (`.pte`).
    model: PathBuf,
    /// The method to run (default `forward`).
    #[arg(long, value_name = "NAME")]
    method: Option<String>,
    /// External data files (`.ptd`) the program's constants live in.
    #[arg(long = "ptd", value_name = "FILE")]
    ptds: Vec<PathBuf>,
    /// One call's inputs, comma-separated `.npy` files; repeat for more calls.
    #[arg(long = "call", value_name = "IN0.npy[,IN1.npy...]")]
    calls: Vec<String>,
    /// One input of a single call (repeat for each input in order).
    #[arg(long = "input", value_name = "IN.npy")]
    inputs: Vec<PathBuf>,
    /// Run once on deterministic random inputs of the method's input shapes.
    #[arg(long, conflicts_with_all = ["calls", "inputs"])]
    random_inputs: bool,
    /// Write `DIR/call<K>.out<I>.npy`.
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
    /// Run each call N times and report the median and minimum.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    repeat: u64,
    /// Print a per-op table of the last run of each call.
    #[arg(long)]
    profile: bool,
    /// With `--profile`: print only the profile, as JSON.
    #[arg(long, requires = "profile")]
    json: bool,
    /// With `--profile`: `dispatch` (default) puts a GPU timestamp between
    /// every two dispatches, which inflates small ones; `kernel` times
    /// each shader's dispatches alone in a pass of their own and the whole
    /// call in one pass (each pass run 8 times), with timestamps only
    /// around passes.
    #[arg(long, value_name = "dispatch|kernel", requires = "profile", value_parser = parse_profile_by)]
    profile_by: Option<etwgpu_runtime::ProfileMode>,
    /// Run the ops as exported, without fusion (for debugging).
    #[arg(long)]
    no_fuse: bool,
    #[command(flatten)]
    load: crate::LoadFlags,
}

/// `--profile-by`'s values and the modes they name (also the `profile_by`
/// of `--json`).
const PROFILE_BY: [(&str, etwgpu_runtime::ProfileMode); 2] =
    [("dispatch", etwgpu_runtime::ProfileMode::PerDispatch), ("kernel", etwgpu_runtime::ProfileMode::ByKernel)];

fn parse_profile_by(v: &str) -> Result<etwgpu_runtime::ProfileMode, String> {
    PROFILE_BY
        .iter()
        .find(|(name, _)| *name == v)
        .map(|(_, mode)| *mode)
        .ok_or_else(|| format!("takes dispatch or kernel, not {v:?}"))
}

/// The `--profile-by` value of `mode`.
fn profile_by_name(mode: etwgpu_runtime::ProfileMode) -> &'static str {
    PROFILE_BY.iter().find(|(_, m)| *m == mode).map_or("dispatch", |(name, _)| name)
}

impl RunCli {
    /// The options `run` works from; a usage error when no inputs are given.
    pub fn into_args(self) -> Result<RunArgs, Failure> {
        let mut calls: Vec<Vec<PathBuf>> =
            self.calls.iter().map(|c| c.split(',').map(PathBuf::from).collect()).collect();
        if !self.inputs.is_empty() {
            calls.push(self.inputs);
        }
        if calls.is_empty() && !self.random_inputs {
            return Err(Failure::usage("give inputs with --call or --input, or use --random-inputs"));
        }
        Ok(RunArgs {
            model: self.model,
            method: self.method,
            ptds: self.ptds,
            calls,
            output_dir: self.output_dir,
            random_inputs: self.random_inputs,
            repeat: self.repeat as usize,
            profile: self.profile,
            json: self.json,
            profile_by: self.profile_by.unwrap_or_default(),
            no_fuse: self.no_fuse,
            load: self.load,
        })
    }
}

/// Deterministic inputs for a method: floats in [-1, 1), integers in [0, 8).
pub(crate) fn random_input(dtype: DType, shape: &[u64], seed: u64) -> Result<Tensor, Failure> {
    let n: u64 = shape.iter().product();
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut bytes = Vec::with_capacity(n as usize * dtype.size_bytes());
    for _ in 0..n {
        let r = next();
        let f = (r >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
        let i = (r % 8) as i64;
        match dtype {
            DType::F32 => bytes.extend_from_slice(&(f as f32).to_le_bytes()),
            DType::F64 => bytes.extend_from_slice(&f.to_le_bytes()),
            DType::F16 => bytes.extend_from_slice(&half::f16::from_f64(f).to_le_bytes()),
            DType::BF16 => bytes.extend_from_slice(&half::bf16::from_f64(f).to_le_bytes()),
            DType::I64 => bytes.extend_from_slice(&i.to_le_bytes()),
            DType::I32 => bytes.extend_from_slice(&(i as i32).to_le_bytes()),
            DType::I16 => bytes.extend_from_slice(&(i as i16).to_le_bytes()),
            DType::I8 | DType::U8 => bytes.push(i as u8),
            DType::Bool => bytes.push((r & 1) as u8),
        }
    }
    Tensor::new(dtype, shape.to_vec(), bytes).map_err(|e| Failure::error(error_chain(&e)))
}

fn shape_text(t: &Tensor) -> String {
    let dims: Vec<String> = t.shape.iter().map(u64::to_string).collect();
    format!("{}[{}]", t.dtype, dims.join(", "))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Runs the command; returns the report printed on stdout.
pub fn run(a: &RunArgs) -> Result<String, Failure> {
    use std::fmt::Write as _;
    let program = etwgpu_format::Program::open_with_external(&a.model, &a.ptds)
        .map_err(|e| Failure::error(format!("{}: {e}", a.model.display())))?;
    let method_name = a.method.clone().unwrap_or_else(|| "forward".to_string());
    let rt = Runtime::new().map_err(|e| Failure::error(error_chain(&e)))?;
    let t0 = Instant::now();
    let options = a.load.options(LoadOptions { fuse: !a.no_fuse, ..LoadOptions::default() });
    let mut method = rt.load_with(&program, &method_name, &options).map_err(|e| Failure::error(error_chain(&e)))?;
    let load = t0.elapsed();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "loaded {:?} on {} in {:.1} ms ({} dispatches per call, fusion {}; {} GPU call(s), {} CPU fallback call(s))",
        method_name,
        rt.adapter_info().name,
        ms(load),
        method.n_dispatches(),
        if options.fuse { "on" } else { "off" },
        method.n_gpu_calls(),
        method.n_cpu_calls()
    );
    if method.trusted_shaders() {
        let _ = writeln!(
            out,
            "trusted shaders: {} of the {} pipelines made at load have no index clamps",
            rt.pipeline_cache().unchecked_len(),
            rt.pipeline_cache().len()
        );
    } else if a.load.trusted_shaders {
        let _ = writeln!(out, "trusted shaders: not taken (Vulkan only); every pipeline is checked");
    }
    let calls: Vec<Vec<Tensor>> = if a.random_inputs {
        let specs = method.input_specs();
        let inputs = specs
            .iter()
            .enumerate()
            .map(|(i, (dtype, shape))| random_input(*dtype, shape, i as u64 + 1))
            .collect::<Result<Vec<_>, _>>()?;
        vec![inputs]
    } else {
        a.calls
            .iter()
            .map(|paths| {
                paths
                    .iter()
                    .map(|p| {
                        Tensor::read_npy(p).map_err(|e| Failure::error(format!("{}: {}", p.display(), error_chain(&e))))
                    })
                    .collect()
            })
            .collect::<Result<_, _>>()?
    };
    // With fusion, the profile also gives each call's dispatches without
    // it: the same calls on the method loaded again, fusion off.
    let mut unfused = Vec::new();
    if a.profile && options.fuse {
        let mut plain = rt
            .load_with(&program, &method_name, &LoadOptions { fuse: false, ..LoadOptions::default() })
            .map_err(|e| Failure::error(error_chain(&e)))?;
        for (k, inputs) in calls.iter().enumerate() {
            plain.run(inputs).map_err(|e| Failure::error(format!("call {k} without fusion: {}", error_chain(&e))))?;
            unfused.push(plain.n_dispatches());
        }
    }
    method.set_profiling(a.profile);
    method.set_profile_mode(a.profile_by);
    let mut profiles = Vec::new();
    if let Some(dir) = &a.output_dir {
        std::fs::create_dir_all(dir).map_err(|e| Failure::error(format!("{}: {e}", dir.display())))?;
    }
    for (k, inputs) in calls.iter().enumerate() {
        let mut times = Vec::with_capacity(a.repeat);
        let mut outputs = Vec::new();
        for _ in 0..a.repeat {
            let t = Instant::now();
            outputs = method.run(inputs).map_err(|e| Failure::error(format!("call {k}: {}", error_chain(&e))))?;
            times.push(t.elapsed());
        }
        times.sort();
        let shapes: Vec<String> = outputs.iter().map(shape_text).collect();
        let timing = if a.repeat == 1 {
            format!("{:.3} ms", ms(times[0]))
        } else {
            format!("median {:.3} ms, min {:.3} ms over {} runs", ms(times[a.repeat / 2]), ms(times[0]), a.repeat)
        };
        let _ = writeln!(
            out,
            "call {k}: {} input(s) -> {} ({timing}; {} host round trip(s))",
            inputs.len(),
            shapes.join(", "),
            method.host_round_trips()
        );
        if a.profile {
            let rows = method.profile();
            if !a.json {
                let precision = a.load.precision.unwrap_or(rt.gemm_caps().precision);
                let _ = writeln!(out, "  GEMM route: {} (precision {precision})", rt.gemm_route());
                out.push_str(&profile_table(&rows, a.profile_by, method.profiled_total_nanos()));
                if let Some(n) = unfused.get(k) {
                    let _ = writeln!(
                        out,
                        "  dispatches: {} with fusion, {n} without (--no-fuse)",
                        rows.iter().map(|r| r.dispatches).sum::<usize>()
                    );
                }
            }
            let mut json = profile_json(k, &rows);
            if let Some(n) = unfused.get(k) {
                json["dispatches_without_fusion"] = serde_json::json!(n);
            }
            json["fusion"] = serde_json::json!(options.fuse);
            json["profile_by"] = serde_json::json!(profile_by_name(a.profile_by));
            json["whole_call_ns"] = serde_json::json!(method.profiled_total_nanos());
            profiles.push(json);
        }
        if let Some(dir) = &a.output_dir {
            for (i, t) in outputs.iter().enumerate() {
                let path = dir.join(format!("call{k}.out{i}.npy"));
                t.write_npy(&path).map_err(|e| Failure::error(format!("{}: {}", path.display(), error_chain(&e))))?;
            }
        }
    }
    if a.json {
        let mut s = serde_json::to_string(&serde_json::json!({ "calls": profiles })).map_err(Failure::error)?;
        s.push('\n');
        return Ok(s);
    }
    Ok(out)
}

/// The per-op table of one profiled run, with totals; `whole` is the
/// whole call's GPU time in one pass (by-kernel runs).
fn profile_table(rows: &[etwgpu_runtime::NodeProfile], by: etwgpu_runtime::ProfileMode, whole: Option<f64>) -> String {
    use std::fmt::Write as _;
    let gpu = rows.iter().any(|r| r.gpu_timestamps);
    let how = match (gpu, by, whole) {
        (false, ..) => "wall time per dispatch".to_string(),
        (true, etwgpu_runtime::ProfileMode::ByKernel, Some(t)) => format!(
            "GPU timestamps, by kernel: each shader's dispatches alone in a pass; the whole call in one pass {:.1} us",
            t / 1e3
        ),
        (true, ..) => "GPU timestamps".to_string(),
    };
    let mut o = String::new();
    let _ = writeln!(
        o,
        "  profile ({how}):\n  {:<24} {:>5}  {:<44} {:<40} {:>5} {:>10}",
        "call", "node", "op", "kernel", "disp", "us"
    );
    for r in rows {
        let _ = writeln!(
            o,
            "  {:<24} {:>5}  {:<44} {:<40} {:>5} {:>10.1}",
            r.call,
            r.node_id,
            r.op,
            if r.kernels.is_empty() { "-".to_string() } else { r.kernels.join(",") },
            r.dispatches,
            r.nanos / 1e3
        );
    }
    let _ = writeln!(
        o,
        "  total: {} op(s), {} dispatch(es), {:.1} us",
        rows.len(),
        rows.iter().map(|r| r.dispatches).sum::<usize>(),
        rows.iter().map(|r| r.nanos).sum::<f64>() / 1e3
    );
    o
}

fn profile_json(call: usize, rows: &[etwgpu_runtime::NodeProfile]) -> serde_json::Value {
    let nodes: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "call": r.call, "node_id": r.node_id, "op": r.op, "kernels": r.kernels,
                "dispatches": r.dispatches, "ns": r.nanos, "gpu_timestamps": r.gpu_timestamps,
            })
        })
        .collect();
    serde_json::json!({
        "call": call,
        "nodes": nodes,
        "total_dispatches": rows.iter().map(|r| r.dispatches).sum::<usize>(),
        "total_ns": rows.iter().map(|r| r.nanos).sum::<f64>(),
    })
}
