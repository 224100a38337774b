//! 2-D nearest and bilinear resampling of the last two dims of a tensor
//! seen as `[planes, H, W]`, one invocation per output element, with
//! PyTorch's source-index rules. The host passes each axis's scale
//! (input / output, or the reciprocal scale factor, or `(in - 1) /
//! (out - 1)` with `align_corners`). Math in f32.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    h: u32,
    w: u32,
    oh: u32,
    ow: u32,
    bilinear: u32,
    align_corners: u32,
    _pad0: u32,
    scale_h: f32,
    scale_w: f32,
    _pad1: f32,
    _pad2: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read_write> out: array<Elem>;

/// Bilinear source coordinate of `dst` (never negative).
fn source(dst: u32, scale: f32) -> f32 {
    if p.align_corners != 0u {
        return scale * f32(dst);
    }
    return max(scale * (f32(dst) + 0.5) - 0.5, 0.0);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    let ox = i % p.ow;
    let oy = (i / p.ow) % p.oh;
    let base = (i / (p.ow * p.oh)) * p.h * p.w;
    if p.bilinear == 0u {
        let sy = min(u32(floor(f32(oy) * p.scale_h)), p.h - 1u);
        let sx = min(u32(floor(f32(ox) * p.scale_w)), p.w - 1u);
        out[i] = x[base + sy * p.w + sx];
        return;
    }
    let fy = source(oy, p.scale_h);
    let fx = source(ox, p.scale_w);
    let y0 = min(u32(fy), p.h - 1u);
    let x0 = min(u32(fx), p.w - 1u);
    let y1 = min(y0 + 1u, p.h - 1u);
    let x1 = min(x0 + 1u, p.w - 1u);
    let ly = fy - f32(y0);
    let lx = fx - f32(x0);
    let top = (1.0 - lx) * f32(x[base + y0 * p.w + x0]) + lx * f32(x[base + y0 * p.w + x1]);
    let bottom = (1.0 - lx) * f32(x[base + y1 * p.w + x0]) + lx * f32(x[base + y1 * p.w + x1]);
    out[i] = Elem((1.0 - ly) * top + ly * bottom);
}
