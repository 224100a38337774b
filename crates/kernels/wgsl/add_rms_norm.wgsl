//! `etwgpu.add_rms_norm`, a residual add and the RMS norm that reads it
//! (fused by the graph's fusion pass): per row of `n`,
//! `sum = a + b` (stored, as the add would), then
//! `out = sum / sqrt(mean(sum^2) + eps) * weight` from the stored sum. One
//! workgroup per row, as `rms_norm.wgsl`; f32 math.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup; the reduction assumes a power of two.
const WG: u32 = 256u;

struct Params {
    rows: u32,
    n: u32,
    eps: f32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<Elem>;
@group(0) @binding(2) var<storage, read> b: array<Elem>;
@group(0) @binding(3) var<storage, read> weight: array<Elem>;
@group(0) @binding(4) var<storage, read_write> sum: array<Elem>;
@group(0) @binding(5) var<storage, read_write> out: array<Elem>;

// include: wg_sum.wgsl

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let r = wid.y * groups.x + wid.x;
    // Workgroup-uniform: either every invocation of a group returns or none.
    if r >= p.rows {
        return;
    }
    let base = r * p.n;
    var sq = 0.0;
    for (var j = lid; j < p.n; j += WG) {
        // Rounded to the tensor's dtype first, as the add's output is.
        let s = Elem(f32(a[base + j]) + f32(b[base + j]));
        sum[base + j] = s;
        let v = f32(s);
        sq += v * v;
    }
    let rstd = inverseSqrt(workgroup_sum(sq, lid) / f32(p.n) + p.eps);
    // Each invocation reads back only the elements it wrote.
    for (var j = lid; j < p.n; j += WG) {
        out[base + j] = Elem(f32(sum[base + j]) * rstd * f32(weight[j]));
    }
}
