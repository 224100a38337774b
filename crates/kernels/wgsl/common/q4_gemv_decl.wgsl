//! The parameters and bindings of the plain 4-bit GEMV (`q4_gemv.wgsl`)
//! and its int8 form (`q4_gemv_i8.wgsl`, which takes one row). The
//! including family declares `Elem`.

struct Params {
    /// Rows of x.
    m: u32,
    /// Output features.
    n: u32,
    /// Input features (a multiple of 32).
    k: u32,
    /// Row length of the scales (and bias): N padded.
    n_pad: u32,
    /// Inputs per scale group (a multiple of 32).
    group_size: u32,
    has_bias: u32,
    /// Columns per workgroup: 8, 16 or 32.
    cols: u32,
    /// Bit 0: the weights are word-major (16-byte word `w` of row `n` at
    /// word `w * N + n`; see `etwgpu_graph::layout`), else row-major.
    w_layout: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> weights: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> scales: array<Elem>;
@group(0) @binding(4) var<storage, read> bias: array<Elem>;
@group(0) @binding(5) var<storage, read_write> out: array<Elem>;
