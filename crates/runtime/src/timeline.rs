//! The step timeline: GPU timestamps around each run's chain and its
//! device argmax, for consecutive runs as they are submitted (two in
//! flight when decoding ahead), so the GPU time between runs shows, which a
//! profile of one run ([`crate::ProfileMode`]) cannot.
//!
//! Per run: the chain's compute pass begins and ends, then the argmax's
//! pass begins and ends (four timestamps; without an argmax the last two
//! repeat the chain's end). While the timeline is on, the chain is recorded
//! on one thread, as one pass (on the H200 one recording thread decodes as
//! fast as two, run ak).

use crate::device::Runtime;
use crate::error::{Error, Result};

/// GPU timestamps of one run, in nanoseconds from the first run's start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepTimes {
    /// The chain's pass begins.
    pub chain_begin: f64,
    /// The chain's pass ends.
    pub chain_end: f64,
    /// The argmax's pass begins (the chain's end without an argmax).
    pub argmax_begin: f64,
    /// The argmax's pass ends (the chain's end without an argmax).
    pub argmax_end: f64,
}

/// Timestamps per run.
const PER_RUN: u32 = 4;

/// The query set of a timeline and how far it has been filled.
#[derive(Debug)]
pub(crate) struct Timeline {
    queries: wgpu::QuerySet,
    /// Runs it holds room for.
    capacity: u32,
    /// Runs recorded so far.
    pub(crate) runs: u32,
}

impl Timeline {
    /// A timeline for `runs` runs (at most 1,024); an error when the device
    /// has no timestamps.
    pub(crate) fn new(rt: &Runtime, runs: u32) -> Result<Self> {
        if !rt.device.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
            return Err(Error::NoTimestamps { adapter: rt.info.name.clone() });
        }
        let capacity = runs.clamp(1, 1024);
        let queries = rt.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("step timeline"),
            ty: wgpu::QueryType::Timestamp,
            count: capacity * PER_RUN,
        });
        Ok(Self { queries, capacity, runs: 0 })
    }

    /// The timestamp writes of the next run's chain and argmax passes, or
    /// `None` once the timeline is full.
    pub(crate) fn next_writes(
        &self,
    ) -> Option<(wgpu::ComputePassTimestampWrites<'_>, wgpu::ComputePassTimestampWrites<'_>)> {
        (self.runs < self.capacity).then(|| {
            let at = self.runs * PER_RUN;
            (
                wgpu::ComputePassTimestampWrites {
                    query_set: &self.queries,
                    beginning_of_pass_write_index: Some(at),
                    end_of_pass_write_index: Some(at + 1),
                },
                wgpu::ComputePassTimestampWrites {
                    query_set: &self.queries,
                    beginning_of_pass_write_index: Some(at + 2),
                    end_of_pass_write_index: Some(at + 3),
                },
            )
        })
    }

    /// Reads back the runs recorded (after they finished), as
    /// [`StepTimes`]; a run without an argmax pass has its chain's end in
    /// the argmax fields.
    pub(crate) async fn read(&self, rt: &Runtime, with_argmax: bool) -> Result<Vec<StepTimes>> {
        let n = self.runs * PER_RUN;
        if n == 0 {
            return Ok(Vec::new());
        }
        let encoder = rt.device.create_command_encoder(&Default::default());
        let ticks = crate::profile::read_ticks(rt, "step timeline", encoder, &self.queries, n).await?;
        let period = f64::from(rt.queue.get_timestamp_period());
        let t0 = ticks[0];
        let ns = |t: u64| t.saturating_sub(t0) as f64 * period;
        Ok(ticks
            .chunks_exact(PER_RUN as usize)
            .map(|t| {
                let chain_end = ns(t[1]);
                StepTimes {
                    chain_begin: ns(t[0]),
                    chain_end,
                    argmax_begin: if with_argmax { ns(t[2]) } else { chain_end },
                    argmax_end: if with_argmax { ns(t[3]) } else { chain_end },
                }
            })
            .collect())
    }
}
