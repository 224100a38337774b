//! The device argmax of one output: after the chain, two more dispatches
//! (`argmax_rows.wgsl`: chunks of each row, then their partials) reduce
//! the output's last dim to int32 indices, and only those are read back
//! (greedy decoding reads 4 bytes per token instead of the logits). Its
//! indices can also feed the next run's token input on the device.

use etwgpu_format::{DType, ValueId};
use etwgpu_graph::lower::elem_type;
use etwgpu_kernels::ops::reduce::ArgmaxRows;

use crate::device::Runtime;
use crate::error::{Error, Result};
use crate::plan::CompiledDispatch;

/// The output an argmax reduces: which, its graph value and device dtype.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ArgmaxInput {
    /// Output index (for errors and labels).
    pub output: usize,
    /// Its graph value.
    pub value: ValueId,
    /// Its dtype on the device.
    pub dtype: DType,
}

/// The argmax dispatches of `x` at `shape`.
fn argmax_dispatch(x: ArgmaxInput, shape: &[u64]) -> Result<ArgmaxRows> {
    let info = etwgpu_kernels::TensorInfo {
        id: etwgpu_kernels::Vid(x.value.0),
        dtype: elem_type(x.dtype),
        shape,
        is_constant: false,
        q4_word_major: false,
    };
    etwgpu_kernels::ops::reduce::argmax_last_dim(&info).map_err(|source| Error::ArgmaxOutput {
        output: x.output,
        dtype: x.dtype,
        shape: shape.to_vec(),
        reason: source.to_string(),
    })
}

/// The device objects of an argmax appended to one output.
#[derive(Debug)]
pub(crate) struct ArgmaxPost {
    x: ArgmaxInput,
    /// Its two dispatches, each with its own uniforms.
    stages: [(CompiledDispatch, wgpu::Buffer); 2],
    /// The dispatches' uniforms and grids as last written into `stages`.
    written: ArgmaxRows,
    /// int32 indices, one per row.
    pub(crate) result: wgpu::Buffer,
    /// Two, used in turn, so a run can be read back while the next one
    /// copies its indices out.
    readback: [wgpu::Buffer; 2],
}

impl ArgmaxPost {
    /// The argmax of `x`, whose buffer is `logits`, for shapes up to
    /// `max_shape`; `name` (the delegate call) labels its objects.
    pub(crate) async fn new(
        rt: &Runtime,
        name: &str,
        x: ArgmaxInput,
        max_shape: &[u64],
        logits: &wgpu::Buffer,
    ) -> Result<Self> {
        let d = argmax_dispatch(x, max_shape)?;
        let rows = max_shape.iter().rev().skip(1).product::<u64>().max(1);
        let label = |what: &str| format!("{name} output {} argmax {what}", x.output);
        let device = &rt.device;
        let pipeline = rt.pipelines.get_async(&d.shader.into()).await?;
        let buffer = |what: &str, size: u64, usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(&label(what)),
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        let result = buffer("indices", rows * 4, wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC);
        let partial = buffer("partials", d.partial_bytes.max(8), wgpu::BufferUsages::STORAGE);
        let readback = [0, 1].map(|k| {
            buffer(&format!("read-back {k}"), rows * 4, wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST)
        });
        let stages = [0, 1].map(|k| {
            let (params, workgroups) = &d.stages[k];
            let uniforms = buffer(
                &format!("stage {k} uniforms"),
                params.len() as u64,
                wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            );
            rt.queue.write_buffer(&uniforms, 0, params);
            let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(&label(&format!("stage {k} bind group"))),
                layout: &pipeline.get_bind_group_layout(0),
                entries: &[
                    wgpu::BindGroupEntry { binding: 0, resource: uniforms.as_entire_binding() },
                    wgpu::BindGroupEntry { binding: 1, resource: logits.as_entire_binding() },
                    wgpu::BindGroupEntry { binding: 2, resource: partial.as_entire_binding() },
                    wgpu::BindGroupEntry { binding: 3, resource: result.as_entire_binding() },
                ],
            });
            let dispatch = CompiledDispatch {
                pipeline: pipeline.clone(),
                bind_group,
                workgroups: *workgroups,
                node: usize::MAX,
                label: d.shader.label(),
            };
            (dispatch, uniforms)
        });
        Ok(Self { x, stages, written: d, result, readback })
    }

    /// Rows the indices buffer holds.
    pub(crate) fn rows(&self) -> u64 {
        self.result.size() / 4
    }

    /// Records the argmax of the output at its live `shape` into
    /// `encoder` (a compute pass of its own), and the copy of its indices
    /// into read-back buffer `flip` (0 or 1). Returns that buffer, the
    /// shape of the indices and their bytes.
    pub(crate) fn record(
        &mut self,
        rt: &Runtime,
        name: &str,
        encoder: &mut wgpu::CommandEncoder,
        shape: &[u64],
        flip: usize,
        timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) -> Result<(wgpu::Buffer, Vec<u64>, u64)> {
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(&format!("{name} output {} argmax", self.x.output)),
                timestamp_writes,
            });
            self.record_dispatches(rt, shape, &mut pass)?;
        }
        Ok(self.copy_out(encoder, shape, flip))
    }

    /// Records the argmax's two dispatches at the output's live `shape`
    /// into `pass` (the chain's own pass, so no pass boundary stands
    /// between the chain and them: +0.2-1.5% decode on the H100 in run
    /// ao). Uniforms and grids change only when the shape changed them.
    pub(crate) fn record_dispatches(
        &mut self,
        rt: &Runtime,
        shape: &[u64],
        pass: &mut wgpu::ComputePass<'_>,
    ) -> Result<()> {
        let d = argmax_dispatch(self.x, shape)?;
        if d != self.written {
            for ((params, workgroups), (dispatch, uniforms)) in d.stages.iter().zip(&mut self.stages) {
                rt.queue.write_buffer(uniforms, 0, params);
                dispatch.workgroups = *workgroups;
            }
            self.written = d;
        }
        for (dispatch, _) in &self.stages {
            dispatch.record(pass);
        }
        Ok(())
    }

    /// Records the copy of the indices at the output's live `shape` into
    /// read-back buffer `flip` (0 or 1), after [`Self::record_dispatches`].
    /// Returns that buffer, the shape of the indices and their bytes.
    pub(crate) fn copy_out(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        shape: &[u64],
        flip: usize,
    ) -> (wgpu::Buffer, Vec<u64>, u64) {
        let rows = &shape[..shape.len().saturating_sub(1)];
        let n_bytes = rows.iter().product::<u64>() * 4;
        let readback = &self.readback[flip];
        encoder.copy_buffer_to_buffer(&self.result, 0, readback, 0, n_bytes);
        (readback.clone(), rows.to_vec(), n_bytes)
    }
}
