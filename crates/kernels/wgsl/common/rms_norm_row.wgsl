//! One row's RMS norm in one workgroup, shared by `rms_norm.wgsl` and
//! `add_select_rms_norm.wgsl`: [`norm_row`] reads the row through the
//! including kernel's `fn row_at(base: u32, j: u32) -> f32` (element `j`
//! of the row starting at `base`, 0 past the row, its load clamped into
//! the row so that it is issued unconditionally) and writes
//! `v / sqrt(mean(v^2) + eps) * weight` to `out`. The including kernel
//! declares `Elem`, `WG`, a `p` with `n` and `eps`, the bindings `weight`
//! and `out`, and includes `wg_sum.wgsl`.

/// Weight `j`, 0 past the row.
fn wt(j: u32) -> f32 {
    return select(0.0, f32(weight[min(j, p.n - 1u)]), j < p.n);
}

/// The normed row from `src` written at `dst`. Every invocation calls it
/// in uniform control flow.
fn norm_row(lid: u32, src: u32, dst: u32) {
    if p.n <= 8u * WG {
        // Rows of up to 8 * WG elements: every load this invocation makes is
        // issued before any is used (one memory latency, not one per
        // element; a small norm is latency-bound) and the row stays in
        // registers.
        let v0 = vec4<f32>(row_at(src, lid), row_at(src, lid + WG), row_at(src, lid + 2u * WG), row_at(src, lid + 3u * WG));
        let v1 = vec4<f32>(
            row_at(src, lid + 4u * WG), row_at(src, lid + 5u * WG), row_at(src, lid + 6u * WG), row_at(src, lid + 7u * WG));
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
        let v = row_at(src, j);
        sq += v * v;
    }
    let rstd = inverseSqrt(workgroup_sum(sq, lid) / f32(p.n) + p.eps);
    // The row is read again rather than held: it may be long.
    for (var j = lid; j < p.n; j += WG) {
        out[dst + j] = Elem(row_at(src, j) * rstd * f32(weight[j]));
    }
}
