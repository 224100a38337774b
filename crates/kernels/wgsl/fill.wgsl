//! Creation ops: `out[i] = start + i * step` (`full`, `zeros`, `ones`,
//! their `_like` forms and `scalar_tensor` with `step = 0`; `arange`).
//! Integer (and bool) outputs use the `i32` variant and compute in i32
//! (`is_int`), so large integers stay exact; floats compute in f32.
// variants: f32 f16 i32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    is_int: u32,
    start_i: i32,
    step_i: i32,
    start_f: f32,
    step_f: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    if p.is_int != 0u {
        out[i] = Elem(p.start_i + i32(i) * p.step_i);
    } else {
        out[i] = Elem(p.start_f + f32(i) * p.step_f);
    }
}
