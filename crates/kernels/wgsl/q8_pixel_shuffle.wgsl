//! `et_vk.q8ta_pixel_shuffle`: `quantize(pixel_shuffle(dequantize(x), r))`
//! on int8 NCHW tensors. Output `(b, c, oy, ox)` reads input channel
//! `c * r * r + (oy % r) * r + ox % r` at `(oy / r, ox / r)`; the value is
//! dequantized with the input's scale and zero point and requantized with
//! the output's (`f32(output_inv_scale)`, round half to even, clamp to
//! -128..127), each step in float32 as the reference. One invocation
//! writes one output word (four flat NCHW outputs).
// variants: f32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    /// Output channels, height, width.
    oc: u32,
    oh: u32,
    ow: u32,
    r: u32,
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

/// The input element (flat NCHW) output `o` takes.
fn source(o: u32) -> u32 {
    let ox = o % p.ow;
    let oy = (o / p.ow) % p.oh;
    let rest = o / (p.ow * p.oh);
    let c = rest % p.oc;
    let b = rest / p.oc;
    let ic = (c * p.r + oy % p.r) * p.r + ox % p.r;
    let ih = p.oh / p.r;
    let iw = p.ow / p.r;
    return ((b * p.oc * p.r * p.r + ic) * ih + oy / p.r) * iw + ox / p.r;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let word = gid.x + gid.y * nwg.x * WG;
    if word * 4u >= p.numel {
        return;
    }
    var packed = 0u;
    for (var j = 0u; j < 4u; j++) {
        let o = word * 4u + j;
        if o < p.numel {
            let i = source(o);
            let y = Elem((f32(i8_at(x[i / 4u], i % 4u)) - f32(p.in_zero_point)) * p.in_scale);
            packed |= requant(f32(y), p.out_inv_scale, p.out_zero_point, -128, 127) << (8u * j);
        }
    }
    out[word] = packed;
}
