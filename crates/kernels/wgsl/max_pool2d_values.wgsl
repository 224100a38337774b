//! 2-D max pooling over the last two dims of a tensor seen as
//! `[planes, H, W]`, values only (`aten.max_pool2d`; `max_pool2d.wgsl` also
//! writes the indices): one invocation per output element, the same
//! parameters as `max_pool2d.wgsl`. NaN wins; padding never wins.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 64).
override WG: u32 = 64u;

struct Params {
    numel: u32,
    h: u32,
    w: u32,
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
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

// Non-finite values come from bit patterns read at run time: WGSL makes a
// constant expression that evaluates to NaN or infinity an error (Chrome's
// Tint rejects `bitcast<f32>(0x7fc00000u)`).
var<private> neg_inf_bits: u32 = 0xff800000u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read_write> out: array<Elem>;

fn max_pool(i: u32, plane: u32, oh: u32, ow: u32) {
    let h0 = i32(oh * p.stride_h) - i32(p.pad_h);
    let w0 = i32(ow * p.stride_w) - i32(p.pad_w);
    var best = bitcast<f32>(neg_inf_bits);
    var best_idx = -1;
    for (var ky = 0u; ky < p.kh; ky++) {
        let ih = h0 + i32(ky * p.dil_h);
        if ih < 0 || ih >= i32(p.h) {
            continue;
        }
        for (var kx = 0u; kx < p.kw; kx++) {
            let iw = w0 + i32(kx * p.dil_w);
            if iw < 0 || iw >= i32(p.w) {
                continue;
            }
            let idx = ih * i32(p.w) + iw;
            let v = f32(x[plane * p.h * p.w + u32(idx)]);
            // NaN wins, as in PyTorch.
            if best_idx < 0 || v > best || v != v {
                best = v;
                best_idx = idx;
            }
        }
    }
    out[i] = Elem(best);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    let ow = i % p.ow;
    let oh = (i / p.ow) % p.oh;
    let plane = i / (p.ow * p.oh);
    max_pool(i, plane, oh, ow);
}
