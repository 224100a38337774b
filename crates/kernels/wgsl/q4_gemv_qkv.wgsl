//! Decode route of `etwgpu.linear_q4gsw_qkv` (at most `MAX_ROWS` rows of
//! x): the three 4-bit projections Q, K and V of one input in one
//! dispatch, each as `q4_gemv.wgsl` computes one linear (no bias):
//! `out_j[m, n] = sum_k x[m, k] * (nibble_j(n, k) - 8) * scales_j[k / group, n]`.
//!
//! The workgroups are taken in order by Q's columns, then K's, then V's
//! (`cols` adjacent columns each; the host gives every projection whole
//! workgroups), so which projection a workgroup computes is uniform across
//! it and the branches that pick its buffers do not diverge. Each weight
//! is row-major or word-major (bit j of `w_layout`). One dispatch instead
//! of three: on a GPU, a small dispatch costs a few microseconds whatever
//! it computes.
//!
//! Bounds: `partial` is indexed by `lid` and by `lid + st * cols` with
//! `slice < st <= slices / 2`, below `WG` as `cols` divides `WG` (8, 16 or
//! 32: `q4_gemv_cols` in `ops/quant.rs`); the vector of row sums by `r < m
//! <= MAX_ROWS` (`q4_qkv_dispatch` routes only `0 < M <= 4` here).
// variants: f32 f16
// bounds: host-checked

alias Elem = f32;

/// Invocations per workgroup.
const WG: u32 = 256u;
/// Most rows of x (the host routes larger M to three GEMMs).
const MAX_ROWS: u32 = 4u;

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
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> w_q: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> s_q: array<Elem>;
@group(0) @binding(4) var<storage, read> w_k: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> s_k: array<Elem>;
@group(0) @binding(6) var<storage, read> w_v: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read> s_v: array<Elem>;
@group(0) @binding(8) var<storage, read_write> out_q: array<Elem>;
@group(0) @binding(9) var<storage, read_write> out_k: array<Elem>;
@group(0) @binding(10) var<storage, read_write> out_v: array<Elem>;

/// Per invocation, its slice's sums for the four rows.
var<workgroup> partial: array<vec4<f32>, WG>;

// include: q4_dot.wgsl
// include: q4_gemv_qkv_pick.wgsl

/// `x` is read from storage: nothing to prepare.
fn prologue(lid: u32, g: u32) {}

/// Word `w`'s contribution to the (up to four) rows' sums.
fn word_dot(acc: vec4<f32>, q: vec4<u32>, w: u32, s: f32) -> vec4<f32> {
    return rows4(acc, q, w * 8u, p.k / 4u, p.m, s);
}

/// No norm: the sums as they are.
fn row_scale(lid: u32) -> vec4<f32> {
    return vec4<f32>(1.0);
}

// include: q4_gemv_qkv_body.wgsl
