//! The uniform parameters and bindings of the split-K 4-bit GEMMs (the
//! tiled `q4_gemm_splitk.wgsl` and the cooperative-matrix
//! `q4_gemm_coop_splitk.wgsl`, the small tile, and
//! `q4_gemm_coop_large_splitk.wgsl`): one layout, which
//! `etwgpu_kernels::ops::gemm`'s `q4_split_k_steps` writes for all three;
//! the output is the f32 partial sums `gemm_splitk_combine.wgsl` adds.

struct Params {
    /// Rows of x.
    m: u32,
    /// Output features.
    n: u32,
    /// Input features (a multiple of TK).
    k: u32,
    /// Row length of the scales (and bias): N padded.
    n_pad: u32,
    /// Inputs per scale group (a multiple of the kernel's TK).
    group_size: u32,
    /// Workgroups along N.
    tiles_n: u32,
    /// Bit 0: the weights are word-major (16-byte word `w` of row `n` at
    /// word `w * N + n`; see `etwgpu_graph::layout`), else row-major.
    w_layout: u32,
    /// Inputs per split (a multiple of TK).
    k_chunk: u32,
    /// Output tiles (workgroups per split).
    tiles: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> weights: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> scales: array<Elem>;
/// `[splits, M, N]` f32 partial sums (the scratch).
@group(0) @binding(4) var<storage, read_write> partial: array<f32>;
