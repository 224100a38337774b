//! Memory planning: intermediate tensors share one arena when their
//! lifetimes do not overlap.
//!
//! The input is the lowered chain (a list of [`Step`]s) and the byte size of
//! every tensor it touches. Views ([`Step::Alias`]) share their source's
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
    /// At this offset of the arena.
    Arena {
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
    /// Size of the shared arena.
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

/// Plans the memory of `steps`.
///
/// `bytes` gives every tensor's size (a tensor missing from it is a bug in
/// the caller and panics); `pinned` lists the tensors that must keep their
/// own buffer (graph inputs and outputs, constants, mutable state).
pub fn plan(steps: &[Step], bytes: &BTreeMap<Vid, u64>, pinned: &BTreeSet<Vid>) -> MemoryPlan {
    let size = |v: Vid| *bytes.get(&v).unwrap_or_else(|| panic!("memory plan: no size for tensor {v:?}"));
    let mut parent: BTreeMap<Vid, Vid> = BTreeMap::new();
    let mut touched: BTreeMap<Vid, (usize, usize)> = BTreeMap::new();
    let mut dedicated_roots: BTreeSet<Vid> = BTreeSet::new();
    let touch = |v: Vid, t: usize, touched: &mut BTreeMap<Vid, (usize, usize)>| {
        let e = touched.entry(v).or_insert((t, t));
        e.0 = e.0.min(t);
        e.1 = e.1.max(t);
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
            // Host-side SymInt updates touch no device storage.
            Step::SymInt { .. } | Step::ReadSymInt { .. } => {}
        }
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

    // Greedy by size over the unpinned classes.
    let mut order: Vec<&StorageClass> = classes.values().filter(|c| !pinned_roots.contains(&c.root)).collect();
    order.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.live.0.cmp(&b.live.0)).then(a.root.cmp(&b.root)));
    let mut placed: Vec<(u64, u64, (usize, usize))> = Vec::new(); // (offset, bytes, live)
    let mut offsets: BTreeMap<Vid, u64> = BTreeMap::new();
    let mut arena_bytes = 0;
    for c in order {
        let mut busy: Vec<(u64, u64)> = placed
            .iter()
            .filter(|(_, _, live)| live.0 <= c.live.1 && c.live.0 <= live.1)
            .map(|&(off, b, _)| (off, off + b))
            .collect();
        busy.sort();
        let mut offset = 0;
        for (start, end) in busy {
            if offset + c.bytes <= start {
                break;
            }
            offset = offset.max(align_up(end));
        }
        placed.push((offset, c.bytes, c.live));
        offsets.insert(c.root, offset);
        arena_bytes = arena_bytes.max(offset + c.bytes);
    }
    // Sharing that costs more than it saves (tiny tensors padded to `ALIGN`) is not
    // worth an arena: they keep their own buffers.
    if arena_bytes > placed.iter().map(|p| p.1).sum::<u64>() {
        offsets.clear();
        arena_bytes = 0;
    }
    let mut dedicated_bytes = 0;
    for c in classes.values_mut() {
        match offsets.get(&c.root) {
            Some(&offset) => c.placement = Placement::Arena { offset },
            None => dedicated_bytes += c.bytes,
        }
    }
    let peak_live = (0..steps.len())
        .map(|t| {
            classes
                .values()
                .filter(|c| matches!(c.placement, Placement::Arena { .. }) && c.live.0 <= t && t <= c.live.1)
                .fold((0, 0), |(sum, pad), c| (sum + align_up(c.bytes), pad.max(align_up(c.bytes) - c.bytes)))
        })
        // Every live tensor but the topmost starts at an aligned offset, so
        // all but one pay their padding.
        .map(|(sum, pad)| sum - pad)
        .max()
        .unwrap_or(0);
    MemoryPlan {
        class_of,
        classes,
        arena_bytes,
        dedicated_bytes,
        naive_bytes,
        lower_bound_bytes: dedicated_bytes + peak_live,
    }
}
