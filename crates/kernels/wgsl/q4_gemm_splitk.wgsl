//! Prefill route of `et_vk.linear_q4gsw` (many rows of x) for calls with
//! too few output tiles to fill the GPU: split-K of the tiled GEMM
//! (`q4_gemm.wgsl`). Split `s` of a workgroup computes its `TILE x TILE`
//! block over inputs `s * k_chunk ..` only and writes the f32 partial
//! sums `partial[s, m, n] = sum_k x[m, k] * (nibble(n, k) - 8) *
//! scales[k / group, n]` to the scratch; `gemm_splitk_combine.wgsl` then
//! adds the splits (and the bias) into the output.
//!
//! Each of the 256 invocations owns a 4 x 4 sub-block in registers; K
//! advances `TK` inputs at a time through shared memory (both tiles
//! k-major). The host routes here only when `group % TK == 0`,
//! `K % TK == 0` and `k_chunk % TK == 0`; which calls split, and into how
//! many, is `etwgpu_kernels::ops::gemm`'s `split_k`. Accumulation is f32.
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

// include: q4_splitk_decl.wgsl

/// x tile, k-major: `xs[k * 16 + i]` holds rows `4i .. 4i + 4` at input k.
var<workgroup> xs: array<vec4<f32>, 256>;
/// Weight tile, k-major: `ws[k * 16 + j]` holds columns `4j .. 4j + 4`.
var<workgroup> ws: array<vec4<f32>, 256>;

// include: q4_word8.wgsl

@compute @workgroup_size(256)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let g = wid.y * groups.x + wid.x;
    // This workgroup's split and output tile.
    let split = g / p.tiles;
    let tile = g % p.tiles;
    let k_begin = split * p.k_chunk;
    let k_end = min(k_begin + p.k_chunk, p.k);
    // Past the last split (a grid rounded up): nothing to do.
    if k_begin >= p.k {
        return;
    }
    let m0 = (tile / p.tiles_n) * TILE;
    let n0 = (tile % p.tiles_n) * TILE;
    // This invocation's 4 x 4 sub-block.
    let ti = lid / 16u;
    let tj = lid % 16u;
    // Loading: x rows `m0 + lid / 4`, inputs `(lid % 4) * 4 ..`; weight
    // columns `n0 + lid / 2`, inputs `(lid % 2) * 8 ..` (lid < 128).
    let xr = lid / 4u;
    let xk = (lid % 4u) * 4u;
    let wc = lid / 2u;
    let wk = (lid % 2u) * 8u;
    let words = p.k / 16u;
    var acc: array<vec4<f32>, 4>;
    for (var k0 = k_begin; k0 < k_end; k0 += TK) {
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
            if col < p.n {
                // 8 nibbles: inputs k0 + wk .. k0 + wk + 8.
                let word = weights[w8(col, words, k0, (p.w_layout & 1u) != 0u)][lid % 2u];
                let s = f32(scales[(k0 / p.group_size) * p.n_pad + col]);
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
            if col < p.n {
                partial[(split * p.m + row) * p.n + col] = acc[i][j];
            }
        }
    }
}
