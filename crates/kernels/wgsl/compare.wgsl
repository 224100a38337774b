//! Broadcasting comparisons and logical ops with a bool result:
//! `out[i] = op(a[ia], b[ib])`, one `u32` (0 or 1) per bool.
//!
//! `op`: 0 eq, 1 ne, 2 gt, 3 ge, 4 lt, 5 le (IEEE: every comparison with a
//! NaN is false except ne), 6 logical and, 7 logical or, 8 logical xor (on
//! truthiness, `x != 0`). `mode` says what `b` is: 0 the tensor `b`
//! (compared in `Elem`, exact for every variant), 1 the float scalar
//! `scalar_f` (compared in f32), 2 the integer scalar `scalar_i` (compared in
//! i32). In the scalar modes `b` is bound but not read. Bool tensors are the
//! `u32` variant.
// variants: f32 f16 i32 u32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    rank: u32,
    op: u32,
    mode: u32,
    scalar_f: f32,
    scalar_i: i32,
    _pad0: u32,
    _pad1: u32,
    shape: array<vec4<u32>, 2>,
    a_strides: array<vec4<u32>, 2>,
    b_strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<Elem>;
@group(0) @binding(2) var<storage, read> b: array<Elem>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

/// The comparison `op` given how the operands order.
fn decide(op: u32, lt: bool, eq: bool, gt: bool) -> bool {
    switch op {
        case 0u: { return eq; }
        case 1u: { return !eq; }
        case 2u: { return gt; }
        case 3u: { return gt || eq; }
        case 4u: { return lt; }
        case 5u: { return lt || eq; }
        default: { return false; }
    }
}

fn logic(op: u32, x: bool, y: bool) -> bool {
    switch op {
        case 6u: { return x && y; }
        case 7u: { return x || y; }
        default: { return x != y; }
    }
}

fn apply_elem(op: u32, x: Elem, y: Elem) -> bool {
    if op >= 6u {
        return logic(op, x != Elem(0), y != Elem(0));
    }
    return decide(op, (x < y), (x == y), (x > y));
}

fn apply_f32(op: u32, x: f32, y: f32) -> bool {
    if op >= 6u {
        return logic(op, x != 0.0, y != 0.0);
    }
    return decide(op, (x < y), (x == y), (x > y));
}

fn apply_i32(op: u32, x: i32, y: i32) -> bool {
    if op >= 6u {
        return logic(op, x != 0, y != 0);
    }
    return decide(op, (x < y), (x == y), (x > y));
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    var rem = i;
    var ia = 0u;
    var ib = 0u;
    for (var d = i32(p.rank) - 1; d >= 0; d = d - 1) {
        let du = u32(d);
        let size = p.shape[du / 4u][du % 4u];
        let c = rem % size;
        rem = rem / size;
        ia += c * p.a_strides[du / 4u][du % 4u];
        ib += c * p.b_strides[du / 4u][du % 4u];
    }
    let x = a[ia];
    var r: bool;
    switch p.mode {
        case 1u: { r = apply_f32(p.op, f32(x), p.scalar_f); }
        case 2u: { r = apply_i32(p.op, i32(x), p.scalar_i); }
        default: { r = apply_elem(p.op, x, b[ib]); }
    }
    out[i] = select(0u, 1u, r);
}
