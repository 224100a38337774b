//! `coop_probe`'s routed check: the shipped GEMM route end to end. Small
//! programs built with the format crate's writer (`et_vk.linear_q4gsw`
//! with a bias, the SwiGLU pair of two bias-free 4-bit linears that the
//! graph fuses into `etwgpu.linear_q4gsw_swiglu`, three bias-free 4-bit
//! linears of one input of widths N, N/4 + 8 and N/4 + 24 that it fuses
//! into `etwgpu.linear_q4gsw_qkv` (one dispatch for the three; each of
//! the three outputs checked), a dense `aten.linear` with a bias), float32
//! and float16, loaded at precision F16 on a device opened with
//! cooperative matrices required where the adapter has them (as
//! `ETWGPU_COOP_MATRIX=1`), run at ragged shapes (M and N not multiples
//! of any tile, K a multiple of 32 but not always of 64) and compared
//! with an f64 CPU reference from the operands the program holds. Each
//! case prints the kernels that ran (the profile) and PASS or FAIL: max
//! abs error over the largest reference magnitude at the checked
//! positions ≤ `TOLERANCE` (f16 operands), and, on a device with
//! cooperative matrices, the kernel is the one `coop_tile` (for a plain
//! 4-bit linear `q4_coop_route`, which may split K on either tile) picks.

use std::io::Write;

use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
use etwgpu_format::{DType, Program};
use etwgpu_kernels::Precision;
use etwgpu_kernels::ops::gemm::{
    COOP_DENSE_LARGE, COOP_Q4_LARGE, COOP_QKV_LARGE, COOP_SMALL, COOP_SWIGLU_LARGE, Q4CoopRoute, coop_tile,
    q4_coop_route,
};
use etwgpu_runtime::{LoadOptions, Runtime, RuntimeOptions, Tensor};

/// Largest accepted max abs error over the largest reference magnitude.
const TOLERANCE: f64 = 2e-2;
/// Rows run through each program (one load, one run per M).
const MS: [u64; 7] = [1, 7, 130, 512, 600, 1100, 2100];
const NS: [u64; 2] = [48, 2048 + 16];
const KS: [u64; 3] = [64, 96, 2048];
/// A K long enough for the large tile's split (the plain 4-bit linear
/// only: `q4_coop_route`), besides `KS`.
const LONG_K: u64 = 8192;
const GROUP: u64 = 32;
/// Random output positions checked per run, besides the last row and the
/// last column (the tiles' ragged edges).
const SAMPLES: usize = 2048;

/// The op a program computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Q4,
    Swiglu,
    Qkv,
    Dense,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Q4 => "linear_q4gsw+bias",
            Op::Swiglu => "linear_q4gsw_swiglu",
            Op::Qkv => "linear_q4gsw_qkv",
            Op::Dense => "aten.linear+bias",
        }
    }

    /// The output widths of a program of width `n`.
    fn widths(self, n: u64) -> Vec<u64> {
        match self {
            Op::Qkv => vec![n, n / 4 + 8, n / 4 + 24],
            _ => vec![n],
        }
    }

    /// The cooperative-matrix kernel family the host rule should pick, as
    /// its label prefix.
    fn coop_kernel(self, m: u64, n: u64, k: u64) -> String {
        let (base, large) = match self {
            Op::Q4 => ("q4_gemm_coop", COOP_Q4_LARGE),
            Op::Swiglu => ("q4_gemm_coop_swiglu", COOP_SWIGLU_LARGE),
            Op::Qkv => ("q4_gemm_coop_qkv", COOP_QKV_LARGE),
            Op::Dense => ("matmul_coop", COOP_DENSE_LARGE),
        };
        // The QKV tiles along N: each projection's, COOP_SMALL.n wide.
        let n = match self {
            Op::Qkv => self.widths(n).iter().map(|w| w.div_ceil(COOP_SMALL.n)).sum::<u64>() * COOP_SMALL.n,
            _ => n,
        };
        // A 4-bit linear may split K, on either tile.
        let route = match self {
            Op::Q4 => q4_coop_route(m, n, k),
            _ => Q4CoopRoute::Tiles(coop_tile(m, n, k, large)),
        };
        match route {
            Q4CoopRoute::Split(t, _) if t == COOP_SMALL => format!("{base}_splitk."),
            Q4CoopRoute::Split(..) => format!("{base}_large_splitk."),
            Q4CoopRoute::Tiles(t) if t == COOP_SMALL => format!("{base}."),
            Q4CoopRoute::Tiles(_) => format!("{base}_large."),
        }
    }
}

/// With `quick`, only M up to 600 and K up to 96 (for CPU adapters).
const QUICK_M: u64 = 600;
const QUICK_K: u64 = 96;

/// Runs every case (`quick`: the small ones); returns how many failed.
pub fn run(stdout: &mut impl Write, coop_expected: bool, quick: bool) -> usize {
    let options = RuntimeOptions {
        coop_matrix: coop_expected.then_some(true),
        precision: Precision::F16,
        ..RuntimeOptions::default()
    };
    let rt = match Runtime::with_options(&options) {
        Ok(rt) => rt,
        Err(e) => {
            let _ = writeln!(stdout, "routed: FAIL no runtime ({e})");
            return 1;
        }
    };
    let coop = rt.gemm_caps().coop_matrix_f16;
    let _ = writeln!(
        stdout,
        "\nrouted check: route {} (cooperative matrices {}), precision F16, tolerance {TOLERANCE:.0e} of the output \
         scale; M {MS:?}, N {NS:?}, K {KS:?} (and {LONG_K} for the 4-bit linear), group {GROUP}",
        rt.gemm_route(),
        if coop { "on" } else { "off: the portable route only" }
    );
    let f16 = rt.features().contains(&"shader-f16");
    let mut failed = 0;
    let mut cases = 0;
    for op in [Op::Q4, Op::Swiglu, Op::Qkv, Op::Dense] {
        for dtype in [DType::F32, DType::F16] {
            if dtype == DType::F16 && !f16 {
                continue;
            }
            for n in NS {
                let long = (op == Op::Q4).then_some(LONG_K);
                for k in KS.into_iter().chain(long).filter(|&k| !quick || k <= QUICK_K) {
                    let (c, f) = run_program(stdout, &rt, op, dtype, n, k, coop, quick);
                    cases += c;
                    failed += f;
                }
            }
        }
    }
    let _ = writeln!(stdout, "routed check: {} of {cases} cases PASS", cases - failed);
    failed
}

/// Rounds through `dtype` (the values the program holds).
fn held(dtype: DType, v: Vec<f32>) -> Vec<f32> {
    if dtype == DType::F16 { v.into_iter().map(|x| half::f16::from_f32(x).to_f32()).collect() } else { v }
}

fn bytes(dtype: DType, v: &[f32]) -> Vec<u8> {
    if dtype == DType::F16 {
        v.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect()
    } else {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
}

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

/// A 4-bit weight `[n, k]`: packed bytes `[n, k / 2]` (low nibble first),
/// scales `[k / GROUP, n]` as held, and the dequantized weights `[n, k]`.
struct Q4 {
    packed: Vec<u8>,
    scales: Vec<f32>,
    dequant: Vec<f32>,
}

fn q4(dtype: DType, n: usize, k: usize, seed: u32) -> Q4 {
    let group = GROUP as usize;
    let packed: Vec<u8> = values(n * k / 2, seed, 0.0, 256.0).iter().map(|&v| v as u8).collect();
    let scales = held(dtype, values(k / group * n, seed + 1, 0.005, 0.03));
    let dequant = (0..n * k)
        .map(|i| {
            let (r, c) = (i / k, i % k);
            let nib = (packed[r * k / 2 + c / 2] >> (4 * (c % 2))) & 15;
            (f32::from(nib) - 8.0) * scales[(c / group) * n + r]
        })
        .collect();
    Q4 { packed, scales, dequant }
}

/// What a program's reference needs: the weights `[n_j, k]` (one, gate
/// and up, or q, k and v) and the bias.
struct Reference {
    op: Op,
    w: Vec<Vec<f32>>,
    bias: Option<Vec<f32>>,
}

impl Reference {
    /// Element (`row`, `col`) of output `out`.
    fn at(&self, x: &[f32], k: usize, out: usize, row: usize, col: usize) -> f64 {
        let dot =
            |w: &[f32]| -> f64 { (0..k).map(|j| f64::from(x[row * k + j]) * f64::from(w[col * k + j])).sum::<f64>() };
        match self.op {
            Op::Swiglu => {
                let (g, u) = (dot(&self.w[0]), dot(&self.w[1]));
                g / (1.0 + (-g).exp()) * u
            }
            Op::Qkv => dot(&self.w[out]),
            Op::Q4 | Op::Dense => dot(&self.w[0]) + self.bias.as_ref().map_or(0.0, |b| f64::from(b[col])),
        }
    }
}

/// Builds `op` for `[M, k] -> [M, n]` (M up to the largest of [`MS`]),
/// then runs and checks it at each M; returns (cases, failures).
#[expect(clippy::too_many_arguments, reason = "one case's settings")]
fn run_program(
    stdout: &mut impl Write,
    rt: &Runtime,
    op: Op,
    dtype: DType,
    n: u64,
    k: u64,
    coop: bool,
    quick: bool,
) -> (usize, usize) {
    let ms: Vec<u64> = MS.into_iter().filter(|&m| !quick || m <= QUICK_M).collect();
    let m_max = *ms.iter().max().expect("rows");
    let (nu, ku) = (n as usize, k as usize);
    let seed = (n * 7 + k) as u32;
    let mut g = GraphBuilder::new();
    let x = g.tensor(dtype, &[m_max, k]);
    let widths = op.widths(n);
    let ys: Vec<_> = widths.iter().map(|&w| g.tensor(dtype, &[m_max, w])).collect();
    let y = ys[0];
    let reference = match op {
        Op::Q4 | Op::Swiglu | Op::Qkv => {
            let gs = g.int(GROUP as i64);
            let add_q4 = |g: &mut GraphBuilder, q: &Q4, bias: Option<&[f32]>, out| {
                let n = q.scales.len() as u64 / (k / GROUP);
                let w = g.constant(DType::U8, &[n, k / 2], &q.packed);
                let s = g.constant(dtype, &[k / GROUP, n], &bytes(dtype, &q.scales));
                let b = match bias {
                    Some(b) => g.constant(dtype, &[n], &bytes(dtype, b)),
                    None => g.null(),
                };
                g.op("et_vk.linear_q4gsw.default", &[x, w, s, gs, b, out]);
            };
            if op == Op::Q4 {
                let q = q4(dtype, nu, ku, seed);
                let bias = held(dtype, values(nu, seed + 2, -1.0, 1.0));
                add_q4(&mut g, &q, Some(&bias), y);
                Reference { op, w: vec![q.dequant], bias: Some(bias) }
            } else if op == Op::Qkv {
                let mut w = Vec::new();
                for (j, (&width, &out)) in widths.iter().zip(&ys).enumerate() {
                    let q = q4(dtype, width as usize, ku, seed + 11 + 2 * j as u32);
                    add_q4(&mut g, &q, None, out);
                    w.push(q.dequant);
                }
                Reference { op, w, bias: None }
            } else {
                let (gate, up) = (q4(dtype, nu, ku, seed + 3), q4(dtype, nu, ku, seed + 5));
                let (tg, tu) = (g.tensor(dtype, &[m_max, n]), g.tensor(dtype, &[m_max, n]));
                add_q4(&mut g, &gate, None, tg);
                add_q4(&mut g, &up, None, tu);
                let (sg, a) = (g.tensor(dtype, &[m_max, n]), g.tensor(dtype, &[m_max, n]));
                g.op("aten.sigmoid.default", &[tg, sg])
                    .op("aten.mul.Tensor", &[tg, sg, a])
                    .op("aten.mul.Tensor", &[a, tu, y]);
                Reference { op, w: vec![gate.dequant, up.dequant], bias: None }
            }
        }
        Op::Dense => {
            let wv = held(dtype, values(nu * ku, seed + 7, -0.25, 0.25));
            let bv = held(dtype, values(nu, seed + 8, -1.0, 1.0));
            let w = g.constant(dtype, &[n, k], &bytes(dtype, &wv));
            let b = g.constant(dtype, &[n], &bytes(dtype, &bv));
            g.op("aten.linear.default", &[x, w, b, y]);
            Reference { op, w: vec![wv], bias: Some(bv) }
        }
    };
    g.inputs(&[x]).outputs(&ys);
    let what = format!("{} {dtype:?} N {n} K {k}", op.name());
    let program = match Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()) {
        Ok(p) => p,
        Err(e) => {
            let _ = writeln!(stdout, "  FAIL {what}: the built program does not parse: {e}");
            return (1, 1);
        }
    };
    let options = LoadOptions { precision: Some(Precision::F16), ..LoadOptions::default() };
    let mut method = match rt.load_with(&program, "forward", &options) {
        Ok(m) => m,
        Err(e) => {
            let _ = writeln!(stdout, "  FAIL {what}: load: {e}");
            return (1, 1);
        }
    };
    method.set_profiling(true);
    let mut failed = 0;
    for (i, &m) in ms.iter().enumerate() {
        let mu = m as usize;
        let xv = held(dtype, values(mu * ku, seed + 100 + i as u32, -1.0, 1.0));
        let input = Tensor::new(dtype, vec![m, k], bytes(dtype, &xv)).expect("input tensor");
        let label = format!("{what} M {m}");
        let outs = match method.run(&[input]) {
            Ok(o) => o,
            Err(e) => {
                let _ = writeln!(stdout, "  FAIL {label}: run: {e}");
                failed += 1;
                continue;
            }
        };
        if outs.len() != widths.len() {
            let _ = writeln!(stdout, "  FAIL {label}: {} outputs, want {}", outs.len(), widths.len());
            failed += 1;
            continue;
        }
        // Each output: its last row and column, then random positions;
        // the error is the largest over the outputs, each over its own
        // scale.
        let mut err = 0.0f64;
        for (j, (out, &width)) in outs.iter().zip(&widths).enumerate() {
            let nu = width as usize;
            let got = out.to_f64_vec();
            if got.len() != mu * nu {
                err = f64::INFINITY;
                let _ = writeln!(stdout, "  output {j}: {} elements, want {}", got.len(), mu * nu);
                continue;
            }
            let mut rng = seed ^ (m as u32).wrapping_mul(0x9E37_79B9) ^ (j as u32) << 24 | 1;
            let mut next = move |below: usize| {
                rng ^= rng << 13;
                rng ^= rng >> 17;
                rng ^= rng << 5;
                rng as usize % below
            };
            let positions: Vec<(usize, usize)> = (0..nu)
                .map(|c| (mu - 1, c))
                .chain((0..mu).map(|r| (r, nu - 1)))
                .chain((0..SAMPLES).map(|_| (next(mu), next(nu))))
                .collect();
            let want: Vec<f64> = positions.iter().map(|&(r, c)| reference.at(&xv, ku, j, r, c)).collect();
            let scale = want.iter().fold(0.0f64, |a, v| a.max(v.abs())).max(1e-30);
            err = positions
                .iter()
                .zip(&want)
                .map(|(&(r, c), w)| {
                    let g = got[r * nu + c];
                    if g.is_finite() { (g - w).abs() / scale } else { f64::INFINITY }
                })
                .fold(err, f64::max);
        }
        let gemm = |k: &String| k.contains("gem") || k.contains("matmul");
        let profile = method.profile();
        let dispatches: usize = profile.iter().filter(|p| p.kernels.iter().any(gemm)).map(|p| p.dispatches).sum();
        let kernels: Vec<String> = profile.into_iter().flat_map(|p| p.kernels).filter(gemm).collect();
        let ran = kernels.join(" ");
        let want_kernel = (coop && m > etwgpu_kernels::ops::quant::Q4_GEMV_MAX_ROWS).then(|| op.coop_kernel(m, n, k));
        // The fused QKV is one dispatch for its three projections.
        let route_ok = want_kernel.as_ref().is_none_or(|w| kernels.iter().any(|k| k.starts_with(w.as_str())))
            && (op != Op::Qkv || dispatches == 1);
        let pass = err <= TOLERANCE && route_ok;
        failed += usize::from(!pass);
        let _ = writeln!(
            stdout,
            "  {} {label:<44} err {err:.1e}  {ran}{}",
            if pass { "PASS" } else { "FAIL" },
            match (&want_kernel, route_ok) {
                (Some(w), false) => format!("  (want one {w}*, {dispatches} dispatches)"),
                _ => String::new(),
            }
        );
    }
    (ms.len(), failed)
}
