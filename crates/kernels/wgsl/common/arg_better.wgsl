//! The order of an argmax or argmin, shared by `arg_reduce.wgsl` and
//! `argmax_rows.wgsl` so both give PyTorch's index: ties go to the smaller
//! index and a NaN wins over any number (the first NaN when there are
//! several), whatever order the partials combine in.

fn is_nan(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

/// Whether (b, ib) should replace (a, ia); `op` 0 is argmax, 1 argmin.
fn better(op: u32, a: f32, ia: u32, b: f32, ib: u32) -> bool {
    let an = is_nan(a);
    let bn = is_nan(b);
    if an || bn {
        return bn && (!an || ib < ia);
    }
    if a == b {
        return ib < ia;
    }
    if op == 0u {
        return b > a;
    }
    return b < a;
}
