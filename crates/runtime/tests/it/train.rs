//! The training ops on graphs built with `etwgpu_format::writer`, against
//! PyTorch numbers in `test_data/train/` (written by
//! `tools/export/fixtures_train.py`; executorch 1.5.1 cannot export
//! `adamw_step`, `linear_q4gsw_backward` or `q4gsw_requant`, see there).
//! `fused_ce` and `linear_dW` also run in the exported `train_lora_grad`
//! fixture. Float32 tolerance: `tools/export/tolerances.py`'s row (rtol
//! 1e-4, atol 1e-4); packed 4-bit codes match exactly.

use std::path::{Path, PathBuf};

use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
use etwgpu_format::{DType, Program, ValueId};
use etwgpu_runtime::{Error, LoadedMethod, LowerError, Tensor};

/// `tolerances.py`'s float32 row.
const RTOL: f64 = 1e-4;
const ATOL: f64 = 1e-4;

fn train_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../test_data/train")
}

/// `test_data/train/<name>.npy`.
fn npy(name: &str) -> Tensor {
    Tensor::read_npy(train_dir().join(format!("{name}.npy"))).unwrap_or_else(|e| panic!("{name}.npy: {e}"))
}

/// `test_data/train/train.json`: the adapter's sizes and AdamW's settings.
fn meta() -> serde_json::Value {
    let text = std::fs::read_to_string(train_dir().join("train.json")).expect("train.json");
    serde_json::from_str(&text).expect("train.json is JSON")
}

fn load(g: GraphBuilder) -> Option<Result<LoadedMethod, Error>> {
    let rt = crate::runtime()?;
    let program = Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("crafted program parses");
    Some(rt.load(&program, "forward"))
}

/// `got` against `want` element-wise within `|g - w| <= ATOL + RTOL * |w|`.
fn assert_close(got: &Tensor, want: &Tensor, what: &str) {
    assert_eq!(got.numel(), want.numel(), "{what}: element count");
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let mut worst = (0.0f64, 0usize);
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let excess = (a - b).abs() - (ATOL + RTOL * b.abs());
        assert!(excess <= 0.0, "{what}[{i}]: got {a}, want {b}");
        if (a - b).abs() > worst.0 {
            worst = ((a - b).abs(), i);
        }
    }
    eprintln!("{what}: max |error| {:.3e} at {}", worst.0, worst.1);
}

/// Absolute floor of [`assert_update_close`]: updates are about `lr`
/// (1e-2), so the table's 1e-4 would pass a 1% error in them.
const UPDATE_ATOL: f64 = 1e-6;

/// The update `got - before` against `want - before`, within
/// `UPDATE_ATOL + RTOL * |want - before|`: stricter than the table,
/// which judges the parameter and not how far it moved.
fn assert_update_close(got: &Tensor, want: &Tensor, before: &Tensor, what: &str) {
    let (g, w, b) = (got.to_f64_vec(), want.to_f64_vec(), before.to_f64_vec());
    assert_eq!((g.len(), w.len()), (b.len(), b.len()), "{what}: element count");
    for i in 0..b.len() {
        let (dg, dw) = (g[i] - b[i], w[i] - b[i]);
        assert!((dg - dw).abs() <= UPDATE_ATOL + RTOL * dw.abs(), "{what}[{i}]: moved {dg}, want {dw}");
    }
}

fn dims(t: &Tensor) -> Vec<u64> {
    t.shape.clone()
}

fn tensor_like(g: &mut GraphBuilder, t: &Tensor) -> ValueId {
    g.tensor(t.dtype, &t.shape)
}

fn constant_like(g: &mut GraphBuilder, t: &Tensor) -> ValueId {
    g.constant(t.dtype, &t.shape, &t.bytes)
}

/// The AdamW scalars after the four tensors: lr, beta1, beta2, eps,
/// weight_decay, bias_correction1, bias_correction2.
fn adamw_scalars(g: &mut GraphBuilder, lr: f64, betas: (f64, f64), eps: f64, wd: f64, step: i32) -> [ValueId; 7] {
    [lr, betas.0, betas.1, eps, wd, 1.0 - betas.0.powi(step), 1.0 - betas.1.powi(step)].map(|x| g.double(x))
}

/// `adamw_step` in place: the output list names the inputs themselves
/// (the runtime binds them read-write), or other tensors, which then
/// alias them.
#[test]
fn adamw_step_matches_the_reference_in_place() {
    let names = ["adamw_param", "adamw_m", "adamw_v", "adamw_grad"];
    let ins: Vec<Tensor> = names.iter().map(|n| npy(n)).collect();
    let want = [npy("adamw_param_out"), npy("adamw_m_out"), npy("adamw_v_out")];
    for aliased_outputs in [false, true] {
        let mut g = GraphBuilder::new();
        let ids: Vec<ValueId> = ins.iter().map(|t| tensor_like(&mut g, t)).collect();
        let s = adamw_scalars(&mut g, 1e-2, (0.9, 0.999), 1e-8, 0.1, 3);
        let outs: Vec<ValueId> =
            if aliased_outputs { ins[..3].iter().map(|t| tensor_like(&mut g, t)).collect() } else { ids[..3].to_vec() };
        let list = g.value_list(&outs);
        let mut args = ids.clone();
        args.extend(s);
        args.push(list);
        g.op("et_vk.adamw_step.default", &args).inputs(&ids).outputs(&outs);
        let Some(method) = load(g) else { return };
        let mut method = method.expect("loads");
        let got = method.run(&ins).expect("runs");
        for (k, what) in ["param", "m", "v"].into_iter().enumerate() {
            assert_close(&got[k], &want[k], &format!("adamw {what} (aliased outputs: {aliased_outputs})"));
            assert_update_close(&got[k], &want[k], &ins[k], &format!("adamw {what} update"));
        }
        // Each run starts from its inputs again: the in-place update does
        // not leak into the next run.
        let again = method.run(&ins).expect("runs again");
        assert_close(&again[0], &want[0], "adamw param, second run");
    }
}

#[test]
fn linear_q4gsw_backward_matches_the_reference() {
    let (d, w, s, want) = (npy("bwd_d_out"), npy("bwd_w"), npy("bwd_scales"), npy("bwd_d_x"));
    let mut g = GraphBuilder::new();
    let d_id = tensor_like(&mut g, &d);
    let w_id = constant_like(&mut g, &w);
    let s_id = constant_like(&mut g, &s);
    let gs = g.int(16);
    let out = g.tensor(DType::F32, &want.shape);
    g.op("et_vk.linear_q4gsw_backward.default", &[d_id, w_id, s_id, gs, out]).inputs(&[d_id]).outputs(&[out]);
    let Some(method) = load(g) else { return };
    let got = method.expect("loads").run(std::slice::from_ref(&d)).expect("runs");
    assert_eq!(got[0].shape, want.shape);
    assert_close(&got[0], &want, "linear_q4gsw_backward d_x");
}

#[test]
fn q4gsw_requant_matches_the_reference_exactly() {
    let (latent, s, want) = (npy("rq_latent"), npy("rq_scales"), npy("rq_packed"));
    assert_eq!(want.dtype, DType::U8);
    let mut g = GraphBuilder::new();
    let l_id = tensor_like(&mut g, &latent);
    let s_id = constant_like(&mut g, &s);
    let gs = g.int(8);
    let out = g.tensor(DType::U8, &want.shape);
    g.op("et_vk.q4gsw_requant.default", &[l_id, s_id, gs, out]).inputs(&[l_id]).outputs(&[out]);
    let Some(method) = load(g) else { return };
    let got = method.expect("loads").run(std::slice::from_ref(&latent)).expect("runs");
    assert_eq!(got[0].shape, want.shape);
    assert_eq!(got[0].dtype, DType::U8);
    let diff: Vec<usize> = (0..want.bytes.len()).filter(|&i| got[0].bytes[i] != want.bytes[i]).collect();
    assert!(diff.is_empty(), "packed bytes differ at {diff:?}");
}

/// The values of one unrolled training step.
struct StepOut {
    loss: ValueId,
    dx: ValueId,
}

/// The adapter's graph pieces shared by every step.
struct Adapter {
    x: ValueId,
    labels: ValueId,
    w: ValueId,
    s: ValueId,
    gs: ValueId,
    /// a, m_a, v_a, b, m_b, v_b.
    state: [ValueId; 6],
    m: u64,
    k: u64,
    n: u64,
    r: u64,
}

/// Appends one forward, backward and AdamW step (`step` from 1) of the
/// adapter `logits = linear_q4gsw(x, W) + (x A^T) B^T` under fused
/// cross-entropy: the loss, the input gradient, A and B updated in place.
fn train_step(g: &mut GraphBuilder, a: &Adapter, n_valid: f64, hp: &serde_json::Value, step: i32) -> StepOut {
    let f = |v: &serde_json::Value| v.as_f64().expect("number");
    let [pa, ma, va, pb, mb, vb] = a.state;
    let null = g.null();
    let h = g.tensor(DType::F32, &[a.m, a.r]);
    g.op("aten.linear.default", &[a.x, pa, null, h]);
    let base = g.tensor(DType::F32, &[a.m, a.n]);
    let null2 = g.null();
    g.op("et_vk.linear_q4gsw.default", &[a.x, a.w, a.s, a.gs, null2, base]);
    let lora = g.tensor(DType::F32, &[a.m, a.n]);
    let null3 = g.null();
    g.op("aten.linear.default", &[h, pb, null3, lora]);
    let logits = g.tensor(DType::F32, &[a.m, a.n]);
    let one = g.int(1);
    g.op("aten.add.Tensor", &[base, lora, one, logits]);
    let loss = g.tensor(DType::F32, &[]);
    let dlogits = g.tensor(DType::F32, &[a.m, a.n]);
    let nv = g.double(n_valid);
    let ce_out = g.value_list(&[loss, dlogits]);
    g.op("et_vk.fused_ce.default", &[logits, a.labels, nv, ce_out]);
    let db = g.tensor(DType::F32, &[a.n, a.r]);
    g.op("et_vk.linear_dW.default", &[dlogits, h, db]);
    let dh = g.tensor(DType::F32, &[a.m, a.r]);
    g.op("aten.mm.default", &[dlogits, pb, dh]);
    let da = g.tensor(DType::F32, &[a.r, a.k]);
    g.op("et_vk.linear_dW.default", &[dh, a.x, da]);
    let dx_base = g.tensor(DType::F32, &[a.m, a.k]);
    g.op("et_vk.linear_q4gsw_backward.default", &[dlogits, a.w, a.s, a.gs, dx_base]);
    let dx_lora = g.tensor(DType::F32, &[a.m, a.k]);
    g.op("aten.mm.default", &[dh, pa, dx_lora]);
    let dx = g.tensor(DType::F32, &[a.m, a.k]);
    let one2 = g.int(1);
    g.op("aten.add.Tensor", &[dx_base, dx_lora, one2, dx]);
    let betas = (f(&hp["betas"][0]), f(&hp["betas"][1]));
    for (p, m, v, grad) in [(pa, ma, va, da), (pb, mb, vb, db)] {
        let s = adamw_scalars(g, f(&hp["lr"]), betas, f(&hp["eps"]), f(&hp["weight_decay"]), step);
        let list = g.value_list(&[p, m, v]);
        let mut args = vec![p, m, v, grad];
        args.extend(s);
        args.push(list);
        g.op("et_vk.adamw_step.default", &args);
    }
    StepOut { loss, dx }
}

/// The required end-to-end case: a LoRA-like adapter (A [R, K], B [N, R])
/// over a frozen 4-bit base linear, trained three AdamW steps on fixed
/// data in one unrolled graph. Per step the loss and the input gradient,
/// at the end A, B and both moments of each, match PyTorch's autograd and
/// `torch.optim.AdamW` (`fixtures_train.py`'s `train_run`).
#[test]
fn adapter_trains_three_adamw_steps_like_pytorch() {
    let meta = meta();
    let dim = |k: &str| meta["adapter"][k].as_u64().expect("size");
    let (m, k, n, r) = (dim("M"), dim("K"), dim("N"), dim("R"));
    let steps = meta["adamw"]["steps"].as_u64().expect("steps") as i32;
    let (x, labels, w, s, a0, b0) =
        (npy("run_x"), npy("run_labels"), npy("run_w"), npy("run_scales"), npy("run_a0"), npy("run_b0"));
    assert_eq!(labels.dtype, DType::I32);
    let n_valid = labels.to_f64_vec().iter().filter(|&&l| l >= 0.0).count() as f64;
    let mut g = GraphBuilder::new();
    let x_id = tensor_like(&mut g, &x);
    let l_id = tensor_like(&mut g, &labels);
    let state: [ValueId; 6] = [&a0, &a0, &a0, &b0, &b0, &b0].map(|t| tensor_like(&mut g, t));
    let adapter = Adapter {
        x: x_id,
        labels: l_id,
        w: constant_like(&mut g, &w),
        s: constant_like(&mut g, &s),
        gs: g.int(dim("group_size") as i64),
        state,
        m,
        k,
        n,
        r,
    };
    let outs: Vec<StepOut> = (1..=steps).map(|t| train_step(&mut g, &adapter, n_valid, &meta["adamw"], t)).collect();
    let mut inputs = vec![x_id, l_id];
    inputs.extend(state);
    let mut outputs: Vec<ValueId> = outs.iter().flat_map(|o| [o.loss, o.dx]).collect();
    outputs.extend(state);
    g.inputs(&inputs).outputs(&outputs);
    let Some(method) = load(g) else { return };
    let mut method = method.expect("loads");
    let zeros = |t: &Tensor| Tensor::new(DType::F32, dims(t), vec![0; t.bytes.len()]).expect("zeros");
    let feed = vec![x, labels, a0.clone(), zeros(&a0), zeros(&a0), b0.clone(), zeros(&b0), zeros(&b0)];
    let got = method.run(&feed).expect("runs");
    let (losses, dx) = (npy("run_losses").to_f64_vec(), npy("run_dx"));
    let per_step = (m * k) as usize * 4;
    for t in 0..steps as usize {
        let loss = &got[2 * t];
        assert!(loss.shape.is_empty(), "the loss is a scalar");
        let want = Tensor::from_f32(&[], &[losses[t] as f32]);
        assert_close(loss, &want, &format!("loss of step {}", t + 1));
        let want_dx = Tensor::new(DType::F32, vec![m, k], dx.bytes[t * per_step..][..per_step].to_vec()).expect("dx");
        assert_close(&got[2 * t + 1], &want_dx, &format!("d_x of step {}", t + 1));
    }
    assert!(losses[steps as usize - 1] < losses[0], "the run lowers the loss: {losses:?}");
    let base = 2 * steps as usize;
    for (j, name) in ["a", "m_a", "v_a", "b", "m_b", "v_b"].into_iter().enumerate() {
        let want = npy(&format!("run_{name}"));
        assert_eq!(got[base + j].shape, want.shape, "{name} shape");
        assert_close(&got[base + j], &want, &format!("final {name}"));
    }
    assert_update_close(&got[base], &npy("run_a"), &a0, "A's update");
    assert_update_close(&got[base + 3], &npy("run_b"), &b0, "B's update");
}

/// Runs the lowering of one op on `ins` and returns the load error.
fn load_error(g: GraphBuilder) -> Option<Error> {
    match load(g)? {
        Ok(_) => panic!("a bad call loaded"),
        Err(e) => Some(e),
    }
}

/// Bad dtypes, shapes and arguments of each training op are typed errors
/// at load, naming the argument.
#[test]
fn bad_training_op_arguments_are_typed_errors() {
    let lower_err = |e: Error| match e {
        Error::Lower(LowerError::Op { source, .. }) => source,
        other => panic!("expected a lowering error, got {other}"),
    };
    type Build = Box<dyn Fn(&mut GraphBuilder) -> (ValueId, ValueId)>;
    let cases: Vec<(&str, Build, &str)> = vec![
        (
            "adamw_step: float16 param",
            Box::new(|g| {
                let p = g.tensor(DType::F16, &[4]);
                let (m, v, gr) = (g.tensor(DType::F16, &[4]), g.tensor(DType::F16, &[4]), g.tensor(DType::F16, &[4]));
                let s = adamw_scalars(g, 1e-2, (0.9, 0.999), 1e-8, 0.0, 1);
                let list = g.value_list(&[p, m, v]);
                let mut args = vec![p, m, v, gr];
                args.extend(s);
                args.push(list);
                g.op("et_vk.adamw_step.default", &args);
                (p, p)
            }),
            "param",
        ),
        (
            "adamw_step: grad of another size",
            Box::new(|g| {
                let p = g.tensor(DType::F32, &[4]);
                let (m, v, gr) = (g.tensor(DType::F32, &[4]), g.tensor(DType::F32, &[4]), g.tensor(DType::F32, &[5]));
                let s = adamw_scalars(g, 1e-2, (0.9, 0.999), 1e-8, 0.0, 1);
                let list = g.value_list(&[p, m, v]);
                let mut args = vec![p, m, v, gr];
                args.extend(s);
                args.push(list);
                g.op("et_vk.adamw_step.default", &args);
                (p, p)
            }),
            "grad",
        ),
        (
            "adamw_step: zero bias correction",
            Box::new(|g| {
                let p = g.tensor(DType::F32, &[4]);
                let (m, v, gr) = (g.tensor(DType::F32, &[4]), g.tensor(DType::F32, &[4]), g.tensor(DType::F32, &[4]));
                let mut s = adamw_scalars(g, 1e-2, (0.9, 0.999), 1e-8, 0.0, 1);
                s[5] = g.double(0.0);
                let list = g.value_list(&[p, m, v]);
                let mut args = vec![p, m, v, gr];
                args.extend(s);
                args.push(list);
                g.op("et_vk.adamw_step.default", &args);
                (p, p)
            }),
            "bias_correction1",
        ),
        (
            "fused_ce: float labels",
            Box::new(|g| {
                let x = g.tensor(DType::F32, &[2, 5]);
                let l = g.tensor(DType::F32, &[2]);
                let nv = g.double(2.0);
                let (loss, d) = (g.tensor(DType::F32, &[]), g.tensor(DType::F32, &[2, 5]));
                let list = g.value_list(&[loss, d]);
                g.op("et_vk.fused_ce.default", &[x, l, nv, list]);
                (x, d)
            }),
            "labels",
        ),
        (
            "fused_ce: 3-D logits",
            Box::new(|g| {
                let x = g.tensor(DType::F32, &[1, 2, 5]);
                let l = g.tensor(DType::I32, &[2]);
                let nv = g.double(2.0);
                let (loss, d) = (g.tensor(DType::F32, &[]), g.tensor(DType::F32, &[1, 2, 5]));
                let list = g.value_list(&[loss, d]);
                g.op("et_vk.fused_ce.default", &[x, l, nv, list]);
                (x, d)
            }),
            "logits",
        ),
        (
            "linear_dW: rows disagree",
            Box::new(|g| {
                let d = g.tensor(DType::F32, &[3, 4]);
                let x = g.tensor(DType::F32, &[2, 6]);
                let out = g.tensor(DType::F32, &[4, 6]);
                g.op("et_vk.linear_dW.default", &[d, x, out]);
                (d, out)
            }),
            "x",
        ),
        (
            "linear_q4gsw_backward: float weights",
            Box::new(|g| {
                let d = g.tensor(DType::F32, &[3, 4]);
                let w = g.constant(DType::F32, &[4, 8], &[0; 128]);
                let s = g.constant(DType::F32, &[1, 4], &[0; 16]);
                let gs = g.int(16);
                let out = g.tensor(DType::F32, &[3, 16]);
                g.op("et_vk.linear_q4gsw_backward.default", &[d, w, s, gs, out]);
                (d, out)
            }),
            "weights",
        ),
        (
            "linear_q4gsw_backward: d_out of the wrong width",
            Box::new(|g| {
                let d = g.tensor(DType::F32, &[3, 5]);
                let w = g.constant(DType::U8, &[4, 8], &[0; 32]);
                let s = g.constant(DType::F32, &[1, 4], &[0; 16]);
                let gs = g.int(16);
                let out = g.tensor(DType::F32, &[3, 16]);
                g.op("et_vk.linear_q4gsw_backward.default", &[d, w, s, gs, out]);
                (d, out)
            }),
            "d_out",
        ),
        (
            "q4gsw_requant: too few scale groups",
            Box::new(|g| {
                let l = g.tensor(DType::F32, &[4, 16]);
                let s = g.constant(DType::F32, &[1, 4], &[0; 16]);
                let gs = g.int(8);
                let out = g.tensor(DType::U8, &[4, 8]);
                g.op("et_vk.q4gsw_requant.default", &[l, s, gs, out]);
                (l, out)
            }),
            "scales",
        ),
        (
            "q4gsw_requant: int32 output",
            Box::new(|g| {
                let l = g.tensor(DType::F32, &[4, 16]);
                let s = g.constant(DType::F32, &[2, 4], &[0; 32]);
                let gs = g.int(8);
                let out = g.tensor(DType::I32, &[4, 8]);
                g.op("et_vk.q4gsw_requant.default", &[l, s, gs, out]);
                (l, out)
            }),
            "out",
        ),
    ];
    for (what, build, arg) in cases {
        let mut g = GraphBuilder::new();
        let (input, output) = build(&mut g);
        g.inputs(&[input]).outputs(&[output]);
        let Some(err) = load_error(g) else { return };
        let source = lower_err(err);
        let text = source.to_string();
        assert!(text.contains(&format!("({arg})")), "{what}: the error names {arg}: {text}");
    }
}
