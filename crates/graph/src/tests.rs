//! Unit tests of the memory planner on hand-made chains.

use std::collections::{BTreeMap, BTreeSet};

use etwgpu_kernels::{Dispatch, ShaderId, Step, Vid};

use crate::memory::{ALIGN, MemoryPlan, Placement, plan, plan_ops};

fn dispatch(inputs: &[u32], outputs: &[u32]) -> Step {
    Step::Dispatch(Dispatch {
        shader: ShaderId::ALL[0].into(),
        entry: "main",
        inputs: inputs.iter().map(|&v| Vid(v)).collect(),
        outputs: outputs.iter().map(|&v| Vid(v)).collect(),
        params: Vec::new(),
        workgroups: [1, 1, 1],
    })
}

fn sizes(pairs: &[(u32, u64)]) -> BTreeMap<Vid, u64> {
    pairs.iter().map(|&(v, b)| (Vid(v), b)).collect()
}

fn pins(vs: &[u32]) -> BTreeSet<Vid> {
    vs.iter().map(|&v| Vid(v)).collect()
}

/// No two arena classes whose lifetimes overlap share a byte.
fn check_no_overlap(p: &MemoryPlan) {
    let arena: Vec<_> = p
        .classes
        .values()
        .filter_map(|c| match c.placement {
            Placement::Arena { arena, offset } => Some((arena, offset, c.bytes, c.live, c.root)),
            Placement::Dedicated => None,
        })
        .collect();
    for (i, a) in arena.iter().enumerate() {
        assert_eq!(a.1 % ALIGN, 0, "offset {} of {:?} is not aligned", a.1, a.4);
        assert!(a.1 + a.2 <= p.arenas[a.0 as usize]);
        for b in &arena[i + 1..] {
            let live_overlap = a.3.0 <= b.3.1 && b.3.0 <= a.3.1;
            let bytes_overlap = a.1 < b.1 + b.2 && b.1 < a.1 + a.2;
            assert!(a.0 != b.0 || !(live_overlap && bytes_overlap), "{:?} and {:?} overlap", a, b);
        }
    }
    assert_eq!(p.arena_bytes, p.arenas.iter().sum::<u64>());
    assert!(p.lower_bound_bytes <= p.planned_bytes());
}

#[test]
fn a_chain_reuses_dead_intermediates() {
    // x -> t1 -> t2 -> t3 -> y: t1 and t3 never live together.
    let steps = [dispatch(&[0], &[1]), dispatch(&[1], &[2]), dispatch(&[2], &[3]), dispatch(&[3], &[4])];
    let p = plan(&steps, &sizes(&[(0, 1024), (1, 1024), (2, 1024), (3, 1024), (4, 1024)]), &pins(&[0, 4]));
    check_no_overlap(&p);
    assert_eq!(p.placement(Vid(1)), p.placement(Vid(3)));
    assert_ne!(p.placement(Vid(1)), p.placement(Vid(2)));
    assert_eq!(p.arena_bytes, 2048);
    assert_eq!(p.dedicated_bytes, 2048);
    assert_eq!(p.naive_bytes, 5 * 1024);
    assert_eq!(p.lower_bound_bytes, 4096);
    assert_eq!(p.placement(Vid(0)), Some(Placement::Dedicated));
}

/// An op of two steps (a norm `t1 -> n`, a linear `n -> t2`) that lowers
/// to one step at other shapes (`t1 -> t2`): planned step by step, `t1`
/// and `t2` share bytes and the one step reads and writes them; planned as
/// one op, the plan fits both lowerings.
#[test]
fn an_ops_steps_are_planned_as_one() {
    // x -> t1; op 1: t1 -> n, n -> t2; t2 -> y.
    let steps = [dispatch(&[0], &[1]), dispatch(&[1], &[2]), dispatch(&[2], &[3]), dispatch(&[3], &[4])];
    let collapsed = [dispatch(&[0], &[1]), dispatch(&[1], &[3]), dispatch(&[3], &[4])];
    let bytes = sizes(&[(0, 1024), (1, 1024), (2, 1024), (3, 1024), (4, 1024)]);
    let by_step = plan(&steps, &bytes, &pins(&[0, 4]));
    check_no_overlap(&by_step);
    assert_eq!(by_step.placement(Vid(1)), by_step.placement(Vid(3)));
    assert!(!by_step.fits(&collapsed));
    let by_op = plan_ops(&steps, &[0, 1, 1, 2], &bytes, &pins(&[0, 4]));
    check_no_overlap(&by_op);
    assert_eq!(by_op.classes[&Vid(1)].live, (0, 2));
    assert_eq!(by_op.classes[&Vid(3)].live, (1, 3));
    assert!(by_op.fits(&steps) && by_op.fits(&collapsed));
}

#[test]
fn views_share_storage_and_extend_its_life() {
    // t1 = f(x); v = view(t1); t2 = g(x); y = h(v, t2): t1 must live to the end.
    let steps =
        [dispatch(&[0], &[1]), Step::Alias { out: Vid(2), src: Vid(1) }, dispatch(&[0], &[3]), dispatch(&[2, 3], &[4])];
    let p = plan(&steps, &sizes(&[(0, 512), (1, 512), (2, 512), (3, 512), (4, 512)]), &pins(&[0, 4]));
    check_no_overlap(&p);
    assert_eq!(p.class_of[&Vid(2)], Vid(1));
    assert_eq!(p.classes[&Vid(1)].live, (0, 3));
    assert_ne!(p.placement(Vid(2)), p.placement(Vid(3)));
    // The view costs nothing: two arena tensors live at once, not three.
    assert_eq!(p.arena_bytes, 1024);
}

#[test]
fn a_view_of_a_pinned_tensor_is_pinned() {
    let steps = [Step::Alias { out: Vid(1), src: Vid(0) }, dispatch(&[1], &[2])];
    let p = plan(&steps, &sizes(&[(0, 64), (1, 64), (2, 64)]), &pins(&[0, 2]));
    assert_eq!(p.placement(Vid(1)), Some(Placement::Dedicated));
    assert_eq!(p.arena_bytes, 0);
}

#[test]
fn prepack_outputs_keep_their_own_buffer() {
    let steps = [Step::Prepack { out: Vid(1), src: Vid(0) }, dispatch(&[1, 2], &[3])];
    let p = plan(&steps, &sizes(&[(1, 16), (2, 16), (3, 16)]), &pins(&[2, 3]));
    assert_eq!(p.placement(Vid(1)), Some(Placement::Dedicated));
}

/// A deterministic generator (xorshift) for random chains.
struct Rng(u64);
impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Random DAG-shaped chains: each step reads one or two earlier tensors
/// (sometimes through a view) and writes a new one.
fn random_chain(rng: &mut Rng, n_steps: u32) -> (Vec<Step>, BTreeMap<Vid, u64>, BTreeSet<Vid>) {
    let mut steps = Vec::new();
    let mut sizes = BTreeMap::new();
    sizes.insert(Vid(0), 4096);
    let mut next: u32 = 1;
    for _ in 0..n_steps {
        let a = Vid(rng.next(u64::from(next)) as u32);
        let b = Vid(next.saturating_sub(1 + rng.next(3) as u32));
        let out = Vid(next);
        next += 1;
        sizes.insert(out, 256 * (1 + rng.next(64)));
        if rng.next(5) == 0 {
            let view = Vid(next);
            next += 1;
            sizes.insert(view, sizes[&a]);
            steps.push(Step::Alias { out: view, src: a });
            steps.push(dispatch(&[view.0, b.0], &[out.0]));
        } else {
            steps.push(dispatch(&[a.0, b.0], &[out.0]));
        }
    }
    let pinned = pins(&[0, next - 1]);
    (steps, sizes, pinned)
}

#[test]
fn random_chains_never_overlap_live_tensors_and_stay_near_the_bound() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut worst: f64 = 1.0;
    for _ in 0..200 {
        let n = 5 + rng.next(60) as u32;
        let (steps, sizes, pinned) = random_chain(&mut rng, n);
        let p = plan(&steps, &sizes, &pinned);
        check_no_overlap(&p);
        assert!(p.planned_bytes() <= p.naive_bytes);
        worst = worst.max(p.planned_bytes() as f64 / p.lower_bound_bytes as f64);
    }
    // Greedy-by-size is not optimal on adversarial DAGs; this records how
    // far from the bound it strays on random ones. The bound ignores the
    // arena split (no dispatch reads and writes one arena), which costs
    // most on these chains, where every step reads two random earlier
    // tensors (1.30 with one arena, 1.47 with the split); the exported
    // fixtures stay under 1.05 (`etwgpu inspect --plan` snapshots).
    eprintln!("worst planned/lower-bound ratio over 200 random chains: {worst:.3}");
    assert!(worst < 1.5, "worst planned/lower-bound ratio {worst}");
}

#[test]
fn plans_are_deterministic() {
    let mut rng = Rng(7);
    let (steps, sizes, pinned) = random_chain(&mut rng, 50);
    assert_eq!(plan(&steps, &sizes, &pinned), plan(&steps, &sizes, &pinned));
}

/// Tiny tensors whose padding to `ALIGN` costs more than sharing saves keep
/// their own buffers: a plan never allocates more than the naive one.
#[test]
fn sharing_that_saves_nothing_is_skipped() {
    let steps = [dispatch(&[0], &[1]), dispatch(&[1], &[2]), dispatch(&[2], &[3])];
    let p = plan(&steps, &sizes(&[(0, 16), (1, 16), (2, 16), (3, 16)]), &pins(&[0, 3]));
    assert_eq!(p.arena_bytes, 0);
    assert!(p.classes.values().all(|c| c.placement == Placement::Dedicated));
    assert_eq!(p.planned_bytes(), p.naive_bytes);
    assert_eq!(p.lower_bound_bytes, p.planned_bytes());
}

/// No dispatch reads one arena and writes the same one (WebGPU tracks
/// buffer usage per whole buffer), and a plan fits its own chain.
#[test]
fn no_dispatch_reads_and_writes_one_arena() {
    // x -> a -> b -> c -> y, plus d = f(a, b): a, b, c, d in arenas.
    let steps = [
        dispatch(&[0], &[1]),
        dispatch(&[1], &[2]),
        dispatch(&[1, 2], &[5]),
        dispatch(&[2, 5], &[3]),
        dispatch(&[3], &[4]),
    ];
    let p = plan(&steps, &sizes(&[(0, 1024), (1, 1024), (2, 1024), (3, 1024), (4, 1024), (5, 1024)]), &pins(&[0, 4]));
    check_no_overlap(&p);
    assert!(p.arenas.len() >= 2);
    assert!(p.fits(&steps));
    for s in &steps {
        let Step::Dispatch(d) = s else { continue };
        let arena = |v: &Vid| match p.placement(*v) {
            Some(Placement::Arena { arena, .. }) => Some(arena),
            _ => None,
        };
        let reads: Vec<u32> = d.inputs.iter().filter_map(arena).collect();
        assert!(d.outputs.iter().filter_map(arena).all(|a| !reads.contains(&a)));
    }
    // A chain that reads and writes one arena, or touches an unplanned
    // tensor, does not fit.
    let (Some(Placement::Arena { arena: a1, .. }), Some(Placement::Arena { arena: a3, .. })) =
        (p.placement(Vid(1)), p.placement(Vid(3)))
    else {
        panic!("a and c are in arenas")
    };
    if a1 == a3 {
        assert!(!p.fits(&[dispatch(&[0], &[1]), dispatch(&[1], &[3])]));
    }
    assert!(!p.fits(&[dispatch(&[0], &[9])]));
}

/// `q + q -> sdpa_with_kv_cache -> (+ itself) twice`, queries of up to `s_max`
/// rows, caches of 1000 rows, 8 query and 2 kv heads of 64 dims.
fn sdpa_chain(s_max: u64) -> etwgpu_format::VkGraph {
    sdpa_chain_heads(s_max, 8, 2, 1000)
}

/// [`sdpa_chain`] with `hq` query and `hkv` kv heads and caches of `rows`.
fn sdpa_chain_heads(s_max: u64, hq: u64, hkv: u64, rows: u64) -> etwgpu_format::VkGraph {
    use etwgpu_format::DType;
    use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
    let mut g = GraphBuilder::new();
    let q = g.tensor(DType::F32, &[1, s_max, hq, 64]);
    let q2 = g.tensor(DType::F32, &[1, s_max, hq, 64]);
    let k = g.tensor(DType::F32, &[1, s_max, hkv, 64]);
    let v = g.tensor(DType::F32, &[1, s_max, hkv, 64]);
    let zeros = vec![0u8; (rows * hkv * 64 * 4) as usize];
    let k_cache = g.constant(DType::F32, &[1, rows, hkv, 64], &zeros);
    let v_cache = g.constant(DType::F32, &[1, rows, hkv, 64], &zeros);
    let (zero, one, causal, null) = (g.int(0), g.int(1), g.bool(true), g.null());
    let pos = g.sym_int();
    let attn = g.tensor(DType::F32, &[1, s_max, hq, 64]);
    let twice = g.tensor(DType::F32, &[1, s_max, hq, 64]);
    let out = g.tensor(DType::F32, &[1, s_max, hq, 64]);
    g.op("aten.add.Tensor", &[q, q, one, q2])
        .op("sdpa_with_kv_cache.default", &[q2, k, v, k_cache, v_cache, pos, one, null, zero, causal, null, attn])
        .op("aten.add.Tensor", &[attn, attn, one, twice])
        .op("aten.add.Tensor", &[twice, twice, one, out]);
    g.inputs(&[q, k, v, pos]).outputs(&[out]);
    let program = etwgpu_format::Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("parses");
    program.methods[0].vulkan_delegates().next().expect("a delegate").2.clone()
}

/// Scratch: appended and sized at the maximum shapes, pinned by the plan,
/// and every decode position (split-KV attention into the scratch) fits
/// the plan made at the maximum shapes, with the device's caps: the
/// subgroup route plans more splits than the workgroup one (on the H200,
/// run ad, a scratch sized with the default caps was too small for it).
#[test]
fn scratch_is_sized_at_load_and_every_decode_position_fits() {
    use etwgpu_kernels::{DeviceCaps, SubgroupSizes};
    let subgroups = |n| DeviceCaps { subgroups: Some(SubgroupSizes { min: n, max: n }), ..DeviceCaps::default() };
    // 8/2 heads, 1000 rows: the workgroup plan's scratch is the larger;
    // 32/8 heads (the Llama-3.2-1B's), 4096 rows: the subgroup plan's.
    for (hq, hkv, rows) in [(8, 2, 1000), (32, 8, 4096)] {
        for caps in [DeviceCaps::default(), subgroups(32), subgroups(8)] {
            scratch_fits_every_decode_position(caps, hq, hkv, rows);
        }
    }
}

fn scratch_fits_every_decode_position(caps: etwgpu_kernels::DeviceCaps, hq: u64, hkv: u64, rows: u64) {
    use crate::lower::{InputRef, Lowerer, plan_graph};
    let mut graph = sdpa_chain_heads(8, hq, hkv, rows);
    let n_values = graph.values.len();
    let lowerer = Lowerer::with_scratch_for(&mut graph, 0, caps).expect("lowers");
    assert_eq!(graph.values.len(), n_values + etwgpu_kernels::plan::N_SCRATCH);
    let scratch = lowerer.scratch();
    assert_eq!(scratch, [Vid(n_values as u32)]);
    let max = lowerer.lower_at_max(&graph, 0).expect("lowers");
    let plan = plan_graph(&graph, &max.steps, &max.nodes, &scratch).expect("plans");
    assert_eq!(plan.placement(scratch[0]), Some(Placement::Dedicated));
    assert!(!plan.arenas.is_empty(), "the adds' intermediates share an arena");
    let touches_scratch =
        |steps: &[Step]| steps.iter().any(|s| matches!(s, Step::Dispatch(d) if d.outputs.contains(&scratch[0])));
    assert!(!touches_scratch(&max.steps), "8 rows run the one-pass kernel");
    for (n, pos) in [(1, 0), (1, 127), (1, 500), (4, 700), (1, rows - 1), (4, rows - 4)] {
        let q = [1, n, hq, 64];
        let kv = [1, n, hkv, 64];
        let inputs = [
            InputRef { value: graph.input_ids[0], shape: Some(&q) },
            InputRef { value: graph.input_ids[1], shape: Some(&kv) },
            InputRef { value: graph.input_ids[2], shape: Some(&kv) },
            InputRef { value: graph.input_ids[3], shape: None },
        ];
        let l = lowerer.lower(&graph, &inputs, |_, _| pos as i64).expect("lowers");
        assert!(touches_scratch(&l.steps), "{n} rows at {pos}: split-KV attention");
        let subgroup_route =
            l.steps.iter().any(|s| matches!(s, Step::Dispatch(d) if d.shader.label().starts_with("sdpa_split_sg")));
        assert_eq!(subgroup_route, caps.subgroups.is_some(), "{n} rows at {pos}: the route of the lowerer's caps");
        assert!(plan.fits(&l.steps), "{n} rows at {pos}: fits the plan at the maximum shapes");
    }
    // No op declares scratch: the graph is left as it is.
    let mut plain = sdpa_chain_heads(8, hq, hkv, rows);
    plain.chain.remove(1);
    let lowerer = Lowerer::with_scratch(&mut plain, 0).expect("lowers");
    assert_eq!((plain.values.len(), lowerer.scratch()), (n_values, Vec::new()));
}

/// Re-lowering at new inputs re-runs only the rules that read what
/// changed, and ends where lowering from scratch does: a new decode
/// position re-runs the attention op alone; new row counts reach the ops
/// that see them.
#[test]
fn relowering_reruns_only_what_changed_and_matches_a_fresh_lowering() {
    use crate::lower::{InputRef, Lowerer};
    let mut graph = sdpa_chain(8);
    let lowerer = Lowerer::with_scratch(&mut graph, 0).expect("lowers");
    let shapes = |rows: u64| [vec![1, rows, 8, 64], vec![1, rows, 2, 64], vec![1, rows, 2, 64]];
    fn inputs<'a>(graph: &etwgpu_format::VkGraph, s: &'a [Vec<u64>; 3]) -> Vec<InputRef<'a>> {
        let mut ins: Vec<InputRef<'a>> =
            s.iter().zip(&graph.input_ids).map(|(s, &value)| InputRef { value, shape: Some(s) }).collect();
        ins.push(InputRef { value: graph.input_ids[3], shape: None });
        ins
    }
    let first = shapes(8);
    let mut live = lowerer.lower_live(&graph, &inputs(&graph, &first), |_, _| 0).expect("lowers");
    assert_eq!(live.rule_calls(), graph.chain.len() as u64);
    let sdpa = graph.chain.iter().position(|c| c.name == "sdpa_with_kv_cache.default").expect("has attention");
    let all: Vec<usize> = (0..graph.chain.len()).collect();
    for (rows, pos, reruns) in [
        (8, 0, vec![]),
        (8, 3, vec![sdpa]),
        (1, 8, all.clone()),
        (1, 9, vec![sdpa]),
        (1, 200, vec![sdpa]),
        (4, 300, all),
    ] {
        let s = shapes(rows);
        let r = lowerer.relower(&graph, &mut live, &inputs(&graph, &s), |_, _| pos).expect("re-lowers");
        assert_eq!(r.nodes, reruns, "{rows} rows at {pos}");
        let fresh = lowerer.lower(&graph, &inputs(&graph, &s), |_, _| pos).expect("lowers");
        let again = live.flatten();
        assert_eq!(
            (again.steps, again.nodes, again.shapes),
            (fresh.steps, fresh.nodes, fresh.shapes),
            "{rows} rows at {pos}"
        );
    }
}

/// A method of KernelCalls on float32 `[2, 3]` tensors (values: 0 the
/// input, 1 the Int -1, 2 None, 3 and 4 tensors; 4 the output), as
/// exports leave ops outside the delegate: `calls` are (operator, args),
/// the return value repeating `out` last.
fn kernel_calls(calls: &[((&str, &str), Vec<i32>)]) -> etwgpu_format::Program {
    use etwgpu_format::writer::{InstructionSpec, MethodSpec, PlanValueSpec, ProgramBuilder};
    let f32_2x3 = || PlanValueSpec::Tensor {
        scalar_type: etwgpu_format::DType::F32.to_scalar_type(),
        sizes: vec![2, 3],
        dynamism: 0,
        data_buffer_idx: 0,
    };
    let m = MethodSpec {
        name: "forward".into(),
        values: vec![f32_2x3(), PlanValueSpec::Int(-1), PlanValueSpec::Null, f32_2x3(), f32_2x3()],
        inputs: vec![0],
        outputs: vec![4],
        operators: calls.iter().map(|((n, o), _)| (n.to_string(), o.to_string())).collect(),
        delegates: Vec::new(),
        instructions: calls
            .iter()
            .enumerate()
            .map(|(i, (_, args))| InstructionSpec::Kernel { op_index: i as i32, args: args.clone() })
            .chain([InstructionSpec::Free(0)])
            .collect(),
    };
    let b = ProgramBuilder { methods: vec![m], ..ProgramBuilder::default() };
    etwgpu_format::Program::from_bytes(b.to_bytes()).expect("crafted program parses")
}

#[test]
fn kernel_calls_are_routed_without_a_gpu() {
    use crate::route::{Route, kernel_route};
    let route = |op, args| kernel_route(&kernel_calls(&[(op, args)]).methods[0], 0);
    // In the kernel table: a one-op GPU graph.
    assert_eq!(route(("aten::log", "out"), vec![0, 4, 4]), Route::Gpu("aten.log.default".into()));
    // Not in the table, but in the CPU fallback.
    assert_eq!(route(("aten::cumsum", "out"), vec![0, 1, 2, 4, 4]), Route::Cpu);
    // Neither.
    assert_eq!(route(("aten::frobnicate", "out"), vec![0, 4, 4]), Route::Unsupported);
    // Not a KernelCall.
    assert_eq!(kernel_route(&kernel_calls(&[(("aten::log", "out"), vec![0, 4, 4])]).methods[0], 1), Route::Unsupported);
}

#[test]
fn method_plan_keeps_gpu_to_gpu_values_on_the_device() {
    use crate::method_plan::{DeviceLink, MethodStep, Unrunnable, plan_method};
    let log = ("aten::log", "out");
    // log(x) -> %3 -> log -> %4: %3 stays on the device, %4 (the output) does not.
    let p = kernel_calls(&[(log, vec![0, 3, 3]), (log, vec![3, 4, 4])]);
    let plan = plan_method(&p.methods[0]);
    assert!(matches!(
        &plan.steps[..],
        [MethodStep::GpuKernel { .. }, MethodStep::GpuKernel { .. }, MethodStep::Free(0)]
    ));
    assert_eq!(plan.on_device, [DeviceLink { producer: 0, output: 0, consumer: 1, input: 0 }]);
    // A CPU call reads %3: it is read back.
    let p = kernel_calls(&[(log, vec![0, 3, 3]), (("aten::cumsum", "out"), vec![3, 1, 2, 4, 4])]);
    let plan = plan_method(&p.methods[0]);
    assert!(matches!(&plan.steps[1], MethodStep::CpuCall { arity: 4, .. }));
    assert!(plan.on_device.is_empty());
    // An op nothing runs is a step that says so.
    let plan = plan_method(&kernel_calls(&[(("aten::frobnicate", "out"), vec![0, 4, 4])]).methods[0]);
    assert!(matches!(&plan.steps[0], MethodStep::Unrunnable(Unrunnable::NoKernel(op)) if op == "aten::frobnicate.out"));
}

/// A delegate of two 4-bit linears on `x [1, 64]` (groups of 32): `w_a`
/// used by the first only, `w_b` by the second and, if `share`, also as
/// the weight of a 4-bit embedding (a use the fast 4-bit kernels do not
/// own). `w_a` carries the marker value in the file, as a hostile file
/// could.
fn q4_layout_graph(share: bool) -> etwgpu_format::VkGraph {
    use etwgpu_format::DType;
    use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, 64]);
    let w = vec![0x88u8; 16 * 32];
    let s = vec![0u8; 2 * 16 * 4];
    let w_a = g.constant(DType::U8, &[16, 32], &w);
    let w_b = g.constant(DType::U8, &[16, 32], &w);
    let s_a = g.constant(DType::F32, &[2, 16], &s);
    let (gs, null) = (g.int(32), g.null());
    let (h, y) = (g.tensor(DType::F32, &[1, 16]), g.tensor(DType::F32, &[1, 16]));
    g.op("et_vk.linear_q4gsw.default", &[x, w_a, s_a, gs, null, h]);
    g.op("et_vk.linear_q4gsw.default", &[x, w_b, s_a, gs, null, y]);
    let mut outs = vec![h, y];
    if share {
        let idx = g.tensor(DType::I32, &[1]);
        let (lin, e) = (g.bool(true), g.tensor(DType::F32, &[1, 64]));
        g.op("et_vk.embedding_q4gsw.default", &[w_b, s_a, gs, idx, lin, e]);
        outs.push(e);
    }
    g.inputs(&[x]).outputs(&outs);
    let program = etwgpu_format::Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("parses");
    let mut graph = program.methods[0].vulkan_delegates().next().expect("a delegate").2.clone();
    let etwgpu_format::VkValue::Tensor(t) = &mut graph.values[1] else { panic!("w_a is value 1") };
    t.memory_layout = crate::layout::Q4_WORD_MAJOR;
    graph
}

fn layout_of(graph: &etwgpu_format::VkGraph, id: u32) -> u8 {
    match &graph.values[id as usize] {
        etwgpu_format::VkValue::Tensor(t) => t.memory_layout,
        _ => panic!("not a tensor"),
    }
}

/// The layout pass marks a 4-bit weight word-major only where the fast
/// 4-bit kernels are its only readers, and a file's own marker means
/// nothing.
#[test]
fn q4_weights_are_word_major_only_where_the_fast_kernels_own_them() {
    use crate::layout::{Q4_WORD_MAJOR, q4_word_major};
    let mut alone = q4_layout_graph(false);
    assert_eq!(q4_word_major(&mut alone), 2);
    assert_eq!((layout_of(&alone, 1), layout_of(&alone, 2)), (Q4_WORD_MAJOR, Q4_WORD_MAJOR));
    let mut shared = q4_layout_graph(true);
    assert_eq!(q4_word_major(&mut shared), 1, "the embedding's weight stays row-major");
    assert_eq!((layout_of(&shared, 1), layout_of(&shared, 2)), (Q4_WORD_MAJOR, 255));
    // Without a fast linear reading it, the file's marker is cleared.
    let mut file = q4_layout_graph(false);
    file.chain.clear();
    assert_eq!(q4_word_major(&mut file), 0);
    assert_eq!(layout_of(&file, 1), 255);
}

/// Word `w` of row `n` lands at word `w * N + n`.
#[test]
fn word_major_bytes_interleave_the_rows_words() {
    let (n, row) = (3usize, 32usize);
    let bytes: Vec<u8> = (0..n * row).map(|i| i as u8).collect();
    let out = crate::layout::to_q4_word_major(&bytes, n, row);
    for r in 0..n {
        for w in 0..row / 16 {
            assert_eq!(out[(w * n + r) * 16..][..16], bytes[r * row + w * 16..][..16], "row {r} word {w}");
        }
    }
}

/// A decode step runs no host rule: once a step changed only the position
/// (and built its affine model), every later position inside the model's
/// range is patched without a rule call and equals a fresh lowering, up to
/// the last position the cache holds; a position past it falls back to
/// the rules and gets their typed error.
#[test]
fn decode_positions_are_patched_without_host_rules() {
    use crate::lower::{InputRef, LowerError, Lowerer};
    let mut graph = sdpa_chain(8);
    let lowerer = Lowerer::with_scratch(&mut graph, 0).expect("lowers");
    let s = [vec![1, 1, 8, 64], vec![1, 1, 2, 64], vec![1, 1, 2, 64]];
    let mut inputs: Vec<InputRef<'_>> =
        s.iter().zip(&graph.input_ids).map(|(s, &value)| InputRef { value, shape: Some(s) }).collect();
    inputs.push(InputRef { value: graph.input_ids[3], shape: None });
    let mut live = lowerer.lower_live(&graph, &inputs, |_, _| 5).expect("lowers");
    lowerer.relower(&graph, &mut live, &inputs, |_, _| 6).expect("re-lowers and models the position");
    let calls = live.rule_calls();
    for pos in [7, 8, 127, 128, 129, 500, 6, 0, 998, 999] {
        lowerer.relower(&graph, &mut live, &inputs, |_, _| pos).expect("patches");
        assert_eq!(live.rule_calls(), calls, "position {pos} ran a host rule");
        let fresh = lowerer.lower(&graph, &inputs, |_, _| pos).expect("lowers");
        let again = live.flatten();
        assert_eq!((again.steps, again.shapes), (fresh.steps, fresh.shapes), "position {pos}");
    }
    // 1000 + 1 rows do not fit the cache of 1000.
    let past = lowerer.relower(&graph, &mut live, &inputs, |_, _| 1000);
    assert!(matches!(past, Err(LowerError::Op { .. })), "{past:?}");
    assert!(live.rule_calls() > calls);
}

/// The split pass cuts a float linear past the limit into row chunks (a
/// multiple of 64 rows, the last ragged) concatenated along the last dim,
/// each chunk a narrower range of the same file bytes; a 4-bit linear's
/// scales by columns, the last chunk keeping the padding; an embedding
/// into per-chunk lookups summed; and leaves alone what fits.
#[test]
fn split_cuts_tables_past_the_limit_into_row_chunks() {
    use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
    use etwgpu_format::{DType, VkValue};
    let (n, k) = (300u64, 8u64);
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[1, k]);
    let w = g.constant(DType::F32, &[n, k], &vec![7; (n * k * 4) as usize]);
    let none = g.null();
    let y = g.tensor(DType::F32, &[1, n]);
    let qw = g.constant(DType::U8, &[n, k / 2], &vec![1; (n * k / 2) as usize]);
    let qs = g.constant(DType::F32, &[1, 304], &vec![2; 304 * 4]);
    let gs = g.int(8);
    let qy = g.tensor(DType::F32, &[1, n]);
    let idx = g.tensor(DType::I32, &[2]);
    let pad = g.int(-1);
    let no = g.bool(false);
    let e = g.tensor(DType::F32, &[2, k]);
    let small = g.constant(DType::F32, &[4, k], &[0; 128]);
    let e2 = g.tensor(DType::F32, &[2, k]);
    g.op("aten.linear.default", &[x, w, none, y])
        .op("et_vk.linear_q4gsw.default", &[x, qw, qs, gs, none, qy])
        .op("aten.embedding.default", &[w, idx, pad, no, no, e])
        .op("aten.embedding.default", &[small, idx, pad, no, no, e2]);
    g.inputs(&[x, idx]).outputs(&[y, qy, e, e2]);
    let program = etwgpu_format::Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("parses");
    let mut graph = program.methods[0].vulkan_delegates().next().expect("a delegate").2.clone();
    let whole = graph.constants[0].data().expect("resolved").range.clone();
    let mut file_dtype = Vec::new();
    // 64 rows of 32 bytes fit in 2048 bytes: the float weight (9600 bytes)
    // splits into 4 chunks of 64 and one of 44; the 4-bit one (4 bytes a
    // row) fits.
    let split = crate::split::split_large(&mut graph, &mut file_dtype, 2048);
    assert_eq!(split.ops, 2, "the float linear and the embedding reading its weight");
    let names: Vec<&str> = graph.chain.iter().map(|c| c.name.as_str()).collect();
    let mut want = vec!["aten.linear.default"; 5];
    want.push("aten.cat.default");
    want.push("et_vk.linear_q4gsw.default");
    want.extend(["etwgpu.embedding_rows.default"]);
    for _ in 0..4 {
        want.extend(["etwgpu.embedding_rows.default", "aten.add.Tensor"]);
    }
    want.push("aten.embedding.default");
    assert_eq!(names, want);
    let rows: Vec<u64> =
        graph.chain[..5].iter().map(|c| graph.value(c.args[1]).as_tensor().expect("a chunk").dims[0]).collect();
    assert_eq!(rows, [64, 64, 64, 64, 44]);
    let ranges: Vec<std::ops::Range<usize>> = graph.chain[..5]
        .iter()
        .map(|c| {
            let t = graph.value(c.args[1]).as_tensor().expect("a chunk");
            graph.constants[t.constant.expect("a constant").0 as usize].data().expect("resolved").range.clone()
        })
        .collect();
    assert_eq!(ranges.first().map(|r| r.start), Some(whole.start));
    assert!(ranges.windows(2).all(|p| p[0].end == p[1].start), "{ranges:?}");
    assert_eq!(ranges.last().map(|r| r.end), Some(whole.end));
    assert_eq!(*graph.chain[5].args.last().expect("out"), y, "the cat writes the linear's output");
    assert!(matches!(graph.value(w), VkValue::Null), "the whole weight leaves the graph");
    assert_eq!(graph.chain.last().expect("ops").args[0], small, "a table that fits stays");

    // At 256 bytes the 4-bit linear splits too: 64 rows of max(4, 4)
    // bytes; its scales by columns, the last chunk keeping the padding.
    let mut graph = program.methods[0].vulkan_delegates().next().expect("a delegate").2.clone();
    let split = crate::split::split_large(&mut graph, &mut Vec::new(), 256);
    let q4: Vec<_> = graph.chain.iter().filter(|c| c.name == "et_vk.linear_q4gsw.default").collect();
    let cols: Vec<(u64, Option<crate::split::ColumnWindow>)> = q4
        .iter()
        .map(|c| {
            let s = graph.value(c.args[2]).as_tensor().expect("scales");
            (s.dims[1], split.windows.get(c.args[2].idx()).copied().flatten())
        })
        .collect();
    let window = |start| Some(crate::split::ColumnWindow { cols: 304, start });
    assert_eq!(cols, [(64, window(0)), (64, window(64)), (64, window(128)), (64, window(192)), (48, window(256))]);
}
