//! Decode steps without host rules: the part of a [`LiveChain`] that one
//! host-read integer (a *driver*: a SymInt input, or the element of an
//! input tensor that `select_as_symint` reads, in practice the position)
//! reaches, as an affine function of it.
//!
//! A decode step changes only the position, and what follows from it: the
//! start of a KV-cache write, the end of a cache slice, the number of keys
//! attention reads. The host rules that see it compute those as
//! `a * pos + b`, written into uniform words, workgroup counts, live shapes
//! and SymInts. [`Lowerer::relower`] builds an [`Affine`] model of those the
//! first time a step changes one driver: it lowers the reached ops again at
//! the next value to find each word's slope, then searches the range of
//! values over which the model reproduces the host rules exactly (every
//! rule succeeds and every word, count, shape and SymInt equals its
//! prediction), probing by doubling and bisection. Later steps inside that
//! range only patch the words ([`Affine::apply`]): no host rule runs. A
//! value outside the range (a bad position included: the rules' typed
//! errors come back) or any other change drops the model and re-runs the
//! reached rules as before; a chain whose reached rules are not affine in
//! the driver gets no model and keeps re-running them.
//!
//! The search assumes what the rules of this crate do: over the range of
//! valid values a rule either accepts the value or rejects it, and its
//! words follow one line or bend once (a clamp), not on and off again.

use etwgpu_kernels::{Step, Vid};

use crate::lower::{InputRef, LiveChain, LowerError, Lowerer};

/// A driver: the input index and flat element a host read takes (element 0
/// of a SymInt input).
pub(crate) type Driver = (usize, u64);

/// Largest driver value the range search tries (positions are far below).
const SEARCH_LIMIT: i64 = i32::MAX as i64;

/// The reached part of a chain as an affine function of one driver.
#[derive(Debug, Clone)]
pub(crate) struct Affine {
    /// The driver.
    pub(crate) driver: Driver,
    /// SymInts that take the driver's value: a SymInt input, the outputs
    /// of the host reads of the driver.
    driver_syms: Vec<Vid>,
    /// Every other host read of the chain: (SymInt, input, element). The
    /// model holds while each keeps its value.
    other_reads: Vec<(Vid, usize, u64)>,
    /// The driver's value the bases were taken at.
    x0: i64,
    /// The values over which the model was checked, both included.
    lo: i64,
    hi: i64,
    /// Chain indices of the ops with a patched uniform word or workgroup
    /// count, in order (what the plan re-reads).
    pub(crate) nodes: Vec<usize>,
    /// Uniform words: (node, step, word, base, slope), wrapping `u32`.
    words: Vec<(usize, usize, usize, u32, u32)>,
    /// Workgroup counts: (node, step, axis, base, slope).
    groups: Vec<(usize, usize, usize, u32, u32)>,
    /// Live shape dims: (value, dim, base, slope), wrapping `u64`.
    shapes: Vec<(usize, usize, u64, u64)>,
    /// SymInts set by reached ops: (value, base, slope).
    symints: Vec<(usize, i64, i64)>,
}

/// The slopes of one step: per uniform word, and per workgroup count
/// (empty and zero for a step that is not a dispatch).
type StepSlopes = (Vec<u32>, [u32; 3]);

/// Slopes of every word, count, dim and SymInt the reached ops set (zero
/// for the constant ones), while the model is checked.
#[derive(Debug)]
struct Dense {
    /// Per reached node, per step: the word slopes and count slopes of a
    /// dispatch (empty for other steps).
    steps: Vec<(usize, Vec<StepSlopes>)>,
    /// (value, per dim slope) of every shape a reached op sets.
    shapes: Vec<(usize, Vec<u64>)>,
    /// (value, slope) of every SymInt a reached op sets.
    symints: Vec<(usize, i64)>,
}

fn words_of(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    bytes.chunks(4).map(|c| {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        u32::from_le_bytes(w)
    })
}

/// Whether two lowerings of one op differ at most in uniform bytes (of one
/// length) and workgroup counts.
pub(crate) fn same_structure(a: &[Step], b: &[Step]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Step::Dispatch(x), Step::Dispatch(y)) => {
                x.shader == y.shader
                    && x.entry == y.entry
                    && x.inputs == y.inputs
                    && x.outputs == y.outputs
                    && x.params.len() == y.params.len()
            }
            (x, y) => x == y,
        })
}

impl Dense {
    /// The slopes from the states at `x0` (`base`) and at `x0 + 1`
    /// (`next`), or `None` when a reached op changes its structure.
    fn new(base: &LiveChain, next: &LiveChain, reached: &[usize]) -> Option<Self> {
        let mut out = Dense { steps: Vec::new(), shapes: Vec::new(), symints: Vec::new() };
        for &node in reached {
            let (a, b) = (&base.nodes[node], &next.nodes[node]);
            if !same_structure(&a.steps, &b.steps) || a.writes != b.writes {
                return None;
            }
            let steps = a
                .steps
                .iter()
                .zip(&b.steps)
                .map(|(x, y)| match (x, y) {
                    (Step::Dispatch(x), Step::Dispatch(y)) => {
                        let words = words_of(&y.params).zip(words_of(&x.params)).map(|(q, p)| q.wrapping_sub(p));
                        let groups = std::array::from_fn(|k| y.workgroups[k].wrapping_sub(x.workgroups[k]));
                        (words.collect(), groups)
                    }
                    _ => (Vec::new(), [0; 3]),
                })
                .collect();
            out.steps.push((node, steps));
            for &v in &a.writes {
                let v = v as usize;
                let (p, q) = (&base.shapes[v], &next.shapes[v]);
                if p.len() != q.len() {
                    return None;
                }
                if !p.is_empty() {
                    out.shapes.push((v, p.iter().zip(q).map(|(p, q)| q.wrapping_sub(*p)).collect()));
                }
                out.symints.push((v, next.symints[v].wrapping_sub(base.symints[v])));
            }
        }
        Some(out)
    }

    /// Whether `probe` (the states at `x0 + d`) is what the slopes predict
    /// from `base` (the states at `x0`).
    fn predicts(&self, base: &LiveChain, probe: &LiveChain, d: i64) -> bool {
        let du = d as u32;
        let steps_hold = self.steps.iter().all(|(node, slopes)| {
            let (a, b) = (&base.nodes[*node], &probe.nodes[*node]);
            same_structure(&a.steps, &b.steps)
                && a.steps.iter().zip(&b.steps).zip(slopes).all(|((x, y), (words, groups))| match (x, y) {
                    (Step::Dispatch(x), Step::Dispatch(y)) => {
                        words_of(&x.params)
                            .zip(words_of(&y.params))
                            .zip(words)
                            .all(|((p, q), s)| p.wrapping_add(s.wrapping_mul(du)) == q)
                            && (0..3)
                                .all(|k| x.workgroups[k].wrapping_add(groups[k].wrapping_mul(du)) == y.workgroups[k])
                    }
                    _ => true,
                })
        });
        steps_hold
            && self.shapes.iter().all(|(v, slopes)| {
                let (p, q) = (&base.shapes[*v], &probe.shapes[*v]);
                p.len() == q.len()
                    && p.iter().zip(q).zip(slopes).all(|((p, q), s)| p.wrapping_add(s.wrapping_mul(d as u64)) == *q)
            })
            && self.symints.iter().all(|&(v, s)| base.symints[v].wrapping_add(s.wrapping_mul(d)) == probe.symints[v])
    }
}

impl Affine {
    /// Whether the model covers this driver value.
    pub(crate) fn covers(&self, x: i64) -> bool {
        (self.lo..=self.hi).contains(&x)
    }

    /// Brings `live` to the driver value `x` (which [`Affine::covers`]):
    /// writes the driver's SymInts and every patched word, count, shape
    /// and SymInt of the reached ops. No host rule runs.
    pub(crate) fn apply(&self, live: &mut LiveChain, x: i64) {
        let d = x.wrapping_sub(self.x0);
        let du = d as u32;
        for v in &self.driver_syms {
            live.symints[v.0 as usize] = x;
        }
        for &(node, step, word, base, slope) in &self.words {
            if let Step::Dispatch(dispatch) = &mut live.nodes[node].steps[step] {
                let at = word * 4;
                let end = (at + 4).min(dispatch.params.len());
                let bytes = base.wrapping_add(slope.wrapping_mul(du)).to_le_bytes();
                dispatch.params[at..end].copy_from_slice(&bytes[..end - at]);
            }
        }
        for &(node, step, axis, base, slope) in &self.groups {
            if let Step::Dispatch(dispatch) = &mut live.nodes[node].steps[step] {
                dispatch.workgroups[axis] = base.wrapping_add(slope.wrapping_mul(du));
            }
        }
        for &(v, dim, base, slope) in &self.shapes {
            live.shapes[v][dim] = base.wrapping_add(slope.wrapping_mul(d as u64));
        }
        for &(v, base, slope) in &self.symints {
            live.symints[v] = base.wrapping_add(slope.wrapping_mul(d));
        }
    }

    /// Whether every other host read keeps the value `live` holds.
    pub(crate) fn others_hold(&self, live: &LiveChain, read: &mut impl FnMut(usize, u64) -> i64) -> bool {
        self.other_reads.iter().all(|&(sym, input, elem)| read(input, elem) == live.symints[sym.0 as usize])
    }

    /// The sparse model of `dense` (its non-zero slopes), bases from `base`.
    fn from_dense(dense: &Dense, base: &LiveChain, fixed: &Fixed, x0: i64, lo: i64, hi: i64) -> Self {
        let mut me = Affine {
            driver: fixed.driver,
            driver_syms: fixed.driver_syms.clone(),
            other_reads: fixed.other_reads.clone(),
            x0,
            lo,
            hi,
            nodes: Vec::new(),
            words: Vec::new(),
            groups: Vec::new(),
            shapes: Vec::new(),
            symints: Vec::new(),
        };
        for (node, slopes) in &dense.steps {
            let before = me.words.len() + me.groups.len();
            for (step, (words, groups)) in slopes.iter().enumerate() {
                let Step::Dispatch(d) = &base.nodes[*node].steps[step] else { continue };
                for (word, (w, &s)) in words_of(&d.params).zip(words).enumerate() {
                    if s != 0 {
                        me.words.push((*node, step, word, w, s));
                    }
                }
                for (axis, &s) in groups.iter().enumerate() {
                    if s != 0 {
                        me.groups.push((*node, step, axis, d.workgroups[axis], s));
                    }
                }
            }
            if me.words.len() + me.groups.len() > before {
                me.nodes.push(*node);
            }
        }
        for (v, slopes) in &dense.shapes {
            for (dim, &s) in slopes.iter().enumerate() {
                if s != 0 {
                    me.shapes.push((*v, dim, base.shapes[*v][dim], s));
                }
            }
        }
        for &(v, s) in &dense.symints {
            if s != 0 {
                me.symints.push((v, base.symints[v], s));
            }
        }
        me
    }
}

/// What a model needs that does not depend on probing.
struct Fixed {
    driver: Driver,
    driver_syms: Vec<Vid>,
    other_reads: Vec<(Vid, usize, u64)>,
}

impl Lowerer {
    /// Every driver of `live`'s chain at these inputs: the SymInt inputs and
    /// the host reads, once each, in order.
    pub(crate) fn drivers(live: &LiveChain, inputs: &[InputRef<'_>]) -> Vec<Driver> {
        let mut out: Vec<Driver> =
            inputs.iter().enumerate().filter(|(_, i)| i.shape.is_none()).map(|(k, _)| (k, 0)).collect();
        for node in &live.nodes {
            for &(_, input, elem) in &node.host_reads {
                if !out.contains(&(input, elem)) {
                    out.push((input, elem));
                }
            }
        }
        out
    }

    /// The affine model of the ops `driver` reaches in `live` (lowered at
    /// these inputs), or `None` when they are not affine in it. Lowers the
    /// reached ops at other driver values on a copy of `live`; the host
    /// rules run are added to `live`'s count.
    pub(crate) fn build_affine(
        &self,
        graph: &etwgpu_format::VkGraph,
        live: &mut LiveChain,
        inputs: &[InputRef<'_>],
        driver: Driver,
        read: &mut impl FnMut(usize, u64) -> i64,
    ) -> Option<Affine> {
        if !live.single_writers {
            return None;
        }
        let x0 = read(driver.0, driver.1);
        if !(0..=SEARCH_LIMIT).contains(&x0) {
            return None;
        }
        let mut driver_syms = Vec::new();
        if inputs[driver.0].shape.is_none() {
            driver_syms.push(Vid(inputs[driver.0].value.0));
        }
        let mut other_reads = Vec::new();
        for node in &live.nodes {
            for &(sym, input, elem) in &node.host_reads {
                if (input, elem) == driver {
                    driver_syms.push(sym);
                } else {
                    other_reads.push((sym, input, elem));
                }
            }
        }
        // The ops that see the driver, directly or through what earlier
        // ones set.
        let mut dep = vec![false; live.symints.len()];
        for v in &driver_syms {
            dep[v.0 as usize] = true;
        }
        let mut reached = Vec::new();
        for (node, state) in live.nodes.iter().enumerate() {
            if state.reads.iter().any(|&r| dep[r as usize]) {
                reached.push(node);
                for &w in &state.writes {
                    dep[w as usize] = true;
                }
            }
        }
        let fixed = Fixed { driver, driver_syms, other_reads };
        let mut work = live.clone();
        work.affine = None;
        let calls_before = work.rule_calls;
        let mut probe = |work: &mut LiveChain, y: i64| -> Result<(), LowerError> {
            for v in &fixed.driver_syms {
                work.symints[v.0 as usize] = y;
            }
            let mut read_at = |input: usize, elem: u64| if (input, elem) == driver { y } else { read(input, elem) };
            for &node in &reached {
                let state = self.lower_node(graph, node, inputs, work, &mut read_at, None)?;
                work.nodes[node] = state;
            }
            Ok(())
        };
        let model = (|| {
            probe(&mut work, x0 + 1).ok()?;
            let dense = Dense::new(live, &work, &reached)?;
            let mut holds = |y: i64| probe(&mut work, y).is_ok() && dense.predicts(live, &work, y - x0);
            let hi = search(x0 + 1, SEARCH_LIMIT, &mut holds);
            let lo = search(x0, 0, &mut holds);
            Some(Affine::from_dense(&dense, live, &fixed, x0, lo, hi))
        })();
        live.rule_calls += work.rule_calls - calls_before;
        model
    }
}

/// The farthest value from `start` (which holds) toward `limit` such that
/// `holds` is true of every value between (checked by doubling the step,
/// then bisecting the first gap).
fn search(start: i64, limit: i64, holds: &mut impl FnMut(i64) -> bool) -> i64 {
    let dir = if limit >= start { 1 } else { -1 };
    let mut good = start;
    let mut step = 1i64;
    let mut bad = None;
    while (limit - good) * dir > 0 {
        let y = if (limit - good) * dir < step { limit } else { good + dir * step };
        if holds(y) {
            good = y;
            step = step.saturating_mul(2);
        } else {
            bad = Some(y);
            break;
        }
    }
    if let Some(mut bad) = bad {
        while (bad - good) * dir > 1 {
            let mid = good + (bad - good) / 2;
            if holds(mid) {
                good = mid;
            } else {
                bad = mid;
            }
        }
    }
    good
}
