//! Decode route of the fused `etwgpu.linear_q4gsw_swiglu` (at most
//! `MAX_ROWS` rows of x): with `g` and `u` the 4-bit linears of the gate
//! and up weights (as `q4_gemv.wgsl` computes them),
//! `out[m, n] = g * sigmoid(g) * u`.
//!
//! Laid out as `q4_gemv.wgsl` (columns across adjacent invocations, K
//! slices interleaved by 16-byte words, x read once per `cols` columns),
//! with the gate and up words of a column read by the same invocation;
//! each weight byte is read once. Accumulation is f32.
//!
//! Bounds: `partial` and `partial_up` are indexed by `lid` and by `lid +
//! stride * cols` with `slice < stride <= slices / 2`, below `WG` as `cols`
//! divides `WG` (8, 16 or 32: `q4_gemv_cols` in `ops/quant.rs`); the
//! vectors of row sums by `r < m <= MAX_ROWS` (`q4_fast_dispatch` routes
//! only `M <= 4` here).
// variants: f32 f16
// bounds: host-checked

alias Elem = f32;

/// Invocations per workgroup.
const WG: u32 = 256u;
/// Most rows of x (the host routes larger M to `q4_gemm.wgsl`).
const MAX_ROWS: u32 = 4u;

struct Params {
    /// Rows of x.
    m: u32,
    /// Output features.
    n: u32,
    /// Input features (a multiple of 32).
    k: u32,
    /// Row length of the scales: N padded.
    n_pad: u32,
    /// Inputs per scale group (a multiple of 32).
    group_size: u32,
    /// Columns per workgroup: 8, 16 or 32.
    cols: u32,
    /// Bit 0: `w_gate` is word-major (16-byte word `w` of row `n` at word
    /// `w * N + n`; see `etwgpu_graph::layout`), bit 1: `w_up`; else
    /// row-major.
    w_layout: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> w_gate: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> s_gate: array<Elem>;
@group(0) @binding(4) var<storage, read> w_up: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> s_up: array<Elem>;
@group(0) @binding(6) var<storage, read_write> out: array<Elem>;

/// Per invocation, its slice's gate and up sums for the four rows.
var<workgroup> partial: array<vec4<f32>, WG>;
var<workgroup> partial_up: array<vec4<f32>, WG>;

// include: q4_dot.wgsl

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let cols = p.cols;
    let c = lid % cols;
    let slice = lid / cols;
    let slices = WG / cols;
    let target_col = (wid.y * groups.x + wid.x) * cols + c;
    // Columns past N compute the last column and store nothing.
    let col = min(target_col, p.n - 1u);
    let words = p.k / 32u;
    let x_row = p.k / 4u;
    // Word `w` of this column at `at.x + w * at.y` (gate, up).
    let at_g = column_words(col, words, p.n, (p.w_layout & 1u) != 0u);
    let at_u = column_words(col, words, p.n, (p.w_layout & 2u) != 0u);
    var acc = vec4<f32>();
    var acc_up = vec4<f32>();
    for (var w = slice; w < words; w += slices) {
        let qg = w_gate[at_g.x + w * at_g.y];
        let qu = w_up[at_u.x + w * at_u.y];
        let at = (w * 32u / p.group_size) * p.n_pad + col;
        let sg = f32(s_gate[at]);
        let su = f32(s_up[at]);
        acc = rows4(acc, qg, w * 8u, x_row, p.m, sg);
        acc_up = rows4(acc_up, qu, w * 8u, x_row, p.m, su);
    }
    partial[lid] = acc;
    partial_up[lid] = acc_up;
    workgroupBarrier();
    for (var stride = slices / 2u; stride > 0u; stride /= 2u) {
        if slice < stride {
            partial[lid] += partial[lid + stride * cols];
            partial_up[lid] += partial_up[lid + stride * cols];
        }
        workgroupBarrier();
    }
    if slice == 0u && target_col < p.n {
        let g = partial[lid];
        let u = partial_up[lid];
        for (var r = 0u; r < p.m; r++) {
            out[r * p.n + col] = Elem(g[r] / (1.0 + exp(-g[r])) * u[r]);
        }
    }
}
