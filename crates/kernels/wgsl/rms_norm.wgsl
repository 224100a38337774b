//! RMS norm over the last `n` elements of each row (`et_vk.rms_norm`):
//! `out = x / sqrt(mean(x^2) + eps) * weight`. One workgroup per row: its
//! invocations sum the squares of a strided share of the row, the partial
//! sums meet in shared memory, then each scales its share. f32 math.
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
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> weight: array<Elem>;
@group(0) @binding(3) var<storage, read_write> out: array<Elem>;

// include: wg_sum.wgsl

/// Element `j` of the row at `base`, 0 past the row (the load is clamped
/// into it, so it is issued unconditionally).
fn at(base: u32, j: u32) -> f32 {
    return select(0.0, f32(x[base + min(j, p.n - 1u)]), j < p.n);
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
        // element; a small norm is latency-bound) and the row stays in
        // registers.
        let v0 = vec4<f32>(at(base, lid), at(base, lid + WG), at(base, lid + 2u * WG), at(base, lid + 3u * WG));
        let v1 = vec4<f32>(at(base, lid + 4u * WG), at(base, lid + 5u * WG), at(base, lid + 6u * WG), at(base, lid + 7u * WG));
        let w0 = vec4<f32>(wt(lid), wt(lid + WG), wt(lid + 2u * WG), wt(lid + 3u * WG));
        let w1 = vec4<f32>(wt(lid + 4u * WG), wt(lid + 5u * WG), wt(lid + 6u * WG), wt(lid + 7u * WG));
        let rstd = inverseSqrt(workgroup_sum(dot(v0, v0) + dot(v1, v1), lid) / f32(p.n) + p.eps);
        let o0 = v0 * rstd * w0;
        let o1 = v1 * rstd * w1;
        for (var t = 0u; t < 8u; t++) {
            let j = lid + t * WG;
            if j < p.n {
                out[base + j] = Elem(select(o1[t % 4u], o0[t % 4u], t < 4u));
            }
        }
        return;
    }
    var sq = 0.0;
    for (var j = lid; j < p.n; j += WG) {
        let v = f32(x[base + j]);
        sq += v * v;
    }
    let rstd = inverseSqrt(workgroup_sum(sq, lid) / f32(p.n) + p.eps);
    for (var j = lid; j < p.n; j += WG) {
        out[base + j] = Elem(f32(x[base + j]) * rstd * f32(weight[j]));
    }
}
