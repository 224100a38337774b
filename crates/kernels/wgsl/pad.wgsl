//! Constant padding (`aten.constant_pad_nd`): output coordinate `c` reads
//! input coordinate `c - before` when it lies inside the input, else
//! `value`. A negative `before` (or a negative pad after) crops. The value
//! is an f32 converted to `Elem`; the host checks that it is exact (the
//! `i32` variant pads integer and bool tensors).
// variants: f32 f16 i32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    rank: u32,
    value: f32,
    _pad0: u32,
    shape: array<vec4<u32>, 2>,
    in_shape: array<vec4<u32>, 2>,
    before: array<vec4<i32>, 2>,
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
    var src = 0u;
    var stride = 1u;
    var inside = true;
    for (var d = i32(p.rank) - 1; d >= 0; d = d - 1) {
        let du = u32(d);
        let size = p.shape[du / 4u][du % 4u];
        let in_size = p.in_shape[du / 4u][du % 4u];
        let c = i32(rem % size) - p.before[du / 4u][du % 4u];
        rem = rem / size;
        if c < 0 || u32(c) >= in_size {
            inside = false;
        } else {
            src += u32(c) * stride;
        }
        stride *= in_size;
    }
    if inside {
        out[i] = x[src];
    } else {
        out[i] = Elem(p.value);
    }
}
