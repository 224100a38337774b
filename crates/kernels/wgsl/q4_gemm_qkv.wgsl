//! Prefill route of the fused `etwgpu.linear_q4gsw_qkv` (many rows of x):
//! the three 4-bit projections Q, K and V of one input in one dispatch,
//! each tile as `q4_gemm.wgsl` computes one linear (no bias):
//! `out_j[m, n] = sum_k x[m, k] * (nibble_j(n, k) - 8) * scales_j[k / group, n]`.
//!
//! The tiles along N are Q's, then K's, then V's (each projection whole
//! tiles), so which projection a workgroup computes is uniform across it
//! and the branches that pick its weights, scales and output do not
//! diverge; the three projections run side by side instead of as three
//! dispatches with a barrier between each. Each weight is row-major or
//! word-major (bit j of `w_layout`). A workgroup computes a `TILE x TILE`
//! block of one projection's output; each of its 256 invocations owns a
//! 4 x 4 sub-block in registers. K advances `TK` inputs at a time through
//! shared memory (both tiles k-major). The host routes here only when
//! `group % TK == 0` and `K % TK == 0`. Accumulation is f32.
//!
//! Bounds: every index into `xs`, `ws`, the accumulators and the vectors
//! is a function of `lid < 256` and of constant loop counters (`e < 4`,
//! `kk < TK`, `i, j < 4`); no uniform reaches them.
// variants: f32 f16
// bounds: host-checked

alias Elem = f32;

/// Output tile edge (rows and columns per workgroup).
const TILE: u32 = 64u;
/// Inputs per step along K.
const TK: u32 = 16u;

struct Params {
    /// Rows of x.
    m: u32,
    /// Input features (a multiple of TK).
    k: u32,
    /// Inputs per scale group (a multiple of TK).
    group_size: u32,
    /// Workgroups along N: Q's tiles, then K's, then V's.
    tiles_n: u32,
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
    /// The first tile along N of K's columns, and of V's.
    first_k: u32,
    first_v: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> w_q: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> s_q: array<Elem>;
@group(0) @binding(4) var<storage, read> w_k: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read> s_k: array<Elem>;
@group(0) @binding(6) var<storage, read> w_v: array<vec2<u32>>;
@group(0) @binding(7) var<storage, read> s_v: array<Elem>;
@group(0) @binding(8) var<storage, read_write> out_q: array<Elem>;
@group(0) @binding(9) var<storage, read_write> out_k: array<Elem>;
@group(0) @binding(10) var<storage, read_write> out_v: array<Elem>;

/// x tile, k-major: `xs[k * 16 + i]` holds rows `4i .. 4i + 4` at input k.
var<workgroup> xs: array<vec4<f32>, 256>;
/// Weight tile, k-major: `ws[k * 16 + j]` holds columns `4j .. 4j + 4`.
var<workgroup> ws: array<vec4<f32>, 256>;

/// The projection a workgroup computes (uniform across it): `j` (0 Q,
/// 1 K, 2 V), its first column, output features, scale row length and
/// weight layout.
struct Proj {
    j: u32,
    n0: u32,
    n: u32,
    n_pad: u32,
    word_major: bool,
}

/// The projection of tile `tn` along N.
fn proj(tn: u32) -> Proj {
    if tn >= p.first_v {
        return Proj(2u, (tn - p.first_v) * TILE, p.n_v, p.pad_v, (p.w_layout & 4u) != 0u);
    }
    if tn >= p.first_k {
        return Proj(1u, (tn - p.first_k) * TILE, p.n_k, p.pad_k, (p.w_layout & 2u) != 0u);
    }
    return Proj(0u, tn * TILE, p.n_q, p.pad_q, (p.w_layout & 1u) != 0u);
}

/// 16 nibbles (an 8-byte word) and their scale.
struct Nibbles {
    word: vec2<u32>,
    scale: f32,
}

/// The 8-byte word of projection `pr`'s column `col` at input `k` (a
/// multiple of 16), as `q4_word8.wgsl`'s `w8` for a projection's N, and
/// the scale of its group.
fn word_scale(pr: Proj, col: u32, k: u32) -> Nibbles {
    var at = col * (p.k / 16u) + k / 16u;
    if pr.word_major {
        at = ((k / 32u) * pr.n + col) * 2u + (k / 16u) % 2u;
    }
    let s = (k / p.group_size) * pr.n_pad + col;
    if pr.j == 0u {
        return Nibbles(w_q[at], f32(s_q[s]));
    }
    if pr.j == 1u {
        return Nibbles(w_k[at], f32(s_k[s]));
    }
    return Nibbles(w_v[at], f32(s_v[s]));
}

/// Stores `v` at element `at` of projection `pr`'s output.
fn store(pr: Proj, at: u32, v: f32) {
    if pr.j == 0u {
        out_q[at] = Elem(v);
    } else if pr.j == 1u {
        out_k[at] = Elem(v);
    } else {
        out_v[at] = Elem(v);
    }
}

@compute @workgroup_size(256)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let tile = wid.y * groups.x + wid.x;
    let m0 = (tile / p.tiles_n) * TILE;
    let pr = proj(tile % p.tiles_n);
    let n0 = pr.n0;
    // This invocation's 4 x 4 sub-block.
    let ti = lid / 16u;
    let tj = lid % 16u;
    // Loading: x rows `m0 + lid / 4`, inputs `(lid % 4) * 4 ..`; weight
    // columns `n0 + lid / 2`, inputs `(lid % 2) * 8 ..` (lid < 128).
    let xr = lid / 4u;
    let xk = (lid % 4u) * 4u;
    let wc = lid / 2u;
    let wk = (lid % 2u) * 8u;
    var acc: array<vec4<f32>, 4>;
    for (var k0 = 0u; k0 < p.k; k0 += TK) {
        var xv = vec4<f32>(0.0);
        if m0 + xr < p.m {
            xv = vec4<f32>(x[((m0 + xr) * p.k + k0 + xk) / 4u]);
        }
        for (var e = 0u; e < 4u; e++) {
            xs[(xk + e) * 16u + xr / 4u][xr % 4u] = xv[e];
        }
        if lid < 128u {
            let col = n0 + wc;
            var lo = vec4<f32>(0.0);
            var hi = vec4<f32>(0.0);
            if col < pr.n {
                // 8 nibbles: inputs k0 + wk .. k0 + wk + 8.
                let ws8 = word_scale(pr, col, k0);
                let word = ws8.word[lid % 2u];
                let s = ws8.scale;
                lo = (vec4<f32>(vec4<u32>(word, word >> 4u, word >> 8u, word >> 12u) & vec4<u32>(15u)) - 8.0) * s;
                let w2 = word >> 16u;
                hi = (vec4<f32>(vec4<u32>(w2, w2 >> 4u, w2 >> 8u, w2 >> 12u) & vec4<u32>(15u)) - 8.0) * s;
            }
            for (var e = 0u; e < 4u; e++) {
                ws[(wk + e) * 16u + wc / 4u][wc % 4u] = lo[e];
                ws[(wk + 4u + e) * 16u + wc / 4u][wc % 4u] = hi[e];
            }
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TK; kk++) {
            let a = xs[kk * 16u + ti];
            let b = ws[kk * 16u + tj];
            acc[0] += a.x * b;
            acc[1] += a.y * b;
            acc[2] += a.z * b;
            acc[3] += a.w * b;
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let row = m0 + ti * 4u + i;
        if row >= p.m {
            continue;
        }
        for (var j = 0u; j < 4u; j++) {
            let col = n0 + tj * 4u + j;
            if col < pr.n {
                store(pr, row * pr.n + col, acc[i][j]);
            }
        }
    }
}
