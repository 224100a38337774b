//! Broadcasting bitwise ops on integers and bools:
//! `out[i] = op(a[ia], b[ib])`.
//!
//! `op`: 0 and, 1 or, 2 xor, 3 not (`~a`; `b` is bound but not read),
//! 4 logical not of a bool (`a ^ 1`, since a bool is a `u32` 0 or 1).
// variants: i32 u32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    rank: u32,
    op: u32,
    _pad0: u32,
    shape: array<vec4<u32>, 2>,
    a_strides: array<vec4<u32>, 2>,
    b_strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<Elem>;
@group(0) @binding(2) var<storage, read> b: array<Elem>;
@group(0) @binding(3) var<storage, read_write> out: array<Elem>;

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
    let y = b[ib];
    switch p.op {
        case 0u: { out[i] = x & y; }
        case 1u: { out[i] = x | y; }
        case 2u: { out[i] = x ^ y; }
        case 3u: { out[i] = ~x; }
        default: { out[i] = x ^ Elem(1); }
    }
}
