//! Builds `.pte` files with Vulkan delegates, for tests, hostile inputs and
//! synthetic benchmark models.
//!
//! Over the house limit of about 600 lines: one writer per FlatBuffer table of
//! the `.pte`, `VK00` and `.ptd` formats, which share one builder.
//!
//! The builders take raw schema values (dtype codes, ids as integers), so a
//! test can write anything the schema can express, valid or not. The layout
//! follows the exporter: `eh00` header, segments aligned to 128 bytes,
//! constants as named data keyed by the SHA-256 of their bytes, and the
//! VK00 graph inside a `VH00` blob.
//!
//! ```
//! use etwgpu_format::{DType, Program, writer::{GraphBuilder, ProgramBuilder}};
//!
//! let mut g = GraphBuilder::new();
//! let x = g.tensor(DType::F32, &[2, 3]);
//! let y = g.tensor(DType::F32, &[2, 3]);
//! let alpha = g.int(1);
//! let out = g.tensor(DType::F32, &[2, 3]);
//! g.op("aten.add.Tensor", &[x, y, alpha, out]);
//! g.inputs(&[x, y]).outputs(&[out]);
//! let bytes = ProgramBuilder::single_delegate(g).to_bytes();
//! let program = Program::from_bytes(bytes)?;
//! assert_eq!(program.methods[0].name, "forward");
//! # Ok::<(), etwgpu_format::Error>(())
//! ```

use flatbuffers::{FlatBufferBuilder, Push, WIPOffset};
use sha2::{Digest, Sha256};

use crate::dtype::DType;
use crate::fb::{Offset, Scalar, Str, Union};
use crate::generated::{program as p, vk_graph as v};
use crate::vulkan::{VH00_HEADER_LEN, VH00_HEADER_SIZE, VULKAN_BACKEND_ID, ValueId};

type Fbb<'a> = FlatBufferBuilder<'a>;
type Done = WIPOffset<flatbuffers::TableFinishedWIPOffset>;

fn voff(slot: u16) -> u16 {
    4 + 2 * slot
}
fn put<T: Push + PartialEq + Copy>(fbb: &mut Fbb<'_>, f: Scalar<T>, x: T) {
    fbb.push_slot(voff(f.slot), x, f.default);
}
fn put_off<K: ?Sized, T>(fbb: &mut Fbb<'_>, f: Offset<K>, x: WIPOffset<T>) {
    fbb.push_slot_always(voff(f.slot), x);
}
fn put_union(fbb: &mut Fbb<'_>, f: Union, tag: u8, x: Done) {
    fbb.push_slot(voff(f.slot), tag, 0u8);
    fbb.push_slot_always(voff(f.slot + 1), x);
}
fn string(fbb: &mut Fbb<'_>, f: Offset<Str>, s: &str) -> (Offset<Str>, WIPOffset<&'static str>) {
    let off = fbb.create_string(s);
    (f, WIPOffset::new(off.value()))
}
fn tables(
    fbb: &mut Fbb<'_>,
    items: &[Done],
) -> WIPOffset<flatbuffers::Vector<'static, flatbuffers::ForwardsUOffset<()>>> {
    let v = fbb.create_vector(items);
    WIPOffset::new(v.value())
}
fn table(fbb: &mut Fbb<'_>, fill: impl FnOnce(&mut Fbb<'_>)) -> Done {
    let start = fbb.start_table();
    fill(fbb);
    fbb.end_table(start)
}

fn align_up(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

/// The SHA-256 hex digest of some bytes: the key the exporter gives named data.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A VK00 tensor as stored, with raw codes.
#[derive(Debug, Clone, PartialEq)]
pub struct RawTensor {
    /// `VkDataType` code.
    pub datatype: i8,
    /// Dims.
    pub dims: Vec<u32>,
    /// Constant id (-1 = none).
    pub constant_id: i32,
    /// Memory object id (-1 = dedicated).
    pub mem_obj_id: i32,
    /// `VkStorageType` (255 = default).
    pub storage_type: u8,
    /// `VkMemoryLayout` (255 = default).
    pub memory_layout: u8,
    /// Staging `VkDataType` (127 = unset).
    pub staging_datatype: i8,
}

impl RawTensor {
    /// A tensor with raw codes as given, a dedicated memory object, default
    /// storage hints and no staging dtype (what the exporter writes for
    /// most tensors).
    pub fn new(datatype: i8, dims: Vec<u32>, constant_id: i32) -> Self {
        Self {
            datatype,
            dims,
            constant_id,
            mem_obj_id: -1,
            storage_type: 255,
            memory_layout: 255,
            staging_datatype: 127,
        }
    }
}

/// A VK00 value as stored.
#[derive(Debug, Clone, PartialEq)]
pub enum RawValue {
    /// Null.
    Null,
    /// Int.
    Int(i64),
    /// Double.
    Double(f64),
    /// Bool.
    Bool(bool),
    /// Tensor.
    Tensor(RawTensor),
    /// IntList.
    IntList(Vec<i64>),
    /// DoubleList.
    DoubleList(Vec<f64>),
    /// BoolList.
    BoolList(Vec<bool>),
    /// ValueList of raw ids.
    ValueList(Vec<i32>),
    /// String.
    String(String),
    /// SymInt (placeholder value).
    SymInt(i32),
    /// A union entry with an arbitrary tag and an empty table (for hostile files).
    UnknownTag(u8),
}

/// A VK00 constant table entry as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawConstant {
    /// Named data under `key`, `len` bytes.
    Named {
        /// Key.
        key: String,
        /// Length.
        len: u64,
    },
    /// A range of the VH00 bytes section.
    InBytes {
        /// Offset in the bytes section.
        offset: u64,
        /// Length.
        len: u64,
    },
}

/// Builds a VK00 graph inside a VH00 blob.
#[derive(Debug, Clone, Default)]
pub struct GraphBuilder {
    /// The value table.
    pub values: Vec<RawValue>,
    /// Operator calls: (node id, name, raw arg ids).
    pub chain: Vec<(u32, String, Vec<i32>)>,
    /// Graph input ids.
    pub input_ids: Vec<u32>,
    /// Graph output ids.
    pub output_ids: Vec<u32>,
    /// The constant table.
    pub constants: Vec<RawConstant>,
    /// The VH00 bytes section.
    pub bytes_section: Vec<u8>,
    /// Named data this graph needs in the program: (key, bytes).
    pub named_data: Vec<(String, Vec<u8>)>,
    /// Compile specs for the delegate.
    pub compile_specs: Vec<(String, Vec<u8>)>,
}

impl GraphBuilder {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a raw value.
    pub fn push(&mut self, v: RawValue) -> ValueId {
        self.values.push(v);
        ValueId(self.values.len() as u32 - 1)
    }

    /// A `Null`.
    pub fn null(&mut self) -> ValueId {
        self.push(RawValue::Null)
    }
    /// An `Int`.
    pub fn int(&mut self, x: i64) -> ValueId {
        self.push(RawValue::Int(x))
    }
    /// A `Double`.
    pub fn double(&mut self, x: f64) -> ValueId {
        self.push(RawValue::Double(x))
    }
    /// A `Bool`.
    pub fn bool(&mut self, x: bool) -> ValueId {
        self.push(RawValue::Bool(x))
    }
    /// An `IntList`.
    pub fn int_list(&mut self, x: &[i64]) -> ValueId {
        self.push(RawValue::IntList(x.to_vec()))
    }
    /// A `DoubleList`.
    pub fn double_list(&mut self, x: &[f64]) -> ValueId {
        self.push(RawValue::DoubleList(x.to_vec()))
    }
    /// A `BoolList`.
    pub fn bool_list(&mut self, x: &[bool]) -> ValueId {
        self.push(RawValue::BoolList(x.to_vec()))
    }
    /// A `ValueList`.
    pub fn value_list(&mut self, ids: &[ValueId]) -> ValueId {
        self.push(RawValue::ValueList(ids.iter().map(|i| i.0 as i32).collect()))
    }
    /// A `String`.
    pub fn string(&mut self, s: &str) -> ValueId {
        self.push(RawValue::String(s.to_string()))
    }
    /// A `SymInt`.
    pub fn sym_int(&mut self) -> ValueId {
        self.push(RawValue::SymInt(0))
    }

    fn raw_tensor(dtype: DType, dims: &[u64], constant_id: i32) -> RawTensor {
        RawTensor::new(
            dtype.to_vk().expect("dtype has a VK00 code"),
            dims.iter().map(|&d| u32::try_from(d).expect("dim fits u32")).collect(),
            constant_id,
        )
    }

    /// A non-constant tensor (input, output or intermediate).
    pub fn tensor(&mut self, dtype: DType, dims: &[u64]) -> ValueId {
        self.push(RawValue::Tensor(Self::raw_tensor(dtype, dims, -1)))
    }

    /// A non-constant tensor whose host I/O uses `staging` (e.g. int64
    /// tokens held as int32 on the device).
    pub fn tensor_staged(&mut self, dtype: DType, staging: DType, dims: &[u64]) -> ValueId {
        let mut t = Self::raw_tensor(dtype, dims, -1);
        t.staging_datatype = staging.to_vk().expect("staging dtype has a VK00 code");
        self.push(RawValue::Tensor(t))
    }

    /// A constant tensor stored as named data keyed by its SHA-256 (the
    /// exporter's layout). Identical bytes share one blob.
    pub fn constant(&mut self, dtype: DType, dims: &[u64], bytes: &[u8]) -> ValueId {
        let key = sha256_hex(bytes);
        if !self.named_data.iter().any(|(k, _)| *k == key) {
            self.named_data.push((key.clone(), bytes.to_vec()));
        }
        self.constants.push(RawConstant::Named { key, len: bytes.len() as u64 });
        let id = self.constants.len() as i32 - 1;
        self.push(RawValue::Tensor(Self::raw_tensor(dtype, dims, id)))
    }

    /// [`constant`](Self::constant) taking the bytes by value, so large
    /// weights are not copied.
    pub fn constant_owned(&mut self, dtype: DType, dims: &[u64], bytes: Vec<u8>) -> ValueId {
        let key = sha256_hex(&bytes);
        self.constant_keyed(dtype, dims, key, bytes)
    }

    /// A constant tensor stored as named data under `key`, which the caller
    /// has computed (e.g. one SHA-256 for many identical tensors). The first
    /// constant with a key keeps its bytes; later ones with the same key
    /// share them and their `bytes` are dropped (pass a `vec![0; n]`, which
    /// costs no copy).
    pub fn constant_keyed(&mut self, dtype: DType, dims: &[u64], key: String, bytes: Vec<u8>) -> ValueId {
        let len = bytes.len() as u64;
        if !self.named_data.iter().any(|(k, _)| *k == key) {
            self.named_data.push((key.clone(), bytes));
        }
        self.constants.push(RawConstant::Named { key, len });
        let id = self.constants.len() as i32 - 1;
        self.push(RawValue::Tensor(Self::raw_tensor(dtype, dims, id)))
    }

    /// A constant tensor stored in the VH00 bytes section (older layout).
    pub fn constant_in_blob(&mut self, dtype: DType, dims: &[u64], bytes: &[u8]) -> ValueId {
        let offset = self.bytes_section.len() as u64;
        self.bytes_section.extend_from_slice(bytes);
        self.bytes_section.resize(align_up(self.bytes_section.len(), 16), 0);
        self.constants.push(RawConstant::InBytes { offset, len: bytes.len() as u64 });
        let id = self.constants.len() as i32 - 1;
        self.push(RawValue::Tensor(Self::raw_tensor(dtype, dims, id)))
    }

    /// Appends an operator call (output id last).
    pub fn op(&mut self, name: &str, args: &[ValueId]) -> &mut Self {
        let node = self.chain.len() as u32;
        self.chain.push((node, name.to_string(), args.iter().map(|a| a.0 as i32).collect()));
        self
    }

    /// Sets the graph inputs.
    pub fn inputs(&mut self, ids: &[ValueId]) -> &mut Self {
        self.input_ids = ids.iter().map(|i| i.0).collect();
        self
    }

    /// Sets the graph outputs.
    pub fn outputs(&mut self, ids: &[ValueId]) -> &mut Self {
        self.output_ids = ids.iter().map(|i| i.0).collect();
        self
    }

    /// The VK00 FlatBuffer alone.
    pub fn vk00_bytes(&self) -> Vec<u8> {
        let mut fbb = FlatBufferBuilder::new();
        let mut chain = Vec::new();
        for (node_id, name, args) in &self.chain {
            let name = string(&mut fbb, v::operator_call::NAME, name);
            let args = fbb.create_vector(args);
            chain.push(table(&mut fbb, |f| {
                put(f, v::operator_call::NODE_ID, *node_id);
                put_off(f, name.0, name.1);
                put_off(f, v::operator_call::ARGS, args);
            }));
        }
        let mut values = Vec::new();
        for val in &self.values {
            let (tag, inner) = self.value_table(&mut fbb, val);
            values.push(table(&mut fbb, |f| put_union(f, v::vk_value::VALUE, tag, inner)));
        }
        let mut constants = Vec::new();
        for c in &self.constants {
            let (offset, len, key) = match c {
                RawConstant::Named { key, len } => {
                    (u64::MAX, *len, Some(string(&mut fbb, v::vk_bytes::NAMED_KEY, key)))
                }
                RawConstant::InBytes { offset, len } => (*offset, *len, None),
            };
            constants.push(table(&mut fbb, |f| {
                put(f, v::vk_bytes::OFFSET, offset);
                put(f, v::vk_bytes::LENGTH, len);
                if let Some((field, k)) = key {
                    put_off(f, field, k);
                }
            }));
        }
        let version = string(&mut fbb, v::vk_graph::VERSION, "0");
        let chain = tables(&mut fbb, &chain);
        let values = tables(&mut fbb, &values);
        let inputs = fbb.create_vector(&self.input_ids);
        let outputs = fbb.create_vector(&self.output_ids);
        let constants = tables(&mut fbb, &constants);
        let shaders = tables(&mut fbb, &[]);
        let root = table(&mut fbb, |f| {
            put_off(f, version.0, version.1);
            put_off(f, v::vk_graph::CHAIN, chain);
            put_off(f, v::vk_graph::VALUES, values);
            put_off(f, v::vk_graph::INPUT_IDS, inputs);
            put_off(f, v::vk_graph::OUTPUT_IDS, outputs);
            put_off(f, v::vk_graph::CONSTANTS, constants);
            put_off(f, v::vk_graph::SHADERS, shaders);
        });
        fbb.finish(root, Some("VK00"));
        fbb.finished_data().to_vec()
    }

    fn value_table(&self, fbb: &mut Fbb<'_>, val: &RawValue) -> (u8, Done) {
        use v::graph_types as g;
        match val {
            RawValue::Null => (g::NULL, table(fbb, |_| {})),
            RawValue::Int(x) => (g::INT, table(fbb, |f| put(f, v::int::INT_VAL, *x))),
            RawValue::Double(x) => (g::DOUBLE, table(fbb, |f| put(f, v::double::DOUBLE_VAL, *x))),
            RawValue::Bool(x) => (g::BOOL, table(fbb, |f| put(f, v::bool::BOOL_VAL, *x))),
            RawValue::Tensor(t) => {
                let dims = fbb.create_vector(&t.dims);
                (
                    g::VK_TENSOR,
                    table(fbb, |f| {
                        put(f, v::vk_tensor::DATATYPE, t.datatype);
                        put_off(f, v::vk_tensor::DIMS, dims);
                        put(f, v::vk_tensor::CONSTANT_ID, t.constant_id);
                        put(f, v::vk_tensor::MEM_OBJ_ID, t.mem_obj_id);
                        put(f, v::vk_tensor::STORAGE_TYPE, t.storage_type);
                        put(f, v::vk_tensor::MEMORY_LAYOUT, t.memory_layout);
                        put(f, v::vk_tensor::STAGING_DATATYPE, t.staging_datatype);
                    }),
                )
            }
            RawValue::IntList(x) => {
                let items = fbb.create_vector(x);
                (g::INT_LIST, table(fbb, |f| put_off(f, v::int_list::ITEMS, items)))
            }
            RawValue::DoubleList(x) => {
                let items = fbb.create_vector(x);
                (g::DOUBLE_LIST, table(fbb, |f| put_off(f, v::double_list::ITEMS, items)))
            }
            RawValue::BoolList(x) => {
                let items = fbb.create_vector(x);
                (g::BOOL_LIST, table(fbb, |f| put_off(f, v::bool_list::ITEMS, items)))
            }
            RawValue::ValueList(x) => {
                let items = fbb.create_vector(x);
                (g::VALUE_LIST, table(fbb, |f| put_off(f, v::value_list::ITEMS, items)))
            }
            RawValue::String(s) => {
                let s = string(fbb, v::string::STRING_VAL, s);
                (g::STRING, table(fbb, |f| put_off(f, s.0, s.1)))
            }
            RawValue::SymInt(x) => (g::SYM_INT, table(fbb, |f| put(f, v::sym_int::VALUE, *x))),
            RawValue::UnknownTag(tag) => (*tag, table(fbb, |_| {})),
        }
    }

    /// The full delegate blob: VH00 header, VK00 graph, bytes section.
    pub fn blob(&self) -> Vec<u8> {
        vh00_blob(&self.vk00_bytes(), &self.bytes_section)
    }
}

/// Wraps a VK00 FlatBuffer and a constant bytes section into a VH00 blob.
pub fn vh00_blob(fb: &[u8], bytes_section: &[u8]) -> Vec<u8> {
    let fb_padded = align_up(fb.len(), 16);
    let bytes_offset = VH00_HEADER_LEN + fb_padded;
    let mut out = Vec::with_capacity(bytes_offset + bytes_section.len());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(b"VH00");
    out.extend_from_slice(&VH00_HEADER_SIZE.to_le_bytes());
    out.extend_from_slice(&(VH00_HEADER_LEN as u32).to_le_bytes());
    out.extend_from_slice(&(fb.len() as u32).to_le_bytes());
    out.extend_from_slice(&(bytes_offset as u32).to_le_bytes());
    out.extend_from_slice(&(bytes_section.len() as u64).to_le_bytes());
    out.resize(VH00_HEADER_LEN, 0);
    out.extend_from_slice(fb);
    out.resize(bytes_offset, 0);
    out.extend_from_slice(bytes_section);
    out
}

/// The graph of the worked example in `shared/reference/FORMAT.md` §9:
/// `relu(linear(x + y * 2))` with a `[3, 4]` weight, in the exporter's value
/// order (inputs `[y, x]`). Tests and docs start from it.
pub fn worked_example() -> GraphBuilder {
    let mut g = GraphBuilder::new();
    let w: Vec<u8> = (0..12).flat_map(|i| (i as f32 * 0.1).to_le_bytes()).collect();
    let b: Vec<u8> = [-0.4777f32, -0.3311, -0.2061].iter().flat_map(|x| x.to_le_bytes()).collect();
    let weight = g.constant(DType::F32, &[3, 4], &w);
    let bias = g.constant(DType::F32, &[3], &b);
    let two = g.constant(DType::F32, &[], &2.0f32.to_le_bytes());
    let two_gpu = g.tensor(DType::F32, &[]);
    let y = g.tensor(DType::F32, &[2, 4]);
    let x = g.tensor(DType::F32, &[2, 4]);
    let y2 = g.tensor(DType::F32, &[2, 4]);
    let alpha = g.int(1);
    let z = g.tensor(DType::F32, &[2, 4]);
    let lin = g.tensor(DType::F32, &[2, 3]);
    let out = g.tensor(DType::F32, &[2, 3]);
    g.op("et_vk.prepack.default", &[two, two_gpu])
        .op("aten.mul.Tensor", &[y, two_gpu, y2])
        .op("aten.add.Tensor", &[x, y2, alpha, z])
        .op("aten.linear.default", &[z, weight, bias, lin])
        .op("aten.relu.default", &[lin, out])
        .inputs(&[y, x])
        .outputs(&[out]);
    g
}

/// A plan-level value as stored in the program.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanValueSpec {
    /// Null.
    Null,
    /// Int.
    Int(i64),
    /// Bool.
    Bool(bool),
    /// Double.
    Double(f64),
    /// A tensor: scalar type code, sizes, dynamism code, constant buffer
    /// index (0 = not constant; indexes the constant segment).
    Tensor {
        /// ScalarType code.
        scalar_type: i8,
        /// Sizes.
        sizes: Vec<i32>,
        /// TensorShapeDynamism code.
        dynamism: i8,
        /// Constant buffer index (0 = none).
        data_buffer_idx: u32,
    },
    /// Int list.
    IntList(Vec<i64>),
    /// Tensor list (value indices).
    TensorList(Vec<i32>),
}

/// A plan instruction as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstructionSpec {
    /// KernelCall.
    Kernel {
        /// Operator index.
        op_index: i32,
        /// Value indices.
        args: Vec<i32>,
    },
    /// DelegateCall.
    Delegate {
        /// Delegate index.
        delegate_index: i32,
        /// Value indices.
        args: Vec<i32>,
    },
    /// MoveCall.
    Move(i32, i32),
    /// FreeCall.
    Free(i32),
}

/// A delegate as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegateSpec {
    /// Backend id.
    pub backend_id: String,
    /// The processed blob.
    pub blob: Vec<u8>,
    /// Compile specs.
    pub compile_specs: Vec<(String, Vec<u8>)>,
    /// Store the blob inline in the program instead of in a segment.
    pub inline: bool,
}

/// An execution plan as stored.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MethodSpec {
    /// Name.
    pub name: String,
    /// Values.
    pub values: Vec<PlanValueSpec>,
    /// Input value indices.
    pub inputs: Vec<i32>,
    /// Output value indices.
    pub outputs: Vec<i32>,
    /// CPU operators: (name, overload).
    pub operators: Vec<(String, String)>,
    /// Delegates.
    pub delegates: Vec<DelegateSpec>,
    /// The chain's instructions.
    pub instructions: Vec<InstructionSpec>,
}

/// One segment of a program being serialized.
#[derive(Debug, Clone, Copy)]
enum Segment {
    /// The plan-level constant segment.
    Constants,
    /// The blob of delegate `.1` of method `.0`.
    Blob(usize, usize),
    /// Named data entry `.0`.
    Named(usize),
}

/// Builds a `.pte` program.
#[derive(Debug, Clone, Default)]
pub struct ProgramBuilder {
    /// Methods.
    pub methods: Vec<MethodSpec>,
    /// Named data: (key, bytes); one segment each.
    pub named_data: Vec<(String, Vec<u8>)>,
    /// Plan-level constant tensors (constant segment entries 1..).
    pub constant_tensors: Vec<Vec<u8>>,
}

impl ProgramBuilder {
    /// An empty program.
    pub fn new() -> Self {
        Self::default()
    }

    /// A program whose `forward` method runs one Vulkan delegate: the plan's
    /// inputs and outputs mirror the graph's, in the same order.
    pub fn single_delegate(graph: GraphBuilder) -> Self {
        let mut b = Self::new();
        b.add_delegate_method("forward", graph, false);
        b
    }

    /// Adds a method that runs `graph` as one Vulkan delegate.
    pub fn add_delegate_method(&mut self, name: &str, graph: GraphBuilder, inline: bool) -> &mut Self {
        let mut m = MethodSpec { name: name.to_string(), ..MethodSpec::default() };
        let mut args = Vec::new();
        for (is_input, id) in
            graph.input_ids.iter().map(|&i| (true, i)).chain(graph.output_ids.iter().map(|&i| (false, i)))
        {
            let spec = match graph.values.get(id as usize) {
                Some(RawValue::Tensor(t)) => {
                    let io = if t.staging_datatype == 127 { t.datatype } else { t.staging_datatype };
                    let scalar_type = DType::from_vk(io).map_or(DType::F32.to_scalar_type(), DType::to_scalar_type);
                    PlanValueSpec::Tensor {
                        scalar_type,
                        sizes: t.dims.iter().map(|&d| d as i32).collect(),
                        dynamism: 0,
                        data_buffer_idx: 0,
                    }
                }
                Some(RawValue::SymInt(_)) | Some(RawValue::Int(_)) => PlanValueSpec::Int(0),
                _ => PlanValueSpec::Null,
            };
            m.values.push(spec);
            let idx = m.values.len() as i32 - 1;
            args.push(idx);
            if is_input {
                m.inputs.push(idx);
            } else {
                m.outputs.push(idx);
            }
        }
        let blob = graph.blob();
        for (k, bytes) in graph.named_data {
            if !self.named_data.iter().any(|(have, _)| *have == k) {
                self.named_data.push((k, bytes));
            }
        }
        m.delegates.push(DelegateSpec {
            backend_id: VULKAN_BACKEND_ID.to_string(),
            blob,
            compile_specs: graph.compile_specs,
            inline,
        });
        m.instructions.push(InstructionSpec::Delegate { delegate_index: 0, args });
        self.methods.push(m);
        self
    }

    /// Serializes the program: FlatBuffer with an `eh00` header, then the
    /// segments (constant segment, delegate blobs, named data), each aligned
    /// to 128 bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let (mut out, segments, constant_seg) = self.head();
        let base = out.len();
        for (seg, off) in segments {
            out.resize(base + off, 0);
            out.extend_from_slice(self.segment_bytes(seg, &constant_seg));
        }
        out
    }

    /// [`to_bytes`](Self::to_bytes), releasing each named blob as soon as it
    /// is copied: the peak memory is about one copy of the constants, not two.
    pub fn into_bytes(mut self) -> Vec<u8> {
        let (mut out, segments, constant_seg) = self.head();
        let base = out.len();
        for (seg, off) in segments {
            out.resize(base + off, 0);
            if let Segment::Named(i) = seg {
                out.extend_from_slice(&std::mem::take(&mut self.named_data[i].1));
            } else {
                out.extend_from_slice(self.segment_bytes(seg, &constant_seg));
            }
        }
        out
    }

    fn segment_bytes<'a>(&'a self, seg: Segment, constant_seg: &'a [u8]) -> &'a [u8] {
        match seg {
            Segment::Constants => constant_seg,
            Segment::Blob(m, d) => &self.methods[m].delegates[d].blob,
            Segment::Named(i) => &self.named_data[i].1,
        }
    }

    /// The FlatBuffer with its `eh00` header, padded to where the segments
    /// start (with room reserved for them), each segment with its offset
    /// from there, and the constant segment's bytes.
    fn head(&self) -> (Vec<u8>, Vec<(Segment, usize)>, Vec<u8>) {
        const SEGMENT_ALIGN: usize = 128;
        // Segment payloads, in order: constants, delegate blobs, named data.
        let mut payloads: Vec<(Segment, usize)> = Vec::new();
        let mut constant_offsets = vec![0u64];
        let mut constant_seg = Vec::new();
        for t in &self.constant_tensors {
            constant_offsets.push(constant_seg.len() as u64);
            constant_seg.extend_from_slice(t);
            constant_seg.resize(align_up(constant_seg.len(), 16), 0);
        }
        payloads.push((Segment::Constants, constant_seg.len()));
        let mut delegate_segment = Vec::new();
        let mut inline_data: Vec<&[u8]> = Vec::new();
        for (mi, m) in self.methods.iter().enumerate() {
            let mut per = Vec::new();
            for (di, d) in m.delegates.iter().enumerate() {
                if d.inline {
                    inline_data.push(&d.blob);
                    per.push((p::data_location::INLINE, inline_data.len() as u32 - 1));
                } else {
                    payloads.push((Segment::Blob(mi, di), d.blob.len()));
                    per.push((p::data_location::SEGMENT, payloads.len() as u32 - 1));
                }
            }
            delegate_segment.push(per);
        }
        let mut named_idx = Vec::new();
        for (i, (_, bytes)) in self.named_data.iter().enumerate() {
            payloads.push((Segment::Named(i), bytes.len()));
            named_idx.push(payloads.len() as u32 - 1);
        }
        let mut seg_offsets = Vec::new();
        let mut seg_end = 0usize;
        for &(_, len) in &payloads {
            let off = if len == 0 { seg_end } else { align_up(seg_end, SEGMENT_ALIGN) };
            seg_offsets.push(off);
            seg_end = off + len;
        }

        let mut fbb = FlatBufferBuilder::new();
        let mut plans = Vec::new();
        for (mi, m) in self.methods.iter().enumerate() {
            plans.push(self.method_table(&mut fbb, m, &delegate_segment[mi]));
        }
        let plans = tables(&mut fbb, &plans);
        let mut inline_tables = Vec::new();
        for d in &inline_data {
            let bytes = fbb.create_vector(d);
            inline_tables.push(table(&mut fbb, |f| put_off(f, p::backend_delegate_inline_data::DATA, bytes)));
        }
        let inline_tables = tables(&mut fbb, &inline_tables);
        let mut segs = Vec::new();
        for ((_, len), off) in payloads.iter().zip(&seg_offsets) {
            segs.push(table(&mut fbb, |f| {
                put(f, p::data_segment::OFFSET, *off as u64);
                put(f, p::data_segment::SIZE, *len as u64);
            }));
        }
        let segs = tables(&mut fbb, &segs);
        let offsets = fbb.create_vector(&constant_offsets);
        let constant_segment = table(&mut fbb, |f| {
            put(f, p::subsegment_offsets::SEGMENT_INDEX, 0u32);
            put_off(f, p::subsegment_offsets::OFFSETS, offsets);
        });
        let mut named = Vec::new();
        for ((key, _), idx) in self.named_data.iter().zip(&named_idx) {
            let k = string(&mut fbb, p::named_data::KEY, key);
            named.push(table(&mut fbb, |f| {
                put_off(f, k.0, k.1);
                put(f, p::named_data::SEGMENT_INDEX, *idx);
            }));
        }
        let named = tables(&mut fbb, &named);
        let root = table(&mut fbb, |f| {
            put_off(f, p::program::EXECUTION_PLAN, plans);
            put_off(f, p::program::BACKEND_DELEGATE_DATA, inline_tables);
            put_off(f, p::program::SEGMENTS, segs);
            put_off(f, p::program::CONSTANT_SEGMENT, constant_segment);
            put_off(f, p::program::NAMED_DATA, named);
        });
        fbb.finish(root, Some("ET12"));
        let fb = fbb.finished_data();

        // Insert the eh00 header after the identifier; offsets inside the
        // FlatBuffer are relative, so only the root offset moves.
        const EH_LEN: usize = 32;
        let program_size = fb.len() + EH_LEN;
        let base = align_up(program_size, SEGMENT_ALIGN);
        let mut out = Vec::with_capacity(base + seg_end);
        let root_off = u32::from_le_bytes([fb[0], fb[1], fb[2], fb[3]]) + EH_LEN as u32;
        out.extend_from_slice(&root_off.to_le_bytes());
        out.extend_from_slice(&fb[4..8]);
        out.extend_from_slice(b"eh00");
        out.extend_from_slice(&(EH_LEN as u32).to_le_bytes());
        out.extend_from_slice(&(program_size as u64).to_le_bytes());
        out.extend_from_slice(&(base as u64).to_le_bytes());
        out.extend_from_slice(&(seg_end as u64).to_le_bytes());
        out.extend_from_slice(&fb[8..]);
        out.resize(base, 0);
        let segments = payloads.into_iter().map(|(seg, _)| seg).zip(seg_offsets).collect();
        (out, segments, constant_seg)
    }

    fn method_table(&self, fbb: &mut Fbb<'_>, m: &MethodSpec, delegate_loc: &[(i8, u32)]) -> Done {
        use p::instruction_arguments as ia;
        use p::kernel_types as k;
        let name = string(fbb, p::execution_plan::NAME, &m.name);
        let mut values = Vec::new();
        for val in &m.values {
            let (tag, inner) = match val {
                PlanValueSpec::Null => (k::NULL, table(fbb, |_| {})),
                PlanValueSpec::Int(x) => (k::INT, table(fbb, |f| put(f, p::int::INT_VAL, *x))),
                PlanValueSpec::Bool(x) => (k::BOOL, table(fbb, |f| put(f, p::bool::BOOL_VAL, *x))),
                PlanValueSpec::Double(x) => (k::DOUBLE, table(fbb, |f| put(f, p::double::DOUBLE_VAL, *x))),
                PlanValueSpec::IntList(x) => {
                    let items = fbb.create_vector(x);
                    (k::INT_LIST, table(fbb, |f| put_off(f, p::int_list::ITEMS, items)))
                }
                PlanValueSpec::TensorList(x) => {
                    let items = fbb.create_vector(x);
                    (k::TENSOR_LIST, table(fbb, |f| put_off(f, p::tensor_list::ITEMS, items)))
                }
                PlanValueSpec::Tensor { scalar_type, sizes, dynamism, data_buffer_idx } => {
                    let sizes_v = fbb.create_vector(sizes);
                    let order: Vec<u8> = (0..sizes.len() as u8).collect();
                    let order = fbb.create_vector(&order);
                    let alloc = (*data_buffer_idx == 0).then(|| {
                        table(fbb, |f| {
                            put(f, p::allocation_details::MEMORY_ID, 1u32);
                        })
                    });
                    (
                        k::TENSOR,
                        table(fbb, |f| {
                            put(f, p::tensor::SCALAR_TYPE, *scalar_type);
                            put_off(f, p::tensor::SIZES, sizes_v);
                            put_off(f, p::tensor::DIM_ORDER, order);
                            put(f, p::tensor::DATA_BUFFER_IDX, *data_buffer_idx);
                            if let Some(a) = alloc {
                                put_off(f, p::tensor::ALLOCATION_INFO, a);
                            }
                            put(f, p::tensor::SHAPE_DYNAMISM, *dynamism);
                        }),
                    )
                }
            };
            values.push(table(fbb, |f| put_union(f, p::e_value::VAL, tag, inner)));
        }
        let values = tables(fbb, &values);
        let inputs = fbb.create_vector(&m.inputs);
        let outputs = fbb.create_vector(&m.outputs);
        let mut instrs = Vec::new();
        for ins in &m.instructions {
            let (tag, inner) = match ins {
                InstructionSpec::Kernel { op_index, args } => {
                    let a = fbb.create_vector(args);
                    (
                        ia::KERNEL_CALL,
                        table(fbb, |f| {
                            put(f, p::kernel_call::OP_INDEX, *op_index);
                            put_off(f, p::kernel_call::ARGS, a);
                        }),
                    )
                }
                InstructionSpec::Delegate { delegate_index, args } => {
                    let a = fbb.create_vector(args);
                    (
                        ia::DELEGATE_CALL,
                        table(fbb, |f| {
                            put(f, p::delegate_call::DELEGATE_INDEX, *delegate_index);
                            put_off(f, p::delegate_call::ARGS, a);
                        }),
                    )
                }
                InstructionSpec::Move(from, to) => (
                    ia::MOVE_CALL,
                    table(fbb, |f| {
                        put(f, p::move_call::MOVE_FROM, *from);
                        put(f, p::move_call::MOVE_TO, *to);
                    }),
                ),
                InstructionSpec::Free(x) => (ia::FREE_CALL, table(fbb, |f| put(f, p::free_call::VALUE_INDEX, *x))),
            };
            instrs.push(table(fbb, |f| put_union(f, p::instruction::INSTR_ARGS, tag, inner)));
        }
        let instrs = tables(fbb, &instrs);
        let chain = table(fbb, |f| put_off(f, p::chain::INSTRUCTIONS, instrs));
        let chains = tables(fbb, &[chain]);
        let mut ops = Vec::new();
        for (n, o) in &m.operators {
            let n = string(fbb, p::operator::NAME, n);
            let o = string(fbb, p::operator::OVERLOAD, o);
            ops.push(table(fbb, |f| {
                put_off(f, n.0, n.1);
                put_off(f, o.0, o.1);
            }));
        }
        let ops = tables(fbb, &ops);
        let mut dels = Vec::new();
        for (d, (loc, idx)) in m.delegates.iter().zip(delegate_loc) {
            let id = string(fbb, p::backend_delegate::ID, &d.backend_id);
            let processed = table(fbb, |f| {
                put(f, p::backend_delegate_data_reference::LOCATION, *loc);
                put(f, p::backend_delegate_data_reference::INDEX, *idx);
            });
            let mut specs = Vec::new();
            for (key, value) in &d.compile_specs {
                let key = string(fbb, p::compile_spec::KEY, key);
                let value = fbb.create_vector(value);
                specs.push(table(fbb, |f| {
                    put_off(f, key.0, key.1);
                    put_off(f, p::compile_spec::VALUE, value);
                }));
            }
            let specs = tables(fbb, &specs);
            dels.push(table(fbb, |f| {
                put_off(f, id.0, id.1);
                put_off(f, p::backend_delegate::PROCESSED, processed);
                put_off(f, p::backend_delegate::COMPILE_SPECS, specs);
            }));
        }
        let dels = tables(fbb, &dels);
        table(fbb, |f| {
            put_off(f, name.0, name.1);
            put_off(f, p::execution_plan::VALUES, values);
            put_off(f, p::execution_plan::INPUTS, inputs);
            put_off(f, p::execution_plan::OUTPUTS, outputs);
            put_off(f, p::execution_plan::CHAINS, chains);
            put_off(f, p::execution_plan::OPERATORS, ops);
            put_off(f, p::execution_plan::DELEGATES, dels);
        })
    }
}

/// Serializes a `.ptd` external-data file holding `entries` (key, bytes).
pub fn ptd_bytes(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    use crate::generated::flat_tensor as ft;
    const ALIGN: usize = 128;
    let mut offsets = Vec::new();
    let mut end = 0usize;
    for (_, bytes) in entries {
        let off = align_up(end, ALIGN);
        offsets.push(off);
        end = off + bytes.len();
    }
    let mut fbb = FlatBufferBuilder::new();
    let mut segs = Vec::new();
    for ((_, bytes), off) in entries.iter().zip(&offsets) {
        segs.push(table(&mut fbb, |f| {
            put(f, ft::data_segment::OFFSET, *off as u64);
            put(f, ft::data_segment::SIZE, bytes.len() as u64);
        }));
    }
    let segs = tables(&mut fbb, &segs);
    let mut named = Vec::new();
    for (i, (key, _)) in entries.iter().enumerate() {
        let k = string(&mut fbb, ft::named_data::KEY, key);
        named.push(table(&mut fbb, |f| {
            put_off(f, k.0, k.1);
            put(f, ft::named_data::SEGMENT_INDEX, i as u32);
        }));
    }
    let named = tables(&mut fbb, &named);
    let root = table(&mut fbb, |f| {
        put_off(f, ft::flat_tensor::SEGMENTS, segs);
        put_off(f, ft::flat_tensor::NAMED_DATA, named);
    });
    fbb.finish(root, Some("FT01"));
    let fb = fbb.finished_data();
    // Header FH01 inserted after the identifier, as in the .pte.
    const FH_LEN: usize = crate::ptd::FH01_LEN as usize;
    let fb_size = fb.len() + FH_LEN;
    let base = align_up(fb_size, ALIGN);
    let mut out = Vec::with_capacity(base + end);
    let root_off = u32::from_le_bytes([fb[0], fb[1], fb[2], fb[3]]) + FH_LEN as u32;
    out.extend_from_slice(&root_off.to_le_bytes());
    out.extend_from_slice(&fb[4..8]);
    out.extend_from_slice(b"FH01");
    out.extend_from_slice(&crate::ptd::FH01_LEN.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes()); // flatbuffer_offset
    out.extend_from_slice(&(fb_size as u64).to_le_bytes());
    out.extend_from_slice(&(base as u64).to_le_bytes());
    out.extend_from_slice(&(end as u64).to_le_bytes());
    out.extend_from_slice(&fb[8..]);
    out.resize(base, 0);
    for ((_, bytes), off) in entries.iter().zip(&offsets) {
        out.resize(base + off, 0);
        out.extend_from_slice(bytes);
    }
    out
}
