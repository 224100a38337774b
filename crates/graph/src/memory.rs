//! Memory planning: intermediate tensors share one arena when their
//! lifetimes do not overlap.
//!
//! The input is the lowered chain (a list of [`Step`]s, with the op each
//! comes from: an op's steps are planned as one, since at other shapes
//! its rule may lower it to other steps) and the byte size of every
//! tensor it touches. Views ([`Step::Alias`]) share their source's
//! storage, so they cost no memory. Graph inputs, outputs, constants and
//! mutable state are *pinned*: they keep a dedicated buffer and are never
//! overwritten by anything else. Everything else gets an offset in one
//! arena, placed greedily by size (largest first, lowest free offset that no
//! live neighbour occupies), unless sharing saves nothing (then every tensor
//! keeps its own buffer).
//!
//! The result is deterministic: same steps and sizes, same plan.

use std::collections::{BTreeMap, BTreeSet};

use etwgpu_kernels::{Step, Vid};

/// Arena offsets are multiples of this (the usual
/// `min_storage_buffer_offset_alignment`).
pub const ALIGN: u64 = 256;

/// Where one tensor's bytes live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Its own buffer (pinned values, prepack outputs).
    Dedicated,
    /// At this offset of one arena.
    Arena {
        /// Which arena (see [`MemoryPlan::arenas`]).
        arena: u32,
        /// Byte offset.
        offset: u64,
    },
}

/// A storage class: a tensor and every view of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageClass {
    /// The tensor that owns the storage (the root of its alias chain).
    pub root: Vid,
    /// Bytes (the largest member).
    pub bytes: u64,
    /// First and last step index that touch any member.
    pub live: (usize, usize),
    /// Where it lives.
    pub placement: Placement,
}

/// The memory plan of a chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPlan {
    /// Storage class of every tensor touched by the chain.
    pub class_of: BTreeMap<Vid, Vid>,
    /// The storage classes, by root.
    pub classes: BTreeMap<Vid, StorageClass>,
    /// Size of each arena. No dispatch reads one arena and writes the same
    /// one (WebGPU tracks usage per whole buffer: a read-only and a
    /// read-write binding of one buffer conflict in a dispatch).
    pub arenas: Vec<u64>,
    /// Total size of the arenas.
    pub arena_bytes: u64,
    /// Bytes in dedicated buffers.
    pub dedicated_bytes: u64,
    /// One buffer per tensor value, views included: what no planning costs.
    pub naive_bytes: u64,
    /// Dedicated bytes plus the largest sum of arena bytes live at once
    /// (each padded to [`ALIGN`] but the largest padding): no plan can do
    /// better.
    pub lower_bound_bytes: u64,
}

impl MemoryPlan {
    /// Total bytes the plan allocates.
    pub fn planned_bytes(&self) -> u64 {
        self.arena_bytes + self.dedicated_bytes
    }

    /// Where tensor `v` lives (its class's placement), if the chain touches it.
    pub fn placement(&self, v: Vid) -> Option<Placement> {
        self.class_of.get(&v).map(|root| self.classes[root].placement)
    }
}

impl MemoryPlan {
    /// Whether this plan stays valid for `steps` (the chain re-lowered at
    /// other shapes): every tensor they touch is planned, arena tensors live
    /// at once never share bytes, and no dispatch reads and writes one
    /// arena.
    pub fn fits(&self, steps: &[Step]) -> bool {
        let mut live: BTreeMap<Vid, (usize, usize)> = BTreeMap::new();
        let arena_of = |v: &Vid| match self.placement(*v) {
            Some(Placement::Arena { arena, .. }) => Some(arena),
            _ => None,
        };
        for (t, step) in steps.iter().enumerate() {
            let touched: Vec<Vid> = match step {
                Step::Dispatch(d) => {
                    let reads: BTreeSet<u32> = d.inputs.iter().filter_map(arena_of).collect();
                    if d.outputs.iter().filter_map(arena_of).any(|a| reads.contains(&a)) {
                        return false;
                    }
                    d.inputs.iter().chain(&d.outputs).copied().collect()
                }
                Step::Alias { out, src } => vec![*out, *src],
                Step::Prepack { out, .. } => vec![*out],
                Step::SymInt { .. } | Step::ReadSymInt { .. } | Step::Scratch { .. } => Vec::new(),
            };
            for v in touched {
                let Some(&root) = self.class_of.get(&v) else { return false };
                let e = live.entry(root).or_insert((t, t));
                e.1 = t;
            }
        }
        let arena: Vec<(u32, u64, u64, (usize, usize))> = live
            .iter()
            .filter_map(|(root, &l)| match self.classes[root].placement {
                Placement::Arena { arena, offset } => Some((arena, offset, self.classes[root].bytes, l)),
                Placement::Dedicated => None,
            })
            .collect();
        arena.iter().enumerate().all(|(i, a)| {
            arena[i + 1..].iter().all(|b| {
                let live_overlap = a.3.0 <= b.3.1 && b.3.0 <= a.3.1;
                let bytes_overlap = a.1 < b.1 + b.2 && b.1 < a.1 + a.2;
                a.0 != b.0 || !(live_overlap && bytes_overlap)
            })
        })
    }
}

fn find(parent: &mut BTreeMap<Vid, Vid>, v: Vid) -> Vid {
    let mut root = v;
    while let Some(&p) = parent.get(&root) {
        if p == root {
            break;
        }
        root = p;
    }
    // Path compression.
    let mut cur = v;
    while cur != root {
        let next = parent[&cur];
        parent.insert(cur, root);
        cur = next;
    }
    root
}

fn align_up(x: u64) -> u64 {
    x.div_ceil(ALIGN) * ALIGN
}

/// Plans the memory of `steps`, each step an op of its own (see
/// [`plan_ops`]).
pub fn plan(steps: &[Step], bytes: &BTreeMap<Vid, u64>, pinned: &BTreeSet<Vid>) -> MemoryPlan {
    let nodes: Vec<usize> = (0..steps.len()).collect();
    plan_ops(steps, &nodes, bytes, pinned)
}

/// Plans the memory of `steps`, step `t` lowered from op `nodes[t]` (a
/// [`Lowered`](crate::Lowered)'s `nodes`, one per step: an op's steps are
/// adjacent).
///
/// An op's steps are planned as one: every tensor any of them touches is
/// live across all of them, and none of the tensors they read shares an
/// arena with one they write. An op may lower to other steps at other
/// shapes (a norm and a GEMM at a prompt's rows, one GEMV reading the
/// norm's inputs and writing the GEMM's outputs at a decode row), and the
/// plan made at the maximum shapes must still fit them
/// ([`MemoryPlan::fits`]), or the call gives up its arenas.
///
/// `bytes` gives every tensor's size (a tensor missing from it, or a
/// `nodes` of another length than `steps`, is a bug in the caller and
/// panics); `pinned` lists the tensors that must keep their own buffer
/// (graph inputs and outputs, constants, mutable state). A pinned tensor
/// with a size is planned even when no step touches it (scratch that a
/// lowering at other shapes may use).
pub fn plan_ops(steps: &[Step], nodes: &[usize], bytes: &BTreeMap<Vid, u64>, pinned: &BTreeSet<Vid>) -> MemoryPlan {
    let size = |v: Vid| *bytes.get(&v).unwrap_or_else(|| panic!("memory plan: no size for tensor {v:?}"));
    let mut parent: BTreeMap<Vid, Vid> = BTreeMap::new();
    let mut touched: BTreeMap<Vid, (usize, usize)> = BTreeMap::new();
    let mut dedicated_roots: BTreeSet<Vid> = BTreeSet::new();
    assert_eq!(nodes.len(), steps.len(), "memory plan: one op index per step");
    // Each op's first and last step.
    let mut spans: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
    for (t, &n) in nodes.iter().enumerate() {
        spans.entry(n).or_insert((t, t)).1 = t;
    }
    let touch = |v: Vid, t: usize, touched: &mut BTreeMap<Vid, (usize, usize)>| {
        let (first, last) = spans[&nodes[t]];
        let e = touched.entry(v).or_insert((first, last));
        e.0 = e.0.min(first);
        e.1 = e.1.max(last);
    };
    for (t, step) in steps.iter().enumerate() {
        match step {
            Step::Dispatch(d) => {
                for &v in d.inputs.iter().chain(&d.outputs) {
                    parent.entry(v).or_insert(v);
                    touch(v, t, &mut touched);
                }
            }
            Step::Alias { out, src } => {
                parent.entry(*src).or_insert(*src);
                parent.entry(*out).or_insert(*out);
                touch(*out, t, &mut touched);
                touch(*src, t, &mut touched);
                let (a, b) = (find(&mut parent, *out), find(&mut parent, *src));
                if a != b {
                    // The source's root owns the storage.
                    parent.insert(a, b);
                }
            }
            Step::Prepack { out, .. } => {
                parent.entry(*out).or_insert(*out);
                touch(*out, t, &mut touched);
                dedicated_roots.insert(*out);
            }
            // Host-side SymInt updates and declarations touch no device
            // storage.
            Step::SymInt { .. } | Step::ReadSymInt { .. } | Step::Scratch { .. } => {}
        }
    }
    let untouched: Vec<Vid> =
        pinned.iter().filter(|v| bytes.contains_key(v) && !touched.contains_key(v)).copied().collect();
    for v in untouched {
        parent.insert(v, v);
        touched.insert(v, (0, steps.len().saturating_sub(1)));
    }
    let naive_bytes = touched.keys().map(|&v| size(v)).sum();
    let members: Vec<Vid> = touched.keys().copied().collect();
    let mut class_of = BTreeMap::new();
    let mut classes: BTreeMap<Vid, StorageClass> = BTreeMap::new();
    let mut pinned_roots = BTreeSet::new();
    for v in members {
        let root = find(&mut parent, v);
        class_of.insert(v, root);
        let (first, last) = touched[&v];
        let c = classes.entry(root).or_insert(StorageClass {
            root,
            bytes: 0,
            live: (first, last),
            placement: Placement::Dedicated,
        });
        c.bytes = c.bytes.max(size(v));
        c.live = (c.live.0.min(first), c.live.1.max(last));
        if pinned.contains(&v) || dedicated_roots.contains(&v) {
            pinned_roots.insert(root);
        }
    }

    // Arenas: no dispatch may read and write the same one. Conflicts join a
    // class read by an op's dispatches to a class they write.
    let mut conflicts: BTreeMap<Vid, BTreeSet<Vid>> = BTreeMap::new();
    let root_of = |v: &Vid| class_of.get(v).copied().filter(|r| !pinned_roots.contains(r));
    let mut by_op: BTreeMap<usize, (BTreeSet<Vid>, BTreeSet<Vid>)> = BTreeMap::new();
    for (step, &n) in steps.iter().zip(nodes) {
        if let Step::Dispatch(d) = step {
            let (reads, writes) = by_op.entry(n).or_default();
            reads.extend(d.inputs.iter().filter_map(root_of));
            writes.extend(d.outputs.iter().filter_map(root_of));
        }
    }
    for (reads, writes) in by_op.values() {
        for &r in reads {
            for &w in writes {
                if r != w {
                    conflicts.entry(r).or_default().insert(w);
                    conflicts.entry(w).or_default().insert(r);
                }
            }
        }
    }
    // Greedy by size over the unpinned classes.
    let mut order: Vec<&StorageClass> = classes.values().filter(|c| !pinned_roots.contains(&c.root)).collect();
    order.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.live.0.cmp(&b.live.0)).then(a.root.cmp(&b.root)));
    // Each class goes to the arena it grows least among those holding none
    // of its conflicts (a new arena costs its whole size).
    let mut arenas: Vec<u64> = Vec::new();
    let mut placed: Vec<(u32, u64, u64, (usize, usize))> = Vec::new(); // (arena, offset, bytes, live)
    let mut offsets: BTreeMap<Vid, (u32, u64)> = BTreeMap::new();
    for c in order {
        let taken: BTreeSet<u32> =
            conflicts.get(&c.root).into_iter().flatten().filter_map(|n| offsets.get(n).map(|&(a, _)| a)).collect();
        let mut best: Option<(u64, u32, u64)> = None; // (growth, arena, offset)
        for arena in (0..arenas.len() as u32).filter(|a| !taken.contains(a)) {
            let mut busy: Vec<(u64, u64)> = placed
                .iter()
                .filter(|(a, _, _, live)| *a == arena && live.0 <= c.live.1 && c.live.0 <= live.1)
                .map(|&(_, off, b, _)| (off, off + b))
                .collect();
            busy.sort();
            let mut offset = 0;
            for (start, end) in busy {
                if offset + c.bytes <= start {
                    break;
                }
                offset = offset.max(align_up(end));
            }
            let growth = (offset + c.bytes).saturating_sub(arenas[arena as usize]);
            if best.is_none_or(|(g, _, _)| growth < g) {
                best = Some((growth, arena, offset));
            }
        }
        let (arena, offset) = match best {
            Some((growth, arena, offset)) if growth <= c.bytes => (arena, offset),
            _ => {
                arenas.push(0);
                (arenas.len() as u32 - 1, 0)
            }
        };
        placed.push((arena, offset, c.bytes, c.live));
        offsets.insert(c.root, (arena, offset));
        let size = &mut arenas[arena as usize];
        *size = (*size).max(offset + c.bytes);
    }
    let mut arena_bytes: u64 = arenas.iter().sum();
    // Sharing that costs more than it saves (tiny tensors padded to `ALIGN`,
    // several arenas) or shares nothing is not worth it: they keep their
    // own buffers.
    if arena_bytes > placed.iter().map(|p| p.2).sum::<u64>() || arenas.len() == placed.len() {
        offsets.clear();
        arenas.clear();
        arena_bytes = 0;
    }
    let mut dedicated_bytes = 0;
    for c in classes.values_mut() {
        match offsets.get(&c.root) {
            Some(&(arena, offset)) => c.placement = Placement::Arena { arena, offset },
            None => dedicated_bytes += c.bytes,
        }
    }
    let n_arenas = arenas.len();
    let peak_live = (0..steps.len())
        .map(|t| {
            classes
                .values()
                .filter(|c| matches!(c.placement, Placement::Arena { .. }) && c.live.0 <= t && t <= c.live.1)
                .map(|c| (align_up(c.bytes), c.bytes))
                .collect::<Vec<_>>()
        })
        // Every live tensor but the topmost of each arena starts at an
        // aligned offset, so all but one per arena pay their padding.
        .map(|mut live| {
            live.sort_by_key(|&(aligned, b)| std::cmp::Reverse(aligned - b));
            let pads: u64 = live.iter().take(n_arenas).map(|&(aligned, b)| aligned - b).sum();
            live.iter().map(|&(aligned, _)| aligned).sum::<u64>() - pads
        })
        .max()
        .unwrap_or(0);
    MemoryPlan {
        class_of,
        classes,
        arenas,
        arena_bytes,
        dedicated_bytes,
        naive_bytes,
        lower_bound_bytes: dedicated_bytes + peak_live,
    }
}
