//! `quantized_decomposed.quantize_per_tensor`: float to int8,
//! `q = clamp(round(x * inv_scale) + zero_point, quant_min, quant_max)` with
//! `inv_scale = f32(1 / scale)` (the reference multiplies by the reciprocal
//! of the double scale, rounded to float32). One invocation writes one
//! output word of four int8 values.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    inv_scale: f32,
    zero_point: i32,
    quant_min: i32,
    quant_max: i32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

// include: q8_int8.wgsl

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let word = gid.x + gid.y * nwg.x * WG;
    if word * 4u >= p.numel {
        return;
    }
    var packed = 0u;
    for (var j = 0u; j < 4u; j++) {
        let i = word * 4u + j;
        if i < p.numel {
            packed |= requant(f32(x[i]), p.inv_scale, p.zero_point, p.quant_min, p.quant_max) << (8u * j);
        }
    }
    out[word] = packed;
}
