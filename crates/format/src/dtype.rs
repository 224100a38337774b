//! Element types, and their codes in the program and VK00 schemas.

use crate::generated::{scalar_type::scalar_type as st, vk_graph::vk_data_type as vk};

/// An element type that etwgpu can hold in a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// 1-byte boolean.
    Bool,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE single precision.
    F32,
    /// IEEE double precision.
    F64,
}

impl DType {
    /// Bytes per element.
    pub const fn size_bytes(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    /// The name PyTorch gives this dtype (`float32`, `int64`, `bool`, ...).
    pub const fn torch_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// Parses a PyTorch dtype name (as [`DType::torch_name`] writes it).
    pub fn from_torch_name(name: &str) -> Option<Self> {
        ALL.iter().copied().find(|d| d.torch_name() == name)
    }

    /// Whether this is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// Decodes a VK00 `VkDataType` code (`UNSET` is not a dtype).
    pub fn from_vk(code: i8) -> Option<Self> {
        Some(match code {
            vk::BOOL => DType::Bool,
            vk::UINT8 => DType::U8,
            vk::INT8 => DType::I8,
            vk::INT32 => DType::I32,
            vk::FLOAT16 => DType::F16,
            vk::FLOAT32 => DType::F32,
            vk::FLOAT64 => DType::F64,
            vk::INT64 => DType::I64,
            _ => return None,
        })
    }

    /// The VK00 `VkDataType` code, if VK00 can express this dtype.
    pub fn to_vk(self) -> Option<i8> {
        Some(match self {
            DType::Bool => vk::BOOL,
            DType::U8 => vk::UINT8,
            DType::I8 => vk::INT8,
            DType::I32 => vk::INT32,
            DType::F16 => vk::FLOAT16,
            DType::F32 => vk::FLOAT32,
            DType::F64 => vk::FLOAT64,
            DType::I64 => vk::INT64,
            DType::I16 | DType::BF16 => return None,
        })
    }

    /// Decodes a program `ScalarType` code, for the types etwgpu holds.
    pub fn from_scalar_type(code: i8) -> Option<Self> {
        Some(match code {
            st::BYTE => DType::U8,
            st::CHAR => DType::I8,
            st::SHORT => DType::I16,
            st::INT => DType::I32,
            st::LONG => DType::I64,
            st::HALF => DType::F16,
            st::FLOAT => DType::F32,
            st::DOUBLE => DType::F64,
            st::BOOL => DType::Bool,
            st::BFLOAT16 => DType::BF16,
            _ => return None,
        })
    }

    /// The program `ScalarType` code of this dtype.
    pub fn to_scalar_type(self) -> i8 {
        match self {
            DType::U8 => st::BYTE,
            DType::I8 => st::CHAR,
            DType::I16 => st::SHORT,
            DType::I32 => st::INT,
            DType::I64 => st::LONG,
            DType::F16 => st::HALF,
            DType::F32 => st::FLOAT,
            DType::F64 => st::DOUBLE,
            DType::Bool => st::BOOL,
            DType::BF16 => st::BFLOAT16,
        }
    }
}

/// Every [`DType`].
pub const ALL: [DType; 10] = [
    DType::Bool,
    DType::U8,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
];

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.torch_name())
    }
}

/// A program `ScalarType` code, which may name a type etwgpu cannot hold
/// (quantized and float8 types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ScalarType(pub i8);

impl ScalarType {
    /// The dtype, when etwgpu can hold it.
    pub fn dtype(self) -> Option<DType> {
        DType::from_scalar_type(self.0)
    }

    /// PyTorch's name where it has a [`DType`], else the schema name in
    /// lower case (`qint8`, `float8e4m3fn`), else `scalar_type(N)`.
    pub fn name(self) -> String {
        match (self.dtype(), st::name(self.0)) {
            (Some(d), _) => d.torch_name().to_string(),
            (None, Some(n)) => n.to_ascii_lowercase(),
            (None, None) => format!("scalar_type({})", self.0),
        }
    }
}
