//! Lowering a VK00 graph into [`Step`]s, without a GPU.
//!
//! A little over the house limit of about 600 lines: the first lowering
//! ([`Lowerer::lower_live`]) and the re-lowering of what changed
//! ([`Lowerer::relower`]) share the one graph view the host rules read and
//! the per-op record ([`LiveChain`]) of what each rule looked at; apart,
//! each file would hold half of that record's rules.
//!
//! Every op of the chain is looked up in the kernel table and lowered in
//! order at the live shapes: each op infers its output shapes, which the
//! next ops see. The runtime lowers at load (maximum shapes) and again when
//! the live input shapes change; `etwgpu inspect --plan` lowers at the
//! maximum shapes to plan memory.
//!
//! Scratch: [`Lowerer::with_scratch`] appends [`N_SCRATCH`] f32 tensors to
//! the graph's value table, shared by every op (ops run in order, and no
//! op's scratch contents outlive it). Each op declares the scratch it may
//! use at any live shape ([`Step::Scratch`], from static dims only), so
//! lowering at the maximum shapes sizes them once; the memory plan pins
//! them, and every later lowering fits that plan.

use std::collections::{BTreeMap, BTreeSet};

use etwgpu_format::{DType, ValueId, VkGraph, VkTensor, VkValue};
use etwgpu_kernels::plan::{Ctx, N_SCRATCH};
use etwgpu_kernels::{ElemType, OpId, Step, TensorInfo, Value, Vid};

use crate::affine::{Affine, Driver, same_structure};
use crate::memory::{MemoryPlan, plan_ops};

/// The device element type of a format dtype.
pub fn elem_type(d: DType) -> ElemType {
    match d {
        DType::Bool => ElemType::Bool,
        DType::U8 => ElemType::U8,
        DType::I8 => ElemType::I8,
        DType::I16 => ElemType::I16,
        DType::I32 => ElemType::I32,
        DType::I64 => ElemType::I64,
        DType::F16 => ElemType::F16,
        DType::BF16 => ElemType::BF16,
        DType::F32 => ElemType::F32,
        DType::F64 => ElemType::F64,
    }
}

/// Why a chain could not be lowered.
#[derive(Debug, thiserror::Error)]
pub enum LowerError {
    /// A tensor is larger than [`MAX_TENSOR_BYTES`].
    #[error("tensor %{value} needs {bytes} bytes, over the planner's limit of {limit}")]
    TensorTooLarge {
        /// Value id.
        value: u32,
        /// Device bytes.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// An operator is not in the kernel table.
    #[error("unsupported operator {op} (node {node_id})")]
    UnsupportedOp {
        /// ExecuTorch op name.
        op: String,
        /// Node id of the call.
        node_id: u32,
    },
    /// An operator's host rule rejected the call.
    #[error("operator {op} (node {node_id})")]
    Op {
        /// ExecuTorch op name.
        op: String,
        /// Node id of the call.
        node_id: u32,
        /// Why.
        #[source]
        source: etwgpu_kernels::Error,
    },
    /// An operator computed an output shape its tensor cannot hold.
    #[error("operator {op} (node {node_id}) output %{value}: shape {found:?} does not fit the declared {max:?}")]
    OutputShape {
        /// ExecuTorch op name.
        op: String,
        /// Node id of the call.
        node_id: u32,
        /// The output value id.
        value: u32,
        /// Declared (maximum) shape.
        max: Vec<u64>,
        /// Inferred shape.
        found: Vec<u64>,
    },
    /// An operator declared more scratch than the lowering at the maximum
    /// shapes sized (a rule whose declaration depends on live shapes).
    #[error(
        "operator {op} (node {node_id}) declares {bytes} bytes of scratch {slot}, over the {capacity} sized at load"
    )]
    Scratch {
        /// ExecuTorch op name.
        op: String,
        /// Node id of the call.
        node_id: u32,
        /// The scratch slot.
        slot: usize,
        /// Bytes declared.
        bytes: u64,
        /// Bytes of the scratch tensor.
        capacity: u64,
    },
    /// A graph value that must be a tensor is not.
    #[error("value %{value} should be a tensor, found {found}")]
    NotATensor {
        /// Value id.
        value: u32,
        /// Kind found.
        found: &'static str,
    },
    /// `et_vk.select_as_symint` reads a tensor the host has no copy of.
    #[error("operator {op} (node {node_id}) reads %{value} on the host, but only graph inputs are readable")]
    SymIntSource {
        /// ExecuTorch op name.
        op: String,
        /// Node id of the call.
        node_id: u32,
        /// The tensor read.
        value: u32,
    },
}

/// The graph with live shapes, as the kernels' host rules see it.
struct GraphView<'a> {
    graph: &'a VkGraph,
    lists: &'a [Vec<Vid>],
    shapes: &'a [Vec<u64>],
    symints: &'a [i64],
    /// Every value id a host rule looked at (for [`Lowerer::relower`]).
    reads: std::cell::RefCell<Vec<u32>>,
}

impl etwgpu_kernels::Graph for GraphView<'_> {
    fn value(&self, id: Vid) -> Value<'_> {
        self.reads.borrow_mut().push(id.0);
        match &self.graph.values[id.0 as usize] {
            VkValue::Null => Value::Null,
            VkValue::Int(x) => Value::Int(*x),
            VkValue::Double(x) => Value::Double(*x),
            VkValue::Bool(x) => Value::Bool(*x),
            VkValue::Tensor(t) => Value::Tensor(TensorInfo {
                id,
                dtype: elem_type(t.dtype),
                shape: &self.shapes[id.0 as usize],
                is_constant: t.constant.is_some(),
                q4_word_major: t.memory_layout == crate::layout::Q4_WORD_MAJOR,
            }),
            VkValue::IntList(x) => Value::IntList(x),
            VkValue::DoubleList(x) => Value::DoubleList(x),
            VkValue::BoolList(x) => Value::BoolList(x),
            VkValue::ValueList(_) => Value::List(&self.lists[id.0 as usize]),
            VkValue::String(s) => Value::String(s),
            VkValue::SymInt(_) => Value::SymInt(self.symints[id.0 as usize]),
        }
    }
}

/// A graph ready to lower: its ops resolved in the kernel table.
#[derive(Debug, Clone)]
pub struct Lowerer {
    ops: Vec<OpId>,
    /// Per value: the items of a ValueList as [`Vid`]s (empty otherwise).
    lists: Vec<Vec<Vid>>,
    /// The scratch tensors handed to every op (empty: none).
    scratch: Vec<Vid>,
    /// Per scratch tensor: its bytes, once sized (`None` while sizing).
    scratch_bytes: Option<Vec<u64>>,
    /// What the device offers the GEMM routes, handed to every op.
    caps: etwgpu_kernels::DeviceCaps,
}

/// The chain lowered at one set of live inputs.
#[derive(Debug, Clone)]
pub struct Lowered {
    /// Device steps, in order (host-side SymInt steps are applied, not kept).
    pub steps: Vec<Step>,
    /// Per step: the index in the chain of the op it comes from.
    pub nodes: Vec<usize>,
    /// Per value: its live shape (declared shape for untouched tensors).
    pub shapes: Vec<Vec<u64>>,
    /// Per scratch slot: the most bytes an op declared ([`Step::Scratch`]).
    pub scratch_bytes: [u64; N_SCRATCH],
}

/// One graph input as [`Lowerer::lower`] sees it.
#[derive(Debug, Clone, Copy)]
pub struct InputRef<'a> {
    /// Graph value id.
    pub value: ValueId,
    /// `Some(live shape)` for a tensor, `None` for a SymInt input.
    pub shape: Option<&'a [u64]>,
}

fn tensor_of(graph: &VkGraph, id: ValueId) -> Result<&etwgpu_format::VkTensor, LowerError> {
    match graph.value(id) {
        VkValue::Tensor(t) => Ok(t),
        other => Err(LowerError::NotATensor { value: id.0, found: other.kind() }),
    }
}

impl Lowerer {
    /// Resolves every op of `graph` in the kernel table.
    pub fn new(graph: &VkGraph) -> Result<Self, LowerError> {
        let ops = graph
            .chain
            .iter()
            .map(|call| {
                etwgpu_kernels::from_name(&call.name)
                    .ok_or_else(|| LowerError::UnsupportedOp { op: call.name.clone(), node_id: call.node_id })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let lists = graph
            .values
            .iter()
            .map(|v| match v {
                VkValue::ValueList(ids) => ids.iter().map(|i| Vid(i.0)).collect(),
                _ => Vec::new(),
            })
            .collect();
        Ok(Self { ops, lists, scratch: Vec::new(), scratch_bytes: None, caps: etwgpu_kernels::DeviceCaps::default() })
    }

    /// The same lowerer for a device with these capabilities (which GEMM
    /// and attention routes it has). The routes they pick may declare other
    /// scratch sizes (split-K, the subgroup split plan): a lowerer with
    /// scratch is made for its caps by [`Lowerer::with_scratch_for`], not
    /// given them afterwards.
    pub fn with_caps(self, caps: etwgpu_kernels::DeviceCaps) -> Self {
        Self { caps, ..self }
    }

    /// The capabilities its rules see.
    pub fn caps(&self) -> etwgpu_kernels::DeviceCaps {
        self.caps
    }

    /// Appends [`N_SCRATCH`] f32 1-D scratch tensors to `graph`, each sized
    /// to the most bytes its ops declare ([`Step::Scratch`], lowered at the
    /// maximum shapes, host-read SymInts taken as `symint`), and returns a
    /// lowerer that hands them to every op. A graph whose ops declare none
    /// is left as it is, and its ops get no scratch.
    pub fn with_scratch(graph: &mut VkGraph, symint: i64) -> Result<Self, LowerError> {
        Self::with_scratch_for(graph, symint, etwgpu_kernels::DeviceCaps::default())
    }

    /// [`Lowerer::with_scratch`] for a device with `caps`, which the
    /// returned lowerer keeps: the scratch is sized by the routes the ops
    /// will take there (the split-KV attention's subgroup route plans more
    /// splits than the workgroup one, the cooperative-matrix GEMMs may
    /// split K), not by the default caps' routes.
    pub fn with_scratch_for(
        graph: &mut VkGraph,
        symint: i64,
        caps: etwgpu_kernels::DeviceCaps,
    ) -> Result<Self, LowerError> {
        let n_values = graph.values.len();
        let scratch_tensor = |numel: u64| {
            VkValue::Tensor(VkTensor {
                dtype: DType::F32,
                dims: vec![numel],
                constant: None,
                mem_obj_id: None,
                storage_type: 255,
                memory_layout: 255,
                staging_dtype: None,
            })
        };
        graph.values.extend((0..N_SCRATCH).map(|_| scratch_tensor(0)));
        let mut me = Self::new(graph)?.with_caps(caps);
        me.scratch = (n_values..n_values + N_SCRATCH).map(|i| Vid(i as u32)).collect();
        let declared = me.lower_at_max(graph, symint).map(|l| l.scratch_bytes);
        let declared = match declared {
            Ok(d) if d.iter().any(|&b| b > 0) => d,
            other => {
                graph.values.truncate(n_values);
                other?;
                return Ok(Self::new(graph)?.with_caps(caps));
            }
        };
        for (k, &bytes) in declared.iter().enumerate() {
            graph.values[n_values + k] = scratch_tensor(bytes.div_ceil(4));
        }
        me.scratch_bytes = Some(declared.to_vec());
        Ok(me)
    }

    /// The scratch tensors the ops may use (empty when there are none): the
    /// memory plan pins them ([`plan_graph`]).
    pub fn scratch(&self) -> Vec<Vid> {
        let sized = self.scratch_bytes.as_deref().unwrap_or(&[]);
        self.scratch.iter().zip(sized).filter(|&(_, &b)| b > 0).map(|(&v, _)| v).collect()
    }

    /// Lowers `graph` at its declared (maximum) input shapes, SymInts read
    /// on the host taken as `symint`.
    pub fn lower_at_max(&self, graph: &VkGraph, symint: i64) -> Result<Lowered, LowerError> {
        let shapes = declared_shapes(graph);
        let inputs: Vec<InputRef<'_>> = graph
            .input_ids
            .iter()
            .map(|&value| InputRef {
                value,
                shape: matches!(graph.value(value), VkValue::Tensor(_)).then(|| shapes[value.idx()].as_slice()),
            })
            .collect();
        self.lower(graph, &inputs, |_, _| symint)
    }

    /// Lowers every op, in chain order, at these inputs. `read(input, elem)`
    /// gives a SymInt read on the host: element `elem` of input `input`
    /// (for a SymInt input, `elem` is 0).
    pub fn lower(
        &self,
        graph: &VkGraph,
        inputs: &[InputRef<'_>],
        read: impl FnMut(usize, u64) -> i64,
    ) -> Result<Lowered, LowerError> {
        Ok(self.lower_live(graph, inputs, read)?.flatten())
    }

    /// Lowers every op, in chain order, at these inputs (like
    /// [`Lowerer::lower`]), keeping each op's steps and what its host rule
    /// looked at, so [`Lowerer::relower`] can later re-run only the rules
    /// whose inputs changed.
    pub fn lower_live(
        &self,
        graph: &VkGraph,
        inputs: &[InputRef<'_>],
        mut read: impl FnMut(usize, u64) -> i64,
    ) -> Result<LiveChain, LowerError> {
        let mut shapes = declared_shapes(graph);
        let mut symints = vec![0i64; graph.values.len()];
        for (index, input) in inputs.iter().enumerate() {
            match input.shape {
                None => symints[input.value.idx()] = read(index, 0),
                Some(shape) => shapes[input.value.idx()] = shape.to_vec(),
            }
        }
        let mut live = LiveChain {
            nodes: Vec::with_capacity(graph.chain.len()),
            shapes,
            symints,
            scratch_bytes: [0; N_SCRATCH],
            rule_calls: 0,
            single_writers: true,
            affine: None,
        };
        let mut written = vec![false; graph.values.len()];
        for input in inputs {
            written[input.value.idx()] = true;
        }
        for node in 0..graph.chain.len() {
            let state = self.lower_node(graph, node, inputs, &mut live, &mut read, None)?;
            for &v in &state.writes {
                live.single_writers &= !std::mem::replace(&mut written[v as usize], true);
            }
            live.nodes.push(state);
        }
        Ok(live)
    }

    /// Brings `live` (lowered from this graph) to these inputs, re-running
    /// only the host rules of ops that look at a value whose live shape or
    /// SymInt value changed (an input's shape, a SymInt input, a SymInt
    /// read on the host, and so on down the chain).
    ///
    /// A step whose only change is one driver (a SymInt input or host-read
    /// element: the position) builds an affine model of what that driver
    /// reaches (`affine.rs`), and every later step that changes only that
    /// driver, inside the range the model was checked over, patches the
    /// uniform words, workgroup counts, shapes and SymInts it predicts and
    /// runs no host rule at all ([`LiveChain::rule_calls`] counts the rules
    /// run, the model's probes included). On `Err`, `live` is left
    /// part-way: lower again from scratch ([`Lowerer::lower_live`]) before
    /// using it.
    pub fn relower(
        &self,
        graph: &VkGraph,
        live: &mut LiveChain,
        inputs: &[InputRef<'_>],
        mut read: impl FnMut(usize, u64) -> i64,
    ) -> Result<Relowered, LowerError> {
        if let Some(model) = live.affine.take()
            && let Some(r) = Self::patch_affine(live, &model, inputs, &mut read)
        {
            live.affine = Some(model);
            return Ok(r);
        }
        let changed: Vec<Driver> = Self::drivers(live, inputs)
            .into_iter()
            .filter(|&(input, elem)| Some(read(input, elem)) != Self::driver_value(live, inputs, (input, elem)))
            .collect();
        let out = self.relower_rules(graph, live, inputs, &mut read)?;
        if let [driver] = changed[..] {
            live.affine = self.build_affine(graph, live, inputs, driver, &mut read);
        }
        Ok(out)
    }

    /// Whether `live`'s affine model brings it to these inputs with no host
    /// rule ([`Lowerer::relower`] would only patch words): they differ
    /// from what it holds only in the model's driver, at a value the model
    /// covers. A caller holding several chains of the same shapes (a decode
    /// plan whose structure changes with the position) picks the one that
    /// does.
    pub fn covers(live: &LiveChain, inputs: &[InputRef<'_>], mut read: impl FnMut(usize, u64) -> i64) -> bool {
        live.affine.as_ref().is_some_and(|model| Self::model_covers(live, model, inputs, &mut read))
    }

    /// [`Lowerer::covers`] with this model.
    fn model_covers(
        live: &LiveChain,
        model: &Affine,
        inputs: &[InputRef<'_>],
        read: &mut impl FnMut(usize, u64) -> i64,
    ) -> bool {
        let same = inputs.iter().enumerate().all(|(index, input)| {
            let v = input.value.idx();
            match input.shape {
                None => (index, 0) == model.driver || read(index, 0) == live.symints[v],
                Some(shape) => live.shapes[v] == shape,
            }
        });
        same && model.others_hold(live, read) && model.covers(read(model.driver.0, model.driver.1))
    }

    /// The value `live` holds for a driver.
    fn driver_value(live: &LiveChain, inputs: &[InputRef<'_>], (input, elem): Driver) -> Option<i64> {
        if inputs[input].shape.is_none() {
            return Some(live.symints[inputs[input].value.idx()]);
        }
        live.nodes
            .iter()
            .flat_map(|n| &n.host_reads)
            .find(|&&(_, i, e)| (i, e) == (input, elem))
            .map(|&(sym, _, _)| live.symints[sym.0 as usize])
    }

    /// Brings `live` to these inputs with `model` alone, when they differ
    /// from what `live` holds only in the model's driver, at a value it
    /// covers; `None` otherwise (`live` untouched).
    fn patch_affine(
        live: &mut LiveChain,
        model: &Affine,
        inputs: &[InputRef<'_>],
        read: &mut impl FnMut(usize, u64) -> i64,
    ) -> Option<Relowered> {
        if !Self::model_covers(live, model, inputs, read) {
            return None;
        }
        let x = read(model.driver.0, model.driver.1);
        model.apply(live, x);
        Some(Relowered { nodes: model.nodes.clone(), structure_kept: true })
    }

    /// [`Lowerer::relower`] by host rules: re-runs those of the ops whose
    /// reads changed.
    fn relower_rules(
        &self,
        graph: &VkGraph,
        live: &mut LiveChain,
        inputs: &[InputRef<'_>],
        read: &mut impl FnMut(usize, u64) -> i64,
    ) -> Result<Relowered, LowerError> {
        let mut dirty = vec![false; graph.values.len()];
        for (index, input) in inputs.iter().enumerate() {
            let v = input.value.idx();
            match input.shape {
                None => {
                    let value = read(index, 0);
                    if live.symints[v] != value {
                        live.symints[v] = value;
                        dirty[v] = true;
                    }
                }
                Some(shape) => {
                    if live.shapes[v] != shape {
                        live.shapes[v] = shape.to_vec();
                        dirty[v] = true;
                    }
                }
            }
        }
        let mut out = Relowered { nodes: Vec::new(), structure_kept: true };
        for node in 0..graph.chain.len() {
            // A value set twice (by an input and an op, or by two ops)
            // holds its last value between lowerings: re-run every rule.
            let reached = !live.single_writers || live.nodes[node].reads.iter().any(|&r| dirty[r as usize]);
            if !reached {
                // Its rule sees what it saw: only its host reads may differ.
                for &(sym, input, elem) in &live.nodes[node].host_reads {
                    let value = read(input, elem);
                    if live.symints[sym.0 as usize] != value {
                        live.symints[sym.0 as usize] = value;
                        dirty[sym.0 as usize] = true;
                    }
                }
                continue;
            }
            let state = self.lower_node(graph, node, inputs, live, read, Some(&mut dirty))?;
            let old = std::mem::replace(&mut live.nodes[node], state);
            out.structure_kept &= same_structure(&old.steps, &live.nodes[node].steps);
            out.nodes.push(node);
        }
        Ok(out)
    }

    /// Runs the host rule of chain op `node` at the live shapes and SymInts
    /// of `live`, applies its shapes and host-side steps to `live` (marking
    /// in `dirty` the values that changed) and returns its state.
    pub(crate) fn lower_node(
        &self,
        graph: &VkGraph,
        node: usize,
        inputs: &[InputRef<'_>],
        live: &mut LiveChain,
        read: &mut impl FnMut(usize, u64) -> i64,
        mut dirty: Option<&mut Vec<bool>>,
    ) -> Result<NodeState, LowerError> {
        let call = &graph.chain[node];
        let op = self.ops[node];
        let args: Vec<Vid> = call.args.iter().map(|a| Vid(a.0)).collect();
        live.rule_calls += 1;
        let view = GraphView {
            graph,
            lists: &self.lists,
            shapes: &live.shapes,
            symints: &live.symints,
            reads: std::cell::RefCell::new(Vec::new()),
        };
        let lowered = op
            .lower(&Ctx::new(&view, &args).with_scratch(&self.scratch).with_caps(self.caps))
            .map_err(|source| LowerError::Op { op: call.name.clone(), node_id: call.node_id, source })?;
        let mut reads = view.reads.into_inner();
        reads.sort_unstable();
        reads.dedup();
        let mut writes = Vec::new();
        let mut mark = |v: usize, changed: bool| {
            writes.push(v as u32);
            if let Some(d) = dirty.as_deref_mut().filter(|_| changed) {
                d[v] = true;
            }
        };
        for (vid, shape) in lowered.shapes {
            let t = tensor_of(graph, ValueId(vid.0))?;
            // ExecuTorch's resize rule: the rank stays, the element count
            // fits the allocation (made at the declared shape).
            if !crate::route::fits_allocation(&shape, &t.dims) {
                return Err(LowerError::OutputShape {
                    op: call.name.clone(),
                    node_id: call.node_id,
                    value: vid.0,
                    max: t.dims.clone(),
                    found: shape,
                });
            }
            let changed = live.shapes[vid.0 as usize] != shape;
            mark(vid.0 as usize, changed);
            if changed {
                live.shapes[vid.0 as usize] = shape;
            }
        }
        let mut steps = Vec::new();
        let mut host_reads = Vec::new();
        for step in lowered.steps {
            let set = match step {
                Step::SymInt { out, value } => Some((out, value)),
                Step::ReadSymInt { out, src, elem } => {
                    let input =
                        inputs.iter().position(|s| s.shape.is_some() && s.value.0 == src.0).ok_or_else(|| {
                            LowerError::SymIntSource { op: call.name.clone(), node_id: call.node_id, value: src.0 }
                        })?;
                    host_reads.push((out, input, elem));
                    Some((out, read(input, elem)))
                }
                Step::Scratch { slot, bytes } => {
                    assert!(slot < N_SCRATCH, "{}: scratch slot {slot} past {N_SCRATCH}", call.name);
                    live.scratch_bytes[slot] = live.scratch_bytes[slot].max(bytes);
                    let capacity = self.scratch_bytes.as_ref().map_or(u64::MAX, |c| c[slot]);
                    if bytes > capacity {
                        return Err(LowerError::Scratch {
                            op: call.name.clone(),
                            node_id: call.node_id,
                            slot,
                            bytes,
                            capacity,
                        });
                    }
                    None
                }
                other => {
                    steps.push(other);
                    None
                }
            };
            if let Some((out, value)) = set {
                let changed = live.symints[out.0 as usize] != value;
                mark(out.0 as usize, changed);
                live.symints[out.0 as usize] = value;
            }
        }
        writes.sort_unstable();
        writes.dedup();
        Ok(NodeState { steps, reads, host_reads, writes })
    }
}

/// One op of a [`LiveChain`]: its device steps and what its rule saw.
#[derive(Debug, Clone)]
pub(crate) struct NodeState {
    /// Device steps (dispatches, aliases, prepacks), in order.
    pub(crate) steps: Vec<Step>,
    /// Value ids its host rule looked at, sorted.
    pub(crate) reads: Vec<u32>,
    /// SymInts it reads on the host: (SymInt, input index, element).
    pub(crate) host_reads: Vec<(Vid, usize, u64)>,
    /// Values whose shape or SymInt value it sets.
    pub(crate) writes: Vec<u32>,
}

/// A chain lowered op by op at live inputs, kept so a later change re-runs
/// only the host rules it reaches ([`Lowerer::relower`]).
#[derive(Debug, Clone)]
pub struct LiveChain {
    pub(crate) nodes: Vec<NodeState>,
    pub(crate) shapes: Vec<Vec<u64>>,
    pub(crate) symints: Vec<i64>,
    scratch_bytes: [u64; N_SCRATCH],
    pub(crate) rule_calls: u64,
    /// Whether every live shape and SymInt is set once (by an input or
    /// one op), so an op whose reads did not change can be skipped.
    pub(crate) single_writers: bool,
    /// What one driver (the position) reaches, as an affine function of
    /// it: a step that changes only that driver patches words instead of
    /// running host rules (`affine.rs`).
    pub(crate) affine: Option<Affine>,
}

/// What [`Lowerer::relower`] changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relowered {
    /// Chain indices of the ops whose host rule re-ran, in order.
    pub nodes: Vec<usize>,
    /// Whether every re-run op records the same work but for uniform bytes
    /// and workgroup counts (same shaders, bindings and uniform sizes).
    pub structure_kept: bool,
}

impl LiveChain {
    /// Whether `other` lowered every op to the same kernels, bindings and
    /// grid dimensions (uniform values and counts aside): two chains of
    /// one method at the same input shapes differ there only where a host
    /// rule chose its route by a value (the decode attention by the
    /// position).
    pub fn same_structure(&self, other: &LiveChain) -> bool {
        self.nodes.len() == other.nodes.len()
            && self.nodes.iter().zip(&other.nodes).all(|(a, b)| same_structure(&a.steps, &b.steps))
    }

    /// Whether it holds an affine model of its driver (`affine.rs`).
    pub fn has_affine(&self) -> bool {
        self.affine.is_some()
    }

    /// Per value: its live shape (declared shape for untouched tensors).
    pub fn shapes(&self) -> &[Vec<u64>] {
        &self.shapes
    }

    /// The device steps of chain op `node`, in order.
    pub fn node_steps(&self, node: usize) -> &[Step] {
        &self.nodes[node].steps
    }

    /// Number of ops in the chain.
    pub fn n_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Every device step with the chain index of its op, in order.
    pub fn steps(&self) -> impl Iterator<Item = (usize, &Step)> {
        self.nodes.iter().enumerate().flat_map(|(n, s)| s.steps.iter().map(move |st| (n, st)))
    }

    /// Host rules run since this chain was first lowered (the first
    /// lowering counts one per op).
    pub fn rule_calls(&self) -> u64 {
        self.rule_calls
    }

    /// The chain as one list of steps (see [`Lowered`]).
    pub fn flatten(&self) -> Lowered {
        let (nodes, steps) = self.steps().map(|(n, s)| (n, s.clone())).unzip();
        Lowered { steps, nodes, shapes: self.shapes.clone(), scratch_bytes: self.scratch_bytes }
    }
}

/// Per value: a tensor's declared (maximum) shape, empty for other values.
pub fn declared_shapes(graph: &VkGraph) -> Vec<Vec<u64>> {
    graph
        .values
        .iter()
        .map(|v| match v {
            VkValue::Tensor(t) => t.dims.clone(),
            _ => Vec::new(),
        })
        .collect()
}

/// Bytes of a tensor's device buffer at its maximum shape (bools take a
/// `u32` each on the device), at least 4.
/// Saturates instead of overflowing (bools can take 4x their stored bytes).
pub fn device_bytes(t: &etwgpu_format::VkTensor) -> u64 {
    let bytes = t.numel().saturating_mul(elem_type(t.dtype).device_size_bytes() as u64);
    bytes.div_ceil(4).max(1).saturating_mul(4)
}

/// The largest tensor the planner accepts (1 TiB): far beyond any device,
/// and small enough that sums over a file's worth of tensors cannot
/// overflow.
pub const MAX_TENSOR_BYTES: u64 = 1 << 40;

/// The memory plan of a lowered chain (`steps`, each from op `nodes[t]`:
/// [`Lowered::nodes`]; an op's steps are planned as one, see
/// [`crate::memory::plan_ops`]): graph inputs and outputs, constants and
/// mutable state are pinned, and so are the `scratch` tensors
/// ([`Lowerer::scratch`]), planned whether or not these steps use them (a
/// later lowering may).
pub fn plan_graph(graph: &VkGraph, steps: &[Step], nodes: &[usize], scratch: &[Vid]) -> Result<MemoryPlan, LowerError> {
    let mut bytes = BTreeMap::new();
    let mut pinned = BTreeSet::new();
    let mut note = |v: Vid| -> Result<(), LowerError> {
        let t = tensor_of(graph, ValueId(v.0))?;
        let b = device_bytes(t);
        if b > MAX_TENSOR_BYTES {
            return Err(LowerError::TensorTooLarge { value: v.0, bytes: b, limit: MAX_TENSOR_BYTES });
        }
        bytes.insert(v, b);
        if t.constant.is_some() {
            pinned.insert(v);
        }
        Ok(())
    };
    for step in steps {
        match step {
            Step::Dispatch(d) => d.inputs.iter().chain(&d.outputs).try_for_each(|&v| note(v))?,
            Step::Alias { out, src } => {
                note(*out)?;
                note(*src)?;
            }
            Step::Prepack { out, .. } => note(*out)?,
            Step::SymInt { .. } | Step::ReadSymInt { .. } | Step::Scratch { .. } => {}
        }
    }
    scratch.iter().try_for_each(|&v| note(v))?;
    pinned.extend(scratch);
    // Graph inputs and outputs (mutable state is passed in and out).
    for id in graph.input_ids.iter().chain(&graph.output_ids) {
        if let VkValue::Tensor(_) = graph.value(*id) {
            pinned.insert(Vid(id.0));
        }
    }
    Ok(plan_ops(steps, nodes, &bytes, &pinned))
}

/// Lowers `graph` at its declared (maximum) input shapes, SymInts read on
/// the host taken as `symint`, without scratch.
pub fn lower_at_max(graph: &VkGraph, symint: i64) -> Result<Lowered, LowerError> {
    Lowerer::new(graph)?.lower_at_max(graph, symint)
}
