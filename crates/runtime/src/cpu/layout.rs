//! CPU fallback ops that move elements (as ExecuTorch's portable kernels
//! do for the dtypes exports use): `as_strided_copy`, `copy`,
//! `slice_scatter` and `index.Tensor` (integer and bool-mask indices).
//! Each names the source element of every output element; the caller
//! copies bytes when the dtypes agree and converts otherwise.

use etwgpu_format::DType;

use super::{ArgError, broadcast, describe, dim, source_index, strides, unravel};
use crate::tensor::Tensor;

/// An op's result as source elements: the output shape and, per output
/// element, the flat index of its element in `from`.
pub(crate) struct Gathered<'a> {
    pub shape: Vec<u64>,
    pub from: &'a Tensor,
    pub index: Vec<usize>,
}

impl Gathered<'_> {
    /// The output tensor in `dtype`: bytes copied when `from` has it, else
    /// each element converted through f64.
    pub fn into_tensor(self, dtype: DType) -> Tensor {
        let size = self.from.dtype.size_bytes();
        let bytes = if self.from.dtype == dtype {
            let mut out = Vec::with_capacity(self.index.len() * size);
            for &i in &self.index {
                out.extend_from_slice(&self.from.bytes[i * size..(i + 1) * size]);
            }
            out
        } else {
            let v = self.from.to_f64_vec();
            super::encode(&self.index.iter().map(|&i| v[i]).collect::<Vec<_>>(), dtype)
        };
        Tensor { dtype, shape: self.shape, bytes }
    }
}

fn numel(shape: &[u64]) -> u64 {
    shape.iter().product()
}

fn int_list<'a>(args: &[super::Arg<'a>], i: usize) -> Result<&'a [i64], ArgError> {
    match args.get(i) {
        Some(super::Arg::IntList(x)) => Ok(x),
        other => Err((i, format!("expected an int list, found {}", describe(other)))),
    }
}

fn opt_int(args: &[super::Arg<'_>], i: usize) -> Result<Option<i64>, ArgError> {
    match args.get(i) {
        Some(super::Arg::Int(x)) => Ok(Some(*x)),
        Some(super::Arg::Null) | None => Ok(None),
        other => Err((i, format!("expected an int or None, found {}", describe(other)))),
    }
}

/// `as_strided_copy(self, size, stride, storage_offset)`: element
/// `offset + sum(idx * stride)` of `self`'s contiguous storage.
pub(crate) fn as_strided<'a>(x: &'a Tensor, args: &[super::Arg<'a>]) -> Result<Gathered<'a>, ArgError> {
    let size = int_list(args, 1)?;
    let stride = int_list(args, 2)?;
    if size.len() != stride.len() {
        return Err((2, format!("{} strides for {} sizes", stride.len(), size.len())));
    }
    let offset = opt_int(args, 3)?.unwrap_or(0);
    if size.iter().chain(stride).chain([&offset]).any(|&v| v < 0) {
        return Err((1, format!("negative size, stride or offset in {size:?} {stride:?} {offset}")));
    }
    let shape: Vec<u64> = size.iter().map(|&s| s as u64).collect();
    let len = numel(&x.shape);
    let mut index = Vec::with_capacity(numel(&shape) as usize);
    for f in 0..numel(&shape) {
        let idx = unravel(f, &shape);
        let at = offset as u64 + idx.iter().zip(stride).map(|(&i, &s)| i * s as u64).sum::<u64>();
        if at >= len {
            return Err((2, format!("element {at} is past the {len} of a {:?} tensor", x.shape)));
        }
        index.push(at as usize);
    }
    Ok(Gathered { shape, from: x, index })
}

/// `copy(self, src)`: `src` broadcast to `self`'s shape.
pub(crate) fn copy<'a>(x: &Tensor, src: &'a Tensor) -> Result<Gathered<'a>, ArgError> {
    if broadcast(&x.shape, &src.shape).as_deref() != Some(&x.shape[..]) {
        return Err((1, format!("src {:?} does not broadcast to {:?}", src.shape, x.shape)));
    }
    let index = (0..numel(&x.shape)).map(|f| source_index(&unravel(f, &x.shape), &src.shape)).collect();
    Ok(Gathered { shape: x.shape.clone(), from: src, index })
}

/// A slice's start and element count on a dim of `len` (Python rules:
/// negative bounds count from the end, both clamp to `[0, len]`).
fn slice_range(len: u64, start: Option<i64>, end: Option<i64>, step: i64) -> (u64, u64) {
    let clamp = |v: i64| {
        let v = if v < 0 { v + len as i64 } else { v };
        v.clamp(0, len as i64) as u64
    };
    let s = clamp(start.unwrap_or(0));
    let e = clamp(end.unwrap_or(len as i64)).max(s);
    (s, (e - s).div_ceil(step as u64))
}

/// `slice_scatter(self, src, dim, start, end, step)`: `self` with
/// `self[start:end:step]` along `dim` replaced by `src`. The result's
/// elements come from two tensors, so it is built here, in `self`'s
/// dtype (as the portable kernel requires of `src`).
pub(crate) fn slice_scatter(x: &Tensor, src: &Tensor, args: &[super::Arg<'_>]) -> Result<Tensor, ArgError> {
    let d = dim(args, 2, x.shape.len())?;
    let step = match args.get(5) {
        Some(super::Arg::Int(s)) if *s > 0 => *s,
        other => return Err((5, format!("expected a positive step, found {}", describe(other)))),
    };
    if x.shape.is_empty() {
        return Err((0, "self is a scalar".into()));
    }
    let (start, count) = slice_range(x.shape[d], opt_int(args, 3)?, opt_int(args, 4)?, step);
    let mut want = x.shape.clone();
    want[d] = count;
    if src.shape != want {
        return Err((1, format!("src is {:?}, the slice is {want:?}", src.shape)));
    }
    if src.dtype != x.dtype {
        return Err((1, format!("src is {}, self is {}", src.dtype, x.dtype)));
    }
    let size = x.dtype.size_bytes();
    let mut bytes = x.bytes.clone();
    let st = strides(&x.shape);
    for f in 0..numel(&src.shape) {
        let mut idx = unravel(f, &src.shape);
        idx[d] = start + idx[d] * step as u64;
        let at = idx.iter().zip(&st).map(|(a, b)| a * b).sum::<u64>() as usize;
        let from = f as usize * size;
        bytes[at * size..(at + 1) * size].copy_from_slice(&src.bytes[from..from + size]);
    }
    Ok(Tensor { dtype: x.dtype, shape: x.shape.clone(), bytes })
}

/// One dim's index values and their shape (a bool mask's coordinates
/// become one such per mask dim).
struct DimIndex {
    shape: Vec<u64>,
    values: Vec<i64>,
}

/// `index.Tensor(self, indices)`: advanced indexing as in PyTorch. Each
/// entry indexes the next dim of `self` (`None`: all of it); a bool mask
/// covers as many dims as it has and selects its true positions in order;
/// integer indices broadcast together and may be negative. When the
/// indexed dims are adjacent the broadcast dims take their place, else
/// they come first.
pub(crate) fn index<'a>(x: &'a Tensor, indices: &[Option<&Tensor>]) -> Result<Gathered<'a>, ArgError> {
    let rank = x.shape.len();
    let mut per_dim: Vec<Option<DimIndex>> = Vec::new();
    for t in indices {
        let Some(t) = t else {
            per_dim.push(None);
            continue;
        };
        match t.dtype {
            DType::Bool | DType::U8 => {
                let at = per_dim.len();
                let k = t.shape.len();
                if at + k > rank || x.shape[at..at + k] != t.shape[..] {
                    return Err((1, format!("mask {:?} does not match self {:?} at dim {at}", t.shape, x.shape)));
                }
                let hits: Vec<u64> =
                    t.to_f64_vec().iter().enumerate().filter(|(_, v)| **v != 0.0).map(|(i, _)| i as u64).collect();
                for j in 0..k {
                    let values = hits.iter().map(|&h| unravel(h, &t.shape)[j] as i64).collect();
                    per_dim.push(Some(DimIndex { shape: vec![hits.len() as u64], values }));
                }
            }
            DType::I64 | DType::I32 => {
                let values = t.to_f64_vec().iter().map(|&v| v as i64).collect();
                per_dim.push(Some(DimIndex { shape: t.shape.clone(), values }));
            }
            other => return Err((1, format!("index tensors must be integer or bool, found {other}"))),
        }
    }
    if per_dim.len() > rank {
        return Err((1, format!("{} indexed dims for a rank-{rank} tensor", per_dim.len())));
    }
    per_dim.resize_with(rank, || None);
    let indexed: Vec<usize> = (0..rank).filter(|&d| per_dim[d].is_some()).collect();
    let mut bshape: Vec<u64> = Vec::new();
    for d in &indexed {
        let s = &per_dim[*d].as_ref().expect("indexed").shape;
        bshape = broadcast(&bshape, s).ok_or_else(|| (1, format!("index shapes do not broadcast: {s:?}")))?;
    }
    let adjacent = indexed.windows(2).all(|w| w[1] == w[0] + 1);
    let first = if adjacent { indexed.first().copied().unwrap_or(0) } else { 0 };
    let free: Vec<usize> = (0..rank).filter(|&d| per_dim[d].is_none()).collect();
    let (before, after): (Vec<usize>, Vec<usize>) = free.iter().copied().partition(|&d| d < first);
    let shape: Vec<u64> = before
        .iter()
        .map(|&d| x.shape[d])
        .chain(bshape.iter().copied())
        .chain(after.iter().map(|&d| x.shape[d]))
        .collect();
    let st = strides(&x.shape);
    let mut index = Vec::with_capacity(numel(&shape) as usize);
    for f in 0..numel(&shape) {
        let o = unravel(f, &shape);
        let b = &o[before.len()..before.len() + bshape.len()];
        let mut at = 0u64;
        for (j, &d) in before.iter().enumerate() {
            at += o[j] * st[d];
        }
        for (j, &d) in after.iter().enumerate() {
            at += o[before.len() + bshape.len() + j] * st[d];
        }
        for &d in &indexed {
            let di = per_dim[d].as_ref().expect("indexed");
            let v = di.values[source_index(b, &di.shape)];
            let len = x.shape[d] as i64;
            let w = if v < 0 { v + len } else { v };
            if !(0..len).contains(&w) {
                return Err((1, format!("index {v} is out of bounds for dim {d} of size {len}")));
            }
            at += w as u64 * st[d];
        }
        index.push(at as usize);
    }
    Ok(Gathered { shape, from: x, index })
}

#[cfg(test)]
mod tests {
    use etwgpu_format::DType;

    use super::super::{Arg, CpuOp, run};
    use crate::tensor::Tensor;

    fn f32s(shape: &[u64], v: &[f32]) -> Tensor {
        Tensor { dtype: DType::F32, shape: shape.to_vec(), bytes: v.iter().flat_map(|x| x.to_le_bytes()).collect() }
    }

    fn i64s(shape: &[u64], v: &[i64]) -> Tensor {
        Tensor { dtype: DType::I64, shape: shape.to_vec(), bytes: v.iter().flat_map(|x| x.to_le_bytes()).collect() }
    }

    fn bools(shape: &[u64], v: &[bool]) -> Tensor {
        Tensor { dtype: DType::Bool, shape: shape.to_vec(), bytes: v.iter().map(|&b| u8::from(b)).collect() }
    }

    fn iota(shape: &[u64]) -> Tensor {
        let n: u64 = shape.iter().product();
        f32s(shape, &(0..n).map(|i| i as f32).collect::<Vec<_>>())
    }

    fn values(t: &Tensor) -> Vec<f64> {
        t.to_f64_vec()
    }

    #[test]
    fn index_by_bool_mask_and_integers() {
        let x = iota(&[2, 3, 4]);
        // A [2,3] mask covers dims 0 and 1: rows (0,1), (1,0), (1,2).
        let m = bools(&[2, 3], &[false, true, false, true, false, true]);
        let got = run(CpuOp::Index, &[Arg::Tensor(&x), Arg::TensorList(&[Some(&m)])], DType::F32).expect("mask");
        assert_eq!(got.shape, vec![3, 4]);
        assert_eq!(values(&got)[..5], [4.0, 5.0, 6.0, 7.0, 12.0]);
        // x[:, [-1, 0]]: adjacent indexed dims keep their place.
        let i = i64s(&[2], &[-1, 0]);
        let got = run(CpuOp::Index, &[Arg::Tensor(&x), Arg::TensorList(&[None, Some(&i)])], DType::F32).expect("ints");
        assert_eq!(got.shape, vec![2, 2, 4]);
        assert_eq!(values(&got)[..5], [8.0, 9.0, 10.0, 11.0, 0.0]);
        // x[[1, 0], :, [3, 2]]: non-adjacent, the broadcast dim comes first.
        let a = i64s(&[2], &[1, 0]);
        let b = i64s(&[2], &[3, 2]);
        let list = [Some(&a), None, Some(&b)];
        let got = run(CpuOp::Index, &[Arg::Tensor(&x), Arg::TensorList(&list)], DType::F32).expect("split");
        assert_eq!(got.shape, vec![2, 3]);
        assert_eq!(values(&got), [15.0, 19.0, 23.0, 2.0, 6.0, 10.0]);
        let far = i64s(&[1], &[3]);
        let err = run(CpuOp::Index, &[Arg::Tensor(&x), Arg::TensorList(&[Some(&far)])], DType::F32).expect_err("oob");
        assert!(err.1.contains("out of bounds"), "{err:?}");
    }

    #[test]
    fn as_strided_copy_slice_scatter() {
        let x = iota(&[3, 4]);
        let (size, stride) = ([2i64, 2], [1i64, 4]);
        let args = [Arg::Tensor(&x), Arg::IntList(&size), Arg::IntList(&stride), Arg::Int(1)];
        let got = run(CpuOp::AsStridedCopy, &args, DType::F32).expect("as_strided");
        assert_eq!((got.shape.clone(), values(&got)), (vec![2, 2], vec![1.0, 5.0, 2.0, 6.0]));
        let args = [Arg::Tensor(&x), Arg::IntList(&size), Arg::IntList(&stride), Arg::Int(8)];
        assert!(run(CpuOp::AsStridedCopy, &args, DType::F32).is_err(), "past the storage");

        let row = f32s(&[4], &[7.0, 8.0, 9.0, 10.0]);
        let got = run(CpuOp::Copy, &[Arg::Tensor(&x), Arg::Tensor(&row), Arg::Bool(false)], DType::F32).expect("copy");
        assert_eq!(values(&got)[4..8], [7.0, 8.0, 9.0, 10.0]);

        // x[:, 1::2] = src (columns 1 and 3), and x[-2:] = rows.
        let src = f32s(&[3, 2], &[-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]);
        let args = [Arg::Tensor(&x), Arg::Tensor(&src), Arg::Int(1), Arg::Int(1), Arg::Null, Arg::Int(2)];
        let got = run(CpuOp::SliceScatter, &args, DType::F32).expect("scatter");
        assert_eq!(values(&got)[..8], [0.0, -1.0, 2.0, -2.0, 4.0, -3.0, 6.0, -4.0]);
        let rows = iota(&[2, 4]);
        let args = [Arg::Tensor(&x), Arg::Tensor(&rows), Arg::Int(0), Arg::Int(-2), Arg::Int(i64::MAX), Arg::Int(1)];
        let got = run(CpuOp::SliceScatter, &args, DType::F32).expect("tail rows");
        assert_eq!(values(&got)[..5], [0.0, 1.0, 2.0, 3.0, 0.0]);
        let args = [Arg::Tensor(&x), Arg::Tensor(&row), Arg::Int(0), Arg::Int(0), Arg::Null, Arg::Int(1)];
        assert!(run(CpuOp::SliceScatter, &args, DType::F32).is_err(), "src shape");
    }

    #[test]
    fn mean_and_fmod() {
        let x = iota(&[2, 3]);
        let dims = [-1i64];
        let args = [Arg::Tensor(&x), Arg::IntList(&dims), Arg::Bool(true), Arg::Null];
        let got = run(CpuOp::Mean, &args, DType::F32).expect("mean");
        assert_eq!((got.shape.clone(), values(&got)), (vec![2, 1], vec![1.0, 4.0]));
        let y = f32s(&[3], &[-7.5, 7.5, 2.0]);
        let got = run(CpuOp::FmodScalar, &[Arg::Tensor(&y), Arg::Int(2)], DType::F32).expect("fmod");
        assert_eq!(values(&got), [-1.5, 1.5, 0.0]);
        let i = i64s(&[2], &[-7, 7]);
        let got = run(CpuOp::FmodScalar, &[Arg::Tensor(&i), Arg::Int(3)], DType::I64).expect("int fmod");
        assert_eq!(values(&got), [-1.0, 1.0]);
        assert!(run(CpuOp::FmodScalar, &[Arg::Tensor(&i), Arg::Int(0)], DType::I64).is_err(), "by zero");
    }
}
