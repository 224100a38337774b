//! Unit tests of host-side pieces that need no GPU: `.npy` I/O and dtype
//! conversion.

use etwgpu_format::DType;

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
