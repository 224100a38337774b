//! Prefill route of the fused `etwgpu.linear_q4gsw_swiglu` (many rows of
//! x): with `g` and `u` the 4-bit linears of the gate and up weights (as
//! `q4_gemm.wgsl` computes them), `out[m, n] = g * sigmoid(g) * u`.
//!
//! As `q4_gemm.wgsl`, with a second weight tile (the up weights) and a
//! second 4 x 4 block of accumulators per invocation.
//!
//! A workgroup computes a `TILE x TILE` block of the output; each of its
//! 256 invocations owns a 4 x 4 sub-block in registers. K advances `TK`
//! inputs at a time: the x tile and the dequantized weight tile are staged
//! in shared memory (both k-major, so the inner loop reads one `vec4` of
//! rows and one of columns per k). The host routes here only when
//! `group % TK == 0` and `K % TK == 0`, so one scale covers a column's
//! slice of a tile. Accumulation is f32.
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
    /// Output features.
    n: u32,
    /// Input features (a multiple of TK).
    k: u32,
    /// Row length of the scales: N padded.
    n_pad: u32,
    /// Inputs per scale group (a multiple of TK).
    group_size: u32,
    /// Workgroups along N.
    tiles_n: u32,
    /// Bit 0: `w_gate` is word-major (16-byte word `w` of row `n` at word
    /// `w * N + n`; see `etwgpu_graph::layout`), bit 1: `w_up`; else
    /// row-major.
    w_layout: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> w_gate: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> s_gate: array<Elem>;
@group(0) @binding(4) var<storage, read> w_up: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read> s_up: array<Elem>;
@group(0) @binding(6) var<storage, read_write> out: array<Elem>;

/// x tile, k-major: `xs[k * 16 + i]` holds rows `4i .. 4i + 4` at input k.
var<workgroup> xs: array<vec4<f32>, 256>;
/// Weight tiles, k-major: `ws[k * 16 + j]` holds columns `4j .. 4j + 4`.
var<workgroup> ws: array<vec4<f32>, 256>;
var<workgroup> ws_up: array<vec4<f32>, 256>;

// include: q4_word8.wgsl

@compute @workgroup_size(256)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let tile = wid.y * groups.x + wid.x;
    let m0 = (tile / p.tiles_n) * TILE;
    let n0 = (tile % p.tiles_n) * TILE;
    // This invocation's 4 x 4 sub-block.
    let ti = lid / 16u;
    let tj = lid % 16u;
    // Loading: x rows `m0 + lid / 4`, inputs `(lid % 4) * 4 ..`; weight
    // columns `n0 + (lid % 128) / 2`, inputs `(lid % 2) * 8 ..`, of the
    // gate (lid < 128) or the up weights.
    let xr = lid / 4u;
    let xk = (lid % 4u) * 4u;
    let wc = (lid % 128u) / 2u;
    let wk = (lid % 2u) * 8u;
    let words = p.k / 16u;
    var acc: array<vec4<f32>, 4>;
    var acc_up: array<vec4<f32>, 4>;
    for (var k0 = 0u; k0 < p.k; k0 += TK) {
        var xv = vec4<f32>(0.0);
        if m0 + xr < p.m {
            xv = vec4<f32>(x[((m0 + xr) * p.k + k0 + xk) / 4u]);
        }
        for (var e = 0u; e < 4u; e++) {
            xs[(xk + e) * 16u + xr / 4u][xr % 4u] = xv[e];
        }
        let col = n0 + wc;
        var lo = vec4<f32>(0.0);
        var hi = vec4<f32>(0.0);
        if col < p.n {
            // 8 nibbles: inputs k0 + wk .. k0 + wk + 8.
            let at = w8(col, words, k0, (p.w_layout & select(1u, 2u, lid >= 128u)) != 0u);
            let s_at = (k0 / p.group_size) * p.n_pad + col;
            var word: u32;
            var s: f32;
            if lid < 128u {
                word = w_gate[at][lid % 2u];
                s = f32(s_gate[s_at]);
            } else {
                word = w_up[at][lid % 2u];
                s = f32(s_up[s_at]);
            }
            lo = (vec4<f32>(vec4<u32>(word, word >> 4u, word >> 8u, word >> 12u) & vec4<u32>(15u)) - 8.0) * s;
            let w2 = word >> 16u;
            hi = (vec4<f32>(vec4<u32>(w2, w2 >> 4u, w2 >> 8u, w2 >> 12u) & vec4<u32>(15u)) - 8.0) * s;
        }
        for (var e = 0u; e < 4u; e++) {
            if lid < 128u {
                ws[(wk + e) * 16u + wc / 4u][wc % 4u] = lo[e];
                ws[(wk + 4u + e) * 16u + wc / 4u][wc % 4u] = hi[e];
            } else {
                ws_up[(wk + e) * 16u + wc / 4u][wc % 4u] = lo[e];
                ws_up[(wk + 4u + e) * 16u + wc / 4u][wc % 4u] = hi[e];
            }
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TK; kk++) {
            let a = xs[kk * 16u + ti];
            let b = ws[kk * 16u + tj];
            let bu = ws_up[kk * 16u + tj];
            acc[0] += a.x * b;
            acc[1] += a.y * b;
            acc[2] += a.z * b;
            acc[3] += a.w * b;
            acc_up[0] += a.x * bu;
            acc_up[1] += a.y * bu;
            acc_up[2] += a.z * bu;
            acc_up[3] += a.w * bu;
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
            if col < p.n {
                let g = acc[i][j];
                out[row * p.n + col] = Elem(g / (1.0 + exp(-g)) * acc_up[i][j]);
            }
        }
    }
}
