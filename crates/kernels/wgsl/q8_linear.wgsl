//! `et_vk.q8ta_linear` / `et_vk.q8ta_linear_gemv`: int8 activations
//! `x [M, K]` (per-tensor scale and zero point) times int8 weights
//! `w [N, K]` (symmetric, per output channel), int8 out:
//! `acc = sum_k x*w - zp_x * sum_k w` in exact int32 (`dot4I8Packed` over
//! words of four), `y = f32(acc) * (s_x * s_w[n]) + bias[n]`, optional
//! relu, then `clamp(round(y / s_out) + zp_out, -128, 127)`. K is a
//! multiple of 4 (the exporter only fuses such linears), so rows are whole
//! words. One invocation writes one output word (four flat outputs).
// variants: f32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 64).
override WG: u32 = 64u;

struct Params {
    m: u32,
    n: u32,
    /// Words per row of x and of w (K / 4).
    k_words: u32,
    has_bias: u32,
    relu: u32,
    in_zero_point: i32,
    out_zero_point: i32,
    in_scale: f32,
    out_inv_scale: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> w_scales: array<Elem>;
@group(0) @binding(4) var<storage, read> bias: array<Elem>;
@group(0) @binding(5) var<storage, read_write> out: array<u32>;

// include: q8_int8.wgsl

/// Output `o` (flat, row-major over `[M, N]`) before requantization.
fn linear_at(o: u32) -> f32 {
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
    if p.relu != 0u {
        y = max(y, 0.0);
    }
    return y;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let word = gid.x + gid.y * nwg.x * WG;
    let numel = p.m * p.n;
    if word * 4u >= numel {
        return;
    }
    var packed = 0u;
    for (var j = 0u; j < 4u; j++) {
        let o = word * 4u + j;
        if o < numel {
            packed |= requant(linear_at(o), p.out_inv_scale, p.out_zero_point, -128, 127) << (8u * j);
        }
    }
    out[word] = packed;
}
