//! The second pass of a split-K implicit-GEMM convolution
//! (`conv_gemm.wgsl` with `partial`): the output, NCHW, is the sum of the
//! splits' f32 partial sums in split order, then the convolution's
//! epilogue: bias, the optional clamp and the activation (`act` of
//! `common/act.wgsl`). One invocation an output element. Float32 programs
//! only (float16 ones never split).
// variants: f32

alias Elem = f32;

const WG: u32 = 256u;

struct Params {
    /// Output elements `N * OC * OH * OW`.
    numel: u32,
    /// Output pixels a channel plane `OH * OW`.
    ohw: u32,
    /// Output channels.
    n: u32,
    /// Splits along K.
    splits: u32,
    has_bias: u32,
    has_min: u32,
    has_max: u32,
    act: u32,
    out_min: f32,
    out_max: f32,
    act_p0: f32,
    act_p1: f32,
}

// Non-finite values come from bit patterns read at run time: WGSL makes a
// constant expression that evaluates to NaN or infinity an error (Chrome's
// Tint rejects `bitcast<f32>(0x7fc00000u)`).
var<private> nan_bits: u32 = 0x7fc00000u;

@group(0) @binding(0) var<uniform> p: Params;
/// `[splits, N, OC, OH, OW]`.
@group(0) @binding(1) var<storage, read> partial: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<Elem>;
@group(0) @binding(3) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    var v = 0.0;
    for (var s = 0u; s < p.splits; s++) {
        v += partial[s * p.numel + i];
    }
    if p.has_bias != 0u {
        v += f32(bias[(i / p.ohw) % p.n]);
    }
    out[i] = Elem(clamp_act(v));
}

// include: act.wgsl
// include: conv_epilogue.wgsl
