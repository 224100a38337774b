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

/// `a + b` at element `j` of the row at `base`, 0 past the row (the loads
/// are clamped into it, so they are issued unconditionally).
fn add_at(base: u32, j: u32) -> f32 {
    let i = base + min(j, p.n - 1u);
    return select(0.0, f32(a[i]) + f32(b[i]), j < p.n);
}

/// Weight `j`, 0 past the row.
fn wt(j: u32) -> f32 {
    return select(0.0, f32(weight[min(j, p.n - 1u)]), j < p.n);
}

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
    if p.n <= 8u * WG {
        // Rows of up to 8 * WG elements: every load this invocation makes is
        // issued before any is used (one memory latency, not one per
        // element; a small norm is latency-bound) and the sum stays in
        // registers. The sum is rounded to the tensor's dtype first, as the
        // add's output is.
        let s0 = vec4<f32>(add_at(base, lid), add_at(base, lid + WG), add_at(base, lid + 2u * WG), add_at(base, lid + 3u * WG));
        let s1 = vec4<f32>(
            add_at(base, lid + 4u * WG), add_at(base, lid + 5u * WG), add_at(base, lid + 6u * WG), add_at(base, lid + 7u * WG));
        let v0 = vec4<f32>(vec4<Elem>(s0));
        let v1 = vec4<f32>(vec4<Elem>(s1));
        let w0 = vec4<f32>(wt(lid), wt(lid + WG), wt(lid + 2u * WG), wt(lid + 3u * WG));
        let w1 = vec4<f32>(wt(lid + 4u * WG), wt(lid + 5u * WG), wt(lid + 6u * WG), wt(lid + 7u * WG));
        let rstd = inverseSqrt(workgroup_sum(dot(v0, v0) + dot(v1, v1), lid) / f32(p.n) + p.eps);
        let o0 = v0 * rstd * w0;
        let o1 = v1 * rstd * w1;
        for (var t = 0u; t < 8u; t++) {
            let j = lid + t * WG;
            if j < p.n {
                let lo = t < 4u;
                sum[base + j] = Elem(select(v1[t % 4u], v0[t % 4u], lo));
                out[base + j] = Elem(select(o1[t % 4u], o0[t % 4u], lo));
            }
        }
        return;
    }
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
