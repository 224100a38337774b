//! The merge prologue of the split-KV combine folded into the GEMV that
//! reads the attention's output (the O projection: `q4_gemv_attn.wgsl`,
//! `q4_gemv_attn_i8.wgsl`, `linear_gemv_attn.wgsl`): each workgroup merges
//! the partials of every split (`sdpa_split.wgsl`'s `(m, l)` and
//! unnormalized output per query row, head and split) into the attention's
//! output rows in its workgroup memory, rounded to `Elem` as the combine
//! (`sdpa_split_combine.wgsl`) stores them. The including family declares
//! `Elem`, `WG`, `NEG`, a `Params` `p` with the combine's fields (`seq`,
//! `n_heads`, `head_dim`, `start_pos` and the split plan's), storage
//! `part: array<vec4<f32>>`, workgroup `x: array<vec4<f32>, _>` (at least
//! `seq * n_heads * head_dim / 4`) and `ml: array<vec2<f32>, _>` (at least
//! `seq * n_heads` times the splits), and includes `split_plan.wgsl`.

/// Fills `x` with the attention's output rows merged from the partials.
/// Ends with a barrier, so `x` is ready.
fn merge_prologue(lid: u32) {
    let d4 = p.head_dim / 4u;
    let rows = p.seq * p.n_heads;
    let n_splits = split_plan(p.start_pos + p.seq).x;
    let stride = d4 + 1u;
    // Partial `e = (row, head) * n_splits + split` starts at `e * stride`.
    for (var e = lid; e < rows * n_splits; e += WG) {
        ml[e] = part[e * stride].xy;
    }
    workgroupBarrier();
    for (var r = lid; r < rows; r += WG) {
        let b = r * n_splits;
        var mx = NEG;
        for (var s = 0u; s < n_splits; s++) {
            mx = max(mx, ml[b + s].x);
        }
        var l = 0.0;
        for (var s = 0u; s < n_splits; s++) {
            let w = exp(ml[b + s].x - mx);
            l += ml[b + s].y * w;
            ml[b + s].x = w;
        }
        ml[b].y = l;
    }
    workgroupBarrier();
    for (var j = lid; j < rows * d4; j += WG) {
        let r = j / d4;
        let b = r * n_splits;
        let at = b * stride + 1u + j % d4;
        var acc = vec4<f32>();
        var s = 0u;
        for (; s + 4u <= n_splits; s += 4u) {
            let o0 = part[at + s * stride];
            let o1 = part[at + (s + 1u) * stride];
            let o2 = part[at + (s + 2u) * stride];
            let o3 = part[at + (s + 3u) * stride];
            acc += o0 * ml[b + s].x + o1 * ml[b + s + 1u].x + o2 * ml[b + s + 2u].x + o3 * ml[b + s + 3u].x;
        }
        for (; s < n_splits; s++) {
            acc += part[at + s * stride] * ml[b + s].x;
        }
        x[j] = vec4<f32>(vec4<Elem>(acc / ml[b].y));
    }
    workgroupBarrier();
}
