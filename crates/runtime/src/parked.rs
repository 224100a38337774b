//! The lowered chains a delegate keeps for input shapes other than the
//! live ones ([`Parked`]), so a call back at one of those shapes (a decode
//! step after a prompt) takes its chain and plan back instead of lowering
//! again (issue 21: "lowered at most once per shape").

use etwgpu_graph::LiveChain;

use crate::plan::Plan;

/// Chains a delegate keeps besides the live one: the decode shape, and a
/// few prompt lengths.
const PARKED_SHAPES: usize = 4;

/// Per input: its shape (`None` for a SymInt input).
pub(crate) type InputShapes = Vec<Option<Vec<u64>>>;

/// Chains lowered at other input shapes than the live ones, each with the
/// plan built for it, most recently used first (at most `PARKED_SHAPES`).
/// Their plans bind the delegate's buffers: [`Parked::clear`] them when
/// those change.
#[derive(Debug, Default)]
pub(crate) struct Parked {
    chains: Vec<(InputShapes, LiveChain, Plan)>,
}

impl Parked {
    /// Keeps the chain of inputs `shapes` as the most recently used.
    pub(crate) fn park(&mut self, shapes: InputShapes, live: LiveChain, plan: Plan) {
        self.chains.retain(|(s, _, _)| *s != shapes);
        self.chains.insert(0, (shapes, live, plan));
        self.chains.truncate(PARKED_SHAPES);
    }

    /// Takes out the chain of inputs whose shapes `is_wanted` accepts.
    pub(crate) fn take(&mut self, is_wanted: impl Fn(&InputShapes) -> bool) -> Option<(LiveChain, Plan)> {
        let i = self.chains.iter().position(|(s, _, _)| is_wanted(s))?;
        let (_, live, plan) = self.chains.remove(i);
        Some((live, plan))
    }

    /// Drops every parked chain.
    pub(crate) fn clear(&mut self) {
        self.chains.clear();
    }
}
