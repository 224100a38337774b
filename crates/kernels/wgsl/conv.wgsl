//! Direct grouped 2-D convolution (1-D as H = 1), NCHW, with an optional
//! bias and an optional output clamp: one invocation per output element
//! `(n, oc, oh, ow)` sums `x * w` over its group's input channels and the
//! kernel window, in f32. Weight layout `[OC, IC / groups, KH, KW]`, or
//! `[IC, OC / groups, KH, KW]` when `transposed` (each output gathers the
//! inputs whose strided window covers it). After the clamp, an optional
//! activation epilogue (`act` of `common/act.wgsl`, `ACT_COPY` for none):
//! the fused `etwgpu.convolution_act` and `etwgpu.conv_with_clamp_act`.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 64).
override WG: u32 = 64u;

struct Params {
    numel: u32,
    c_in: u32,
    h: u32,
    w: u32,
    c_out: u32,
    oh: u32,
    ow: u32,
    groups: u32,
    kh: u32,
    kw: u32,
    stride_h: u32,
    stride_w: u32,
    pad_h: u32,
    pad_w: u32,
    dil_h: u32,
    dil_w: u32,
    has_bias: u32,
    has_min: u32,
    has_max: u32,
    transposed: u32,
    out_min: f32,
    out_max: f32,
    act_p0: f32,
    act_p1: f32,
    act: u32,
    _pad1: u32,
    _pad2: u32,
    _pad3: u32,
}

// Non-finite values come from bit patterns read at run time: WGSL makes a
// constant expression that evaluates to NaN or infinity an error (Chrome's
// Tint rejects `bitcast<f32>(0x7fc00000u)`).
var<private> nan_bits: u32 = 0x7fc00000u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> weight: array<Elem>;
@group(0) @binding(3) var<storage, read> bias: array<Elem>;
@group(0) @binding(4) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    let ow = i % p.ow;
    let oh = (i / p.ow) % p.oh;
    let oc = (i / (p.ow * p.oh)) % p.c_out;
    let n = i / (p.ow * p.oh * p.c_out);
    var acc = 0.0;
    if p.has_bias != 0u {
        acc = f32(bias[oc]);
    }
    if p.transposed != 0u {
        acc += transposed_sum(n, oc, oh, ow);
    } else {
        acc += direct_sum(n, oc, oh, ow);
    }
    out[i] = Elem(clamp_act(acc));
}

fn direct_sum(n: u32, oc: u32, oh: u32, ow: u32) -> f32 {
    let icg = p.c_in / p.groups;
    let ic0 = (oc / (p.c_out / p.groups)) * icg;
    var acc = 0.0;
    let ih0 = i32(oh * p.stride_h) - i32(p.pad_h);
    let iw0 = i32(ow * p.stride_w) - i32(p.pad_w);
    for (var c = 0u; c < icg; c++) {
        let x_plane = (n * p.c_in + ic0 + c) * p.h * p.w;
        let w_plane = (oc * icg + c) * p.kh * p.kw;
        for (var ky = 0u; ky < p.kh; ky++) {
            let ih = ih0 + i32(ky * p.dil_h);
            if ih < 0 || ih >= i32(p.h) {
                continue;
            }
            for (var kx = 0u; kx < p.kw; kx++) {
                let iw = iw0 + i32(kx * p.dil_w);
                if iw < 0 || iw >= i32(p.w) {
                    continue;
                }
                acc += f32(x[x_plane + u32(ih) * p.w + u32(iw)]) * f32(weight[w_plane + ky * p.kw + kx]);
            }
        }
    }
    return acc;
}

fn transposed_sum(n: u32, oc: u32, oh: u32, ow: u32) -> f32 {
    let icg = p.c_in / p.groups;
    let ocg = p.c_out / p.groups;
    let ic0 = (oc / ocg) * icg;
    var acc = 0.0;
    for (var c = 0u; c < icg; c++) {
        let x_plane = (n * p.c_in + ic0 + c) * p.h * p.w;
        let w_plane = ((ic0 + c) * ocg + oc % ocg) * p.kh * p.kw;
        for (var ky = 0u; ky < p.kh; ky++) {
            let ty = i32(oh + p.pad_h) - i32(ky * p.dil_h);
            if ty < 0 || ty % i32(p.stride_h) != 0 || ty / i32(p.stride_h) >= i32(p.h) {
                continue;
            }
            let ih = u32(ty) / p.stride_h;
            for (var kx = 0u; kx < p.kw; kx++) {
                let tx = i32(ow + p.pad_w) - i32(kx * p.dil_w);
                if tx < 0 || tx % i32(p.stride_w) != 0 || tx / i32(p.stride_w) >= i32(p.w) {
                    continue;
                }
                let iw = u32(tx) / p.stride_w;
                acc += f32(x[x_plane + ih * p.w + iw]) * f32(weight[w_plane + ky * p.kw + kx]);
            }
        }
    }
    return acc;
}

// include: act.wgsl
// include: conv_epilogue.wgsl
