//! The parameters, bindings and workgroup memory of the normed QKV GEMV
//! (`q4_gemv_qkv_norm.wgsl`) and its int8 form (`q4_gemv_qkv_norm_i8.wgsl`). The including family declares
//! `Elem`, `WG` and `XS`.

struct Params {
    /// Rows of x.
    m: u32,
    /// Input features (a multiple of 32).
    k: u32,
    /// Inputs per scale group (a multiple of 32).
    group_size: u32,
    /// Columns per workgroup: 8, 16 or 32.
    cols: u32,
    /// Output features of Q, K and V.
    n_q: u32,
    n_k: u32,
    n_v: u32,
    /// Bit j: weight j is word-major (16-byte word `w` of row `n` at word
    /// `w * N + n`; see `etwgpu_graph::layout`), else row-major.
    w_layout: u32,
    /// Row lengths of the three scales: N padded.
    pad_q: u32,
    pad_k: u32,
    pad_v: u32,
    /// The first workgroup of K's columns, and of V's.
    wg_k: u32,
    wg_v: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
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
@group(0) @binding(4) var<storage, read> w_q: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> s_q: array<Elem>;
@group(0) @binding(6) var<storage, read> w_k: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read> s_k: array<Elem>;
@group(0) @binding(8) var<storage, read> w_v: array<vec4<u32>>;
@group(0) @binding(9) var<storage, read> s_v: array<Elem>;
@group(0) @binding(10) var<storage, read_write> out_q: array<Elem>;
@group(0) @binding(11) var<storage, read_write> out_k: array<Elem>;
@group(0) @binding(12) var<storage, read_write> out_v: array<Elem>;
@group(0) @binding(13) var<storage, read_write> sum: array<vec4<Elem>>;

/// The normed rows of the input.
var<workgroup> x: array<vec4<f32>, XS>;
/// Per invocation, its slice's sums for the four rows.
var<workgroup> partial: array<vec4<f32>, WG>;
