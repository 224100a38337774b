//! `etwgpu.add_select_rms_norm`, a residual add, the rows of one index
//! along a dim of its sum and their RMS norm (fused by the graph's fusion
//! pass: a decoder's last residual add, its last token and the final norm):
//! per output row `r` of `n`, with source row `s = row0 + r`,
//! `v = a[s] + b[s]` (rounded to the dtype, as the add's output is), then
//! `out[r] = v / sqrt(mean(v^2) + eps) * weight`. Only the selected rows of
//! `a` and `b` are read and only the normed rows written: the sum and the
//! selected rows are never stored. One workgroup per output row, as
//! `add_rms_norm.wgsl`; f32 math.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup; the reduction assumes a power of two.
const WG: u32 = 256u;

struct Params {
    /// Output rows.
    rows: u32,
    /// Elements a row.
    n: u32,
    eps: f32,
    /// The source row (of `a` and `b`) of output row 0.
    row0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<Elem>;
@group(0) @binding(2) var<storage, read> b: array<Elem>;
@group(0) @binding(3) var<storage, read> weight: array<Elem>;
@group(0) @binding(4) var<storage, read_write> out: array<Elem>;

// include: wg_sum.wgsl

/// `a + b` at element `j` of the row at `base`, rounded to the dtype, 0
/// past the row (the loads are clamped into it, so they are issued
/// unconditionally).
fn add_at(base: u32, j: u32) -> f32 {
    let i = base + min(j, p.n - 1u);
    return select(0.0, f32(Elem(f32(a[i]) + f32(b[i]))), j < p.n);
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
    let src = (p.row0 + r) * p.n;
    let dst = r * p.n;
    if p.n <= 8u * WG {
        // Rows of up to 8 * WG elements: every load this invocation makes is
        // issued before any is used and the row stays in registers.
        let v0 = vec4<f32>(add_at(src, lid), add_at(src, lid + WG), add_at(src, lid + 2u * WG), add_at(src, lid + 3u * WG));
        let v1 = vec4<f32>(
            add_at(src, lid + 4u * WG), add_at(src, lid + 5u * WG), add_at(src, lid + 6u * WG), add_at(src, lid + 7u * WG));
        let w0 = vec4<f32>(wt(lid), wt(lid + WG), wt(lid + 2u * WG), wt(lid + 3u * WG));
        let w1 = vec4<f32>(wt(lid + 4u * WG), wt(lid + 5u * WG), wt(lid + 6u * WG), wt(lid + 7u * WG));
        let rstd = inverseSqrt(workgroup_sum(dot(v0, v0) + dot(v1, v1), lid) / f32(p.n) + p.eps);
        let o0 = v0 * rstd * w0;
        let o1 = v1 * rstd * w1;
        for (var t = 0u; t < 8u; t++) {
            let j = lid + t * WG;
            if j < p.n {
                out[dst + j] = Elem(select(o1[t % 4u], o0[t % 4u], t < 4u));
            }
        }
        return;
    }
    var sq = 0.0;
    for (var j = lid; j < p.n; j += WG) {
        let v = add_at(src, j);
        sq += v * v;
    }
    let rstd = inverseSqrt(workgroup_sum(sq, lid) / f32(p.n) + p.eps);
    // The sum is not stored: each invocation adds its elements again.
    for (var j = lid; j < p.n; j += WG) {
        out[dst + j] = Elem(add_at(src, j) * rstd * f32(weight[j]));
    }
}
