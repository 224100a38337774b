//! Unit tests of host-side pieces that need no GPU: `.npy` I/O, dtype
//! conversion, the CPU fallback ops and the trusted path's checks.

use etwgpu_format::DType;

use crate::cpu::{self, Arg, CpuOp};
use crate::tensor::{Tensor, convert};

fn check_npy_round_trip(t: &Tensor) {
    let bytes = t.to_npy_bytes().expect("serializes");
    assert_eq!(bytes.len() % 64, t.bytes.len() % 64, "header is padded to 64 bytes");
    assert_eq!(&Tensor::from_npy_bytes(&bytes).expect("parses"), t);
}

#[test]
fn npy_round_trips() {
    check_npy_round_trip(&Tensor::from_f32(&[2, 3], &[1., 2., 3., 4., 5., 6.]));
    check_npy_round_trip(&Tensor::from_f32(&[], &[7.]));
    check_npy_round_trip(&Tensor::from_f32(&[4], &[1., 2., 3., 4.]));
    check_npy_round_trip(&Tensor::new(DType::I64, vec![0, 2], vec![]).expect("empty"));
    check_npy_round_trip(&Tensor::new(DType::Bool, vec![3], vec![1, 0, 1]).expect("bools"));
}

#[test]
fn npy_rejects_bad_files() {
    assert!(Tensor::from_npy_bytes(b"not npy").is_err());
    let mut good = Tensor::from_f32(&[2], &[1., 2.]).to_npy_bytes().expect("serializes");
    good.pop();
    assert!(Tensor::from_npy_bytes(&good).is_err(), "truncated data");
    let header = "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }\n";
    let mut big_endian = b"\x93NUMPY\x01\x00".to_vec();
    big_endian.extend_from_slice(&(header.len() as u16).to_le_bytes());
    big_endian.extend_from_slice(header.as_bytes());
    big_endian.extend_from_slice(&[0; 4]);
    assert!(Tensor::from_npy_bytes(&big_endian).is_err());
}

#[test]
fn tensor_new_checks_length() {
    assert!(Tensor::new(DType::F32, vec![2], vec![0; 7]).is_err());
    assert!(Tensor::new(DType::F32, vec![u64::MAX, 4], vec![]).is_err());
}

#[test]
fn conversions() {
    let i64s: Vec<u8> = [1i64, -2].iter().flat_map(|v| v.to_le_bytes()).collect();
    let i32s = convert(&i64s, DType::I64, DType::I32).expect("pair").expect("fits");
    assert_eq!(i32s, [1i32, -2].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>());
    assert_eq!(convert(&i32s, DType::I32, DType::I64).expect("pair").expect("widens"), i64s);
    let overflow: Vec<u8> = (1i64 << 33).to_le_bytes().to_vec();
    assert_eq!(convert(&overflow, DType::I64, DType::I32), Some(Err(1 << 33)));
    let f32s: Vec<u8> = [1.5f32, -0.25].iter().flat_map(|v| v.to_le_bytes()).collect();
    let f16s = convert(&f32s, DType::F32, DType::F16).expect("pair").expect("converts");
    assert_eq!(convert(&f16s, DType::F16, DType::F32).expect("pair").expect("converts"), f32s);
    assert!(convert(&[0], DType::Bool, DType::F32).is_none());
}

/// Runs CPU fallback `op` and checks its shape and values.
fn check_cpu(op: &str, args: &[Arg<'_>], dtype: DType, shape: &[u64], want: &[f64]) {
    let (cop, arity) = cpu::lookup(op).expect("a fallback op");
    assert_eq!(arity, args.len() + 1, "{op}: arity counts the out arg");
    let got = cpu::run(cop, args, dtype).expect("runs");
    assert_eq!((got.dtype, got.shape.as_slice()), (dtype, shape), "{op}");
    assert_eq!(got.to_f64_vec(), want, "{op}");
}

#[test]
fn cpu_fallback_table_matches_the_routes() {
    for &(name, arity) in etwgpu_graph::route::CPU_FALLBACK_OPS {
        assert_eq!(cpu::lookup(name).map(|(_, n)| n), Some(arity), "{name}");
    }
    assert!(cpu::lookup("aten::frobnicate.out").is_none());
}

#[test]
fn cpu_fallback_ops() {
    let x = Tensor::from_f32(&[2, 3], &[1., -2., 3., 0., 5., -6.]);
    check_cpu(
        "aten::cumsum.out",
        &[Arg::Tensor(&x), Arg::Int(-1), Arg::Null],
        DType::F32,
        &[2, 3],
        &[1., -1., 2., 0., 5., -1.],
    );
    check_cpu(
        "aten::cumsum.out",
        &[Arg::Tensor(&x), Arg::Int(0), Arg::Null],
        DType::F32,
        &[2, 3],
        &[1., -2., 3., 1., 3., -3.],
    );
    check_cpu(
        "aten::mul.Scalar_out",
        &[Arg::Tensor(&x), Arg::Int(2)],
        DType::F32,
        &[2, 3],
        &[2., -4., 6., 0., 10., -12.],
    );
    let row = Tensor::from_f32(&[3], &[0.5, 0.5, 4.]);
    check_cpu(
        "aten::maximum.out",
        &[Arg::Tensor(&x), Arg::Tensor(&row)],
        DType::F32,
        &[2, 3],
        &[1., 0.5, 4., 0.5, 5., 4.],
    );
    let b = Tensor::new(DType::Bool, vec![2, 3], vec![0, 0, 1, 0, 0, 0]).expect("bools");
    check_cpu("aten::any.out", &[Arg::Tensor(&b), Arg::Int(-1), Arg::Bool(true)], DType::Bool, &[2, 1], &[1., 0.]);
    check_cpu(
        "aten::any.dims_out",
        &[Arg::Tensor(&b), Arg::IntList(&[0]), Arg::Bool(false)],
        DType::Bool,
        &[3],
        &[0., 0., 1.],
    );
    check_cpu("aten::any.dims_out", &[Arg::Tensor(&b), Arg::Null, Arg::Bool(false)], DType::Bool, &[], &[1.]);
    check_cpu("aten::any.all_out", &[Arg::Tensor(&b)], DType::Bool, &[], &[1.]);
    check_cpu("aten::scalar_tensor.out", &[Arg::Double(2.5)], DType::F32, &[], &[2.5]);
    let p = Tensor::from_f32(&[2], &[1., 4.]);
    let got = cpu::run(CpuOp::Log, &[Arg::Tensor(&p)], DType::F32).expect("runs");
    assert_eq!(got.to_f64_vec(), vec![0., f64::from(4f32.ln())]);
}

#[test]
fn cpu_fallback_rejects_bad_args() {
    let x = Tensor::from_f32(&[2, 3], &[0.; 6]);
    let err = cpu::run(CpuOp::Cumsum, &[Arg::Tensor(&x), Arg::Int(2), Arg::Null], DType::F32).expect_err("dim 2");
    assert_eq!(err.0, 1);
    let y = Tensor::from_f32(&[2], &[0.; 2]);
    let err = cpu::run(CpuOp::Maximum, &[Arg::Tensor(&x), Arg::Tensor(&y)], DType::F32).expect_err("no broadcast");
    assert_eq!(err.0, 1);
    let err = cpu::run(CpuOp::Log, &[Arg::Int(1)], DType::F32).expect_err("not a tensor");
    assert_eq!(err.0, 0);
}

#[test]
fn conv_env_takes_the_three_names_and_rejects_others() {
    use crate::device::conv_from_env;
    use etwgpu_kernels::ConvKernels;
    assert_eq!(conv_from_env(None).expect("unset"), ConvKernels::Auto, "the default");
    for (name, k) in [("auto", ConvKernels::Auto), ("direct", ConvKernels::Direct), ("gemm", ConvKernels::Gemm)] {
        assert_eq!(conv_from_env(Some(name)).expect(name), k);
    }
    for bad in ["", "Direct", "im2col", "0"] {
        let err = conv_from_env(Some(bad)).expect_err(bad);
        assert!(matches!(&err, crate::Error::BadEnv { var: "ETWGPU_CONV", value, .. } if value == bad), "{err:?}");
        assert!(err.to_string().contains("auto, direct or gemm"), "{err}");
    }
}

#[test]
fn precision_env_takes_the_three_names_and_rejects_others() {
    use crate::device::precision_from_env;
    use etwgpu_kernels::Precision;
    assert_eq!(precision_from_env(None).expect("unset"), Precision::Mixed, "the default");
    for (name, p) in [("f32", Precision::F32), ("mixed", Precision::Mixed), ("f16", Precision::F16)] {
        assert_eq!(precision_from_env(Some(name)).expect(name), p);
    }
    for bad in ["", "F16", "fp32", "half", "bf16"] {
        let err = precision_from_env(Some(bad)).expect_err(bad);
        assert!(matches!(&err, crate::Error::BadEnv { var: "ETWGPU_PRECISION", value, .. } if value == bad), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("ETWGPU_PRECISION") && text.contains("f32, mixed or f16"), "{text}");
    }
}

/// Each shader's module gets the loop guard where its family asks for it
/// (`// loop-guard: on`) or `ETWGPU_SHADER_CHECKS=full` does, else none,
/// on either path; the bounds checks follow the path alone.
#[test]
fn loop_guard_follows_the_family_marker() {
    use crate::pipeline_cache::{Checks, runtime_checks};
    use etwgpu_kernels::{Family, Shader, ShaderId};
    assert!(Family::Q4GemmCoopLarge.loop_guard(), "the marker measured faster (run be) was dropped");
    assert!(!Family::Q4GemmCoop.loop_guard(), "measured slower with the guard (run be)");
    for id in ShaderId::ALL {
        let shader = Shader::Static(*id);
        for (checks, bounds) in [(Checks::Checked, true), (Checks::Unchecked, false)] {
            let default = runtime_checks(&shader, checks, true);
            assert_eq!(default.force_loop_bounding, id.loop_guard(), "{}", id.label());
            assert_eq!(default.bounds_checks, bounds, "{}", id.label());
            assert!(runtime_checks(&shader, checks, false).force_loop_bounding, "{}: `full` guards all", id.label());
        }
    }
    let fused = etwgpu_kernels::GeneratedShader::intern(
        "fused_elementwise.f32",
        etwgpu_kernels::Variant::F32,
        "//! t\n".into(),
    );
    assert!(!runtime_checks(&Shader::Generated(fused), Checks::Checked, true).force_loop_bounding);
}

/// The trusted path drops the bounds checks (and the loop guard) but keeps
/// the integer division guard, and only native Vulkan takes it.
#[test]
fn trusted_path_checks_and_backends() {
    use crate::pipeline_cache::{UNCHECKED, trusted_path};
    const { assert!(!UNCHECKED.bounds_checks && !UNCHECKED.force_loop_bounding) };
    const { assert!(UNCHECKED.int_div_checks, "the markers prove indices, not divisors") };
    assert!(trusted_path(wgpu::Backend::Vulkan));
    for other in [wgpu::Backend::Metal, wgpu::Backend::Dx12, wgpu::Backend::Gl, wgpu::Backend::BrowserWebGpu] {
        assert!(!trusted_path(other), "{other:?}");
    }
}
