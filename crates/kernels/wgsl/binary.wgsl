//! Broadcasting binary elementwise ops: `out[i] = op(a[ia], b[ib])`.
//!
//! The host passes the output shape and, per operand, its strides in
//! elements (0 along broadcast dims), so one kernel covers every
//! broadcasting pattern up to rank 8. Float math runs in f32 whatever
//! `Elem` is; the `i32` variant sets `int_math` and runs exact integer math
//! (wrapping, as PyTorch's int32 ops; `alpha_int` is the integer alpha).
// variants: f32 f16 i32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    rank: u32,
    op: u32,
    int_math: u32,
    alpha: f32,
    alpha_int: i32,
    _pad2: f32,
    _pad3: f32,
    shape: array<vec4<u32>, 2>,
    a_strides: array<vec4<u32>, 2>,
    b_strides: array<vec4<u32>, 2>,
}

// Non-finite values come from bit patterns read at run time: WGSL makes a
// constant expression that evaluates to NaN or infinity an error (Chrome's
// Tint rejects `bitcast<f32>(0x7fc00000u)`).
var<private> nan_bits: u32 = 0x7fc00000u;
var<private> inf_bits: u32 = 0x7f800000u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<Elem>;
@group(0) @binding(2) var<storage, read> b: array<Elem>;
@group(0) @binding(3) var<storage, read_write> out: array<Elem>;

fn nan() -> f32 {
    return bitcast<f32>(nan_bits);
}

/// `pow` with PyTorch's results for negative bases and zero exponents.
fn pow_torch(x: f32, y: f32) -> f32 {
    if y == 0.0 {
        return 1.0;
    }
    if x > 0.0 {
        return pow(x, y);
    }
    if x == 0.0 {
        if y > 0.0 {
            return 0.0;
        }
        return bitcast<f32>(inf_bits);
    }
    if y != floor(y) {
        return nan();
    }
    let r = pow(-x, y);
    if fract(y * 0.5) != 0.0 {
        return -r;
    }
    return r;
}

fn apply(op: u32, x: f32, y: f32, alpha: f32) -> f32 {
    switch op {
        case 0u: { return x + alpha * y; }
        case 1u: { return x - alpha * y; }
        case 2u: { return x * y; }
        case 3u: { return x / y; }
        case 4u: { return floor(x / y); }
        case 5u: { return trunc(x / y); }
        case 6u: { return pow_torch(x, y); }
        case 7u: { return min(x, y); }
        case 8u: { return max(x, y); }
        default: { return nan(); }
    }
}

/// `x ** y` for integers by squaring (a negative exponent, which PyTorch
/// refuses for integers, gives `0` unless `|x| == 1`).
fn pow_int(x: i32, y: i32) -> i32 {
    if y < 0 {
        if x == 1 {
            return 1;
        }
        if x == -1 {
            return select(1, -1, (y & 1) != 0);
        }
        return 0;
    }
    var r = 1;
    var b = x;
    var e = y;
    while e > 0 {
        if (e & 1) != 0 {
            r = r * b;
        }
        b = b * b;
        e = e >> 1u;
    }
    return r;
}

/// Floor division of integers (Python's `//`; `x / 0` gives `x`'s WGSL
/// result, where PyTorch raises).
fn floor_div_int(x: i32, y: i32) -> i32 {
    let q = x / y;
    if (x % y != 0) && ((x < 0) != (y < 0)) {
        return q - 1;
    }
    return q;
}

fn apply_int(op: u32, x: i32, y: i32, alpha: i32) -> i32 {
    switch op {
        case 0u: { return x + alpha * y; }
        case 1u: { return x - alpha * y; }
        case 2u: { return x * y; }
        case 4u: { return floor_div_int(x, y); }
        case 5u: { return x / y; }
        case 6u: { return pow_int(x, y); }
        case 7u: { return min(x, y); }
        case 8u: { return max(x, y); }
        // True division has a float result: the host never asks for it.
        default: { return 0; }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    var rem = i;
    var ia = 0u;
    var ib = 0u;
    for (var d = i32(p.rank) - 1; d >= 0; d = d - 1) {
        let du = u32(d);
        let size = p.shape[du / 4u][du % 4u];
        let c = rem % size;
        rem = rem / size;
        ia += c * p.a_strides[du / 4u][du % 4u];
        ib += c * p.b_strides[du / 4u][du % 4u];
    }
    if p.int_math != 0u {
        out[i] = Elem(apply_int(p.op, i32(a[ia]), i32(b[ib]), p.alpha_int));
    } else {
        out[i] = Elem(apply(p.op, f32(a[ia]), f32(b[ib]), p.alpha));
    }
}
