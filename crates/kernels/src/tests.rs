//! Unit tests of the operator table and the host rules, on a small
//! in-memory graph.
//!
//! The file is past 700 lines because the house style keeps a crate's unit
//! tests in its one `tests.rs`, and every op family's host rules are
//! tested here on the same graph helpers.

use crate::ops::{OPS, OpId, from_name};
use crate::plan::{ElemType, Graph, Lowered, Step, TensorInfo, Value, Vid};

#[test]
fn table_is_sorted_and_unique() {
    for w in OPS.windows(2) {
        assert!(w[0].1 < w[1].1, "{} must sort before {}", w[0].1, w[1].1);
    }
    for (id, name) in OPS {
        assert_eq!(from_name(name), Some(*id));
        assert_eq!(id.name(), *name);
    }
    assert_eq!(from_name("aten.add"), None);
    assert_eq!(from_name("aten.add.Tensor"), Some(OpId::Add));
}

/// A graph of owned values for rule tests.
#[derive(Default)]
struct TestGraph {
    values: Vec<Owned>,
}

enum Owned {
    Tensor(ElemType, Vec<u64>, bool),
    Int(i64),
    Double(f64),
    Bool(bool),
    IntList(Vec<i64>),
    List(Vec<Vid>),
    SymInt(i64),
    Str(String),
    Null,
}

impl TestGraph {
    fn push(&mut self, v: Owned) -> Vid {
        self.values.push(v);
        Vid(self.values.len() as u32 - 1)
    }
    fn t(&mut self, shape: &[u64]) -> Vid {
        self.push(Owned::Tensor(ElemType::F32, shape.to_vec(), false))
    }
}

impl Graph for TestGraph {
    fn value(&self, id: Vid) -> Value<'_> {
        match &self.values[id.0 as usize] {
            Owned::Tensor(dtype, shape, is_constant) => {
                Value::Tensor(TensorInfo { id, dtype: *dtype, shape, is_constant: *is_constant, q4_word_major: false })
            }
            Owned::Int(x) => Value::Int(*x),
            Owned::Double(x) => Value::Double(*x),
            Owned::Bool(x) => Value::Bool(*x),
            Owned::IntList(x) => Value::IntList(x),
            Owned::List(x) => Value::List(x),
            Owned::SymInt(x) => Value::SymInt(*x),
            Owned::Str(x) => Value::String(x),
            Owned::Null => Value::Null,
        }
    }
}

fn check(g: &TestGraph, op: &str, args: &[Vid]) -> crate::Result<Lowered> {
    let op = from_name(op).expect("registered");
    op.lower(&crate::plan::Ctx::new(g, args))
}

fn out_shape(l: &Lowered) -> &[u64] {
    &l.shapes[0].1
}

#[test]
fn add_broadcasts_and_sizes_grid() {
    let mut g = TestGraph::default();
    let a = g.t(&[3, 1, 5]);
    let b = g.t(&[4, 1]);
    let alpha = g.push(Owned::Int(1));
    let out = g.t(&[3, 4, 5]);
    let l = check(&g, "aten.add.Tensor", &[a, b, alpha, out]).expect("lowers");
    assert_eq!(out_shape(&l), [3, 4, 5]);
    let Step::Dispatch(d) = &l.steps[0] else { panic!("expected a dispatch, got {:?}", l.steps) };
    assert_eq!(d.workgroups, [1, 1, 1]);
    assert_eq!(d.params.len(), 128);
}

#[test]
fn incompatible_broadcast_is_a_shape_error() {
    let mut g = TestGraph::default();
    let a = g.t(&[3]);
    let b = g.t(&[4]);
    let out = g.t(&[4]);
    let err = check(&g, "aten.mul.Tensor", &[a, b, out]).expect_err("3 vs 4");
    assert!(matches!(err, crate::Error::Shape { arg_idx: 1, .. }), "{err:?}");
}

#[test]
fn wrong_kinds_and_counts_are_typed_errors() {
    let mut g = TestGraph::default();
    let a = g.t(&[3]);
    let i = g.push(Owned::Int(2));
    let out = g.t(&[3]);
    assert!(matches!(check(&g, "aten.relu.default", &[a]), Err(crate::Error::ArgCount { expected: 2, found: 1 })));
    assert!(matches!(check(&g, "aten.relu.default", &[i, out]), Err(crate::Error::ArgKind { arg_idx: 0, .. })));
    let bool_t = g.push(Owned::Tensor(ElemType::Bool, vec![3], false));
    assert!(matches!(check(&g, "aten.relu.default", &[bool_t, out]), Err(crate::Error::DType { .. })));
}

#[test]
fn view_infers_minus_one_and_aliases() {
    let mut g = TestGraph::default();
    let x = g.t(&[2, 3, 4]);
    let size = g.push(Owned::IntList(vec![-1, 4]));
    let out = g.t(&[6, 4]);
    let l = check(&g, "aten.view_copy.default", &[x, size, out]).expect("lowers");
    assert_eq!(out_shape(&l), [6, 4]);
    assert_eq!(l.steps, [Step::Alias { out, src: x }]);
    let bad = g.push(Owned::IntList(vec![5, -1]));
    assert!(check(&g, "aten.view_copy.default", &[x, bad, out]).is_err());
}

#[test]
fn linear_uses_transposed_weight_strides() {
    let mut g = TestGraph::default();
    let x = g.t(&[2, 5, 7]);
    let w = g.push(Owned::Tensor(ElemType::F32, vec![3, 7], true));
    let null = g.push(Owned::Null);
    let out = g.t(&[2, 5, 3]);
    let l = check(&g, "aten.linear.default", &[x, w, null, out]).expect("lowers");
    assert_eq!(out_shape(&l), [2, 5, 3]);
    let Step::Dispatch(d) = &l.steps[0] else { panic!("expected a dispatch") };
    assert_eq!(d.inputs, [x, w, x], "no bias: the input stands in");
    let wrong_w = g.t(&[3, 6]);
    assert!(matches!(
        check(&g, "aten.linear.default", &[x, wrong_w, null, out]),
        Err(crate::Error::Shape { arg_idx: 1, .. })
    ));
}

#[test]
fn permute_slice_select_shapes() {
    let mut g = TestGraph::default();
    let x = g.t(&[2, 3, 4]);
    let dims = g.push(Owned::IntList(vec![2, 0, -2]));
    let out = g.t(&[4, 2, 3]);
    assert_eq!(out_shape(&check(&g, "aten.permute_copy.default", &[x, dims, out]).expect("permute")), [4, 2, 3]);
    let (d, s, e, st) = (g.push(Owned::Int(-1)), g.push(Owned::Int(1)), g.push(Owned::Null), g.push(Owned::Int(2)));
    let out2 = g.t(&[2, 3, 2]);
    let l = check(&g, "aten.slice_copy.Tensor", &[x, d, s, e, st, out2]).expect("slice");
    assert_eq!(out_shape(&l), [2, 3, 2]);
    let out3 = g.t(&[2, 4]);
    let l = check(&g, "aten.select_copy.int", &[x, s, d, out3]).expect("select");
    assert_eq!(out_shape(&l), [2, 4]);
}

#[test]
fn layer_norm_stat_shapes() {
    let mut g = TestGraph::default();
    let x = g.t(&[2, 3, 8]);
    let ns = g.push(Owned::IntList(vec![8]));
    let w = g.push(Owned::Tensor(ElemType::F32, vec![8], true));
    let eps = g.push(Owned::Double(1e-5));
    let (o, m, r) = (g.t(&[2, 3, 8]), g.t(&[2, 3, 1]), g.t(&[2, 3, 1]));
    let outs = g.push(Owned::List(vec![o, m, r]));
    let l = check(&g, "aten.native_layer_norm.default", &[x, ns, w, w, eps, outs]).expect("lowers");
    assert_eq!(l.shapes, vec![(o, vec![2, 3, 8]), (m, vec![2, 3, 1]), (r, vec![2, 3, 1])]);
}

#[test]
fn grid_folds_past_the_per_dimension_limit() {
    assert_eq!(crate::plan::grid_1d(1, 256).expect("fits"), [1, 1, 1]);
    assert_eq!(crate::plan::grid_1d(257, 256).expect("fits"), [2, 1, 1]);
    let big = 65_536 * 256;
    assert_eq!(crate::plan::grid_1d(big, 256).expect("fits"), [65_535, 2, 1]);
}

#[test]
fn every_shader_source_is_nonempty_and_labelled() {
    for id in crate::ShaderId::ALL {
        assert!(id.source().contains("fn main"), "{}", id.label());
        assert_eq!(crate::ShaderId::find(id.family(), id.variant()), Some(*id));
    }
}

/// The decode and prefill hot kernels carry `// bounds: host-checked`
/// (so a trusted load creates them without index clamps): a marker
/// dropped by accident fails here. Shaders written at lowering time never
/// carry it.
#[test]
fn hot_kernels_are_marked_bounds_host_checked() {
    use crate::Family as F;
    let hot = [
        F::Q4Gemv,
        F::Q4GemvSwiglu,
        F::Q4GemvQkv,
        F::Q4GemvAttn,
        F::Q4GemvNorm,
        F::Q4GemvQkvNorm,
        F::Q4GemvSwigluNorm,
        F::Q4GemvI8,
        F::Q4GemvSwigluNormI8,
        F::Q4GemvQkvNormI8,
        F::Q4GemvAttnI8,
        F::Q4Gemm,
        F::Q4GemmSwiglu,
        F::Q4GemmQkv,
        F::Q4GemmSplitk,
        F::Q4GemmCoop,
        F::Q4GemmCoopLarge,
        F::Q4GemmCoopLargeSplitk,
        F::Q4GemmCoopQkv,
        F::Q4GemmCoopQkvLarge,
        F::Q4GemmCoopSplitk,
        F::Q4GemmCoopSwiglu,
        F::Q4GemmCoopSwigluLarge,
        F::Matmul,
        F::MatmulCoop,
        F::MatmulCoopLarge,
        F::SdpaSplit,
        F::SdpaSplitRope,
        F::SdpaSplitShort,
        F::SdpaSplitShortRope,
        F::SdpaSplitSg,
        F::SdpaSplitSgRope,
        F::SdpaSplitCombine,
    ];
    for f in hot {
        assert!(f.bounds_host_checked(), "{f:?} lost its `// bounds: host-checked` line");
    }
    for id in crate::ShaderId::ALL {
        assert_eq!(id.bounds_host_checked(), id.family().bounds_host_checked(), "{}", id.label());
        assert_eq!(Shader::Static(*id).bounds_host_checked(), id.bounds_host_checked(), "{}", id.label());
        let marked = id.source().lines().any(|l| l.trim() == "// bounds: host-checked");
        assert_eq!(marked, id.bounds_host_checked(), "{}: the marker travels with the source", id.label());
    }
    let fused = crate::GeneratedShader::intern("fused_elementwise.f32", crate::Variant::F32, "//! t\n".into());
    assert!(!Shader::Generated(fused).bounds_host_checked());
}

#[test]
fn every_generated_shader_validates_with_naga() {
    for id in crate::ShaderId::ALL {
        let module = naga::front::wgsl::parse_str(id.source())
            .unwrap_or_else(|e| panic!("{}: {}", id.label(), e.emit_to_string(id.source())));
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
            .validate(&module)
            .unwrap_or_else(|e| panic!("{}: {e:?}", id.label()));
    }
}

/// Every workgroup variable of a cooperative-matrix kernel is a multiple
/// of 16 bytes, so wherever the driver places it the arrays stay 16-byte
/// aligned for the matrix units' row moves: a 4-byte flag in
/// `sdpa_prefill_coop.wgsl` made all its results wrong on the H200 (runs
/// ad to ak; run al in `tools/device/NOTES.md`). Checked against naga's
/// layout of each generated shader.
#[test]
fn coop_workgroup_variables_are_16_byte_multiples() {
    let mut coop = 0;
    for id in crate::ShaderId::ALL {
        if !id.source().contains("enable wgpu_cooperative_matrix;") {
            continue;
        }
        coop += 1;
        let module = naga::front::wgsl::parse_str(id.source()).expect("parses");
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(module.to_ctx()).expect("lays out");
        for (_, var) in module.global_variables.iter() {
            if var.space == naga::AddressSpace::WorkGroup {
                let size = layouter[var.ty].size;
                let name = var.name.as_deref().unwrap_or("?");
                assert_eq!(size % 16, 0, "{}: workgroup variable `{name}` is {size} bytes", id.label());
            }
        }
    }
    assert!(coop >= 10, "found {coop} cooperative-matrix shaders");
}

/// The `mode` field (bytes 12..16) of a `compare.wgsl` dispatch.
fn compare_mode(l: &Lowered) -> u32 {
    let Step::Dispatch(d) = &l.steps[0] else { panic!("expected a dispatch") };
    param_word(d, 3)
}

#[test]
fn scalar_comparisons_pick_their_domain_and_need_a_bool_output() {
    let mut g = TestGraph::default();
    let ints = g.push(Owned::Tensor(ElemType::I32, vec![4], false));
    let floats = g.t(&[4]);
    let out = g.push(Owned::Tensor(ElemType::Bool, vec![4], false));
    let (two, half) = (g.push(Owned::Int(2)), g.push(Owned::Double(0.5)));
    let huge = g.push(Owned::Int(1 << 40));
    assert_eq!(compare_mode(&check(&g, "aten.eq.Scalar", &[ints, two, out]).expect("int")), 2);
    assert_eq!(compare_mode(&check(&g, "aten.eq.Scalar", &[ints, half, out]).expect("promotes")), 1);
    assert_eq!(compare_mode(&check(&g, "aten.lt.Scalar", &[floats, two, out]).expect("float")), 1);
    assert!(matches!(check(&g, "aten.gt.Scalar", &[ints, huge, out]), Err(crate::Error::ArgValue { arg_idx: 1, .. })));
    let float_out = g.t(&[4]);
    assert!(matches!(
        check(&g, "aten.ge.Tensor", &[floats, floats, float_out]),
        Err(crate::Error::DType { arg_idx: 2, .. })
    ));
    assert!(matches!(check(&g, "aten.ge.Tensor", &[floats, ints, out]), Err(crate::Error::DType { arg_idx: 1, .. })));
    assert!(matches!(
        check(&g, "aten.where.self", &[floats, floats, floats, float_out]),
        Err(crate::Error::DType { arg_idx: 0, .. })
    ));
}

/// The (n_out, n_red, out_rank, red_rank) fields and the kept and reduced
/// shapes/strides of a `reduce.wgsl` or `arg_reduce.wgsl` dispatch.
fn reduce_walk(l: &Lowered) -> ([u32; 4], [Vec<u32>; 4]) {
    let Step::Dispatch(d) = &l.steps[0] else { panic!("expected a dispatch") };
    let word = |i: usize| param_word(d, i);
    let head = [word(0), word(1), word(3), word(4)];
    let block = |k: usize, n: u32| (0..n as usize).map(|i| word(8 + 8 * k + i)).collect::<Vec<_>>();
    (head, [block(0, head[2]), block(1, head[2]), block(2, head[3]), block(3, head[3])])
}

#[test]
fn reductions_coalesce_dims_and_shape_their_outputs() {
    let mut g = TestGraph::default();
    let x = g.t(&[3, 5, 7]);
    let (t, f, null) = (g.push(Owned::Bool(true)), g.push(Owned::Bool(false)), g.push(Owned::Null));
    // sum([0, 1], keepdim): one reduced dim of 15 with stride 7.
    let dims = g.push(Owned::IntList(vec![0, -2]));
    let out = g.t(&[1, 1, 7]);
    let l = check(&g, "aten.sum.dim_IntList", &[x, dims, t, null, out]).expect("sum");
    assert_eq!(out_shape(&l), [1, 1, 7]);
    assert_eq!(reduce_walk(&l), ([7, 15, 1, 1], [vec![7], vec![1], vec![15], vec![7]]));
    // [2, 1, 4, 3] reducing dims 0 and 2: the size-1 dim between them drops
    // out, so they merge into one dim of 8 with stride 3.
    let y = g.t(&[2, 1, 4, 3]);
    let dims = g.push(Owned::IntList(vec![2, 0]));
    let out = g.t(&[1, 3]);
    let l = check(&g, "aten.amax.default", &[y, dims, f, out]).expect("amax");
    assert_eq!(out_shape(&l), [1, 3]);
    assert_eq!(reduce_walk(&l), ([3, 8, 1, 1], [vec![3], vec![1], vec![8], vec![3]]));
    // Interleaved kinds stay apart; mean over an empty list reduces all.
    let dims = g.push(Owned::IntList(vec![0, 2]));
    let out = g.t(&[5]);
    let l = check(&g, "aten.mean.dim", &[x, dims, f, null, out]).expect("mean");
    assert_eq!(reduce_walk(&l), ([5, 21, 1, 2], [vec![5], vec![7], vec![3, 7], vec![35, 1]]));
    let all = g.push(Owned::IntList(vec![]));
    let out = g.t(&[]);
    assert_eq!(out_shape(&check(&g, "aten.mean.dim", &[x, all, f, null, out]).expect("all")), [] as [u64; 0]);
    // argmax: None flattens; the output must be int32; repeated dims fail.
    let idx = g.push(Owned::Tensor(ElemType::I32, vec![1, 1, 1], false));
    let l = check(&g, "aten.argmax.default", &[x, null, t, idx]).expect("argmax");
    assert_eq!(out_shape(&l), [1, 1, 1]);
    assert_eq!(reduce_walk(&l).0, [1, 105, 0, 1]);
    let m1 = g.push(Owned::Int(-1));
    assert!(matches!(check(&g, "aten.argmin.default", &[x, m1, f, out]), Err(crate::Error::DType { arg_idx: 3, .. })));
    let twice = g.push(Owned::IntList(vec![1, -2]));
    assert!(matches!(
        check(&g, "aten.sum.dim_IntList", &[x, twice, f, null, out]),
        Err(crate::Error::ArgValue { arg_idx: 1, .. })
    ));
}

#[test]
fn conv_shapes_1d_2d_grouped_and_bad_groups() {
    let mut g = TestGraph::default();
    let x = g.t(&[1, 4, 9, 7]);
    let w = g.push(Owned::Tensor(ElemType::F32, vec![6, 2, 3, 3], true));
    let null = g.push(Owned::Null);
    let (s2, p1, d2) =
        (g.push(Owned::IntList(vec![2, 2])), g.push(Owned::IntList(vec![1, 1])), g.push(Owned::IntList(vec![2, 1])));
    let f = g.push(Owned::Bool(false));
    let op = g.push(Owned::IntList(vec![0, 0]));
    let groups = g.push(Owned::Int(2));
    let out = g.t(&[1, 6, 4, 4]);
    let args = [x, w, null, s2, p1, d2, f, op, groups, out];
    // H: (9 + 2 - 2*2 - 1) / 2 + 1 = 4; W: (7 + 2 - 2 - 1) / 2 + 1 = 4.
    assert_eq!(out_shape(&check(&g, "aten.convolution.default", &args).expect("grouped conv")), [1, 6, 4, 4]);
    let three = g.push(Owned::Int(3));
    let bad = [x, w, null, s2, p1, d2, f, op, three, out];
    assert!(matches!(check(&g, "aten.convolution.default", &bad), Err(crate::Error::ArgValue { arg_idx: 8, .. })));
    let x1 = g.t(&[1, 2, 10]);
    let w1 = g.push(Owned::Tensor(ElemType::F32, vec![3, 2, 3], true));
    let (s1, p0, d1, one) = (
        g.push(Owned::IntList(vec![1])),
        g.push(Owned::IntList(vec![0])),
        g.push(Owned::IntList(vec![2])),
        g.push(Owned::Int(1)),
    );
    let out1 = g.t(&[1, 3, 6]);
    let (lo, hi) = (g.push(Owned::Int(0)), g.push(Owned::Double(1.797e308)));
    let args = [x1, w1, null, s1, p0, d1, f, p0, one, lo, hi, out1];
    assert_eq!(out_shape(&check(&g, "et_vk.conv_with_clamp.default", &args).expect("conv1d")), [1, 3, 6]);
}

#[test]
fn pool_shapes_with_ceil_mode() {
    let mut g = TestGraph::default();
    let x = g.t(&[1, 2, 5, 5]);
    let (k, s, p, d) = (
        g.push(Owned::IntList(vec![2, 2])),
        g.push(Owned::IntList(vec![2, 2])),
        g.push(Owned::IntList(vec![0, 0])),
        g.push(Owned::IntList(vec![1, 1])),
    );
    let (t, f) = (g.push(Owned::Bool(true)), g.push(Owned::Bool(false)));
    let (o, idx) = (g.t(&[1, 2, 3, 3]), g.push(Owned::Tensor(ElemType::I32, vec![1, 2, 3, 3], false)));
    let outs = g.push(Owned::List(vec![o, idx]));
    let l = check(&g, "aten.max_pool2d_with_indices.default", &[x, k, s, p, d, t, outs]).expect("ceil");
    assert_eq!(l.shapes, vec![(o, vec![1, 2, 3, 3]), (idx, vec![1, 2, 3, 3])]);
    let null = g.push(Owned::Null);
    let o2 = g.t(&[1, 2, 2, 2]);
    let l = check(&g, "aten.avg_pool2d.default", &[x, k, s, p, f, t, null, o2]).expect("floor");
    assert_eq!(out_shape(&l), [1, 2, 2, 2]);
}

#[test]
fn symint_ops_set_live_values() {
    let mut g = TestGraph::default();
    let x = g.t(&[2, 7, 3]);
    let (minus_two, seven_neg, two) = (g.push(Owned::Int(-2)), g.push(Owned::Int(-7)), g.push(Owned::Int(2)));
    let s = g.push(Owned::SymInt(7));
    let out = g.push(Owned::SymInt(0));
    let set = |l: crate::Result<Lowered>| match l.expect("lowers").steps[..] {
        [Step::SymInt { out: o, value }] if o == out => value,
        ref other => panic!("expected one SymInt step, got {other:?}"),
    };
    assert_eq!(set(check(&g, "sym_size.int", &[x, minus_two, out])), 7);
    assert_eq!(set(check(&g, "add", &[s, two, out])), 9);
    assert_eq!(set(check(&g, "sub", &[s, two, out])), 5);
    assert_eq!(set(check(&g, "mul", &[s, minus_two, out])), -14);
    assert_eq!(set(check(&g, "floordiv", &[s, two, out])), 3);
    assert_eq!(set(check(&g, "floordiv", &[seven_neg, two, out])), -4, "rounds toward -inf");
    let zero = g.push(Owned::Int(0));
    assert!(matches!(check(&g, "floordiv", &[s, zero, out]), Err(crate::Error::ArgValue { arg_idx: 1, .. })));
    let not_sym = g.t(&[1]);
    assert!(matches!(check(&g, "add", &[s, two, not_sym]), Err(crate::Error::ArgKind { arg_idx: 2, .. })));
    let pos = g.push(Owned::Tensor(ElemType::I32, vec![1, 4], false));
    let one = g.push(Owned::Int(1));
    let minus_one = g.push(Owned::Int(-1));
    let l = check(&g, "et_vk.select_as_symint.default", &[pos, one, minus_one, out]).expect("lowers");
    assert_eq!(l.steps, [Step::ReadSymInt { out, src: pos, elem: 3 }]);
    assert!(check(&g, "et_vk.select_as_symint.default", &[x, one, minus_one, out]).is_err(), "float source");
}

#[test]
fn indexing_shapes_and_errors() {
    let mut g = TestGraph::default();
    let x = g.t(&[4, 6, 5]);
    let idx = g.push(Owned::Tensor(ElemType::I32, vec![2, 3], false));
    let null = g.push(Owned::Null);
    // x[:, idx] -> [4, 2, 3, 5].
    let list = g.push(Owned::List(vec![null, idx]));
    let out = g.t(&[4, 2, 3, 5]);
    assert_eq!(out_shape(&check(&g, "aten.index.Tensor", &[x, list, out]).expect("index")), [4, 2, 3, 5]);
    let two = g.push(Owned::List(vec![idx, idx]));
    assert!(matches!(check(&g, "aten.index.Tensor", &[x, two, out]), Err(crate::Error::ArgValue { arg_idx: 1, .. })));
    // embedding of a [2, 3] index into a [V, E] weight.
    let w = g.push(Owned::Tensor(ElemType::F32, vec![10, 5], true));
    let (m1, f) = (g.push(Owned::Int(-1)), g.push(Owned::Bool(false)));
    let out = g.t(&[2, 3, 5]);
    let l = check(&g, "aten.embedding.default", &[w, idx, m1, f, f, out]).expect("embedding");
    assert_eq!(out_shape(&l), [2, 3, 5]);
    // gather along dim -1: the index may be smaller off that dim, not larger.
    let gi = g.push(Owned::Tensor(ElemType::I32, vec![3, 6, 9], false));
    let out = g.t(&[3, 6, 9]);
    assert_eq!(out_shape(&check(&g, "aten.gather.default", &[x, m1, gi, f, out]).expect("gather")), [3, 6, 9]);
    let too_big = g.push(Owned::Tensor(ElemType::I32, vec![5, 6, 9], false));
    assert!(matches!(
        check(&g, "aten.gather.default", &[x, m1, too_big, f, out]),
        Err(crate::Error::Shape { arg_idx: 2, .. })
    ));
    let float_idx = g.t(&[3]);
    let zero = g.push(Owned::Int(0));
    assert!(matches!(
        check(&g, "aten.index_select.default", &[x, zero, float_idx, out]),
        Err(crate::Error::DType { arg_idx: 2, .. })
    ));
}

#[test]
fn repeat_split_and_creation_rules() {
    let mut g = TestGraph::default();
    // repeat([3, 5, 2], [2, 1, 1, 3]) -> [2, 3, 5, 6]: read as a rank-5 copy
    // (2 x stride 0, 3, 5, 3 x stride 0, 2), the repeat-1 entries dropped.
    let y = g.t(&[3, 5, 2]);
    let reps = g.push(Owned::IntList(vec![2, 1, 1, 3]));
    let out = g.t(&[2, 3, 5, 6]);
    let l = check(&g, "aten.repeat.default", &[y, reps, out]).expect("repeat");
    assert_eq!(out_shape(&l), [2, 3, 5, 6]);
    let Step::Dispatch(d) = &l.steps[0] else { panic!("expected a dispatch") };
    assert_eq!(param_word(d, 1), 5);
    let few = g.push(Owned::IntList(vec![2, 2]));
    assert!(matches!(check(&g, "aten.repeat.default", &[y, few, out]), Err(crate::Error::ArgValue { arg_idx: 1, .. })));
    // split sizes must cover the dim.
    let sizes = g.push(Owned::IntList(vec![1, 3]));
    let m1 = g.push(Owned::Int(-1));
    let (a, b) = (g.t(&[3, 5, 1]), g.t(&[3, 5, 3]));
    let outs = g.push(Owned::List(vec![a, b]));
    assert!(matches!(
        check(&g, "aten.split_with_sizes_copy.default", &[y, sizes, m1, outs]),
        Err(crate::Error::ArgValue { arg_idx: 1, .. })
    ));
    // arange(-3, 9, 3) has 4 values; an int32 output needs integral values.
    let (s, e, st) = (g.push(Owned::Int(-3)), g.push(Owned::Int(9)), g.push(Owned::Int(3)));
    let (null, f) = (g.push(Owned::Null), g.push(Owned::Bool(false)));
    let ints = g.push(Owned::Tensor(ElemType::I32, vec![4], false));
    let args = [s, e, st, null, null, null, f, ints];
    assert_eq!(out_shape(&check(&g, "aten.arange.start_step", &args).expect("arange")), [4]);
    let half = g.push(Owned::Double(0.5));
    let size = g.push(Owned::IntList(vec![4]));
    assert!(matches!(
        check(&g, "aten.full.default", &[size, half, null, null, null, f, ints]),
        Err(crate::Error::ArgValue { .. })
    ));
}

#[test]
fn transposed_conv_shape_and_output_padding_bound() {
    let mut g = TestGraph::default();
    let x = g.t(&[1, 4, 6, 5]);
    let w = g.push(Owned::Tensor(ElemType::F32, vec![4, 2, 3, 3], true));
    let null = g.push(Owned::Null);
    let (s2, p1, d1) =
        (g.push(Owned::IntList(vec![2])), g.push(Owned::IntList(vec![1])), g.push(Owned::IntList(vec![1])));
    let t = g.push(Owned::Bool(true));
    let (op1, op2) = (g.push(Owned::IntList(vec![1, 1])), g.push(Owned::IntList(vec![2, 2])));
    let groups = g.push(Owned::Int(2));
    let out = g.t(&[1, 4, 12, 10]);
    // (6 - 1) * 2 - 2 + 2 + 1 + 1 = 12; (5 - 1) * 2 - 2 + 2 + 1 + 1 = 10.
    let l = check(&g, "aten.convolution.default", &[x, w, null, s2, p1, d1, t, op1, groups, out]).expect("lowers");
    assert_eq!(out_shape(&l), [1, 4, 12, 10]);
    let bad = [x, w, null, s2, p1, d1, t, op2, groups, out];
    assert!(matches!(check(&g, "aten.convolution.default", &bad), Err(crate::Error::ArgValue { arg_idx: 7, .. })));
}

/// `conv_route` is the one place a convolution's kernel is chosen: the
/// implicit GEMM for ungrouped, untransposed convolutions that fill its
/// tiles (at `auto`), all of them (at `gemm`), none (at `direct`); on
/// cooperative matrices where the device has them and the operands may be
/// f16, but for narrow and large layers at `auto`; the
/// lowering dispatches what it chose, over one workgroup a 64 x 64 tile.
#[test]
fn convolutions_route_to_the_implicit_gemm_by_size_and_setting() {
    use crate::caps::{ConvKernels, DeviceCaps};
    use crate::ops::conv_routes::{ConvGeom, ConvRoute, conv_route};
    let resnet = ConvGeom {
        n: 1,
        c_in: 64,
        h: 56,
        w: 56,
        c_out: 64,
        oh: 56,
        ow: 56,
        kh: 3,
        kw: 3,
        stride: [1, 1],
        padding: [1, 1],
        dilation: [1, 1],
        groups: 1,
        transposed: false,
    };
    let late = ConvGeom { c_in: 512, c_out: 512, h: 7, w: 7, oh: 7, ow: 7, ..resnet };
    let late_b8 = ConvGeom { n: 8, ..late };
    let resnet_b8 = ConvGeom { n: 8, ..resnet };
    let head = ConvGeom { c_out: 3, ..late };
    let pointwise_rgb = ConvGeom { c_in: 3, kh: 1, kw: 1, padding: [0, 0], ..late };
    let depthwise = ConvGeom { groups: 64, ..resnet };
    let transposed = ConvGeom { transposed: true, ..resnet };
    let caps = |conv| DeviceCaps { conv, ..DeviceCaps::default() };
    use ConvKernels::{Auto, Direct, Gemm};
    use ConvRoute::{Direct as D, Gemm as G};
    for (geom, want) in [
        (late, [G, D, G]),
        (resnet, [G, D, G]),
        (late_b8, [G, D, G]),
        (head, [D, D, G]),
        (pointwise_rgb, [D, D, G]),
        (depthwise, [D; 3]),
        (transposed, [D; 3]),
    ] {
        let got = [Auto, Direct, Gemm].map(|k| conv_route(&caps(k), &geom, false));
        assert_eq!(got, want, "{geom:?}");
    }
    // With cooperative matrices: float16 programs, and float32 ones whose
    // precision lets dense products take f16 operands, take the matrix
    // units for every convolution the implicit GEMM computes and fills,
    // but a narrow (64 channels) and large (25,088 pixels) one at `auto`;
    // `mixed` keeps convolutions in float32.
    use crate::caps::Precision;
    use ConvRoute::Coop as C;
    let coop = |conv, precision| DeviceCaps { conv, coop_matrix_f16: true, precision, ..DeviceCaps::default() };
    for (geom, f16_input, precision, want) in [
        (late_b8, false, Precision::F16, [C, D, C]),
        (resnet, true, Precision::F32, [C, D, C]),
        (late, false, Precision::Mixed, [G, D, G]),
        (resnet, false, Precision::Mixed, [G, D, G]),
        (resnet_b8, true, Precision::F32, [G, D, C]),
        (head, true, Precision::F32, [D, D, C]),
        (pointwise_rgb, false, Precision::F16, [D, D, C]),
        (depthwise, true, Precision::F16, [D; 3]),
        (transposed, true, Precision::F16, [D; 3]),
    ] {
        let got = [Auto, Direct, Gemm].map(|k| conv_route(&coop(k, precision), &geom, f16_input));
        assert_eq!(got, want, "{geom:?} f16 input {f16_input} {precision:?}");
    }
    assert_eq!(DeviceCaps::default().conv, Auto, "the implicit GEMM by size is the default");
    // The lowering: [2, 64, 9, 9] * [70, 64, 3, 3], padding 1: 162 pixels
    // (3 row tiles) by 70 channels (2 column tiles).
    let mut g = TestGraph::default();
    let x = g.t(&[2, 64, 9, 9]);
    let w = g.push(Owned::Tensor(ElemType::F32, vec![70, 64, 3, 3], true));
    let null = g.push(Owned::Null);
    let (ones, zeros) = (g.push(Owned::IntList(vec![1, 1])), g.push(Owned::IntList(vec![0, 0])));
    let (f, one) = (g.push(Owned::Bool(false)), g.push(Owned::Int(1)));
    let out = g.t(&[2, 70, 9, 9]);
    let args = [x, w, null, ones, ones, ones, f, zeros, one, out];
    let dispatches = |l: &Lowered| -> Vec<(&'static str, [u32; 3], Vec<Vid>)> {
        l.steps
            .iter()
            .filter_map(|s| {
                if let Step::Dispatch(d) = s { Some((d.shader.label(), d.workgroups, d.outputs.clone())) } else { None }
            })
            .collect()
    };
    let scratch = [g.t(&[1]), g.t(&[1])];
    for (conv, label, groups) in [(Auto, "conv_gemm.f32", [6, 1, 1]), (Direct, "conv.f32", [178, 1, 1])] {
        let ctx = crate::plan::Ctx::new(&g, &args).with_caps(caps(conv)).with_scratch(&scratch);
        let l = from_name("aten.convolution.default").expect("registered").lower(&ctx).expect("lowers");
        assert_eq!(out_shape(&l), [2, 70, 9, 9]);
        // 6 tiles of K = 576: too short to split (512 inputs a split at least).
        assert_eq!(dispatches(&l), [(label, groups, vec![out])], "{conv:?}");
    }
    // On the matrix units (precision f16): 2 pixel tiles of 128 by 2
    // channel tiles of 64, one dispatch (no split K, scratch or not).
    let ctx = crate::plan::Ctx::new(&g, &args).with_caps(coop(Auto, Precision::F16)).with_scratch(&scratch);
    let l = from_name("aten.convolution.default").expect("registered").lower(&ctx).expect("lowers");
    assert_eq!(dispatches(&l), [("conv_gemm_coop.f32", [4, 1, 1], vec![out])]);
    // ResNet-18's last 3x3 layer at batch 1: 49 pixels by 512 channels is
    // 8 tiles; K = 4608 splits 8 ways (576 inputs each) into the scratch,
    // then the combine writes the output. Without scratch, one dispatch.
    let x = g.t(&[1, 512, 7, 7]);
    let w = g.push(Owned::Tensor(ElemType::F32, vec![512, 512, 3, 3], true));
    let out = g.t(&[1, 512, 7, 7]);
    let args = [x, w, null, ones, ones, ones, f, zeros, one, out];
    let lower = |scratch: &[Vid]| {
        let ctx = crate::plan::Ctx::new(&g, &args).with_caps(caps(Auto)).with_scratch(scratch);
        from_name("aten.convolution.default").expect("registered").lower(&ctx).expect("lowers")
    };
    let split = lower(&scratch);
    let declared = split
        .steps
        .iter()
        .find_map(|s| if let Step::Scratch { slot, bytes } = s { Some((*slot, *bytes)) } else { None });
    assert_eq!(declared, Some((1, 4 * 8 * 512 * 49)), "8 splits of the whole output");
    assert_eq!(
        dispatches(&split),
        [("conv_gemm.f32", [64, 1, 1], vec![scratch[1]]), ("conv_gemm_combine.f32", [98, 1, 1], vec![out])]
    );
    assert_eq!(dispatches(&lower(&[])), [("conv_gemm.f32", [8, 1, 1], vec![out])]);
    // On the matrix units the same layer is 8 tiles of 128 x 64, and
    // splits the same way (32-input steps: 144 of them, 18 a split).
    let ctx = crate::plan::Ctx::new(&g, &args).with_caps(coop(Auto, Precision::F16)).with_scratch(&scratch);
    let l = from_name("aten.convolution.default").expect("registered").lower(&ctx).expect("lowers");
    assert_eq!(
        dispatches(&l),
        [("conv_gemm_coop.f32", [64, 1, 1], vec![scratch[1]]), ("conv_gemm_combine.f32", [98, 1, 1], vec![out])]
    );
}

#[test]
fn sdpa_takes_seq_from_the_query_and_checks_its_arguments() {
    let mut g = TestGraph::default();
    let q = g.t(&[1, 5, 4, 16]);
    let kv = g.t(&[1, 5, 2, 16]);
    let cache = g.push(Owned::Tensor(ElemType::F32, vec![1, 8, 2, 16], true));
    let (one, zero, causal, null) =
        (g.push(Owned::Int(1)), g.push(Owned::Int(0)), g.push(Owned::Bool(true)), g.push(Owned::Null));
    let out = g.t(&[1, 5, 4, 16]);
    let args = |g: &mut TestGraph, start: i64| {
        let start = g.push(Owned::SymInt(start));
        [q, kv, kv, cache, cache, start, one, null, zero, causal, null, out]
    };
    // seq_len is baked as 1: S = 5 comes from the query.
    let a = args(&mut g, 3);
    let l = check(&g, "sdpa_with_kv_cache.default", &a).expect("lowers");
    assert_eq!(out_shape(&l), [1, 5, 4, 16]);
    // Head dim 16 could split: the scratch is declared even without it.
    let [Step::Scratch { slot: 0, .. }, Step::Dispatch(update), Step::Dispatch(attend)] = &l.steps[..] else {
        panic!("expected a scratch declaration and two dispatches: {:?}", l.steps)
    };
    assert_eq!((update.outputs.as_slice(), attend.inputs.as_slice()), (&[cache, cache][..], &[q, cache, cache][..]));
    assert_eq!(attend.workgroups, [20, 1, 1]);
    // Past the cache end: 4 + 5 > 8.
    let a = args(&mut g, 4);
    let err = check(&g, "sdpa_with_kv_cache.default", &a).expect_err("past the end");
    assert!(matches!(err, crate::Error::ArgValue { arg_idx: 5, name: "start_pos", .. }), "{err:?}");
    let mut a = args(&mut g, 0);
    a[7] = q;
    let err = check(&g, "sdpa_with_kv_cache.default", &a).expect_err("mask");
    assert!(matches!(err, crate::Error::ArgValue { arg_idx: 7, .. }), "{err:?}");
    // 3 query heads do not group over 2 kv heads.
    let q3 = g.t(&[1, 5, 3, 16]);
    let mut a = args(&mut g, 0);
    a[0] = q3;
    let err = check(&g, "sdpa_with_kv_cache.default", &a).expect_err("gqa");
    assert!(matches!(err, crate::Error::Shape { arg_idx: 0, .. }), "{err:?}");
}

/// Split-KV decode: with scratch, calls of at most 4 rows run the partials
/// (which also write the new keys and values into the caches) and the
/// combine; the splits cover the context with none empty, and the scratch
/// declared (the same at every shape) holds every live split plan.
#[test]
fn sdpa_splits_the_context_with_scratch() {
    let mut g = TestGraph::default();
    let q = g.t(&[1, 1, 8, 64]);
    let kv = g.t(&[1, 1, 2, 64]);
    let cache = g.push(Owned::Tensor(ElemType::F32, vec![1, 1000, 2, 64], true));
    let (one, zero, causal, null) =
        (g.push(Owned::Int(1)), g.push(Owned::Int(0)), g.push(Owned::Bool(true)), g.push(Owned::Null));
    let out = g.t(&[1, 1, 8, 64]);
    let scratch = [g.t(&[0]), g.t(&[0])];
    let start = g.push(Owned::SymInt(899));
    let args = [q, kv, kv, cache, cache, start, one, null, zero, causal, null, out];
    let op = from_name("sdpa_with_kv_cache.default").expect("registered");
    let l = op.lower(&crate::plan::Ctx::new(&g, &args).with_scratch(&scratch)).expect("lowers");
    let [Step::Scratch { slot: 0, bytes }, Step::Dispatch(part), Step::Dispatch(combine)] = &l.steps[..] else {
        panic!("expected scratch, partials and combine: {:?}", l.steps)
    };
    assert_eq!(*bytes, crate::ops::llm::split_scratch_bytes(&crate::ops::llm::WORKGROUP_PLAN, 8, 2, 64, 1000));
    assert_eq!((part.inputs.as_slice(), part.outputs.as_slice()), (&[q, kv, kv][..], &[cache, cache, scratch[0]][..]));
    assert_eq!((combine.inputs.as_slice(), combine.outputs.as_slice()), (&[scratch[0]][..], &[out][..]));
    // The grid is sized for the cache's 1000 keys: 32 splits (at least 32
    // keys each), 2 kv heads of one workgroup each (4 query heads per group).
    assert_eq!(part.workgroups, [2, 32, 1]);
    assert_eq!(combine.workgroups, [8, 1, 1]);
    // Without scratch: the one-pass kernel.
    let l = check(&g, "sdpa_with_kv_cache.default", &args).expect("lowers");
    assert_eq!(l.steps.iter().filter(|s| matches!(s, Step::Dispatch(_))).count(), 2);

    // Either route's plan (the subgroup kernel's too).
    for plan in [crate::ops::llm::WORKGROUP_PLAN, crate::ops::llm::SUBGROUP_PLAN] {
        for (hq, hkv, d, cmax) in
            [(32, 8, 64, 8192), (8, 2, 128, 1000), (4, 4, 64, 1100), (6, 2, 16, 300), (1, 1, 8, 20_000)]
        {
            let declared = crate::ops::llm::split_scratch_bytes(&plan, hq, hkv, d, cmax);
            for rows in 1..=4u64 {
                for ctx in (rows..=cmax).step_by(7).chain([cmax]) {
                    let (n, chunk) = crate::ops::llm::split_plan(&plan, rows, hq, hkv, ctx);
                    assert!(n * chunk >= ctx && (n - 1) * chunk < ctx, "{hq}/{hkv} at {ctx}: {n} x {chunk}");
                    assert!(ctx > plan.min_keys || n == 1, "{ctx} keys in {n} splits");
                    assert!(rows * hq * n * (d / 4 + 1) * 16 <= declared, "{hq}/{hkv}/{d} at {ctx}: {n} splits");
                }
            }
        }
    }
    // Llama-3.2-1B at 8192 keys: 8 kv heads x 32 splits of one tile each;
    // on the subgroup route 64 splits of one 128-key step each. SmolLM2
    // (9 / 3 heads) at 257 keys: 9 splits of 29 keys, or 3 of 86.
    let split_plan = crate::ops::llm::split_plan;
    assert_eq!(split_plan(&crate::ops::llm::WORKGROUP_PLAN, 1, 32, 8, 8192), (32, 256));
    assert_eq!(split_plan(&crate::ops::llm::SUBGROUP_PLAN, 1, 32, 8, 8192), (64, 128));
    assert_eq!(split_plan(&crate::ops::llm::WORKGROUP_PLAN, 1, 9, 3, 257), (9, 29));
    assert_eq!(split_plan(&crate::ops::llm::SUBGROUP_PLAN, 1, 9, 3, 257), (3, 86));
}

/// Where the split combine folds into the O projection's GEMV
/// (`q4_gemv_attn.wgsl`): at most 16 splits at the cache length, the
/// merge's pairs and rows within its workgroup memory. `llm_bench`'s
/// SmolLM2 load (a cache of 512: 16 splits) and a 1B cache of 512 fold
/// their decode step; the 1B loads of 2,114 and 8,258 rows (32 and 33
/// splits) and SmolLM2 at 8192 (64) keep the combine; 4 rows of SmolLM2
/// (576 pairs) and 2 of the 1B (1,024 `vec4`s of rows) do not fit.
#[test]
fn the_combine_folds_at_few_splits() {
    use crate::ops::llm::{SplitRoute, combine_folds};
    let wg = SplitRoute::Workgroup;
    for (s, hq, hkv, d, cmax, folds) in [
        (1, 9, 3, 64, 512, true),
        (1, 9, 3, 64, 32, true),
        (1, 32, 8, 64, 512, true),
        (1, 32, 8, 64, 2114, false),
        (1, 32, 8, 64, 8258, false),
        (1, 9, 3, 64, 8192, false),
        (4, 9, 3, 64, 512, false),
        (2, 32, 8, 64, 64, false),
        (5, 4, 2, 16, 32, false),
    ] {
        assert_eq!(combine_folds(wg, s, hq, hkv, d, cmax), folds, "{s} rows, {hq}/{hkv} heads of {d}, cache {cmax}");
    }
}

/// Where decode attention runs inside the O projection's GEMV
/// (`q4_gemv_sdpa.wgsl`): one row, at most 4 query heads per kv head and
/// 16 heads, a cache of at most 2^17 elements, and only where the device
/// allows the kernel at every position (`DeviceCaps::gemv_attention`) or
/// while the live context is short (`gemv_attention_keys`, here 64 keys:
/// at 64, not at 65). SmolLM2's decode at
/// its 512-row cache (98,304) takes it; the 1B shape's 8 kv heads at 512
/// rows (262,144), its 32 heads, 2 rows, or a device without the leave do
/// not.
#[test]
fn decode_attention_goes_into_the_gemv_at_short_caches() {
    use crate::caps::DeviceCaps;
    use crate::ops::llm::gemv_attends;
    let on = DeviceCaps { gemv_attention: true, ..DeviceCaps::default() };
    for (s, hq, hkv, d, cmax, attends) in [
        (1, 9, 3, 64, 512, true),
        (1, 9, 3, 64, 322, true),
        (1, 9, 3, 64, 683, false),
        (1, 32, 8, 64, 512, false),
        (1, 16, 4, 64, 512, true),
        (1, 16, 2, 64, 64, false),
        (2, 9, 3, 64, 512, false),
        (1, 4, 2, 16, 160, true),
        (1, 4, 2, 18, 160, false),
        (1, 4, 1, 512, 16, false),
    ] {
        let what = format!("{s} rows, {hq}/{hkv} heads of {d}, cache {cmax}");
        assert_eq!(gemv_attends(on, s, hq, hkv, d, cmax, 300), attends, "{what}");
        assert!(!gemv_attends(DeviceCaps::default(), s, hq, hkv, d, cmax, 1), "{what} without the leave");
        // By the live context: up to the bound, not past it.
        let short = DeviceCaps { gemv_attention_keys: 64, ..DeviceCaps::default() };
        assert_eq!(gemv_attends(short, s, hq, hkv, d, cmax, 64), attends, "{what} at 64 keys");
        assert!(!gemv_attends(short, s, hq, hkv, d, cmax, 65), "{what} at 65 keys");
    }
}

/// RoPE fused into the attention: with scratch and a decode row, the
/// split partials' `_rope` form reads the un-rotated query and key and the
/// tables, and no rotation runs before it; a prompt of 12 rows rotates
/// first (writing the rotated query and key), then attends as the plain
/// op does. Tables of 40 rows read from row 20 (the fused op takes the
/// graph's slices): the row is the last uniform word of either kernel; a
/// table without the rows is a typed error.
#[test]
fn sdpa_rope_rotates_inside_the_split_kernel() {
    let mut g = TestGraph::default();
    let (one, zero, causal, null) =
        (g.push(Owned::Int(1)), g.push(Owned::Int(0)), g.push(Owned::Bool(true)), g.push(Owned::Null));
    let cache = g.push(Owned::Tensor(ElemType::F32, vec![1, 64, 2, 16], true));
    let scratch = [g.t(&[0]), g.t(&[0])];
    let start = g.push(Owned::SymInt(20));
    let (cos, sin) = (g.t(&[40, 8]), g.t(&[40, 8]));
    let op = from_name("etwgpu.sdpa_rope_with_kv_cache.default").expect("registered");
    let labels = |l: &Lowered| -> Vec<&str> {
        l.steps.iter().filter_map(|s| if let Step::Dispatch(d) = s { Some(d.shader.label()) } else { None }).collect()
    };
    for s in [1u64, 12] {
        let (xq, xk, v) = (g.t(&[1, s, 4, 16]), g.t(&[1, s, 2, 16]), g.t(&[1, s, 2, 16]));
        let (q_rot, k_rot, out) = (g.t(&[1, s, 4, 16]), g.t(&[1, s, 2, 16]), g.t(&[1, s, 4, 16]));
        let outs = g.push(Owned::List(vec![q_rot, k_rot, out]));
        let args = [xq, xk, v, cache, cache, start, one, null, zero, causal, null, cos, sin, start, outs];
        let l = op.lower(&crate::plan::Ctx::new(&g, &args).with_scratch(&scratch)).expect("lowers");
        assert_eq!(l.shapes, vec![(q_rot, vec![1, s, 4, 16]), (k_rot, vec![1, s, 2, 16]), (out, vec![1, s, 4, 16])]);
        let dispatches: Vec<_> =
            l.steps.iter().filter_map(|s| if let Step::Dispatch(d) = s { Some(d) } else { None }).collect();
        if s == 1 {
            assert_eq!(labels(&l), ["sdpa_split_short_rope.f32", "sdpa_split_combine.f32"]);
            let part = dispatches[0];
            assert_eq!(
                (part.inputs.as_slice(), part.outputs.as_slice()),
                (&[xq, xk, v, cos, sin][..], &[cache, cache, scratch[0]][..])
            );
            assert_eq!((part.params.len(), &part.params[48..52]), (64, &20u32.to_le_bytes()[..]));
        } else {
            // The rotation and the cache update in one dispatch: the
            // rotated keys go only into the cache.
            assert_eq!(labels(&l), ["rope_kv_cache.f32", "sdpa_prefill.f32"]);
            let rope = dispatches[0];
            assert_eq!(
                (rope.inputs.as_slice(), rope.outputs.as_slice()),
                (&[xq, xk, v, cos, sin][..], &[q_rot, cache, cache][..])
            );
            assert_eq!(rope.params.len(), 32);
            let words: Vec<u32> = (0..8).map(|i| param_word(rope, i)).collect();
            // Pairs of q and k, heads, D / 2, S, the table row, the cache
            // offset of row 20 (2 heads of 16).
            assert_eq!(words, [s as u32 * 32, s as u32 * 16, 4, 2, 8, s as u32, 20, 20 * 32]);
            assert_eq!(rope.workgroups, [(s as u32 * 64).div_ceil(256), 1, 1]);
        }
        // 24 rows do not hold rows 20 .. 20 + S.
        let short = g.t(&[24, 8]);
        let args = [xq, xk, v, cache, cache, start, one, null, zero, causal, null, short, sin, start, outs];
        let got = check(&g, "etwgpu.sdpa_rope_with_kv_cache.default", &args);
        assert_eq!(got.is_ok(), s == 1, "{s} rows from row 20 of 24");
        if s > 1 {
            assert!(matches!(got, Err(crate::Error::Shape { arg_idx: 2, .. })));
        }
    }
}

/// The split-KV route (`ops::llm::split_route`): with caps that say
/// subgroups whose sizes the subgroup kernel takes, decode attention (plain
/// and with RoPE) runs `sdpa_split_sg` (`_rope`) with the subgroup plan
/// (splits of at least 128 keys, one 128-key step each) and its merge word;
/// without subgroups, with sizes it does not take, or for a head dim too
/// wide for the smallest subgroups, today's `sdpa_split`. Prompts never
/// split.
#[test]
fn sdpa_split_takes_the_subgroup_kernel_where_the_caps_allow() {
    use crate::caps::{DeviceCaps, SubgroupSizes};
    let sg = |min, max| DeviceCaps { subgroups: Some(SubgroupSizes { min, max }), ..DeviceCaps::default() };
    let mut g = TestGraph::default();
    let (one, zero, causal, null) =
        (g.push(Owned::Int(1)), g.push(Owned::Int(0)), g.push(Owned::Bool(true)), g.push(Owned::Null));
    let scratch = [g.t(&[0]), g.t(&[0])];
    let start = g.push(Owned::SymInt(899));
    let words = |d: &crate::plan::Dispatch| -> Vec<u32> {
        d.params.chunks(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect()
    };
    // (caps, head dim, partials kernel, merge queries per pass)
    let cases = [
        (DeviceCaps::default(), 64, "sdpa_split_short.f32", None),
        (sg(32, 32), 64, "sdpa_split_sg.f32", Some(4)),
        (sg(8, 8), 64, "sdpa_split_sg.f32", Some(2)),
        (sg(8, 8), 128, "sdpa_split_sg.f32", Some(1)),
        (sg(32, 64), 256, "sdpa_split_sg.f32", Some(2)),
        (sg(4, 128), 64, "sdpa_split_sg.f32", Some(1)),
        // Head dim 256 is 64 vec4s: more than 4 a lane at subgroups of 8.
        (sg(8, 8), 256, "sdpa_split_short.f32", None),
        // Sizes the kernel does not take: past its workgroup, under 4, not
        // powers of two.
        (sg(32, 256), 64, "sdpa_split_short.f32", None),
        (sg(2, 32), 64, "sdpa_split_short.f32", None),
        (sg(24, 24), 64, "sdpa_split_short.f32", None),
    ];
    for (caps, d, kernel, merge) in cases {
        let q = g.t(&[1, 1, 8, d]);
        let kv = g.t(&[1, 1, 2, d]);
        let cache = g.push(Owned::Tensor(ElemType::F32, vec![1, 1000, 2, d], true));
        let out = g.t(&[1, 1, 8, d]);
        let args = [q, kv, kv, cache, cache, start, one, null, zero, causal, null, out];
        let op = from_name("sdpa_with_kv_cache.default").expect("registered");
        let ctx = crate::plan::Ctx::new(&g, &args).with_scratch(&scratch).with_caps(caps);
        let l = op.lower(&ctx).expect("lowers");
        let [Step::Scratch { bytes, .. }, Step::Dispatch(part), Step::Dispatch(combine)] = &l.steps[..] else {
            panic!("expected scratch, partials and combine: {:?}", l.steps)
        };
        let what = format!("{caps:?}, head dim {d}");
        assert_eq!(part.shader.label(), kernel, "{what}");
        assert_eq!(combine.shader.label(), "sdpa_split_combine.f32", "{what}");
        let plan = if merge.is_some() { crate::ops::llm::SUBGROUP_PLAN } else { crate::ops::llm::WORKGROUP_PLAN };
        assert_eq!(*bytes, crate::ops::llm::split_scratch_bytes(&plan, 8, 2, d, 1000), "{what}");
        // Both kernels read the same plan words (target, min keys, tile, max).
        let (pw, cw) = (words(part), words(combine));
        assert_eq!(pw[6..10], cw[4..8], "{what}");
        assert_eq!(pw[7..10], [plan.min_keys as u32, plan.tile as u32, plan.max as u32], "{what}");
        match merge {
            // The subgroup plan at 1000 keys: 8 splits of 125.
            Some(m) => {
                assert_eq!((pw.len(), pw[10]), (12, m), "{what}");
                assert_eq!(part.workgroups, [2, 8, 1], "{what}");
                assert_eq!(crate::ops::llm::split_plan(&plan, 1, 8, 2, 1000), (8, 125));
            }
            None => assert_eq!((pw.len(), part.workgroups), (12, [2, 32, 1]), "{what}"),
        }
    }
    // The `_rope` form on either route; its table row the last word.
    let cache = g.push(Owned::Tensor(ElemType::F32, vec![1, 64, 2, 16], true));
    let (cos, sin) = (g.t(&[40, 8]), g.t(&[40, 8]));
    let row = g.push(Owned::SymInt(20));
    let rope = from_name("etwgpu.sdpa_rope_with_kv_cache.default").expect("registered");
    for (caps, kernel) in [(sg(8, 64), "sdpa_split_sg_rope.f32"), (DeviceCaps::default(), "sdpa_split_short_rope.f32")]
    {
        let (xq, xk, v) = (g.t(&[1, 1, 4, 16]), g.t(&[1, 1, 2, 16]), g.t(&[1, 1, 2, 16]));
        let outs = [g.t(&[1, 1, 4, 16]), g.t(&[1, 1, 2, 16]), g.t(&[1, 1, 4, 16])];
        let outs = g.push(Owned::List(outs.to_vec()));
        let args = [xq, xk, v, cache, cache, row, one, null, zero, causal, null, cos, sin, row, outs];
        let l = rope.lower(&crate::plan::Ctx::new(&g, &args).with_scratch(&scratch).with_caps(caps)).expect("lowers");
        let dispatches: Vec<_> =
            l.steps.iter().filter_map(|s| if let Step::Dispatch(d) = s { Some(d) } else { None }).collect();
        assert_eq!(dispatches.len(), 2);
        assert_eq!(dispatches[0].shader.label(), kernel);
        assert_eq!(dispatches[0].inputs, [xq, xk, v, cos, sin]);
        let w = words(dispatches[0]);
        assert_eq!((w.len(), w[12]), (16, 20), "{kernel}");
    }
    // A prompt of 12 rows never splits, subgroups or not.
    let (q, kv) = (g.t(&[1, 12, 4, 16]), g.t(&[1, 12, 2, 16]));
    let out = g.t(&[1, 12, 4, 16]);
    let args = [q, kv, kv, cache, cache, row, one, null, zero, causal, null, out];
    let op = from_name("sdpa_with_kv_cache.default").expect("registered");
    let l = op.lower(&crate::plan::Ctx::new(&g, &args).with_scratch(&scratch).with_caps(sg(8, 8))).expect("lowers");
    let labels: Vec<_> =
        l.steps.iter().filter_map(|s| if let Step::Dispatch(d) = s { Some(d.shader.label()) } else { None }).collect();
    assert_eq!(labels, ["kv_cache_update.f32", "sdpa_prefill.f32"]);
}

/// The workgroup route's partials kernel by the cache: the 64-wide
/// `sdpa_split_short` while every split of the longest context fits its
/// 64-key tile (up to 4,096 keys: 64 splits of 64), the 256-wide
/// `sdpa_split` past that (8,192 keys: 64 splits of 128); the two read
/// the same uniforms.
#[test]
fn sdpa_split_takes_the_short_kernel_while_splits_fit_one_tile() {
    let mut g = TestGraph::default();
    let (one, zero, causal, null) =
        (g.push(Owned::Int(1)), g.push(Owned::Int(0)), g.push(Owned::Bool(true)), g.push(Owned::Null));
    let scratch = [g.t(&[0]), g.t(&[0])];
    let start = g.push(Owned::SymInt(100));
    let mut params = Vec::new();
    for (rows, kernel) in [(4096, "sdpa_split_short.f32"), (4097, "sdpa_split.f32"), (8192, "sdpa_split.f32")] {
        let (q, kv, out) = (g.t(&[1, 1, 8, 64]), g.t(&[1, 1, 2, 64]), g.t(&[1, 1, 8, 64]));
        let cache = g.push(Owned::Tensor(ElemType::F32, vec![1, rows, 2, 64], true));
        let args = [q, kv, kv, cache, cache, start, one, null, zero, causal, null, out];
        let op = from_name("sdpa_with_kv_cache.default").expect("registered");
        let l = op.lower(&crate::plan::Ctx::new(&g, &args).with_scratch(&scratch)).expect("lowers");
        let Some(Step::Dispatch(part)) = l.steps.iter().find(|s| matches!(s, Step::Dispatch(_))) else {
            panic!("expected the partials: {:?}", l.steps)
        };
        assert_eq!(part.shader.label(), kernel, "a cache of {rows} rows");
        params.push(part.params.clone());
    }
    assert!(params.windows(2).all(|w| w[0] == w[1]), "the same uniforms at every cache length");
}

#[test]
fn sdpa_tiles_prompts_of_more_than_eight_rows() {
    // (S, head dim, kernel, workgroups): prompts go to the tiled kernel, one
    // workgroup per 16 query rows and head; short chunks and head dims it
    // does not hold keep the per-row kernels.
    let cases = [
        (8, 64, "sdpa_online.f32", 32),
        (9, 64, "sdpa_prefill.f32", 4),
        (33, 128, "sdpa_prefill.f32", 12),
        (33, 132, "sdpa_online.f32", 132),
        (33, 6, "sdpa.f32", 132),
    ];
    for (s, d, kernel, groups) in cases {
        let mut g = TestGraph::default();
        let q = g.t(&[1, s, 4, d]);
        let kv = g.t(&[1, s, 2, d]);
        let cache = g.push(Owned::Tensor(ElemType::F32, vec![1, 40, 2, d], true));
        let (one, zero, causal, null) =
            (g.push(Owned::Int(1)), g.push(Owned::Int(0)), g.push(Owned::Bool(true)), g.push(Owned::Null));
        let start = g.push(Owned::SymInt(7));
        let out = g.t(&[1, s, 4, d]);
        let a = [q, kv, kv, cache, cache, start, one, null, zero, causal, null, out];
        let l = check(&g, "sdpa_with_kv_cache.default", &a).expect("lowers");
        // (Head dims the split kernels hold also declare their scratch.)
        let dispatches: Vec<_> = l.steps.iter().filter(|s| matches!(s, Step::Dispatch(_))).collect();
        let [_, Step::Dispatch(attend)] = dispatches[..] else { panic!("expected two dispatches") };
        assert_eq!((attend.shader.label(), attend.workgroups), (kernel, [groups, 1, 1]), "S {s}, head dim {d}");
    }
}

/// Prompt attention on the matrix units (`sdpa_prefill_coop`): with
/// cooperative matrices and f16 operands allowed (float16 programs always,
/// float32 ones at precision mixed or F16) over a float16 cache, one workgroup per
/// 64 query rows and head; without them, at precision F32 for float32
/// queries, over a float32 cache, or at head dims it does not hold, the
/// tiled kernel. The RoPE-fused op lowers to the same attention kernel.
#[test]
fn sdpa_prompts_take_the_matrix_units_where_caps_allow() {
    use crate::caps::{DeviceCaps, Precision};
    use crate::ops::attention_coop::attention_coop;
    let coop =
        |precision| DeviceCaps { coop_matrix_f16: true, precision, coop_attention: true, ..DeviceCaps::default() };
    // Switched off (`ETWGPU_COOP_ATTENTION=0`): the tiled kernel at any precision.
    for precision in [Precision::F32, Precision::Mixed, Precision::F16] {
        let off = DeviceCaps { coop_attention: false, ..coop(precision) };
        assert!(!attention_coop(off, ElemType::F16, true) && !attention_coop(off, ElemType::F32, true));
    }
    // The gate alone.
    assert!(attention_coop(coop(Precision::F16), ElemType::F32, true));
    assert!(attention_coop(coop(Precision::Mixed), ElemType::F32, true), "mixed takes f16 attention operands");
    assert!(attention_coop(coop(Precision::Mixed), ElemType::F16, true), "float16 programs at mixed");
    assert!(attention_coop(coop(Precision::F32), ElemType::F16, true));
    assert!(!attention_coop(coop(Precision::F32), ElemType::F32, true), "float32 keeps float32 at f32");
    assert!(!attention_coop(coop(Precision::F16), ElemType::F32, false), "a float32 cache keeps the tiled kernel");
    assert!(!attention_coop(DeviceCaps { precision: Precision::F16, ..DeviceCaps::default() }, ElemType::F16, true));
    let labels = |l: &Lowered| -> Vec<(&str, [u32; 3])> {
        l.steps
            .iter()
            .filter_map(|s| if let Step::Dispatch(d) = s { Some((d.shader.label(), d.workgroups)) } else { None })
            .collect()
    };
    // (query dtype, cache dtype, head dim, caps, S, attention kernel, workgroups).
    let f32_kvf16 = (ElemType::F32, ElemType::F16);
    let f16 = (ElemType::F16, ElemType::F16);
    let cases = [
        (f32_kvf16, 64, coop(Precision::F16), 100, "sdpa_prefill_coop.f32_kvf16", 8),
        (f32_kvf16, 128, coop(Precision::F16), 64, "sdpa_prefill_coop.f32_kvf16", 4),
        (f16, 64, coop(Precision::F32), 9, "sdpa_prefill_coop.f16", 4),
        (f16, 128, coop(Precision::F16), 2048, "sdpa_prefill_coop.f16", 128),
        (f32_kvf16, 64, coop(Precision::F32), 100, "sdpa_prefill.f32_kvf16", 28),
        (f32_kvf16, 64, DeviceCaps::default(), 100, "sdpa_prefill.f32_kvf16", 28),
        (f16, 64, DeviceCaps::default(), 100, "sdpa_prefill.f16", 28),
        ((ElemType::F32, ElemType::F32), 64, coop(Precision::F16), 100, "sdpa_prefill.f32", 28),
        (f16, 20, coop(Precision::F16), 100, "sdpa_prefill.f16", 28),
        // Too few rows for the tiled kernels: the per-row one.
        (f16, 64, coop(Precision::F16), 8, "sdpa_online.f16", 32),
    ];
    for ((qt, ct), d, caps, s, kernel, groups) in cases {
        let mut g = TestGraph::default();
        let q = g.push(Owned::Tensor(qt, vec![1, s, 4, d], false));
        let kv = g.push(Owned::Tensor(qt, vec![1, s, 2, d], false));
        let cache = g.push(Owned::Tensor(ct, vec![1, 4096, 2, d], true));
        let (one, zero, causal, null) =
            (g.push(Owned::Int(1)), g.push(Owned::Int(0)), g.push(Owned::Bool(true)), g.push(Owned::Null));
        let start = g.push(Owned::SymInt(7));
        let out = g.push(Owned::Tensor(qt, vec![1, s, 4, d], false));
        let a = [q, kv, kv, cache, cache, start, one, null, zero, causal, null, out];
        let op = from_name("sdpa_with_kv_cache.default").expect("registered");
        let l = op.lower(&crate::plan::Ctx::new(&g, &a).with_caps(caps)).expect("lowers");
        let what = format!("{qt:?} over {ct:?}, S {s}, head dim {d}, {caps:?}");
        let got = labels(&l);
        assert_eq!(got.last(), Some(&(kernel, [groups, 1, 1])), "{what}: {got:?}");
        if kernel.starts_with("sdpa_prefill_coop") {
            let Some(Step::Dispatch(attend)) = l.steps.last() else { panic!("{what}: a dispatch last") };
            assert_eq!((attend.inputs.as_slice(), attend.outputs.as_slice()), (&[q, cache, cache][..], &[out][..]));
            // seq, heads, kv heads, head dim, start_pos, scale.
            let words: Vec<u32> =
                attend.params.chunks(4).map(|w| u32::from_le_bytes(w.try_into().expect("words"))).collect();
            assert_eq!(words[..5], [s as u32, 4, 2, d as u32, 7], "{what}");
            assert_eq!(f32::from_bits(words[5]), 1.0 / (d as f32).sqrt(), "{what}");
            // The fused RoPE form: rotation, cache update, the same kernel.
            let mut tensor = |shape: Vec<u64>| g.push(Owned::Tensor(qt, shape, false));
            let (cos, sin) = (tensor(vec![4096, d / 2]), tensor(vec![4096, d / 2]));
            let (q_rot, k_rot) = (tensor(vec![1, s, 4, d]), tensor(vec![1, s, 2, d]));
            let outs = g.push(Owned::List(vec![q_rot, k_rot, out]));
            let args = [q, kv, kv, cache, cache, start, one, null, zero, causal, null, cos, sin, start, outs];
            let op = from_name("etwgpu.sdpa_rope_with_kv_cache.default").expect("registered");
            let l = op.lower(&crate::plan::Ctx::new(&g, &args).with_caps(caps)).expect("lowers");
            let rope = if qt == ElemType::F16 { "rope_kv_cache.f16" } else { "rope_kv_cache.f32_kvf16" };
            let names: Vec<&str> = labels(&l).into_iter().map(|(n, _)| n).collect();
            assert_eq!(names, [rope, kernel], "{what}, fused with RoPE");
        }
    }
}

#[test]
fn update_cache_writes_rows_in_place_for_int_and_symint_positions() {
    let mut g = TestGraph::default();
    let value = g.t(&[1, 3, 2, 4]);
    let cache = g.push(Owned::Tensor(ElemType::F32, vec![1, 8, 2, 4], true));
    let out = g.t(&[1]);
    for start in [g.push(Owned::Int(5)), g.push(Owned::SymInt(5))] {
        let l = check(&g, "update_cache.default", &[value, cache, start, out]).expect("lowers");
        assert_eq!(out_shape(&l), [1]);
        let [Step::Dispatch(store)] = &l.steps[..] else { panic!("expected one dispatch") };
        assert_eq!((store.inputs.as_slice(), store.outputs.as_slice()), (&[value][..], &[cache][..]));
        // numel 24, rank 1, offset 5 * 2 * 4 = 40.
        assert_eq!(store.params[..12], [24, 0, 0, 0, 1, 0, 0, 0, 40, 0, 0, 0]);
    }
    assert_eq!(crate::ops::OpId::UpdateCache.mutated_args(), [1]);
    // Past the cache end: 6 + 3 > 8.
    let start = g.push(Owned::SymInt(6));
    let err = check(&g, "update_cache.default", &[value, cache, start, out]).expect_err("past the end");
    assert!(matches!(err, crate::Error::ArgValue { arg_idx: 2, name: "start_pos", .. }), "{err:?}");
    let narrow = g.push(Owned::Tensor(ElemType::F32, vec![1, 8, 1, 4], true));
    let start = g.push(Owned::Int(0));
    let err = check(&g, "update_cache.default", &[value, narrow, start, out]).expect_err("heads");
    assert!(matches!(err, crate::Error::Shape { arg_idx: 1, .. }), "{err:?}");
}

#[test]
fn q4_rules_shape_rank3_inputs_and_reject_bad_packing() {
    let mut g = TestGraph::default();
    let x = g.t(&[1, 3, 64]);
    let w = g.push(Owned::Tensor(ElemType::U8, vec![48, 32], true));
    let s = g.push(Owned::Tensor(ElemType::F32, vec![2, 48], true));
    let (gs, null) = (g.push(Owned::Int(32)), g.push(Owned::Null));
    let out = g.t(&[1, 3, 48]);
    let l = check(&g, "et_vk.linear_q4gsw.default", &[x, w, s, gs, null, out]).expect("lowers");
    assert_eq!(out_shape(&l), [1, 3, 48]);
    // f32 weights are not packed 4-bit.
    let wf = g.t(&[48, 32]);
    let err = check(&g, "et_vk.linear_q4gsw.default", &[x, wf, s, gs, null, out]).expect_err("f32 weights");
    assert!(matches!(err, crate::Error::DType { arg_idx: 1, .. }), "{err:?}");
    // Too few scale groups for K = 64 at group size 16.
    let gs16 = g.push(Owned::Int(16));
    let err = check(&g, "et_vk.linear_q4gsw.default", &[x, w, s, gs16, null, out]).expect_err("groups");
    assert!(matches!(err, crate::Error::Shape { arg_idx: 2, .. }), "{err:?}");
    // Embedding: indices [2, 3] -> [2, 3, 64]; the legacy packing is refused.
    let ew = g.push(Owned::Tensor(ElemType::U8, vec![10, 32], true));
    let es = g.push(Owned::Tensor(ElemType::F32, vec![10, 2], true));
    let idx = g.push(Owned::Tensor(ElemType::I32, vec![2, 3], false));
    let (t, f) = (g.push(Owned::Bool(true)), g.push(Owned::Bool(false)));
    let emb = g.t(&[2, 3, 64]);
    let l = check(&g, "et_vk.embedding_q4gsw.default", &[ew, es, gs, idx, t, emb]).expect("lowers");
    assert_eq!(out_shape(&l), [2, 3, 64]);
    let err = check(&g, "et_vk.embedding_q4gsw.default", &[ew, es, gs, idx, f, emb]).expect_err("legacy");
    assert!(matches!(err, crate::Error::ArgValue { arg_idx: 4, .. }), "{err:?}");
}

#[test]
fn q8_transposed_conv_pixel_shuffle_and_float_linear_rules() {
    let mut g = TestGraph::default();
    let i8t = |g: &mut TestGraph, shape: &[u64]| g.push(Owned::Tensor(ElemType::I8, shape.to_vec(), false));
    let x = i8t(&mut g, &[1, 8, 6, 6]);
    let (s, zp) = (g.push(Owned::Double(0.05)), g.push(Owned::Int(3)));
    // Transposed: weights [OC 4, 3*3*8], stride 2, padding 1, output padding 1.
    let w = g.push(Owned::Tensor(ElemType::I8, vec![4, 72], true));
    let sums = g.push(Owned::Tensor(ElemType::I32, vec![4], true));
    let ws = g.push(Owned::Tensor(ElemType::F32, vec![4], true));
    let null = g.push(Owned::Null);
    let k = g.push(Owned::IntList(vec![3, 3]));
    let s2 = g.push(Owned::IntList(vec![2, 2]));
    let p1 = g.push(Owned::IntList(vec![1, 1]));
    let (op1, op2) = (g.push(Owned::IntList(vec![1, 1])), g.push(Owned::IntList(vec![2, 0])));
    let d1 = g.push(Owned::IntList(vec![1, 1]));
    let groups = g.push(Owned::Int(1));
    let none = g.push(Owned::Str("none".into()));
    let out = i8t(&mut g, &[1, 4, 12, 12]);
    let args = |op: Vid| [x, s, zp, w, sums, ws, s, zp, null, k, s2, p1, op, d1, groups, none, out];
    // (6 - 1) * 2 - 2 + 2 + 1 + 1 = 12.
    let l = check(&g, "et_vk.q8ta_conv2d_transposed.default", &args(op1)).expect("lowers");
    assert_eq!(out_shape(&l), [1, 4, 12, 12]);
    let err = check(&g, "et_vk.q8ta_conv2d_transposed.default", &args(op2)).expect_err("output padding 2");
    assert!(matches!(err, crate::Error::ArgValue { arg_idx: 12, name: "output_padding", .. }), "{err:?}");
    // Pixel shuffle: [1, 8, 6, 6] with r = 2 -> [1, 2, 12, 12]; r = 3 does not divide 8 channels.
    let inv = g.push(Owned::Double(20.0));
    let (r2, r3) = (g.push(Owned::Int(2)), g.push(Owned::Int(3)));
    let ps_out = i8t(&mut g, &[1, 2, 12, 12]);
    let l = check(&g, "et_vk.q8ta_pixel_shuffle.default", &[x, s, zp, inv, zp, r2, ps_out]).expect("lowers");
    assert_eq!(out_shape(&l), [1, 2, 12, 12]);
    let err = check(&g, "et_vk.q8ta_pixel_shuffle.default", &[x, s, zp, inv, zp, r3, ps_out]).expect_err("r = 3");
    assert!(matches!(err, crate::Error::Shape { arg_idx: 0, .. }), "{err:?}");
    let f = g.t(&[1, 8, 6, 6]);
    let err = check(&g, "et_vk.q8ta_pixel_shuffle.default", &[f, s, zp, inv, zp, r2, ps_out]).expect_err("float");
    assert!(matches!(err, crate::Error::DType { arg_idx: 0, .. }), "{err:?}");
    // Float-output linear: int8 [3, 8] x int8 [4, 8] -> float [3, 4]; K must match.
    let lx = i8t(&mut g, &[3, 8]);
    let lw = g.push(Owned::Tensor(ElemType::I8, vec![4, 8], true));
    let lout = g.t(&[3, 4]);
    let l = check(&g, "et_vk.linear_q8ta_q8csw.default", &[lx, s, zp, lw, sums, ws, null, lout]).expect("lowers");
    assert_eq!(out_shape(&l), [3, 4]);
    let lw12 = g.push(Owned::Tensor(ElemType::I8, vec![4, 12], true));
    let err = check(&g, "et_vk.linear_q8ta_q8csw.default", &[lx, s, zp, lw12, sums, ws, null, lout]).expect_err("K");
    assert!(matches!(err, crate::Error::Shape { arg_idx: 3, .. }), "{err:?}");
}

// Fused ops (`ops/fused.rs`).

use crate::ops::fused::{Epilogue, Expr, FUSED_MAX_INPUTS};
use crate::plan::Shader;

/// Parses and validates `source` with naga, panicking with its message.
fn naga_validate(label: &str, source: &str) {
    let module = naga::front::wgsl::parse_str(source)
        .unwrap_or_else(|e| panic!("{label}: {}\n{source}", e.emit_to_string(source)));
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&module)
        .unwrap_or_else(|e| panic!("{label}: {e:?}\n{source}"));
}

/// The generated shader of a fused elementwise lowering.
fn generated(l: &Lowered) -> &crate::plan::GeneratedShader {
    match &l.steps[..] {
        [Step::Dispatch(crate::Dispatch { shader: Shader::Generated(g), .. })] => g,
        other => panic!("expected one generated dispatch, got {other:?}"),
    }
}

#[test]
fn fused_expressions_round_trip_through_text() {
    for text in [
        "sigmoid x0; mul x0 t0",
        "mul x0 x1; add x2 t0 1.0",
        "clamp x0 -0.75 1.25; leaky_relu t0 0.15000000596046448; pow_scalar t1 1.5",
        "sub x0 x1 0.5; div t0 x2; gelu_tanh t1; maximum t2 x0",
        "clamp x0 -3.4028234663852886e38 6.0",
    ] {
        let e = Expr::parse(text).expect(text);
        assert_eq!(e.to_string(), text);
    }
    for bad in ["", "relu", "relu x0 1.0", "mul x0", "add x0 x1", "relu t0", "frobnicate x0", "relu y0", "relu x7"] {
        assert!(Expr::parse(bad).is_err(), "{bad:?} should not parse");
    }
    assert_eq!(Epilogue::parse("relu x0").expect("relu").op, crate::ops::elementwise::UnaryOp::Relu);
    assert!(Epilogue::parse("relu x1").is_err());
    assert!(Epilogue::parse("relu x0; neg t0").is_err());
    assert_eq!(Epilogue::parse("clamp x0 0.0 6.0").expect("clamp").text(), "clamp x0 0.0 6.0");
}

/// What follows the template's marker is what the host writes for the
/// expression its doc names, so the template validates as it runs.
#[test]
fn fused_elementwise_template_ends_with_its_documented_example() {
    let e = Expr::parse("sigmoid x0; mul x0 t0; add t1 x1 1.0").expect("parses");
    assert_eq!(e.wgsl(crate::Variant::F32), crate::ShaderId::FusedElementwiseF32.source());
    assert_eq!(e.wgsl(crate::Variant::F16), crate::ShaderId::FusedElementwiseF16.source());
}

#[test]
fn generated_fused_kernels_validate_with_naga() {
    let all_unary = crate::ops::elementwise::UnaryOp::ALL
        .iter()
        .enumerate()
        .map(|(j, op)| {
            let x = if j == 0 { "x0".to_string() } else { format!("t{}", j - 1) };
            let params = ["", " 0.5", " 0.5 2.0"][op.n_params()];
            format!("{} {x}{params}", op.name())
        })
        .collect::<Vec<_>>()
        .join("; ");
    let all_binary = crate::ops::elementwise::BinaryOp::ALL
        .iter()
        .enumerate()
        .map(|(j, op)| {
            let a = if j == 0 { "x0".to_string() } else { format!("t{}", j - 1) };
            let alpha = if op.has_alpha() { " 2.0" } else { "" };
            format!("{} {a} x{}{alpha}", op.name(), 1 + j % (FUSED_MAX_INPUTS - 1))
        })
        .collect::<Vec<_>>()
        .join("; ");
    for text in [
        "relu x0".to_string(),
        "clamp x0 -inf inf".to_string(),
        "mul x0 x1; add x2 t0 1.0; neg t1".to_string(),
        all_unary,
        all_binary,
    ] {
        let e = Expr::parse(&text).expect(&text);
        for variant in [crate::Variant::F32, crate::Variant::F16] {
            naga_validate(&format!("{text} ({variant:?})"), &e.wgsl(variant));
        }
    }
}

#[test]
fn fused_elementwise_broadcasts_collapses_dims_and_checks_its_inputs() {
    let mut g = TestGraph::default();
    let a = g.t(&[2, 3, 4]);
    let b = g.t(&[2, 3, 4]);
    let s = g.t(&[]);
    let row = g.t(&[4]);
    let out = g.t(&[2, 3, 4]);
    let expr = g.push(Owned::Str("mul x0 x1; add t0 x2 1.0; sub t1 x3 1.0".into()));
    let l = check(&g, "etwgpu.fused_elementwise.default", &[expr, a, b, s, row, out]).expect("lowers");
    assert_eq!(out_shape(&l), [2, 3, 4]);
    let Step::Dispatch(d) = &l.steps[0] else { panic!("a dispatch") };
    assert_eq!(d.inputs, [a, b, s, row]);
    assert_eq!(d.params.len(), 16 + 32 + 32 * FUSED_MAX_INPUTS);
    let word = |i: usize| param_word(d, i);
    // [2, 3, 4] with a [4] row: dims 2 and 3 merge for every input.
    assert_eq!((word(0), word(1)), (24, 2), "numel, rank");
    assert_eq!((word(4), word(5)), (6, 4), "collapsed shape");
    let strides = |k: usize| (word(12 + 8 * k), word(13 + 8 * k));
    assert_eq!([strides(0), strides(1), strides(2), strides(3)], [(4, 1), (4, 1), (0, 0), (0, 1)]);
    assert_eq!(generated(&l).label, "fused_elementwise.f32");
    naga_validate("lowered", &generated(&l).source);

    // Same shapes: one dim.
    let two = g.push(Owned::Str("add x0 x1 2.0".into()));
    let l = check(&g, "etwgpu.fused_elementwise.default", &[two, a, b, out]).expect("lowers");
    let Step::Dispatch(d) = &l.steps[0] else { panic!("a dispatch") };
    assert_eq!(param_word(d, 1), 1);

    // Errors: an input count that does not match, a skipped input, shapes
    // that do not broadcast, dtypes that differ.
    assert!(check(&g, "etwgpu.fused_elementwise.default", &[two, a, out]).is_err());
    let skip = g.push(Owned::Str("neg x1".into()));
    assert!(matches!(
        check(&g, "etwgpu.fused_elementwise.default", &[skip, a, b, out]),
        Err(crate::Error::ArgValue { arg_idx: 0, .. })
    ));
    let odd = g.t(&[5]);
    assert!(matches!(
        check(&g, "etwgpu.fused_elementwise.default", &[two, a, odd, out]),
        Err(crate::Error::Shape { arg_idx: 0, .. })
    ));
    let half = g.push(Owned::Tensor(ElemType::F16, vec![2, 3, 4], false));
    assert!(matches!(
        check(&g, "etwgpu.fused_elementwise.default", &[two, a, half, out]),
        Err(crate::Error::DType { arg_idx: 2, .. })
    ));
    // An empty output dispatches nothing; the output is still shaped.
    let empty = g.t(&[0, 4]);
    let l = check(&g, "etwgpu.fused_elementwise.default", &[two, empty, row, empty]).expect("lowers");
    assert!(l.steps.is_empty());
    assert_eq!(out_shape(&l), [0, 4]);
}

#[test]
fn act_variants_put_the_activation_in_the_epilogue() {
    let mut g = TestGraph::default();
    let x = g.t(&[6, 8]);
    let w = g.push(Owned::Tensor(ElemType::F32, vec![5, 8], true));
    let b = g.push(Owned::Tensor(ElemType::F32, vec![5], true));
    let act = g.push(Owned::Str("clamp x0 0.0 6.0".into()));
    let out = g.t(&[6, 5]);
    let plain = check(&g, "aten.linear.default", &[x, w, b, out]).expect("linear");
    let fused = check(&g, "etwgpu.linear_act.default", &[x, w, b, act, out]).expect("linear_act");
    let (Step::Dispatch(p), Step::Dispatch(f)) = (&plain.steps[0], &fused.steps[0]) else { panic!("dispatches") };
    assert_eq!(p.params.len(), 80);
    assert_eq!(p.params[..64], f.params[..64]);
    assert_eq!(param_word(p, 16), 0, "no activation");
    assert_eq!(param_word(f, 16), 14, "clamp");
    assert_eq!(f32::from_le_bytes(f.params[72..76].try_into().expect("4 bytes")), 6.0);
    assert_eq!((p.inputs.clone(), p.outputs.clone()), (f.inputs.clone(), f.outputs.clone()));
    let bad = g.push(Owned::Str("mul x0 x0".into()));
    assert!(matches!(
        check(&g, "etwgpu.linear_act.default", &[x, w, b, bad, out]),
        Err(crate::Error::ArgValue { arg_idx: 3, name: "activation", .. })
    ));
}

/// The streaming float GEMVs' columns a workgroup: 8, halved while the
/// output leaves fewer than 132 workgroups and each invocation still reads
/// 4 words; the 1B shape's 512-wide projections on 256 workgroups,
/// SmolLM2's short rows (K = 576) at 8.
#[test]
fn float_gemvs_narrow_their_workgroups_for_narrow_outputs() {
    use crate::ops::matmul::gemv_cols;
    for (columns, k, want) in
        [(2048, 2048, 8), (3072, 2048, 8), (512, 2048, 2), (512, 1024, 4), (576, 576, 8), (960, 576, 8), (1, 8192, 2)]
    {
        assert_eq!(gemv_cols(columns, k), want, "{columns} columns, K {k}");
    }
}

#[test]
fn qkv_and_swiglu_shape_three_and_one_outputs_and_route_by_rows() {
    let mut g = TestGraph::default();
    let null = g.push(Owned::Null);
    let wq = g.push(Owned::Tensor(ElemType::F32, vec![8, 16], true));
    let wk = g.push(Owned::Tensor(ElemType::F32, vec![4, 16], true));
    let bk = g.push(Owned::Tensor(ElemType::F32, vec![4], true));
    // Few rows and K a multiple of 4: the streaming GEMV, 8 columns of the
    // 16 a workgroup; more rows: the tiled kernel.
    for (rows, family) in [(3u64, crate::Family::GemvQkvVec4), (5, crate::Family::LinearQkv)] {
        let x = g.t(&[1, rows, 16]);
        let (q, k, v) = (g.t(&[1, rows, 8]), g.t(&[1, rows, 4]), g.t(&[1, rows, 4]));
        let outs = g.push(Owned::List(vec![q, k, v]));
        let l = check(&g, "etwgpu.linear_qkv.default", &[x, wq, null, wk, bk, wk, null, outs]).expect("qkv");
        assert_eq!(l.shapes, vec![(q, vec![1, rows, 8]), (k, vec![1, rows, 4]), (v, vec![1, rows, 4])]);
        let Step::Dispatch(d) = &l.steps[0] else { panic!("a dispatch") };
        assert_eq!(d.shader, crate::ShaderId::find(family, crate::Variant::F32).expect("variant").into());
        assert_eq!(d.inputs, [x, wq, wk, wk, wq, bk, wk]);
        assert_eq!(d.outputs, [q, k, v]);
        assert_eq!(param_word(d, 5), 0b010, "only k has a bias");
        let out = g.t(&[1, rows, 4]);
        if rows == 3 {
            assert_eq!(d.workgroups, [2, 1, 1]);
        }
        let l = check(&g, "etwgpu.linear_swiglu.default", &[x, wk, bk, wk, null, out]).expect("swiglu");
        assert_eq!(l.shapes, vec![(out, vec![1, rows, 4])]);
        let Step::Dispatch(d) = &l.steps[0] else { panic!("a dispatch") };
        let want = if rows == 3 { crate::Family::GemvSwigluVec4 } else { crate::Family::LinearSwiglu };
        assert_eq!(d.shader, crate::ShaderId::find(want, crate::Variant::F32).expect("variant").into());
    }
    // K off a multiple of 4: the one-element-a-workgroup GEMVs.
    let w6 = g.push(Owned::Tensor(ElemType::F32, vec![4, 6], true));
    let x = g.t(&[1, 2, 6]);
    let (q, k, v) = (g.t(&[1, 2, 4]), g.t(&[1, 2, 4]), g.t(&[1, 2, 4]));
    let outs = g.push(Owned::List(vec![q, k, v]));
    let l = check(&g, "etwgpu.linear_qkv.default", &[x, w6, null, w6, null, w6, null, outs]).expect("qkv");
    let Step::Dispatch(d) = &l.steps[0] else { panic!("a dispatch") };
    assert_eq!(d.shader, crate::ShaderId::find(crate::Family::GemvQkv, crate::Variant::F32).expect("variant").into());
    let out = g.t(&[1, 2, 4]);
    let l = check(&g, "etwgpu.linear_swiglu.default", &[x, w6, null, w6, null, out]).expect("swiglu");
    let Step::Dispatch(d) = &l.steps[0] else { panic!("a dispatch") };
    assert_eq!(
        d.shader,
        crate::ShaderId::find(crate::Family::GemvSwiglu, crate::Variant::F32).expect("variant").into()
    );
    let x = g.t(&[2, 16]);
    let out = g.t(&[2, 8]);
    assert!(matches!(
        check(&g, "etwgpu.linear_swiglu.default", &[x, wq, null, wk, null, out]),
        Err(crate::Error::Shape { arg_idx: 3, .. })
    ));
    let two = g.push(Owned::List(vec![out, out]));
    assert!(check(&g, "etwgpu.linear_qkv.default", &[x, wq, null, wq, null, wq, null, two]).is_err());
}

#[test]
fn q4gsw_qkv_and_swiglu_check_their_packed_weights() {
    let mut g = TestGraph::default();
    let x = g.t(&[1, 3, 64]);
    let gs = g.push(Owned::Int(32));
    let w = |g: &mut TestGraph, n: u64| {
        let w = g.push(Owned::Tensor(ElemType::U8, vec![n, 32], true));
        let s = g.push(Owned::Tensor(ElemType::F32, vec![2, n], true));
        (w, s)
    };
    let (wq, sq) = w(&mut g, 64);
    let (wk, sk) = w(&mut g, 32);
    let (q, k, v) = (g.t(&[1, 3, 64]), g.t(&[1, 3, 32]), g.t(&[1, 3, 32]));
    let outs = g.push(Owned::List(vec![q, k, v]));
    let l = check(&g, "etwgpu.linear_q4gsw_qkv.default", &[x, gs, wq, sq, wk, sk, wk, sk, outs]).expect("qkv");
    assert_eq!(l.shapes, vec![(q, vec![1, 3, 64]), (k, vec![1, 3, 32]), (v, vec![1, 3, 32])]);
    // K and the group are multiples of 32: at most 4 rows, one fast GEMV
    // for the three projections; past them one tiled GEMM for the three.
    let fast = |l: &Lowered| -> Vec<_> {
        l.steps
            .iter()
            .map(|s| match s {
                Step::Dispatch(d) => (d.shader.label(), d.outputs.clone()),
                other => panic!("a dispatch, found {other:?}"),
            })
            .collect()
    };
    assert_eq!(fast(&l), [("q4_gemv_qkv.f32", vec![q, k, v])]);
    let x70 = g.t(&[1, 70, 64]);
    let (q70, k70, v70) = (g.t(&[1, 70, 64]), g.t(&[1, 70, 32]), g.t(&[1, 70, 32]));
    let outs70 = g.push(Owned::List(vec![q70, k70, v70]));
    let l = check(&g, "etwgpu.linear_q4gsw_qkv.default", &[x70, gs, wq, sq, wk, sk, wk, sk, outs70]).expect("qkv");
    assert_eq!(fast(&l), [("q4_gemm_qkv.f32", vec![q70, k70, v70])]);
    // K = 48 with groups of 16: the one fused kernel.
    let x48 = g.t(&[1, 3, 48]);
    let gs16 = g.push(Owned::Int(16));
    let w48 = g.push(Owned::Tensor(ElemType::U8, vec![32, 24], true));
    let s48 = g.push(Owned::Tensor(ElemType::F32, vec![3, 32], true));
    let (k48, v48) = (g.t(&[1, 3, 32]), g.t(&[1, 3, 32]));
    let q48 = g.t(&[1, 3, 32]);
    let outs48 = g.push(Owned::List(vec![q48, k48, v48]));
    let l =
        check(&g, "etwgpu.linear_q4gsw_qkv.default", &[x48, gs16, w48, s48, w48, s48, w48, s48, outs48]).expect("qkv");
    let [Step::Dispatch(d)] = &l.steps[..] else { panic!("one dispatch") };
    assert_eq!(d.workgroups, [3 * 96, 1, 1]);
    assert_eq!(d.params.len(), 64);
    let out = g.t(&[1, 3, 32]);
    let l = check(&g, "etwgpu.linear_q4gsw_swiglu.default", &[x, gs, wk, sk, wk, sk, out]).expect("swiglu");
    assert_eq!(l.shapes, vec![(out, vec![1, 3, 32])]);
    assert!(matches!(
        check(&g, "etwgpu.linear_q4gsw_swiglu.default", &[x, gs, wk, sk, wq, sq, out]),
        Err(crate::Error::Shape { arg_idx: 4, .. })
    ));
}

/// An RMS norm taken into the 4-bit linear after it: on the decode route
/// (at most 4 rows, at most 3072 input elements) one `_norm` GEMV reading
/// `a`, `b` and the norm weight in place of the normed input and writing
/// the sum too, the norm's epsilon and the add flag after the GEMV's
/// uniforms; past it the norm's dispatch, then the linear's; without `b`
/// the plain norm; a wrong output list is a typed error.
#[test]
fn rms_norm_linears_are_one_gemv_on_the_decode_route() {
    let mut g = TestGraph::default();
    let gs = g.push(Owned::Int(32));
    let null = g.push(Owned::Null);
    let eps = g.push(Owned::Double(1e-5));
    let nw = g.push(Owned::Tensor(ElemType::F32, vec![64], true));
    let w = |g: &mut TestGraph, n: u64| {
        let w = g.push(Owned::Tensor(ElemType::U8, vec![n, 32], true));
        let s = g.push(Owned::Tensor(ElemType::F32, vec![2, n], true));
        (w, s)
    };
    let (wq, sq) = w(&mut g, 64);
    let (wk, sk) = w(&mut g, 32);
    let labels = |l: &Lowered| -> Vec<_> {
        l.steps
            .iter()
            .map(|s| match s {
                Step::Dispatch(d) => (d.shader.label(), d.inputs.clone(), d.outputs.clone()),
                other => panic!("a dispatch, found {other:?}"),
            })
            .collect()
    };
    let qkv = "etwgpu.rms_norm_linear_q4gsw_qkv.default";
    for rows in [1u64, 3, 70] {
        let (a, b) = (g.t(&[1, rows, 64]), g.t(&[1, rows, 64]));
        let (sum, normed) = (g.t(&[1, rows, 64]), g.t(&[1, rows, 64]));
        let (q, k, v) = (g.t(&[1, rows, 64]), g.t(&[1, rows, 32]), g.t(&[1, rows, 32]));
        let outs = g.push(Owned::List(vec![sum, normed, q, k, v]));
        let l = check(&g, qkv, &[a, b, nw, eps, gs, wq, sq, wk, sk, wk, sk, outs]).expect("qkv");
        let shape = |n| vec![1, rows, n];
        assert_eq!(
            l.shapes,
            vec![(sum, shape(64)), (normed, shape(64)), (q, shape(64)), (k, shape(32)), (v, shape(32))]
        );
        if rows <= 4 {
            assert_eq!(
                labels(&l),
                [("q4_gemv_qkv_norm.f32", vec![a, b, nw, wq, sq, wk, sk, wk, sk], vec![q, k, v, sum])]
            );
            let [Step::Dispatch(d)] = &l.steps[..] else { panic!("one dispatch") };
            // The GEMV's 64 bytes of uniforms, then eps and the add flag.
            assert_eq!(d.params.len(), 80);
            assert_eq!(d.params[64..72], [1e-5f32.to_le_bytes(), 1u32.to_le_bytes()].concat());
        } else {
            let l = labels(&l);
            assert_eq!(l[0], ("add_rms_norm.f32", vec![a, b, nw], vec![sum, normed]));
            assert_eq!(l[1..], [("q4_gemm_qkv.f32", vec![normed, wq, sq, wk, sk, wk, sk], vec![q, k, v])]);
        }
    }
    // The plain norm into one linear (a final norm and the output head).
    let x = g.t(&[1, 64]);
    let (normed, out) = (g.t(&[1, 64]), g.t(&[1, 64]));
    let outs = g.push(Owned::List(vec![normed, out]));
    let lin = "etwgpu.rms_norm_linear_q4gsw.default";
    let l = check(&g, lin, &[x, null, nw, eps, wq, sq, gs, null, outs]).expect("linear");
    assert_eq!(labels(&l), [("q4_gemv_norm.f32", vec![x, x, nw, wq, sq, sq], vec![out, normed])]);
    let [Step::Dispatch(d)] = &l.steps[..] else { panic!("one dispatch") };
    assert_eq!(d.params[32..40], [1e-5f32.to_le_bytes(), 0u32.to_le_bytes()].concat());
    // SwiGLU; then K = 3104 > 3072 input elements: the norm, then the GEMV.
    let (a, b, sum) = (g.t(&[1, 64]), g.t(&[1, 64]), g.t(&[1, 64]));
    let sw = g.t(&[1, 32]);
    let outs = g.push(Owned::List(vec![sum, normed, sw]));
    let swiglu = "etwgpu.rms_norm_linear_q4gsw_swiglu.default";
    let l = check(&g, swiglu, &[a, b, nw, eps, gs, wk, sk, wk, sk, outs]).expect("swiglu");
    assert_eq!(labels(&l), [("q4_gemv_swiglu_norm.f32", vec![a, b, nw, wk, sk, wk, sk], vec![sw, sum])]);
    let (big, big_b, big_sum, big_n) = (g.t(&[1, 3104]), g.t(&[1, 3104]), g.t(&[1, 3104]), g.t(&[1, 3104]));
    let big_w = g.push(Owned::Tensor(ElemType::F32, vec![3104], true));
    let wb = g.push(Owned::Tensor(ElemType::U8, vec![32, 1552], true));
    let sb = g.push(Owned::Tensor(ElemType::F32, vec![97, 32], true));
    let outs = g.push(Owned::List(vec![big_sum, big_n, sw]));
    let l = check(&g, swiglu, &[big, big_b, big_w, eps, gs, wb, sb, wb, sb, outs]).expect("swiglu");
    let got: Vec<_> = labels(&l).into_iter().map(|d| d.0).collect();
    assert_eq!(got, ["add_rms_norm.f32", "q4_gemv_swiglu.f32"]);
    // The output list must hold the sum (with b), the normed input and the
    // linear's outputs; the norm weight has K elements.
    let short = g.push(Owned::List(vec![normed, sw]));
    assert!(matches!(
        check(&g, swiglu, &[a, b, nw, eps, gs, wk, sk, wk, sk, short]),
        Err(crate::Error::ArgValue { arg_idx: 9, name: "out", .. })
    ));
    let outs = g.push(Owned::List(vec![sum, normed, sw]));
    assert!(matches!(
        check(&g, swiglu, &[a, b, big_w, eps, gs, wk, sk, wk, sk, outs]),
        Err(crate::Error::Shape { arg_idx: 2, name: "weight", .. })
    ));
}

/// An RMS norm taken into the float QKV or SwiGLU after it: on the decode
/// route (at most 4 rows, K a multiple of 4, at most 3072 input
/// elements) one normed `vec4` GEMV reading `a`, `b` and the norm weight
/// in place of the normed input and writing the sum too, the norm's
/// epsilon and the add flag after the GEMV's uniforms; past it (or at K
/// not a multiple of 4) the norm's dispatch, then the linear's. The normed
/// output may flatten `a`'s leading dims (an fp32 export's `[S, K]`),
/// not add dims; a wrong output list is a typed error.
#[test]
fn rms_norm_float_linears_are_one_gemv_on_the_decode_route() {
    let mut g = TestGraph::default();
    let null = g.push(Owned::Null);
    let eps = g.push(Owned::Double(1e-5));
    let labels = |l: &Lowered| -> Vec<_> {
        l.steps
            .iter()
            .map(|s| match s {
                Step::Dispatch(d) => (d.shader.label(), d.inputs.clone(), d.outputs.clone()),
                other => panic!("a dispatch, found {other:?}"),
            })
            .collect()
    };
    let qkv = "etwgpu.rms_norm_linear_qkv.default";
    for (k, rows, flat) in [(64u64, 1u64, true), (64, 3, false), (64, 70, true), (66, 1, true)] {
        let nw = g.push(Owned::Tensor(ElemType::F32, vec![k], true));
        let (wq, wk) = (
            g.push(Owned::Tensor(ElemType::F32, vec![k, k], true)),
            g.push(Owned::Tensor(ElemType::F32, vec![16, k], true)),
        );
        let bq = g.push(Owned::Tensor(ElemType::F32, vec![k], true));
        let (a, b, sum) = (g.t(&[1, rows, k]), g.t(&[1, rows, k]), g.t(&[1, rows, k]));
        // The linears' rows: `[S, N]` after a flattening view, else `[1, S, N]`.
        let lead: Vec<u64> = if flat { vec![rows] } else { vec![1, rows] };
        let dims = |n: u64| [lead.clone(), vec![n]].concat();
        let normed = g.t(&dims(k));
        let (q, kk, v) = (g.t(&dims(k)), g.t(&dims(16)), g.t(&dims(16)));
        let outs = g.push(Owned::List(vec![sum, normed, q, kk, v]));
        let l = check(&g, qkv, &[a, b, nw, eps, wq, bq, wk, null, wk, null, outs]).expect("qkv");
        assert_eq!(
            l.shapes,
            vec![(sum, vec![1, rows, k]), (normed, dims(k)), (q, dims(k)), (kk, dims(16)), (v, dims(16))]
        );
        let got = labels(&l);
        if rows <= 4 && k % 4 == 0 {
            assert_eq!(got, [("gemv_qkv_norm_vec4.f32", vec![a, b, nw, wq, wk, wk, bq, wk, wk], vec![q, kk, v, sum])]);
            let [Step::Dispatch(d)] = &l.steps[..] else { panic!("one dispatch") };
            // The GEMV's 32 bytes of uniforms, then eps and the add flag.
            assert_eq!(d.params.len(), 48);
            assert_eq!(d.params[32..40], [1e-5f32.to_le_bytes(), 1u32.to_le_bytes()].concat());
        } else {
            assert_eq!(got[0], ("add_rms_norm.f32", vec![a, b, nw], vec![sum, normed]));
            assert_eq!(got.len(), 2, "{got:?}");
            assert_eq!(got[1].1[0], normed);
        }
    }
    // SwiGLU without the add: the plain norm.
    let nw = g.push(Owned::Tensor(ElemType::F32, vec![64], true));
    let w = g.push(Owned::Tensor(ElemType::F32, vec![32, 64], true));
    let (x, normed, sw) = (g.t(&[1, 64]), g.t(&[1, 64]), g.t(&[1, 32]));
    let outs = g.push(Owned::List(vec![normed, sw]));
    let swiglu = "etwgpu.rms_norm_linear_swiglu.default";
    let l = check(&g, swiglu, &[x, null, nw, eps, w, null, w, null, outs]).expect("swiglu");
    assert_eq!(labels(&l), [("gemv_swiglu_norm_vec4.f32", vec![x, x, nw, w, w, w, w], vec![sw, normed])]);
    let [Step::Dispatch(d)] = &l.steps[..] else { panic!("one dispatch") };
    assert_eq!(d.params[32..40], [1e-5f32.to_le_bytes(), 0u32.to_le_bytes()].concat());
    // A normed output of a higher rank than the input, and a short list.
    let (deep, sw3) = (g.t(&[1, 1, 64]), g.t(&[1, 1, 32]));
    let outs = g.push(Owned::List(vec![deep, sw3]));
    assert!(matches!(
        check(&g, swiglu, &[x, null, nw, eps, w, null, w, null, outs]),
        Err(crate::Error::ArgValue { arg_idx: 8, name: "out", .. })
    ));
    let short = g.push(Owned::List(vec![sw]));
    assert!(matches!(
        check(&g, swiglu, &[x, null, nw, eps, w, null, w, null, short]),
        Err(crate::Error::ArgValue { arg_idx: 8, name: "out", .. })
    ));
}

/// A decoder's tail as one op: the rows of one index along a dim of `a + b`
/// normalized, one workgroup per output row, its first source row in the
/// uniforms' last word (the index resolved against the live size, as
/// `select_copy` does); arguments it cannot run are typed errors.
#[test]
fn add_select_rms_norm_reads_only_the_selected_rows() {
    let op = "etwgpu.add_select_rms_norm.default";
    let mut g = TestGraph::default();
    let (eps, w) = (g.push(Owned::Double(1e-5)), g.push(Owned::Tensor(ElemType::F32, vec![64], true)));
    let (one, last) = (g.push(Owned::Int(1)), g.push(Owned::Int(-1)));
    let params = |l: &Lowered| {
        let [Step::Dispatch(d)] = &l.steps[..] else { panic!("one dispatch, found {:?}", l.steps) };
        assert_eq!((d.shader.label(), d.workgroups), ("add_select_rms_norm.f32", [1, 1, 1]));
        let words: Vec<u32> = d.params.chunks(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
        (d.inputs.clone(), d.outputs.clone(), words[0], words[1], f32::from_bits(words[2]), words[3])
    };
    for (s, index, row0) in [(5u64, -1i64, 4u32), (5, 4, 4), (5, 2, 2), (1, -1, 0), (1, 0, 0)] {
        let (a, b, out) = (g.t(&[1, s, 64]), g.t(&[1, s, 64]), g.t(&[1, 64]));
        let i = g.push(Owned::Int(index));
        let l = check(&g, op, &[a, b, one, i, w, eps, out]).expect("lowers");
        assert_eq!(l.shapes, vec![(out, vec![1, 64])]);
        assert_eq!(params(&l), (vec![a, b, w], vec![out], 1, 64, 1e-5, row0), "S = {s}, index {index}");
    }
    // A SymInt index, as the rule reads any int.
    let (a, b, out) = (g.t(&[1, 7, 64]), g.t(&[1, 7, 64]), g.t(&[1, 64]));
    let sym = g.push(Owned::SymInt(3));
    assert_eq!(params(&check(&g, op, &[a, b, one, sym, w, eps, out]).expect("lowers")).5, 3);
    // Index and dim out of range, or a slice not in one piece.
    for (index, dim, bad) in [(7, 1, 3), (-8, 1, 3), (-1, 2, 2), (-1, -1, 2), (0, 3, 2)] {
        let (i, d) = (g.push(Owned::Int(index)), g.push(Owned::Int(dim)));
        let err = check(&g, op, &[a, b, d, i, w, eps, out]).expect_err("bad index or dim");
        assert!(matches!(err, crate::Error::ArgValue { arg_idx, .. } if arg_idx == bad), "{index}, {dim}: {err:?}");
    }
    let (wide_a, wide_b) = (g.t(&[2, 7, 64]), g.t(&[2, 7, 64]));
    let err = check(&g, op, &[wide_a, wide_b, one, last, w, eps, out]).expect_err("rows not in one piece");
    assert!(matches!(err, crate::Error::ArgValue { arg_idx: 2, name: "dim", .. }), "{err:?}");
    // Shapes and dtypes that do not match, and a wrong argument count.
    let short_b = g.t(&[1, 6, 64]);
    let err = check(&g, op, &[a, short_b, one, last, w, eps, out]).expect_err("b's shape");
    assert!(matches!(err, crate::Error::Shape { arg_idx: 1, name: "b", .. }), "{err:?}");
    let w63 = g.push(Owned::Tensor(ElemType::F32, vec![63], true));
    let err = check(&g, op, &[a, b, one, last, w63, eps, out]).expect_err("weight's size");
    assert!(matches!(err, crate::Error::Shape { arg_idx: 4, name: "weight", .. }), "{err:?}");
    let out16 = g.push(Owned::Tensor(ElemType::F16, vec![1, 64], false));
    let err = check(&g, op, &[a, b, one, last, w, eps, out16]).expect_err("out's dtype");
    assert!(matches!(err, crate::Error::DType { arg_idx: 6, .. }), "{err:?}");
    let err = check(&g, op, &[a, b, one, last, w, out]).expect_err("six arguments");
    assert!(matches!(err, crate::Error::ArgCount { expected: 7, found: 6 }), "{err:?}");
    let err = check(&g, op, &[a, b, one, eps, w, eps, out]).expect_err("a double index");
    assert!(matches!(err, crate::Error::ArgKind { arg_idx: 3, .. }), "{err:?}");
}

// One definition per unary op: the table's `@unary` rows, `UnaryOp` and
// the WGSL `act` of `wgsl/common/act.wgsl` must agree.

use crate::ops::elementwise::UnaryOp;

/// The `const ACT_<NAME>: u32 = <code>u;` lines `act` must declare, one per
/// [`UnaryOp`] in op-code order.
fn act_code_lines() -> Vec<String> {
    UnaryOp::ALL.iter().map(|op| format!("const ACT_{}: u32 = {}u;", op.name().to_uppercase(), *op as u32)).collect()
}

#[test]
fn unary_op_list_is_in_op_code_order_with_unique_names() {
    for (i, op) in UnaryOp::ALL.iter().enumerate() {
        assert_eq!(*op as usize, i, "{op:?} is at {i} of UnaryOp::ALL");
        assert_eq!(UnaryOp::from_name(op.name()), Some(*op));
    }
}

#[test]
fn act_op_codes_are_the_unary_op_discriminants() {
    let snippet = include_str!("../wgsl/common/act.wgsl");
    let declared: Vec<&str> = snippet.lines().filter(|l| l.starts_with("const ACT_")).collect();
    assert_eq!(declared, act_code_lines(), "`const ACT_*` lines of act.wgsl against UnaryOp");
    // The switch of `act` names every code by its constant, once, in order,
    // and nothing else.
    let body = &snippet[snippet.find("fn act(").expect("act.wgsl defines act")..];
    let cases: Vec<&str> = body
        .lines()
        .filter_map(|l| l.trim().strip_prefix("case "))
        .map(|l| l.split(':').next().unwrap_or(""))
        .collect();
    let expected: Vec<String> = UnaryOp::ALL.iter().map(|op| format!("ACT_{}", op.name().to_uppercase())).collect();
    assert_eq!(cases, expected, "the cases of act");
    // Every shader that calls `act` carries that one definition, included.
    let mut callers = Vec::new();
    for id in crate::ShaderId::ALL {
        let source = id.source();
        if source.contains("fn act(") {
            assert!(act_code_lines().iter().all(|l| source.contains(l.as_str())), "{}: stale act codes", id.label());
            assert_eq!(source.matches("fn act(").count(), 1, "{}", id.label());
            callers.push(id.family());
        }
    }
    callers.dedup();
    use crate::Family as F;
    assert_eq!(
        callers,
        [F::Conv, F::ConvGemm, F::ConvGemmCombine, F::ConvGemmCoop, F::FusedElementwise, F::Gemv, F::Matmul, F::Unary]
    );
}

#[test]
fn unary_rows_lower_to_their_unary_op_and_no_other_row_does() {
    for &(id, name) in OPS {
        let mut g = TestGraph::default();
        let x = g.t(&[5]);
        let out = g.t(&[5]);
        let lowered = id.lower(&crate::plan::Ctx::new(&g, &[x, out]));
        let code = match lowered.as_ref().map(|l| &l.steps[..]) {
            Ok([Step::Dispatch(d)]) if d.shader.label() == "unary.f32" => Some(param_word(d, 1)),
            _ => None,
        };
        assert_eq!(code, id.unary().map(|op| op as u32), "{name}: its row against OpId::unary");
    }
    assert_eq!(OPS.iter().filter(|(id, _)| id.unary().is_some()).count(), 15);
}

/// Word `i` of a dispatch's uniform bytes.
fn param_word(d: &crate::plan::Dispatch, i: usize) -> u32 {
    u32::from_le_bytes(d.params[4 * i..4 * i + 4].try_into().expect("4 bytes"))
}

/// The shader label and workgroups of a one-dispatch lowering (besides
/// the scratch it may declare).
fn one_dispatch(l: &Lowered) -> (&'static str, [u32; 3]) {
    let steps: Vec<&Step> = l.steps.iter().filter(|s| !matches!(s, Step::Scratch { .. })).collect();
    let [Step::Dispatch(d)] = steps[..] else { panic!("one dispatch, found {:?}", l.steps) };
    (d.shader.label(), d.workgroups)
}

#[test]
fn gemm_routes_follow_the_device_caps_and_precision() {
    use crate::caps::{DeviceCaps, Precision};
    let lower = |g: &TestGraph, op: &str, args: &[Vid], caps: DeviceCaps| {
        from_name(op).expect("registered").lower(&crate::plan::Ctx::new(g, args).with_caps(caps)).expect("lowers")
    };
    let coop = |precision| DeviceCaps { coop_matrix_f16: true, precision, ..DeviceCaps::default() };
    let mut g = TestGraph::default();
    // 4-bit linear: 200 rows, N = 300, K = 64 in groups of 32.
    let x = g.t(&[1, 200, 64]);
    let w = g.push(Owned::Tensor(ElemType::U8, vec![300, 32], true));
    let s = g.push(Owned::Tensor(ElemType::F32, vec![2, 300], true));
    let (gs, null) = (g.push(Owned::Int(32)), g.push(Owned::Null));
    let out = g.t(&[1, 200, 300]);
    let q4 = "et_vk.linear_q4gsw.default";
    let args = [x, w, s, gs, null, out];
    // Tiles of 64 x 128 on the matrix units: 4 x 3; of 64 x 64 elsewhere.
    assert_eq!(one_dispatch(&lower(&g, q4, &args, coop(Precision::F16))), ("q4_gemm_coop.f32", [12, 1, 1]));
    assert_eq!(one_dispatch(&lower(&g, q4, &args, coop(Precision::F32))), ("q4_gemm.f32", [20, 1, 1]));
    assert_eq!(one_dispatch(&lower(&g, q4, &args, DeviceCaps::default())), ("q4_gemm.f32", [20, 1, 1]));
    // Decode rows stay on the GEMV.
    let x1 = g.t(&[1, 1, 64]);
    let out1 = g.t(&[1, 1, 300]);
    let l = lower(&g, q4, &[x1, w, s, gs, null, out1], coop(Precision::F16));
    assert_eq!(one_dispatch(&l).0, "q4_gemv.f32");
    // The fused SwiGLU pair.
    let sw = g.t(&[1, 200, 300]);
    let swiglu = "etwgpu.linear_q4gsw_swiglu.default";
    let l = lower(&g, swiglu, &[x, gs, w, s, w, s, sw], coop(Precision::F16));
    assert_eq!(one_dispatch(&l), ("q4_gemm_coop_swiglu.f32", [12, 1, 1]));
    let l = lower(&g, swiglu, &[x, gs, w, s, w, s, sw], DeviceCaps::default());
    assert_eq!(one_dispatch(&l).0, "q4_gemm_swiglu.f32");
    // Dense linear: float32 only with precision F16; float16 always.
    let a = g.t(&[200, 64]);
    let wd = g.push(Owned::Tensor(ElemType::F32, vec![300, 64], true));
    let od = g.t(&[200, 300]);
    let lin = "aten.linear.default";
    assert_eq!(one_dispatch(&lower(&g, lin, &[a, wd, null, od], coop(Precision::F32))).0, "matmul.f32");
    assert_eq!(
        one_dispatch(&lower(&g, lin, &[a, wd, null, od], coop(Precision::F16))),
        ("matmul_coop.f32", [12, 1, 1])
    );
    let a16 = g.push(Owned::Tensor(ElemType::F16, vec![200, 64], false));
    let w16 = g.push(Owned::Tensor(ElemType::F16, vec![300, 64], true));
    let o16 = g.push(Owned::Tensor(ElemType::F16, vec![200, 300], false));
    let l = lower(&g, lin, &[a16, w16, null, o16], coop(Precision::F32));
    assert_eq!(one_dispatch(&l), ("matmul_coop.f16", [12, 1, 1]));
    assert_eq!(one_dispatch(&lower(&g, lin, &[a16, w16, null, o16], DeviceCaps::default())).0, "matmul.f16");
    // K not a multiple of 32: the tiled kernel.
    let a48 = g.t(&[200, 48]);
    let w48 = g.push(Owned::Tensor(ElemType::F32, vec![300, 48], true));
    assert_eq!(one_dispatch(&lower(&g, lin, &[a48, w48, null, od], coop(Precision::F16))).0, "matmul.f32");
}

/// Issue 15's default (`Precision::Mixed`): on a device with matrix units
/// and no precision set, a 4-bit linear past the GEMV rows (plain, SwiGLU
/// pair, QKV projections) takes the cooperative-matrix kernel with f16
/// operands and a dense float32 `aten.linear` of the same shape stays on
/// the f32 kernel; at `Precision::F32` neither does. Without matrix units
/// (lavapipe, CI) the default routes as `F32` does.
#[test]
fn the_default_precision_puts_only_4bit_linears_on_the_matrix_units() {
    use crate::caps::{DeviceCaps, Precision};
    let lower = |g: &TestGraph, op: &str, args: &[Vid], caps: DeviceCaps| {
        from_name(op).expect("registered").lower(&crate::plan::Ctx::new(g, args).with_caps(caps)).expect("lowers")
    };
    // The dispatches' kernels (split-K declares its scratch as a step too).
    let labels = |l: &Lowered| -> Vec<&'static str> {
        l.steps.iter().filter_map(|s| if let Step::Dispatch(d) = s { Some(d.shader.label()) } else { None }).collect()
    };
    let all_coop = |l: &Lowered| labels(l).iter().all(|s| s.contains("_coop"));
    let none_coop = |l: &Lowered| labels(l).iter().all(|s| !s.contains("_coop"));
    let mixed = DeviceCaps { coop_matrix_f16: true, precision: Precision::Mixed, ..DeviceCaps::default() };
    let default = DeviceCaps { coop_matrix_f16: true, ..DeviceCaps::default() };
    assert_eq!(default.precision, Precision::Mixed);
    let f32_only = DeviceCaps { coop_matrix_f16: true, precision: Precision::F32, ..DeviceCaps::default() };
    let lavapipe = DeviceCaps::default();

    let mut g = TestGraph::default();
    let m = crate::ops::quant::Q4_GEMV_MAX_ROWS + 1;
    let x = g.t(&[1, m, 64]);
    let w = g.push(Owned::Tensor(ElemType::U8, vec![128, 32], true));
    let s = g.push(Owned::Tensor(ElemType::F32, vec![2, 128], true));
    let (gs, null) = (g.push(Owned::Int(32)), g.push(Owned::Null));
    let out = g.t(&[1, m, 128]);
    let (q, k, v) = (g.t(&[1, m, 128]), g.t(&[1, m, 128]), g.t(&[1, m, 128]));
    let outs = g.push(Owned::List(vec![q, k, v]));
    let q4_calls: [(&str, Vec<Vid>); 3] = [
        ("et_vk.linear_q4gsw.default", vec![x, w, s, gs, null, out]),
        ("etwgpu.linear_q4gsw_swiglu.default", vec![x, gs, w, s, w, s, out]),
        ("etwgpu.linear_q4gsw_qkv.default", vec![x, gs, w, s, w, s, w, s, outs]),
    ];
    for (op, args) in &q4_calls {
        for (caps, what) in [(mixed, "mixed"), (default, "the default (mixed)")] {
            let l = lower(&g, op, args, caps);
            assert!(!l.steps.is_empty() && all_coop(&l), "{op} at {what}: {:?}", labels(&l));
        }
        assert!(none_coop(&lower(&g, op, args, f32_only)), "{op} at F32");
        assert!(none_coop(&lower(&g, op, args, lavapipe)), "{op} without matrix units");
    }
    // A dense float32 linear past the GEMV rows, K a multiple of 32: the
    // coop route would take it at F16; mixed and the default keep it float32.
    let rows = crate::ops::matmul::GEMV_MAX_ROWS + 1;
    let a = g.t(&[rows, 64]);
    let wd = g.push(Owned::Tensor(ElemType::F32, vec![128, 64], true));
    let od = g.t(&[rows, 128]);
    let lin = "aten.linear.default";
    let f16 = DeviceCaps { coop_matrix_f16: true, precision: Precision::F16, ..DeviceCaps::default() };
    assert_eq!(labels(&lower(&g, lin, &[a, wd, null, od], f16)), ["matmul_coop.f32"]);
    assert!(none_coop(&lower(&g, lin, &[a, wd, null, od], default)), "dense float32 at the default");
    assert!(none_coop(&lower(&g, lin, &[a, wd, null, od], mixed)), "dense float32 at mixed");
    assert!(none_coop(&lower(&g, lin, &[a, wd, null, od], f32_only)), "dense float32 at F32");
}

#[test]
fn coop_tiles_go_large_only_when_their_waves_take_less_time() {
    use crate::ops::gemm::{COOP_DENSE_LARGE, COOP_Q4_LARGE, COOP_QKV_LARGE, COOP_SMALL, COOP_SWIGLU_LARGE, coop_tile};
    // The QKV's 128 x 128 tile. 512 x 2048: 64 workgroups against 128 of
    // 64 x 128, one wave each; 512 x 8192 and 2048 x 2048: 256 (two waves)
    // against 512 (four); 512 x 3072: 96 (one wave) against 192 (two).
    assert_eq!(coop_tile(512, 2048, 2048, COOP_QKV_LARGE), COOP_SMALL);
    assert_eq!(coop_tile(512, 8192, 2048, COOP_QKV_LARGE), COOP_QKV_LARGE);
    assert_eq!(coop_tile(2048, 2048, 8192, COOP_QKV_LARGE), COOP_QKV_LARGE);
    assert_eq!(coop_tile(512, 3072, 2048, COOP_QKV_LARGE), COOP_QKV_LARGE);
    assert_eq!(coop_tile(256, 4096, 2048, COOP_QKV_LARGE), COOP_SMALL, "64 against 128, one wave each");
    // Ragged M and N count their partial tiles; K not a multiple of 64
    // stays on the small tile (K steps of 32).
    assert_eq!(coop_tile(1100, 2048 + 16, 2048, COOP_QKV_LARGE), COOP_QKV_LARGE);
    assert_eq!(coop_tile(2048, 2048, 96, COOP_QKV_LARGE), COOP_SMALL);
    // A 4-bit linear's 128 x 256 tile: 512 x 2048 is 32 workgroups (the
    // small tile: 85.3 against 34.3 TFLOP/s, shipped kernels on an H100 in
    // run ba), 512 x 3072 48 against two waves of the small tile (small),
    // 512 x 8192 and 2048 x 2048 one wave (128) against four (large: 122.8
    // against 89.9, 123.5 against 90.3); its K step is 32, so K = 96 takes
    // it.
    assert_eq!(coop_tile(512, 2048, 2048, COOP_Q4_LARGE), COOP_SMALL);
    assert_eq!(coop_tile(512, 3072, 2048, COOP_Q4_LARGE), COOP_SMALL);
    assert_eq!(coop_tile(512, 8192, 2048, COOP_Q4_LARGE), COOP_Q4_LARGE);
    assert_eq!(coop_tile(2048, 2048, 8192, COOP_Q4_LARGE), COOP_Q4_LARGE);
    assert_eq!(coop_tile(2048, 2048, 96, COOP_Q4_LARGE), COOP_Q4_LARGE);
    assert_eq!(coop_tile(2048, 2048, 96, COOP_SWIGLU_LARGE), COOP_SWIGLU_LARGE);
    // Dense: 256 x 128 tiles.
    assert_eq!(coop_tile(4096, 4096, 4096, COOP_DENSE_LARGE), COOP_DENSE_LARGE);
    assert_eq!(coop_tile(512, 4096, 4096, COOP_DENSE_LARGE), COOP_SMALL);
    // Through the host rules: the large kernels and their grids.
    use crate::caps::{DeviceCaps, Precision};
    let caps = DeviceCaps { coop_matrix_f16: true, precision: Precision::F16, ..DeviceCaps::default() };
    let lower = |g: &TestGraph, op: &str, args: &[Vid]| {
        from_name(op).expect("registered").lower(&crate::plan::Ctx::new(g, args).with_caps(caps)).expect("lowers")
    };
    let mut g = TestGraph::default();
    let x = g.t(&[1, 2048, 64]);
    let w = g.push(Owned::Tensor(ElemType::U8, vec![2048, 32], true));
    let s = g.push(Owned::Tensor(ElemType::F32, vec![2, 2048], true));
    let (gs, null) = (g.push(Owned::Int(32)), g.push(Owned::Null));
    let out = g.t(&[1, 2048, 2048]);
    let l = lower(&g, "et_vk.linear_q4gsw.default", &[x, w, s, gs, null, out]);
    assert_eq!(one_dispatch(&l), ("q4_gemm_coop_large.f32", [128, 1, 1]));
    let l = lower(&g, "etwgpu.linear_q4gsw_swiglu.default", &[x, gs, w, s, w, s, out]);
    assert_eq!(one_dispatch(&l), ("q4_gemm_coop_swiglu_large.f32", [256, 1, 1]));
    let a = g.t(&[4096, 64]);
    let wd = g.push(Owned::Tensor(ElemType::F32, vec![4096, 64], true));
    let od = g.t(&[4096, 4096]);
    let l = lower(&g, "aten.linear.default", &[a, wd, null, od]);
    assert_eq!(one_dispatch(&l), ("matmul_coop_large.f32", [512, 1, 1]));
}

/// The fused 4-bit Q/K/V past the decode rows is one dispatch on every
/// route: the tiles along N are Q's, then K's, then V's (64 wide on the
/// tiled route, 128 on the matrix units), the uniforms say where K's and
/// V's start; the large tile only with enough workgroups; after an RMS
/// norm, the norm's dispatch and that one.
#[test]
fn q4_qkv_is_one_dispatch_on_the_prefill_routes() {
    use crate::caps::{DeviceCaps, Precision};
    let lower = |g: &TestGraph, op: &str, args: &[Vid], caps: DeviceCaps| {
        from_name(op).expect("registered").lower(&crate::plan::Ctx::new(g, args).with_caps(caps)).expect("lowers")
    };
    let coop = DeviceCaps { coop_matrix_f16: true, precision: Precision::F16, ..DeviceCaps::default() };
    let mut g = TestGraph::default();
    let gs = g.push(Owned::Int(32));
    let w = |g: &mut TestGraph, n: u64| {
        let w = g.push(Owned::Tensor(ElemType::U8, vec![n, 32], true));
        let s = g.push(Owned::Tensor(ElemType::F32, vec![2, n], true));
        (w, s)
    };
    let (wq, sq) = w(&mut g, 300);
    let (wk, sk) = w(&mut g, 70);
    let (wv, sv) = w(&mut g, 130);
    let qkv = "etwgpu.linear_q4gsw_qkv.default";
    let x = g.t(&[1, 200, 64]);
    let (q, k, v) = (g.t(&[1, 200, 300]), g.t(&[1, 200, 70]), g.t(&[1, 200, 130]));
    let outs = g.push(Owned::List(vec![q, k, v]));
    let args = [x, gs, wq, sq, wk, sk, wv, sv, outs];
    // (caps, kernel, workgroups: 200 rows in tiles of 64 times the tiles
    // along N, and the first tiles of K and V).
    let cases = [
        (coop, "q4_gemm_coop_qkv.f32", 4 * (3 + 1 + 2), [3, 4]),
        (DeviceCaps { precision: Precision::F32, ..coop }, "q4_gemm_qkv.f32", 4 * (5 + 2 + 3), [5, 7]),
        (DeviceCaps::default(), "q4_gemm_qkv.f32", 4 * (5 + 2 + 3), [5, 7]),
    ];
    for (caps, kernel, groups, firsts) in cases {
        let l = lower(&g, qkv, &args, caps);
        assert_eq!(one_dispatch(&l), (kernel, [groups, 1, 1]));
        let [Step::Dispatch(d)] = &l.steps[..] else { panic!("one dispatch") };
        assert_eq!(d.inputs, [x, wq, sq, wk, sk, wv, sv]);
        assert_eq!(d.outputs, [q, k, v]);
        assert_eq!(d.params.len(), 64);
        // M, K, group, tiles along N, the Ns, layout, the padded Ns, firsts.
        let words: Vec<u32> = (0..13).map(|i| param_word(d, i)).collect();
        assert_eq!(words, [200, 64, 32, groups / 4, 300, 70, 130, 0, 300, 70, 130, firsts[0], firsts[1]]);
    }
    // The 1B shape: at 128 rows the small tile (2 x 24, one wave); at 512
    // rows 4 x 24 large tiles (one wave) against 8 x 24 small ones (two);
    // at 2048 rows 16 x 24 large tiles.
    let (wq, sq) = w(&mut g, 2048);
    let (wk, sk) = w(&mut g, 512);
    for (rows, kernel, groups) in [
        (128u64, "q4_gemm_coop_qkv.f32", 2 * 24),
        (512, "q4_gemm_coop_qkv_large.f32", 4 * 24),
        (2048, "q4_gemm_coop_qkv_large.f32", 16 * 24),
    ] {
        let x = g.t(&[1, rows, 64]);
        let (q, k, v) = (g.t(&[1, rows, 2048]), g.t(&[1, rows, 512]), g.t(&[1, rows, 512]));
        let outs = g.push(Owned::List(vec![q, k, v]));
        let l = lower(&g, qkv, &[x, gs, wq, sq, wk, sk, wk, sk, outs], coop);
        assert_eq!(one_dispatch(&l), (kernel, [groups, 1, 1]));
    }
    // After an RMS norm: the norm, then the one GEMM.
    let (eps, nw) = (g.push(Owned::Double(1e-5)), g.push(Owned::Tensor(ElemType::F32, vec![64], true)));
    let (a, b, sum, normed) = (g.t(&[1, 200, 64]), g.t(&[1, 200, 64]), g.t(&[1, 200, 64]), g.t(&[1, 200, 64]));
    let outs = g.push(Owned::List(vec![sum, normed, q, k, v]));
    let (wq, sq) = (args[2], args[3]);
    let (wk, sk) = (args[4], args[5]);
    let l =
        lower(&g, "etwgpu.rms_norm_linear_q4gsw_qkv.default", &[a, b, nw, eps, gs, wq, sq, wk, sk, wv, sv, outs], coop);
    let labels: Vec<_> = l
        .steps
        .iter()
        .map(|s| match s {
            Step::Dispatch(d) => (d.shader.label(), d.outputs.clone()),
            other => panic!("a dispatch, found {other:?}"),
        })
        .collect();
    assert_eq!(labels, [("add_rms_norm.f32", vec![sum, normed]), ("q4_gemm_coop_qkv.f32", vec![q, k, v])]);
}

/// Split-K: the rule (the most splits that keep one workgroup an SM of
/// 132, at least 512 inputs each, at most 8, whole steps), and through
/// the 4-bit
/// linear's rule: the scratch declared at every prefill lowering, the
/// partial sums then their sum on both routes when the tiles leave SMs
/// idle and scratch is given; the large tile and calls without scratch
/// unsplit.
#[test]
fn small_calls_split_k() {
    use crate::caps::{DeviceCaps, Precision};
    use crate::ops::gemm::{SplitK, split_k, split_k_scratch_bytes};
    assert_eq!(split_k(32, 2048, 32), SplitK { splits: 4, k_chunk: 512 });
    assert_eq!(split_k(2, 8192, 32), SplitK { splits: 8, k_chunk: 1024 });
    assert_eq!(split_k(50, 1600, 32), SplitK { splits: 2, k_chunk: 800 });
    assert_eq!(split_k(44, 4096, 32), SplitK { splits: 3, k_chunk: 1376 });
    assert_eq!(split_k(67, 8192, 32).splits, 1, "two would not fit one an SM");
    assert_eq!(split_k(10, 1000, 16).splits, 1, "too short to split");
    assert_eq!(split_k_scratch_bytes(4, 2048, true), 0, "the decode rows never split");
    assert_eq!(split_k_scratch_bytes(64, 2048, true), 4 * 8 * 64 * 2048);
    assert_eq!(split_k_scratch_bytes(4096, 2048, true), 4 * 132 * 128 * 256, "bounded by the large tile");
    assert_eq!(split_k_scratch_bytes(4096, 2048, false), 4 * 132 * 64 * 128, "the tiled route's bound");
    let coop = DeviceCaps { coop_matrix_f16: true, precision: Precision::F16, ..DeviceCaps::default() };
    let mut g = TestGraph::default();
    let scratch = [g.t(&[1]), g.t(&[1])];
    let lower = |g: &TestGraph, args: &[Vid], caps: DeviceCaps, scratch: &[Vid]| {
        let c = crate::plan::Ctx::new(g, args).with_scratch(scratch).with_caps(caps);
        from_name("et_vk.linear_q4gsw.default").expect("registered").lower(&c).expect("lowers")
    };
    let w = g.push(Owned::Tensor(ElemType::U8, vec![2048, 1024], true));
    let s = g.push(Owned::Tensor(ElemType::F32, vec![64, 2048], true));
    let (gs, null) = (g.push(Owned::Int(32)), g.push(Owned::Null));
    let b = g.push(Owned::Tensor(ElemType::F32, vec![2048], true));
    // (rows, caps, split kernel and workgroups, splits, inputs per split).
    let cases = [
        (128u64, coop, "q4_gemm_coop_splitk.f32", 4 * 2 * 16, 4, 512),
        (128, DeviceCaps::default(), "q4_gemm_splitk.f32", 2 * 2 * 32, 2, 1024),
        (64, coop, "q4_gemm_coop_splitk.f32", 4 * 16, 4, 512),
    ];
    for (rows, caps, kernel, groups, splits, k_chunk) in cases {
        let x = g.t(&[1, rows, 2048]);
        let out = g.t(&[1, rows, 2048]);
        let l = lower(&g, &[x, w, s, gs, b, out], caps, &scratch);
        let [Step::Scratch { slot: 1, bytes }, Step::Dispatch(part), Step::Dispatch(sum)] = &l.steps[..] else {
            panic!("scratch, partial sums, their sum: {:?}", l.steps)
        };
        assert_eq!(*bytes, split_k_scratch_bytes(rows, 2048, caps.coop_matrix_f16));
        assert_eq!((part.shader.label(), part.workgroups), (kernel, [groups, 1, 1]));
        assert_eq!((part.inputs.as_slice(), part.outputs.as_slice()), (&[x, w, s][..], &[scratch[1]][..]));
        assert_eq!([param_word(part, 7), param_word(part, 8)], [k_chunk, groups / splits]);
        assert_eq!(sum.shader.label(), "gemm_splitk_combine.f32");
        assert_eq!((sum.inputs.as_slice(), sum.outputs.as_slice()), (&[scratch[1], b][..], &[out][..]));
        let numel = rows as u32 * 2048;
        assert_eq!(
            [param_word(sum, 0), param_word(sum, 1), param_word(sum, 2), param_word(sum, 3)],
            [numel, 2048, splits, 1]
        );
        assert_eq!(sum.workgroups, [numel / 256, 1, 1]);
        // Without scratch: one GEMM.
        let l = lower(&g, &[x, w, s, gs, null, out], caps, &[]);
        assert!(!one_dispatch(&l).0.contains("split"), "{:?}", l.steps);
    }
    // Enough tiles: unsplit (the small tile at 512 rows, the large one at
    // 2048); the decode rows: the GEMV, no scratch.
    for (rows, kernel) in [(512, "q4_gemm_coop.f32"), (2048, "q4_gemm_coop_large.f32")] {
        let (x, out) = (g.t(&[1, rows, 2048]), g.t(&[1, rows, 2048]));
        let l = lower(&g, &[x, w, s, gs, null, out], coop, &scratch);
        assert_eq!(one_dispatch(&l).0, kernel);
    }
    let (x, out) = (g.t(&[1, 4, 2048]), g.t(&[1, 4, 2048]));
    let l = lower(&g, &[x, w, s, gs, null, out], coop, &scratch);
    assert!(matches!(&l.steps[..], [Step::Dispatch(d)] if d.shader.label() == "q4_gemv.f32"), "{:?}", l.steps);
}

/// A 4-bit linear whose large tiles are too few splits K over the large
/// tile (slices of at least 1,024 inputs, one wave), where that beats the
/// small tile by `coop_tile`'s model: the 1B shape's down projection at 256
/// to 1,024 rows and its O projection (K = 2,048) at 1,024; not at 128 rows
/// (the small tile's split), the O projection at 512 rows, or where the
/// large tile already fills the GPU.
#[test]
fn long_k_splits_the_large_tile() {
    use crate::caps::{DeviceCaps, Precision};
    use crate::ops::gemm::{COOP_Q4_LARGE, COOP_SMALL, Q4CoopRoute, SplitK, q4_coop_route};
    let split = |splits, k_chunk| SplitK { splits, k_chunk };
    for (m, n, k, want) in [
        (512, 2048, 8192, Q4CoopRoute::Split(COOP_Q4_LARGE, split(4, 2048))),
        (1024, 2048, 8192, Q4CoopRoute::Split(COOP_Q4_LARGE, split(2, 4096))),
        (512, 2064, 8192, Q4CoopRoute::Split(COOP_Q4_LARGE, split(3, 2752))),
        (128, 2048, 8192, Q4CoopRoute::Split(COOP_SMALL, split(4, 2048))),
        (512, 2048, 2048, Q4CoopRoute::Tiles(COOP_SMALL)),
        (1024, 2048, 2048, Q4CoopRoute::Split(COOP_Q4_LARGE, split(2, 1024))),
        (256, 2048, 8192, Q4CoopRoute::Split(COOP_Q4_LARGE, split(8, 1024))),
        (2048, 2048, 8192, Q4CoopRoute::Tiles(COOP_Q4_LARGE)),
    ] {
        assert_eq!(q4_coop_route(m, n, k), want, "{m} x {n} x {k}");
    }
    let coop = DeviceCaps { coop_matrix_f16: true, precision: Precision::Mixed, ..DeviceCaps::default() };
    let mut g = TestGraph::default();
    let scratch = [g.t(&[1]), g.t(&[1])];
    let w = g.push(Owned::Tensor(ElemType::U8, vec![2048, 4096], true));
    let s = g.push(Owned::Tensor(ElemType::F32, vec![256, 2048], true));
    let (gs, null) = (g.push(Owned::Int(32)), g.push(Owned::Null));
    let (x, out) = (g.t(&[1, 512, 8192]), g.t(&[1, 512, 2048]));
    let args = [x, w, s, gs, null, out];
    let c = crate::plan::Ctx::new(&g, &args).with_scratch(&scratch).with_caps(coop);
    let l = from_name("et_vk.linear_q4gsw.default").expect("registered").lower(&c).expect("lowers");
    let [Step::Scratch { slot: 1, bytes }, Step::Dispatch(part), Step::Dispatch(sum)] = &l.steps[..] else {
        panic!("scratch, partial sums, their sum: {:?}", l.steps)
    };
    assert!(*bytes >= 4 * 4 * 512 * 2048, "{bytes}");
    assert_eq!((part.shader.label(), part.workgroups), ("q4_gemm_coop_large_splitk.f32", [4 * 32, 1, 1]));
    assert_eq!((part.inputs.as_slice(), part.outputs.as_slice()), (&[x, w, s][..], &[scratch[1]][..]));
    // M, N, K, padded N, group, tiles along N, layout, inputs per split, tiles.
    assert_eq!((0..9).map(|i| param_word(part, i)).collect::<Vec<_>>(), [512, 2048, 8192, 2048, 32, 8, 0, 2048, 32]);
    assert_eq!(sum.shader.label(), "gemm_splitk_combine.f32");
    assert_eq!([param_word(sum, 0), param_word(sum, 1), param_word(sum, 2)], [512 * 2048, 2048, 4]);
}

/// The upstream list of delegable op names (`upstream_ops.txt`): `(name,
/// status)` per data line.
fn upstream_ops() -> Vec<(&'static str, &'static str)> {
    include_str!("upstream_ops.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut words = l.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some(name), Some(status), None) => (name, status),
                _ => panic!("upstream_ops.txt: expected `name status`, found {l:?}"),
            }
        })
        .collect()
}

/// Every op name some fixture's delegate graph calls (the `expected`
/// op histograms of `test_data/fixtures/*/manifest.json`), with the first
/// fixture that does.
fn ops_with_goldens() -> std::collections::BTreeMap<String, String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../test_data/fixtures");
    let mut seen = std::collections::BTreeMap::new();
    let mut entries: Vec<_> =
        std::fs::read_dir(&dir).expect("test_data/fixtures").map(|e| e.expect("entry").path()).collect();
    entries.sort();
    for fixture in entries {
        let Ok(bytes) = std::fs::read(fixture.join("manifest.json")) else { continue };
        let manifest: serde_json::Value = serde_json::from_slice(&bytes).expect("manifest.json is JSON");
        let name = fixture.file_name().expect("name").to_string_lossy().into_owned();
        for method in manifest["expected"]["methods"].as_array().expect("expected.methods") {
            for delegate in method["delegates"].as_array().expect("delegates") {
                for op in delegate["ops"].as_object().into_iter().flat_map(|ops| ops.keys()) {
                    seen.entry(op.clone()).or_insert_with(|| name.clone());
                }
            }
        }
    }
    seen
}

/// Rows of the table that no fixture's delegate calls yet, each with why.
/// The test fails when one gains a golden (drop it here) or leaves the table.
const NO_GOLDEN_YET: &[(&str, &str)] = &[
    ("aten.alias_copy.default", "exports remove aliases before partitioning"),
    ("aten.bitwise_xor.Tensor", "the partitioner does not take it"),
    (
        "aten.hardshrink.default",
        "exports decompose it (abs, le.Scalar, where) even when the partitioner asks to keep it",
    ),
    ("aten.hardsigmoid.default", "the partitioner does not take it (exports decompose hardsigmoid)"),
    ("aten.log.default", "reached only from CPU kernel calls (aten::log.out, cpu_leftovers)"),
    ("aten.logical_xor.default", "the partitioner does not take it"),
    ("aten.maximum.default", "reached only from CPU kernel calls (aten::maximum.out)"),
    ("aten.ne.Tensor", "the partitioner does not take it"),
    ("aten.permute.default", "exports turn it into permute_copy even when the partitioner asks to keep it"),
    ("aten.scalar_tensor.default", "reached only from CPU kernel calls (aten::scalar_tensor.out, kept_ops)"),
    (
        "et_vk.adamw_step.default",
        "executorch 1.5.1 cannot export it (functionalization refuses its aliased outputs); \
         crafted-graph goldens in test_data/train (runtime tests it::train)",
    ),
    (
        "et_vk.linear_q4gsw_backward.default",
        "executorch 1.5.1's partitioner refuses its uint8 weight (float-only dtype rule); \
         crafted-graph goldens in test_data/train (runtime tests it::train)",
    ),
    (
        "et_vk.q4gsw_requant.default",
        "executorch 1.5.1's partitioner refuses its uint8 output (float-only dtype rule); \
         crafted-graph goldens in test_data/train (runtime tests it::train)",
    ),
    ("sub", "no fixture subtracts SymInts yet"),
];

/// `upstream_ops.txt` is sorted, each status is known, a `supported` name
/// has a row in the table and a pending one has none (so its status is
/// current).
#[test]
fn upstream_ops_supported_names_have_rows_and_pending_ones_do_not() {
    let ops = upstream_ops();
    for w in ops.windows(2) {
        assert!(w[0].0 < w[1].0, "upstream_ops.txt: {} must sort before {}", w[0].0, w[1].0);
    }
    assert_eq!(ops.len(), 133, "upstream_ops.txt holds the 133 names of its revision");
    for (name, status) in ops {
        match status {
            "supported" => assert!(from_name(name).is_some(), "{name} is marked supported but has no row"),
            "pending-quantized-issue" | "pending-training" | "never-serialized" => {
                assert!(from_name(name).is_none(), "{name} has a row: mark it supported in upstream_ops.txt")
            }
            other => panic!("upstream_ops.txt: {name} has unknown status {other:?}"),
        }
    }
}

/// Every row (but the `etwgpu.*` ones fusion writes, and those listed in
/// [`NO_GOLDEN_YET`]) is called by some fixture's delegate, so a golden
/// test on an exported program covers it; every supported upstream name
/// thereby too, unless listed.
#[test]
fn upstream_ops_and_table_rows_have_golden_fixtures() {
    let seen = ops_with_goldens();
    let missing: Vec<&str> = OPS
        .iter()
        .map(|(_, name)| *name)
        .filter(|name| !name.starts_with("etwgpu.") && !seen.contains_key(*name))
        .filter(|name| !NO_GOLDEN_YET.iter().any(|(n, _)| n == name))
        .collect();
    assert!(missing.is_empty(), "rows without a golden fixture (add one to tools/export): {missing:?}");
    for (name, _) in NO_GOLDEN_YET {
        assert!(from_name(name).is_some(), "NO_GOLDEN_YET lists {name}, which has no row");
        if let Some(fixture) = seen.get(*name) {
            panic!("{name} has a golden in {fixture}: drop it from NO_GOLDEN_YET");
        }
    }
    let unlisted: Vec<&str> = upstream_ops()
        .iter()
        .filter(|(_, s)| *s == "supported")
        .map(|(n, _)| *n)
        .filter(|n| !seen.contains_key(*n))
        .collect();
    for name in unlisted {
        assert!(
            NO_GOLDEN_YET.iter().any(|(n, _)| *n == name),
            "{name} is supported upstream and here, without a golden"
        );
    }
}

/// The README's operator list, rendered from the table: each row under the
/// family (`ops/<family>.rs`) its host rule lives in, as the rule's first
/// `family::` path in `ops.rs` names it.
fn readme_ops_section() -> String {
    let source = include_str!("ops.rs");
    let body = source.split_once("register_ops! {\n").expect("ops.rs has the table").1;
    let body = body.split_once("\n}\n").expect("the table ends").0;
    let mut families: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
    for row in body.lines() {
        let mut parts = row.splitn(3, "=>");
        let (Some(_), Some(name), Some(rule)) = (parts.next(), parts.next(), parts.next()) else {
            panic!("ops.rs: unexpected table line {row:?}")
        };
        let name = name.trim().trim_matches('"');
        // `@unary Op` rows run `elementwise::unary`.
        let rule = if rule.trim_start().starts_with("@unary") { "elementwise::unary" } else { rule };
        let family = rule
            .split("::")
            .next()
            .and_then(|head| head.rsplit(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_')).next())
            .filter(|f| !f.is_empty())
            .unwrap_or_else(|| panic!("ops.rs: no family in the rule of {name}"));
        families.entry(family).or_default().push(name);
    }
    assert_eq!(families.values().map(Vec::len).sum::<usize>(), OPS.len(), "every row is listed");
    let mut text = format!(
        "{} operators in the kernel table (`crates/kernels/src/ops.rs`), by the family of their host rules \
         (`crates/kernels/src/ops/<family>.rs`). `etwgpu.*` rows are the fused ops the graph writes; \
         `inspect` tells which a program uses.\n\n",
        OPS.len()
    );
    for (family, names) in families {
        let list = names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
        text.push_str(&format!("- **{family}** ({}): {list}\n", names.len()));
    }
    text
}

/// README.md's "Supported operators" list is the table's
/// ([`readme_ops_section`]); `ETWGPU_BLESS=1` rewrites it.
#[test]
fn readme_lists_the_operator_table() {
    const BEGIN: &str = "<!-- ops:begin: generated from the kernel table; ETWGPU_BLESS=1 cargo test -p etwgpu-kernels readme rewrites it -->\n";
    const END: &str = "<!-- ops:end -->\n";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&path).expect("README.md");
    let (head, rest) = readme.split_once(BEGIN).expect("README.md has the ops:begin marker");
    let (current, tail) = rest.split_once(END).expect("README.md has the ops:end marker");
    let want = readme_ops_section();
    if std::env::var_os("ETWGPU_BLESS").is_some() {
        std::fs::write(&path, format!("{head}{BEGIN}{want}{END}{tail}")).expect("write README.md");
    } else {
        assert_eq!(
            current, want,
            "README.md's operator list is stale: run ETWGPU_BLESS=1 cargo test -p etwgpu-kernels readme"
        );
    }
}

/// The new float ops shape their outputs and refuse what they cannot run
/// with typed errors naming the argument.
#[test]
fn unfold_grid_sampler_and_grid_priors_shapes_and_errors() {
    let mut g = TestGraph::default();
    let x = g.t(&[2, 3, 5, 7]);
    let (d3, size3, step2) = (g.push(Owned::Int(3)), g.push(Owned::Int(3)), g.push(Owned::Int(2)));
    let out = g.t(&[2, 3, 5, 3, 3]);
    let l = check(&g, "aten.unfold_copy.default", &[x, d3, size3, step2, out]).expect("lowers");
    assert_eq!(out_shape(&l), [2, 3, 5, 3, 3]);
    let size9 = g.push(Owned::Int(9));
    let err = check(&g, "aten.unfold_copy.default", &[x, d3, size9, step2, out]).expect_err("window past the dim");
    assert!(matches!(err, crate::Error::ArgValue { arg_idx: 2, .. }), "{err:?}");
    let step0 = g.push(Owned::Int(0));
    let err = check(&g, "aten.unfold_copy.default", &[x, d3, size3, step0, out]).expect_err("step 0");
    assert!(matches!(err, crate::Error::ArgValue { arg_idx: 3, .. }), "{err:?}");

    let grid = g.t(&[2, 4, 6, 2]);
    let (bilinear, border, corners) = (g.push(Owned::Int(0)), g.push(Owned::Int(1)), g.push(Owned::Bool(true)));
    let sampled = g.t(&[2, 3, 4, 6]);
    let l = check(&g, "aten.grid_sampler_2d.default", &[x, grid, bilinear, border, corners, sampled]).expect("lowers");
    assert_eq!(out_shape(&l), [2, 3, 4, 6]);
    let bicubic = g.push(Owned::Int(2));
    let err =
        check(&g, "aten.grid_sampler_2d.default", &[x, grid, bicubic, border, corners, sampled]).expect_err("bicubic");
    assert!(matches!(err, crate::Error::ArgValue { arg_idx: 2, .. }), "{err:?}");
    let reflection = g.push(Owned::Int(2));
    let err = check(&g, "aten.grid_sampler_2d.default", &[x, grid, bilinear, reflection, corners, sampled])
        .expect_err("reflection");
    assert!(matches!(err, crate::Error::ArgValue { arg_idx: 3, .. }), "{err:?}");
    let other_batch = g.t(&[1, 4, 6, 2]);
    let err = check(&g, "aten.grid_sampler_2d.default", &[x, other_batch, bilinear, border, corners, sampled])
        .expect_err("batch mismatch");
    assert!(matches!(err, crate::Error::Shape { arg_idx: 1, .. }), "{err:?}");

    let (stride, offset) = (g.push(Owned::Int(8)), g.push(Owned::Double(0.5)));
    let priors = g.t(&[35, 2]);
    let l = check(&g, "et_vk.grid_priors.default", &[x, stride, offset, priors]).expect("lowers");
    assert_eq!(out_shape(&l), [35, 2]);
    let Step::Dispatch(d) = &l.steps[0] else { panic!("expected a dispatch") };
    assert!(d.inputs.is_empty(), "grid_priors reads only the input's shape");
}

/// int32 arithmetic picks the integer kernels; true division of ints and a
/// fractional alpha or bound are typed errors, as are casts from dtypes the
/// cast kernel does not read.
#[test]
fn int32_arithmetic_clamp_and_casts_pick_their_kernels_or_refuse() {
    let mut g = TestGraph::default();
    let int = |g: &mut TestGraph, shape: &[u64]| g.push(Owned::Tensor(ElemType::I32, shape.to_vec(), false));
    let (a, b, out) = (int(&mut g, &[3, 4]), int(&mut g, &[4]), int(&mut g, &[3, 4]));
    let two = g.push(Owned::Int(2));
    let l = check(&g, "aten.add.Tensor", &[a, b, two, out]).expect("lowers");
    let Step::Dispatch(d) = &l.steps[0] else { panic!("expected a dispatch") };
    assert_eq!(d.shader, crate::ShaderId::BinaryI32.into());
    let half = g.push(Owned::Double(0.5));
    let err = check(&g, "aten.add.Tensor", &[a, b, half, out]).expect_err("fractional alpha");
    assert!(matches!(err, crate::Error::ArgValue { arg_idx: 2, .. }), "{err:?}");
    let err = check(&g, "aten.div.Tensor", &[a, b, out]).expect_err("true division of ints");
    assert!(matches!(err, crate::Error::DType { arg_idx: 0, .. }), "{err:?}");
    let null = g.push(Owned::Null);
    let l = check(&g, "aten.clamp.default", &[a, null, two, out]).expect("lowers");
    let Step::Dispatch(d) = &l.steps[0] else { panic!("expected a dispatch") };
    assert_eq!(d.shader, crate::ShaderId::ClampIntI32.into());
    let err = check(&g, "aten.clamp.default", &[a, half, two, out]).expect_err("fractional bound");
    assert!(matches!(err, crate::Error::ArgValue { arg_idx: 1, .. }), "{err:?}");

    let x = g.t(&[3, 4]);
    let to_bool = g.push(Owned::Tensor(ElemType::Bool, vec![3, 4], false));
    let cast = |g: &TestGraph, src: Vid, dst: Vid| {
        check(g, "dim_order_ops._to_dim_order_copy.default", &[src, null, null, null, null, null, null, dst])
    };
    let l = cast(&g, x, to_bool).expect("float to bool");
    let Step::Dispatch(d) = &l.steps[0] else { panic!("expected a dispatch") };
    assert_eq!(d.shader, crate::ShaderId::CastI32.into());
    let bytes = g.push(Owned::Tensor(ElemType::U8, vec![3, 4], false));
    assert!(matches!(cast(&g, bytes, x), Err(crate::Error::DType { arg_idx: 0, .. })));
    assert!(matches!(cast(&g, x, bytes), Err(crate::Error::DType { arg_idx: 7, .. })));
}

/// The training ops' rules: `adamw_step` writes its parameter and moments
/// in place (bound as outputs, aliased where the output list names other
/// tensors), `fused_ce` dispatches the gradient rows then the loss, the
/// 4-bit ones take `linear_q4gsw`'s packing.
#[test]
fn training_op_rules_bind_in_place_state_and_infer_shapes() {
    use crate::ops::OpId;
    let mut g = TestGraph::default();
    let [p, m, v, grad] = [g.t(&[2, 3]), g.t(&[2, 3]), g.t(&[6]), g.t(&[3, 2])];
    let scalars: Vec<Vid> = [1e-2, 0.9, 0.999, 1e-8, 0.1, 0.1, 0.001].map(|x| g.push(Owned::Double(x))).to_vec();
    let args = |g: &mut TestGraph, outs: Vec<Vid>| {
        let list = g.push(Owned::List(outs));
        let mut a = vec![p, m, v, grad];
        a.extend(&scalars);
        a.push(list);
        a
    };
    let in_place = args(&mut g, vec![p, m, v]);
    let l = check(&g, "et_vk.adamw_step.default", &in_place).expect("lowers");
    let [Step::Dispatch(d)] = &l.steps[..] else { panic!("expected one dispatch: {:?}", l.steps) };
    assert_eq!((d.inputs.as_slice(), d.outputs.as_slice()), (&[grad][..], &[p, m, v][..]));
    assert_eq!(OpId::AdamwStep.mutated_args(), [0, 1, 2]);
    let others = [g.t(&[2, 3]), g.t(&[2, 3]), g.t(&[6])];
    let aliased = args(&mut g, others.to_vec());
    let l = check(&g, "et_vk.adamw_step.default", &aliased).expect("lowers");
    let aliases: Vec<(Vid, Vid)> = l
        .steps
        .iter()
        .filter_map(|s| if let Step::Alias { out, src } = s { Some((*out, *src)) } else { None })
        .collect();
    assert_eq!(aliases, [(others[0], p), (others[1], m), (others[2], v)]);

    let logits = g.t(&[5, 300]);
    let labels = g.push(Owned::Tensor(ElemType::I32, vec![5], false));
    let nv = g.push(Owned::Double(4.0));
    let (loss, dl) = (g.t(&[]), g.t(&[5, 300]));
    let list = g.push(Owned::List(vec![loss, dl]));
    let l = check(&g, "et_vk.fused_ce.default", &[logits, labels, nv, list]).expect("lowers");
    let [Step::Dispatch(rows), Step::Dispatch(total)] = &l.steps[..] else { panic!("expected two dispatches") };
    assert_eq!((rows.outputs.as_slice(), rows.workgroups), (&[dl][..], [5, 1, 1]));
    assert_eq!((total.outputs.as_slice(), total.workgroups), (&[loss][..], [1, 1, 1]));
    assert_eq!(l.shapes, [(loss, vec![]), (dl, vec![5, 300])]);

    let (d, x, dw) = (g.t(&[2, 4, 6]), g.t(&[8, 5]), g.t(&[6, 5]));
    assert_eq!(out_shape(&check(&g, "et_vk.linear_dW.default", &[d, x, dw]).expect("lowers")), [6, 5]);

    let w = g.push(Owned::Tensor(ElemType::U8, vec![6, 20], true));
    let s = g.push(Owned::Tensor(ElemType::F32, vec![3, 8], true));
    let gs = g.push(Owned::Int(16));
    let dx = g.t(&[2, 4, 40]);
    let l = check(&g, "et_vk.linear_q4gsw_backward.default", &[d, w, s, gs, dx]).expect("lowers");
    assert_eq!(out_shape(&l), [2, 4, 40]);
    let latent = g.t(&[6, 39]);
    let packed = g.push(Owned::Tensor(ElemType::U8, vec![6, 20], false));
    let l = check(&g, "et_vk.q4gsw_requant.default", &[latent, s, gs, packed]).expect("lowers");
    assert_eq!(out_shape(&l), [6, 20]);
    let [Step::Dispatch(rq)] = &l.steps[..] else { panic!("expected one dispatch") };
    assert_eq!(rq.workgroups, [1, 1, 1], "30 words of 4 bytes, one workgroup");
    let bad_gs = g.push(Owned::Int(0));
    let err = check(&g, "et_vk.q4gsw_requant.default", &[latent, s, bad_gs, packed]).expect_err("group 0");
    assert!(matches!(err, crate::Error::ArgValue { arg_idx: 2, name: "group_size", .. }), "{err:?}");
}

/// The device argmax's two grids: chunks of 4096 by rows, then one
/// workgroup a row; rows and chunks past one grid dimension are typed
/// errors, as is an empty row.
#[test]
fn argmax_rows_grids_and_limits() {
    let argmax = |shape: &[u64]| {
        let x = TensorInfo { id: Vid(0), dtype: ElemType::F32, shape, is_constant: false, q4_word_major: false };
        crate::ops::reduce::argmax_last_dim(&x)
    };
    let a = argmax(&[1, 2, 9000]).expect("lowers");
    assert_eq!((a.stages[0].1, a.stages[1].1), ([3, 2, 1], [1, 2, 1]));
    assert_eq!(a.partial_bytes, 2 * 3 * 8);
    assert!(argmax(&[65_536, 8]).is_err(), "too many rows");
    assert!(argmax(&[1, 4096 * 65_536]).is_err(), "too many chunks");
    assert!(argmax(&[1, 65_535 * 4096]).is_ok(), "the most chunks");
    assert!(argmax(&[3, 0]).is_err(), "an empty row");
}
