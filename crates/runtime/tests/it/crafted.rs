//! Crafted graphs built with `etwgpu_format::writer`: broadcasting, sizes
//! that are not multiples of the workgroup size, negative dims, aliasing
//! edge cases and the typed errors of bad inputs.

use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
use etwgpu_format::{DType, Program};
use etwgpu_runtime::{Error, LoadedMethod, LowerError, Tensor};

use crate::{data, f32s};

fn load(g: GraphBuilder) -> Option<Result<LoadedMethod, Error>> {
    let rt = crate::runtime()?;
    let program = Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("crafted program parses");
    Some(rt.load(&program, "forward"))
}

/// Runs `g` on `inputs` and checks output 0 against `want` within 1e-4.
fn check(g: GraphBuilder, inputs: &[Tensor], want_shape: &[u64], want: &[f32]) {
    let Some(method) = load(g) else { return };
    let outs = method.expect("loads").run(inputs).expect("runs");
    assert_eq!(outs[0].shape, want_shape);
    let got = f32s(&outs[0]);
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-4 + 1e-4 * w.abs(), "element {i}: got {g}, want {w}");
    }
}

#[test]
fn add_broadcasts_odd_sizes_with_alpha() {
    // [3, 1, 300] + alpha * [7, 1] -> [3, 7, 300]: 6300 elements, not a
    // multiple of 256.
    let mut g = GraphBuilder::new();
    let a = g.tensor(DType::F32, &[3, 1, 300]);
    let b = g.tensor(DType::F32, &[7, 1]);
    let alpha = g.double(0.5);
    let out = g.tensor(DType::F32, &[3, 7, 300]);
    g.op("aten.add.Tensor", &[a, b, alpha, out]).inputs(&[a, b]).outputs(&[out]);
    let (av, bv) = (data(900, 1), data(7, 2));
    let mut want = Vec::new();
    for i in 0..3 {
        for bj in &bv {
            for k in 0..300 {
                want.push(av[i * 300 + k] + 0.5 * bj);
            }
        }
    }
    check(g, &[Tensor::from_f32(&[3, 1, 300], &av), Tensor::from_f32(&[7, 1], &bv)], &[3, 7, 300], &want);
}

#[test]
fn mm_with_sizes_off_the_tile() {
    let (m, k, n) = (17usize, 33usize, 5usize);
    let mut g = GraphBuilder::new();
    let a = g.tensor(DType::F32, &[m as u64, k as u64]);
    let b = g.tensor(DType::F32, &[k as u64, n as u64]);
    let out = g.tensor(DType::F32, &[m as u64, n as u64]);
    g.op("aten.mm.default", &[a, b, out]).inputs(&[a, b]).outputs(&[out]);
    let (av, bv) = (data(m * k, 3), data(k * n, 4));
    let want: Vec<f32> = (0..m * n).map(|i| (0..k).map(|kk| av[(i / n) * k + kk] * bv[kk * n + i % n]).sum()).collect();
    check(
        g,
        &[Tensor::from_f32(&[m as u64, k as u64], &av), Tensor::from_f32(&[k as u64, n as u64], &bv)],
        &[m as u64, n as u64],
        &want,
    );
}

#[test]
fn softmax_on_a_negative_middle_dim() {
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[2, 3, 4]);
    let dim = g.int(-2);
    let f = g.bool(false);
    let out = g.tensor(DType::F32, &[2, 3, 4]);
    g.op("aten._softmax.default", &[x, dim, f, out]).inputs(&[x]).outputs(&[out]);
    let xv = data(24, 5);
    let mut want = vec![0f32; 24];
    for b in 0..2 {
        for k in 0..4 {
            let at = |j: usize| b * 12 + j * 4 + k;
            let mx = (0..3).map(|j| xv[at(j)]).fold(f32::MIN, f32::max);
            let s: f32 = (0..3).map(|j| (xv[at(j)] - mx).exp()).sum();
            (0..3).for_each(|j| want[at(j)] = (xv[at(j)] - mx).exp() / s);
        }
    }
    check(g, &[Tensor::from_f32(&[2, 3, 4], &xv)], &[2, 3, 4], &want);
}

/// Softmax and log-softmax over the last dim take one workgroup per row
/// (`softmax_rows.wgsl`): rows longer than the workgroup (600 > 256).
#[test]
fn softmax_and_log_softmax_over_long_rows() {
    let (rows, n) = (3usize, 600usize);
    let xv: Vec<f32> = data(rows * n, 6).iter().map(|v| v * 8.0).collect();
    for (op, log) in [("aten._softmax.default", false), ("aten._log_softmax.default", true)] {
        let mut g = GraphBuilder::new();
        let x = g.tensor(DType::F32, &[rows as u64, n as u64]);
        let dim = g.int(-1);
        let f = g.bool(false);
        let out = g.tensor(DType::F32, &[rows as u64, n as u64]);
        g.op(op, &[x, dim, f, out]).inputs(&[x]).outputs(&[out]);
        let want: Vec<f32> = (0..rows * n)
            .map(|i| {
                let row = &xv[i / n * n..][..n];
                let mx = row.iter().copied().fold(f32::MIN, f32::max);
                let s: f32 = row.iter().map(|v| (v - mx).exp()).sum();
                if log { xv[i] - mx - s.ln() } else { (xv[i] - mx).exp() / s }
            })
            .collect();
        check(g, &[Tensor::from_f32(&[rows as u64, n as u64], &xv)], &[rows as u64, n as u64], &want);
    }
}

#[test]
fn view_then_permute_aliases_then_copies() {
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[6]);
    let size = g.int_list(&[2, -1]);
    let v = g.tensor(DType::F32, &[2, 3]);
    let dims = g.int_list(&[1, 0]);
    let out = g.tensor(DType::F32, &[3, 2]);
    g.op("aten.view_copy.default", &[x, size, v]).op("aten.permute_copy.default", &[v, dims, out]);
    g.inputs(&[x]).outputs(&[out]);
    let xv = [0., 1., 2., 3., 4., 5.];
    check(g, &[Tensor::from_f32(&[6], &xv)], &[3, 2], &[0., 3., 1., 4., 2., 5.]);
}

#[test]
fn input_that_is_also_the_output_with_an_empty_chain() {
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[3]);
    g.inputs(&[x]).outputs(&[x]);
    check(g, &[Tensor::from_f32(&[3], &[1., 2., 3.])], &[3], &[1., 2., 3.]);
}

#[test]
fn repeated_runs_reuse_the_loaded_method() {
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[5]);
    let out = g.tensor(DType::F32, &[5]);
    g.op("aten.neg.default", &[x, out]).inputs(&[x]).outputs(&[out]);
    let Some(method) = load(g) else { return };
    let mut method = method.expect("loads");
    for round in 0..3 {
        let xv = data(5, round);
        let outs = method.run(&[Tensor::from_f32(&[5], &xv)]).expect("runs");
        assert_eq!(f32s(&outs[0]), xv.iter().map(|v| -v).collect::<Vec<_>>());
    }
}

fn relu_graph() -> GraphBuilder {
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[2, 3]);
    let out = g.tensor(DType::F32, &[2, 3]);
    g.op("aten.relu.default", &[x, out]).inputs(&[x]).outputs(&[out]);
    g
}

#[test]
fn bad_inputs_are_typed_errors() {
    let Some(method) = load(relu_graph()) else { return };
    let mut method = method.expect("loads");
    let ok = Tensor::from_f32(&[2, 3], &[0.0; 6]);
    assert!(matches!(method.run(&[]), Err(Error::InputCount { expected: 1, found: 0 })));
    assert!(matches!(method.run(&[ok.clone(), ok.clone()]), Err(Error::InputCount { expected: 1, found: 2 })));
    let ints = Tensor::new(DType::I32, vec![2, 3], vec![0; 24]).expect("valid");
    assert!(matches!(
        method.run(&[ints]),
        Err(Error::InputDType { index: 0, expected: DType::F32, found: DType::I32 })
    ));
    let too_big = Tensor::from_f32(&[3, 3], &[0.0; 9]);
    assert!(matches!(method.run(&[too_big]), Err(Error::InputShape { index: 0, .. })));
    let wrong_rank = Tensor::from_f32(&[6], &[0.0; 6]);
    assert!(matches!(method.run(&[wrong_rank]), Err(Error::InputShape { index: 0, .. })));
    // A smaller (in-bounds) input runs at its live shape.
    let outs = method.run(&[Tensor::from_f32(&[1, 3], &[-1.0, 2.0, -3.0])]).expect("in bounds");
    assert_eq!(outs[0].shape, [1, 3]);
    assert_eq!(f32s(&outs[0]), [0.0, 2.0, 0.0]);
}

#[test]
fn unsupported_ops_and_bad_args_fail_the_load() {
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[2]);
    let out = g.tensor(DType::F32, &[2]);
    g.op("aten.frobnicate.default", &[x, out]).inputs(&[x]).outputs(&[out]);
    let Some(r) = load(g) else { return };
    match r {
        Err(Error::Lower(LowerError::UnsupportedOp { op, .. })) => assert_eq!(op, "aten.frobnicate.default"),
        other => panic!("expected UnsupportedOp, got {other:?}"),
    }
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[2, 3]);
    let w = g.tensor(DType::F32, &[4, 5]);
    let null = g.null();
    let out = g.tensor(DType::F32, &[2, 4]);
    g.op("aten.linear.default", &[x, w, null, out]).inputs(&[x, w]).outputs(&[out]);
    let Some(r) = load(g) else { return };
    match r {
        Err(Error::Lower(LowerError::Op { op, source: etwgpu_kernels::Error::Shape { arg_idx: 1, .. }, .. })) => {
            assert_eq!(op, "aten.linear.default")
        }
        other => panic!("expected a weight shape error, got {other:?}"),
    }
}

#[test]
fn int64_inputs_are_narrowed_and_outputs_widened() {
    // An int32 device tensor passed straight through, with an int64 method
    // dtype: the caller gives and gets int64.
    let mut g = GraphBuilder::new();
    let x = g.tensor_staged(DType::I32, DType::I64, &[3]);
    let dims = g.int_list(&[0]);
    let out = g.tensor_staged(DType::I32, DType::I64, &[3]);
    g.op("aten.flip.default", &[x, dims, out]).inputs(&[x]).outputs(&[out]);
    let Some(method) = load(g) else { return };
    let mut method = method.expect("loads");
    let bytes: Vec<u8> = [5i64, -6, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
    let outs = method.run(&[Tensor::new(DType::I64, vec![3], bytes).expect("valid")]).expect("runs");
    assert_eq!(outs[0].dtype, DType::I64);
    assert_eq!(outs[0].to_f64_vec(), [7.0, -6.0, 5.0]);
    let big: Vec<u8> = [1i64 << 40, 0, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert!(matches!(
        method.run(&[Tensor::new(DType::I64, vec![3], big).expect("valid")]),
        Err(Error::InputOutOfRange { index: 0, .. })
    ));
}

fn i64_bytes(values: &[i64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// `x + c` on int64 tensors as a `downcast_64_bit=False` export writes
/// them (int64 on the device, no staging dtype), with constant `c`.
fn add_i64_constant(c: &[i64]) -> GraphBuilder {
    let n = c.len() as u64;
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::I64, &[n]);
    let c = g.constant(DType::I64, &[n], &i64_bytes(c));
    let alpha = g.int(1);
    let out = g.tensor(DType::I64, &[n]);
    g.op("aten.add.Tensor", &[x, c, alpha, out]).inputs(&[x]).outputs(&[out]);
    g
}

#[test]
fn int64_tensors_run_as_int32_at_the_edges_of_its_range() {
    // The constant holds both ends of int32; the sums reach them exactly.
    let c = [i64::from(i32::MIN), i64::from(i32::MAX) - 3, -7, 0];
    let Some(method) = load(add_i64_constant(&c)) else { return };
    let mut method = method.expect("loads");
    let x = Tensor::new(DType::I64, vec![4], i64_bytes(&[0, 3, i64::from(i32::MAX) - 9, i64::from(i32::MIN)]))
        .expect("valid");
    let outs = method.run(&[x]).expect("runs");
    assert_eq!(outs[0].dtype, DType::I64, "the caller gets int64 back");
    assert_eq!(
        outs[0].bytes,
        i64_bytes(&[i64::from(i32::MIN), i64::from(i32::MAX), i64::from(i32::MAX) - 16, i64::from(i32::MIN)])
    );
    // One past the range is an error naming the input, never wrapped.
    let past = Tensor::new(DType::I64, vec![4], i64_bytes(&[0, 0, i64::from(i32::MAX) + 1, 0])).expect("valid");
    match method.run(&[past]) {
        Err(Error::InputOutOfRange { index: 0, found }) => assert_eq!(found, i64::from(i32::MAX) + 1),
        other => panic!("expected InputOutOfRange, got {other:?}"),
    }
}

#[test]
fn an_int64_constant_outside_int32_is_a_load_error() {
    let Some(loaded) = load(add_i64_constant(&[1, i64::from(i32::MIN) - 1, 2])) else { return };
    match loaded {
        // Value 1 is the constant (value 0 the input).
        Err(e @ Error::ConstantOutOfRange { value: 1, dtype: DType::I32, found }) => {
            assert_eq!(found, i64::from(i32::MIN) - 1);
            assert!(e.to_string().contains("-2147483649"), "{e}");
        }
        other => panic!("expected ConstantOutOfRange, got {other:?}"),
    }
}

/// The GEMV route (few rows): batched, K off the workgroup size, a bias
/// broadcast along rows, and more outputs than one grid dimension holds.
#[test]
fn gemv_route_matches_a_reference() {
    // bmm [3, 2, 100] @ [3, 100, 7]: 2 rows per batch -> GEMV.
    let (b, m, k, n) = (3usize, 2usize, 100usize, 7usize);
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[b as u64, m as u64, k as u64]);
    let y = g.tensor(DType::F32, &[b as u64, k as u64, n as u64]);
    let out = g.tensor(DType::F32, &[b as u64, m as u64, n as u64]);
    g.op("aten.bmm.default", &[x, y, out]).inputs(&[x, y]).outputs(&[out]);
    let (xv, yv) = (data(b * m * k, 11), data(b * k * n, 12));
    let want: Vec<f32> = (0..b * m * n)
        .map(|i| {
            let (bi, r, c) = (i / (m * n), (i / n) % m, i % n);
            (0..k).map(|kk| xv[(bi * m + r) * k + kk] * yv[(bi * k + kk) * n + c]).sum()
        })
        .collect();
    check(
        g,
        &[
            Tensor::from_f32(&[b as u64, m as u64, k as u64], &xv),
            Tensor::from_f32(&[b as u64, k as u64, n as u64], &yv),
        ],
        &[b as u64, m as u64, n as u64],
        &want,
    );

    // linear [1, 9] x weight [70000, 9] + bias: 70000 outputs > 65535.
    let (k, n) = (9usize, 70_000usize);
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, k as u64]);
    let w = g.tensor(DType::F32, &[n as u64, k as u64]);
    let bias = g.tensor(DType::F32, &[n as u64]);
    let out = g.tensor(DType::F32, &[1, n as u64]);
    g.op("aten.linear.default", &[x, w, bias, out]).inputs(&[x, w, bias]).outputs(&[out]);
    let (xv, wv, bv) = (data(k, 13), data(n * k, 14), data(n, 15));
    let want: Vec<f32> = (0..n).map(|c| bv[c] + (0..k).map(|kk| xv[kk] * wv[c * k + kk]).sum::<f32>()).collect();
    check(
        g,
        &[
            Tensor::from_f32(&[1, k as u64], &xv),
            Tensor::from_f32(&[n as u64, k as u64], &wv),
            Tensor::from_f32(&[n as u64], &bv),
        ],
        &[1, n as u64],
        &want,
    );
}

/// The dense-linear GEMV (`linear_gemv.wgsl`: K a multiple of 4, 1..=4
/// rows), with and without bias, N past one grid dimension of its
/// workgroups (8 columns each) and off its column count.
#[test]
fn linear_gemv_route_matches_a_reference() {
    for (m, k, n, with_bias) in [(1usize, 96usize, 70usize, true), (4, 8, 13, false), (3, 4, 530_000, true)] {
        let mut g = GraphBuilder::new();
        let x = g.tensor(DType::F32, &[m as u64, k as u64]);
        let w = g.tensor(DType::F32, &[n as u64, k as u64]);
        let bias = if with_bias { g.tensor(DType::F32, &[n as u64]) } else { g.null() };
        let out = g.tensor(DType::F32, &[m as u64, n as u64]);
        let ins = if with_bias { vec![x, w, bias] } else { vec![x, w] };
        g.op("aten.linear.default", &[x, w, bias, out]).inputs(&ins).outputs(&[out]);
        let (xv, wv, bv) = (data(m * k, 16), data(n * k, 17), data(n, 18));
        let want: Vec<f32> = (0..m * n)
            .map(|i| {
                let (r, c) = (i / n, i % n);
                let dot: f32 = (0..k).map(|kk| xv[r * k + kk] * wv[c * k + kk]).sum();
                dot + if with_bias { bv[c] } else { 0.0 }
            })
            .collect();
        let mut inputs =
            vec![Tensor::from_f32(&[m as u64, k as u64], &xv), Tensor::from_f32(&[n as u64, k as u64], &wv)];
        if with_bias {
            inputs.push(Tensor::from_f32(&[n as u64], &bv));
        }
        check(g, &inputs, &[m as u64, n as u64], &want);
    }
}

fn bools(t: &Tensor) -> Vec<bool> {
    assert_eq!(t.dtype, DType::Bool);
    t.bytes.iter().map(|&b| b != 0).collect()
}

#[test]
fn bool_ops_the_exporter_does_not_emit() {
    // logical_not, logical_xor, ne.Tensor and bitwise_xor on a bool input and a
    // bool constant (widened to u32 at upload), then where on int32 values.
    let mut g = GraphBuilder::new();
    let m = g.tensor(DType::Bool, &[2, 3]);
    let n = g.constant(DType::Bool, &[3], &[1, 0, 1]);
    let (not_m, xor, ne, bxor) = (
        g.tensor(DType::Bool, &[2, 3]),
        g.tensor(DType::Bool, &[2, 3]),
        g.tensor(DType::Bool, &[2, 3]),
        g.tensor(DType::Bool, &[2, 3]),
    );
    let ia = g.tensor(DType::I32, &[2, 3]);
    let ib = g.tensor(DType::I32, &[1]);
    let picked = g.tensor(DType::I32, &[2, 3]);
    g.op("aten.logical_not.default", &[m, not_m])
        .op("aten.logical_xor.default", &[m, n, xor])
        .op("aten.ne.Tensor", &[m, n, ne])
        .op("aten.bitwise_xor.Tensor", &[m, n, bxor])
        .op("aten.where.self", &[m, ia, ib, picked]);
    g.inputs(&[m, ia, ib]).outputs(&[not_m, xor, ne, bxor, picked]);
    let Some(method) = load(g) else { return };
    let mv = [true, false, false, true, true, false];
    let m_t = Tensor::new(DType::Bool, vec![2, 3], mv.iter().map(|&b| u8::from(b)).collect()).expect("valid");
    let ints = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let ia_t = Tensor::new(DType::I32, vec![2, 3], ints(&[1, -2, 3, 4_000_000, 5, 6])).expect("valid");
    let ib_t = Tensor::new(DType::I32, vec![1], ints(&[-7])).expect("valid");
    let outs = method.expect("loads").run(&[m_t, ia_t, ib_t]).expect("runs");
    let nv = [true, false, true];
    let want_xor: Vec<bool> = (0..6).map(|i| mv[i] != nv[i % 3]).collect();
    assert_eq!(bools(&outs[0]), mv.iter().map(|b| !b).collect::<Vec<_>>());
    assert_eq!(bools(&outs[1]), want_xor);
    assert_eq!(bools(&outs[2]), want_xor);
    assert_eq!(bools(&outs[3]), want_xor);
    assert_eq!(outs[4].to_f64_vec(), [1.0, -7.0, -7.0, 4_000_000.0, 5.0, -7.0]);
}

#[test]
fn reductions_over_long_rows_split_dims_ties_and_nans() {
    // x [3, 130, 5]: rows longer than the 64-invocation workgroup, a
    // reduction over the non-adjacent dims 0 and 2, and argmax ties (every
    // value repeats) plus a NaN in one column.
    let (a, b, c) = (3usize, 130usize, 5usize);
    let mut xv: Vec<f32> = data(a * b * c, 9).iter().map(|v| (v * 4.0).round()).collect();
    let at = |i: usize, j: usize, k: usize| (i * b + j) * c + k;
    xv[at(1, 100, 3)] = f32::NAN;
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[3, 130, 5]);
    let (t, f, null) = (g.bool(true), g.bool(false), g.null());
    let d02 = g.int_list(&[0, -1]);
    let d1 = g.int_list(&[1]);
    let i1 = g.int(1);
    let sum = g.tensor(DType::F32, &[130]);
    let amax = g.tensor(DType::F32, &[3, 1, 5]);
    let arg = g.tensor_staged(DType::I32, DType::I64, &[3, 5]);
    g.op("aten.sum.dim_IntList", &[x, d02, f, null, sum])
        .op("aten.amax.default", &[x, d1, t, amax])
        .op("aten.argmax.default", &[x, i1, f, arg]);
    g.inputs(&[x]).outputs(&[sum, amax, arg]);
    let Some(method) = load(g) else { return };
    let outs = method.expect("loads").run(&[Tensor::from_f32(&[3, 130, 5], &xv)]).expect("runs");
    let got_sum = f32s(&outs[0]);
    for j in 0..b {
        let want: f32 = (0..a).flat_map(|i| (0..c).map(move |k| (i, k))).map(|(i, k)| xv[at(i, j, k)]).sum();
        if j == 100 {
            continue; // j == 100 holds the NaN: checked below
        }
        assert!((got_sum[j] - want).abs() <= 1e-4, "sum {j}: got {}, want {want}", got_sum[j]);
    }
    assert!(got_sum[100].is_nan());
    let got_max = f32s(&outs[1]);
    assert_eq!(outs[2].dtype, DType::I64);
    let got_arg = outs[2].to_f64_vec();
    for i in 0..a {
        for k in 0..c {
            let col: Vec<f32> = (0..b).map(|j| xv[at(i, j, k)]).collect();
            let (want_max, want_arg) = if let Some(n) = col.iter().position(|v| v.is_nan()) {
                (f32::NAN, n)
            } else {
                let m = col.iter().copied().fold(f32::MIN, f32::max);
                (m, col.iter().position(|&v| v == m).expect("present"))
            };
            let got = got_max[i * c + k];
            assert!(got == want_max || got.is_nan() && want_max.is_nan(), "amax ({i}, {k}): {got} vs {want_max}");
            assert_eq!(got_arg[i * c + k], want_arg as f64, "argmax ({i}, {k})");
        }
    }
}

fn i64_tensor(shape: &[u64], values: &[i64]) -> Tensor {
    Tensor::new(DType::I64, shape.to_vec(), values.iter().flat_map(|v| v.to_le_bytes()).collect()).expect("valid")
}

/// `x [2, S<=5, 3]` viewed as `[2, 3S]` through SymInt arithmetic
/// (`((S * 6) // 2 + 1) - 1`), then negated.
fn dynamic_view_graph() -> GraphBuilder {
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[2, 5, 3]);
    let (one, two, six) = (g.int(1), g.int(2), g.int(6));
    let s = g.sym_int();
    let s6 = g.sym_int();
    let s3 = g.sym_int();
    let s3p1 = g.sym_int();
    let k = g.sym_int();
    let size = g.value_list(&[two, k]);
    let v = g.tensor(DType::F32, &[2, 15]);
    let out = g.tensor(DType::F32, &[2, 15]);
    g.op("sym_size.int", &[x, one, s])
        .op("mul", &[s, six, s6])
        .op("floordiv", &[s6, two, s3])
        .op("add", &[s3, one, s3p1])
        .op("sub", &[s3p1, one, k])
        .op("aten.view_copy.default", &[x, size, v])
        .op("aten.neg.default", &[v, out]);
    g.inputs(&[x]).outputs(&[out]);
    g
}

#[test]
fn symint_sizes_follow_the_live_input_shape() {
    let Some(method) = load(dynamic_view_graph()) else { return };
    let mut method = method.expect("loads");
    for s in [1u64, 4, 5, 1, 3] {
        let xv = data(6 * s as usize, s as u32);
        let outs = method.run(&[Tensor::from_f32(&[2, s, 3], &xv)]).expect("in bounds");
        assert_eq!(outs[0].shape, [2, 3 * s], "S = {s}");
        assert_eq!(f32s(&outs[0]), xv.iter().map(|v| -v).collect::<Vec<_>>(), "S = {s}");
        assert_eq!(method.n_dispatches(), 1);
    }
    let over = Tensor::from_f32(&[2, 6, 3], &[0.0; 36]);
    match method.run(&[over]) {
        Err(Error::InputShape { index: 0, max, found }) => {
            assert_eq!((max, found), (vec![2, 5, 3], vec![2, 6, 3]));
        }
        other => panic!("expected InputShape, got {other:?}"),
    }
    // The method still runs after the rejected call.
    let outs = method.run(&[Tensor::from_f32(&[2, 1, 3], &[1., 2., 3., 4., 5., 6.])]).expect("in bounds");
    assert_eq!(f32s(&outs[0]), [-1., -2., -3., -4., -5., -6.]);
}

/// `x[p : p + n]` with `p = pos[-1]` (`select_as_symint` on an int64
/// input) and `n` a SymInt graph input.
fn select_as_symint_graph() -> GraphBuilder {
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[8]);
    let pos = g.tensor_staged(DType::I32, DType::I64, &[1]);
    let n = g.sym_int();
    let (zero, minus_one, one) = (g.int(0), g.int(-1), g.int(1));
    let p = g.sym_int();
    let end = g.sym_int();
    let out = g.tensor(DType::F32, &[8]);
    g.op("et_vk.select_as_symint.default", &[pos, zero, minus_one, p])
        .op("add", &[p, n, end])
        .op("aten.slice_copy.Tensor", &[x, zero, p, end, one, out]);
    g.inputs(&[x, pos, n]).outputs(&[out]);
    g
}

#[test]
fn select_as_symint_and_symint_inputs_are_read_per_call() {
    let Some(method) = load(select_as_symint_graph()) else { return };
    let mut method = method.expect("loads");
    let xv: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let x = Tensor::from_f32(&[8], &xv);
    for (p, n) in [(2i64, 3i64), (0, 8), (7, 1), (2, 3)] {
        // n as a 0-d int64 tensor, then as a 1-element int32 one.
        for n_t in
            [i64_tensor(&[], &[n]), Tensor::new(DType::I32, vec![1], (n as i32).to_le_bytes().to_vec()).expect("valid")]
        {
            let outs = method.run(&[x.clone(), i64_tensor(&[1], &[p]), n_t]).expect("runs");
            assert_eq!(f32s(&outs[0]), xv[p as usize..(p + n) as usize], "p = {p}, n = {n}");
        }
    }
    let two = Tensor::from_f32(&[2], &[0.0; 2]);
    assert!(matches!(method.run(&[x.clone(), i64_tensor(&[1], &[0]), two]), Err(Error::SymIntInput { index: 2, .. })));
}

#[test]
fn cropping_pads_bool_cats_and_unexported_creation_ops() {
    // constant_pad_nd with negative pads (crop), cat of bools along -1, and
    // the creation ops the Vulkan exporter rewrites or leaves on the CPU:
    // scalar_tensor, zeros (int32), ones_like (bool).
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[3, 4]);
    let m = g.tensor(DType::Bool, &[2, 1]);
    let pad = g.int_list(&[-1, 2, 1, -1]);
    let nine = g.int(9);
    let padded = g.tensor(DType::F32, &[3, 5]);
    let list = g.value_list(&[m, m]);
    let m1 = g.int(-1);
    let cat = g.tensor(DType::Bool, &[2, 2]);
    let (null, f) = (g.null(), g.bool(false));
    let s = g.double(2.5);
    let scalar = g.tensor(DType::F32, &[]);
    let size = g.int_list(&[3]);
    let zeros = g.tensor(DType::I32, &[3]);
    let ones = g.tensor(DType::Bool, &[2, 1]);
    g.op("aten.constant_pad_nd.default", &[x, pad, nine, padded])
        .op("aten.cat.default", &[list, m1, cat])
        .op("aten.scalar_tensor.default", &[s, null, null, null, f, scalar])
        .op("aten.zeros.default", &[size, null, null, null, f, zeros])
        .op("aten.ones_like.default", &[m, null, null, null, f, null, ones]);
    g.inputs(&[x, m]).outputs(&[padded, cat, scalar, zeros, ones]);
    let Some(method) = load(g) else { return };
    let xv: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let m_t = Tensor::new(DType::Bool, vec![2, 1], vec![0, 1]).expect("valid");
    let outs = method.expect("loads").run(&[Tensor::from_f32(&[3, 4], &xv), m_t]).expect("runs");
    // Rows: one padded row on top, the last input row cropped; columns: the
    // first input column cropped, two padded on the right.
    let mut want = vec![9f32; 15];
    for r in 1..3 {
        for c in 0..3 {
            want[r * 5 + c] = xv[(r - 1) * 4 + c + 1];
        }
    }
    assert_eq!(outs[0].shape, [3, 5]);
    assert_eq!(f32s(&outs[0]), want);
    assert_eq!(bools(&outs[1]), [false, false, true, true]);
    assert_eq!((outs[2].shape.clone(), f32s(&outs[2])), (vec![], vec![2.5]));
    assert_eq!(outs[3].to_f64_vec(), [0.0; 3]);
    assert_eq!(bools(&outs[4]), [true, true]);
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A reference grouped 2-D convolution, NCHW, no bias.
#[expect(clippy::too_many_arguments, reason = "mirrors the convolution schema")]
fn conv2d_ref(
    x: &[f32],
    [c, h, w]: [usize; 3],
    wt: &[f32],
    [oc, k]: [usize; 2],
    stride: usize,
    pad: usize,
    groups: usize,
    [oh, ow]: [usize; 2],
) -> Vec<f32> {
    let icg = c / groups;
    let mut out = vec![0f32; oc * oh * ow];
    for o in 0..oc {
        let g = o / (oc / groups);
        for y in 0..oh {
            for xx in 0..ow {
                let mut acc = 0f32;
                for ci in 0..icg {
                    for ky in 0..k {
                        for kx in 0..k {
                            let (iy, ix) =
                                ((y * stride + ky) as isize - pad as isize, (xx * stride + kx) as isize - pad as isize);
                            if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                continue;
                            }
                            let xi = ((g * icg + ci) * h + iy as usize) * w + ix as usize;
                            acc += x[xi] * wt[((o * icg + ci) * k + ky) * k + kx];
                        }
                    }
                }
                out[(o * oh + y) * ow + xx] = acc;
            }
        }
    }
    out
}

#[test]
fn conv_with_clamp_takes_int_and_null_limits() {
    // [1, 4, 7, 5] input, weight [6, 2, 3, 3], groups 2, stride 2, padding 1,
    // no bias: output [1, 6, 4, 3]; clamped to (-inf, 0] by min Null, max Int 0.
    let (xv, wv) = (data(4 * 7 * 5, 11), data(6 * 2 * 9, 12));
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, 4, 7, 5]);
    let w = g.constant(DType::F32, &[6, 2, 3, 3], &f32_bytes(&wv));
    let null = g.null();
    let (s, p, d, op) = (g.int_list(&[2, 2]), g.int_list(&[1, 1]), g.int_list(&[1, 1]), g.int_list(&[0, 0]));
    let (f, groups, zero) = (g.bool(false), g.int(2), g.int(0));
    let out = g.tensor(DType::F32, &[1, 6, 4, 3]);
    g.op("et_vk.conv_with_clamp.default", &[x, w, null, s, p, d, f, op, groups, null, zero, out]);
    g.inputs(&[x]).outputs(&[out]);
    let want: Vec<f32> =
        conv2d_ref(&xv, [4, 7, 5], &wv, [6, 3], 2, 1, 2, [4, 3]).into_iter().map(|v| v.min(0.0)).collect();
    assert!(want.iter().any(|&v| v < 0.0), "the clamp leaves something to compare");
    check(g, &[Tensor::from_f32(&[1, 4, 7, 5], &xv)], &[1, 6, 4, 3], &want);
}

#[test]
fn select_as_symint_of_a_non_input_fails_the_load() {
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[4]);
    let pos = g.constant(DType::I32, &[1], &2i32.to_le_bytes());
    let (zero, one) = (g.int(0), g.int(1));
    let p = g.sym_int();
    let out = g.tensor(DType::F32, &[4]);
    g.op("et_vk.select_as_symint.default", &[pos, zero, zero, p])
        .op("aten.slice_copy.Tensor", &[x, zero, p, one, one, out]);
    g.inputs(&[x]).outputs(&[out]);
    let Some(r) = load(g) else { return };
    match r {
        Err(Error::Lower(LowerError::SymIntSource { op, .. })) => assert_eq!(op, "et_vk.select_as_symint.default"),
        other => panic!("expected SymIntSource, got {other:?}"),
    }
}

/// A `forward` with no delegate: `cumsum(x, -1)` by KernelCall `op`, then
/// a MoveCall to the output value.
fn kernel_only(op: (&str, &str)) -> Program {
    use etwgpu_format::writer::{InstructionSpec, MethodSpec, PlanValueSpec};
    let f32_2x3 = || PlanValueSpec::Tensor {
        scalar_type: DType::F32.to_scalar_type(),
        sizes: vec![2, 3],
        dynamism: 0,
        data_buffer_idx: 0,
    };
    let m = MethodSpec {
        name: "forward".into(),
        values: vec![f32_2x3(), PlanValueSpec::Int(-1), PlanValueSpec::Null, f32_2x3(), f32_2x3()],
        inputs: vec![0],
        outputs: vec![4],
        operators: vec![(op.0.to_string(), op.1.to_string())],
        delegates: Vec::new(),
        instructions: vec![
            InstructionSpec::Kernel { op_index: 0, args: vec![0, 1, 2, 3, 3] },
            InstructionSpec::Move(3, 4),
            InstructionSpec::Free(3),
        ],
    };
    let b = ProgramBuilder { methods: vec![m], ..ProgramBuilder::default() };
    Program::from_bytes(b.to_bytes()).expect("crafted program parses")
}

#[test]
fn kernel_calls_without_a_delegate() {
    let Some(rt) = crate::runtime() else { return };
    let mut method = rt.load(&kernel_only(("aten::cumsum", "out")), "forward").expect("loads");
    assert_eq!((method.n_gpu_calls(), method.n_cpu_calls()), (0, 1));
    let out = method.run(&[Tensor::from_f32(&[2, 3], &[1., 2., 3., -1., 0.5, 4.])]).expect("runs");
    assert_eq!(f32s(&out[0]), [1., 3., 6., -1., -0.5, 3.5]);
    assert_eq!(method.host_round_trips(), 0);
}

#[test]
fn kernel_call_without_a_kernel_is_a_typed_error() {
    let Some(rt) = crate::runtime() else { return };
    match rt.load(&kernel_only(("aten::frobnicate", "out")), "forward") {
        Err(Error::NoKernel { op, instruction: 0, .. }) => assert_eq!(op, "aten::frobnicate.out"),
        other => panic!("expected NoKernel, got {other:?}"),
    }
}

/// Runs `g` on `inputs` and checks output 0 (shape `want_shape`) against
/// `want` within `tol` (absolute plus relative).
fn check_within(g: GraphBuilder, inputs: &[Tensor], want_shape: &[u64], want: &[f64], tol: f64, what: &str) {
    let Some(method) = load(g) else { return };
    let outs = method.expect("loads").run(inputs).expect("runs");
    assert_eq!(outs[0].shape, want_shape, "{what}");
    let got = outs[0].to_f64_vec();
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol + tol * w.abs(), "{what}: element {i}: got {g}, want {w}");
    }
}

/// A 4-bit `[n, k]` linear weight with groups of `gs` as the exporter packs
/// it (u8 `[n, k / 2]`, even k in the low nibble, +8; f32 scales
/// `[ceil(k / gs), n_pad]`, n padded to 8 here so the padding is exercised):
/// `(packed, scales, n_pad, dequantized [n, k] in f64)`.
fn q4_weight(n: usize, k: usize, gs: usize, seed: u32) -> (Vec<u8>, Vec<f32>, usize, Vec<f64>) {
    let q: Vec<i8> = data(n * k, seed).iter().map(|v| ((v * 4.0).floor() as i8).clamp(-8, 7)).collect();
    let packed: Vec<u8> = (0..n * k / 2).map(|j| ((q[2 * j + 1] + 8) as u8) << 4 | (q[2 * j] + 8) as u8).collect();
    let n_pad = n.next_multiple_of(8);
    let groups = k.div_ceil(gs);
    let scales: Vec<f32> = data(groups * n_pad, seed + 1).iter().map(|s| 0.02 + s.abs() * 0.03).collect();
    let dequant = (0..n * k).map(|i| f64::from(q[i]) * f64::from(scales[(i % k / gs) * n_pad + i / k])).collect();
    (packed, scales, n_pad, dequant)
}

/// `x [m, k] @ w [n, k]^T` in f64.
fn matvec_ref(x: &[f32], w: &[f64], m: usize, n: usize, k: usize) -> Vec<f64> {
    (0..m * n).map(|i| (0..k).map(|kk| f64::from(x[i / n * k + kk]) * w[i % n * k + kk]).sum()).collect()
}

/// The 4-bit decode GEMV (`q4_gemv.wgsl`) on ragged shapes: N off any
/// power-of-two column count per workgroup (8, 16 and 32 columns: N below
/// 4096, from 4096, from 8192), N of 3, a last scale group
/// shorter than the others (K = 96, groups of 64), one 16-byte word per row
/// and rows of 256 words, N past 65535 columns, 1 to 4 rows of x, with and
/// without bias.
#[test]
fn q4_gemv_ragged_shapes_match_a_reference() {
    let cases = [
        (1usize, 259usize, 2048usize, 32usize, true),
        (2, 1001, 96, 64, false),
        (3, 3, 8192, 128, true),
        (4, 1030, 32, 32, false),
        (1, 70_001, 64, 32, false),
        (2, 5_000, 160, 32, true),
        (3, 9_001, 96, 32, false),
    ];
    // A constant weight is held word-major, one fed as an input row-major.
    for ((m, n, k, gs, with_bias), weights_in) in cases.into_iter().flat_map(|c| [(c, false), (c, true)]) {
        let (packed, scales, n_pad, w) = q4_weight(n, k, gs, 7 + n as u32);
        let bias = data(n_pad, 9);
        let mut g = GraphBuilder::new();
        let x = g.tensor(DType::F32, &[m as u64, k as u64]);
        let w_dims = [n as u64, k as u64 / 2];
        let wt = if weights_in { g.tensor(DType::U8, &w_dims) } else { g.constant(DType::U8, &w_dims, &packed) };
        let st = g.constant(DType::F32, &[k.div_ceil(gs) as u64, n_pad as u64], &f32_bytes(&scales));
        let gs_v = g.int(gs as i64);
        let bt = if with_bias { g.constant(DType::F32, &[n_pad as u64], &f32_bytes(&bias)) } else { g.null() };
        let out = g.tensor(DType::F32, &[m as u64, n as u64]);
        let op = g.op("et_vk.linear_q4gsw.default", &[x, wt, st, gs_v, bt, out]);
        let ins = if weights_in { vec![x, wt] } else { vec![x] };
        op.inputs(&ins).outputs(&[out]);
        let xv = data(m * k, 11 + m as u32);
        let mut want = matvec_ref(&xv, &w, m, n, k);
        if with_bias {
            want.iter_mut().enumerate().for_each(|(i, v)| *v += f64::from(bias[i % n]));
        }
        let what = format!("q4 gemv m {m} n {n} k {k} group {gs} weights as input {weights_in}");
        let mut inputs = vec![Tensor::from_f32(&[m as u64, k as u64], &xv)];
        if weights_in {
            inputs.push(Tensor::new(DType::U8, w_dims.to_vec(), packed).expect("sizes match"));
        }
        check_within(g, &inputs, &[m as u64, n as u64], &want, 1e-4, &what);
    }
}

/// The fused 4-bit SwiGLU decode GEMV (`q4_gemv_swiglu.wgsl`) on ragged
/// shapes.
#[test]
fn q4_gemv_swiglu_ragged_shapes_match_a_reference() {
    let cases = [
        (1usize, 259usize, 2048usize, 32usize),
        (2, 6, 4096, 128),
        (4, 13, 64, 64),
        (3, 4_100, 64, 32),
        (1, 8_200, 96, 32),
    ];
    // Constant weights are held word-major; an up weight fed as an input
    // stays row-major (the gate word-major: the kernel takes each layout).
    for ((m, n, k, gs), up_in) in cases.into_iter().flat_map(|c| [(c, false), (c, true)]) {
        let (pg, sg, n_pad, wg) = q4_weight(n, k, gs, 21 + n as u32);
        let (pu, su, _, wu) = q4_weight(n, k, gs, 23 + n as u32);
        let mut g = GraphBuilder::new();
        let x = g.tensor(DType::F32, &[m as u64, k as u64]);
        let gs_v = g.int(gs as i64);
        let groups = k.div_ceil(gs) as u64;
        let w_dims = [n as u64, k as u64 / 2];
        let wgt = g.constant(DType::U8, &w_dims, &pg);
        let sgt = g.constant(DType::F32, &[groups, n_pad as u64], &f32_bytes(&sg));
        let wut = if up_in { g.tensor(DType::U8, &w_dims) } else { g.constant(DType::U8, &w_dims, &pu) };
        let sut = g.constant(DType::F32, &[groups, n_pad as u64], &f32_bytes(&su));
        let out = g.tensor(DType::F32, &[m as u64, n as u64]);
        let op = g.op("etwgpu.linear_q4gsw_swiglu.default", &[x, gs_v, wgt, sgt, wut, sut, out]);
        let ins = if up_in { vec![x, wut] } else { vec![x] };
        op.inputs(&ins).outputs(&[out]);
        let xv = data(m * k, 25 + m as u32);
        let (gate, up) = (matvec_ref(&xv, &wg, m, n, k), matvec_ref(&xv, &wu, m, n, k));
        let want: Vec<f64> = gate.iter().zip(&up).map(|(g, u)| g / (1.0 + (-g).exp()) * u).collect();
        let what = format!("q4 swiglu gemv m {m} n {n} k {k} group {gs} up as input {up_in}");
        let mut inputs = vec![Tensor::from_f32(&[m as u64, k as u64], &xv)];
        if up_in {
            inputs.push(Tensor::new(DType::U8, w_dims.to_vec(), pu).expect("sizes match"));
        }
        check_within(g, &inputs, &[m as u64, n as u64], &want, 1e-4, &what);
    }
}

/// The dense decode GEMV (`linear_gemv.wgsl`) on ragged shapes: N off any
/// power-of-two column count, N of 2 and 5, K of one vec4, rows of 8192;
/// 2 columns a workgroup (N 259 and 5) and 8 (K 12).
#[test]
fn linear_gemv_ragged_shapes_match_a_reference() {
    for (m, n, k) in [(1usize, 259usize, 2048usize), (2, 1031, 12), (4, 5, 8192), (3, 2, 4)] {
        let wv = data(n * k, 31 + n as u32);
        let mut g = GraphBuilder::new();
        let x = g.tensor(DType::F32, &[m as u64, k as u64]);
        let w = g.constant(DType::F32, &[n as u64, k as u64], &f32_bytes(&wv));
        let none = g.null();
        let out = g.tensor(DType::F32, &[m as u64, n as u64]);
        g.op("aten.linear.default", &[x, w, none, out]).inputs(&[x]).outputs(&[out]);
        let xv = data(m * k, 33 + m as u32);
        let w64: Vec<f64> = wv.iter().map(|&v| f64::from(v)).collect();
        let want = matvec_ref(&xv, &w64, m, n, k);
        let what = format!("linear gemv m {m} n {n} k {k}");
        check_within(g, &[Tensor::from_f32(&[m as u64, k as u64], &xv)], &[m as u64, n as u64], &want, 1e-4, &what);
    }
}

/// The fused float SwiGLU and QKV decode GEMVs (`gemv_swiglu[_vec4].wgsl`,
/// `gemv_qkv[_vec4].wgsl`) on ragged shapes, with and without biases: N off any
/// power of two, projections of different widths, 1 to 4 rows, K of 2048,
/// 1,028 and 12 (the streaming `_vec4` forms: whole steps of their words,
/// the rest, or only the rest; 2, 4 and 8 columns a workgroup) and 6 (the
/// one-element-a-workgroup forms).
#[test]
fn float_swiglu_and_qkv_gemvs_match_a_reference() {
    for (m, k, ns, with_bias) in [
        (1usize, 2048usize, [259usize, 64, 7], true),
        (3, 12, [1031, 5, 130], false),
        (4, 6, [9, 3, 3], true),
        (2, 1028, [40, 17, 24], false),
    ] {
        let f64s = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
        let xv = data(m * k, 41 + k as u32);
        let ws: Vec<Vec<f32>> = ns.iter().enumerate().map(|(j, &n)| data(n * k, 43 + j as u32)).collect();
        let bs: Vec<Vec<f32>> = ns.iter().enumerate().map(|(j, &n)| data(n, 47 + j as u32)).collect();
        let proj = |j: usize| {
            let mut y = matvec_ref(&xv, &f64s(&ws[j]), m, ns[j], k);
            if with_bias {
                y.iter_mut().enumerate().for_each(|(i, v)| *v += f64::from(bs[j][i % ns[j]]));
            }
            y
        };
        let x_t = Tensor::from_f32(&[m as u64, k as u64], &xv);

        // SwiGLU of projections 0 and (a second weight of) the same width.
        let n = ns[0];
        let wu = data(n * k, 53);
        let bu = data(n, 54);
        let mut g = GraphBuilder::new();
        let x = g.tensor(DType::F32, &[m as u64, k as u64]);
        let wgt = g.constant(DType::F32, &[n as u64, k as u64], &f32_bytes(&ws[0]));
        let wut = g.constant(DType::F32, &[n as u64, k as u64], &f32_bytes(&wu));
        let (bgt, but) = if with_bias {
            (
                g.constant(DType::F32, &[n as u64], &f32_bytes(&bs[0])),
                g.constant(DType::F32, &[n as u64], &f32_bytes(&bu)),
            )
        } else {
            (g.null(), g.null())
        };
        let out = g.tensor(DType::F32, &[m as u64, n as u64]);
        g.op("etwgpu.linear_swiglu.default", &[x, wgt, bgt, wut, but, out]).inputs(&[x]).outputs(&[out]);
        let gate = proj(0);
        let mut up = matvec_ref(&xv, &f64s(&wu), m, n, k);
        if with_bias {
            up.iter_mut().enumerate().for_each(|(i, v)| *v += f64::from(bu[i % n]));
        }
        let want: Vec<f64> = gate.iter().zip(&up).map(|(g, u)| g / (1.0 + (-g).exp()) * u).collect();
        let what = format!("swiglu gemv m {m} n {n} k {k}");
        check_within(g, std::slice::from_ref(&x_t), &[m as u64, n as u64], &want, 1e-4, &what);

        // QKV of the three widths.
        let mut g = GraphBuilder::new();
        let x = g.tensor(DType::F32, &[m as u64, k as u64]);
        let mut args = vec![x];
        let mut outs = Vec::new();
        for j in 0..3 {
            args.push(g.constant(DType::F32, &[ns[j] as u64, k as u64], &f32_bytes(&ws[j])));
            args.push(if with_bias { g.constant(DType::F32, &[ns[j] as u64], &f32_bytes(&bs[j])) } else { g.null() });
            outs.push(g.tensor(DType::F32, &[m as u64, ns[j] as u64]));
        }
        let list = g.value_list(&outs);
        args.push(list);
        g.op("etwgpu.linear_qkv.default", &args).inputs(&[x]).outputs(&outs);
        let Some(method) = load(g) else { return };
        let got = method.expect("loads").run(std::slice::from_ref(&x_t)).expect("runs");
        for j in 0..3 {
            assert_eq!(got[j].shape, [m as u64, ns[j] as u64]);
            let want = proj(j);
            for (i, (g, w)) in got[j].to_f64_vec().iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-4 + 1e-4 * w.abs(),
                    "qkv m {m} k {k} projection {j} element {i}: {g} vs {w}"
                );
            }
        }
    }
}

/// The fused 4-bit Q/K/V decode GEMV (`q4_gemv_qkv.wgsl`, one dispatch for
/// the three projections) on ragged shapes: widths off any column count
/// per workgroup (8, 16, 32 by the total), projections of different
/// widths, 1 to 4 rows, groups of 32 and 64; the K weight fed as a graph
/// input (row-major) next to constant ones (word-major).
#[test]
fn q4_gemv_qkv_ragged_shapes_match_a_reference() {
    let cases = [
        (1usize, 2048usize, 32usize, [259usize, 64, 7], false),
        (3, 96, 32, [1031, 5, 130], true),
        (4, 64, 64, [4_100, 9, 3], false),
        (2, 160, 32, [9_000, 520, 520], true),
    ];
    for (m, k, gs, ns, k_in) in cases {
        let xv = data(m * k, 61 + m as u32);
        let mut g = GraphBuilder::new();
        let x = g.tensor(DType::F32, &[m as u64, k as u64]);
        let gs_v = g.int(gs as i64);
        let (mut args, mut outs, mut wants, mut fed) = (vec![x, gs_v], Vec::new(), Vec::new(), None);
        for (j, &n) in ns.iter().enumerate() {
            let (packed, scales, n_pad, w) = q4_weight(n, k, gs, 63 + 2 * j as u32);
            let w_dims = [n as u64, k as u64 / 2];
            let wt = if k_in && j == 1 {
                fed = Some(Tensor::new(DType::U8, w_dims.to_vec(), packed).expect("sizes match"));
                g.tensor(DType::U8, &w_dims)
            } else {
                g.constant(DType::U8, &w_dims, &packed)
            };
            args.push(wt);
            args.push(g.constant(DType::F32, &[k.div_ceil(gs) as u64, n_pad as u64], &f32_bytes(&scales)));
            outs.push(g.tensor(DType::F32, &[m as u64, n as u64]));
            wants.push(matvec_ref(&xv, &w, m, n, k));
        }
        let list = g.value_list(&outs);
        args.push(list);
        let ins = if k_in { vec![x, args[4]] } else { vec![x] };
        g.op("etwgpu.linear_q4gsw_qkv.default", &args).inputs(&ins).outputs(&outs);
        let Some(method) = load(g) else { return };
        let mut inputs = vec![Tensor::from_f32(&[m as u64, k as u64], &xv)];
        inputs.extend(fed);
        let got = method.expect("loads").run(&inputs).expect("runs");
        for (j, want) in wants.iter().enumerate() {
            assert_eq!(got[j].shape, [m as u64, ns[j] as u64]);
            for (i, (g, w)) in got[j].to_f64_vec().iter().zip(want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-4 + 1e-4 * w.abs(),
                    "q4 qkv m {m} k {k} projection {j} element {i}: {g} vs {w}"
                );
            }
        }
    }
}

/// ExecuTorch's resize rule for dynamic shapes: an input (and every
/// tensor computed from it) keeps its rank and fits when its element
/// count is within the allocation made at the declared shape, whatever
/// its dims; one element more is a typed error naming the input.
#[test]
fn inputs_fit_by_element_count_as_in_executorch() {
    let max = [8u64, 13, 55, 68];
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &max);
    let mid = g.tensor(DType::F32, &max);
    let out = g.tensor(DType::F32, &max);
    g.op("aten.neg.default", &[x, mid]).op("aten.relu.default", &[mid, out]).inputs(&[x]).outputs(&[out]);
    let Some(method) = load(g) else { return };
    let mut method = method.expect("loads");
    let n_max: u64 = max.iter().product();
    // [3, 14, 15, 9]: dims 14 > 13 while 5670 elements fit; and the exact
    // element count along one dim.
    for shape in [vec![3u64, 14, 15, 9], vec![1, 1, n_max, 1]] {
        let n: u64 = shape.iter().product();
        let xv = data(n as usize, 7);
        let outs = method.run(&[Tensor::from_f32(&shape, &xv)]).unwrap_or_else(|e| panic!("{shape:?}: {e}"));
        assert_eq!(outs[0].shape, shape);
        let want: Vec<f32> = xv.iter().map(|v| (-v).max(0.0)).collect();
        assert_eq!(f32s(&outs[0]), want, "{shape:?}");
    }
    for shape in [vec![1u64, 1, 1, n_max + 1], vec![3, 14, 15 * 9]] {
        let n: u64 = shape.iter().product();
        match method.run(&[Tensor::from_f32(&shape, &vec![0.0; n as usize])]) {
            Err(Error::InputShape { index: 0, max: m, found }) => assert_eq!((m, found), (max.to_vec(), shape)),
            other => panic!("{shape:?}: expected InputShape for input 0, got {other:?}"),
        }
    }
}
