//! Unary elementwise ops and activations: `out[i] = op(x[i])`.
//!
//! `op` selects the function (an op code of `act`, `common/act.wgsl`);
//! `p0` and `p1` carry its scalar arguments (clamp bounds, slopes,
//! exponents). Math runs in f32 whatever `Elem` is.
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

// include: act.wgsl

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    out[i] = Elem(act(p.op, f32(x[i]), p.p0, p.p1));
}
