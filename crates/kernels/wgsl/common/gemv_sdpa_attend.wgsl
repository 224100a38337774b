//! The attention of one query row that `q4_gemv_sdpa.wgsl` and
//! `linear_gemv_sdpa.wgsl` compute inside the GEMV reading its output (the
//! O projection; see `q4_gemv_sdpa.wgsl` for the algorithm): its bounds,
//! workgroup memory (`partial` is also the GEMV's slices' sums) and
//! [`attend`], which fills `x` with the attention's output. The including
//! family declares `Elem`, `KvElem`, `WG` (256), a `Params` `p` with the
//! attention's fields (`n_heads`, `n_kv_heads`, `head_dim`, `start_pos`,
//! `scale`, `table_row`), the bindings `q`, `k_new`, `v_new`, `cos_t`,
//! `sin_t`, `k_cache` (as `vec4<u32>` words) and `v_cache`, and includes
//! `rope4.wgsl`.

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
/// Whether `KvElem` is `f16`: `KvElem(2049.0)` rounds to 2048 only there.
/// The key cache is bound as `vec4<u32>` words, each two `vec4`s of a
/// float16 cache or one of a float32 cache, so a float16 row takes half
/// the load instructions (run au, first call: the scores' key loads cost
/// by the instruction, 0.0465 -> 0.037 us a key a layer on an H100).
const KV_HALF: bool = KvElem(2049.0) == KvElem(2048.0);

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

/// Two `(max, sum of exp(s - max))` pairs as one.
fn merge_ml(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    let m = max(a.x, b.x);
    return vec2<f32>(m, a.y * exp(a.x - m) + b.y * exp(b.x - m));
}

/// The key cache's `vec4` at `i` (in `vec4`s of `KvElem`).
fn key_at(i: u32) -> vec4<f32> {
    if KV_HALF {
        let w = k_cache[i / 2u];
        let h = select(w.xy, w.zw, (i % 2u) == 1u);
        return vec4<f32>(unpack2x16float(h.x), unpack2x16float(h.y));
    }
    return bitcast<vec4<f32>>(k_cache[i]);
}

/// The key cache's `vec4`s at `i` and `i + 1`, `i` even: one load of a
/// float16 cache.
fn key_pair(i: u32) -> array<vec4<f32>, 2> {
    if KV_HALF {
        let w = k_cache[i / 2u];
        return array<vec4<f32>, 2>(
            vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)),
            vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w)),
        );
    }
    return array<vec4<f32>, 2>(bitcast<vec4<f32>>(k_cache[i]), bitcast<vec4<f32>>(k_cache[i + 1u]));
}

/// Stores `v` (already rounded to `KvElem`) as the key cache's `vec4` at `i`.
fn store_key(i: u32, v: vec4<f32>) {
    if KV_HALF {
        let lo = (i % 2u) * 2u;
        k_cache[i / 2u][lo] = pack2x16float(v.xy);
        k_cache[i / 2u][lo + 1u] = pack2x16float(v.zw);
    } else {
        k_cache[i] = bitcast<vec4<u32>>(v);
    }
}

/// `vec4`s `jd .. jd + 8` of key row `row` (`d4` `vec4`s a row): paired
/// loads where every pair lies in one word (`d4` even), else one a `vec4`.
fn keys8(row: u32, jd: u32, d4: u32) -> array<vec4<f32>, 8> {
    let i = row * d4 + jd;
    if d4 % 2u == 0u {
        let a = key_pair(i);
        let b = key_pair(i + 2u);
        let c = key_pair(i + 4u);
        let e = key_pair(i + 6u);
        return array<vec4<f32>, 8>(a[0], a[1], b[0], b[1], c[0], c[1], e[0], e[1]);
    }
    return array<vec4<f32>, 8>(
        key_at(i), key_at(i + 1u), key_at(i + 2u), key_at(i + 3u),
        key_at(i + 4u), key_at(i + 5u), key_at(i + 6u), key_at(i + 7u),
    );
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
        store_key(pos * hkv * d4 + e, vec4<f32>(vec4<KvElem>(rope4(k_new[e], 0u, e % d4))));
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
    // on a real head and are never stored), and their value sums: named
    // values, not arrays indexed in a loop over `MAXG` (run as, third
    // call: 2.6% more decode tokens/s at 32 keys on an H100).
    let h0 = g * group;
    let h1 = g * group + min(1u, group - 1u);
    let h2 = g * group + min(2u, group - 1u);
    let h3 = g * group + min(3u, group - 1u);
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    let h_red = lid / LANES;
    let lane = lid % LANES;
    for (var c0 = 0u; c0 < ctx; c0 += tile) {
        let nt = min(tile, ctx - c0);
        // Scores: one (kv head, key) pair per invocation at a time, eight
        // loads of the key in flight, a sum per query head of the group.
        for (var i = lid; i < hkv * nt; i += WG) {
            let gi = i / nt;
            let t = i % nt;
            let q0 = (gi * group) * d4;
            let q1 = (gi * group + min(1u, group - 1u)) * d4;
            let q2 = (gi * group + min(2u, group - 1u)) * d4;
            let q3 = (gi * group + min(3u, group - 1u)) * d4;
            var d0 = vec4<f32>(0.0);
            var d1 = vec4<f32>(0.0);
            var d2 = vec4<f32>(0.0);
            var d3 = vec4<f32>(0.0);
            var jd = 0u;
            let row = (c0 + t) * hkv + gi;
            for (; jd + 8u <= d4; jd += 8u) {
                let ks = keys8(row, jd, d4);
                let k0 = ks[0];
                let k1 = ks[1];
                let k2 = ks[2];
                let k3 = ks[3];
                let k4 = ks[4];
                let k5 = ks[5];
                let k6 = ks[6];
                let k7 = ks[7];
                d0 += x[q0 + jd] * k0 + x[q0 + jd + 1u] * k1 + x[q0 + jd + 2u] * k2 + x[q0 + jd + 3u] * k3;
                d1 += x[q1 + jd] * k0 + x[q1 + jd + 1u] * k1 + x[q1 + jd + 2u] * k2 + x[q1 + jd + 3u] * k3;
                d2 += x[q2 + jd] * k0 + x[q2 + jd + 1u] * k1 + x[q2 + jd + 2u] * k2 + x[q2 + jd + 3u] * k3;
                d3 += x[q3 + jd] * k0 + x[q3 + jd + 1u] * k1 + x[q3 + jd + 2u] * k2 + x[q3 + jd + 3u] * k3;
                d0 += x[q0 + jd + 4u] * k4 + x[q0 + jd + 5u] * k5 + x[q0 + jd + 6u] * k6 + x[q0 + jd + 7u] * k7;
                d1 += x[q1 + jd + 4u] * k4 + x[q1 + jd + 5u] * k5 + x[q1 + jd + 6u] * k6 + x[q1 + jd + 7u] * k7;
                d2 += x[q2 + jd + 4u] * k4 + x[q2 + jd + 5u] * k5 + x[q2 + jd + 6u] * k6 + x[q2 + jd + 7u] * k7;
                d3 += x[q3 + jd + 4u] * k4 + x[q3 + jd + 5u] * k5 + x[q3 + jd + 6u] * k6 + x[q3 + jd + 7u] * k7;
            }
            for (; jd < d4; jd++) {
                let kv = key_at(row * d4 + jd);
                d0 += x[q0 + jd] * kv;
                d1 += x[q1 + jd] * kv;
                d2 += x[q2 + jd] * kv;
                d3 += x[q3 + jd] * kv;
            }
            let base = (gi * group) * tile + t;
            sc[base] = (d0.x + d0.y + d0.z + d0.w) * p.scale;
            if group > 1u {
                sc[base + tile] = (d1.x + d1.y + d1.z + d1.w) * p.scale;
            }
            if group > 2u {
                sc[base + 2u * tile] = (d2.x + d2.y + d2.z + d2.w) * p.scale;
            }
            if group > 3u {
                sc[base + 3u * tile] = (d3.x + d3.y + d3.z + d3.w) * p.scale;
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
            a0 *= alpha[h0];
            a1 *= alpha[h1];
            a2 *= alpha[h2];
            a3 *= alpha[h3];
            let per = (nt + kgs - 1u) / kgs;
            let b0 = h0 * tile;
            let b1 = h1 * tile;
            let b2 = h2 * tile;
            let b3 = h3 * tile;
            for (var e0 = 0u; e0 < per; e0 += 8u) {
                let t0 = kg + e0 * kgs;
                let ta = t0;
                let tb = t0 + kgs;
                let tc = t0 + 2u * kgs;
                let td = t0 + 3u * kgs;
                let te = t0 + 4u * kgs;
                let tf = t0 + 5u * kgs;
                let tg = t0 + 6u * kgs;
                let th = t0 + 7u * kgs;
                let u0 = value_vec(c0 + min(ta, nt - 1u), g, j, d4);
                let u1 = value_vec(c0 + min(tb, nt - 1u), g, j, d4);
                let u2 = value_vec(c0 + min(tc, nt - 1u), g, j, d4);
                let u3 = value_vec(c0 + min(td, nt - 1u), g, j, d4);
                let u4 = value_vec(c0 + min(te, nt - 1u), g, j, d4);
                let u5 = value_vec(c0 + min(tf, nt - 1u), g, j, d4);
                let u6 = value_vec(c0 + min(tg, nt - 1u), g, j, d4);
                let u7 = value_vec(c0 + min(th, nt - 1u), g, j, d4);
                a0 += pw(b0, ta, nt) * u0 + pw(b0, tb, nt) * u1 + pw(b0, tc, nt) * u2 + pw(b0, td, nt) * u3;
                a1 += pw(b1, ta, nt) * u0 + pw(b1, tb, nt) * u1 + pw(b1, tc, nt) * u2 + pw(b1, td, nt) * u3;
                a2 += pw(b2, ta, nt) * u0 + pw(b2, tb, nt) * u1 + pw(b2, tc, nt) * u2 + pw(b2, td, nt) * u3;
                a3 += pw(b3, ta, nt) * u0 + pw(b3, tb, nt) * u1 + pw(b3, tc, nt) * u2 + pw(b3, td, nt) * u3;
                a0 += pw(b0, te, nt) * u4 + pw(b0, tf, nt) * u5 + pw(b0, tg, nt) * u6 + pw(b0, th, nt) * u7;
                a1 += pw(b1, te, nt) * u4 + pw(b1, tf, nt) * u5 + pw(b1, tg, nt) * u6 + pw(b1, th, nt) * u7;
                a2 += pw(b2, te, nt) * u4 + pw(b2, tf, nt) * u5 + pw(b2, tg, nt) * u6 + pw(b2, th, nt) * u7;
                a3 += pw(b3, te, nt) * u4 + pw(b3, tf, nt) * u5 + pw(b3, tg, nt) * u6 + pw(b3, th, nt) * u7;
            }
        }
        workgroupBarrier();
    }
    // Sum the key groups per query head of the group into `x`.
    for (var jj = 0u; jj < MAXG; jj++) {
        if jj >= group {
            break;
        }
        partial[lid] = select(select(select(a0, a1, jj == 1u), a2, jj == 2u), a3, jj == 3u);
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
