//! `aten.grid_sampler_2d`: `out[n, c, i, j]` samples `x[n, c]` (`[H, W]`) at
//! the point `grid[n, i, j] = (gx, gy)` in `[-1, 1]` coordinates, one
//! invocation per output element.
//!
//! `mode` 0 is bilinear, 1 nearest (ties to even, as `nearbyint`);
//! `padding` 0 reads outside taps as zero, 1 clamps the point to the border.
//! With `align_corners` the corners map to the centers of the corner
//! pixels, else to their outer edges. Math runs in f32.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 64).
override WG: u32 = 64u;

struct Params {
    numel: u32,
    c: u32,
    h: u32,
    w: u32,
    oh: u32,
    ow: u32,
    mode: u32,
    padding: u32,
    align_corners: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> grid: array<Elem>;
@group(0) @binding(3) var<storage, read_write> out: array<Elem>;

/// A `[-1, 1]` coordinate in pixels along a dim of `size`, clamped to the
/// border under border padding.
fn source_coord(g: f32, size: u32) -> f32 {
    let s = f32(size);
    var v: f32;
    if p.align_corners != 0u {
        v = (g + 1.0) * 0.5 * (s - 1.0);
    } else {
        v = ((g + 1.0) * s - 1.0) * 0.5;
    }
    if p.padding == 1u {
        v = clamp(v, 0.0, s - 1.0);
    }
    return v;
}

/// Pixel `(yy, xx)` of plane `base`, zero outside.
fn tap(base: u32, yy: i32, xx: i32) -> f32 {
    if yy < 0 || xx < 0 || yy >= i32(p.h) || xx >= i32(p.w) {
        return 0.0;
    }
    return f32(x[base + u32(yy) * p.w + u32(xx)]);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    let j = i % p.ow;
    let r = (i / p.ow) % p.oh;
    let ch = (i / (p.ow * p.oh)) % p.c;
    let n = i / (p.ow * p.oh * p.c);
    let g = ((n * p.oh + r) * p.ow + j) * 2u;
    let ix = source_coord(f32(grid[g]), p.w);
    let iy = source_coord(f32(grid[g + 1u]), p.h);
    let base = (n * p.c + ch) * p.h * p.w;
    if p.mode == 1u {
        out[i] = Elem(tap(base, i32(round(iy)), i32(round(ix))));
        return;
    }
    let x0 = floor(ix);
    let y0 = floor(iy);
    let fx = ix - x0;
    let fy = iy - y0;
    let xi = i32(x0);
    let yi = i32(y0);
    let top = tap(base, yi, xi) * (1.0 - fx) + tap(base, yi, xi + 1) * fx;
    let bottom = tap(base, yi + 1, xi) * (1.0 - fx) + tap(base, yi + 1, xi + 1) * fx;
    out[i] = Elem(top * (1.0 - fy) + bottom * fy);
}
