//! The `_rope` form of `sdpa_split.wgsl`, for `etwgpu.sdpa_rope_with_kv_cache`
//! on the decode route: the same split-KV partials, with the query and the
//! call's new keys read un-rotated and rotated here as they are loaded
//! (`et_vk.apply_rotary_emb`: pairs `(x[2i], x[2i+1])` of a row of token
//! `t` of the call turned by the tables `cos, sin [_, D/2]` at row
//! `table_row + t`, each result
//! rounded to the activations' dtype as `rope.wgsl` stores it), so RoPE
//! costs no dispatch of its own; the rotated keys are what it writes into
//! the key cache. Everything else is `sdpa_split.wgsl`'s (see there).
// variants: f32 f16 f32_kvf16

alias Elem = f32;
alias KvElem = Elem;

const WG: u32 = 256u;
/// Query vectors per workgroup.
const MAXQ: u32 = 4u;
/// Keys per tile (one per invocation when scoring).
const TILE: u32 = 256u;
/// Invocations per query vector in the reductions (`MAXQ * LANES = WG`).
const LANES: u32 = 64u;
/// Score of a masked key.
const NEG: f32 = -3.402823e38;

struct Params {
    /// Query rows (`S`).
    seq: u32,
    /// Query heads.
    n_heads: u32,
    /// Key/value heads.
    n_kv_heads: u32,
    /// Head dim (a multiple of 4, at most 256).
    head_dim: u32,
    /// Position of the first new token.
    start_pos: u32,
    /// Softmax scale.
    scale: f32,
    /// Split plan constants (`common/split_plan.wgsl`).
    split_target: u32,
    split_min_keys: u32,
    split_tile: u32,
    split_max: u32,
    _pad0: u32,
    _pad1: u32,
    /// The tables' row of the call's first token.
    table_row: u32,
    _pad2: u32,
    _pad3: u32,
    _pad4: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
// include: split_plan.wgsl
@group(0) @binding(1) var<storage, read> q: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> k_new: array<vec4<Elem>>;
@group(0) @binding(3) var<storage, read> v_new: array<vec4<Elem>>;
@group(0) @binding(4) var<storage, read> cos_t: array<Elem>;
@group(0) @binding(5) var<storage, read> sin_t: array<Elem>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<vec4<KvElem>>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<vec4<KvElem>>;
@group(0) @binding(8) var<storage, read_write> part: array<vec4<f32>>;

/// `vec4` `d` of a row of token `t` of the call rotated: its pairs `(x, y)`
/// and `(z, w)` are pairs `2d` and `2d + 1` of the half head dim. Rounded
/// to `Elem`, as the rotation's output tensor holds it.
fn rope4(v: vec4<Elem>, t: u32, d: u32) -> vec4<f32> {
    let i = (p.table_row + t) * (p.head_dim / 2u) + 2u * d;
    let c = vec2<f32>(f32(cos_t[i]), f32(cos_t[i + 1u]));
    let sn = vec2<f32>(f32(sin_t[i]), f32(sin_t[i + 1u]));
    let x = vec4<f32>(v);
    let re = x.xz * c - x.yw * sn;
    let im = x.xz * sn + x.yw * c;
    return vec4<f32>(vec4<Elem>(vec4<f32>(re.x, im.x, re.y, im.y)));
}

/// `vec4` `d` of key `key` of kv head `kvh` (`d4` per row), as the cache
/// holds it: the new keys from `k_new` (rotated), the older ones from the
/// cache.
fn key_at(key: u32, kvh: u32, d: u32, d4: u32) -> vec4<f32> {
    if key >= p.start_pos {
        let t = key - p.start_pos;
        return vec4<f32>(vec4<KvElem>(rope4(k_new[(t * p.n_kv_heads + kvh) * d4 + d], t, d)));
    }
    return vec4<f32>(k_cache[(key * p.n_kv_heads + kvh) * d4 + d]);
}

/// The same for the values.
fn value_at(key: u32, kvh: u32, d: u32, d4: u32) -> vec4<f32> {
    if key >= p.start_pos {
        return vec4<f32>(vec4<KvElem>(v_new[((key - p.start_pos) * p.n_kv_heads + kvh) * d4 + d]));
    }
    return vec4<f32>(v_cache[(key * p.n_kv_heads + kvh) * d4 + d]);
}

var<workgroup> qs: array<vec4<f32>, 256>;
/// Per query vector and key of the tile: the score, then its probability.
var<workgroup> sc: array<f32, 1024>;
var<workgroup> red: array<f32, WG>;
var<workgroup> sums: array<vec4<f32>, WG>;

/// Tree reduction of `red` within each query vector's `LANES` invocations
/// (max when `is_max`, else sum): the result of vector `j` lands in
/// `red[j * LANES]`.
fn reduce(lid: u32, v: f32, is_max: bool) {
    red[lid] = v;
    workgroupBarrier();
    let lane = lid % LANES;
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
        if lane < stride {
            if is_max {
                red[lid] = max(red[lid], red[lid + stride]);
            } else {
                red[lid] += red[lid + stride];
            }
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let group = p.n_heads / p.n_kv_heads;
    let n_qv = p.seq * group;
    let n_blocks = (n_qv + MAXQ - 1u) / MAXQ;
    let kvh = wid.x / n_blocks;
    // Workgroup-uniform: either every invocation of a group returns or none.
    let plan = split_plan(p.start_pos + p.seq);
    let n_splits = plan.x;
    let chunk = plan.y;
    if kvh >= p.n_kv_heads || wid.y >= n_splits {
        return;
    }
    let j0 = (wid.x % n_blocks) * MAXQ;
    let nq = min(MAXQ, n_qv - j0);
    let split = wid.y;
    let d4 = p.head_dim / 4u;
    let begin = split * chunk;
    let end = min(p.start_pos + p.seq, begin + chunk);
    // The new rows of this kv head in this split, stored once (by the
    // first query block).
    if j0 == 0u {
        let first = max(begin, p.start_pos);
        if first < end {
            for (var e = lid; e < (end - first) * d4; e += WG) {
                let key = first + e / d4;
                let src = ((key - p.start_pos) * p.n_kv_heads + kvh) * d4 + e % d4;
                let dst = (key * p.n_kv_heads + kvh) * d4 + e % d4;
                k_cache[dst] = vec4<KvElem>(rope4(k_new[src], key - p.start_pos, e % d4));
                v_cache[dst] = vec4<KvElem>(v_new[src]);
            }
        }
    }
    for (var e = lid; e < nq * d4; e += WG) {
        let j = j0 + e / d4;
        let h = kvh * group + j % group;
        qs[e] = rope4(q[((j / group) * p.n_heads + h) * d4 + e % d4], j / group, e % d4);
    }
    workgroupBarrier();
    // Per query vector: the keys its row sees end at `lim`.
    var lim: array<u32, MAXQ>;
    for (var jj = 0u; jj < MAXQ; jj++) {
        lim[jj] = p.start_pos + (j0 + jj) / group + 1u;
    }
    var m_run = array<f32, MAXQ>(NEG, NEG, NEG, NEG);
    var l_run = array<f32, MAXQ>(0.0, 0.0, 0.0, 0.0);
    var acc: array<vec4<f32>, MAXQ>;
    let dim4 = lid % d4;
    let kg = lid / d4;
    let n_kg = WG / d4;
    let rq = lid / LANES;
    let lane = lid % LANES;
    for (var c0 = begin; c0 < end; c0 += TILE) {
        let n_here = min(TILE, end - c0);
        let key = c0 + lid;
        // Loops over the query vectors run to `MAXQ` (constant trip
        // counts, so the per-vector arrays stay in registers); vectors past
        // `nq` compute on zeros (workgroup memory starts zeroed) or on
        // probabilities set to 0, and are never stored.
        var dots: array<vec4<f32>, MAXQ>;
        if lid < n_here {
            // Four loads of the key in flight before any is used.
            var d = 0u;
            for (; d + 4u <= d4; d += 4u) {
                let k0 = key_at(key, kvh, d, d4);
                let k1 = key_at(key, kvh, d + 1u, d4);
                let k2 = key_at(key, kvh, d + 2u, d4);
                let k3 = key_at(key, kvh, d + 3u, d4);
                for (var jj = 0u; jj < MAXQ; jj++) {
                    let b = jj * d4 + d;
                    dots[jj] += qs[b] * k0 + qs[b + 1u] * k1 + qs[b + 2u] * k2 + qs[b + 3u] * k3;
                }
            }
            for (; d < d4; d++) {
                let kv = key_at(key, kvh, d, d4);
                for (var jj = 0u; jj < MAXQ; jj++) {
                    dots[jj] += qs[jj * d4 + d] * kv;
                }
            }
        }
        for (var jj = 0u; jj < MAXQ; jj++) {
            var s = NEG;
            if jj < nq && lid < n_here && key < lim[jj] {
                s = (dots[jj].x + dots[jj].y + dots[jj].z + dots[jj].w) * p.scale;
            }
            sc[jj * TILE + lid] = s;
        }
        workgroupBarrier();
        var part_max = NEG;
        if rq < nq {
            for (var r = lane; r < TILE; r += LANES) {
                part_max = max(part_max, sc[rq * TILE + r]);
            }
        }
        reduce(lid, part_max, true);
        var m_new: array<f32, MAXQ>;
        var alpha: array<f32, MAXQ>;
        for (var jj = 0u; jj < MAXQ; jj++) {
            m_new[jj] = max(m_run[jj], red[jj * LANES]);
            alpha[jj] = exp(m_run[jj] - m_new[jj]);
        }
        for (var jj = 0u; jj < MAXQ; jj++) {
            let s = sc[jj * TILE + lid];
            var pr = 0.0;
            if jj < nq && s > NEG {
                pr = exp(s - m_new[jj]);
            }
            sc[jj * TILE + lid] = pr;
        }
        workgroupBarrier();
        var part_sum = 0.0;
        if rq < nq {
            for (var r = lane; r < TILE; r += LANES) {
                part_sum += sc[rq * TILE + r];
            }
        }
        reduce(lid, part_sum, false);
        for (var jj = 0u; jj < MAXQ; jj++) {
            l_run[jj] = l_run[jj] * alpha[jj] + red[jj * LANES];
            acc[jj] *= alpha[jj];
            m_run[jj] = m_new[jj];
        }
        if kg < n_kg {
            // Four values in flight before any is used.
            var j = kg;
            for (; j + 3u * n_kg < n_here; j += 4u * n_kg) {
                let v0 = value_at(c0 + j, kvh, dim4, d4);
                let v1 = value_at(c0 + j + n_kg, kvh, dim4, d4);
                let v2 = value_at(c0 + j + 2u * n_kg, kvh, dim4, d4);
                let v3 = value_at(c0 + j + 3u * n_kg, kvh, dim4, d4);
                for (var jj = 0u; jj < MAXQ; jj++) {
                    let b = jj * TILE + j;
                    acc[jj] += sc[b] * v0 + sc[b + n_kg] * v1 + sc[b + 2u * n_kg] * v2 + sc[b + 3u * n_kg] * v3;
                }
            }
            for (; j < n_here; j += n_kg) {
                let vv = value_at(c0 + j, kvh, dim4, d4);
                for (var jj = 0u; jj < MAXQ; jj++) {
                    acc[jj] += sc[jj * TILE + j] * vv;
                }
            }
        }
        workgroupBarrier();
    }
    // Sum the key groups of each dim and write the partials (a constant
    // trip count here too, so `acc` stays indexed by constants).
    for (var jj = 0u; jj < MAXQ; jj++) {
        if jj >= nq {
            break;
        }
        sums[lid] = acc[jj];
        workgroupBarrier();
        let j = j0 + jj;
        let h = kvh * group + j % group;
        let base = (((j / group) * p.n_heads + h) * n_splits + split) * (d4 + 1u);
        if lid < d4 {
            var total = vec4<f32>(0.0);
            for (var g = 0u; g < n_kg; g++) {
                total += sums[g * d4 + lid];
            }
            part[base + 1u + lid] = total;
        }
        if lid == 0u {
            part[base] = vec4<f32>(m_run[jj], l_run[jj], 0.0, 0.0);
        }
        workgroupBarrier();
    }
}
