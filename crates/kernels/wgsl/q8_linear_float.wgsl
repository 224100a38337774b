//! `et_vk.linear_q8ta_q8csw`: int8 activations `x [M, K]` (per-tensor
//! scale and zero point) times int8 weights `w [N, K]` (symmetric, per
//! output channel), float out (no output quantization):
//! `acc = sum_k x*w - zp_x * sum_k w` in exact int32 (`dot4I8Packed` over
//! words of four), `out = f32(acc) * (s_x * s_w[n]) + bias[n]`. K is a
//! multiple of 4 (the exporter only fuses such linears), so rows are whole
//! words. One invocation writes one output.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 64).
override WG: u32 = 64u;

struct Params {
    m: u32,
    n: u32,
    /// Words per row of x and of w (K / 4).
    k_words: u32,
    has_bias: u32,
    in_zero_point: i32,
    in_scale: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> w_scales: array<Elem>;
@group(0) @binding(4) var<storage, read> bias: array<Elem>;
@group(0) @binding(5) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = gid.x + gid.y * nwg.x * WG;
    if o >= p.m * p.n {
        return;
    }
    let row = o / p.n;
    let col = o % p.n;
    var acc = 0i;
    var w_sum = 0i;
    for (var kw = 0u; kw < p.k_words; kw++) {
        let ww = w[col * p.k_words + kw];
        acc += dot4I8Packed(x[row * p.k_words + kw], ww);
        w_sum += dot4I8Packed(ww, 0x01010101u);
    }
    var y = f32(acc - p.in_zero_point * w_sum) * (p.in_scale * f32(w_scales[col]));
    if p.has_bias != 0u {
        y += f32(bias[col]);
    }
    out[o] = Elem(y);
}
