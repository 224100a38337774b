//! The biases and outputs of the three float projections of one input
//! (`linear_qkv.wgsl`, `gemv_qkv.wgsl`, `gemv_qkv_vec4.wgsl`): projection
//! `j`'s bias `b<j>` (when bit `j` of `p.has_bias` is set) and its output
//! `out<j>`, picked by a switch. The kernel that includes this declares
//! them, `p` and `Elem`.

fn bias(j: u32, n: u32) -> f32 {
    if (p.has_bias & (1u << j)) == 0u {
        return 0.0;
    }
    switch j {
        case 0u: { return f32(b0[n]); }
        case 1u: { return f32(b1[n]); }
        default: { return f32(b2[n]); }
    }
}

fn store(j: u32, idx: u32, v: f32) {
    switch j {
        case 0u: { out0[idx] = Elem(v); }
        case 1u: { out1[idx] = Elem(v); }
        default: { out2[idx] = Elem(v); }
    }
}
