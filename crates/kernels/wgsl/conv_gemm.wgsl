//! 2-D convolution (1-D as H = 1), NCHW, `groups = 1`, not transposed, as
//! an implicit GEMM: `out[m, oc] = sum_k patch[m, k] * w[oc, k]` with the
//! output pixels `m = (n, oh, ow)` as rows (`M = N * OH * OW`), the output
//! channels as columns and `k = (c, ky, kx)` (`K = C * KH * KW`) along the
//! weight's rows (`[OC, C, KH, KW]` is `[OC, K]` row-major). The patch
//! matrix is never built: its tile is gathered from x as it is staged
//! (zeros in the padding). Any stride, padding and dilation.
//!
//! A workgroup of 256 computes a 64 x 64 block of the output; each
//! invocation a 4 x 4 sub-block in registers. K advances `TK` inputs a
//! step; the patch tile and the weight tile are staged in workgroup memory
//! k-major (`vec4` of 4 rows, or 4 columns, per k), as in `q4_gemm.wgsl`,
//! and the next step's values are loaded into registers while the current
//! step is multiplied. Each invocation stages one k of 4 patch rows
//! (16 apart, so a subgroup reads 16 consecutive pixels of one input
//! row), walking its `(c, ky, kx)` forward by `TK` with the host's
//! precomputed carries instead of dividing; and 4 weights of one k.
//! Every per-invocation value is a named value, not a private array or
//! vector indexed in a loop, and the gather is branch-free: on lavapipe
//! (LLVM, 2 cores) that took the gemm bench's 3x3 64->64 56x56 batch-1
//! cell from 69.6-69.9 to 53.3-53.9 ms an op (the named values alone:
//! 55.2-56.2). Accumulation is f32. Epilogue as `conv.wgsl`: bias, the
//! optional clamp (`et_vk.conv_with_clamp`) and the activation (`act` of
//! `common/act.wgsl`, `ACT_COPY` for none). Rows past M and columns past N
//! are staged as zeros and never written, so any shape is in bounds.
//!
//! Split K (`partial`, float32 programs only: the partial sums go to an f32
//! scratch bound as `out`): the workgroups are `splits` copies of the
//! output tiles, copy `s` summing inputs `s * k_chunk ..` and writing its
//! sums, without epilogue, NCHW at `s * M * N ..`; `conv_gemm_combine.wgsl`
//! adds them and applies the epilogue.
// variants: f32 f16

alias Elem = f32;

/// Output rows (pixels) and columns (channels) per workgroup.
const TILE: u32 = 64u;
/// Inputs per step along K.
const TK: u32 = 16u;
/// Row stride of a staged tile, in `vec4`: 16 plus one of padding, so the
/// 16 k of one column land on different banks as they are stored.
const LDS: u32 = 17u;

// include: conv_patch.wgsl

/// Patch tile, k-major: `xs[k * LDS + i]` holds rows `4i .. 4i + 4` at k.
var<workgroup> xs: array<vec4<f32>, TK * LDS>;
/// Weight tile, k-major: `ws[k * LDS + j]` holds columns `4j .. 4j + 4`.
var<workgroup> ws: array<vec4<f32>, TK * LDS>;

@compute @workgroup_size(256)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let flat = wid.y * groups.x + wid.x;
    let split = flat / p.tiles;
    let tile = flat % p.tiles;
    let k_begin = split * p.k_chunk;
    let k_end = min(k_begin + p.k_chunk, p.k);
    let m0 = (tile / p.tiles_n) * TILE;
    let n0 = (tile % p.tiles_n) * TILE;
    // This invocation's 4 x 4 sub-block: rows `4 ti ..`, columns `4 tj ..`.
    let ti = lid % 16u;
    let tj = lid / 16u;
    // Staging: patch rows `lid % 16 + 16 e` at input `lid / 16` of the
    // step; weight column `lid / 16 + 16 e` at input `lid % 16`.
    let sk = lid / 16u;
    let sr = lid % 16u;
    // Every per-invocation value is named (no private arrays or vectors
    // indexed in loops): the four staged rows' windows, their next values
    // and the 4 x 4 sums.
    let r0 = row_of(m0 + sr);
    let r1 = row_of(m0 + sr + 16u);
    let r2 = row_of(m0 + sr + 32u);
    let r3 = row_of(m0 + sr + 48u);
    var pos = kpos(k_begin + sk);
    let wk = sr;
    var gx0 = patch_at(r0, pos, k_end);
    var gx1 = patch_at(r1, pos, k_end);
    var gx2 = patch_at(r2, pos, k_end);
    var gx3 = patch_at(r3, pos, k_end);
    var gw0 = weight_at(n0 + sk, k_begin + wk, k_end);
    var gw1 = weight_at(n0 + sk + 16u, k_begin + wk, k_end);
    var gw2 = weight_at(n0 + sk + 32u, k_begin + wk, k_end);
    var gw3 = weight_at(n0 + sk + 48u, k_begin + wk, k_end);
    var c0 = vec4<f32>(0.0);
    var c1 = vec4<f32>(0.0);
    var c2 = vec4<f32>(0.0);
    var c3 = vec4<f32>(0.0);
    // Where this invocation stages: patch row `sr + 16 e` at `xa + 4 e`,
    // component `xc`; weight column `sk + 16 e` at `wa + 4 e`, `wc`.
    let xa = sk * LDS + sr / 4u;
    let xc = sr % 4u;
    let wa = wk * LDS + sk / 4u;
    let wc = sk % 4u;
    for (var k0 = k_begin; k0 < k_end; k0 += TK) {
        xs[xa][xc] = f32(gx0);
        xs[xa + 4u][xc] = f32(gx1);
        xs[xa + 8u][xc] = f32(gx2);
        xs[xa + 12u][xc] = f32(gx3);
        ws[wa][wc] = f32(gw0);
        ws[wa + 4u][wc] = f32(gw1);
        ws[wa + 8u][wc] = f32(gw2);
        ws[wa + 12u][wc] = f32(gw3);
        workgroupBarrier();
        // The next step's values, in flight while this one is multiplied.
        pos = advance(pos);
        let kn = k0 + TK + wk;
        gx0 = patch_at(r0, pos, k_end);
        gx1 = patch_at(r1, pos, k_end);
        gx2 = patch_at(r2, pos, k_end);
        gx3 = patch_at(r3, pos, k_end);
        gw0 = weight_at(n0 + sk, kn, k_end);
        gw1 = weight_at(n0 + sk + 16u, kn, k_end);
        gw2 = weight_at(n0 + sk + 32u, kn, k_end);
        gw3 = weight_at(n0 + sk + 48u, kn, k_end);
        for (var kk = 0u; kk < TK; kk++) {
            let a = xs[kk * LDS + ti];
            let b = ws[kk * LDS + tj];
            c0 += a.x * b;
            c1 += a.y * b;
            c2 += a.z * b;
            c3 += a.w * b;
        }
        workgroupBarrier();
    }
    let acc = array<vec4<f32>, 4>(c0, c1, c2, c3);
    let ohw = p.oh * p.ow;
    let part = split * p.m * p.n;
    for (var i = 0u; i < 4u; i++) {
        let m = m0 + ti * 4u + i;
        if m >= p.m {
            continue;
        }
        let img = m / ohw;
        let pix = m % ohw;
        for (var j = 0u; j < 4u; j++) {
            let oc = n0 + tj * 4u + j;
            if oc < p.n {
                store_out((img * p.n + oc) * ohw + pix, part, oc, acc[i][j]);
            }
        }
    }
}

// include: act.wgsl
// include: conv_epilogue.wgsl
