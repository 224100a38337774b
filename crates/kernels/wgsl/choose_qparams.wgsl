//! Per-row asymmetric int8 quantization parameters
//! (`torchao.choose_qparams_affine`, ASYMMETRIC, blocks `[1, ..., 1, K]`):
//! `scale = max((max(x, 0) - min(x, 0)) / (qmax - qmin), eps)`,
//! `zero_point = clamp(qmin - round(min(x, 0) / scale), qmin, qmax)`.
//!
//! Zero points are int8, four to a `u32` word, so one invocation handles
//! the four rows of one word. The scale is computed in f32; the zero point
//! is derived from the scale as stored (`Elem`), as the linear reads it.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 64).
override WG: u32 = 64u;

struct Params {
    rows: u32,
    /// Row length.
    k: u32,
    quant_min: i32,
    quant_max: i32,
    eps: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read_write> scale: array<Elem>;
@group(0) @binding(3) var<storage, read_write> zero_point: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let word = gid.x + gid.y * nwg.x * WG;
    if word * 4u >= p.rows {
        return;
    }
    var packed = 0u;
    for (var j = 0u; j < 4u; j++) {
        let r = word * 4u + j;
        if r >= p.rows {
            break;
        }
        var lo = 0.0;
        var hi = 0.0;
        for (var kk = 0u; kk < p.k; kk++) {
            let v = f32(x[r * p.k + kk]);
            lo = min(lo, v);
            hi = max(hi, v);
        }
        let s = f32(Elem(max((hi - lo) / f32(p.quant_max - p.quant_min), p.eps)));
        let zp = clamp(p.quant_min - i32(round(lo / s)), p.quant_min, p.quant_max);
        scale[r] = Elem(s);
        packed |= (u32(zp) & 0xffu) << (j * 8u);
    }
    zero_point[word] = packed;
}
