//! Broadcasting select: `out[i] = cond[ic] != 0 ? a[ia] : b[ib]`
//! (`aten.where.self`). `cond` is a bool tensor, one `u32` per element.
//! Pure data movement, so the `i32` variant is exact and the `u32` variant
//! selects between bools.
// variants: f32 f16 i32 u32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    rank: u32,
    _pad0: u32,
    _pad1: u32,
    shape: array<vec4<u32>, 2>,
    c_strides: array<vec4<u32>, 2>,
    a_strides: array<vec4<u32>, 2>,
    b_strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> cond: array<u32>;
@group(0) @binding(2) var<storage, read> a: array<Elem>;
@group(0) @binding(3) var<storage, read> b: array<Elem>;
@group(0) @binding(4) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    var rem = i;
    var ic = 0u;
    var ia = 0u;
    var ib = 0u;
    for (var d = i32(p.rank) - 1; d >= 0; d = d - 1) {
        let du = u32(d);
        let size = p.shape[du / 4u][du % 4u];
        let c = rem % size;
        rem = rem / size;
        ic += c * p.c_strides[du / 4u][du % 4u];
        ia += c * p.a_strides[du / 4u][du % 4u];
        ib += c * p.b_strides[du / 4u][du % 4u];
    }
    if cond[ic] != 0u {
        out[i] = a[ia];
    } else {
        out[i] = b[ib];
    }
}
