//! The Vulkan delegate blob: the `VH00` header and the `VK00` graph.

use std::ops::Range;

use crate::dtype::DType;
use crate::error::{Error, Result, ShapeProblem};
use crate::fb::Table;
use crate::generated::vk_graph as s;
use crate::{DataRef, MAX_RANK};

/// Backend id of the Vulkan delegate.
pub const VULKAN_BACKEND_ID: &str = "VulkanBackend";

/// Size of the VH00 header as written (padded to 16).
pub const VH00_HEADER_LEN: usize = 32;
/// The `header_size` field the exporter writes.
pub const VH00_HEADER_SIZE: u16 = 30;

/// The decoded `VH00` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VhHeader {
    /// `header_size` field.
    pub header_size: u16,
    /// Where the VK00 FlatBuffer starts in the blob.
    pub flatbuffer_offset: u32,
    /// Its length.
    pub flatbuffer_size: u32,
    /// Where the raw constant bytes start.
    pub bytes_offset: u32,
    /// Their length as stored (0 may mean "to the end of the blob").
    pub bytes_size: u64,
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(raw)
}

impl VhHeader {
    /// Parses and validates the header of a delegate blob, returning it with
    /// the byte ranges of the FlatBuffer and of the constant bytes section.
    pub fn parse(blob: &[u8]) -> Result<(Self, Range<usize>, Range<usize>)> {
        if blob.len() < 30 {
            return Err(Error::Truncated { what: "VH00 header", needed: 30, found: blob.len() as u64 });
        }
        if &blob[4..8] != b"VH00" {
            return Err(Error::Identifier {
                what: "Vulkan delegate blob",
                expected: "VH00",
                found: blob[4..8].escape_ascii().to_string(),
            });
        }
        let h = VhHeader {
            header_size: le_u16(blob, 8),
            flatbuffer_offset: le_u32(blob, 10),
            flatbuffer_size: le_u32(blob, 14),
            bytes_offset: le_u32(blob, 18),
            bytes_size: le_u64(blob, 22),
        };
        let bad = |field, found: u64, rule| Error::Header { header: "VH00", field, found, rule };
        if h.header_size < 30 {
            return Err(bad("header_size", h.header_size.into(), "header_size >= 30"));
        }
        if h.flatbuffer_offset < u32::from(h.header_size) {
            return Err(bad("flatbuffer_offset", h.flatbuffer_offset.into(), "flatbuffer_offset >= header_size"));
        }
        if h.flatbuffer_size == 0 {
            return Err(bad("flatbuffer_size", 0, "flatbuffer_size > 0"));
        }
        let fb_end = u64::from(h.flatbuffer_offset) + u64::from(h.flatbuffer_size);
        if fb_end > blob.len() as u64 {
            return Err(Error::RangeOutOfBounds {
                what: "VK00 FlatBuffer",
                start: h.flatbuffer_offset.into(),
                len: h.flatbuffer_size.into(),
                limit: blob.len() as u64,
            });
        }
        if u64::from(h.bytes_offset) < fb_end {
            return Err(bad(
                "bytes_offset",
                h.bytes_offset.into(),
                "bytes_offset >= flatbuffer_offset + flatbuffer_size",
            ));
        }
        let bytes_len = if h.bytes_size == 0 {
            (blob.len() as u64).saturating_sub(u64::from(h.bytes_offset))
        } else {
            h.bytes_size
        };
        let bytes_end = u64::from(h.bytes_offset).checked_add(bytes_len);
        if bytes_end.is_none_or(|end| end > blob.len() as u64) {
            return Err(Error::RangeOutOfBounds {
                what: "VH00 bytes section",
                start: h.bytes_offset.into(),
                len: bytes_len,
                limit: blob.len() as u64,
            });
        }
        let fb = h.flatbuffer_offset as usize..fb_end as usize;
        let bytes = h.bytes_offset as usize..(u64::from(h.bytes_offset) + bytes_len) as usize;
        Ok((h, fb, bytes))
    }
}

/// Index of a value in a VK00 graph's value table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl ValueId {
    /// As a `usize` index.
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}

impl std::fmt::Display for ValueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// Index into a VK00 graph's constant table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConstantId(pub u32);

/// One entry of the VK00 value table.
#[derive(Debug, Clone, PartialEq)]
pub enum VkValue {
    /// `None` (also stands for dtype/layout/device objects).
    Null,
    /// An integer scalar.
    Int(i64),
    /// A floating-point scalar.
    Double(f64),
    /// A boolean scalar.
    Bool(bool),
    /// A tensor.
    Tensor(VkTensor),
    /// A literal integer list.
    IntList(Vec<i64>),
    /// A literal float list.
    DoubleList(Vec<f64>),
    /// A literal bool list.
    BoolList(Vec<bool>),
    /// A list of other values (tensors, `Null`s, Ints, SymInts).
    ValueList(Vec<ValueId>),
    /// A string.
    String(String),
    /// A runtime integer (its stored value is a placeholder).
    SymInt(i32),
}

impl VkValue {
    /// The kind's name, for messages: `Tensor`, `Int`, `ValueList`, ...
    pub fn kind(&self) -> &'static str {
        match self {
            VkValue::Null => "Null",
            VkValue::Int(_) => "Int",
            VkValue::Double(_) => "Double",
            VkValue::Bool(_) => "Bool",
            VkValue::Tensor(_) => "Tensor",
            VkValue::IntList(_) => "IntList",
            VkValue::DoubleList(_) => "DoubleList",
            VkValue::BoolList(_) => "BoolList",
            VkValue::ValueList(_) => "ValueList",
            VkValue::String(_) => "String",
            VkValue::SymInt(_) => "SymInt",
        }
    }

    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&VkTensor> {
        match self {
            VkValue::Tensor(t) => Some(t),
            _ => None,
        }
    }
}

/// A tensor value of a VK00 graph. Dense, row-major in `dims` order.
#[derive(Debug, Clone, PartialEq)]
pub struct VkTensor {
    /// Element type on the device.
    pub dtype: DType,
    /// Shape (the upper bound when shapes are dynamic); empty for a scalar.
    pub dims: Vec<u64>,
    /// The constant holding this tensor's (initial) contents.
    pub constant: Option<ConstantId>,
    /// Shared memory object chosen by the exporter's planner.
    pub mem_obj_id: Option<u32>,
    /// Vulkan storage-type hint (255 = default); ignored by etwgpu.
    pub storage_type: u8,
    /// Vulkan memory-layout hint (255 = default); ignored by etwgpu.
    pub memory_layout: u8,
    /// Element type for host copies of graph inputs and outputs, when it
    /// differs from `dtype`'s declaration (`None` = same as `dtype`).
    pub staging_dtype: Option<DType>,
}

impl VkTensor {
    /// Number of elements at the stored (maximum) shape.
    pub fn numel(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Bytes at the stored (maximum) shape.
    pub fn size_bytes(&self) -> u64 {
        self.numel() * self.dtype.size_bytes() as u64
    }

    /// The dtype used for host I/O.
    pub fn io_dtype(&self) -> DType {
        self.staging_dtype.unwrap_or(self.dtype)
    }
}

/// Where a constant's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConstantSource {
    /// A range of the VH00 bytes section (the range is in the program file).
    DelegateBytes(DataRef),
    /// Named data, found in the program or an external `.ptd`.
    Named {
        /// The key (a SHA-256 hex digest for exported files).
        key: String,
        /// Where it was found.
        data: DataRef,
    },
    /// Named data whose key is in neither the program nor any `.ptd` given.
    Missing {
        /// The key looked for.
        key: String,
    },
}

/// One entry of the VK00 constant table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constant {
    /// Byte length as stored.
    pub len: u64,
    /// Where the bytes are.
    pub source: ConstantSource,
}

impl Constant {
    /// The location of the bytes, when resolved.
    pub fn data(&self) -> Option<&DataRef> {
        match &self.source {
            ConstantSource::DelegateBytes(d) | ConstantSource::Named { data: d, .. } => Some(d),
            ConstantSource::Missing { .. } => None,
        }
    }
}

/// One operator call of the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpCall {
    /// Debug handle from the exporter.
    pub node_id: u32,
    /// ExecuTorch op name, e.g. `aten.add.Tensor`.
    pub name: String,
    /// Argument value ids in schema order, the output last.
    pub args: Vec<ValueId>,
}

/// A parsed VK00 graph.
#[derive(Debug, Clone, PartialEq)]
pub struct VkGraph {
    /// The `VH00` header it came with.
    pub header: VhHeader,
    /// Schema version string.
    pub version: String,
    /// The value table; a [`ValueId`] indexes it.
    pub values: Vec<VkValue>,
    /// The operator calls in execution order.
    pub chain: Vec<OpCall>,
    /// Graph inputs.
    pub input_ids: Vec<ValueId>,
    /// Graph outputs.
    pub output_ids: Vec<ValueId>,
    /// Constant table; [`VkTensor::constant`] indexes it.
    pub constants: Vec<Constant>,
    /// Number of custom shaders stored (always 0 from current exporters).
    pub n_shaders: usize,
}

impl VkGraph {
    /// The value with this id (ids are validated at parse time).
    pub fn value(&self, id: ValueId) -> &VkValue {
        &self.values[id.idx()]
    }

    /// The tensor with this id, or an error naming the kind found.
    pub fn tensor(&self, id: ValueId) -> Result<&VkTensor> {
        match self.value(id) {
            VkValue::Tensor(t) => Ok(t),
            other => Err(Error::ValueKind { id: id.0, expected: "Tensor", found: other.kind() }),
        }
    }

    /// Parses a VK00 graph out of a delegate blob.
    ///
    /// `blob_at` is where the blob starts in the program file (so constant
    /// ranges can be expressed in file offsets); `named` looks keys up in
    /// the program's named data and any external data.
    pub fn parse(blob: &[u8], blob_at: usize, named: &dyn Fn(&str) -> Option<DataRef>) -> Result<Self> {
        let (header, fb_range, bytes_range) = VhHeader::parse(blob)?;
        let fb = &blob[fb_range];
        if fb.len() < 8 {
            return Err(Error::Truncated { what: "VK00 FlatBuffer", needed: 8, found: fb.len() as u64 });
        }
        if &fb[4..8] != s::FILE_IDENTIFIER {
            return Err(Error::Identifier {
                what: "Vulkan delegate graph",
                expected: "VK00",
                found: fb[4..8].escape_ascii().to_string(),
            });
        }
        let fbe = |source| Error::Flatbuffer { what: "VK00 graph", source };
        let budget = crate::fb::Budget::for_buffer(fb.len());
        let root = Table::root(fb, &budget).map_err(fbe)?;
        let raw = read_graph(root).map_err(fbe)?;
        let bytes_at = blob_at + bytes_range.start;
        let bytes_len = bytes_range.len() as u64;

        let mut constants = Vec::with_capacity(raw.constants.len());
        for (i, (offset, len, key)) in raw.constants.into_iter().enumerate() {
            let source = if offset == u64::MAX {
                let key = key.unwrap_or_default();
                match named(&key) {
                    Some(data) => ConstantSource::Named { key, data },
                    None => ConstantSource::Missing { key },
                }
            } else {
                if offset.checked_add(len).is_none_or(|end| end > bytes_len) {
                    return Err(Error::RangeOutOfBounds {
                        what: "constant in the VH00 bytes section",
                        start: offset,
                        len,
                        limit: bytes_len,
                    }
                    .context(format!("constant {i}")));
                }
                let start = bytes_at + offset as usize;
                ConstantSource::DelegateBytes(DataRef {
                    file: crate::DataFile::Program,
                    range: start..start + len as usize,
                })
            };
            constants.push(Constant { len, source });
        }

        let n_values = raw.values.len();
        let check_id = |what: &'static str, id: i64| -> Result<ValueId> {
            if id < 0 || id as u64 >= n_values as u64 {
                Err(Error::IndexOutOfRange { what, index: id, len: n_values })
            } else {
                Ok(ValueId(id as u32))
            }
        };
        let mut values = Vec::with_capacity(n_values);
        for (i, rv) in raw.values.into_iter().enumerate() {
            let ctx = |e: Error| e.context(format!("value {i}"));
            let v = match rv {
                RawValue::Ready(v) => v,
                RawValue::List(items) => VkValue::ValueList(
                    items
                        .into_iter()
                        .map(|x| check_id("value id in a ValueList", x.into()))
                        .collect::<Result<_>>()
                        .map_err(ctx)?,
                ),
                RawValue::Tensor { datatype, dims, constant_id, mem_obj_id, storage_type, memory_layout, staging } => {
                    let dtype = DType::from_vk(datatype)
                        .ok_or(Error::UnknownDType { what: "VK00 datatype", code: datatype.into() })
                        .map_err(ctx)?;
                    let staging_dtype = match staging {
                        s::vk_data_type::UNSET => None,
                        code => Some(
                            DType::from_vk(code)
                                .ok_or(Error::UnknownDType { what: "VK00 staging_datatype", code: code.into() })
                                .map_err(ctx)?,
                        ),
                    };
                    let dims: Vec<u64> = dims.into_iter().map(u64::from).collect();
                    checked_size_bytes(&dims, dtype).map_err(ctx)?;
                    let constant = if constant_id < 0 {
                        None
                    } else {
                        if constant_id as usize >= constants.len() {
                            return Err(ctx(Error::IndexOutOfRange {
                                what: "constant id",
                                index: constant_id.into(),
                                len: constants.len(),
                            }));
                        }
                        Some(ConstantId(constant_id as u32))
                    };
                    VkValue::Tensor(VkTensor {
                        dtype,
                        dims,
                        constant,
                        mem_obj_id: u32::try_from(mem_obj_id).ok(),
                        storage_type,
                        memory_layout,
                        staging_dtype,
                    })
                }
            };
            values.push(v);
        }
        // Lists may not nest: that rules out cycles through value lists.
        for (i, v) in values.iter().enumerate() {
            if let VkValue::ValueList(items) = v
                && let Some(inner) = items.iter().find(|id| matches!(values[id.idx()], VkValue::ValueList(_)))
            {
                return Err(Error::ValueKind { id: inner.0, expected: "a non-list value", found: "ValueList" }
                    .context(format!("value list {i}")));
            }
            if let VkValue::Tensor(t) = v
                && let Some(c) = t.constant
            {
                let needed = t.size_bytes();
                let found = constants[c.0 as usize].len;
                if found < needed {
                    return Err(Error::ConstantTooShort { constant_id: c.0, value_id: i as u32, needed, found });
                }
            }
        }
        let mut chain = Vec::with_capacity(raw.chain.len());
        for (n, (node_id, name, args)) in raw.chain.into_iter().enumerate() {
            let args = args
                .into_iter()
                .map(|a| check_id("argument value id", a.into()))
                .collect::<Result<Vec<_>>>()
                .map_err(|e| e.context(format!("operator call {n} ({name})")))?;
            chain.push(OpCall { node_id, name, args });
        }
        let ids = |what, list: Vec<u32>| list.into_iter().map(|x| check_id(what, x.into())).collect::<Result<Vec<_>>>();
        Ok(VkGraph {
            header,
            version: raw.version,
            values,
            chain,
            input_ids: ids("graph input id", raw.input_ids)?,
            output_ids: ids("graph output id", raw.output_ids)?,
            constants,
            n_shaders: raw.n_shaders,
        })
    }
}

/// Checks a shape and returns its byte size.
pub(crate) fn checked_size_bytes(dims: &[u64], dtype: DType) -> Result<u64> {
    let bad = |problem| Error::BadShape { dims: dims.iter().map(|&d| d as i64).collect(), problem };
    if dims.len() > MAX_RANK {
        return Err(bad(ShapeProblem::RankTooLarge));
    }
    dims.iter()
        .try_fold(dtype.size_bytes() as u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| bad(ShapeProblem::Overflow))
}

enum RawValue {
    Ready(VkValue),
    List(Vec<i32>),
    Tensor {
        datatype: i8,
        dims: Vec<u32>,
        constant_id: i32,
        mem_obj_id: i32,
        storage_type: u8,
        memory_layout: u8,
        staging: i8,
    },
}

struct RawGraph {
    version: String,
    values: Vec<RawValue>,
    chain: Vec<(u32, String, Vec<i32>)>,
    input_ids: Vec<u32>,
    output_ids: Vec<u32>,
    constants: Vec<(u64, u64, Option<String>)>,
    n_shaders: usize,
}

fn read_graph(root: Table<'_>) -> std::result::Result<RawGraph, crate::fb::FbError> {
    use s::graph_types as g;
    let version = root.string(s::vk_graph::VERSION)?.unwrap_or_default().to_string();
    let mut chain = Vec::new();
    for t in root.tables(s::vk_graph::CHAIN)?.iter() {
        let t = t?;
        chain.push((
            t.scalar(s::operator_call::NODE_ID)?,
            t.string(s::operator_call::NAME)?.unwrap_or_default().to_string(),
            t.vec(s::operator_call::ARGS)?,
        ));
    }
    let mut values = Vec::new();
    for t in root.tables(s::vk_graph::VALUES)?.iter() {
        let t = t?;
        let v = match t.union(s::vk_value::VALUE)? {
            None => RawValue::Ready(VkValue::Null),
            Some((tag, v)) => match tag {
                g::NULL => RawValue::Ready(VkValue::Null),
                g::INT => RawValue::Ready(VkValue::Int(v.scalar(s::int::INT_VAL)?)),
                g::DOUBLE => RawValue::Ready(VkValue::Double(v.scalar(s::double::DOUBLE_VAL)?)),
                g::BOOL => RawValue::Ready(VkValue::Bool(v.scalar(s::bool::BOOL_VAL)?)),
                g::VK_TENSOR => RawValue::Tensor {
                    datatype: v.scalar(s::vk_tensor::DATATYPE)?,
                    dims: v.vec(s::vk_tensor::DIMS)?,
                    constant_id: v.scalar(s::vk_tensor::CONSTANT_ID)?,
                    mem_obj_id: v.scalar(s::vk_tensor::MEM_OBJ_ID)?,
                    storage_type: v.scalar(s::vk_tensor::STORAGE_TYPE)?,
                    memory_layout: v.scalar(s::vk_tensor::MEMORY_LAYOUT)?,
                    staging: v.scalar(s::vk_tensor::STAGING_DATATYPE)?,
                },
                g::INT_LIST => RawValue::Ready(VkValue::IntList(v.vec(s::int_list::ITEMS)?)),
                g::DOUBLE_LIST => RawValue::Ready(VkValue::DoubleList(v.vec(s::double_list::ITEMS)?)),
                g::BOOL_LIST => RawValue::Ready(VkValue::BoolList(v.vec(s::bool_list::ITEMS)?)),
                g::VALUE_LIST => RawValue::List(v.vec(s::value_list::ITEMS)?),
                g::STRING => {
                    RawValue::Ready(VkValue::String(v.string(s::string::STRING_VAL)?.unwrap_or_default().to_string()))
                }
                g::SYM_INT => RawValue::Ready(VkValue::SymInt(v.scalar(s::sym_int::VALUE)?)),
                other => {
                    return Err(crate::fb::FbError {
                        field: "VkValue.value",
                        offset: t.offset(),
                        problem: crate::fb::FbProblem::UnknownUnionTag(other),
                    });
                }
            },
        };
        values.push(v);
    }
    let mut constants = Vec::new();
    for t in root.tables(s::vk_graph::CONSTANTS)?.iter() {
        let t = t?;
        constants.push((
            t.scalar(s::vk_bytes::OFFSET)?,
            t.scalar(s::vk_bytes::LENGTH)?,
            t.string(s::vk_bytes::NAMED_KEY)?.map(str::to_string),
        ));
    }
    Ok(RawGraph {
        version,
        values,
        chain,
        input_ids: root.vec(s::vk_graph::INPUT_IDS)?,
        output_ids: root.vec(s::vk_graph::OUTPUT_IDS)?,
        constants,
        n_shaders: root.tables(s::vk_graph::SHADERS)?.len(),
    })
}
