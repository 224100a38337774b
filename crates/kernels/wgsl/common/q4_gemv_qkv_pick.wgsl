//! Which projection a workgroup of the one-dispatch QKV GEMVs computes,
//! and that projection's weight words, scales and outputs
//! (`q4_gemv_qkv.wgsl`, `q4_gemv_qkv_norm.wgsl`, `q4_gemv_qkv_norm_i8.wgsl`).
//! The including family declares a `p` with `n_q`, `n_k`, `n_v`, `pad_q`,
//! `pad_k`, `pad_v`, `wg_k` and `wg_v`, and the bindings `w_q`, `s_q`,
//! `w_k`, `s_k`, `w_v`, `s_v`, `out_q`, `out_k` and `out_v`.

/// Word `i` of projection `j`'s weight.
fn weight(j: u32, i: u32) -> vec4<u32> {
    if j == 0u {
        return w_q[i];
    }
    if j == 1u {
        return w_k[i];
    }
    return w_v[i];
}

/// Scale `i` of projection `j`.
fn scale(j: u32, i: u32) -> f32 {
    if j == 0u {
        return f32(s_q[i]);
    }
    if j == 1u {
        return f32(s_k[i]);
    }
    return f32(s_v[i]);
}

fn store(j: u32, i: u32, v: f32) {
    if j == 0u {
        out_q[i] = Elem(v);
    } else if j == 1u {
        out_k[i] = Elem(v);
    } else {
        out_v[i] = Elem(v);
    }
}

/// Which projection workgroup `g` computes, from the uniforms (so uniform
/// across the workgroup): `(j, its first workgroup, N, padded N)`, the
/// workgroups taken by Q's columns, then K's, then V's.
fn projection(g: u32) -> vec4<u32> {
    if g >= p.wg_v {
        return vec4<u32>(2u, p.wg_v, p.n_v, p.pad_v);
    }
    if g >= p.wg_k {
        return vec4<u32>(1u, p.wg_k, p.n_k, p.pad_k);
    }
    return vec4<u32>(0u, 0u, p.n_q, p.pad_q);
}
