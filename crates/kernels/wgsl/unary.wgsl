//! Unary elementwise ops and activations: `out[i] = op(x[i])`.
//!
//! `op` selects the function; `p0` and `p1` carry its scalar arguments
//! (clamp bounds, slopes, exponents). Math runs in f32 whatever `Elem` is.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    op: u32,
    _pad0: u32,
    _pad1: u32,
    p0: f32,
    p1: f32,
    _pad2: f32,
    _pad3: f32,
}

// Non-finite values come from bit patterns read at run time: WGSL makes a
// constant expression that evaluates to NaN or infinity an error (Chrome's
// Tint rejects `bitcast<f32>(0x7fc00000u)`).
var<private> nan_bits: u32 = 0x7fc00000u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read_write> out: array<Elem>;

/// erf, Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7).
fn erf_approx(v: f32) -> f32 {
    let s = sign(v);
    let a = abs(v);
    let t = 1.0 / (1.0 + 0.3275911 * a);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return s * (1.0 - poly * exp(-a * a));
}

fn tanh_safe(v: f32) -> f32 {
    return tanh(clamp(v, -15.0, 15.0));
}

fn pow_torch(b: f32, e: f32) -> f32 {
    if e == 0.0 {
        return 1.0;
    }
    if b >= 0.0 {
        return pow(b, e);
    }
    if e != floor(e) {
        return bitcast<f32>(nan_bits);
    }
    let r = pow(-b, e);
    if fract(e * 0.5) != 0.0 {
        return -r;
    }
    return r;
}

fn apply(op: u32, v: f32) -> f32 {
    switch op {
        case 0u: { return v; }
        case 1u: { return max(v, 0.0); }
        case 2u: { return 0.5 * v * (1.0 + erf_approx(v * 0.70710678118654752)); }
        case 3u: { return 0.5 * v * (1.0 + tanh_safe(0.79788456080286536 * (v + 0.044715 * v * v * v))); }
        case 4u: { return exp(v); }
        case 5u: { return 1.0 / (1.0 + exp(-v)); }
        case 6u: { return tanh_safe(v); }
        case 7u: { return -v; }
        case 8u: { return abs(v); }
        case 9u: { return sqrt(v); }
        case 10u: { return inverseSqrt(v); }
        case 11u: { return sin(v); }
        case 12u: { return cos(v); }
        case 13u: { return log(v); }
        case 14u: { return min(max(v, p.p0), p.p1); }
        case 15u: { return select(v * p.p0, v, v >= 0.0); }
        case 16u: { return v * clamp(v + 3.0, 0.0, 6.0) / 6.0; }
        case 17u: { return round(v); }
        case 18u: { return pow_torch(v, p.p0); }
        case 19u: { return clamp(v + 3.0, 0.0, 6.0) / 6.0; }
        case 20u: { return v * (1.0 / (1.0 + exp(-v))); }
        case 21u: { return select(0.0, v, abs(v) > p.p0); }
        case 22u: { return log(v) * 0.43429448190325182; }
        default: { return bitcast<f32>(nan_bits); }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    out[i] = Elem(apply(p.op, f32(x[i])));
}
