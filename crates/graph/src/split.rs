//! Constants past the binding limit, split by rows at load: a device binds
//! at most `max_storage_buffer_binding_size` bytes of a buffer (128 MiB on
//! lavapipe and many browsers), and an LLM's output head or embedding table
//! can be larger. [`split_large`] rewrites the ops that read such a
//! constant into one op per chunk of its rows, each chunk a tensor of its
//! own that fits:
//!
//! - a linear (`aten.linear`, `et_vk.linear_q4gsw`) whose weight is too
//!   large becomes one linear per chunk of output rows (features), and an
//!   `aten.cat` of their outputs along the last dim; a 4-bit weight's
//!   scales `[G, N_pad]` are split by columns to match
//!   ([`ColumnWindow`]);
//! - an embedding (`aten.embedding`, `et_vk.embedding_q4gsw`) whose table
//!   is too large becomes one `etwgpu.embedding_rows` /
//!   `etwgpu.embedding_q4gsw_rows` per chunk of table rows, each giving
//!   zeros for the indices outside its rows, summed by `aten.add`s.
//!
//! A row chunk of a constant is a narrower range of the same bytes in the
//! file (nothing is copied); a column chunk is gathered row by row when the
//! runtime uploads it. Like the retyping passes, the runtime picks this
//! pass for its device and never rewrites a graph itself. A tensor this
//! pass cannot split (an activation, a constant read by another op, a row
//! larger than the limit) stays as it is, for the runtime to refuse with a
//! typed error.

use etwgpu_format::{Constant, ConstantSource, DType, OpCall, ValueId, VkGraph, VkTensor, VkValue};

use crate::lower::elem_type;

/// How an uploaded constant takes its columns from its bytes in the file:
/// the file holds rows of `cols` elements, the tensor `[R, C]` takes
/// columns `start .. start + C` of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnWindow {
    /// Elements per row in the file.
    pub cols: u64,
    /// The first column taken.
    pub start: u64,
}

/// What [`split_large`] did: per value, the column window its constant is
/// uploaded through (`None`: its bytes as they are), and how many ops it
/// split.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    /// Per value (indexed by value id; shorter than the value table where
    /// the rest have none).
    pub windows: Vec<Option<ColumnWindow>>,
    /// Ops rewritten into chunks.
    pub ops: usize,
}

/// Output rows per chunk are a multiple of this when a chunk holds that
/// many (4-bit scales pad their columns to a multiple of 4).
const ROW_ALIGN: u64 = 64;

/// Rewrites every linear and embedding whose constant weight (or scales)
/// takes more than `limit` device bytes into chunks that fit (see the
/// module docs). `file_dtype` is the retyping passes' table of each
/// constant's dtype in the file where it differs from its device dtype;
/// it is extended over the new values.
pub fn split_large(graph: &mut VkGraph, file_dtype: &mut Vec<Option<DType>>, limit: u64) -> Split {
    let mut s = Splitter { graph, file_dtype, windows: Vec::new(), limit };
    let over = |g: &VkGraph, id: ValueId| match g.value(id) {
        VkValue::Tensor(t) => t.constant.is_some() && device_bytes(t) > limit,
        _ => false,
    };
    let chain = std::mem::take(&mut s.graph.chain);
    let mut out = Vec::with_capacity(chain.len());
    let mut ops = 0;
    let mut replaced = Vec::new();
    for call in chain {
        let a = &call.args;
        let rewritten = match (call.name.as_str(), a.len()) {
            ("aten.linear.default", 4) if over(s.graph, a[1]) || over(s.graph, a[2]) => s.linear(&call, false),
            ("et_vk.linear_q4gsw.default", 6) if over(s.graph, a[1]) || over(s.graph, a[2]) => s.linear(&call, true),
            ("aten.embedding.default", 6) if over(s.graph, a[0]) => s.embedding(&call, false),
            ("et_vk.embedding_q4gsw.default", 6) if over(s.graph, a[0]) || over(s.graph, a[1]) => {
                s.embedding(&call, true)
            }
            _ => None,
        };
        match rewritten {
            Some(calls) => {
                ops += 1;
                replaced.extend(call.args.iter().copied().filter(|&v| over(s.graph, v)));
                out.extend(calls);
            }
            None => out.push(call),
        }
    }
    s.graph.chain = out;
    let windows = std::mem::take(&mut s.windows);
    // The split constants no other op reads leave the graph (their value
    // becomes `Null`), so nothing sizes or uploads them.
    let graph = s.graph;
    let mut used = vec![false; graph.values.len()];
    for call in &graph.chain {
        for &v in &call.args {
            used[v.idx()] = true;
            if let VkValue::ValueList(items) = graph.value(v) {
                for item in items {
                    used[item.idx()] = true;
                }
            }
        }
    }
    for v in graph.input_ids.iter().chain(&graph.output_ids) {
        used[v.idx()] = true;
    }
    for v in replaced {
        if !used[v.idx()] {
            graph.values[v.idx()] = VkValue::Null;
        }
    }
    Split { windows, ops }
}

/// Device bytes of a tensor at its maximum shape.
fn device_bytes(t: &VkTensor) -> u64 {
    t.numel().saturating_mul(elem_type(t.dtype).device_size_bytes() as u64)
}

/// The rewrite in progress.
struct Splitter<'a> {
    graph: &'a mut VkGraph,
    file_dtype: &'a mut Vec<Option<DType>>,
    windows: Vec<Option<ColumnWindow>>,
    limit: u64,
}

impl Splitter<'_> {
    fn tensor(&self, id: ValueId) -> Option<&VkTensor> {
        self.graph.value(id).as_tensor()
    }

    /// A new value.
    fn push(&mut self, v: VkValue, file_dtype: Option<DType>, window: Option<ColumnWindow>) -> ValueId {
        let id = ValueId(u32::try_from(self.graph.values.len()).expect("value ids fit u32"));
        self.graph.values.push(v);
        self.file_dtype.resize(id.idx(), None);
        self.file_dtype.push(file_dtype);
        if let Some(w) = window {
            self.windows.resize(id.idx(), None);
            self.windows.push(Some(w));
        }
        id
    }

    fn int(&mut self, x: u64) -> ValueId {
        self.push(VkValue::Int(i64::try_from(x).expect("dims fit i64")), None, None)
    }

    /// A new intermediate like `like` with its last dim `n`.
    fn like(&mut self, like: ValueId, n: u64) -> Option<ValueId> {
        let mut t = self.tensor(like)?.clone();
        *t.dims.last_mut()? = n;
        t.constant = None;
        t.mem_obj_id = None;
        Some(self.push(VkValue::Tensor(t), None, None))
    }

    /// A constant holding rows `start .. start + n` of constant `id` (its
    /// first dim): a narrower range of the same bytes in the file.
    fn rows_of(&mut self, id: ValueId, start: u64, n: u64) -> Option<ValueId> {
        let t = self.tensor(id)?.clone();
        let constant = self.graph.constants.get(t.constant?.0 as usize)?.clone();
        let data = constant.data()?.clone();
        let fdt = self.file_dtype.get(id.idx()).copied().flatten();
        let elem = fdt.unwrap_or(t.dtype).size_bytes() as u64;
        let &rows = t.dims.first()?;
        let row_bytes = t.numel().checked_div(rows)? * elem;
        // Bytes that don't match the shape are the upload's error to name.
        if data.range.len() as u64 != rows * row_bytes || start + n > rows {
            return None;
        }
        let at = data.range.start + usize::try_from(start * row_bytes).ok()?;
        let range = at..at + usize::try_from(n * row_bytes).ok()?;
        let data = etwgpu_format::DataRef { file: data.file, range };
        let source = match constant.source {
            ConstantSource::Named { key, .. } => {
                ConstantSource::Named { key: format!("{key}[{start}..{}]", start + n), data }
            }
            _ => ConstantSource::DelegateBytes(data),
        };
        let cid = etwgpu_format::ConstantId(u32::try_from(self.graph.constants.len()).ok()?);
        self.graph.constants.push(Constant { len: n * row_bytes, source });
        let mut chunk = t;
        chunk.dims[0] = n;
        chunk.constant = Some(cid);
        chunk.mem_obj_id = None;
        Some(self.push(VkValue::Tensor(chunk), fdt, None))
    }

    /// A constant holding columns `start .. start + n` of the 2-D constant
    /// `id`, gathered at upload ([`ColumnWindow`]).
    fn cols_of(&mut self, id: ValueId, start: u64, n: u64) -> Option<ValueId> {
        let t = self.tensor(id)?.clone();
        let [_, cols] = t.dims[..] else { return None };
        t.constant?;
        if start + n > cols {
            return None;
        }
        let fdt = self.file_dtype.get(id.idx()).copied().flatten();
        let mut chunk = t;
        chunk.dims[1] = n;
        chunk.mem_obj_id = None;
        Some(self.push(VkValue::Tensor(chunk), fdt, Some(ColumnWindow { cols, start })))
    }

    /// Rows per chunk of a table of `rows` rows whose row takes `row_bytes`
    /// of the largest tensor split with it; `None` when it needs no split or
    /// one row (or `min` rows) cannot fit.
    fn chunk_rows(&self, rows: u64, row_bytes: u64, min: u64) -> Option<u64> {
        let fit = self.limit.checked_div(row_bytes)?;
        let fit = if fit >= ROW_ALIGN { fit / ROW_ALIGN * ROW_ALIGN } else { fit / min * min };
        (fit > 0 && fit < rows).then_some(fit)
    }

    /// `aten.linear(x, w [N, K], bias?, out)` or `et_vk.linear_q4gsw(x, w
    /// [N, K/2], scales [G, N_pad], group_size, bias?, out)` as one linear
    /// per chunk of `N` and an `aten.cat` along the last dim.
    fn linear(&mut self, call: &OpCall, q4: bool) -> Option<Vec<OpCall>> {
        let a = call.args.clone();
        let (x, w, out) = (a[0], a[1], *a.last()?);
        let bias = if q4 { a[4] } else { a[2] };
        let wt = self.tensor(w)?;
        let [n, _] = wt.dims[..] else { return None };
        let mut row_bytes = device_bytes(wt) / n.max(1);
        let scales = if q4 {
            let st = self.tensor(a[2])?;
            let [g, n_pad] = st.dims[..] else { return None };
            if n_pad < n || st.constant.is_none() {
                return None;
            }
            row_bytes = row_bytes.max(g * elem_type(st.dtype).device_size_bytes() as u64);
            Some((a[2], n_pad))
        } else {
            None
        };
        match self.graph.value(bias) {
            VkValue::Null => {}
            VkValue::Tensor(b) if b.constant.is_some() && b.dims.len() == 1 => {}
            _ => return None,
        }
        if self.tensor(out)?.dims.last() != Some(&n) {
            return None;
        }
        let has_bias = matches!(self.graph.value(bias), VkValue::Tensor(_));
        let rows = self.chunk_rows(n, row_bytes, 4)?;
        let mut calls = Vec::new();
        let mut parts = Vec::new();
        let mut start = 0;
        while start < n {
            let m = rows.min(n - start);
            let w_i = self.rows_of(w, start, m)?;
            let b_i = if has_bias { self.rows_of(bias, start, m)? } else { bias };
            let out_i = self.like(out, m)?;
            let args = match scales {
                Some((s, n_pad)) => {
                    // The last chunk keeps the padding columns.
                    let cols = if start + m == n { n_pad - start } else { m };
                    let s_i = self.cols_of(s, start, cols)?;
                    vec![x, w_i, s_i, a[3], b_i, out_i]
                }
                None => vec![x, w_i, b_i, out_i],
            };
            calls.push(OpCall { node_id: call.node_id, name: call.name.clone(), args });
            parts.push(out_i);
            start += m;
        }
        let rank = self.tensor(out)?.dims.len() as u64;
        let list = self.push(VkValue::ValueList(parts), None, None);
        let dim = self.int(rank - 1);
        calls.push(OpCall { node_id: call.node_id, name: "aten.cat.default".into(), args: vec![list, dim, out] });
        Some(calls)
    }

    /// `aten.embedding(w [V, E], indices, padding_idx, scale_grad, sparse,
    /// out)` or `et_vk.embedding_q4gsw(w [V, E/2], scales [V, G],
    /// group_size, indices, is_linear_weight, out)` as one lookup per chunk
    /// of `V`, summed.
    fn embedding(&mut self, call: &OpCall, q4: bool) -> Option<Vec<OpCall>> {
        let a = call.args.clone();
        let (w, out) = (a[0], a[5]);
        let wt = self.tensor(w)?;
        let [v, _] = wt.dims[..] else { return None };
        let mut row_bytes = device_bytes(wt) / v.max(1);
        if q4 {
            let st = self.tensor(a[1])?;
            if st.dims.first() != Some(&v) || st.constant.is_none() {
                return None;
            }
            row_bytes = row_bytes.max(device_bytes(st) / v.max(1));
        }
        let rows = self.chunk_rows(v, row_bytes, 1)?;
        let e = self.tensor(out)?.dims.last().copied()?;
        let mut calls = Vec::new();
        let mut acc: Option<ValueId> = None;
        let mut start = 0;
        let (one, vocab) = (self.int(1), self.int(v));
        while start < v {
            let m = rows.min(v - start);
            let w_i = self.rows_of(w, start, m)?;
            let part = self.like(out, e)?;
            let first = self.int(start);
            let args = if q4 {
                let s_i = self.rows_of(a[1], start, m)?;
                vec![w_i, s_i, a[2], a[3], a[4], first, part]
            } else {
                vec![w_i, a[1], first, vocab, part]
            };
            let name = if q4 { "etwgpu.embedding_q4gsw_rows.default" } else { "etwgpu.embedding_rows.default" };
            calls.push(OpCall { node_id: call.node_id, name: name.into(), args });
            start += m;
            acc = Some(match acc {
                None => part,
                Some(prev) => {
                    let sum = if start == v { out } else { self.like(out, e)? };
                    calls.push(OpCall {
                        node_id: call.node_id,
                        name: "aten.add.Tensor".into(),
                        args: vec![prev, part, one, sum],
                    });
                    sum
                }
            });
        }
        Some(calls)
    }
}
