//! Decode route of `etwgpu.sdpa_rope_linear_q4gsw` at short caches: the
//! whole attention of the one query row computed inside the 4-bit GEMV
//! that reads its output (the O projection), one dispatch where the split
//! route takes two (`sdpa_split_rope.wgsl`, then `q4_gemv_attn.wgsl`).
//! Every workgroup needs the whole attention output (each output column
//! dots all of it), so every workgroup computes it: at the short caches
//! the host routes here (`GEMV_ATTN_MAX_CACHE` elements a cache at most),
//! the keys and values come from L2, and recomputing costs less than the
//! dispatch and the partials' round trip it saves.
//!
//! The attention: the query and the call's new key rotated as they are
//! loaded (`et_vk.apply_rotary_emb`, as `sdpa_split_rope.wgsl` rotates
//! them, each result rounded to `Elem`, the key then to the cache's type);
//! every workgroup stores the new key and value into the caches at
//! `start_pos` (the same values: which store lands last does not matter)
//! and reads them back from there like every other key. Then
//! the keys `0 ..= start_pos` in tiles of `SC / n_heads`, online softmax
//! per head:
//! - each invocation scores one (kv head, key) pair against the (at most
//!   `MAXG`) query heads that share that kv head, sixteen loads of the key
//!   in flight;
//! - sixteen invocations per head take the tile's max and sum in a tree;
//! - each invocation accumulates one `vec4` of one kv head's values for
//!   its query heads over one key group of the tile, eight loads in
//!   flight at keys clamped into the tile (no remainder loop).
//! At the end the key groups are summed, divided by the softmax sum and
//! rounded to `Elem` (as the split combine stores the output) into `x`,
//! which held the rotated query until then. Then, as `q4_gemv.wgsl` with
//! one row,
//! `out[n] = sum_k x[k] * (nibble(n, k) - 8) * scales[k / group, n] + bias[n]`.
//!
//! The host routes here only for one query row, at most `MAXG` query heads
//! per kv head, at most `MAX_HEADS` heads, `n_heads * head_dim / 4 <= XS`,
//! `n_kv_heads * head_dim / 4 <= NS`, on devices that allow its 11 storage
//! buffers and its workgroup memory (`DeviceCaps::gemv_attention`); see
//! `gemv_attends` in `ops/llm/split_kv.rs`.
// variants: f32 f16 f32_kvf16

alias Elem = f32;
alias KvElem = Elem;

/// Invocations per workgroup.
const WG: u32 = 256u;
/// `vec4`s of the query (then the attention output): `n_heads * head_dim / 4` at most.
const XS: u32 = 256u;
/// Most (kv head, `vec4`) pairs of the values (`n_kv_heads * head_dim /
/// 4`): at least four key groups of them in a workgroup.
const NS: u32 = 64u;
/// Scores held per tile, all heads: a tile has `SC / n_heads` keys.
const SC: u32 = 4096u;
/// Most query heads per kv head.
const MAXG: u32 = 4u;
/// Most query heads (`WG / LANES`).
const MAX_HEADS: u32 = 16u;
/// Invocations per head in the softmax's reductions.
const LANES: u32 = 16u;

struct Params {
    /// The GEMV's (`q4_gemv.wgsl`): rows of x (1 here).
    m: u32,
    /// Output features.
    n: u32,
    /// Input features (`n_heads * head_dim`, a multiple of 32).
    k: u32,
    /// Row length of the scales (and bias): N padded.
    n_pad: u32,
    /// Inputs per scale group (a multiple of 32).
    group_size: u32,
    has_bias: u32,
    /// Columns per workgroup: 8, 16 or 32.
    cols: u32,
    /// Bit 0: the weights are word-major, else row-major.
    w_layout: u32,
    /// The attention's, laid out as `sdpa_split_rope.wgsl`'s uniforms (the
    /// host appends that dispatch's words): query rows (1 here).
    seq: u32,
    /// Query heads.
    n_heads: u32,
    /// Key/value heads.
    n_kv_heads: u32,
    /// Head dim (a multiple of 4).
    head_dim: u32,
    /// Position of the query row (its key is the cache's row `start_pos`).
    start_pos: u32,
    /// Softmax scale.
    scale: f32,
    /// The split plan's words and padding (unused here).
    _split0: u32,
    _split1: u32,
    _split2: u32,
    _split3: u32,
    _pad0: u32,
    _pad1: u32,
    /// The tables' row of the query's token.
    table_row: u32,
    _pad2: u32,
    _pad3: u32,
    _pad4: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> k_new: array<vec4<Elem>>;
@group(0) @binding(3) var<storage, read> v_new: array<vec4<Elem>>;
@group(0) @binding(4) var<storage, read> cos_t: array<Elem>;
@group(0) @binding(5) var<storage, read> sin_t: array<Elem>;
@group(0) @binding(6) var<storage, read> weights: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read> scales: array<Elem>;
@group(0) @binding(8) var<storage, read> bias: array<Elem>;
@group(0) @binding(9) var<storage, read_write> k_cache: array<vec4<KvElem>>;
@group(0) @binding(10) var<storage, read_write> v_cache: array<vec4<KvElem>>;
@group(0) @binding(11) var<storage, read_write> out: array<Elem>;

/// The rotated query (head `h`, `vec4` `j` at `h * d4 + j`), then the
/// attention's output in the same places: the GEMV's x.
var<workgroup> x: array<vec4<f32>, XS>;
/// The tile's scores (head `h`, key `t` at `h * tile + t`), then their
/// probabilities.
var<workgroup> sc: array<f32, SC>;
/// Per head: the running max and sum, and the last tile's rescale.
var<workgroup> m_run: array<f32, MAX_HEADS>;
var<workgroup> l_run: array<f32, MAX_HEADS>;
var<workgroup> alpha: array<f32, MAX_HEADS>;
/// The reductions' scratch: `(max, sum)` pairs in `.xy` during the tiles,
/// the key groups' sums at the end, then the GEMV slices' sums.
var<workgroup> partial: array<vec4<f32>, WG>;

// include: q4_dot.wgsl
// include: q4_gemv_columns.wgsl

// include: rope4.wgsl

/// Two `(max, sum of exp(s - max))` pairs as one.
fn merge_ml(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    let m = max(a.x, b.x);
    return vec2<f32>(m, a.y * exp(a.x - m) + b.y * exp(b.x - m));
}

/// `vec4` `j` of key `key` of kv head `g`, from the cache.
fn key_vec(key: u32, g: u32, j: u32, d4: u32) -> vec4<f32> {
    return vec4<f32>(k_cache[(key * p.n_kv_heads + g) * d4 + j]);
}

/// The same for the values.
fn value_vec(key: u32, g: u32, j: u32, d4: u32) -> vec4<f32> {
    return vec4<f32>(v_cache[(key * p.n_kv_heads + g) * d4 + j]);
}

/// The probability of key `t` of the tile from `b` (of `nt` keys): 0 past
/// the tile.
fn pw(b: u32, t: u32, nt: u32) -> f32 {
    return select(0.0, sc[b + min(t, nt - 1u)], t < nt);
}

/// Fills `x` with the attention's output. Ends with a barrier, so `x` is
/// ready.
fn attend(lid: u32) {
    let d4 = p.head_dim / 4u;
    let hq = p.n_heads;
    let hkv = p.n_kv_heads;
    let group = hq / hkv;
    let pos = p.start_pos;
    for (var e = lid; e < hq * d4; e += WG) {
        x[e] = rope4(q[e], 0u, e % d4);
    }
    // Every workgroup stores the new rows (the same values) and reads them
    // back from the caches like every other key, so no load branches.
    for (var e = lid; e < hkv * d4; e += WG) {
        k_cache[pos * hkv * d4 + e] = vec4<KvElem>(rope4(k_new[e], 0u, e % d4));
        v_cache[pos * hkv * d4 + e] = vec4<KvElem>(v_new[e]);
    }
    if lid < hq {
        m_run[lid] = -3.402823e38;
        l_run[lid] = 0.0;
    }
    storageBarrier();
    workgroupBarrier();
    let tile = SC / hq;
    let ctx = pos + 1u;
    // The values' owners: (kv head, vec4) pairs, `kgs` key groups of them.
    let pairs = hkv * d4;
    let kgs = WG / pairs;
    let pair = lid % pairs;
    let kg = lid / pairs;
    let g = pair / d4;
    let j = pair % d4;
    // The query heads of kv head `g`, clamped (those past `group` compute
    // on a real head and are never stored).
    var hh: array<u32, MAXG>;
    for (var jj = 0u; jj < MAXG; jj++) {
        hh[jj] = g * group + min(jj, group - 1u);
    }
    var acc: array<vec4<f32>, MAXG>;
    let h_red = lid / LANES;
    let lane = lid % LANES;
    for (var c0 = 0u; c0 < ctx; c0 += tile) {
        let nt = min(tile, ctx - c0);
        // Scores: one (kv head, key) pair per invocation at a time, sixteen
        // loads of the key in flight.
        for (var i = lid; i < hkv * nt; i += WG) {
            let gi = i / nt;
            let t = i % nt;
            var dots: array<vec4<f32>, MAXG>;
            var jd = 0u;
            for (; jd + 16u <= d4; jd += 16u) {
                let k0 = key_vec(c0 + t, gi, jd + 0u, d4);
                let k1 = key_vec(c0 + t, gi, jd + 1u, d4);
                let k2 = key_vec(c0 + t, gi, jd + 2u, d4);
                let k3 = key_vec(c0 + t, gi, jd + 3u, d4);
                let k4 = key_vec(c0 + t, gi, jd + 4u, d4);
                let k5 = key_vec(c0 + t, gi, jd + 5u, d4);
                let k6 = key_vec(c0 + t, gi, jd + 6u, d4);
                let k7 = key_vec(c0 + t, gi, jd + 7u, d4);
                let k8 = key_vec(c0 + t, gi, jd + 8u, d4);
                let k9 = key_vec(c0 + t, gi, jd + 9u, d4);
                let k10 = key_vec(c0 + t, gi, jd + 10u, d4);
                let k11 = key_vec(c0 + t, gi, jd + 11u, d4);
                let k12 = key_vec(c0 + t, gi, jd + 12u, d4);
                let k13 = key_vec(c0 + t, gi, jd + 13u, d4);
                let k14 = key_vec(c0 + t, gi, jd + 14u, d4);
                let k15 = key_vec(c0 + t, gi, jd + 15u, d4);
                for (var jj = 0u; jj < MAXG; jj++) {
                    let b = (gi * group + min(jj, group - 1u)) * d4 + jd;
                    dots[jj] += x[b + 0u] * k0 + x[b + 1u] * k1 + x[b + 2u] * k2 + x[b + 3u] * k3;
                    dots[jj] += x[b + 4u] * k4 + x[b + 5u] * k5 + x[b + 6u] * k6 + x[b + 7u] * k7;
                    dots[jj] += x[b + 8u] * k8 + x[b + 9u] * k9 + x[b + 10u] * k10 + x[b + 11u] * k11;
                    dots[jj] += x[b + 12u] * k12 + x[b + 13u] * k13 + x[b + 14u] * k14 + x[b + 15u] * k15;
                }
            }
            for (; jd < d4; jd++) {
                let kv = key_vec(c0 + t, gi, jd, d4);
                for (var jj = 0u; jj < MAXG; jj++) {
                    dots[jj] += x[(gi * group + min(jj, group - 1u)) * d4 + jd] * kv;
                }
            }
            for (var jj = 0u; jj < MAXG; jj++) {
                if jj < group {
                    let dv = dots[jj];
                    sc[(gi * group + jj) * tile + t] = (dv.x + dv.y + dv.z + dv.w) * p.scale;
                }
            }
        }
        workgroupBarrier();
        // Each head's tile max and sum: `LANES` invocations, then a tree.
        var ml = vec2<f32>(-3.402823e38, 0.0);
        if h_red < hq {
            for (var t = lane; t < nt; t += LANES) {
                ml.x = max(ml.x, sc[h_red * tile + t]);
            }
            for (var t = lane; t < nt; t += LANES) {
                ml.y += exp(sc[h_red * tile + t] - ml.x);
            }
        }
        partial[lid] = vec4<f32>(ml, 0.0, 0.0);
        workgroupBarrier();
        for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
            if lane < stride {
                partial[lid] = vec4<f32>(merge_ml(partial[lid].xy, partial[lid + stride].xy), 0.0, 0.0);
            }
            workgroupBarrier();
        }
        if lid < hq {
            let tl = partial[lid * LANES].xy;
            let m_new = max(m_run[lid], tl.x);
            let a = exp(m_run[lid] - m_new);
            l_run[lid] = l_run[lid] * a + tl.y * exp(tl.x - m_new);
            m_run[lid] = m_new;
            alpha[lid] = a;
        }
        workgroupBarrier();
        for (var i = lid; i < hq * nt; i += WG) {
            let at = (i / nt) * tile + i % nt;
            sc[at] = exp(sc[at] - m_run[i / nt]);
        }
        workgroupBarrier();
        // Values: this invocation's (kv head, vec4) over its key group,
        // eight loads in flight (at keys clamped into the tile; their
        // probabilities are 0 past it).
        if kg < kgs {
            for (var jj = 0u; jj < MAXG; jj++) {
                acc[jj] *= alpha[hh[jj]];
            }
            let per = (nt + kgs - 1u) / kgs;
            for (var e0 = 0u; e0 < per; e0 += 8u) {
                let t0 = kg + e0 * kgs;
                let u0 = value_vec(c0 + min(t0 + 0u * kgs, nt - 1u), g, j, d4);
                let u1 = value_vec(c0 + min(t0 + 1u * kgs, nt - 1u), g, j, d4);
                let u2 = value_vec(c0 + min(t0 + 2u * kgs, nt - 1u), g, j, d4);
                let u3 = value_vec(c0 + min(t0 + 3u * kgs, nt - 1u), g, j, d4);
                let u4 = value_vec(c0 + min(t0 + 4u * kgs, nt - 1u), g, j, d4);
                let u5 = value_vec(c0 + min(t0 + 5u * kgs, nt - 1u), g, j, d4);
                let u6 = value_vec(c0 + min(t0 + 6u * kgs, nt - 1u), g, j, d4);
                let u7 = value_vec(c0 + min(t0 + 7u * kgs, nt - 1u), g, j, d4);
                for (var jj = 0u; jj < MAXG; jj++) {
                    let b = hh[jj] * tile;
                    acc[jj] += pw(b, t0 + 0u * kgs, nt) * u0 + pw(b, t0 + 1u * kgs, nt) * u1 + pw(b, t0 + 2u * kgs, nt) * u2 + pw(b, t0 + 3u * kgs, nt) * u3;
                    acc[jj] += pw(b, t0 + 4u * kgs, nt) * u4 + pw(b, t0 + 5u * kgs, nt) * u5 + pw(b, t0 + 6u * kgs, nt) * u6 + pw(b, t0 + 7u * kgs, nt) * u7;
                }
            }
        }
        workgroupBarrier();
    }
    // Sum the key groups per query head of the group (a constant trip
    // count, so `acc` stays indexed by constants) into `x`.
    for (var jj = 0u; jj < MAXG; jj++) {
        if jj >= group {
            break;
        }
        partial[lid] = acc[jj];
        workgroupBarrier();
        if lid < pairs {
            var total = vec4<f32>(0.0);
            for (var s = 0u; s < kgs; s++) {
                total += partial[s * pairs + lid];
            }
            let h = g * group + jj;
            x[h * d4 + j] = vec4<f32>(vec4<Elem>(total / l_run[h]));
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    // The first two words and their scales, in flight through the prologue.
    let c = column_start(lid, wid, groups);
    attend(lid);
    column_finish(lid, c, p.m);
}
