//! Strided store: `out[offset + sum_d coord_d(i) * strides_d] = x[i]`,
//! `coord_d(i)` being the coordinates of `i` in `x`'s contiguous shape.
//! `cat` places each input in its slice of the output with one dispatch
//! per input. Pure data movement: the `i32` variant also moves bools.
// variants: f32 f16 i32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    rank: u32,
    offset: u32,
    _pad0: u32,
    shape: array<vec4<u32>, 2>,
    strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    var rem = i;
    var dst = p.offset;
    for (var d = i32(p.rank) - 1; d >= 0; d = d - 1) {
        let du = u32(d);
        let size = p.shape[du / 4u][du % 4u];
        dst += (rem % size) * p.strides[du / 4u][du % 4u];
        rem = rem / size;
    }
    out[dst] = x[i];
}
