//! The workgroup memory and hooks of the normed streaming float GEMVs
//! (`gemv_qkv_norm_vec4.wgsl`, `gemv_swiglu_norm_vec4.wgsl`) for their
//! bodies (`gemv_qkv_vec4_body.wgsl`, `gemv_swiglu_vec4_body.wgsl`): the
//! normed rows built by `rms_prologue.wgsl` (which the including family
//! also includes, with its `a`, `b`, `norm_w`, `sum` and the `Params`
//! fields it reads) and read from workgroup memory, the norm's scale
//! applied to the sums after the loop. The including family declares `WG`.

/// vec4s of normed input held in workgroup memory: `m * k` at most
/// `4 * XS` (the host checks).
const XS: u32 = 768u;

/// The normed rows of the input (times the norm weight; `rstd` comes
/// after the loop).
var<workgroup> x: array<vec4<f32>, XS>;
/// Per invocation, its sums for the four rows (first its sums of
/// squares, for the norm).
var<workgroup> partial: array<vec4<f32>, WG>;

/// The normed rows into `x` (`rms_prologue.wgsl`).
fn prologue(lid: u32, g: u32) {
    rms_prologue(lid, g);
}

fn x_at(i: u32) -> vec4<f32> {
    return x[i];
}

/// The norm's scale of each row.
fn row_scale(lid: u32) -> vec4<f32> {
    return rms_scale(lid);
}
