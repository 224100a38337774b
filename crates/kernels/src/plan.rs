//! The plain-data interface between host rules and the runtime.
//!
//! The runtime shows a rule the graph through [`Graph`] (value kinds, tensor
//! dtypes and *live* shapes) and gets back a [`Lowered`]: the live shapes of
//! the op's outputs and the [`Step`]s to run. A [`Dispatch`] names a
//! generated shader, its uniform bytes, its storage bindings as value ids and
//! its workgroup counts; the runtime maps all of it onto wgpu.

use crate::error::{Error, Result};
use crate::generated::shaders::{ShaderId, Variant};

/// Most dims a kernel addresses (two `vec4<u32>` in the uniforms).
pub const MAX_RANK: usize = 8;

/// Invocations per workgroup of the 1-D elementwise kernels.
pub const WG_ELEMENTWISE: u32 = 256;
/// Invocations per workgroup of the row-wise kernels (softmax, norms).
pub const WG_ROWS: u32 = 64;
/// Tile edge of the matmul kernel.
pub const MATMUL_TILE: u32 = 16;
/// Most workgroups along one grid dimension (WebGPU's default limit).
pub const MAX_GROUPS_PER_DIM: u32 = 65_535;
/// Scratch tensors the caller may provide to every op ([`Ctx::scratch`]).
pub const N_SCRATCH: usize = 2;

/// A value id of the graph (an index into its value table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Vid(pub u32);

/// Element type of a tensor, as the kernels see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ElemType {
    /// 1-byte boolean.
    Bool,
    /// u8.
    U8,
    /// i8.
    I8,
    /// i16.
    I16,
    /// i32.
    I32,
    /// i64.
    I64,
    /// IEEE half.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE single.
    F32,
    /// IEEE double.
    F64,
}

impl Variant {
    /// Whether the variant's WGSL uses `f16` (its element type or its KV
    /// cache's), so the device needs SHADER_F16.
    pub const fn needs_shader_f16(self) -> bool {
        matches!(self, Variant::F16 | Variant::F32Kvf16)
    }
}

impl ElemType {
    /// Bytes per element.
    pub const fn size_bytes(self) -> usize {
        match self {
            ElemType::Bool | ElemType::U8 | ElemType::I8 => 1,
            ElemType::I16 | ElemType::F16 | ElemType::BF16 => 2,
            ElemType::I32 | ElemType::F32 => 4,
            ElemType::I64 | ElemType::F64 => 8,
        }
    }

    /// Bytes per element in a device buffer. Bools are widened to one `u32`
    /// (0 or 1) per element, so kernels read and write them without byte
    /// packing; the runtime converts at upload and read-back. Every other
    /// dtype keeps its size.
    pub const fn device_size_bytes(self) -> usize {
        match self {
            ElemType::Bool => 4,
            _ => self.size_bytes(),
        }
    }

    /// The shader variant of a float kernel for this dtype.
    pub const fn float_variant(self) -> Option<Variant> {
        match self {
            ElemType::F32 => Some(Variant::F32),
            ElemType::F16 => Some(Variant::F16),
            _ => None,
        }
    }

    /// The shader variant of a pure data-movement kernel for this dtype
    /// (bools, one `u32` each on the device, move as `i32` bits).
    pub const fn copy_variant(self) -> Option<Variant> {
        match self {
            ElemType::F32 => Some(Variant::F32),
            ElemType::F16 => Some(Variant::F16),
            ElemType::I32 | ElemType::Bool => Some(Variant::I32),
            _ => None,
        }
    }
}

/// A tensor as a rule sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TensorInfo<'a> {
    /// Its id.
    pub id: Vid,
    /// Element type on the device.
    pub dtype: ElemType,
    /// Live shape.
    pub shape: &'a [u64],
    /// Whether it is a constant (weights, prepack sources).
    pub is_constant: bool,
    /// A packed 4-bit weight `[N, K/2]` that the device holds word-major:
    /// 16-byte word `w` of row `n` at word `w * N + n` (the load-time
    /// layout pass `etwgpu_graph::retype::q4_word_major` chooses it, so
    /// that adjacent invocations of the 4-bit kernels read adjacent
    /// words). The shape stays `[N, K/2]`.
    pub q4_word_major: bool,
}

impl TensorInfo<'_> {
    /// Number of elements at the live shape.
    pub fn numel(&self) -> u64 {
        self.shape.iter().product()
    }
}

/// A graph value as a rule sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// `None` (and dtype/layout/device objects).
    Null,
    /// Integer.
    Int(i64),
    /// Float.
    Double(f64),
    /// Boolean.
    Bool(bool),
    /// Tensor.
    Tensor(TensorInfo<'a>),
    /// Literal integer list.
    IntList(&'a [i64]),
    /// Literal float list.
    DoubleList(&'a [f64]),
    /// Literal bool list.
    BoolList(&'a [bool]),
    /// List of other values.
    List(&'a [Vid]),
    /// String.
    String(&'a str),
    /// A runtime integer with its live value.
    SymInt(i64),
}

impl Value<'_> {
    /// The kind's name, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "Null",
            Value::Int(_) => "Int",
            Value::Double(_) => "Double",
            Value::Bool(_) => "Bool",
            Value::Tensor(_) => "Tensor",
            Value::IntList(_) => "IntList",
            Value::DoubleList(_) => "DoubleList",
            Value::BoolList(_) => "BoolList",
            Value::List(_) => "ValueList",
            Value::String(_) => "String",
            Value::SymInt(_) => "SymInt",
        }
    }
}

/// Read access to the graph, with live shapes.
pub trait Graph {
    /// The value with this id. Ids come from the graph itself, so they are
    /// valid.
    fn value(&self, id: Vid) -> Value<'_>;
}

/// WGSL written at lowering time (fused kernels), interned: one
/// [`GeneratedShader`] per distinct source in the process
/// ([`GeneratedShader::intern`]), so it compares, orders and keys
/// pipelines by its small [`GeneratedShader::id`], never by its text.
#[derive(Debug)]
pub struct GeneratedShader {
    /// Label of the kernel kind (`fused_elementwise.f32`), for profiles.
    pub label: &'static str,
    /// The element type it was written for (`F16` needs `SHADER_F16`).
    pub variant: Variant,
    /// The whole WGSL module; deterministic for one expression and dtype.
    pub source: String,
    /// Its number among the shaders interned so far (in order).
    id: u32,
}

/// Every generated shader interned so far, by source.
static GENERATED: std::sync::Mutex<std::collections::BTreeMap<String, std::sync::Arc<GeneratedShader>>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

impl GeneratedShader {
    /// The one shader of this source: made on the first call, shared by
    /// every later one (label and variant are the first call's; one
    /// source is written for one kind and dtype).
    pub fn intern(label: &'static str, variant: Variant, source: String) -> std::sync::Arc<Self> {
        let mut all = GENERATED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(g) = all.get(&source) {
            return g.clone();
        }
        let id = u32::try_from(all.len()).expect("fewer than 2^32 generated shaders");
        let g = std::sync::Arc::new(GeneratedShader { label, variant, source: source.clone(), id });
        all.insert(source, g.clone());
        g
    }

    /// Its small id: equal ids, equal sources.
    pub fn id(&self) -> u32 {
        self.id
    }
}

impl PartialEq for GeneratedShader {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for GeneratedShader {}

impl std::hash::Hash for GeneratedShader {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}

impl PartialOrd for GeneratedShader {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for GeneratedShader {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.id.cmp(&other.id)
    }
}

/// A small key of a [`Shader`]: what pipeline caches key by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShaderKey {
    /// A generated variant.
    Static(ShaderId),
    /// An interned generated shader ([`GeneratedShader::id`]).
    Generated(u32),
}

/// The shader of a [`Dispatch`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Shader {
    /// A variant generated by `cargo xtask codegen` from `kernels/wgsl/`.
    Static(ShaderId),
    /// WGSL written at lowering time.
    Generated(std::sync::Arc<GeneratedShader>),
}

impl Shader {
    /// The label: the variant's, or the generated kernel's kind.
    pub fn label(&self) -> &'static str {
        match self {
            Shader::Static(id) => id.label(),
            Shader::Generated(g) => g.label,
        }
    }

    /// The element type it was written for.
    pub fn variant(&self) -> Variant {
        match self {
            Shader::Static(id) => id.variant(),
            Shader::Generated(g) => g.variant,
        }
    }

    /// Its small key (no source text).
    pub fn key(&self) -> ShaderKey {
        match self {
            Shader::Static(id) => ShaderKey::Static(*id),
            Shader::Generated(g) => ShaderKey::Generated(g.id),
        }
    }

    /// The WGSL source.
    pub fn source(&self) -> &str {
        match self {
            Shader::Static(id) => id.source(),
            Shader::Generated(g) => &g.source,
        }
    }

    /// Whether every index into its fixed-size arrays is proven in bounds
    /// by its host rule ([`ShaderId::bounds_host_checked`]), so a trusted
    /// load may create it without the index clamps. Never for shaders
    /// written at lowering time.
    pub fn bounds_host_checked(&self) -> bool {
        match self {
            Shader::Static(id) => id.bounds_host_checked(),
            Shader::Generated(_) => false,
        }
    }

    /// Whether the runtime creates it with naga's loop guard whatever
    /// `ETWGPU_SHADER_CHECKS` says ([`ShaderId::loop_guard`]: measured
    /// faster so). Never for shaders written at lowering time.
    pub fn loop_guard(&self) -> bool {
        match self {
            Shader::Static(id) => id.loop_guard(),
            Shader::Generated(_) => false,
        }
    }
}

impl From<ShaderId> for Shader {
    fn from(id: ShaderId) -> Self {
        Shader::Static(id)
    }
}

/// One storage-buffer dispatch, as plain data.
///
/// Binding 0 is a uniform buffer holding `params`; bindings `1..` are the
/// `inputs` (read-only storage) then the `outputs` (read-write storage), in
/// order, all in bind group 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatch {
    /// The shader.
    pub shader: Shader,
    /// Its entry point.
    pub entry: &'static str,
    /// Tensors read.
    pub inputs: Vec<Vid>,
    /// Tensors written.
    pub outputs: Vec<Vid>,
    /// Uniform bytes (a multiple of 16).
    pub params: Vec<u8>,
    /// Workgroup counts.
    pub workgroups: [u32; 3],
}

/// What running an operator takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Run a compute shader.
    Dispatch(Dispatch),
    /// `out` is `src` reinterpreted (same bytes, another shape): share its
    /// buffer instead of copying.
    Alias {
        /// The view.
        out: Vid,
        /// The tensor viewed.
        src: Vid,
    },
    /// At load: fill `out` with the bytes of the constant `src`, once.
    Prepack {
        /// The GPU tensor.
        out: Vid,
        /// The constant.
        src: Vid,
    },
    /// No GPU work: the SymInt `out` takes this live value before the next
    /// call is lowered.
    SymInt {
        /// The SymInt.
        out: Vid,
        /// Its live value.
        value: i64,
    },
    /// No GPU work: the SymInt `out` takes element `elem` (row-major, at
    /// the live shape) of the integer tensor `src`, read from the host
    /// copy of that graph input before the next call is lowered.
    ReadSymInt {
        /// The SymInt.
        out: Vid,
        /// The tensor read (a graph input).
        src: Vid,
        /// Flat element index.
        elem: u64,
    },
    /// No GPU work: the op may use up to `bytes` of scratch tensor `slot`
    /// ([`Ctx::scratch`]) at *any* live shape. Declared at every lowering,
    /// whether or not this one uses the scratch, and computed from static
    /// dims only, so the lowering at the maximum shapes sizes the scratch
    /// for every later one.
    Scratch {
        /// Which scratch tensor (below [`N_SCRATCH`]).
        slot: usize,
        /// Bytes it may use.
        bytes: u64,
    },
}

/// A lowered operator call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lowered {
    /// Live output shapes, to apply before lowering the next call.
    pub shapes: Vec<(Vid, Vec<u64>)>,
    /// What to run, in order.
    pub steps: Vec<Step>,
}

/// Uniform-buffer bytes, written field by field in WGSL layout order.
#[derive(Debug, Clone, Default)]
pub struct Uniform(Vec<u8>);

impl Uniform {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }
    /// Appends a `u32`.
    pub fn u32(mut self, x: u32) -> Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    /// Appends an `i32`.
    pub fn i32(mut self, x: i32) -> Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    /// Appends an `f32`.
    pub fn f32(mut self, x: f32) -> Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    /// Appends `array<vec4<u32>, 2>` (MAX_RANK entries, zero-filled).
    pub fn dims_u32(mut self, xs: &[u32]) -> Self {
        for i in 0..MAX_RANK {
            self = self.u32(xs.get(i).copied().unwrap_or(0));
        }
        self
    }
    /// Appends `array<vec4<i32>, 2>` (MAX_RANK entries, zero-filled).
    pub fn dims_i32(mut self, xs: &[i32]) -> Self {
        for i in 0..MAX_RANK {
            self = self.i32(xs.get(i).copied().unwrap_or(0));
        }
        self
    }
    /// The bytes, zero-padded to a multiple of 16.
    pub fn finish(mut self) -> Vec<u8> {
        while !self.0.len().is_multiple_of(16) || self.0.is_empty() {
            self.0.push(0);
        }
        self.0
    }
}

/// A 1-D grid of `n_threads` invocations in workgroups of `wg`, folded into
/// a second dimension past [`MAX_GROUPS_PER_DIM`]. Kernels index with
/// `gid.x + gid.y * num_workgroups.x * WG` and bounds-check.
pub fn grid_1d(n_threads: u64, wg: u32) -> Result<[u32; 3]> {
    let groups = n_threads.div_ceil(u64::from(wg));
    if groups <= u64::from(MAX_GROUPS_PER_DIM) {
        return Ok([groups as u32, 1, 1]);
    }
    let y = groups.div_ceil(u64::from(MAX_GROUPS_PER_DIM));
    if y > u64::from(MAX_GROUPS_PER_DIM) {
        return Err(Error::TooLarge { what: "elements of one dispatch", found: n_threads });
    }
    Ok([MAX_GROUPS_PER_DIM, y as u32, 1])
}

/// A grid of `n_groups` workgroups (one per output element, row or tile),
/// folded into x and y like [`grid_1d`]; shaders index their workgroup as
/// `wid.y * num_workgroups.x + wid.x` and skip indices past `n_groups`.
pub fn grid_groups(n_groups: u64) -> Result<[u32; 3]> {
    grid_1d(n_groups, 1)
}

/// Checks that a count fits 32-bit kernel indexing.
pub fn to_u32(what: &'static str, x: u64) -> Result<u32> {
    u32::try_from(x).map_err(|_| Error::TooLarge { what, found: x })
}

/// Number of elements of a computed shape; a product past `u64` (possible
/// only for shapes built from hostile arguments) is an error, not a panic.
pub fn checked_numel(shape: &[u64]) -> Result<u64> {
    shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or(Error::TooLarge { what: "element count", found: u64::MAX })
}

/// Contiguous (row-major) strides of a shape, in elements.
pub fn contiguous_strides(shape: &[u64]) -> Vec<u64> {
    let mut strides = vec![1u64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

/// Normalizes a possibly negative dim index against `rank`.
pub fn norm_dim(dim: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let d = if dim < 0 { dim + r } else { dim };
    (0..r).contains(&d).then_some(d as usize)
}

pub use crate::ctx::{Ctx, check_rank, dims_u32, float_shader, same_dtype};
