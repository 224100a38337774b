//! `et_vk.q8ta_relu`: `quantize(relu(dequantize(x)))` with the input's and
//! the output's scale and zero point, each step in float32 as the reference
//! (`q8ta_relu_impl`), the output clamped to -128..127. One invocation
//! writes one output word.
// variants: f32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    in_scale: f32,
    in_zero_point: i32,
    out_inv_scale: f32,
    out_zero_point: i32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

// include: q8_int8.wgsl

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let word = gid.x + gid.y * nwg.x * WG;
    if word * 4u >= p.numel {
        return;
    }
    let wx = x[word];
    var packed = 0u;
    for (var j = 0u; j < 4u; j++) {
        if word * 4u + j < p.numel {
            let y = Elem(max((f32(i8_at(wx, j)) - f32(p.in_zero_point)) * p.in_scale, 0.0));
            packed |= requant(f32(y), p.out_inv_scale, p.out_zero_point, -128, 127) << (8u * j);
        }
    }
    out[word] = packed;
}
