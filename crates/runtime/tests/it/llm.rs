//! Crafted LLM graphs checked against small CPU references:
//! `sdpa_with_kv_cache` over prefill + decode runs on one loaded method
//! (odd head dims, GQA ratios 1, 2 and 4, positions up to the cache end, a
//! prompt of one token, contexts past one workgroup of keys, prompts over
//! several query and key tiles, fed whole or in chunks, in float32 and
//! float16, float16 caches under float32), split-KV decode (GQA 1 to 4,
//! several splits, up to 4 rows per call), `update_cache` with its
//! position as an Int, a SymInt or a tensor element, RMS norm and RoPE,
//! 4-bit linear and embedding, and the 8da4w pair.

use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
use etwgpu_format::{DType, Program};
use etwgpu_runtime::{Error, LoadOptions, LoadedMethod, LowerError, Tensor};

use crate::{data, f32s};

fn load(g: GraphBuilder) -> Option<LoadedMethod> {
    load_with(g, &LoadOptions::default())
}

fn load_with(g: GraphBuilder, options: &LoadOptions) -> Option<LoadedMethod> {
    let rt = crate::runtime()?;
    let program = Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("crafted program parses");
    Some(rt.load_with(&program, "forward", options).expect("loads"))
}

pub(crate) fn int_tensor(dtype: DType, shape: &[u64], values: &[i64]) -> Tensor {
    let bytes = match dtype {
        DType::I64 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::I32 => values.iter().flat_map(|v| (*v as i32).to_le_bytes()).collect(),
        _ => panic!("not an int dtype"),
    };
    Tensor::new(dtype, shape.to_vec(), bytes).expect("valid")
}

/// The tiny Llama fixture's `forward` inputs for one decode step: token
/// `t` (`int64 [1, 1]`) and position `p` (`int64 [1]`).
fn tok(t: i64) -> Tensor {
    int_tensor(DType::I64, &[1, 1], &[t])
}

fn pos(p: i64) -> Tensor {
    int_tensor(DType::I64, &[1], &[p])
}

pub(crate) fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol + tol * w.abs(), "{what}: element {i}: got {g}, want {w}");
    }
}

/// Attention dims.
#[derive(Debug, Clone, Copy)]
struct Attn {
    n_heads: usize,
    n_kv_heads: usize,
    head_dim: usize,
    cache_len: usize,
    max_seq: usize,
}

/// `sdpa_with_kv_cache(q, k, v, k_cache, v_cache, pos[0], Int 1, None, 0,
/// True, None)` with q/k/v and `pos` as inputs and zero caches sharing one
/// named key, or float32 caches starting as `caches`; q/k/v/out and the
/// caches are `dtype` on the device, float32 at the method's inputs and
/// outputs.
fn sdpa_graph(a: Attn, dtype: DType, caches: Option<(&[f32], &[f32])>) -> GraphBuilder {
    let (hq, hkv, d, c, s) =
        (a.n_heads as u64, a.n_kv_heads as u64, a.head_dim as u64, a.cache_len as u64, a.max_seq as u64);
    let mut g = GraphBuilder::new();
    let q = g.tensor_staged(dtype, DType::F32, &[1, s, hq, d]);
    let k = g.tensor_staged(dtype, DType::F32, &[1, s, hkv, d]);
    let v = g.tensor_staged(dtype, DType::F32, &[1, s, hkv, d]);
    let pos = g.tensor_staged(DType::I32, DType::I64, &[1]);
    let elem_bytes = if dtype == DType::F16 { 2 } else { 4 };
    let zeros = vec![0u8; (c * hkv * d * elem_bytes) as usize];
    let (k_bytes, v_bytes) = match caches {
        Some((k, v)) => (f32_bytes(k), f32_bytes(v)),
        None => (zeros.clone(), zeros),
    };
    let k_cache = g.constant(dtype, &[1, c, hkv, d], &k_bytes);
    let v_cache = g.constant(dtype, &[1, c, hkv, d], &v_bytes);
    let (zero, one, causal, null) = (g.int(0), g.int(1), g.bool(true), g.null());
    let start = g.sym_int();
    let out = g.tensor_staged(dtype, DType::F32, &[1, s, hq, d]);
    g.op("et_vk.select_as_symint.default", &[pos, zero, zero, start])
        .op("sdpa_with_kv_cache.default", &[q, k, v, k_cache, v_cache, start, one, null, zero, causal, null, out]);
    g.inputs(&[q, k, v, pos]).outputs(&[out]);
    g
}

/// CPU reference: appends `k`, `v` (`[S, Hkv, D]`) to the caches at
/// `start` (rounded to float16 first with `f16_cache`) and returns causal
/// attention of `q` (`[S, Hq, D]`).
fn sdpa_ref(
    a: Attn,
    caches: &mut (Vec<f32>, Vec<f32>),
    start: usize,
    (q, k, v): (&[f32], &[f32], &[f32]),
    f16_cache: bool,
) -> Vec<f32> {
    let (hq, hkv, d) = (a.n_heads, a.n_kv_heads, a.head_dim);
    let s = q.len() / (hq * d);
    let row = hkv * d;
    let store = |x: &f32| if f16_cache { half::f16::from_f32(*x).to_f32() } else { *x };
    for (cache, new) in [(&mut caches.0, k), (&mut caches.1, v)] {
        for (c, x) in cache[start * row..(start + s) * row].iter_mut().zip(new) {
            *c = store(x);
        }
    }
    let scale = 1.0 / (d as f64).sqrt();
    let mut out = vec![0f32; q.len()];
    for i in 0..s {
        for h in 0..hq {
            let kvh = h / (hq / hkv);
            let qb = (i * hq + h) * d;
            let scores: Vec<f64> = (0..=start + i)
                .map(|c| {
                    let kb = (c * hkv + kvh) * d;
                    (0..d).map(|j| f64::from(q[qb + j]) * f64::from(caches.0[kb + j])).sum::<f64>() * scale
                })
                .collect();
            let m = scores.iter().copied().fold(f64::MIN, f64::max);
            let sum: f64 = scores.iter().map(|x| (x - m).exp()).sum();
            for j in 0..d {
                let acc: f64 = scores
                    .iter()
                    .enumerate()
                    .map(|(c, x)| (x - m).exp() / sum * f64::from(caches.1[(c * hkv + kvh) * d + j]))
                    .sum();
                out[qb + j] = acc as f32;
            }
        }
    }
    out
}

/// Prefill of `prompt` tokens at 0, then one-token decode steps until the
/// cache is full, each checked against [`sdpa_ref`]; then a step past the
/// end is rejected with a typed error.
fn check_sdpa(a: Attn, prompt: usize) {
    check_sdpa_chunks(a, &[prompt]);
}

/// [`check_sdpa`] with the prompt fed in calls of `chunks` tokens (chunked
/// prefill: every call after the first starts past 0).
fn check_sdpa_chunks(a: Attn, chunks: &[usize]) {
    check_sdpa_as(a, chunks, DType::F32, false);
}

/// [`check_sdpa_chunks`] with `dtype` (float32 or float16) on the device:
/// for float16 the reference takes the inputs rounded to float16, and the
/// tolerance is float16's (the kernels compute in f32 and round once).
/// With `f16_cache` (float32 only) the caches are stored as float16 (the
/// device has SHADER_F16; lavapipe does), and the reference rounds keys
/// and values as they enter its cache.
fn check_sdpa_as(a: Attn, chunks: &[usize], dtype: DType, f16_cache: bool) {
    check_sdpa_from(a, None, 0, (chunks, 1), dtype, f16_cache);
}

/// [`check_sdpa_as`] from position `first` over float32 caches starting as
/// `caches` (the rows before `first` stand for an earlier prompt; `None`:
/// zeros), in calls of `chunks` tokens, then of `step` tokens (fewer at the
/// end) until the cache is full, each checked against [`sdpa_ref`]; then a
/// step past the end is rejected with a typed error.
fn check_sdpa_from(
    a: Attn,
    caches: Option<(Vec<f32>, Vec<f32>)>,
    first: usize,
    (chunks, step): (&[usize], usize),
    dtype: DType,
    f16_cache: bool,
) {
    let graph = sdpa_graph(a, dtype, caches.as_ref().map(|(k, v)| (k.as_slice(), v.as_slice())));
    let options = LoadOptions { kv_cache_f16: f16_cache, ..LoadOptions::default() };
    let Some(mut method) = load_with(graph, &options) else { return };
    assert_eq!(method.kv_cache_f16(), f16_cache, "caches stored as float16");
    let (hq, hkv, d) = (a.n_heads, a.n_kv_heads, a.head_dim);
    let (round, tol): (fn(f32) -> f32, f32) = match dtype {
        DType::F16 => (|x| half::f16::from_f32(x).to_f32(), 2e-3),
        _ => (|x| x, 1e-4),
    };
    let store = |x: Vec<f32>| if f16_cache { x.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect() } else { x };
    let zeros = || vec![0f32; a.cache_len * hkv * d];
    let mut caches = caches.map_or_else(|| (zeros(), zeros()), |(k, v)| (store(k), store(v)));
    let mut start = first;
    let mut seed = 0;
    let mut sizes = chunks.iter().copied();
    while start < a.cache_len {
        let s = sizes.next().unwrap_or(step.min(a.cache_len - start));
        seed += 3;
        let (q, k, v) = (data(s * hq * d, seed), data(s * hkv * d, seed + 1), data(s * hkv * d, seed + 2));
        let rounded = |x: &[f32]| x.iter().map(|&x| round(x)).collect::<Vec<f32>>();
        let want = sdpa_ref(a, &mut caches, start, (&rounded(&q), &rounded(&k), &rounded(&v)), f16_cache);
        let (su, hq_u, hkv_u, du) = (s as u64, hq as u64, hkv as u64, d as u64);
        let outs = method
            .run(&[
                Tensor::from_f32(&[1, su, hq_u, du], &q),
                Tensor::from_f32(&[1, su, hkv_u, du], &k),
                Tensor::from_f32(&[1, su, hkv_u, du], &v),
                int_tensor(DType::I64, &[1], &[start as i64]),
            ])
            .expect("runs");
        assert_eq!(outs[0].shape, [1, su, hq_u, du]);
        // Split-KV attention for up to 4 rows of vec4 head dims up to 256:
        // the partials (which also write the new rows into the caches) and
        // the combine; else the cache update, then one kernel.
        assert_eq!(method.n_dispatches(), 2, "{a:?} at position {start}: dispatches");
        assert_close(&f32s(&outs[0]), &want, tol, &format!("{a:?} in {dtype:?} at position {start}"));
        start += s;
    }
    let one = |n| Tensor::from_f32(&[1, 1, n as u64, d as u64], &vec![0.0; n * d]);
    let past = method.run(&[one(hq), one(hkv), one(hkv), int_tensor(DType::I64, &[1], &[a.cache_len as i64])]);
    assert!(
        matches!(past, Err(Error::Lower(LowerError::Op { ref op, .. })) if op == "sdpa_with_kv_cache.default"),
        "{past:?}"
    );
}

#[test]
fn sdpa_odd_head_dim_without_grouping() {
    check_sdpa(Attn { n_heads: 2, n_kv_heads: 2, head_dim: 5, cache_len: 9, max_seq: 8 }, 4);
}

#[test]
fn sdpa_grouped_query_heads_from_a_one_token_prompt() {
    check_sdpa(Attn { n_heads: 4, n_kv_heads: 2, head_dim: 6, cache_len: 7, max_seq: 6 }, 1);
}

#[test]
fn sdpa_context_and_head_dim_past_one_workgroup() {
    // 70 keys and 70 dims: two chunks of 64 keys, two blocks of 64 dims.
    check_sdpa(Attn { n_heads: 3, n_kv_heads: 1, head_dim: 70, cache_len: 70, max_seq: 67 }, 67);
}

/// How `update_cache`'s `start_pos` arrives.
#[derive(Debug, Clone, Copy)]
enum StartPos {
    /// An `Int` baked into the graph.
    Int(i64),
    /// A `SymInt` no op writes (its stored value, 0).
    SymInt,
    /// A `SymInt` read from the `input_pos` input by `et_vk.select_as_symint`.
    FromInput,
}

/// `update_cache(value [1,S,2,4], cache [1,8,2,4], start_pos, →[1])` then
/// `out = cache + cache`: value (and, with [`StartPos::FromInput`], `pos`)
/// as inputs, a zero constant cache.
fn update_cache_graph(start_pos: StartPos) -> GraphBuilder {
    let mut g = GraphBuilder::new();
    let value = g.tensor(DType::F32, &[1, 4, 2, 4]);
    let cache = g.constant(DType::F32, &[1, 8, 2, 4], &[0u8; 8 * 2 * 4 * 4]);
    let (dummy, one, out) = (g.tensor(DType::F32, &[1]), g.int(1), g.tensor(DType::F32, &[1, 8, 2, 4]));
    let mut inputs = vec![value];
    let start = match start_pos {
        StartPos::Int(p) => g.int(p),
        StartPos::SymInt => g.sym_int(),
        StartPos::FromInput => {
            let (pos, zero, start) = (g.tensor_staged(DType::I32, DType::I64, &[1]), g.int(0), g.sym_int());
            g.op("et_vk.select_as_symint.default", &[pos, zero, zero, start]);
            inputs.push(pos);
            start
        }
    };
    g.op("update_cache.default", &[value, cache, start, dummy]).op("aten.add.Tensor", &[cache, cache, one, out]);
    g.inputs(&inputs).outputs(&[out]);
    g
}

/// `update_cache` with `start_pos` as an `Int`, a `SymInt` and a tensor
/// element (`et_vk.select_as_symint`): each run writes `S` rows (from the
/// value's live shape) at the position, in place, and the writes of earlier
/// runs stay; a write past the cache end is a typed error.
#[test]
fn update_cache_start_pos_as_int_symint_or_tensor_element() {
    let row = 2 * 4;
    for (start_pos, runs) in [
        (StartPos::Int(4), &[(3, 4), (4, 4)][..]),
        (StartPos::SymInt, &[(4, 0), (1, 0)][..]),
        (StartPos::FromInput, &[(3, 0), (1, 3), (4, 4)][..]),
    ] {
        let Some(mut method) = load(update_cache_graph(start_pos)) else { return };
        let mut cache = vec![0f32; 8 * row];
        for (k, &(s, pos)) in runs.iter().enumerate() {
            let value = data(s * row, 7 + k as u32);
            cache[pos * row..(pos + s) * row].copy_from_slice(&value);
            let mut inputs = vec![Tensor::from_f32(&[1, s as u64, 2, 4], &value)];
            if let StartPos::FromInput = start_pos {
                inputs.push(int_tensor(DType::I64, &[1], &[pos as i64]));
            }
            let outs = method.run(&inputs).expect("runs");
            let want: Vec<f32> = cache.iter().map(|x| x + x).collect();
            assert_close(&f32s(&outs[0]), &want, 0.0, &format!("{start_pos:?}, run {k} (S {s} at {pos})"));
        }
        if let StartPos::FromInput = start_pos {
            let past = method.run(&[Tensor::from_f32(&[1, 2, 2, 4], &[0.0; 16]), int_tensor(DType::I64, &[1], &[7])]);
            assert!(
                matches!(past, Err(Error::Lower(LowerError::Op { ref op, .. })) if op == "update_cache.default"),
                "{past:?}"
            );
        }
    }
    // A baked position that leaves no room for the value's largest S: 5 + 4 > 8.
    let Some(rt) = crate::runtime() else { return };
    let program = Program::from_bytes(ProgramBuilder::single_delegate(update_cache_graph(StartPos::Int(5))).to_bytes())
        .expect("crafted program parses");
    let past = rt.load(&program, "forward");
    assert!(
        matches!(past, Err(Error::Lower(LowerError::Op { ref op, .. })) if op == "update_cache.default"),
        "{past:?}"
    );
}

/// The one-pass kernel (`sdpa_online.wgsl`, head dims a multiple of 4 up
/// to 256; the prompt of 260 goes to `sdpa_prefill.wgsl`): GQA ratios 1, 2
/// and 4, one-token and long prompts, contexts past one 256-key chunk,
/// positions to the cache end.
#[test]
fn sdpa_one_pass_kernel() {
    check_sdpa(Attn { n_heads: 8, n_kv_heads: 2, head_dim: 64, cache_len: 300, max_seq: 260 }, 260);
    check_sdpa(Attn { n_heads: 2, n_kv_heads: 2, head_dim: 8, cache_len: 9, max_seq: 4 }, 1);
    check_sdpa(Attn { n_heads: 4, n_kv_heads: 2, head_dim: 128, cache_len: 20, max_seq: 8 }, 5);
    check_sdpa(Attn { n_heads: 2, n_kv_heads: 1, head_dim: 256, cache_len: 12, max_seq: 4 }, 3);
}

/// Split-KV decode (`sdpa_split.wgsl` then `sdpa_split_combine.wgsl`,
/// calls of at most 4 query rows): GQA ratios 1, 2 and 4, head dims 64 and
/// 128 (and 16 and 8), contexts of several splits with a ragged last one,
/// one to four rows per call, positions up to the cache end. The caches
/// start filled (an earlier prompt), so decoding starts deep in the
/// context without a long prefill.
#[test]
fn sdpa_split_kv_decode() {
    let run = |a: Attn, first: usize, prompt: usize, step: usize| {
        let n = a.cache_len * a.n_kv_heads * a.head_dim;
        check_sdpa_from(a, Some((data(n, 101), data(n, 102))), first, (&[prompt], step), DType::F32, false);
    };
    // GQA 4, D 64: 8 splits of 113..125 keys, one token per call.
    run(Attn { n_heads: 8, n_kv_heads: 2, head_dim: 64, cache_len: 1000, max_seq: 4 }, 960, 1, 1);
    // GQA 2, D 128: 5..6 splits, a ragged last one.
    run(Attn { n_heads: 4, n_kv_heads: 2, head_dim: 128, cache_len: 700, max_seq: 4 }, 660, 1, 1);
    // GQA 1, D 64, three rows per call (four query vectors per workgroup
    // across rows), the last call of one row.
    run(Attn { n_heads: 4, n_kv_heads: 4, head_dim: 64, cache_len: 1100, max_seq: 4 }, 1040, 3, 3);
    // GQA 4 with two and four rows per call (two workgroups per kv head).
    run(Attn { n_heads: 8, n_kv_heads: 2, head_dim: 64, cache_len: 640, max_seq: 4 }, 600, 2, 4);
    // GQA 3 (a group that is not a power of two), D 16.
    run(Attn { n_heads: 6, n_kv_heads: 2, head_dim: 16, cache_len: 300, max_seq: 4 }, 250, 4, 1);
    // Past 64 splits of 256 keys: two tiles per split, the second ragged.
    run(Attn { n_heads: 1, n_kv_heads: 1, head_dim: 8, cache_len: 16_500, max_seq: 4 }, 16_470, 1, 1);
    // A prefill of 5 rows (the one-pass kernel), then split decode from
    // one split (128 keys) to two.
    check_sdpa(Attn { n_heads: 4, n_kv_heads: 1, head_dim: 64, cache_len: 140, max_seq: 5 }, 5);
    // Float16 caches (`f32_kvf16`), GQA 4 with two rows per call.
    let n = 700 * 2 * 64;
    let a = Attn { n_heads: 8, n_kv_heads: 2, head_dim: 64, cache_len: 700, max_seq: 4 };
    check_sdpa_from(a, Some((data(n, 103), data(n, 104))), 650, (&[1], 2), DType::F32, true);
}

/// Float16 caches under float32 activations (`f32_kvf16` kernels): the
/// reference rounds keys and values to float16 as they enter its cache,
/// then computes in f64, so only summation order differs (same 1e-4).
/// Every attention kernel (tiled prefill, one-pass, the general one for
/// odd head dims), GQA 1, 2 and 4.
#[test]
fn sdpa_float16_kv_cache() {
    let f16_cache = |a, chunks: &[usize]| check_sdpa_as(a, chunks, DType::F32, true);
    f16_cache(Attn { n_heads: 8, n_kv_heads: 2, head_dim: 64, cache_len: 300, max_seq: 260 }, &[260]);
    f16_cache(Attn { n_heads: 4, n_kv_heads: 1, head_dim: 16, cache_len: 20, max_seq: 8 }, &[1]);
    f16_cache(Attn { n_heads: 2, n_kv_heads: 2, head_dim: 5, cache_len: 9, max_seq: 8 }, &[4]);
    f16_cache(Attn { n_heads: 8, n_kv_heads: 2, head_dim: 64, cache_len: 72, max_seq: 37 }, &[37, 29]);
}

/// The tiled prefill kernel (`sdpa_prefill.wgsl`, prompts of more than 8
/// tokens, head dims a multiple of 4 up to 128): prompts over several
/// 16-row query tiles and 16-key tiles with a ragged end, GQA ratios 1, 2
/// and 4, head dims of one partial 64-dim chunk (8, 20), one (64) and two
/// (100, 128); then decode to the cache end.
#[test]
fn sdpa_prefill_kernel() {
    check_sdpa(Attn { n_heads: 2, n_kv_heads: 2, head_dim: 64, cache_len: 90, max_seq: 83 }, 83);
    check_sdpa(Attn { n_heads: 4, n_kv_heads: 2, head_dim: 128, cache_len: 75, max_seq: 70 }, 70);
    check_sdpa(Attn { n_heads: 4, n_kv_heads: 1, head_dim: 8, cache_len: 50, max_seq: 45 }, 45);
    check_sdpa(Attn { n_heads: 2, n_kv_heads: 1, head_dim: 20, cache_len: 36, max_seq: 33 }, 33);
    check_sdpa(Attn { n_heads: 2, n_kv_heads: 2, head_dim: 100, cache_len: 52, max_seq: 48 }, 48);
    // Exactly one query tile, and the smallest prompt that takes the kernel.
    check_sdpa(Attn { n_heads: 2, n_kv_heads: 1, head_dim: 64, cache_len: 18, max_seq: 16 }, 16);
    check_sdpa(Attn { n_heads: 2, n_kv_heads: 1, head_dim: 64, cache_len: 11, max_seq: 9 }, 9);
}

/// Chunked prefill: prompt chunks after the first start past 0, so their
/// query tiles begin mid key tile (`start_pos` not a multiple of 16) and
/// see every earlier key unmasked; then decode to the cache end.
#[test]
fn sdpa_prefill_in_chunks() {
    check_sdpa_chunks(Attn { n_heads: 8, n_kv_heads: 2, head_dim: 64, cache_len: 72, max_seq: 37 }, &[37, 29]);
    check_sdpa_chunks(Attn { n_heads: 4, n_kv_heads: 1, head_dim: 128, cache_len: 70, max_seq: 40 }, &[9, 40, 16]);
    // A first chunk short enough for the per-row kernel, then a tiled one.
    check_sdpa_chunks(Attn { n_heads: 2, n_kv_heads: 2, head_dim: 20, cache_len: 45, max_seq: 33 }, &[5, 33]);
}

/// The float16 variants (`shader-f16` devices; held as float32 elsewhere):
/// the tiled prefill kernel in two chunks, then decode.
#[test]
fn sdpa_prefill_in_float16() {
    check_sdpa_as(
        Attn { n_heads: 4, n_kv_heads: 2, head_dim: 64, cache_len: 60, max_seq: 30 },
        &[30, 27],
        DType::F16,
        false,
    );
}

#[test]
fn rms_norm_and_rotary_embedding() {
    let (b, s, hq, hkv, d) = (2usize, 3usize, 3usize, 1usize, 6usize);
    let n = 7usize;
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[3, n as u64]);
    let wv = data(n, 11);
    let w = g.constant(DType::F32, &[n as u64], &f32_bytes(&wv));
    let eps = g.double(1e-5);
    let normed = g.tensor(DType::F32, &[3, n as u64]);
    let shape = |h: usize| [b as u64, s as u64, h as u64, d as u64];
    let xq = g.tensor(DType::F32, &shape(hq));
    let xk = g.tensor(DType::F32, &shape(hkv));
    let cos = g.tensor(DType::F32, &[s as u64, d as u64 / 2]);
    let sin = g.tensor(DType::F32, &[s as u64, d as u64 / 2]);
    let q_out = g.tensor(DType::F32, &shape(hq));
    let k_out = g.tensor(DType::F32, &shape(hkv));
    let outs = g.value_list(&[q_out, k_out]);
    g.op("et_vk.rms_norm.default", &[x, w, eps, normed])
        .op("et_vk.apply_rotary_emb.default", &[xq, xk, cos, sin, outs]);
    g.inputs(&[x, xq, xk, cos, sin]).outputs(&[normed, q_out, k_out]);
    let Some(mut method) = load(g) else { return };
    let xv = data(3 * n, 12);
    let (qv, kv) = (data(b * s * hq * d, 13), data(b * s * hkv * d, 14));
    let (cv, sv) = (data(s * d / 2, 15), data(s * d / 2, 16));
    let outs = method
        .run(&[
            Tensor::from_f32(&[3, n as u64], &xv),
            Tensor::from_f32(&shape(hq), &qv),
            Tensor::from_f32(&shape(hkv), &kv),
            Tensor::from_f32(&[s as u64, d as u64 / 2], &cv),
            Tensor::from_f32(&[s as u64, d as u64 / 2], &sv),
        ])
        .expect("runs");
    let mut want = Vec::new();
    for r in 0..3 {
        let row = &xv[r * n..(r + 1) * n];
        let rstd = 1.0 / (row.iter().map(|v| v * v).sum::<f32>() / n as f32 + 1e-5).sqrt();
        want.extend(row.iter().zip(&wv).map(|(v, w)| v * rstd * w));
    }
    assert_close(&f32s(&outs[0]), &want, 1e-5, "rms_norm");
    let rope = |x: &[f32], h: usize| {
        let mut out = x.to_vec();
        for (p, pair) in out.chunks_mut(2).enumerate() {
            let (i, t) = (p % (d / 2), (p / (d / 2) / h) % s);
            let (c, sn) = (cv[t * d / 2 + i], sv[t * d / 2 + i]);
            let (re, im) = (pair[0], pair[1]);
            pair[0] = re * c - im * sn;
            pair[1] = re * sn + im * c;
        }
        out
    };
    assert_close(&f32s(&outs[1]), &rope(&qv, hq), 1e-5, "rope q");
    assert_close(&f32s(&outs[2]), &rope(&kv, hkv), 1e-5, "rope k");
}

/// Packs int4 weights `w [N, K]` (-8..7) as the exporter does: K padded to
/// a multiple of 8, +8, even k in the low nibble.
pub(crate) fn pack_q4(w: &[i8], n: usize, k: usize) -> (Vec<u8>, usize) {
    let k_packed = k.next_multiple_of(8) / 2;
    let mut out = vec![0u8; n * k_packed];
    for r in 0..n {
        for j in 0..k_packed {
            let at = |kk: usize| if kk < k { (w[r * k + kk] + 8) as u8 } else { 8 };
            out[r * k_packed + j] = at(2 * j + 1) << 4 | at(2 * j);
        }
    }
    (out, k_packed)
}

pub(crate) fn int4s(n: usize, seed: u32) -> Vec<i8> {
    data(n, seed).iter().map(|v| ((v * 4.0).floor() as i8).clamp(-8, 7)).collect()
}

/// A 4-bit linear `[N, K]` with group `gs`: packed weights, `[G, N_pad]`
/// scales and the dequantized `[N, K]` weights.
pub(crate) struct Q4Linear {
    pub n: usize,
    pub k: usize,
    pub k_packed: usize,
    pub n_pad: usize,
    pub n_groups: usize,
    pub packed: Vec<u8>,
    pub scales: Vec<f32>,
    pub dequant: Vec<f32>,
}

pub(crate) fn q4_linear(n: usize, k: usize, gs: usize, seed: u32) -> Q4Linear {
    let w = int4s(n * k, seed);
    let (packed, k_packed) = pack_q4(&w, n, k);
    let n_groups = k.next_multiple_of(8).div_ceil(gs);
    let n_pad = n.next_multiple_of(4);
    let raw = data(n_groups * n_pad, seed + 1);
    let scales: Vec<f32> = raw.iter().map(|s| 0.05 + s.abs() * 0.05).collect();
    let dequant = (0..n * k).map(|i| f32::from(w[i]) * scales[(i % k / gs) * n_pad + i / k]).collect();
    Q4Linear { n, k, k_packed, n_pad, n_groups, packed, scales, dequant }
}

pub(crate) fn matmul_ref(x: &[f32], w: &Q4Linear, bias: &[f32]) -> Vec<f32> {
    let m = x.len() / w.k;
    (0..m * w.n)
        .map(|i| {
            let (r, c) = (i / w.n, i % w.n);
            (0..w.k).map(|kk| x[r * w.k + kk] * w.dequant[c * w.k + kk]).sum::<f32>() + bias[c]
        })
        .collect()
}

#[test]
fn q4_linear_with_bias_and_q4_embedding() {
    let (m, gs) = (3usize, 8usize);
    let w = q4_linear(5, 20, gs, 21);
    let bias = data(w.n_pad, 23);
    let (vocab, dim) = (6usize, 16usize);
    let ew = int4s(vocab * dim, 24);
    let (epacked, ebytes) = pack_q4(&ew, vocab, dim);
    let escales: Vec<f32> = data(vocab * dim / gs, 25).iter().map(|s| 0.1 + s.abs() * 0.1).collect();
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, m as u64, w.k as u64]);
    let wt = g.constant(DType::U8, &[w.n as u64, w.k_packed as u64], &w.packed);
    let st = g.constant(DType::F32, &[w.n_groups as u64, w.n_pad as u64], &f32_bytes(&w.scales));
    let bt = g.constant(DType::F32, &[w.n_pad as u64], &f32_bytes(&bias));
    let gs_v = g.int(gs as i64);
    let out = g.tensor(DType::F32, &[1, m as u64, w.n as u64]);
    let idx = g.tensor_staged(DType::I32, DType::I64, &[2, 3]);
    let ewt = g.constant(DType::U8, &[vocab as u64, ebytes as u64], &epacked);
    let est = g.constant(DType::F32, &[vocab as u64, (dim / gs) as u64], &f32_bytes(&escales));
    let t = g.bool(true);
    let emb = g.tensor(DType::F32, &[2, 3, dim as u64]);
    g.op("et_vk.linear_q4gsw.default", &[x, wt, st, gs_v, bt, out])
        .op("et_vk.embedding_q4gsw.default", &[ewt, est, gs_v, idx, t, emb]);
    g.inputs(&[x, idx]).outputs(&[out, emb]);
    let Some(mut method) = load(g) else { return };
    let xv = data(m * w.k, 22);
    let ids = [5i64, 0, 3, 3, 1, 2];
    let outs = method
        .run(&[Tensor::from_f32(&[1, m as u64, w.k as u64], &xv), int_tensor(DType::I64, &[2, 3], &ids)])
        .expect("runs");
    assert_eq!(outs[0].shape, [1, m as u64, w.n as u64]);
    assert_close(&f32s(&outs[0]), &matmul_ref(&xv, &w, &bias), 1e-4, "linear_q4gsw");
    let want: Vec<f32> = ids
        .iter()
        .flat_map(|&t| {
            let (t, ew, escales) = (t as usize, &ew, &escales);
            (0..dim).map(move |d| f32::from(ew[t * dim + d]) * escales[t * (dim / gs) + d / gs])
        })
        .collect();
    assert_eq!(outs[1].shape, [2, 3, dim as u64]);
    assert_close(&f32s(&outs[1]), &want, 1e-6, "embedding_q4gsw");
}

#[test]
fn dynamic_int8_activations_times_q4_weights() {
    // Unfused, the one workgroup an output kernel
    // (`linear_dq8ca_q4gsw.wgsl`); fused, the input's rounding
    // (`dq8_rows.wgsl`) and the 4-bit linear's kernels.
    for fuse in [false, true] {
        // 5 rows (not a multiple of the 4 zero points per word), one of
        // them all positive and one all zero; K = 24 in groups of 8 (the
        // general 4-bit kernel when fused).
        dynamic_int8_times_q4(5, 6, 24, 8, fuse);
        // K = 64 in groups of 32: fused, the fast 4-bit routes (the GEMV
        // at one row, the GEMM at five), the weights word-major.
        dynamic_int8_times_q4(1, 40, 64, 32, fuse);
        dynamic_int8_times_q4(5, 40, 64, 32, fuse);
    }
}

/// [`dynamic_int8_activations_times_q4_weights`] at `m` rows of `k`
/// inputs, `n` outputs, groups of `gs`, loaded with or without fusion.
fn dynamic_int8_times_q4(m: usize, n: usize, k: usize, gs: usize, fuse: bool) {
    let w = q4_linear(n, k, gs, 31);
    let mut xv = data(m * w.k, 32);
    if m > 3 {
        xv[w.k..2 * w.k].iter_mut().for_each(|v| *v = v.abs() + 0.1);
        xv[3 * w.k..4 * w.k].iter_mut().for_each(|v| *v = 0.0);
    }
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, m as u64, w.k as u64]);
    let mapping = g.string("ASYMMETRIC");
    let block = g.int_list(&[1, 1, w.k as i64]);
    let null = g.null();
    let (qmin, qmax) = (g.int(-128), g.int(127));
    let f = g.bool(false);
    let scale = g.tensor(DType::F32, &[1, m as u64]);
    let zp = g.tensor(DType::I8, &[1, m as u64]);
    let qparams = g.value_list(&[scale, zp]);
    let wt = g.constant(DType::U8, &[w.n as u64, w.k_packed as u64], &w.packed);
    let sums = g.constant(DType::I32, &[w.n_groups as u64, w.n as u64], &vec![0u8; w.n_groups * w.n * 4]);
    let st = g.constant(DType::F32, &[w.n_groups as u64, w.n_pad as u64], &f32_bytes(&w.scales));
    let gs_v = g.int(gs as i64);
    let out = g.tensor(DType::F32, &[1, m as u64, w.n as u64]);
    g.op("torchao.choose_qparams_affine.default", &[x, mapping, block, null, qmin, qmax, null, null, null, f, qparams])
        .op("et_vk.linear_dq8ca_q4gsw.default", &[x, scale, zp, wt, sums, st, gs_v, null, out]);
    g.inputs(&[x]).outputs(&[out, scale, zp]);
    let Some(mut method) = load_with(g, &LoadOptions { fuse, ..LoadOptions::default() }) else { return };
    let outs = method.run(&[Tensor::from_f32(&[1, m as u64, w.k as u64], &xv)]).expect("runs");
    let mut want_scale = Vec::new();
    let mut want_zp = Vec::new();
    let mut fake_quant = Vec::new();
    for r in 0..m {
        let row = &xv[r * w.k..(r + 1) * w.k];
        let lo = row.iter().copied().fold(0f32, f32::min);
        let hi = row.iter().copied().fold(0f32, f32::max);
        let s = ((hi - lo) / 255.0).max(f32::MIN_POSITIVE);
        let z = (-128.0 - (lo / s).round_ties_even()).clamp(-128.0, 127.0);
        want_scale.push(s);
        want_zp.push(f64::from(z));
        fake_quant.extend(
            row.iter().map(|v| ((v * (1.0 / s)).round_ties_even() + z).clamp(-128.0, 127.0) - z).map(|q| q * s),
        );
    }
    assert_close(&f32s(&outs[1]), &want_scale, 1e-6, "scale");
    assert_eq!(outs[2].to_f64_vec(), want_zp, "zero points");
    assert_eq!(outs[0].shape, [1, m as u64, w.n as u64]);
    assert_close(&f32s(&outs[0]), &matmul_ref(&fake_quant, &w, &vec![0.0; w.n]), 1e-4, "linear_dq8ca_q4gsw");
}

#[test]
fn float16_qparams_of_an_all_zero_row_stay_finite() {
    // With float16 activations the default eps is float16's smallest
    // normal: float32's would round the scale to 0 and the row to NaN.
    let (m, gs) = (2usize, 8usize);
    let w = q4_linear(4, 16, gs, 41);
    let mut xv = data(m * w.k, 42);
    xv[w.k..].iter_mut().for_each(|v| *v = 0.0);
    let mut g = GraphBuilder::new();
    let x = g.tensor_staged(DType::F16, DType::F32, &[m as u64, w.k as u64]);
    let mapping = g.string("ASYMMETRIC");
    let block = g.int_list(&[1, w.k as i64]);
    let null = g.null();
    let (qmin, qmax) = (g.int(-128), g.int(127));
    let f = g.bool(false);
    let scale = g.tensor_staged(DType::F16, DType::F32, &[m as u64]);
    let zp = g.tensor(DType::I8, &[m as u64]);
    let qparams = g.value_list(&[scale, zp]);
    let wt = g.constant(DType::U8, &[w.n as u64, w.k_packed as u64], &w.packed);
    let sums = g.constant(DType::I32, &[w.n_groups as u64, w.n as u64], &vec![0u8; w.n_groups * w.n * 4]);
    let half_scales: Vec<u8> = w.scales.iter().flat_map(|s| half::f16::from_f32(*s).to_le_bytes()).collect();
    let st = g.constant(DType::F16, &[w.n_groups as u64, w.n_pad as u64], &half_scales);
    let gs_v = g.int(gs as i64);
    let out = g.tensor_staged(DType::F16, DType::F32, &[m as u64, w.n as u64]);
    g.op("torchao.choose_qparams_affine.default", &[x, mapping, block, null, qmin, qmax, null, null, null, f, qparams])
        .op("et_vk.linear_dq8ca_q4gsw.default", &[x, scale, zp, wt, sums, st, gs_v, null, out]);
    g.inputs(&[x]).outputs(&[out, scale, zp]);
    let Some(mut method) = load(g) else { return };
    let outs = method.run(&[Tensor::from_f32(&[m as u64, w.k as u64], &xv)]).expect("runs");
    let scales = f32s(&outs[1]);
    assert_eq!(scales[1], 6.103_515_6e-5, "zero row scale");
    assert_eq!(outs[2].to_f64_vec()[1], -128.0, "zero row zero point");
    let got = f32s(&outs[0]);
    assert!(got.iter().all(|v| v.is_finite()), "{got:?}");
    assert_eq!(&got[w.n..], &vec![0.0; w.n][..]);
}

/// The device argmax of rows wider than one workgroup's chunk (9000 >
/// 4096: three chunks, the last partial) gives PyTorch's index: the
/// largest value, the smaller index on ties across chunks, the first NaN
/// over any number; and a row narrower than one chunk.
#[test]
fn device_argmax_takes_wide_rows_ties_and_nans() {
    for n in [9000usize, 5] {
        let rows = 4usize;
        let mut g = GraphBuilder::new();
        let x = g.tensor(DType::F32, &[rows as u64, n as u64]);
        let alpha = g.double(1.0);
        let out = g.tensor(DType::F32, &[rows as u64, n as u64]);
        g.op("aten.add.Tensor", &[x, x, alpha, out]).inputs(&[x]).outputs(&[out]);
        let Some(mut m) = load(g) else { return };
        m.set_output_argmax(0, true).expect("argmax");
        let mut xv = data(rows * n, 77);
        let at = |r: usize, i: usize| r * n + i.min(n - 1);
        // Row 0: one largest value in the last chunk.
        xv[at(0, 8999)] = 50.0;
        // Row 1: the largest value twice, in two chunks (and once more
        // near the end of the first).
        xv[at(1, 4095)] = 40.0;
        xv[at(1, 6000)] = 40.0;
        xv[at(1, 100)] = 40.0;
        // Row 2: NaNs after a larger number; the first NaN wins.
        xv[at(2, 10)] = 1e30;
        xv[at(2, 7000)] = f32::NAN;
        xv[at(2, 5000)] = f32::NAN;
        // Row 3: every value equal: index 0.
        xv[3 * n..].fill(-2.5);
        let outs = m.run(&[Tensor::from_f32(&[rows as u64, n as u64], &xv)]).expect("runs");
        let got = outs[0].to_f64_vec();
        let want: Vec<f64> = (0..rows)
            .map(|r| {
                let row = &xv[r * n..(r + 1) * n];
                let best = match row.iter().position(|v| v.is_nan()) {
                    Some(i) => i,
                    None => row.iter().enumerate().fold(0, |b, (i, v)| if *v > row[b] { i } else { b }),
                };
                best as f64
            })
            .collect();
        assert_eq!(got, want, "argmax of {rows} rows of {n}");
        if n == 9000 {
            assert_eq!(want, [8999.0, 100.0, 5000.0, 0.0], "the cases are what they say");
        }
    }
}

/// The device argmax reduces float outputs only, and only outputs that
/// exist; asking for anything else is a typed error.
#[test]
fn device_argmax_rejects_what_it_cannot_reduce() {
    let Some(rt) = crate::runtime() else { return };
    let dir = crate::fixtures_dir().join("compare_logic");
    let program = Program::open(dir.join("model.pte")).expect("fixture");
    let mut m = rt.load(&program, "forward").expect("loads");
    match m.set_output_argmax(0, true) {
        Err(e @ Error::ArgmaxOutput { .. }) => assert!(e.to_string().contains("bool"), "{e}"),
        other => panic!("argmax of a bool output: {other:?}"),
    }
    let n = m.n_outputs();
    match m.set_output_argmax(n, true) {
        Err(e @ Error::NoOutput { .. }) => assert!(e.to_string().contains(&format!("no output {n}")), "{e}"),
        other => panic!("argmax of a missing output: {other:?}"),
    }
}

/// The fast 4-bit routes (K and the group a multiple of 32): the GEMV for
/// 1..=4 rows and the tiled GEMM beyond, over partial tiles (N not a
/// multiple of the tile or of the GEMV's columns per workgroup, M past one
/// 64-row tile), groups of 32 and 64, with and without bias; one loaded
/// method runs every row count (dynamic M). Loaded at `Precision::F32`:
/// the float32 tolerance is for the f32 kernels (the default again since
/// run ag); `mixed` puts the rows past the GEMV on the matrix units with
/// f16 operands where the device has them (the H200 failed this test so
/// when `mixed` was the default, run af), which
/// `gemm.rs`'s tests and `coop_probe` check at their own tolerance.
#[test]
fn q4_linear_fast_routes_match_the_reference() {
    for (n, k, gs, with_bias) in [(70usize, 96usize, 32usize, true), (13, 128, 64, false), (136, 64, 32, false)] {
        let w = q4_linear(n, k, gs, 51 + n as u32);
        let bias = data(w.n_pad, 53);
        let max_m = 70u64;
        let mut g = GraphBuilder::new();
        let x = g.tensor(DType::F32, &[1, max_m, k as u64]);
        let wt = g.constant(DType::U8, &[n as u64, w.k_packed as u64], &w.packed);
        let st = g.constant(DType::F32, &[w.n_groups as u64, w.n_pad as u64], &f32_bytes(&w.scales));
        let gs_v = g.int(gs as i64);
        let bt = if with_bias { g.constant(DType::F32, &[w.n_pad as u64], &f32_bytes(&bias)) } else { g.null() };
        let out = g.tensor(DType::F32, &[1, max_m, n as u64]);
        g.op("et_vk.linear_q4gsw.default", &[x, wt, st, gs_v, bt, out]).inputs(&[x]).outputs(&[out]);
        let f32_only = LoadOptions { precision: Some(etwgpu_kernels::Precision::F32), ..LoadOptions::default() };
        let Some(mut method) = load_with(g, &f32_only) else { return };
        let zero = vec![0.0; n];
        for m in [1usize, 2, 3, 4, 5, 64, 65, 70] {
            let xv = data(m * k, 60 + m as u32);
            let outs = method.run(&[Tensor::from_f32(&[1, m as u64, k as u64], &xv)]).expect("runs");
            assert_eq!(outs[0].shape, [1, m as u64, n as u64]);
            let want = matmul_ref(&xv, &w, if with_bias { &bias } else { &zero });
            assert_close(&f32s(&outs[0]), &want, 1e-4, &format!("q4 linear n {n} k {k} group {gs} m {m}"));
        }
    }
}

/// RMS norm over rows longer than one workgroup (600 > 256 invocations),
/// at the longest row the kernel keeps in registers (2048 = 8 per
/// invocation) and past it (2500, the loop), and more rows than one grid
/// dimension's worth of small steps.
#[test]
fn rms_norm_over_long_rows() {
    for n in [600usize, 2048, 2500] {
        rms_norm_rows(5, n);
    }
}

fn rms_norm_rows(rows: usize, n: usize) {
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[rows as u64, n as u64]);
    let wv = data(n, 31);
    let w = g.constant(DType::F32, &[n as u64], &f32_bytes(&wv));
    let eps = g.double(1e-5);
    let out = g.tensor(DType::F32, &[rows as u64, n as u64]);
    g.op("et_vk.rms_norm.default", &[x, w, eps, out]).inputs(&[x]).outputs(&[out]);
    let Some(mut method) = load(g) else { return };
    let xv = data(rows * n, 32);
    let outs = method.run(&[Tensor::from_f32(&[rows as u64, n as u64], &xv)]).expect("runs");
    let want: Vec<f32> = (0..rows * n)
        .map(|i| {
            let row = &xv[i / n * n..][..n];
            let ms = row.iter().map(|v| v * v).sum::<f32>() / n as f32;
            xv[i] / (ms + 1e-5).sqrt() * wv[i % n]
        })
        .collect();
    assert_close(&f32s(&outs[0]), &want, 1e-5, &format!("rms_norm rows of {n}"));
}

/// Runs submitted ahead on the tiny Llama: run `n + 1` takes its token on
/// the device from run `n`'s argmax, submitted before run `n` is read. The
/// tokens equal one-at-a-time greedy decoding with host round trips; the
/// limits (two in flight, nothing else read back meanwhile, a plain run
/// waits for none) are typed errors.
#[test]
fn runs_submitted_ahead_take_the_previous_argmax() {
    let Some(rt) = crate::runtime() else { return };
    let dir = crate::fixtures_dir().join("llama_tiny_fp32");
    let program = Program::open(dir.join("model.pte")).expect("fixture");
    let mut m = rt.load(&program, "forward").expect("loads");
    let prompt = Tensor::read_npy(dir.join("call0.in0.npy")).expect("prompt");
    let n_prompt = prompt.numel() as i64;
    let id = |outs: Vec<Tensor>| -> i64 {
        assert_eq!((outs.len(), outs[0].dtype), (1, DType::I64), "one argmax output");
        outs[0].to_f64_vec()[0] as i64
    };
    assert!(!m.can_feed(0), "no argmax yet");
    let err = m.submit(&[tok(1), pos(0)], Some(0)).expect_err("no argmax to feed from");
    assert!(matches!(err, Error::FeedWithoutArgmax { .. }), "{err}");

    m.set_output_argmax(0, true).expect("argmax");
    assert!(m.can_feed(0));
    let steps = 20;
    let mut host = vec![id(m.run(&[prompt.clone(), pos(0)]).expect("prefill"))];
    for i in 0..steps {
        host.push(id(m.run(&[tok(host[i]), pos(n_prompt + i as i64)]).expect("decode")));
    }

    let first = id(m.run(&[prompt.clone(), pos(0)]).expect("prefill"));
    assert_eq!(first, host[0]);
    m.submit(&[tok(first), pos(n_prompt)], None).expect("first decode");
    let mut ahead = vec![first];
    for i in 1..steps {
        m.submit(&[tok(0), pos(n_prompt + i as i64)], Some(0)).expect("fed decode");
        ahead.push(id(m.finish().expect("oldest run")));
    }
    ahead.push(id(m.finish().expect("last run")));
    assert_eq!(ahead, host, "fed from the device vs host round trips");

    m.submit(&[tok(1), pos(0)], None).expect("one");
    m.submit(&[tok(0), pos(1)], Some(0)).expect("two");
    for err in [m.submit(&[tok(0), pos(2)], Some(0)).expect_err("three"), m.run(&[tok(1), pos(0)]).expect_err("run")] {
        assert!(matches!(err, Error::RunsInFlight { runs: 2, .. }), "{err}");
    }
    m.finish().expect("one");
    m.set_output_argmax(0, false).expect("logits again");
    let err = m.submit(&[tok(1), pos(0)], None).expect_err("logits read back while a run is in flight");
    assert!(matches!(err, Error::RunsInFlight { blocked, .. } if blocked.contains("only argmax")), "{err}");
    m.finish().expect("two");
    assert!(m.finish().is_err(), "nothing left to finish");
    assert_eq!(m.run(&[tok(1), pos(0)]).expect("a plain run again")[0].shape, [1, 128]);
}

/// The step timeline on the tiny Llama decoding ahead: one entry per run
/// submitted while it is on (the rest once it is full), each run's chain
/// before its argmax and after the previous run's; its limits are typed
/// errors, and off it records nothing.
#[test]
fn the_step_timeline_times_each_run_submitted_ahead() {
    let Some(rt) = crate::runtime() else { return };
    let dir = crate::fixtures_dir().join("llama_tiny_fp32");
    let program = Program::open(dir.join("model.pte")).expect("fixture");
    let mut m = rt.load(&program, "forward").expect("loads");
    m.set_output_argmax(0, true).expect("argmax");
    if let Err(e) = m.set_step_timeline(Some(4)) {
        assert!(matches!(e, Error::NoTimestamps { .. }), "{e}");
        return;
    }
    m.submit(&[tok(1), pos(0)], None).expect("first");
    let err = m.set_step_timeline(None).expect_err("runs in flight");
    assert!(matches!(err, Error::RunsInFlight { .. }), "{err}");
    for i in 1..6 {
        m.submit(&[tok(0), pos(i)], Some(0)).expect("fed");
        m.finish().expect("oldest");
    }
    let err = pollster::block_on(m.take_step_timeline_async()).expect_err("a run in flight");
    assert!(matches!(err, Error::RunsInFlight { .. }), "{err}");
    m.finish().expect("last");
    let steps = pollster::block_on(m.take_step_timeline_async()).expect("timeline");
    assert_eq!(steps.len(), 4, "the first four of six runs");
    for (i, s) in steps.iter().enumerate() {
        assert!(s.chain_begin < s.chain_end && s.chain_end <= s.argmax_begin && s.argmax_begin < s.argmax_end, "{s:?}");
        if i > 0 {
            assert!(s.chain_begin >= steps[i - 1].argmax_end, "run {i} before run {}: {steps:?}", i - 1);
        }
    }
    assert!(pollster::block_on(m.take_step_timeline_async()).expect("emptied").is_empty());
    m.set_step_timeline(None).expect("off");
    m.run(&[tok(1), pos(0)]).expect("a run");
    assert!(pollster::block_on(m.take_step_timeline_async()).expect("off").is_empty());
}
