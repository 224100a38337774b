//! Constants past the binding limit, split by rows at load
//! (`etwgpu_graph::split`): float32 and 4-bit linears (with bias, a ragged
//! last chunk, padded 4-bit scales) and embeddings, against CPU
//! references, at a split size lowered through `LoadOptions::split_bytes`
//! so that small tables take the path; and a float32 table past the
//! device's own binding limit (128 MiB on lavapipe) and 200 MiB.

use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
use etwgpu_format::{DType, Program};
use etwgpu_runtime::{LoadOptions, Tensor};

use crate::llm::{assert_close, f32_bytes, int_tensor, int4s, matmul_ref, pack_q4, q4_linear};
use crate::{data, f32s};

/// `x [1, m, k] · w [n, k]ᵀ + bias`.
fn linear_ref(x: &[f32], w: &[f32], bias: Option<&[f32]>, n: usize, k: usize) -> Vec<f32> {
    let m = x.len() / k;
    (0..m * n)
        .map(|i| {
            let (r, c) = (i / n, i % n);
            let dot: f32 = (0..k).map(|j| x[r * k + j] * w[c * k + j]).sum();
            dot + bias.map_or(0.0, |b| b[c])
        })
        .collect()
}

#[test]
fn split_linears_and_embeddings_match_their_references() {
    let Some(rt) = crate::runtime() else { return };
    let (n, k, m, gs) = (1002usize, 64usize, 3usize, 32usize);
    // 4-bit linear [n, k] with bias (scales padded to 1004 columns).
    let q = q4_linear(n, k, gs, 31);
    let q_bias = data(q.n_pad, 32);
    // Float32 linear [n, k] with bias.
    let fw = data(n * k, 33);
    let f_bias = data(n, 34);
    // Float32 embedding [n, k] and 4-bit embedding [n, k/2] + [n, k/gs].
    let fe = data(n * k, 35);
    let qe = int4s(n * k, 36);
    let (qe_packed, qe_bytes) = pack_q4(&qe, n, k);
    let qe_scales: Vec<f32> = data(n * k / gs, 37).iter().map(|s| 0.1 + s.abs() * 0.1).collect();

    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, m as u64, k as u64]);
    let idx = g.tensor_staged(DType::I32, DType::I64, &[2, 3]);
    let qw = g.constant(DType::U8, &[n as u64, q.k_packed as u64], &q.packed);
    let qs = g.constant(DType::F32, &[q.n_groups as u64, q.n_pad as u64], &f32_bytes(&q.scales));
    let qb = g.constant(DType::F32, &[q.n_pad as u64], &f32_bytes(&q_bias));
    let gs_v = g.int(gs as i64);
    let q_out = g.tensor(DType::F32, &[1, m as u64, n as u64]);
    let fwt = g.constant(DType::F32, &[n as u64, k as u64], &f32_bytes(&fw));
    let fbt = g.constant(DType::F32, &[n as u64], &f32_bytes(&f_bias));
    let f_out = g.tensor(DType::F32, &[1, m as u64, n as u64]);
    let fet = g.constant(DType::F32, &[n as u64, k as u64], &f32_bytes(&fe));
    let pad = g.int(-1);
    let no = g.bool(false);
    let fe_out = g.tensor(DType::F32, &[2, 3, k as u64]);
    let qet = g.constant(DType::U8, &[n as u64, qe_bytes as u64], &qe_packed);
    let qes = g.constant(DType::F32, &[n as u64, (k / gs) as u64], &f32_bytes(&qe_scales));
    let yes = g.bool(true);
    let qe_out = g.tensor(DType::F32, &[2, 3, k as u64]);
    g.op("et_vk.linear_q4gsw.default", &[x, qw, qs, gs_v, qb, q_out])
        .op("aten.linear.default", &[x, fwt, fbt, f_out])
        .op("aten.embedding.default", &[fet, idx, pad, no, no, fe_out])
        .op("et_vk.embedding_q4gsw.default", &[qet, qes, gs_v, idx, yes, qe_out]);
    g.inputs(&[x, idx]).outputs(&[q_out, f_out, fe_out, qe_out]);
    let program = Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("parses");

    let xv = data(m * k, 38);
    // Ids in the first, middle and last chunks, on chunk edges.
    let ids = [0i64, 1001, 255, 256, 511, 770];
    let inputs = [Tensor::from_f32(&[1, m as u64, k as u64], &xv), int_tensor(DType::I64, &[2, 3], &ids)];
    let want_fe: Vec<f32> = ids.iter().flat_map(|&t| fe[t as usize * k..][..k].to_vec()).collect();
    let want_qe: Vec<f32> = ids
        .iter()
        .flat_map(|&t| {
            let t = t as usize;
            (0..k).map(|d| f32::from(qe[t * k + d]) * qe_scales[t * (k / gs) + d / gs]).collect::<Vec<_>>()
        })
        .collect();
    let want_q = matmul_ref(&xv, &q, &q_bias);
    let want_f = linear_ref(&xv, &fw, Some(&f_bias), n, k);

    // 8 KiB: float32 tables in 32-row chunks (32 of them), 4-bit ones in
    // 256-row chunks (4); the unsplit load gives the same.
    let mut results = Vec::new();
    for split_bytes in [Some(8192), None] {
        let options = LoadOptions { split_bytes, ..LoadOptions::default() };
        let mut method = rt.load_with(&program, "forward", &options).expect("loads");
        let outs = method.run(&inputs).expect("runs");
        let what = |op: &str| format!("{op} (split at {split_bytes:?} bytes)");
        assert_eq!(outs[0].shape, [1, m as u64, n as u64]);
        assert_close(&f32s(&outs[0]), &want_q, 1e-4, &what("linear_q4gsw"));
        assert_close(&f32s(&outs[1]), &want_f, 1e-4, &what("linear"));
        assert_eq!(outs[2].shape, [2, 3, k as u64]);
        assert_close(&f32s(&outs[2]), &want_fe, 0.0, &what("embedding"));
        assert_close(&f32s(&outs[3]), &want_qe, 1e-6, &what("embedding_q4gsw"));
        results.push(outs.iter().map(f32s).collect::<Vec<_>>());
    }
    assert_eq!(results[0][2..], results[1][2..], "split and whole embeddings are identical");
}

/// A float32 table larger than one binding of this device may hold and
/// than 200 MiB (210 MB: on lavapipe, whose limit is 128 MiB, two chunks),
/// read by an embedding and by a linear (tied weights, as SmolLM2's are),
/// runs, split by the load, and matches the CPU. Skipped on devices whose
/// limit is over 512 MiB (the test would need gigabytes of host memory).
/// `etwgpu-web`'s `a_table_over_200_mib_runs_split_in_the_browser` is the
/// same check in Chromium.
#[test]
fn a_table_past_the_device_binding_limit_runs_split() {
    let Some(rt) = crate::runtime() else { return };
    let limits = rt.device().limits();
    let limit = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
    if limit > 512 << 20 {
        eprintln!("skipping: the binding limit {limit} is over 512 MiB");
        return;
    }
    let d = 128usize;
    let v = (limit.max(TABLE_FLOOR_BYTES) / (d as u64 * 4)) as usize + 100;
    let table = data(v * d, 41);
    let mut g = GraphBuilder::new();
    let idx = g.tensor_staged(DType::I32, DType::I64, &[1, 3]);
    let x = g.tensor(DType::F32, &[1, d as u64]);
    let t = g.constant_owned(DType::F32, &[v as u64, d as u64], f32_bytes(&table));
    let pad = g.int(-1);
    let no = g.bool(false);
    let none = g.null();
    let emb = g.tensor(DType::F32, &[1, 3, d as u64]);
    let logits = g.tensor(DType::F32, &[1, v as u64]);
    g.op("aten.embedding.default", &[t, idx, pad, no, no, emb]).op("aten.linear.default", &[x, t, none, logits]);
    g.inputs(&[idx, x]).outputs(&[emb, logits]);
    let program = Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("parses");
    let mut method = rt.load(&program, "forward").expect("a table past the binding limit loads");
    // Rows in the first chunk, at the second's start and at the end.
    let ids = [3i64, (limit / (d as u64 * 4)) as i64, v as i64 - 1];
    eprintln!("a {} MiB table [{v}, {d}] past the {} MiB limit", (v * d * 4) >> 20, limit >> 20);
    let xv = data(d, 43);
    let outs =
        method.run(&[int_tensor(DType::I64, &[1, 3], &ids), Tensor::from_f32(&[1, d as u64], &xv)]).expect("runs");
    let want: Vec<f32> = ids.iter().flat_map(|&t| table[t as usize * d..][..d].to_vec()).collect();
    assert_close(&f32s(&outs[0]), &want, 0.0, "embedding past the limit");
    // The float32 row of tools/export/tolerances.py (rtol = atol = 1e-4).
    assert_close(&f32s(&outs[1]), &linear_ref(&xv, &table, None, v, d), 1e-4, "linear past the limit");
}

/// The least size of the table of
/// [`a_table_past_the_device_binding_limit_runs_split`]: 200 MiB, as the
/// embedding or head of a large-vocabulary model is.
const TABLE_FLOOR_BYTES: u64 = 200 << 20;

/// The exported tiny Llamas (float32 and 4-bit) match their goldens with
/// every table over 16000 bytes split: the float32 embedding and head and
/// the 64-row projections (16 KiB) and FFN linears, the 4-bit embedding
/// and head stay whole; at 2000 bytes the 4-bit ones split too.
#[test]
fn exported_llamas_match_their_goldens_with_tables_split() {
    let Some(rt) = crate::runtime() else { return };
    for (name, split_bytes) in [("llama_tiny_fp32", 16_000), ("llama_tiny_q4", 2000)] {
        let options = LoadOptions { split_bytes: Some(split_bytes), ..LoadOptions::default() };
        let dir = crate::fixtures_dir().join(name);
        match crate::fixtures::run_fixture_loaded_with(&dir, &rt, &options, &mut |_, _| {}) {
            Ok(report) => eprintln!("{name} split at {split_bytes} bytes:\n{report}"),
            Err(e) => panic!("{name} split at {split_bytes} bytes: {e}"),
        }
    }
}
