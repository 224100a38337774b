//! `etwgpu.dq8_rows`, the activation side of `et_vk.linear_dq8ca_q4gsw`
//! (torchao 8da4w) once fusion has split it: every row of x quantized to
//! int8 with its scale and zero point and back,
//! `x'[m, k] = (clamp(round(x[m, k] * (1 / s_m)) + zp_m, -128, 127) - zp_m) * s_m`,
//! so that the 4-bit linear's kernels (the GEMVs of `q4_gemv.wgsl`, the
//! cooperative-matrix and tiled GEMMs) compute the op as `linear_q4gsw` of
//! x'. The rounding is `linear_dq8ca_q4gsw.wgsl`'s; zero points are int8,
//! four to a `u32` word. One invocation an element; the grid is folded
//! into x and y.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup.
const WG: u32 = 256u;

struct Params {
    /// Rows of x.
    m: u32,
    /// Row length.
    k: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> input_scale: array<Elem>;
@group(0) @binding(3) var<storage, read> input_zp: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.y * groups.x * WG + gid.x;
    if i >= p.m * p.k {
        return;
    }
    let row = i / p.k;
    let s = f32(input_scale[row]);
    let zp_byte = (input_zp[row / 4u] >> ((row % 4u) * 8u)) & 0xffu;
    let zp = f32(i32(zp_byte << 24u) >> 24u);
    let q = clamp(round(f32(x[i]) * (1.0 / s)) + zp, -128.0, 127.0);
    out[i] = Elem((q - zp) * s);
}
