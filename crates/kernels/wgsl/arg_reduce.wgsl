//! `argmax` / `argmin` over a set of dims, as in `reduce.wgsl`: one
//! workgroup per output element, a strided fold per invocation, then a
//! shared-memory tree over (value, index) pairs. The index is the flat
//! position `j` within the reduced dims, written as i32.
//!
//! Ties go to the smaller index and a NaN wins over any number (the first
//! NaN when there are several), which is PyTorch's result whatever order
//! the partials combine in. `op`: 0 argmax, 1 argmin.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup; the shared partials are sized from it, so it
/// is a `const` rather than an `override`. A power of two (tree reduction).
const WG: u32 = 64u;

struct Params {
    n_out: u32,
    n_red: u32,
    op: u32,
    out_rank: u32,
    red_rank: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
    out_shape: array<vec4<u32>, 2>,
    out_strides: array<vec4<u32>, 2>,
    red_shape: array<vec4<u32>, 2>,
    red_strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read_write> out: array<i32>;

var<workgroup> part_val: array<f32, WG>;
var<workgroup> part_idx: array<u32, WG>;

// include: arg_better.wgsl

/// Input offset of a flat index over `rank` coalesced dims.
fn offset(flat: u32, rank: u32, shape: array<vec4<u32>, 2>, strides: array<vec4<u32>, 2>) -> u32 {
    var rem = flat;
    var at = 0u;
    for (var d = i32(rank) - 1; d >= 0; d = d - 1) {
        let du = u32(d);
        let size = shape[du / 4u][du % 4u];
        at += (rem % size) * strides[du / 4u][du % 4u];
        rem = rem / size;
    }
    return at;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let o = wid.x + wid.y * nwg.x;
    if o >= p.n_out {
        return;
    }
    let base = offset(o, p.out_rank, p.out_shape, p.out_strides);
    // The sentinel index loses every tie, so its value never matters.
    var val = 0.0;
    var idx = 0xffffffffu;
    for (var j = lid; j < p.n_red; j += WG) {
        let v = f32(x[base + offset(j, p.red_rank, p.red_shape, p.red_strides)]);
        if idx == 0xffffffffu || better(p.op, val, idx, v, j) {
            val = v;
            idx = j;
        }
    }
    part_val[lid] = val;
    part_idx[lid] = idx;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if lid < s {
            let ib = part_idx[lid + s];
            if ib != 0xffffffffu && (part_idx[lid] == 0xffffffffu
                || better(p.op, part_val[lid], part_idx[lid], part_val[lid + s], ib)) {
                part_val[lid] = part_val[lid + s];
                part_idx[lid] = ib;
            }
        }
        workgroupBarrier();
    }
    if lid == 0u {
        out[o] = i32(part_idx[0]);
    }
}
