//! Reductions over any set of dims: `sum`, `mean`, `amax`, `amin`.
//!
//! One workgroup per output element. The host coalesces the input's dims
//! into kept dims (`out_shape`, with their input strides) and reduced dims
//! (`red_shape`, `red_strides`); output element `o` reads the `n_red`
//! elements at `base(o) + offset(j)`. Each invocation folds a strided share
//! of them, then a shared-memory tree combines the `WG` partials. Math runs
//! in f32; `amax`/`amin` propagate NaN as PyTorch does.
//!
//! `op`: 0 sum, 1 mean (sum times `scale` = 1 / n_red), 2 amax, 3 amin.
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
    scale: f32,
    _pad0: u32,
    _pad1: u32,
    out_shape: array<vec4<u32>, 2>,
    out_strides: array<vec4<u32>, 2>,
    red_shape: array<vec4<u32>, 2>,
    red_strides: array<vec4<u32>, 2>,
}

// Non-finite values come from bit patterns read at run time: WGSL makes a
// constant expression that evaluates to NaN or infinity an error (Chrome's
// Tint rejects `bitcast<f32>(0x7fc00000u)`).
var<private> neg_inf_bits: u32 = 0xff800000u;
var<private> inf_bits: u32 = 0x7f800000u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read_write> out: array<Elem>;

var<workgroup> partial: array<f32, WG>;

fn is_nan(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

fn init(op: u32) -> f32 {
    switch op {
        case 2u: { return bitcast<f32>(neg_inf_bits); }
        case 3u: { return bitcast<f32>(inf_bits); }
        default: { return 0.0; }
    }
}

fn combine(op: u32, a: f32, b: f32) -> f32 {
    switch op {
        case 2u, 3u: {
            if is_nan(a) {
                return a;
            }
            if is_nan(b) {
                return b;
            }
            if op == 2u {
                return max(a, b);
            }
            return min(a, b);
        }
        default: { return a + b; }
    }
}

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
    var acc = init(p.op);
    for (var j = lid; j < p.n_red; j += WG) {
        acc = combine(p.op, acc, f32(x[base + offset(j, p.red_rank, p.red_shape, p.red_strides)]));
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if lid < s {
            partial[lid] = combine(p.op, partial[lid], partial[lid + s]);
        }
        workgroupBarrier();
    }
    if lid == 0u {
        var r = partial[0];
        if p.op == 1u {
            r = r * p.scale;
        }
        out[o] = Elem(r);
    }
}
