//! The unary ops and activations, defined once: `unary.wgsl` runs one per
//! dispatch, and the kernels that apply an activation epilogue (`conv`,
//! `gemv`, `matmul`) or fuse elementwise chains (`fused_elementwise`) call
//! `act` too. A source includes it with a `// include: act.wgsl` line, which
//! `cargo xtask codegen` replaces with the text below these `//!` lines. The
//! including source must declare `var<private> nan_bits: u32` (NaN's bits).

/// Op codes of `act`: the discriminants of the kernels crate's `UnaryOp`
/// (a kernels test checks that they agree, name by name).
const ACT_COPY: u32 = 0u;
const ACT_RELU: u32 = 1u;
const ACT_GELU: u32 = 2u;
const ACT_GELU_TANH: u32 = 3u;
const ACT_EXP: u32 = 4u;
const ACT_SIGMOID: u32 = 5u;
const ACT_TANH: u32 = 6u;
const ACT_NEG: u32 = 7u;
const ACT_ABS: u32 = 8u;
const ACT_SQRT: u32 = 9u;
const ACT_RSQRT: u32 = 10u;
const ACT_SIN: u32 = 11u;
const ACT_COS: u32 = 12u;
const ACT_LOG: u32 = 13u;
const ACT_CLAMP: u32 = 14u;
const ACT_LEAKY_RELU: u32 = 15u;
const ACT_HARDSWISH: u32 = 16u;
const ACT_ROUND: u32 = 17u;
const ACT_POW_SCALAR: u32 = 18u;
const ACT_HARDSIGMOID: u32 = 19u;
const ACT_SILU: u32 = 20u;
const ACT_HARDSHRINK: u32 = 21u;
const ACT_LOG10: u32 = 22u;

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

/// `b ** e` with PyTorch's results for negative bases.
fn pow_scalar(b: f32, e: f32) -> f32 {
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

/// The activation `op` (an `ACT_*` code; `ACT_COPY` is none) with its
/// scalar parameters.
fn act(op: u32, v: f32, p0: f32, p1: f32) -> f32 {
    switch op {
        case ACT_COPY: { return v; }
        case ACT_RELU: { return max(v, 0.0); }
        case ACT_GELU: { return 0.5 * v * (1.0 + erf_approx(v * 0.70710678118654752)); }
        case ACT_GELU_TANH: { return 0.5 * v * (1.0 + tanh_safe(0.79788456080286536 * (v + 0.044715 * v * v * v))); }
        case ACT_EXP: { return exp(v); }
        case ACT_SIGMOID: { return 1.0 / (1.0 + exp(-v)); }
        case ACT_TANH: { return tanh_safe(v); }
        case ACT_NEG: { return -v; }
        case ACT_ABS: { return abs(v); }
        case ACT_SQRT: { return sqrt(v); }
        case ACT_RSQRT: { return inverseSqrt(v); }
        case ACT_SIN: { return sin(v); }
        case ACT_COS: { return cos(v); }
        case ACT_LOG: { return log(v); }
        case ACT_CLAMP: { return min(max(v, p0), p1); }
        case ACT_LEAKY_RELU: { return select(v * p0, v, v >= 0.0); }
        case ACT_HARDSWISH: { return v * clamp(v + 3.0, 0.0, 6.0) / 6.0; }
        case ACT_ROUND: { return round(v); }
        case ACT_POW_SCALAR: { return pow_scalar(v, p0); }
        case ACT_HARDSIGMOID: { return clamp(v + 3.0, 0.0, 6.0) / 6.0; }
        case ACT_SILU: { return v * (1.0 / (1.0 + exp(-v))); }
        case ACT_HARDSHRINK: { return select(0.0, v, abs(v) > p0); }
        case ACT_LOG10: { return log(v) * 0.43429448190325182; }
        default: { return bitcast<f32>(nan_bits); }
    }
}
