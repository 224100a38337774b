//! `et_vk.q8ta_conv2d`, `_pw`, `_dw` and `_transposed`: int8 NCHW
//! activations (per-tensor scale and zero point), int8 weights (symmetric,
//! per output channel), int8 out. `acc = sum (x - zp_x) * w` over the taps
//! inside the input (a padded tap is the zero point, so it adds nothing) in
//! exact int32,
//! `y = f32(acc) * (s_x * s_w[oc]) + bias[oc]`, optional relu, then
//! `clamp(round(y / s_out) + zp_out, -128, 127)`.
//!
//! Weight layouts, as the exporter packs them: general and pointwise
//! `[OC, >= KH*KW*IC_g]` with `(kh, kw, ic)` along a row of `w_row`
//! elements; depthwise `[KH, KW, >= OC]`, `(kh, kw)` rows of `w_row`;
//! transposed as general, where input pixel `(iy, ix)` and tap `(ky, kx)`
//! reach output `(iy * stride - pad + ky * dil, ...)` (conv_transpose2d's
//! scatter, gathered here per output).
//! One invocation writes one output word (four flat NCHW outputs).
// variants: f32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 64).
override WG: u32 = 64u;

struct Params {
    numel: u32,
    c: u32,
    h: u32,
    w: u32,
    oc: u32,
    oh: u32,
    ow: u32,
    kh: u32,
    kw: u32,
    stride_h: u32,
    stride_w: u32,
    pad_h: u32,
    pad_w: u32,
    dil_h: u32,
    dil_w: u32,
    ic_per_group: u32,
    oc_per_group: u32,
    w_row: u32,
    /// 0 general or pointwise, 1 depthwise, 2 transposed.
    mode: u32,
    has_bias: u32,
    relu: u32,
    in_zero_point: i32,
    out_zero_point: i32,
    in_scale: f32,
    out_inv_scale: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read> wt: array<u32>;
@group(0) @binding(3) var<storage, read> w_scales: array<Elem>;
@group(0) @binding(4) var<storage, read> bias: array<Elem>;
@group(0) @binding(5) var<storage, read_write> out: array<u32>;

// include: q8_int8.wgsl

fn x_at(i: u32) -> i32 {
    return i8_at(x[i / 4u], i % 4u);
}

fn w_at(i: u32) -> i32 {
    return i8_at(wt[i / 4u], i % 4u);
}

/// Output `o` (flat NCHW) before requantization.
fn conv_at(o: u32) -> f32 {
    let ox = o % p.ow;
    let oy = (o / p.ow) % p.oh;
    let oc = (o / (p.ow * p.oh)) % p.oc;
    let b = o / (p.ow * p.oh * p.oc);
    let ic0 = (oc / p.oc_per_group) * p.ic_per_group;
    var acc = 0i;
    for (var ky = 0u; ky < p.kh; ky++) {
        var iy = i32(oy * p.stride_h + ky * p.dil_h) - i32(p.pad_h);
        if p.mode == 2u {
            let ty = i32(oy + p.pad_h) - i32(ky * p.dil_h);
            if ty < 0 || u32(ty) % p.stride_h != 0u {
                continue;
            }
            iy = ty / i32(p.stride_h);
        }
        if iy < 0 || iy >= i32(p.h) {
            continue;
        }
        for (var kx = 0u; kx < p.kw; kx++) {
            var ix = i32(ox * p.stride_w + kx * p.dil_w) - i32(p.pad_w);
            if p.mode == 2u {
                let tx = i32(ox + p.pad_w) - i32(kx * p.dil_w);
                if tx < 0 || u32(tx) % p.stride_w != 0u {
                    continue;
                }
                ix = tx / i32(p.stride_w);
            }
            if ix < 0 || ix >= i32(p.w) {
                continue;
            }
            let tap = ky * p.kw + kx;
            let pix = u32(iy) * p.w + u32(ix);
            if p.mode == 1u {
                let xv = x_at((b * p.c + oc) * p.h * p.w + pix) - p.in_zero_point;
                acc += xv * w_at(tap * p.w_row + oc);
            } else {
                for (var ic = 0u; ic < p.ic_per_group; ic++) {
                    let xv = x_at((b * p.c + ic0 + ic) * p.h * p.w + pix) - p.in_zero_point;
                    acc += xv * w_at(oc * p.w_row + tap * p.ic_per_group + ic);
                }
            }
        }
    }
    var y = f32(acc) * (p.in_scale * f32(w_scales[oc]));
    if p.has_bias != 0u {
        y += f32(bias[oc]);
    }
    if p.relu != 0u {
        y = max(y, 0.0);
    }
    return y;
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
            packed |= requant(conv_at(o), p.out_inv_scale, p.out_zero_point, -128, 127) << (8u * j);
        }
    }
    out[word] = packed;
}
