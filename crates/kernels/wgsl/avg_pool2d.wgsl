//! 2-D average pooling over the last two dims of a tensor seen as
//! `[planes, H, W]`: one invocation per output element, in f32. Divisor
//! as in PyTorch: `divisor` > 0 overrides; else the window clipped to the
//! padded input when `count_include_pad`, else clipped to the input.
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
    count_include_pad: u32,
    divisor: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read_write> out: array<Elem>;

fn avg_pool(i: u32, plane: u32, oh: u32, ow: u32) {
    let hs = i32(oh * p.stride_h) - i32(p.pad_h);
    let ws = i32(ow * p.stride_w) - i32(p.pad_w);
    let he = min(hs + i32(p.kh), i32(p.h + p.pad_h));
    let we = min(ws + i32(p.kw), i32(p.w + p.pad_w));
    let pool_size = (he - hs) * (we - ws);
    let h0 = max(hs, 0);
    let w0 = max(ws, 0);
    let h1 = min(he, i32(p.h));
    let w1 = min(we, i32(p.w));
    var sum = 0.0;
    for (var ih = h0; ih < h1; ih++) {
        for (var iw = w0; iw < w1; iw++) {
            sum += f32(x[plane * p.h * p.w + u32(ih) * p.w + u32(iw)]);
        }
    }
    var divisor = f32(max((h1 - h0) * (w1 - w0), 1));
    if p.divisor > 0u {
        divisor = f32(p.divisor);
    } else if p.count_include_pad != 0u {
        divisor = f32(pool_size);
    }
    out[i] = Elem(sum / divisor);
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
    avg_pool(i, plane, oh, ow);
}
