//! The device argmax of a decode step's logits: the index of the largest
//! value of each contiguous row of `n` (`x` is `[rows, n]`), as int32, in
//! two dispatches of this shader with one binding layout. `stage` 0: a
//! workgroup per `CHUNK` values of a row (grid `(chunks, rows)`), each
//! invocation folding `PER` of them (all loaded before any is compared)
//! and the workgroup meeting in a tree, writes its (value, index) to
//! `partial`; `stage` 1: a workgroup per row (grid `(1, rows)`) folds the
//! row's `chunks` partials into `out`. The order is `arg_reduce.wgsl`'s
//! (the smaller index on ties, the first NaN over any number).
//!
//! `arg_reduce.wgsl` with one workgroup a row walks a 128256-wide vocabulary
//! in 2,004 dependent steps per invocation; here each invocation takes 16
//! values and a row spreads over ~32 workgroups.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (a power of two: tree reduction).
const WG: u32 = 256u;
/// Values each invocation folds in stage 0.
const PER: u32 = 16u;
/// Values per stage-0 workgroup.
const CHUNK: u32 = WG * PER;

struct Params {
    /// 0: chunks into partials; 1: partials into indices.
    stage: u32,
    /// Row length.
    n: u32,
    /// Chunks per row (`ceil(n / CHUNK)`).
    chunks: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
/// Per (row, chunk): the value's bits and its index in the row.
@group(0) @binding(2) var<storage, read_write> partial: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<i32>;

var<workgroup> part_val: array<f32, WG>;
var<workgroup> part_idx: array<u32, WG>;

// include: arg_better.wgsl

/// The sentinel index of "nothing yet": it loses every comparison.
const NONE: u32 = 0xffffffffu;

/// Whether (b, ib) should replace (a, ia), the sentinel losing.
fn pick(a: f32, ia: u32, b: f32, ib: u32) -> bool {
    return ib != NONE && (ia == NONE || better(0u, a, ia, b, ib));
}

/// The workgroup's best of (`val`, `idx`), in invocation 0's slot.
fn tree(lid: u32, val: f32, idx: u32) {
    part_val[lid] = val;
    part_idx[lid] = idx;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s /= 2u) {
        if lid < s && pick(part_val[lid], part_idx[lid], part_val[lid + s], part_idx[lid + s]) {
            part_val[lid] = part_val[lid + s];
            part_idx[lid] = part_idx[lid + s];
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let row = wid.y;
    var val = 0.0;
    var idx = NONE;
    if p.stage == 0u {
        let start = wid.x * CHUNK;
        var vals: array<f32, PER>;
        for (var j = 0u; j < PER; j++) {
            let i = start + j * WG + lid;
            if i < p.n {
                vals[j] = f32(x[row * p.n + i]);
            }
        }
        // In index order, so the first of equal values stays.
        for (var j = 0u; j < PER; j++) {
            let i = start + j * WG + lid;
            if i < p.n && pick(val, idx, vals[j], i) {
                val = vals[j];
                idx = i;
            }
        }
        tree(lid, val, idx);
        if lid == 0u {
            partial[row * p.chunks + wid.x] = vec2<u32>(bitcast<u32>(part_val[0]), part_idx[0]);
        }
        return;
    }
    for (var c = lid; c < p.chunks; c += WG) {
        let q = partial[row * p.chunks + c];
        if pick(val, idx, bitcast<f32>(q.x), q.y) {
            val = bitcast<f32>(q.x);
            idx = q.y;
        }
    }
    tree(lid, val, idx);
    if lid == 0u {
        out[row] = i32(part_idx[0]);
    }
}
