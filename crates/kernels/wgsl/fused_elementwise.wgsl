//! Template of the fused elementwise kernels (`etwgpu.fused_elementwise`):
//! a chain of unary and broadcasting binary ops evaluated per output
//! element in f32, reading each input once through its own strides (0
//! along broadcast dims) and writing one output, with no intermediate
//! tensors.
//!
//! At lowering, the host keeps this file up to the `generated below`
//! marker (the `Params`, the unary ops `act` of `common/act.wgsl` and
//! the binary ops `bin` of `binary.wgsl`, same op codes) and writes the
//! bindings and `main` for one expression after it; what follows the
//! marker here is what it writes for `sigmoid x0; mul x0 t0; add t1 x1 1.0`
//! (a unit test checks so), which keeps the template valid WGSL.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    rank: u32,
    _pad0: u32,
    _pad1: u32,
    shape: array<vec4<u32>, 2>,
    /// Per input (at most 7): its strides in elements over `shape`.
    strides: array<array<vec4<u32>, 2>, 7>,
}

// Non-finite values come from bit patterns read at run time: WGSL makes a
// constant expression that evaluates to NaN or infinity an error (Chrome's
// Tint rejects `bitcast<f32>(0x7fc00000u)`).
var<private> nan_bits: u32 = 0x7fc00000u;
var<private> inf_bits: u32 = 0x7f800000u;

@group(0) @binding(0) var<uniform> p: Params;

/// Stride of input `k` along dim `d`.
fn stride(k: u32, d: u32) -> u32 {
    return p.strides[k][d / 4u][d % 4u];
}

/// `pow` with PyTorch's results for negative bases and zero exponents
/// (`binary.wgsl`).
fn pow_tensor(x: f32, y: f32) -> f32 {
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
        return bitcast<f32>(nan_bits);
    }
    let r = pow(-x, y);
    if fract(y * 0.5) != 0.0 {
        return -r;
    }
    return r;
}

/// The binary op `op` (the op codes of `binary.wgsl`).
fn bin(op: u32, x: f32, y: f32, alpha: f32) -> f32 {
    switch op {
        case 0u: { return x + alpha * y; }
        case 1u: { return x - alpha * y; }
        case 2u: { return x * y; }
        case 3u: { return x / y; }
        case 4u: { return floor(x / y); }
        case 5u: { return trunc(x / y); }
        case 6u: { return pow_tensor(x, y); }
        case 7u: { return min(x, y); }
        case 8u: { return max(x, y); }
        default: { return bitcast<f32>(nan_bits); }
    }
}

// include: act.wgsl

// generated below
@group(0) @binding(1) var<storage, read> x0: array<Elem>;
@group(0) @binding(2) var<storage, read> x1: array<Elem>;
@group(0) @binding(3) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    var rem = i;
    var o0 = 0u;
    var o1 = 0u;
    for (var d = i32(p.rank) - 1; d >= 0; d = d - 1) {
        let du = u32(d);
        let size = p.shape[du / 4u][du % 4u];
        let c = rem % size;
        rem = rem / size;
        o0 += c * stride(0u, du);
        o1 += c * stride(1u, du);
    }
    let v0 = f32(x0[o0]);
    let v1 = f32(x1[o1]);
    let t0 = act(5u, v0, 0.0, 0.0);
    let t1 = bin(2u, v0, t0, 1.0);
    let t2 = bin(0u, t1, v1, 1.0);
    out[i] = Elem(t2);
}
