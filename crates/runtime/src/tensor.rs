//! Host tensors and `.npy` (format v1-v3, little-endian, C order) I/O.

use std::path::Path;

use etwgpu_format::DType;

use crate::error::{Error, Result};

/// A dense, row-major host tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// Element type.
    pub dtype: DType,
    /// Shape; empty for a scalar.
    pub shape: Vec<u64>,
    /// Little-endian element bytes, `numel * dtype.size_bytes()` long.
    pub bytes: Vec<u8>,
}

fn npy_err(problem: impl Into<String>) -> Error {
    Error::Npy { problem: problem.into() }
}

fn descr(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::Bool => "|b1",
        DType::U8 => "|u1",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::BF16 => return None,
    })
}

fn dtype_of_descr(d: &str) -> Option<DType> {
    let (order, code) = d.split_at(1.min(d.len()));
    if !matches!(order, "<" | "|" | "=") {
        return None;
    }
    Some(match code {
        "b1" => DType::Bool,
        "u1" => DType::U8,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => return None,
    })
}

/// The text after `'key':` in a npy header dict, up to the next `,` at
/// depth 0 or the closing brace.
fn header_field<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
    let mut depth = 0i32;
    for (i, ch) in rest.char_indices() {
        match ch {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' | '}' if depth == 0 => return Some(rest[..i].trim()),
            _ => {}
        }
        if depth < 0 {
            return None;
        }
    }
    None
}

impl Tensor {
    /// A tensor, checking the byte length.
    pub fn new(dtype: DType, shape: Vec<u64>, bytes: Vec<u8>) -> Result<Self> {
        let numel = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let expected = numel.and_then(|n| n.checked_mul(dtype.size_bytes() as u64));
        if expected != Some(bytes.len() as u64) {
            return Err(Error::TensorBytes {
                dtype,
                shape,
                expected: expected.unwrap_or(u64::MAX),
                found: bytes.len() as u64,
            });
        }
        Ok(Self { dtype, shape, bytes })
    }

    /// An f32 tensor from values (panics if `values.len()` does not match).
    pub fn from_f32(shape: &[u64], values: &[f32]) -> Self {
        assert_eq!(shape.iter().product::<u64>(), values.len() as u64, "shape and value count disagree");
        Self { dtype: DType::F32, shape: shape.to_vec(), bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect() }
    }

    /// Number of elements.
    pub fn numel(&self) -> u64 {
        self.shape.iter().product()
    }

    /// The elements as f64 (every dtype but bf16 converts; bf16 too).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        let b = &self.bytes;
        let n = self.dtype.size_bytes();
        b.chunks_exact(n)
            .map(|c| match self.dtype {
                DType::Bool | DType::U8 => f64::from(c[0]),
                DType::I8 => f64::from(c[0] as i8),
                DType::I16 => f64::from(i16::from_le_bytes([c[0], c[1]])),
                DType::I32 => f64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                DType::I64 => i64::from_le_bytes(c.try_into().expect("8 bytes")) as f64,
                DType::F16 => f64::from(half::f16::from_le_bytes([c[0], c[1]])),
                DType::BF16 => f64::from(half::bf16::from_le_bytes([c[0], c[1]])),
                DType::F32 => f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                DType::F64 => f64::from_le_bytes(c.try_into().expect("8 bytes")),
            })
            .collect()
    }

    /// Parses `.npy` bytes.
    pub fn from_npy_bytes(data: &[u8]) -> Result<Self> {
        if data.len() < 10 || &data[..6] != b"\x93NUMPY" {
            return Err(npy_err("not a .npy file (bad magic)"));
        }
        let (header_len, start) = match data[6] {
            1 => (usize::from(u16::from_le_bytes([data[8], data[9]])), 10usize),
            2 | 3 if data.len() >= 12 => (u32::from_le_bytes([data[8], data[9], data[10], data[11]]) as usize, 12),
            v => return Err(npy_err(format!("unsupported .npy version {v}"))),
        };
        let header = data
            .get(start..start.saturating_add(header_len))
            .ok_or_else(|| npy_err("truncated header"))
            .and_then(|h| std::str::from_utf8(h).map_err(|_| npy_err("header is not UTF-8")))?;
        let d = header_field(header, "descr").ok_or_else(|| npy_err("header lacks 'descr'"))?;
        let d = d.trim_matches(|c| c == '\'' || c == '"');
        let dtype = dtype_of_descr(d).ok_or_else(|| npy_err(format!("unsupported descr {d:?}")))?;
        if header_field(header, "fortran_order") != Some("False") {
            return Err(npy_err("only C-order arrays are supported"));
        }
        let shape_text = header_field(header, "shape").ok_or_else(|| npy_err("header lacks 'shape'"))?;
        let inner = shape_text
            .strip_prefix('(')
            .and_then(|s| s.strip_suffix(')'))
            .ok_or_else(|| npy_err(format!("bad shape {shape_text:?}")))?;
        let shape = inner
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.trim_end_matches('L').parse::<u64>().map_err(|_| npy_err(format!("bad dim {s:?}"))))
            .collect::<Result<Vec<u64>>>()?;
        Self::new(dtype, shape, data[start + header_len..].to_vec())
    }

    /// Serializes as `.npy` v1.
    pub fn to_npy_bytes(&self) -> Result<Vec<u8>> {
        let d = descr(self.dtype).ok_or_else(|| npy_err(format!("{} has no .npy descr", self.dtype)))?;
        let dims: Vec<String> = self.shape.iter().map(u64::to_string).collect();
        let shape = match dims.len() {
            1 => format!("({},)", dims[0]),
            _ => format!("({})", dims.join(", ")),
        };
        let mut header = format!("{{'descr': '{d}', 'fortran_order': False, 'shape': {shape}, }}");
        while !(10 + header.len() + 1).is_multiple_of(64) {
            header.push(' ');
        }
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(&self.bytes);
        Ok(out)
    }

    /// Reads a `.npy` file.
    pub fn read_npy(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let data = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
        Self::from_npy_bytes(&data).map_err(|e| npy_err(format!("{}: {e}", path.display())))
    }

    /// Writes a `.npy` file.
    pub fn write_npy(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.to_npy_bytes()?).map_err(|source| Error::Io { path: path.to_path_buf(), source })
    }
}

/// Element bytes as a device buffer holds them: bools widen to one
/// little-endian `u32` (0 or 1, any nonzero byte is true) per element, every
/// other dtype is unchanged.
pub(crate) fn to_device_layout(bytes: Vec<u8>, dtype: DType) -> Vec<u8> {
    match dtype {
        DType::Bool => bytes.iter().flat_map(|&b| u32::from(b != 0).to_le_bytes()).collect(),
        _ => bytes,
    }
}

/// The inverse of [`to_device_layout`]: one byte (0 or 1) per bool.
pub(crate) fn from_device_layout(bytes: Vec<u8>, dtype: DType) -> Vec<u8> {
    match dtype {
        DType::Bool => bytes.chunks_exact(4).map(|c| u8::from(c != [0, 0, 0, 0])).collect(),
        _ => bytes,
    }
}

/// Converts element bytes between the host and device dtypes the runtime
/// supports (int64 <-> int32, float32 <-> float16, float64 <-> float32),
/// or `None` for any other pair. Narrowing int64 reports the first value
/// out of range as `Err(value)`.
pub(crate) fn convert(bytes: &[u8], from: DType, to: DType) -> Option<Result<Vec<u8>, i64>> {
    use DType::*;
    if from == to {
        return Some(Ok(bytes.to_vec()));
    }
    let out = match (from, to) {
        (I64, I32) => {
            let mut out = Vec::with_capacity(bytes.len() / 2);
            for c in bytes.chunks_exact(8) {
                let v = i64::from_le_bytes(c.try_into().expect("8 bytes"));
                let Ok(n) = i32::try_from(v) else { return Some(Err(v)) };
                out.extend_from_slice(&n.to_le_bytes());
            }
            out
        }
        (I32, I64) => bytes
            .chunks_exact(4)
            .flat_map(|c| i64::from(i32::from_le_bytes(c.try_into().expect("4 bytes"))).to_le_bytes())
            .collect(),
        (F32, F16) => bytes
            .chunks_exact(4)
            .flat_map(|c| half::f16::from_f32(f32::from_le_bytes(c.try_into().expect("4 bytes"))).to_le_bytes())
            .collect(),
        (F16, F32) => {
            bytes.chunks_exact(2).flat_map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32().to_le_bytes()).collect()
        }
        (F64, F32) => bytes
            .chunks_exact(8)
            .flat_map(|c| (f64::from_le_bytes(c.try_into().expect("8 bytes")) as f32).to_le_bytes())
            .collect(),
        (F32, F64) => bytes
            .chunks_exact(4)
            .flat_map(|c| f64::from(f32::from_le_bytes(c.try_into().expect("4 bytes"))).to_le_bytes())
            .collect(),
        _ => return None,
    };
    Some(Ok(out))
}
