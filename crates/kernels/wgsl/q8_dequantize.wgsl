//! `quantized_decomposed.dequantize_per_tensor`: int8 to float,
//! `out = (f32(q) - zero_point) * scale` in float32, as the reference.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    scale: f32,
    zero_point: i32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<Elem>;

// include: q8_int8.wgsl

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    let v = i8_at(q[i / 4u], i % 4u);
    out[i] = Elem((f32(v) - f32(p.zero_point)) * p.scale);
}
