//! The window of 2-D max pooling, shared by `max_pool2d.wgsl` (values and
//! indices) and `max_pool2d_values.wgsl` (values only): their parameters,
//! and the maximum of one output element's window. The kernel that
//! includes this declares `p: Params` and `x: array<Elem>`.

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

/// A window's maximum and its flat index.
struct WindowMax {
    value: f32,
    idx: i32,
}

/// The maximum of output element `(plane, oh, ow)`'s window, and its flat
/// `h * W + w` index (-1 when the window holds only padding).
fn window_max(plane: u32, oh: u32, ow: u32) -> WindowMax {
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
    return WindowMax(best, best_idx);
}

/// Output element `i` as `(plane, oh, ow)`.
fn out_coords(i: u32) -> vec3<u32> {
    return vec3<u32>(i / (p.ow * p.oh), (i / p.ow) % p.oh, i % p.ow);
}
