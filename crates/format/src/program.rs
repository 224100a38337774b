//! The `.pte` container: the `eh00` header, segments, named data, and the
//! execution plans (methods) with their values, instructions and delegates.
//!
//! Over the house limit of about 600 lines: the reader follows the
//! `program.fbs` tables one by one, with a bounds check per field.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use crate::dtype::{DType, ScalarType};
use crate::error::{Error, Result, ResultExt};
use crate::fb::{Budget, FbError, Table};
use crate::generated::program as s;
use crate::ptd::ExternalData;
use crate::vulkan::{VULKAN_BACKEND_ID, VkGraph};
use crate::{DataFile, DataRef, MAX_RANK};

/// Bytes shared by a [`Program`] and everything borrowed from it: a `Vec`,
/// a memory map, a static slice.
pub type SharedBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// The decoded `eh00` extended header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtendedHeader {
    /// Bytes `[0, program_size)` are the FlatBuffer.
    pub program_size: u64,
    /// Absolute offset of segment data (0 = none).
    pub segment_base_offset: u64,
    /// Length of segment data (0 = not recorded).
    pub segment_data_size: u64,
}

/// Minimum length of the `eh00` header.
const EH_MIN_LEN: u32 = 24;

impl ExtendedHeader {
    /// Reads the header at offset 8, if the file has one.
    pub fn parse(file: &[u8]) -> Result<Option<Self>> {
        if file.len() < 8 {
            return Err(Error::Truncated { what: ".pte file", needed: 8, found: file.len() as u64 });
        }
        if file.len() < 16 || &file[8..12] != b"eh00" {
            return Ok(None);
        }
        let len = u32::from_le_bytes([file[12], file[13], file[14], file[15]]);
        if len < EH_MIN_LEN {
            return Ok(None);
        }
        let needed = 8 + u64::from(len).min(32);
        if (file.len() as u64) < needed {
            return Err(Error::Truncated { what: "eh00 header", needed, found: file.len() as u64 });
        }
        let u64_at = |at: usize| {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(&file[at..at + 8]);
            u64::from_le_bytes(raw)
        };
        let h = ExtendedHeader {
            program_size: u64_at(16),
            segment_base_offset: u64_at(24),
            segment_data_size: if len >= 32 { u64_at(32) } else { 0 },
        };
        let bad = |field, found, rule| Error::Header { header: "eh00", field, found, rule };
        if h.program_size > file.len() as u64 {
            return Err(Error::Truncated {
                what: "program FlatBuffer",
                needed: h.program_size,
                found: file.len() as u64,
            });
        }
        if h.program_size < 8 + u64::from(len) {
            return Err(bad("program_size", h.program_size, "program_size >= 8 + header_length"));
        }
        if h.segment_base_offset != 0 && h.segment_base_offset < h.program_size {
            return Err(bad("segment_base_offset", h.segment_base_offset, "segment_base_offset >= program_size"));
        }
        if h.segment_data_size != 0 {
            let end = h.segment_base_offset.checked_add(h.segment_data_size);
            if end.is_none_or(|end| end > file.len() as u64) {
                return Err(Error::Truncated {
                    what: "segment data",
                    needed: end.unwrap_or(u64::MAX),
                    found: file.len() as u64,
                });
            }
        }
        Ok(Some(h))
    }
}

/// How a tensor's shape may vary at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dynamism {
    /// Fixed shape.
    Static,
    /// Varies up to the stored sizes.
    DynamicBound,
    /// Varies without bound.
    DynamicUnbound,
}

/// Where a plan-level constant tensor's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TensorData {
    /// Not a constant (an input, output or intermediate).
    None,
    /// In the program file.
    Constant(DataRef),
    /// In external data, under this fully qualified name.
    External(String),
}

/// A tensor of the execution plan (method level, outside any delegate).
#[derive(Debug, Clone, PartialEq)]
pub struct PlanTensor {
    /// Element type code.
    pub scalar_type: ScalarType,
    /// Sizes (upper bounds when dynamic).
    pub sizes: Vec<i64>,
    /// Dim order (a permutation; identity for contiguous tensors).
    pub dim_order: Vec<u8>,
    /// Shape dynamism.
    pub dynamism: Dynamism,
    /// Constant data, if any.
    pub data: TensorData,
}

/// One value of an execution plan.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanValue {
    /// `None`.
    Null,
    /// Integer.
    Int(i64),
    /// Boolean.
    Bool(bool),
    /// Float.
    Double(f64),
    /// Tensor.
    Tensor(PlanTensor),
    /// String.
    String(String),
    /// Integer list.
    IntList(Vec<i64>),
    /// Float list.
    DoubleList(Vec<f64>),
    /// Bool list.
    BoolList(Vec<bool>),
    /// Tensors, by plan value index.
    TensorList(Vec<usize>),
    /// Optional tensors, by plan value index (`None` = absent).
    OptionalTensorList(Vec<Option<usize>>),
}

impl PlanValue {
    /// The kind's name in lower case, as `inspect` prints it.
    pub fn kind(&self) -> &'static str {
        match self {
            PlanValue::Null => "none",
            PlanValue::Int(_) => "int",
            PlanValue::Bool(_) => "bool",
            PlanValue::Double(_) => "double",
            PlanValue::Tensor(_) => "tensor",
            PlanValue::String(_) => "string",
            PlanValue::IntList(_) => "int_list",
            PlanValue::DoubleList(_) => "double_list",
            PlanValue::BoolList(_) => "bool_list",
            PlanValue::TensorList(_) => "tensor_list",
            PlanValue::OptionalTensorList(_) => "optional_tensor_list",
        }
    }
}

/// One instruction of a plan's chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instruction {
    /// Call a CPU kernel from [`Method::operators`].
    Kernel {
        /// Index into [`Method::operators`].
        op_index: usize,
        /// Plan value indices.
        args: Vec<usize>,
    },
    /// Run a delegate: args are its inputs, then its outputs.
    Delegate {
        /// Index into [`Method::delegates`].
        delegate_index: usize,
        /// Plan value indices.
        args: Vec<usize>,
    },
    /// Copy a value.
    Move {
        /// Source value.
        from: usize,
        /// Destination value.
        to: usize,
    },
    /// Jump to `destination` if the bool value `cond` is false.
    JumpFalse {
        /// Condition value.
        cond: usize,
        /// Instruction index.
        destination: usize,
    },
    /// Release a value.
    Free {
        /// The value.
        value: usize,
    },
}

/// A CPU operator named by the plan (`aten::mul` + overload `Scalar_out`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    /// Name, e.g. `aten::mul`.
    pub name: String,
    /// Overload, e.g. `out`.
    pub overload: String,
}

impl Operator {
    /// `name.overload`, or `name` when the overload is empty.
    pub fn full_name(&self) -> String {
        if self.overload.is_empty() { self.name.clone() } else { format!("{}.{}", self.name, self.overload) }
    }
}

/// A compile spec of a delegate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileSpec {
    /// Key.
    pub key: String,
    /// Raw value bytes.
    pub value: Vec<u8>,
}

/// Where a delegate's blob was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlobLocation {
    /// In `backend_delegate_data[index]`.
    Inline(usize),
    /// In `segments[index]`.
    Segment(usize),
}

/// A delegate of a method.
#[derive(Debug, Clone, PartialEq)]
pub struct Delegate {
    /// Backend id, e.g. `VulkanBackend`.
    pub backend_id: String,
    /// Compile specs.
    pub compile_specs: Vec<CompileSpec>,
    /// Where the blob was stored.
    pub location: BlobLocation,
    /// The blob's bytes in the program file.
    pub blob: Range<usize>,
    /// The parsed graph, for Vulkan delegates.
    pub graph: Option<VkGraph>,
}

/// One execution plan ("method") of a program.
#[derive(Debug, Clone, PartialEq)]
pub struct Method {
    /// Method name, e.g. `forward`.
    pub name: String,
    /// Plan values.
    pub values: Vec<PlanValue>,
    /// Input value indices.
    pub inputs: Vec<usize>,
    /// Output value indices.
    pub outputs: Vec<usize>,
    /// Instructions of the first chain (the one a method runs).
    pub instructions: Vec<Instruction>,
    /// Number of chains stored.
    pub n_chains: usize,
    /// CPU operators used by [`Instruction::Kernel`].
    pub operators: Vec<Operator>,
    /// Delegates used by [`Instruction::Delegate`].
    pub delegates: Vec<Delegate>,
}

impl Method {
    /// The Vulkan delegates, with their index.
    pub fn vulkan_delegates(&self) -> impl Iterator<Item = (usize, &Delegate, &VkGraph)> {
        self.delegates.iter().enumerate().filter_map(|(i, d)| d.graph.as_ref().map(|g| (i, d, g)))
    }

    /// Whether every instruction is a Vulkan delegate call (plus moves and
    /// frees), so the whole method can run on the GPU.
    pub fn is_fully_delegated(&self) -> bool {
        self.instructions.iter().all(|i| match i {
            Instruction::Delegate { delegate_index, .. } => self.delegates[*delegate_index].graph.is_some(),
            Instruction::Kernel { .. } | Instruction::JumpFalse { .. } => false,
            Instruction::Move { .. } | Instruction::Free { .. } => true,
        })
    }
}

/// A loaded `.pte` program: its methods and the bytes their constants live in.
#[derive(Clone)]
pub struct Program {
    file: SharedBytes,
    external: Vec<ExternalData>,
    /// The `eh00` header, when present.
    pub header: Option<ExtendedHeader>,
    /// Schema version.
    pub version: u32,
    /// Segment ranges in the file.
    pub segments: Vec<Range<usize>>,
    /// Named data of the program file: key -> bytes.
    pub named_data: BTreeMap<String, DataRef>,
    /// The methods, in file order.
    pub methods: Vec<Method>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("file_len", &self.file_bytes().len())
            .field("external", &self.external.len())
            .field("methods", &self.methods.iter().map(|m| &m.name).collect::<Vec<_>>())
            .finish()
    }
}

fn fb_err(source: FbError) -> Error {
    Error::Flatbuffer { what: "program", source }
}

fn index(what: &'static str, i: i64, len: usize) -> Result<usize> {
    if i < 0 || i as u64 >= len as u64 { Err(Error::IndexOutOfRange { what, index: i, len }) } else { Ok(i as usize) }
}

/// The range a byte vector read out of `base` occupies in `base`; an absent
/// vector is the empty range at 0.
fn range_in(base: &[u8], sub: Option<&[u8]>) -> Range<usize> {
    match sub {
        Some(sub) => {
            let start = sub.as_ptr() as usize - base.as_ptr() as usize;
            start..start + sub.len()
        }
        None => 0..0,
    }
}

impl Program {
    /// Reads a `.pte` file (one read into memory; constants borrow from it).
    ///
    /// A file that is not a well-formed program is an [`Error`] naming what
    /// is wrong and where:
    ///
    /// ```
    /// use etwgpu_format::{Error, Program};
    ///
    /// let program = Program::open("../../test_data/fixtures/one_op/model.pte")?;
    /// assert_eq!(program.methods.len(), 1);
    /// let (_, _, graph) = program.methods[0].vulkan_delegates().next().expect("delegated");
    /// assert_eq!(graph.input_ids.len(), 2);
    ///
    /// assert!(matches!(Program::open("no/such/file.pte"), Err(Error::Io { .. })));
    /// assert!(Program::from_bytes(b"not a program".to_vec()).is_err());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with_external(path, &[] as &[&Path])
    }

    /// Reads a `.pte` file plus external `.ptd` files holding named data.
    pub fn open_with_external(path: impl AsRef<Path>, ptds: &[impl AsRef<Path>]) -> Result<Self> {
        let read = |p: &Path| std::fs::read(p).map_err(|source| Error::Io { path: p.to_path_buf(), source });
        let file = read(path.as_ref())?;
        let external = ptds
            .iter()
            .map(|p| {
                let bytes = read(p.as_ref())?;
                ExternalData::from_bytes(Arc::new(bytes))
                    .context_with(|| format!("external data {}", p.as_ref().display()))
            })
            .collect::<Result<Vec<_>>>()?;
        Self::from_shared(Arc::new(file), external)
    }

    /// Parses a program held in memory.
    pub fn from_bytes(bytes: impl AsRef<[u8]> + Send + Sync + 'static) -> Result<Self> {
        Self::from_shared(Arc::new(bytes), Vec::new())
    }

    /// Parses a program from shared bytes (e.g. a memory map) with external
    /// data, which is searched after the program's own named data.
    pub fn from_shared(file: SharedBytes, external: Vec<ExternalData>) -> Result<Self> {
        let data: &[u8] = (*file).as_ref();
        let header = ExtendedHeader::parse(data)?;
        let fb = match header {
            Some(h) => &data[..h.program_size as usize],
            None => data,
        };
        if &fb[4..8] != s::FILE_IDENTIFIER {
            let found = fb[4..8].escape_ascii().to_string();
            return Err(Error::Identifier { what: ".pte program", expected: "ET12", found });
        }
        let budget = Budget::for_buffer(fb.len());
        let root = Table::root(fb, &budget).map_err(fb_err)?;
        let version = root.scalar(s::program::VERSION).map_err(fb_err)?;

        // Segments.
        let mut segments = Vec::new();
        for seg in root.tables(s::program::SEGMENTS).map_err(fb_err)?.iter() {
            let seg = seg.map_err(fb_err)?;
            let offset = seg.scalar(s::data_segment::OFFSET).map_err(fb_err)?;
            let size = seg.scalar(s::data_segment::SIZE).map_err(fb_err)?;
            let i = segments.len();
            let base = header.map_or(0, |h| h.segment_base_offset);
            let start = base.checked_add(offset);
            let end = start.and_then(|s| s.checked_add(size));
            match (start, end) {
                (Some(start), Some(end)) if header.is_some() && base != 0 && end <= data.len() as u64 => {
                    segments.push(start as usize..end as usize)
                }
                _ => {
                    return Err(Error::RangeOutOfBounds {
                        what: "segment",
                        start: start.unwrap_or(u64::MAX),
                        len: size,
                        limit: data.len() as u64,
                    }
                    .context(format!("segment {i}")));
                }
            }
        }

        // Named data of the program file.
        let mut named_data = BTreeMap::new();
        for nd in root.tables(s::program::NAMED_DATA).map_err(fb_err)?.iter() {
            let nd = nd.map_err(fb_err)?;
            let key = nd.string(s::named_data::KEY).map_err(fb_err)?.unwrap_or_default().to_string();
            let seg = nd.scalar(s::named_data::SEGMENT_INDEX).map_err(fb_err)?;
            let seg = index("named data segment index", seg.into(), segments.len())
                .context_with(|| format!("named data {key:?}"))?;
            named_data.insert(key, DataRef { file: DataFile::Program, range: segments[seg].clone() });
        }

        // Constant storage of plan tensors: the constant segment, else the
        // deprecated constant buffers.
        let constant_offsets: Option<(Range<usize>, Vec<u64>)> = match root.table(s::program::CONSTANT_SEGMENT) {
            Ok(Some(cs)) => {
                let seg = cs.scalar(s::subsegment_offsets::SEGMENT_INDEX).map_err(fb_err)?;
                let offsets = cs.vec(s::subsegment_offsets::OFFSETS).map_err(fb_err)?;
                if offsets.is_empty() {
                    None
                } else {
                    let seg = index("constant segment index", seg.into(), segments.len())?;
                    Some((segments[seg].clone(), offsets))
                }
            }
            Ok(None) => None,
            Err(e) => return Err(fb_err(e)),
        };
        let mut constant_buffers = Vec::new();
        for b in root.tables(s::program::CONSTANT_BUFFER).map_err(fb_err)?.iter() {
            let b = b.map_err(fb_err)?;
            constant_buffers.push(range_in(data, b.bytes(s::buffer::STORAGE).map_err(fb_err)?));
        }
        let constants = ConstantStorage { offsets: constant_offsets, buffers: constant_buffers };

        let mut inline = Vec::new();
        for d in root.tables(s::program::BACKEND_DELEGATE_DATA).map_err(fb_err)?.iter() {
            let d = d.map_err(fb_err)?;
            inline.push(range_in(data, d.bytes(s::backend_delegate_inline_data::DATA).map_err(fb_err)?));
        }

        let lookup = |key: &str| -> Option<DataRef> {
            named_data.get(key).cloned().or_else(|| {
                external
                    .iter()
                    .enumerate()
                    .find_map(|(i, ext)| ext.get(key).map(|range| DataRef { file: DataFile::External(i), range }))
            })
        };

        let mut methods = Vec::new();
        for (p, plan) in root.tables(s::program::EXECUTION_PLAN).map_err(fb_err)?.iter().enumerate() {
            let plan = plan.map_err(fb_err)?;
            let name = plan.string(s::execution_plan::NAME).map_err(fb_err)?.unwrap_or_default().to_string();
            let ctx = || format!("method {p} ({name:?})");
            let m = read_method(data, plan, name.clone(), &segments, &inline, &constants, &lookup).context_with(ctx)?;
            methods.push(m);
        }

        Ok(Program { file, external, header, version, segments, named_data, methods })
    }

    /// The whole program file.
    pub fn file_bytes(&self) -> &[u8] {
        (*self.file).as_ref()
    }

    /// The external data files, in the order given.
    pub fn external(&self) -> &[ExternalData] {
        &self.external
    }

    /// The bytes a [`DataRef`] points at (ranges are checked at parse time).
    pub fn data(&self, r: &DataRef) -> &[u8] {
        match r.file {
            DataFile::Program => &self.file_bytes()[r.range.clone()],
            DataFile::External(i) => &self.external[i].bytes()[r.range.clone()],
        }
    }

    /// The method with this name.
    pub fn method(&self, name: &str) -> Option<&Method> {
        self.methods.iter().find(|m| m.name == name)
    }
}

struct ConstantStorage {
    offsets: Option<(Range<usize>, Vec<u64>)>,
    buffers: Vec<Range<usize>>,
}

fn read_method(
    data: &[u8],
    plan: Table<'_>,
    name: String,
    segments: &[Range<usize>],
    inline: &[Range<usize>],
    constants: &ConstantStorage,
    lookup: &dyn Fn(&str) -> Option<DataRef>,
) -> Result<Method> {
    use s::kernel_types as k;
    let e = fb_err;
    let raw_values = plan.tables(s::execution_plan::VALUES).map_err(e)?;
    let n_values = raw_values.len();
    let vidx = |what, i: i32| index(what, i.into(), n_values);
    let mut values = Vec::with_capacity(n_values);
    for (i, v) in raw_values.iter().enumerate() {
        let v = v.map_err(e)?;
        let value = match v.union(s::e_value::VAL).map_err(e)? {
            None => PlanValue::Null,
            Some((tag, t)) => match tag {
                k::NULL => PlanValue::Null,
                k::INT => PlanValue::Int(t.scalar(s::int::INT_VAL).map_err(e)?),
                k::BOOL => PlanValue::Bool(t.scalar(s::bool::BOOL_VAL).map_err(e)?),
                k::DOUBLE => PlanValue::Double(t.scalar(s::double::DOUBLE_VAL).map_err(e)?),
                k::STRING => PlanValue::String(t.string(s::string::STRING_VAL).map_err(e)?.unwrap_or_default().into()),
                k::INT_LIST => PlanValue::IntList(t.vec(s::int_list::ITEMS).map_err(e)?),
                k::DOUBLE_LIST => PlanValue::DoubleList(t.vec(s::double_list::ITEMS).map_err(e)?),
                k::BOOL_LIST => PlanValue::BoolList(t.vec(s::bool_list::ITEMS).map_err(e)?),
                k::TENSOR_LIST => PlanValue::TensorList(
                    t.vec(s::tensor_list::ITEMS)
                        .map_err(e)?
                        .into_iter()
                        .map(|x| vidx("tensor list item", x))
                        .collect::<Result<_>>()
                        .context_with(|| format!("value {i}"))?,
                ),
                k::OPTIONAL_TENSOR_LIST => PlanValue::OptionalTensorList(
                    t.vec(s::optional_tensor_list::ITEMS)
                        .map_err(e)?
                        .into_iter()
                        .map(|x| if x < 0 { Ok(None) } else { vidx("optional tensor list item", x).map(Some) })
                        .collect::<Result<_>>()
                        .context_with(|| format!("value {i}"))?,
                ),
                k::TENSOR => PlanValue::Tensor(read_tensor(t, constants).context_with(|| format!("value {i}"))?),
                other => return Err(Error::UnknownTag { what: "EValue", tag: other }.context(format!("value {i}"))),
            },
        };
        values.push(value);
    }
    let ids = |what, list: Vec<i32>| list.into_iter().map(|x| vidx(what, x)).collect::<Result<Vec<_>>>();
    let inputs = ids("method input", plan.vec(s::execution_plan::INPUTS).map_err(e)?)?;
    let outputs = ids("method output", plan.vec(s::execution_plan::OUTPUTS).map_err(e)?)?;

    let mut operators = Vec::new();
    for op in plan.tables(s::execution_plan::OPERATORS).map_err(e)?.iter() {
        let op = op.map_err(e)?;
        operators.push(Operator {
            name: op.string(s::operator::NAME).map_err(e)?.unwrap_or_default().to_string(),
            overload: op.string(s::operator::OVERLOAD).map_err(e)?.unwrap_or_default().to_string(),
        });
    }

    let mut delegates = Vec::new();
    for (d, del) in plan.tables(s::execution_plan::DELEGATES).map_err(e)?.iter().enumerate() {
        let del = del.map_err(e)?;
        let ctx = || format!("delegate {d}");
        let backend_id = del.string(s::backend_delegate::ID).map_err(e)?.unwrap_or_default().to_string();
        let mut compile_specs = Vec::new();
        for cs in del.tables(s::backend_delegate::COMPILE_SPECS).map_err(e)?.iter() {
            let cs = cs.map_err(e)?;
            compile_specs.push(CompileSpec {
                key: cs.string(s::compile_spec::KEY).map_err(e)?.unwrap_or_default().to_string(),
                value: cs.bytes(s::compile_spec::VALUE).map_err(e)?.unwrap_or_default().to_vec(),
            });
        }
        let processed = del
            .table(s::backend_delegate::PROCESSED)
            .map_err(e)?
            .ok_or(Error::MissingField { field: "BackendDelegate.processed" })
            .context_with(ctx)?;
        let loc = processed.scalar(s::backend_delegate_data_reference::LOCATION).map_err(e)?;
        let idx = processed.scalar(s::backend_delegate_data_reference::INDEX).map_err(e)?;
        let (location, blob) = match loc {
            s::data_location::INLINE => {
                let i = index("inline delegate data index", idx.into(), inline.len()).context_with(ctx)?;
                (BlobLocation::Inline(i), inline[i].clone())
            }
            s::data_location::SEGMENT => {
                let i = index("delegate segment index", idx.into(), segments.len()).context_with(ctx)?;
                (BlobLocation::Segment(i), segments[i].clone())
            }
            other => {
                return Err(Error::UnknownTag { what: "DataLocation", tag: other as u8 }.context(ctx()));
            }
        };
        let graph = if backend_id == VULKAN_BACKEND_ID {
            Some(VkGraph::parse(&data[blob.clone()], blob.start, lookup).context_with(ctx)?)
        } else {
            None
        };
        delegates.push(Delegate { backend_id, compile_specs, location, blob, graph });
    }

    let chains = plan.tables(s::execution_plan::CHAINS).map_err(e)?;
    let mut instructions = Vec::new();
    if !chains.is_empty() {
        let chain = chains.get(0).map_err(e)?;
        for (n, ins) in chain.tables(s::chain::INSTRUCTIONS).map_err(e)?.iter().enumerate() {
            let ins = ins.map_err(e)?;
            let instr =
                read_instruction(ins, n_values, &operators, &delegates).context_with(|| format!("instruction {n}"))?;
            instructions.push(instr);
        }
        let n = instructions.len();
        for (i, ins) in instructions.iter().enumerate() {
            if let Instruction::JumpFalse { destination, .. } = ins
                && *destination > n
            {
                return Err(Error::IndexOutOfRange { what: "jump destination", index: *destination as i64, len: n }
                    .context(format!("instruction {i}")));
            }
        }
    }

    Ok(Method { name, values, inputs, outputs, instructions, n_chains: chains.len(), operators, delegates })
}

fn read_instruction(
    ins: Table<'_>,
    n_values: usize,
    operators: &[Operator],
    delegates: &[Delegate],
) -> Result<Instruction> {
    use s::instruction_arguments as ia;
    let e = fb_err;
    let vidx = |what, i: i32| index(what, i.into(), n_values);
    let args = |t: Table<'_>, f| -> Result<Vec<usize>> {
        t.vec(f).map_err(e)?.into_iter().map(|x| vidx("argument value index", x)).collect()
    };
    let Some((tag, t)) = ins.union(s::instruction::INSTR_ARGS).map_err(e)? else {
        return Err(Error::MissingField { field: "Instruction.instr_args" });
    };
    Ok(match tag {
        ia::KERNEL_CALL => Instruction::Kernel {
            op_index: index("operator index", t.scalar(s::kernel_call::OP_INDEX).map_err(e)?.into(), operators.len())?,
            args: args(t, s::kernel_call::ARGS)?,
        },
        ia::DELEGATE_CALL => {
            let d = index(
                "delegate index",
                t.scalar(s::delegate_call::DELEGATE_INDEX).map_err(e)?.into(),
                delegates.len(),
            )?;
            let args = args(t, s::delegate_call::ARGS)?;
            if let Some(g) = &delegates[d].graph {
                let expected = g.input_ids.len() + g.output_ids.len();
                if args.len() != expected {
                    return Err(Error::DelegateArity { delegate: d, expected, found: args.len() });
                }
            }
            Instruction::Delegate { delegate_index: d, args }
        }
        ia::MOVE_CALL => Instruction::Move {
            from: vidx("move source", t.scalar(s::move_call::MOVE_FROM).map_err(e)?)?,
            to: vidx("move destination", t.scalar(s::move_call::MOVE_TO).map_err(e)?)?,
        },
        ia::JUMP_FALSE_CALL => Instruction::JumpFalse {
            cond: vidx("jump condition", t.scalar(s::jump_false_call::COND_VALUE_INDEX).map_err(e)?)?,
            destination: {
                let d = t.scalar(s::jump_false_call::DESTINATION_INSTRUCTION).map_err(e)?;
                usize::try_from(d).map_err(|_| Error::IndexOutOfRange {
                    what: "jump destination",
                    index: d.into(),
                    len: 0,
                })?
            },
        },
        ia::FREE_CALL => {
            Instruction::Free { value: vidx("freed value", t.scalar(s::free_call::VALUE_INDEX).map_err(e)?)? }
        }
        other => return Err(Error::UnknownTag { what: "InstructionArguments", tag: other }),
    })
}

fn read_tensor(t: Table<'_>, constants: &ConstantStorage) -> Result<PlanTensor> {
    let e = fb_err;
    let scalar_type = ScalarType(t.scalar(s::tensor::SCALAR_TYPE).map_err(e)?);
    let sizes: Vec<i64> = t.vec(s::tensor::SIZES).map_err(e)?.into_iter().map(i64::from).collect();
    let bad_shape = |problem| Error::BadShape { dims: sizes.clone(), problem };
    if sizes.len() > MAX_RANK {
        return Err(bad_shape(crate::error::ShapeProblem::RankTooLarge));
    }
    if sizes.iter().any(|&d| d < 0) {
        return Err(bad_shape(crate::error::ShapeProblem::NegativeDim));
    }
    let dim_order = t.vec(s::tensor::DIM_ORDER).map_err(e)?;
    let dynamism = match t.scalar(s::tensor::SHAPE_DYNAMISM).map_err(e)? {
        s::tensor_shape_dynamism::DYNAMIC_BOUND => Dynamism::DynamicBound,
        s::tensor_shape_dynamism::DYNAMIC_UNBOUND => Dynamism::DynamicUnbound,
        _ => Dynamism::Static,
    };
    let extra = t.table(s::tensor::EXTRA_TENSOR_INFO).map_err(e)?;
    let external = match extra {
        Some(x) if x.scalar(s::extra_tensor_info::LOCATION).map_err(e)? == s::tensor_data_location::EXTERNAL => {
            Some(x.string(s::extra_tensor_info::FULLY_QUALIFIED_NAME).map_err(e)?.unwrap_or_default().to_string())
        }
        _ => None,
    };
    let buffer_idx = t.scalar(s::tensor::DATA_BUFFER_IDX).map_err(e)? as usize;
    let has_alloc = t.table(s::tensor::ALLOCATION_INFO).map_err(e)?.is_some();
    let data = if let Some(fqn) = external {
        TensorData::External(fqn)
    } else if buffer_idx > 0 && !has_alloc {
        let elem = scalar_type.dtype().map_or(1, DType::size_bytes) as u64;
        let n_bytes = sizes
            .iter()
            .try_fold(elem, |acc, &d| acc.checked_mul(d as u64))
            .ok_or_else(|| bad_shape(crate::error::ShapeProblem::Overflow))?;
        let range = match &constants.offsets {
            Some((seg, offsets)) => {
                let off = *offsets.get(buffer_idx).ok_or(Error::IndexOutOfRange {
                    what: "constant buffer index",
                    index: buffer_idx as i64,
                    len: offsets.len(),
                })?;
                let end = off.checked_add(n_bytes);
                if end.is_none_or(|end| end > seg.len() as u64) {
                    return Err(Error::RangeOutOfBounds {
                        what: "constant tensor in the constant segment",
                        start: off,
                        len: n_bytes,
                        limit: seg.len() as u64,
                    });
                }
                seg.start + off as usize..seg.start + (off + n_bytes) as usize
            }
            None => {
                let buf = constants.buffers.get(buffer_idx).ok_or(Error::IndexOutOfRange {
                    what: "constant buffer index",
                    index: buffer_idx as i64,
                    len: constants.buffers.len(),
                })?;
                if n_bytes > buf.len() as u64 {
                    return Err(Error::RangeOutOfBounds {
                        what: "constant tensor in its buffer",
                        start: 0,
                        len: n_bytes,
                        limit: buf.len() as u64,
                    });
                }
                buf.start..buf.start + n_bytes as usize
            }
        };
        TensorData::Constant(DataRef { file: DataFile::Program, range })
    } else {
        TensorData::None
    };
    Ok(PlanTensor { scalar_type, sizes, dim_order, dynamism, data })
}
