//! Causal attention over a KV cache for prompts (`sdpa_with_kv_cache` with
//! more than a few query rows), layout `[1, seq, heads, D]` everywhere, for
//! head dims that are a multiple of 4 and at most 128 (`sdpa_online.wgsl`
//! and `sdpa.wgsl` take the rest). Same parameters as `sdpa.wgsl`; the
//! caches were updated by `kv_cache_update.wgsl` first.
//!
//! One workgroup of 256 invocations per (tile of `BQ` query rows, query
//! head), heaviest tiles first. Query row `i` attends to cache rows
//! `0..=start_pos + i` of kv head `h / group`, so the tile walks key tiles
//! of `BK` rows only up to the last key its last row needs: tiles above the
//! diagonal are never loaded, and the per-element mask is applied only on
//! the tiles that cross the first row's diagonal (or the end of the keys).
//! Rows past the end of the prompt (a ragged last tile) read zero queries
//! and are not written.
//!
//! Per key tile, K then V are loaded into workgroup memory as f32 in chunks
//! of 64 dims (one `vec4` per invocation). For the scores, invocation
//! `(r, j)` dots the (pre-scaled) query row `r` held in workgroup memory
//! with key `j`; each row's running max and sum (online softmax) are kept
//! redundantly by its 16 invocations, and for the values invocation
//! `(r, c)` owns `vec4` column `c` of each 64-dim chunk of row `r`'s
//! output, in registers. f32 math; the caches may hold another element
//! type than the activations (`KvElem`).
// variants: f32 f16 f32_kvf16

alias Elem = f32;
alias KvElem = Elem;

/// Invocations per workgroup: `BQ * BK`, and `BK * DC4` (one `vec4` of a
/// K/V chunk each).
const WG: u32 = 256u;
/// Query rows per tile.
const BQ: u32 = 16u;
/// Keys per tile.
const BK: u32 = 16u;
/// `vec4` columns of one K/V chunk (64 dims).
const DC4: u32 = 16u;
/// Row stride of the K/V chunk, padded by one `vec4` so that the 16 keys
/// of a score step fall in different banks.
const KV_STRIDE: u32 = DC4 + 1u;
/// `vec4` columns of a query row (128 dims, the largest head dim).
const D4_MAX: u32 = 32u;
/// Score of a masked key.
const NEG: f32 = -3.402823e38;

struct Params {
    /// Tokens in the chunk (`S`).
    seq: u32,
    /// Query heads.
    n_heads: u32,
    /// Key/value heads.
    n_kv_heads: u32,
    /// Head dim (a multiple of 4, at most 128).
    head_dim: u32,
    /// Position of the first new token.
    start_pos: u32,
    /// Softmax scale.
    scale: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> k_cache: array<vec4<KvElem>>;
@group(0) @binding(3) var<storage, read> v_cache: array<vec4<KvElem>>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<Elem>>;

/// The tile's query rows, times the scale.
var<workgroup> qs: array<vec4<f32>, BQ * D4_MAX>;
/// One 64-dim chunk of the key tile, then of the value tile.
var<workgroup> kv: array<vec4<f32>, BK * KV_STRIDE>;
/// The score tile, `[BQ, BK]`.
var<workgroup> scores: array<f32, WG>;
/// The probability tile (`exp(score - running max)`), `[BQ, BK]`.
var<workgroup> probs: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let n_tiles = (p.seq + BQ - 1u) / BQ;
    let idx = wid.y * groups.x + wid.x;
    // Workgroup-uniform: either every invocation of a group returns or none.
    if idx >= n_tiles * p.n_heads {
        return;
    }
    let h = idx / n_tiles;
    // The last tiles see the most keys: they go first.
    let i0 = (n_tiles - 1u - idx % n_tiles) * BQ;
    let rows = min(BQ, p.seq - i0);
    let kvh = h / (p.n_heads / p.n_kv_heads);
    let d4 = p.head_dim / 4u;
    let n_chunks = (d4 + DC4 - 1u) / DC4;
    // Keys of the tile: row `i0 + r` sees keys `0..=start_pos + i0 + r`.
    let n_keys = p.start_pos + i0 + rows;
    // Key tiles ending at or before this key need no mask.
    let first_last = p.start_pos + i0;
    // Score step: row `r`, key `j`; value step: row `r`, column `j`.
    let r = lid / BK;
    let j = lid % BK;
    let row_last = select(n_keys - 1u, first_last + r, r < rows);

    for (var e = lid; e < BQ * D4_MAX; e += WG) {
        let row = e / D4_MAX;
        let c = e % D4_MAX;
        var x = vec4<f32>(0.0);
        if row < rows && c < d4 {
            x = vec4<f32>(q[((i0 + row) * p.n_heads + h) * d4 + c]) * p.scale;
        }
        qs[e] = x;
    }
    // Chunk loads: key `lj` of the tile, column `lc` of the chunk.
    let lj = lid / DC4;
    let lc = lid % DC4;

    var m_run = NEG;
    var l_run = 0.0;
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    for (var k0 = 0u; k0 < n_keys; k0 += BK) {
        var s = 0.0;
        for (var ch = 0u; ch < n_chunks; ch++) {
            workgroupBarrier();
            let col = ch * DC4 + lc;
            var x = vec4<f32>(0.0);
            if k0 + lj < n_keys && col < d4 {
                x = vec4<f32>(k_cache[((k0 + lj) * p.n_kv_heads + kvh) * d4 + col]);
            }
            kv[lj * KV_STRIDE + lc] = x;
            workgroupBarrier();
            let n_cols = min(DC4, d4 - ch * DC4);
            var dot4 = vec4<f32>(0.0);
            for (var c = 0u; c < n_cols; c++) {
                dot4 += qs[r * D4_MAX + ch * DC4 + c] * kv[j * KV_STRIDE + c];
            }
            s += dot4.x + dot4.y + dot4.z + dot4.w;
        }
        // Only tiles crossing the first row's diagonal hold masked keys.
        let masked = k0 + BK - 1u > first_last && k0 + j > row_last;
        if masked {
            s = NEG;
        }
        scores[lid] = s;
        workgroupBarrier();
        var m_tile = NEG;
        for (var jj = 0u; jj < BK; jj++) {
            m_tile = max(m_tile, scores[r * BK + jj]);
        }
        let m_new = max(m_run, m_tile);
        let alpha = exp(m_run - m_new);
        m_run = m_new;
        probs[lid] = select(exp(s - m_new), 0.0, masked);
        acc0 *= alpha;
        acc1 *= alpha;
        var l_tile = 0.0;
        for (var ch = 0u; ch < n_chunks; ch++) {
            workgroupBarrier();
            let col = ch * DC4 + lc;
            var x = vec4<f32>(0.0);
            if k0 + lj < n_keys && col < d4 {
                x = vec4<f32>(v_cache[((k0 + lj) * p.n_kv_heads + kvh) * d4 + col]);
            }
            kv[lj * KV_STRIDE + lc] = x;
            workgroupBarrier();
            var a = vec4<f32>(0.0);
            l_tile = 0.0;
            for (var jj = 0u; jj < BK; jj++) {
                let pj = probs[r * BK + jj];
                l_tile += pj;
                a += pj * kv[jj * KV_STRIDE + j];
            }
            if ch == 0u {
                acc0 += a;
            } else {
                acc1 += a;
            }
        }
        l_run = l_run * alpha + l_tile;
    }
    if r < rows {
        let base = ((i0 + r) * p.n_heads + h) * d4;
        if j < d4 {
            out[base + j] = vec4<Elem>(acc0 / l_run);
        }
        if DC4 + j < d4 {
            out[base + DC4 + j] = vec4<Elem>(acc1 / l_run);
        }
    }
}
