//! Split-KV decode attention on both of its routes: the subgroup kernel
//! (`sdpa_split_sg.wgsl` and its `_rope` form, taken where the device has
//! subgroups: lavapipe's are 8 wide) and the workgroup kernel
//! (`sdpa_split_short.wgsl`, and `sdpa_split.wgsl` for a cache of 4,200
//! rows; `LoadOptions::subgroups` off), each checked
//! against an f64 CPU reference at positions that give one split and
//! several, whole and ragged subgroup runs and tiles (0, 1, 31, 32, 33,
//! 255, 256, 1000, then 3 rows at 1001), GQA groups 3 and 4, head dims 64
//! and 128, float32, float16 and float16 caches under float32, plain and
//! with RoPE fused into the attention.

use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
use etwgpu_format::{DType, Program};
use etwgpu_runtime::{LoadOptions, LoadedMethod, Tensor};

use crate::llm::{assert_close, int_tensor};
use crate::{data, f32s};

/// One attention shape and how it is stored.
#[derive(Debug, Clone, Copy)]
struct Case {
    hq: usize,
    hkv: usize,
    d: usize,
    /// The activations' dtype on the device (float32 at the method's edges).
    dtype: DType,
    /// Float32 caches stored as float16.
    kv_f16: bool,
    /// RoPE of the query and key before the attention (fused into it).
    rope: bool,
    /// A cache past 4,096 rows, whose splits hold more than one tile of
    /// `sdpa_split_short.wgsl`: the workgroup route takes the 256-wide
    /// `sdpa_split.wgsl` there.
    long: bool,
}

impl Case {
    /// Cache rows.
    fn rows(self) -> usize {
        if self.long { LONG_CACHE } else { CACHE }
    }

    /// The calls: (position, rows).
    fn calls(self) -> &'static [(usize, usize)] {
        if self.long { &LONG_CALLS } else { &CALLS }
    }
}

/// Cache rows: room for 3 rows at 1001.
const CACHE: usize = 1004;
/// The calls: (position, rows).
const CALLS: [(usize, usize); 9] =
    [(0, 1), (1, 1), (31, 1), (32, 1), (33, 1), (255, 1), (256, 1), (1000, 1), (1001, 3)];
/// A long cache's rows: room for 3 rows at 4,196.
const LONG_CACHE: usize = 4200;
/// Its calls: one split, several, a split of several 64-key tiles, and
/// three rows at the end.
const LONG_CALLS: [(usize, usize); 4] = [(0, 1), (33, 1), (4096, 1), (4196, 3)];
/// Longest call.
const MAX_S: usize = 3;

fn float_bytes(dtype: DType, v: &[f32]) -> Vec<u8> {
    match dtype {
        DType::F16 => v.iter().flat_map(|x| half::f16::from_f32(*x).to_le_bytes()).collect(),
        _ => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

/// Rotation table `f(t * (j + 1) / 64)` at row `t`, pair `j`.
fn table(n: usize, d: usize, f: fn(f64) -> f64) -> Vec<f32> {
    (0..n).flat_map(|t| (0..d / 2).map(move |j| f((t * (j + 1)) as f64 / 64.0) as f32)).collect()
}

/// `sdpa_with_kv_cache(q, k, v, k_cache, v_cache, pos[0], ...)` over
/// caches starting as `caches`; with `rope`, `et_vk.apply_rotary_emb` of q
/// and k first, its tables sliced at the position (the Llama export's
/// graph, which fusion turns into `etwgpu.sdpa_rope_with_kv_cache`).
fn graph(c: Case, caches: (&[f32], &[f32])) -> GraphBuilder {
    let (hq, hkv, d, n, s) = (c.hq as u64, c.hkv as u64, c.d as u64, c.rows() as u64, MAX_S as u64);
    let mut g = GraphBuilder::new();
    let q = g.tensor_staged(c.dtype, DType::F32, &[1, s, hq, d]);
    let k = g.tensor_staged(c.dtype, DType::F32, &[1, s, hkv, d]);
    let v = g.tensor_staged(c.dtype, DType::F32, &[1, s, hkv, d]);
    let pos = g.tensor_staged(DType::I32, DType::I64, &[1]);
    let k_cache = g.constant(c.dtype, &[1, n, hkv, d], &float_bytes(c.dtype, caches.0));
    let v_cache = g.constant(c.dtype, &[1, n, hkv, d], &float_bytes(c.dtype, caches.1));
    let (zero, one, causal, null) = (g.int(0), g.int(1), g.bool(true), g.null());
    let start = g.sym_int();
    let out = g.tensor_staged(c.dtype, DType::F32, &[1, s, hq, d]);
    g.op("et_vk.select_as_symint.default", &[pos, zero, zero, start]);
    let (q_in, k_in) = if c.rope {
        let cos_t = g.constant(c.dtype, &[n, d / 2], &float_bytes(c.dtype, &table(c.rows(), c.d, f64::cos)));
        let sin_t = g.constant(c.dtype, &[n, d / 2], &float_bytes(c.dtype, &table(c.rows(), c.d, f64::sin)));
        let (q_rot, k_rot) = (g.tensor(c.dtype, &[1, s, hq, d]), g.tensor(c.dtype, &[1, s, hkv, d]));
        let (cos, sin) = (g.tensor(c.dtype, &[s, d / 2]), g.tensor(c.dtype, &[s, d / 2]));
        let rotated = g.value_list(&[q_rot, k_rot]);
        let (seq, end) = (g.sym_int(), g.sym_int());
        g.op("sym_size.int", &[q, one, seq])
            .op("add", &[start, seq, end])
            .op("aten.slice_copy.Tensor", &[cos_t, zero, start, end, one, cos])
            .op("aten.slice_copy.Tensor", &[sin_t, zero, start, end, one, sin])
            .op("et_vk.apply_rotary_emb.default", &[q, k, cos, sin, rotated]);
        (q_rot, k_rot)
    } else {
        (q, k)
    };
    g.op("sdpa_with_kv_cache.default", &[q_in, k_in, v, k_cache, v_cache, start, one, null, zero, causal, null, out]);
    g.inputs(&[q, k, v, pos]).outputs(&[out]);
    g
}

/// Rows `[S, H, D]` of tokens `start ..` rotated as `et_vk.apply_rotary_emb`
/// does with [`table`], each result rounded by `round`.
fn rotate(x: &[f32], h: usize, d: usize, start: usize, round: fn(f32) -> f32) -> Vec<f32> {
    let rows = start + x.len() / (h * d);
    let (cos, sin) = (table(rows, d, f64::cos), table(rows, d, f64::sin));
    let mut out = x.to_vec();
    for (r, row) in out.chunks_mut(h * d).enumerate() {
        for head in row.chunks_mut(d) {
            for j in 0..d / 2 {
                let (c, s) =
                    (f64::from(round(cos[(start + r) * d / 2 + j])), f64::from(round(sin[(start + r) * d / 2 + j])));
                let (a, b) = (f64::from(head[2 * j]), f64::from(head[2 * j + 1]));
                head[2 * j] = round((a * c - b * s) as f32);
                head[2 * j + 1] = round((a * s + b * c) as f32);
            }
        }
    }
    out
}

/// Causal attention of `q` (`[S, Hq, D]`, rows at `start ..`) over the
/// caches (`[CACHE, Hkv, D]`) after `k`, `v` are stored at `start`
/// (rounded to float16 where the cache holds float16), in f64.
fn reference(
    c: Case,
    caches: &mut (Vec<f32>, Vec<f32>),
    start: usize,
    (q, k, v): (&[f32], &[f32], &[f32]),
) -> Vec<f32> {
    let (hq, hkv, d) = (c.hq, c.hkv, c.d);
    let store = |x: f32| if c.kv_f16 || c.dtype == DType::F16 { half::f16::from_f32(x).to_f32() } else { x };
    let row = hkv * d;
    for (cache, new) in [(&mut caches.0, k), (&mut caches.1, v)] {
        for (slot, x) in cache[start * row..].iter_mut().zip(new) {
            *slot = store(*x);
        }
    }
    let scale = 1.0 / (d as f64).sqrt();
    let mut out = vec![0f32; q.len()];
    for i in 0..q.len() / (hq * d) {
        for h in 0..hq {
            let kvh = h / (hq / hkv);
            let qb = (i * hq + h) * d;
            let scores: Vec<f64> = (0..=start + i)
                .map(|t| {
                    let kb = (t * hkv + kvh) * d;
                    (0..d).map(|j| f64::from(q[qb + j]) * f64::from(caches.0[kb + j])).sum::<f64>() * scale
                })
                .collect();
            let m = scores.iter().copied().fold(f64::MIN, f64::max);
            let sum: f64 = scores.iter().map(|x| (x - m).exp()).sum();
            for j in 0..d {
                let acc: f64 = scores
                    .iter()
                    .enumerate()
                    .map(|(t, x)| (x - m).exp() / sum * f64::from(caches.1[(t * hkv + kvh) * d + j]))
                    .sum();
                out[qb + j] = acc as f32;
            }
        }
    }
    out
}

/// The shader labels of the attention's dispatches in `method`'s last
/// profiled run.
fn attention_kernels(method: &LoadedMethod) -> Vec<String> {
    method.profile().into_iter().filter(|n| n.op.contains("sdpa")).flat_map(|n| n.kernels).collect()
}

/// Runs [`CALLS`] on `c` with the subgroup kernels allowed or not, each
/// call against [`reference`]; checks which partials kernel ran.
fn check(c: Case, subgroups: bool) {
    let Some(rt) = crate::runtime() else { return };
    let n = c.rows() * c.hkv * c.d;
    let round: fn(f32) -> f32 = match c.dtype {
        DType::F16 => |x| half::f16::from_f32(x).to_f32(),
        _ => |x| x,
    };
    let initial: (Vec<f32>, Vec<f32>) =
        (data(n, 201).iter().map(|&x| round(x)).collect(), data(n, 202).iter().map(|&x| round(x)).collect());
    let program = Program::from_bytes(ProgramBuilder::single_delegate(graph(c, (&initial.0, &initial.1))).to_bytes())
        .expect("parses");
    let options = LoadOptions { kv_cache_f16: c.kv_f16, subgroups: Some(subgroups), ..LoadOptions::default() };
    let mut method = rt.load_with(&program, "forward", &options).expect("loads");
    assert_eq!(method.kv_cache_f16(), c.kv_f16);
    // The caches as the device holds them (float16 where stored so).
    let to_f16 = |x: &f32| half::f16::from_f32(*x).to_f32();
    let mut caches = if c.kv_f16 {
        (initial.0.iter().map(to_f16).collect(), initial.1.iter().map(to_f16).collect())
    } else {
        initial
    };
    // The kernels compute in f32 (rounding once to float16 at the end in
    // float16); the reference in f64.
    let tol = if c.dtype == DType::F16 { 2e-3 } else { 1e-4 };
    let variant = match (c.dtype, c.kv_f16) {
        (DType::F16, _) => "f16",
        (_, true) => "f32_kvf16",
        _ => "f32",
    };
    let form = if c.rope { "_rope" } else { "" };
    let sg = subgroups && rt.subgroup_sizes().is_some();
    let width = if sg {
        "_sg"
    } else if c.long {
        ""
    } else {
        "_short"
    };
    let partials = format!("sdpa_split{width}{form}.{variant}");
    let combine = format!("sdpa_split_combine.{}", if c.dtype == DType::F16 { "f16" } else { "f32" });
    for (k, &(start, s)) in c.calls().iter().enumerate() {
        let seed = 10 * k as u32;
        let (hq, hkv, d) = (c.hq, c.hkv, c.d);
        let (q, kk, v) = (data(s * hq * d, seed), data(s * hkv * d, seed + 1), data(s * hkv * d, seed + 2));
        let (mut q_r, mut k_r, v_r): (Vec<f32>, Vec<f32>, Vec<f32>) = (
            q.iter().map(|&x| round(x)).collect(),
            kk.iter().map(|&x| round(x)).collect(),
            v.iter().map(|&x| round(x)).collect(),
        );
        if c.rope {
            q_r = rotate(&q_r, hq, d, start, round);
            k_r = rotate(&k_r, hkv, d, start, round);
        }
        let want = reference(c, &mut caches, start, (&q_r, &k_r, &v_r));
        method.set_profiling(k == 0);
        let (su, hq_u, hkv_u, du) = (s as u64, hq as u64, hkv as u64, d as u64);
        let outs = method
            .run(&[
                Tensor::from_f32(&[1, su, hq_u, du], &q),
                Tensor::from_f32(&[1, su, hkv_u, du], &kk),
                Tensor::from_f32(&[1, su, hkv_u, du], &v),
                int_tensor(DType::I64, &[1], &[start as i64]),
            ])
            .expect("runs");
        if k == 0 {
            assert_eq!(attention_kernels(&method), [partials.clone(), combine.clone()], "{c:?}");
        }
        assert_close(&f32s(&outs[0]), &want, tol, &format!("{c:?}, subgroups {subgroups}: {s} rows at {start}"));
    }
}

/// Both routes of one case; on lavapipe (subgroups of 8) the subgroup one
/// must be there to test, unless `ETWGPU_SUBGROUPS=0` took it away.
fn both_routes(c: Case) {
    let Some(rt) = crate::runtime() else { return };
    let switched_off = std::env::var(etwgpu_runtime::SUBGROUPS_ENV).is_ok_and(|v| v == "0");
    if rt.adapter_info().name.contains("llvmpipe") && !switched_off {
        assert!(rt.subgroup_sizes().is_some(), "lavapipe has subgroups");
    }
    check(c, true);
    check(c, false);
}

const F32: DType = DType::F32;

/// SmolLM2's shape: 9 query heads over 3 kv heads of 64.
#[test]
fn split_decode_gqa3_d64() {
    both_routes(Case { hq: 9, hkv: 3, d: 64, dtype: F32, kv_f16: false, rope: false, long: false });
}

/// GQA 4, head dim 128 (four `vec4`s of the values a lane at subgroups of
/// 8); and head dim 16, whose 4 `vec4`s let a subgroup of 8 take two keys
/// at once in the values (two key groups, as head dim 64 at NVIDIA's 32).
#[test]
fn split_decode_gqa4_d128() {
    both_routes(Case { hq: 8, hkv: 2, d: 128, dtype: F32, kv_f16: false, rope: false, long: false });
    both_routes(Case { hq: 4, hkv: 1, d: 16, dtype: F32, kv_f16: false, rope: false, long: false });
}

/// Float16 caches under float32 activations, and float16 throughout.
#[test]
fn split_decode_float16() {
    both_routes(Case { hq: 8, hkv: 2, d: 64, dtype: F32, kv_f16: true, rope: false, long: false });
    both_routes(Case { hq: 6, hkv: 2, d: 128, dtype: DType::F16, kv_f16: false, rope: false, long: false });
}

/// A cache of 4,200 rows (splits of 66 keys and more: the 256-wide
/// `sdpa_split.wgsl` on the workgroup route): SmolLM2's shape with RoPE,
/// and GQA 4 of 128 over float16 caches.
#[test]
fn split_decode_long_cache() {
    both_routes(Case { hq: 9, hkv: 3, d: 64, dtype: F32, kv_f16: false, rope: true, long: true });
    both_routes(Case { hq: 8, hkv: 2, d: 128, dtype: F32, kv_f16: true, rope: false, long: true });
}

/// RoPE fused into the attention (the `_rope` forms): SmolLM2's shape, and
/// GQA 4 of 128 over float16 caches.
#[test]
fn split_decode_with_rope() {
    both_routes(Case { hq: 9, hkv: 3, d: 64, dtype: F32, kv_f16: false, rope: true, long: false });
    both_routes(Case { hq: 8, hkv: 2, d: 128, dtype: F32, kv_f16: true, rope: true, long: false });
}
