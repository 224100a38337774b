//! `coop_probe`'s QKV timing (`qkv`): the Llama-3.2-1B shape's Q/K/V
//! projections (dim 2048; N = 2048, 512, 512; 4-bit, groups of 32) as
//! three bias-free `et_vk.linear_q4gsw` of one float32 input, loaded fused
//! (`etwgpu.linear_q4gsw_qkv`: one dispatch for the three, issue 15) and
//! unfused (three linears in turn, a barrier between each: they write one
//! arena; each as a plain 4-bit linear runs, split-K where its tiles leave
//! SMs idle), at precision F16 (the matrix units where the device has them),
//! at 128, 512 and 2048 rows. Per form and M: the median over runs of the
//! GPU time of the projections' dispatches (profiled with a timestamp
//! between dispatches, as `llm_bench`'s profiles), the kernels that ran,
//! and whether the fused outputs equal the unfused ones within 2e-2 of
//! their scale (the same f16 operands; the order of the sums may differ).
//! With `quick` (for CPU adapters), 128 rows only and fewer runs.

use std::io::Write;

use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
use etwgpu_format::{DType, Program};
use etwgpu_kernels::Precision;
use etwgpu_runtime::{LoadOptions, LoadedMethod, Runtime, RuntimeOptions, Tensor};

const K: u64 = 2048;
const NS: [u64; 3] = [2048, 512, 512];
const GROUP: u64 = 32;
const MS: [u64; 3] = [128, 512, 2048];
/// Timed runs per form and M (after 3 untimed ones); with `quick`, 3.
const RUNS: usize = 15;
const QUICK_RUNS: usize = 3;
/// Largest accepted max abs difference over the largest magnitude.
const TOLERANCE: f64 = 2e-2;

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

fn program() -> Program {
    let m_max = *MS.iter().max().expect("rows");
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[m_max, K]);
    let gs = g.int(GROUP as i64);
    let mut outs = Vec::new();
    for (j, n) in NS.into_iter().enumerate() {
        let seed = 7 + 2 * j as u32;
        let packed: Vec<u8> = values((n * K / 2) as usize, seed, 0.0, 256.0).iter().map(|&v| v as u8).collect();
        let scales: Vec<u8> =
            values((K / GROUP * n) as usize, seed + 1, 0.005, 0.03).iter().flat_map(|v| v.to_le_bytes()).collect();
        let w = g.constant(DType::U8, &[n, K / 2], &packed);
        let s = g.constant(DType::F32, &[K / GROUP, n], &scales);
        let none = g.null();
        let y = g.tensor(DType::F32, &[m_max, n]);
        g.op("et_vk.linear_q4gsw.default", &[x, w, s, gs, none, y]);
        outs.push(y);
    }
    g.inputs(&[x]).outputs(&outs);
    Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("the built program parses")
}

/// One form's runs at `m` rows: (median GPU microseconds, kernels, outputs).
fn time(method: &mut LoadedMethod, m: u64, runs: usize) -> Result<(f64, String, Vec<Vec<f64>>), String> {
    let xv = values((m * K) as usize, 3 + m as u32, -1.0, 1.0);
    let input = Tensor::from_f32(&[m, K], &xv);
    let mut micros = Vec::new();
    let mut kernels = String::new();
    let mut outs = Vec::new();
    for run in 0..3 + runs {
        let got = method.run(std::slice::from_ref(&input)).map_err(|e| e.to_string())?;
        let profile = method.profile();
        let gemm: Vec<_> = profile.iter().filter(|p| p.kernels.iter().any(|k| k.contains("gem"))).collect();
        if run >= 3 {
            micros.push(gemm.iter().map(|p| p.nanos).sum::<f64>() / 1e3);
        }
        let dispatches: usize = gemm.iter().map(|p| p.dispatches).sum();
        let names: Vec<&str> = gemm.iter().flat_map(|p| p.kernels.iter().map(String::as_str)).collect();
        kernels = format!("{dispatches} dispatches: {}", names.join(" "));
        outs = got.iter().map(Tensor::to_f64_vec).collect();
    }
    micros.sort_by(f64::total_cmp);
    Ok((micros[micros.len() / 2], kernels, outs))
}

/// Times the fused and unfused forms; returns how many checks failed.
pub fn run(stdout: &mut impl Write, coop_expected: bool, quick: bool) -> usize {
    let (ms, runs) = if quick { (&MS[..1], QUICK_RUNS) } else { (&MS[..], RUNS) };
    let options =
        RuntimeOptions { coop_matrix: coop_expected.then_some(true), precision: Precision::F16, ..Default::default() };
    let rt = match Runtime::with_options(&options) {
        Ok(rt) => rt,
        Err(e) => {
            let _ = writeln!(stdout, "qkv: FAIL no runtime ({e})");
            return 1;
        }
    };
    let _ = writeln!(
        stdout,
        "\nQKV timing: route {}, 1B shape (K {K}, N {NS:?}, groups of {GROUP}), float32 input at precision F16; \
         median of {runs} runs, GPU time of the projections' dispatches",
        rt.gemm_route()
    );
    let program = program();
    let mut methods = Vec::new();
    for fuse in [true, false] {
        let load = LoadOptions { fuse, precision: Some(Precision::F16), ..LoadOptions::default() };
        match rt.load_with(&program, "forward", &load) {
            Ok(mut m) => {
                m.set_profiling(true);
                methods.push(m);
            }
            Err(e) => {
                let _ = writeln!(stdout, "  FAIL load (fuse {fuse}): {e}");
                return 1;
            }
        }
    }
    let mut failed = 0;
    for &m in ms {
        let mut results = Vec::new();
        for (method, form) in methods.iter_mut().zip(["one dispatch", "three dispatches"]) {
            match time(method, m, runs) {
                Ok((us, kernels, outs)) => {
                    let flop = 2.0 * (m * K * NS.iter().sum::<u64>()) as f64;
                    let _ = writeln!(
                        stdout,
                        "  M {m:>4} {form:<17} {us:8.1} us  {:6.1} TFLOP/s  ({kernels})",
                        flop / us / 1e6
                    );
                    results.push(outs);
                }
                Err(e) => {
                    let _ = writeln!(stdout, "  FAIL M {m} {form}: {e}");
                    failed += 1;
                }
            }
        }
        if let [fused, unfused] = &results[..] {
            let mut err = 0.0f64;
            for (a, b) in fused.iter().zip(unfused) {
                let scale = b.iter().fold(0.0f64, |s, v| s.max(v.abs())).max(1e-30);
                let diff = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0f64, f64::max);
                err = err.max(if a.len() == b.len() { diff / scale } else { f64::INFINITY });
            }
            let pass = err <= TOLERANCE;
            failed += usize::from(!pass);
            let _ = writeln!(
                stdout,
                "  {} M {m:>4} fused against unfused: err {err:.1e}",
                if pass { "PASS" } else { "FAIL" }
            );
        }
    }
    failed
}
