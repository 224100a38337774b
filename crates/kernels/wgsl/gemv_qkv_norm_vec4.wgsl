//! Decode route of `etwgpu.rms_norm_linear_qkv` (float weights, at most
//! `MAX_ROWS` rows of x, K a multiple of 4): the RMS norm of `a + b` (or
//! of `a`) and the three linears Q, K and V that read it, one dispatch.
//! Each workgroup computes the normed rows itself into workgroup memory
//! (`rms_prologue.wgsl`) and workgroup 0 stores the residual sum; then,
//! as `gemv_qkv_vec4.wgsl`,
//! `out_j[m, n] = rstd[m] * sum_k v[m, k] * norm_w[k] * w_j[n, k] + b_j[n]`
//! with `v` the (summed) row and `rstd` its norm's scale, applied to the
//! sums once the loop is done. One dispatch instead of two: on a GPU, a
//! small dispatch costs a few microseconds whatever it computes.
//!
//! Bounds: `x` by `j < m * k / 4 <= XS` in the prologue and by
//! `r * k / 4 + i < m * k / 4` in the dots (`i < k / 4`, `r < m`), the
//! host taking this route only for `m * k <= Q4_GEMV_NORM_MAX_ELEMS = 4 *
//! XS` (`ops/fused/norm_linears.rs`) and `m <= MAX_ROWS`.
// variants: f32 f16

alias Elem = f32;

// include: gemv_lanes.wgsl

struct Params {
    m: u32,
    /// Input features (a multiple of 4).
    k: u32,
    n0: u32,
    n1: u32,
    n2: u32,
    /// Bit j set: projection j has a bias.
    has_bias: u32,
    /// Output columns a workgroup (8, 4 or 2).
    cols: u32,
    _pad1: u32,
    /// The norm's epsilon.
    norm_eps: f32,
    /// 1: normalize `a + b` and store it in `sum`; 0: normalize `a`.
    norm_add: u32,
    _pn0: u32,
    _pn1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<Elem>>;
@group(0) @binding(3) var<storage, read> norm_w: array<vec4<Elem>>;
@group(0) @binding(4) var<storage, read> w0: array<vec4<Elem>>;
@group(0) @binding(5) var<storage, read> w1: array<vec4<Elem>>;
@group(0) @binding(6) var<storage, read> w2: array<vec4<Elem>>;
@group(0) @binding(7) var<storage, read> b0: array<Elem>;
@group(0) @binding(8) var<storage, read> b1: array<Elem>;
@group(0) @binding(9) var<storage, read> b2: array<Elem>;
@group(0) @binding(10) var<storage, read_write> out0: array<Elem>;
@group(0) @binding(11) var<storage, read_write> out1: array<Elem>;
@group(0) @binding(12) var<storage, read_write> out2: array<Elem>;
@group(0) @binding(13) var<storage, read_write> sum: array<vec4<Elem>>;

// include: qkv_out.wgsl
// include: rms_prologue.wgsl
// include: gemv_norm_hooks.wgsl

// include: gemv_qkv_vec4_body.wgsl
