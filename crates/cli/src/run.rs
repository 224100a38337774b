//! `etwgpu run`: load a method once, make calls on it, write the outputs.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use etwgpu_format::DType;
use etwgpu_runtime::{Runtime, Tensor};

use crate::{Failure, error_chain};

/// Options of `run`.
#[derive(Debug, Default)]
pub struct RunArgs {
    model: PathBuf,
    method: Option<String>,
    ptds: Vec<PathBuf>,
    calls: Vec<Vec<PathBuf>>,
    output_dir: Option<PathBuf>,
    random_inputs: bool,
    repeat: usize,
}

/// Parses the arguments after `run`.
pub fn parse(args: &[String]) -> Result<RunArgs, Failure> {
    let mut a = RunArgs { repeat: 1, ..RunArgs::default() };
    let mut model = None;
    let mut single = Vec::new();
    let mut it = args.iter();
    let value = |it: &mut std::slice::Iter<'_, String>, flag: &str| {
        it.next().cloned().ok_or_else(|| Failure::usage(format!("{flag} needs a value")))
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--method" => a.method = Some(value(&mut it, "--method")?),
            "--ptd" => a.ptds.push(value(&mut it, "--ptd")?.into()),
            "--call" => a.calls.push(value(&mut it, "--call")?.split(',').map(PathBuf::from).collect()),
            "--input" => single.push(PathBuf::from(value(&mut it, "--input")?)),
            "--output-dir" => a.output_dir = Some(value(&mut it, "--output-dir")?.into()),
            "--random-inputs" => a.random_inputs = true,
            "--repeat" => {
                let v = value(&mut it, "--repeat")?;
                a.repeat = v
                    .parse()
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| Failure::usage(format!("--repeat takes a positive integer, not {v:?}")))?;
            }
            flag if flag.starts_with("--") => return Err(Failure::usage(format!("unknown option {flag}"))),
            path if model.is_none() => model = Some(PathBuf::from(path)),
            extra => return Err(Failure::usage(format!("unexpected argument {extra}"))),
        }
    }
    if !single.is_empty() {
        a.calls.push(single);
    }
    a.model = model.ok_or_else(|| Failure::usage("run needs a model file"))?;
    if a.calls.is_empty() && !a.random_inputs {
        return Err(Failure::usage("give inputs with --call or --input, or use --random-inputs"));
    }
    if !a.calls.is_empty() && a.random_inputs {
        return Err(Failure::usage("--random-inputs cannot be combined with --call or --input"));
    }
    Ok(a)
}

/// Deterministic inputs for a method: floats in [-1, 1), integers in [0, 8).
fn random_input(dtype: DType, shape: &[u64], seed: u64) -> Result<Tensor, Failure> {
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
    let mut method = rt.load(&program, &method_name).map_err(|e| Failure::error(error_chain(&e)))?;
    let load = t0.elapsed();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "loaded {:?} on {} in {:.1} ms ({} dispatches per call; {} GPU call(s), {} CPU fallback call(s))",
        method_name,
        rt.adapter_info().name,
        ms(load),
        method.n_dispatches(),
        method.n_gpu_calls(),
        method.n_cpu_calls()
    );
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
        if let Some(dir) = &a.output_dir {
            for (i, t) in outputs.iter().enumerate() {
                let path = dir.join(format!("call{k}.out{i}.npy"));
                t.write_npy(&path).map_err(|e| Failure::error(format!("{}: {}", path.display(), error_chain(&e))))?;
            }
        }
    }
    Ok(out)
}
