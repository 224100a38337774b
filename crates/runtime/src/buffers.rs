//! The device memory of one delegate call: a buffer per root value that
//! needs one, the arenas the memory planner lays intermediates into, the
//! read-back buffers of the outputs, and the constants uploaded once.
//!
//! View-like ops become buffer aliases (`Step::Alias`: the value uses its
//! source's buffer). The memory plan ([`etwgpu_graph::plan_graph`]) places
//! the intermediates in a few arenas, bound at their planned offsets, so
//! tensors that are never live together share bytes (no dispatch reads and
//! writes one arena: WebGPU tracks usage per whole buffer). Graph inputs
//! and outputs, constants, prepacked and scratch tensors keep their own
//! buffers (constants never share, whatever their `mem_obj_id` or named
//! key); so does everything when the device cannot bind the arenas, or once
//! a re-lowered chain no longer fits the plan
//! ([`DeviceBuffers::leave_arenas`]). Buffers are sized at the declared
//! maximum shapes.

use etwgpu_format::{DType, Program, ValueId, VkGraph, VkValue};
use etwgpu_graph::lower::elem_type;
use etwgpu_kernels::{Step, Vid};

use crate::device::Runtime;
use crate::error::{Error, Result};
use crate::options::{LoadProgress, LoadStage};
use crate::tensor::{convert, to_device_layout};

/// Bytes of a tensor's buffer at its maximum shape (bools take a `u32`
/// each on the device; see `ElemType::device_size_bytes`).
pub(crate) fn device_size_bytes(t: &etwgpu_format::VkTensor) -> u64 {
    t.numel().saturating_mul(elem_type(t.dtype).device_size_bytes() as u64)
}

/// `n` rounded up to a multiple of 4, at least 4: buffer sizes and copy
/// lengths.
pub(crate) fn align4(n: u64) -> u64 {
    n.div_ceil(4).max(1) * 4
}

/// Value `id` of `graph`, which must be a tensor.
pub(crate) fn tensor_of(graph: &VkGraph, id: ValueId) -> Result<&etwgpu_format::VkTensor> {
    match graph.value(id) {
        VkValue::Tensor(t) => Ok(t),
        other => Err(etwgpu_graph::LowerError::NotATensor { value: id.0, found: other.kind() }.into()),
    }
}

/// Fails, naming the tensor, when one is larger than a storage binding (or a
/// buffer) of this device may be: caught before any GPU object is made.
pub(crate) fn check_tensor_sizes(rt: &Runtime, graph: &VkGraph) -> Result<()> {
    let limits = rt.device.limits();
    let limit = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
    for (idx, v) in graph.values.iter().enumerate() {
        if let VkValue::Tensor(t) = v {
            let bytes = device_size_bytes(t);
            if bytes > limit {
                return Err(Error::TensorTooLarge { value: idx as u32, shape: t.dims.clone(), bytes, limit });
            }
        }
    }
    Ok(())
}

/// What [`DeviceBuffers::allocate`] lays out: one delegate call's graph and
/// the values it must hold.
pub(crate) struct Layout<'a> {
    /// The runtime whose device holds the buffers.
    pub rt: &'a Runtime,
    /// Label prefix of every buffer (the delegate call).
    pub name: &'a str,
    /// The graph, after retyping.
    pub graph: &'a VkGraph,
    /// Per value: the dtype of its constant's bytes in the file where that
    /// differs from its device dtype.
    pub file_dtype: &'a [Option<DType>],
    /// Per value: the columns its constant takes of its bytes in the file,
    /// for the chunks of a split constant ([`etwgpu_graph::split`]).
    pub windows: &'a [Option<etwgpu_graph::split::ColumnWindow>],
    /// The chain's steps at the maximum shapes.
    pub steps: &'a [Step],
    /// Per step, the op of the chain it comes from (an op's steps are
    /// planned as one: [`etwgpu_graph::plan_graph`]).
    pub nodes: &'a [usize],
    /// The scratch tensors the ops share.
    pub scratch: &'a [Vid],
    /// Graph inputs and outputs that are tensors: they keep own buffers.
    pub io: &'a [ValueId],
    /// The graph outputs, each given a read-back buffer.
    pub outputs: &'a [ValueId],
}

/// The buffers of one delegate call.
#[derive(Debug)]
pub(crate) struct DeviceBuffers {
    /// Per value: the value whose buffer it uses (itself unless aliased).
    root: Vec<u32>,
    /// Per value: its buffer, for roots that have one.
    buffers: Vec<Option<wgpu::Buffer>>,
    /// The memory plan at the maximum shapes, while intermediates share the
    /// arenas; `None` once every tensor has its own buffer.
    memory: Option<etwgpu_graph::MemoryPlan>,
    /// The arenas of `memory`.
    arenas: Vec<wgpu::Buffer>,
    /// Per graph output: the buffer it is copied into to be read back.
    pub(crate) readback: Vec<wgpu::Buffer>,
}

impl DeviceBuffers {
    /// Resolves aliases, creates the buffers and uploads constants and
    /// prepacked tensors (once), calling `progress` per constant. Running
    /// out of device memory is [`Error::OutOfMemory`], caught before
    /// anything is written into the buffers that could not be made.
    pub(crate) async fn allocate(
        at: &Layout<'_>,
        program: &Program,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<Self> {
        let n = at.graph.values.len();
        let mut me = Self {
            root: (0..n as u32).collect(),
            buffers: vec![None; n],
            memory: None,
            arenas: Vec::new(),
            readback: Vec::new(),
        };
        let oom = at.rt.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let created = me.create(at);
        let oom = oom.pop().await;
        let (uploads, bytes) = created?;
        if let Some(e) = oom {
            return Err(Error::OutOfMemory { method: at.name.to_string(), bytes, reason: e.to_string() });
        }
        let sizes: Vec<u64> = uploads
            .iter()
            .map(|&(_, src)| tensor_of(at.graph, src).map(etwgpu_format::VkTensor::size_bytes))
            .collect::<Result<_>>()?;
        let total = sizes.iter().sum();
        let (mut done, mut staged) = (0, 0);
        for ((idx, src), size) in uploads.into_iter().zip(sizes) {
            let buffer = me.buffers[idx].as_ref().expect("uploaded values have buffers");
            upload_constant(at, program, src, buffer, &mut staged).await?;
            done += size;
            progress(LoadProgress { stage: LoadStage::Weights, done, total });
        }
        Ok(me)
    }

    /// The root value whose buffer `v` uses.
    pub(crate) fn root_of(&self, v: Vid) -> usize {
        self.root[v.0 as usize] as usize
    }

    /// The own buffer of `value` (a graph input or output, or a constant).
    pub(crate) fn own(&self, value: ValueId) -> &wgpu::Buffer {
        self.buffers[self.root_of(Vid(value.0))].as_ref().expect("inputs, outputs and constants have own buffers")
    }

    /// Whether a chain lowered to `steps` still fits the arenas (always,
    /// once every tensor has its own buffer).
    pub(crate) fn fits(&self, steps: &[Step]) -> bool {
        self.memory.as_ref().is_none_or(|m| m.fits(steps))
    }

    /// Bytes of the arenas intermediates share (0 when each has its own
    /// buffer).
    pub(crate) fn arena_bytes(&self) -> u64 {
        self.arenas.iter().map(wgpu::Buffer::size).sum()
    }

    /// The arena and offset of root `idx`, when it lives in an arena.
    fn arena_slot(&self, idx: usize) -> Option<(usize, u64)> {
        match self.memory.as_ref()?.placement(Vid(idx as u32))? {
            etwgpu_graph::Placement::Arena { arena, offset } => Some((arena as usize, offset)),
            etwgpu_graph::Placement::Dedicated => None,
        }
    }

    /// Where root `idx` of `graph` is bound: its own buffer or its slot of
    /// an arena.
    pub(crate) fn binding(&self, graph: &VkGraph, idx: usize) -> Result<wgpu::BindingResource<'_>> {
        Ok(match self.arena_slot(idx) {
            Some((arena, offset)) => wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &self.arenas[arena],
                offset,
                size: wgpu::BufferSize::new(align4(device_size_bytes(tensor_of(graph, ValueId(idx as u32))?))),
            }),
            None => self.buffers[idx].as_ref().expect("bound values have buffers").as_entire_binding(),
        })
    }

    /// Gives every arena tensor its own buffer: the chain re-lowered at
    /// other shapes no longer fits the plan made at the maximum shapes.
    pub(crate) fn leave_arenas(&mut self, rt: &Runtime, name: &str, graph: &VkGraph) -> Result<()> {
        let Some(memory) = self.memory.take() else { return Ok(()) };
        for c in memory.classes.values() {
            if matches!(c.placement, etwgpu_graph::Placement::Arena { .. }) {
                let idx = self.root_of(c.root);
                let t = tensor_of(graph, ValueId(idx as u32))?;
                self.buffers[idx] = Some(storage_buffer(rt, &format!("{name} %{idx}"), align4(device_size_bytes(t))));
            }
        }
        self.arenas.clear();
        Ok(())
    }

    /// Creates every buffer of the call; returns the constants to upload
    /// (buffer root, constant value) and the bytes asked for.
    fn create(&mut self, at: &Layout<'_>) -> Result<(Vec<(usize, ValueId)>, u64)> {
        let mut needed = vec![false; at.graph.values.len()];
        let mut prepacked: Vec<(usize, ValueId)> = Vec::new();
        for step in at.steps {
            match step {
                Step::Alias { out, src } => self.root[out.0 as usize] = self.root[src.0 as usize],
                Step::Prepack { out, src } => {
                    needed[out.0 as usize] = true;
                    prepacked.push((out.0 as usize, ValueId(src.0)));
                }
                Step::Dispatch(d) => {
                    for v in d.inputs.iter().chain(&d.outputs) {
                        needed[self.root_of(*v)] = true;
                    }
                }
                Step::SymInt { .. } | Step::ReadSymInt { .. } | Step::Scratch { .. } => {}
            }
        }
        for v in at.scratch {
            needed[self.root_of(*v)] = true;
        }
        for v in at.io {
            needed[self.root_of(Vid(v.0))] = true;
        }
        // Intermediates share arenas when the device can bind them at the
        // planned offsets; otherwise each keeps its own buffer.
        let memory = etwgpu_graph::plan_graph(at.graph, at.steps, at.nodes, at.scratch)?;
        let limits = at.rt.device.limits();
        let usable = u64::from(limits.min_storage_buffer_offset_alignment) <= etwgpu_graph::memory::ALIGN
            && memory
                .arenas
                .iter()
                .all(|&b| b <= limits.max_storage_buffer_binding_size && b <= limits.max_buffer_size)
            && memory.fits(at.steps);
        let mut uploads = Vec::new();
        let mut bytes = 0u64;
        if usable && !memory.arenas.is_empty() {
            bytes = memory.arenas.iter().map(|&b| align4(b)).fold(0, u64::saturating_add);
            self.arenas = memory
                .arenas
                .iter()
                .enumerate()
                .map(|(i, &size)| storage_buffer(at.rt, &format!("{} arena {i}", at.name), align4(size)))
                .collect();
            self.memory = Some(memory);
        }
        for (idx, need) in needed.iter().enumerate() {
            if !need || self.arena_slot(idx).is_some() {
                continue;
            }
            let t = tensor_of(at.graph, ValueId(idx as u32))?;
            let size = align4(device_size_bytes(t));
            bytes = bytes.saturating_add(size);
            // A constant bound directly (not through prepack) keeps its data.
            if t.constant.is_some() {
                uploads.push((idx, ValueId(idx as u32)));
            }
            self.buffers[idx] = Some(storage_buffer(at.rt, &format!("{} %{idx}", at.name), size));
        }
        uploads.extend(prepacked);
        self.readback = at
            .outputs
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let size = align4(device_size_bytes(tensor_of(at.graph, v)?));
                bytes = bytes.saturating_add(size);
                Ok(at.rt.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(&format!("{} output {i} read-back", at.name)),
                    size,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                }))
            })
            .collect::<Result<_>>()?;
        Ok((uploads, bytes))
    }
}

/// A storage buffer that can be written and copied from.
fn storage_buffer(rt: &Runtime, label: &str, size: u64) -> wgpu::Buffer {
    rt.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}

/// Writes the bytes of constant `value` into `buffer`, converted to its
/// device dtype and layout.
async fn upload_constant(
    at: &Layout<'_>,
    program: &Program,
    value: ValueId,
    buffer: &wgpu::Buffer,
    staged: &mut u64,
) -> Result<()> {
    let t = tensor_of(at.graph, value)?;
    let cid = t.constant.expect("only constants are uploaded");
    let constant = &at.graph.constants[cid.0 as usize];
    let data = match &constant.source {
        etwgpu_format::ConstantSource::Missing { key } => {
            return Err(Error::MissingConstant { value: value.0, key: key.clone() });
        }
        _ => program.data(constant.data().expect("resolved constants have data")),
    };
    // A promoted float16 constant or a narrowed float32 cache: its bytes in
    // the file have the other float type; an int64 constant held as int32.
    let file_dtype = at.file_dtype.get(value.idx()).copied().flatten().unwrap_or(t.dtype);
    let elem = file_dtype.size_bytes() as u64;
    let window = at.windows.get(value.idx()).copied().flatten();
    let expected = match (window, &t.dims[..]) {
        (Some(w), &[rows, _]) => rows * w.cols * elem,
        _ => t.numel() * elem,
    };
    if data.len() as u64 != expected {
        return Err(Error::ConstantSize { value: value.0, expected, found: data.len() as u64 });
    }
    // A column chunk of a split constant: its columns of each file row.
    let gathered;
    let data = match (window, &t.dims[..]) {
        (Some(w), &[_, cols]) => {
            let (row, at, len) = ((w.cols * elem) as usize, (w.start * elem) as usize, (cols * elem) as usize);
            gathered = data.chunks_exact(row.max(1)).flat_map(|r| &r[at..at + len]).copied().collect::<Vec<u8>>();
            &gathered[..]
        }
        _ => data,
    };
    if data.is_empty() {
        return Ok(());
    }
    // The device bytes are written in pieces of at most `UPLOAD_PIECE`
    // made from the file's bytes as they go, never a copy of the whole
    // constant; every `UPLOAD_FLUSH` bytes the queue is flushed so that the
    // staging copies of the pieces written are freed (natively; a browser's
    // `writeBuffer` copies at once).
    let dev_elem = elem_type(t.dtype).device_size_bytes();
    let q4_rows = match t.dims[..] {
        [n, row_bytes] if t.memory_layout == etwgpu_graph::layout::Q4_WORD_MAJOR && row_bytes % 16 == 0 => {
            Some((n as usize, row_bytes as usize))
        }
        _ => None,
    };
    let mut write = async |offset: usize, piece: Vec<u8>| -> Result<()> {
        let mut piece = to_device_layout(piece, t.dtype);
        piece.resize(align4(piece.len() as u64) as usize, 0);
        at.rt.queue.write_buffer(buffer, offset as u64, &piece);
        *staged += piece.len() as u64;
        if *staged >= UPLOAD_FLUSH {
            *staged = 0;
            at.rt.queue.submit([]);
            at.rt.wait_idle_async().await?;
        }
        Ok(())
    };
    match q4_rows {
        // Word-major 4-bit weights (1 byte per element, no conversion):
        // word `w` of every row, side by side, is one contiguous run of the
        // device buffer.
        Some((n, row_bytes)) => {
            for w in 0..row_bytes / 16 {
                let column: Vec<u8> =
                    data.chunks_exact(row_bytes).take(n).flat_map(|r| &r[w * 16..w * 16 + 16]).copied().collect();
                write(w * n * 16, column).await?;
            }
        }
        None => {
            let piece = UPLOAD_PIECE / 8 * 8;
            let file_elem = file_dtype.size_bytes();
            for (i, bytes) in data.chunks(piece).enumerate() {
                let converted = convert(bytes, file_dtype, t.dtype)
                    .expect("the retype passes only pair dtypes convert takes")
                    .map_err(|found| Error::ConstantOutOfRange { value: value.0, dtype: t.dtype, found })?;
                write(i * piece / file_elem * dev_elem, converted).await?;
            }
        }
    }
    Ok(())
}

/// Most file bytes converted and written to the device at once.
const UPLOAD_PIECE: usize = 16 << 20;
/// Bytes written to the queue between flushes of its staging copies.
const UPLOAD_FLUSH: u64 = 64 << 20;
