//! The lowered chains a delegate keeps for input shapes other than the
//! live ones ([`Parked`]), so a call back at one of those shapes (a decode
//! step after a prompt) takes its chain and plan back instead of lowering
//! again (issue 21: "lowered at most once per shape").

use etwgpu_graph::LiveChain;

use crate::plan::Plan;

/// Chains a delegate keeps besides the live one: the decode shape (a
/// chain for each route where the decode attention's route follows the
/// position), and a few prompt lengths.
const PARKED_SHAPES: usize = 6;

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
    /// Keeps the chain of inputs `shapes` as the most recently used, in
    /// place of one of those shapes and the same structure.
    pub(crate) fn park(&mut self, shapes: InputShapes, live: LiveChain, plan: Plan) {
        self.chains.retain(|(s, l, _)| *s != shapes || !l.same_structure(&live));
        self.chains.insert(0, (shapes, live, plan));
        self.chains.truncate(PARKED_SHAPES);
    }

    /// Swaps the most recently used chain that `is_wanted` accepts (by its
    /// inputs' shapes and the chain) in for `live` and its `plan`, which are
    /// kept as the chain of inputs `current`; `false`, and nothing changed,
    /// when none is.
    pub(crate) fn swap_in(
        &mut self,
        current: InputShapes,
        live: &mut LiveChain,
        plan: &mut Plan,
        is_wanted: impl Fn(&InputShapes, &LiveChain) -> bool,
    ) -> bool {
        let Some(i) = self.chains.iter().position(|(s, l, _)| is_wanted(s, l)) else { return false };
        let (_, parked_live, parked_plan) = self.chains.remove(i);
        let old_live = std::mem::replace(live, parked_live);
        let old_plan = std::mem::replace(plan, parked_plan);
        self.park(current, old_live, old_plan);
        true
    }

    /// Drops every parked chain.
    pub(crate) fn clear(&mut self) {
        self.chains.clear();
    }
}
