//! The declarations the two implicit-GEMM convolutions share
//! (`conv_gemm.wgsl`, `conv_gemm_coop.wgsl`): their uniforms and bindings,
//! and the patch gather: which input a patch value of an output pixel at
//! an input `k = (c, ky, kx)` is, walked along K without dividing; and the
//! output store with its epilogue. The kernel that includes this declares
//! `Elem` and the constant `TK`, and includes `act.wgsl` and
//! `conv_epilogue.wgsl`.

struct Params {
    /// Output pixels `N * OH * OW`.
    m: u32,
    /// Output channels.
    n: u32,
    /// Inputs per output `C * KH * KW`.
    k: u32,
    /// Workgroups along N.
    tiles_n: u32,
    c_in: u32,
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
    /// `TK` as a step of `(c, ky, kx)`: `TK / (KH * KW)` channels, then
    /// `(TK % (KH * KW)) / KW` rows and `(TK % (KH * KW)) % KW` columns.
    step_c: u32,
    step_ky: u32,
    step_kx: u32,
    has_bias: u32,
    has_min: u32,
    has_max: u32,
    act: u32,
    out_min: f32,
    out_max: f32,
    act_p0: f32,
    act_p1: f32,
    /// Output tiles (workgroups of one split).
    tiles: u32,
    /// Inputs per split (a multiple of TK; K without a split).
    k_chunk: u32,
    /// Write raw partial sums (split K) instead of the epilogue's output.
    partial: u32,
    _pad0: u32,
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

/// Where a patch input is along K: input `k` is channel `c`, kernel row
/// `ky` and column `kx`.
struct KPos {
    k: u32,
    c: u32,
    ky: u32,
    kx: u32,
}

/// Input `k` as a `KPos` (divides: once an invocation).
fn kpos(k: u32) -> KPos {
    let khw = p.kh * p.kw;
    return KPos(k, k / khw, (k % khw) / p.kw, (k % khw) % p.kw);
}

/// `pos` moved `TK` inputs forward (each carry at most one).
fn advance(pos: KPos) -> KPos {
    var q = pos;
    q.k += TK;
    q.kx += p.step_kx;
    if q.kx >= p.kw {
        q.kx -= p.kw;
        q.ky += 1u;
    }
    q.ky += p.step_ky;
    if q.ky >= p.kh {
        q.ky -= p.kh;
        q.c += 1u;
    }
    q.c += p.step_c;
    return q;
}

/// One output pixel's window: its image's first input, and the input row
/// and column its window starts at (before padding: may be negative).
struct Row {
    base: u32,
    ih0: i32,
    iw0: i32,
    ok: bool,
}

fn row_of(m: u32) -> Row {
    let ohw = p.oh * p.ow;
    let img = m / ohw;
    let pix = m % ohw;
    let oh = pix / p.ow;
    let ow = pix % p.ow;
    return Row(
        img * p.c_in * p.h * p.w,
        i32(oh * p.stride_h) - i32(p.pad_h),
        i32(ow * p.stride_w) - i32(p.pad_w),
        m < p.m,
    );
}

/// The patch value of pixel `r` at `pos` (zero in the padding, past M or
/// past `k_end`, the end of this workgroup's inputs). Branch-free: the
/// load reads element 0 where the value is zero, and `select` picks.
fn patch_at(r: Row, pos: KPos, k_end: u32) -> Elem {
    // A window row or column before the image (negative) wraps past h or
    // w as u32, so one comparison a side bounds it.
    let ih = u32(r.ih0 + i32(pos.ky * p.dil_h));
    let iw = u32(r.iw0 + i32(pos.kx * p.dil_w));
    let inside = r.ok && pos.k < k_end && ih < p.h && iw < p.w;
    let v = x[select(0u, r.base + (pos.c * p.h + ih) * p.w + iw, inside)];
    return select(Elem(0.0), v, inside);
}

/// The weight of output channel `col` at input `k` (zero past N or
/// `k_end`).
fn weight_at(col: u32, k: u32, k_end: u32) -> Elem {
    let inside = col < p.n && k < k_end;
    let v = weight[select(0u, col * p.k + k, inside)];
    return select(Elem(0.0), v, inside);
}

/// Stores the sum `v` of output channel `oc` at NCHW element `at`: as a
/// raw partial sum at `part + at` of the scratch when split
/// (`conv_gemm_combine.wgsl` applies the epilogue), else with the bias,
/// then `clamp_act` (`conv_epilogue.wgsl`).
fn store_out(at: u32, part: u32, oc: u32, sum: f32) {
    if p.partial != 0u {
        out[part + at] = Elem(sum);
        return;
    }
    var v = sum;
    if p.has_bias != 0u {
        v += f32(bias[oc]);
    }
    out[at] = Elem(clamp_act(v));
}
