//! `aten.clamp` of an int32 tensor: `out[i] = min(max(x[i], lo), hi)` in
//! exact integer math (the float clamp is an op of `unary.wgsl`).
// variants: i32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    lo: i32,
    hi: i32,
    _pad0: u32,
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
    out[i] = Elem(min(max(i32(x[i]), p.lo), p.hi));
}
