//! The body of the split-KV partials (`sdpa_split.wgsl`,
//! `sdpa_split_rope.wgsl` and their `_short` forms): everything but the parameters, the bindings
//! and how the query and the call's new keys are read. The including
//! family declares `WG` (invocations per workgroup: 256, or 64 in the
//! `_short` forms; 64 at least, a multiple of 4), `Params`, the bindings
//! `q`, `k_new`, `v_new`,
//! `k_cache`, `v_cache`, `part`, and `fn query_at(row, h, d, d4) ->
//! vec4<f32>` (`vec4` `d` of query row `row`, head `h`) and `fn new_key(t,
//! kvh, d, d4) -> vec4<KvElem>` (`vec4` `d` of the call's key `t` of kv
//! head `kvh`, as the cache stores it).
//!
//! The serial chain of a workgroup is kept short for decode's few keys
//! per split: the query and the new rows are loaded with no branch in
//! between (both in flight at once); the new rows are stored into the
//! caches first and read back from there like every other key (no branch
//! per load); each invocation loads its key eight `vec4`s at a time, and
//! its first four values before the softmax's reduction, which takes the
//! tile's max and sum in one tree of `(max, sum)` pairs.

/// Query vectors per workgroup.
const MAXQ: u32 = 4u;
/// Keys per tile (one per invocation when scoring).
const TILE: u32 = WG;
/// Invocations per query vector in the reductions (`MAXQ * LANES = WG`).
const LANES: u32 = WG / MAXQ;
/// Score of a masked key.
const NEG: f32 = -3.402823e38;

/// `vec4` `d` of key `key` of kv head `kvh` (`d4` per row), from the cache.
fn key_at(key: u32, kvh: u32, d: u32, d4: u32) -> vec4<f32> {
    return vec4<f32>(k_cache[(key * p.n_kv_heads + kvh) * d4 + d]);
}

/// The same for the values.
fn value_at(key: u32, kvh: u32, d: u32, d4: u32) -> vec4<f32> {
    return vec4<f32>(v_cache[(key * p.n_kv_heads + kvh) * d4 + d]);
}

var<workgroup> qs: array<vec4<f32>, 256>;
/// Per query vector and key of the tile: the score, then its probability.
var<workgroup> sc: array<f32, MAXQ * TILE>;
/// The reduction's `(max, sum of exp(s - max))` pairs.
var<workgroup> red: array<vec2<f32>, WG>;
var<workgroup> sums: array<vec4<f32>, WG>;

/// Two `(max, sum of exp(s - max))` pairs as one.
fn merge_ml(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    let m = max(a.x, b.x);
    return vec2<f32>(m, a.y * exp(a.x - m) + b.y * exp(b.x - m));
}

/// Tree reduction of the pairs in `red` within each query vector's `LANES`
/// invocations: the result of vector `j` lands in `red[j * LANES]`.
fn reduce(lid: u32, v: vec2<f32>) {
    red[lid] = v;
    workgroupBarrier();
    let lane = lid % LANES;
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
        if lane < stride {
            red[lid] = merge_ml(red[lid], red[lid + stride]);
        }
        workgroupBarrier();
    }
}

/// Eight key `vec4`s dotted with the query's from `qs[b]` on.
fn dot8(b: u32, k0: vec4<f32>, k1: vec4<f32>, k2: vec4<f32>, k3: vec4<f32>, k4: vec4<f32>, k5: vec4<f32>, k6: vec4<f32>, k7: vec4<f32>) -> vec4<f32> {
    return qs[b] * k0 + qs[b + 1u] * k1 + qs[b + 2u] * k2 + qs[b + 3u] * k3 + qs[b + 4u] * k4 + qs[b + 5u] * k5 + qs[b + 6u] * k6 + qs[b + 7u] * k7;
}

/// A score's probability against the running max `m` (0 for a masked key
/// or a vector past `nq`).
fn prob(s: f32, m: f32, used: bool) -> f32 {
    return select(0.0, exp(s - m), used && s > NEG);
}

/// The first four values of a key group (`kg`, `kg + n_kg`, ...) weighted
/// by their probabilities from `sc[b]` on (0 past the tile's `n_here`).
fn first4(b: u32, kg: u32, n_kg: u32, n_here: u32, v0: vec4<f32>, v1: vec4<f32>, v2: vec4<f32>, v3: vec4<f32>) -> vec4<f32> {
    let p0 = select(0.0, sc[b + min(kg, TILE - 1u)], kg < n_here);
    let p1 = select(0.0, sc[b + min(kg + n_kg, TILE - 1u)], kg + n_kg < n_here);
    let p2 = select(0.0, sc[b + min(kg + 2u * n_kg, TILE - 1u)], kg + 2u * n_kg < n_here);
    let p3 = select(0.0, sc[b + min(kg + 3u * n_kg, TILE - 1u)], kg + 3u * n_kg < n_here);
    return p0 * v0 + p1 * v1 + p2 * v2 + p3 * v3;
}

/// Four values `n_kg` keys apart weighted by their probabilities from
/// `sc[b]` on.
fn next4(b: u32, n_kg: u32, u0: vec4<f32>, u1: vec4<f32>, u2: vec4<f32>, u3: vec4<f32>) -> vec4<f32> {
    return sc[b] * u0 + sc[b + n_kg] * u1 + sc[b + 2u * n_kg] * u2 + sc[b + 3u * n_kg] * u3;
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
    // The call's new rows of this kv head that the split covers (`seq *
    // d4` `vec4`s at most) and the workgroup's query vectors (`MAXQ * d4`
    // at most): an element of each per invocation and pass (one pass at
    // head dims up to 64), loaded at clamped (valid) indices with no
    // branch in between, then stored.
    let first = max(begin, p.start_pos);
    let n_new = select(0u, (end - first) * d4, first < end);
    let n_q = nq * d4;
    for (var e0 = 0u; e0 < max(n_new, n_q); e0 += WG) {
        let e = e0 + lid;
        let ew = min(e, max(n_new, 1u) - 1u);
        let new_row = first + ew / d4;
        let t = new_row - p.start_pos;
        let kw = new_key(t, kvh, ew % d4, d4);
        let vw = vec4<KvElem>(v_new[(t * p.n_kv_heads + kvh) * d4 + ew % d4]);
        let eq = min(e, n_q - 1u);
        let jq = j0 + eq / d4;
        let qv = query_at(jq / group, kvh * group + jq % group, eq % d4, d4);
        // Each workgroup of the split stores its new rows (when a kv head's
        // query vectors take several workgroups, each stores the same
        // values) and reads them back from the caches below.
        if e < n_new {
            let dst = (new_row * p.n_kv_heads + kvh) * d4 + ew % d4;
            k_cache[dst] = kw;
            v_cache[dst] = vw;
        }
        if e < n_q {
            qs[e] = qv;
        }
    }
    storageBarrier();
    workgroupBarrier();
    // Per query vector (`MAXQ` = 4 of them, named rather than arrays
    // indexed in loops: run as measured that form faster in
    // `q4_gemv_sdpa.wgsl`): the keys its row sees end at `lim0 .. lim3`;
    // its running max `m0 ..`, sum `l0 ..` and value sums `a0 ..`. Vectors
    // past `nq` compute on zeros (workgroup memory starts zeroed) or on
    // probabilities set to 0, and are never stored.
    let lim0 = p.start_pos + j0 / group + 1u;
    let lim1 = p.start_pos + (j0 + 1u) / group + 1u;
    let lim2 = p.start_pos + (j0 + 2u) / group + 1u;
    let lim3 = p.start_pos + (j0 + 3u) / group + 1u;
    var m0 = NEG;
    var m1 = NEG;
    var m2 = NEG;
    var m3 = NEG;
    var l0 = 0.0;
    var l1 = 0.0;
    var l2 = 0.0;
    var l3 = 0.0;
    var a0 = vec4<f32>();
    var a1 = vec4<f32>();
    var a2 = vec4<f32>();
    var a3 = vec4<f32>();
    let dim4 = lid % d4;
    let kg = lid / d4;
    let n_kg = WG / d4;
    let rq = lid / LANES;
    let lane = lid % LANES;
    for (var c0 = begin; c0 < end; c0 += TILE) {
        let n_here = min(TILE, end - c0);
        let key = c0 + lid;
        var d0 = vec4<f32>();
        var d1 = vec4<f32>();
        var d2 = vec4<f32>();
        var d3 = vec4<f32>();
        if lid < n_here {
            // Eight loads of the key in flight before any is used.
            var d = 0u;
            for (; d + 8u <= d4; d += 8u) {
                let k0 = key_at(key, kvh, d, d4);
                let k1 = key_at(key, kvh, d + 1u, d4);
                let k2 = key_at(key, kvh, d + 2u, d4);
                let k3 = key_at(key, kvh, d + 3u, d4);
                let k4 = key_at(key, kvh, d + 4u, d4);
                let k5 = key_at(key, kvh, d + 5u, d4);
                let k6 = key_at(key, kvh, d + 6u, d4);
                let k7 = key_at(key, kvh, d + 7u, d4);
                d0 += dot8(d, k0, k1, k2, k3, k4, k5, k6, k7);
                d1 += dot8(d4 + d, k0, k1, k2, k3, k4, k5, k6, k7);
                d2 += dot8(2u * d4 + d, k0, k1, k2, k3, k4, k5, k6, k7);
                d3 += dot8(3u * d4 + d, k0, k1, k2, k3, k4, k5, k6, k7);
            }
            for (; d < d4; d++) {
                let kv = key_at(key, kvh, d, d4);
                d0 += qs[d] * kv;
                d1 += qs[d4 + d] * kv;
                d2 += qs[2u * d4 + d] * kv;
                d3 += qs[3u * d4 + d] * kv;
            }
        }
        let live = lid < n_here;
        sc[lid] = select(NEG, (d0.x + d0.y + d0.z + d0.w) * p.scale, 0u < nq && live && key < lim0);
        sc[TILE + lid] = select(NEG, (d1.x + d1.y + d1.z + d1.w) * p.scale, 1u < nq && live && key < lim1);
        sc[2u * TILE + lid] = select(NEG, (d2.x + d2.y + d2.z + d2.w) * p.scale, 2u < nq && live && key < lim2);
        sc[3u * TILE + lid] = select(NEG, (d3.x + d3.y + d3.z + d3.w) * p.scale, 3u < nq && live && key < lim3);
        // The first four values of this invocation's key group, in flight
        // through the reduction (at indices clamped into the tile; their
        // probabilities are 0 past it).
        let last = n_here - 1u;
        let v0 = value_at(c0 + min(kg, last), kvh, dim4, d4);
        let v1 = value_at(c0 + min(kg + n_kg, last), kvh, dim4, d4);
        let v2 = value_at(c0 + min(kg + 2u * n_kg, last), kvh, dim4, d4);
        let v3 = value_at(c0 + min(kg + 3u * n_kg, last), kvh, dim4, d4);
        workgroupBarrier();
        // Each lane's `(max, sum)` over its keys of the tile, then the tree.
        var mx = NEG;
        var l = 0.0;
        if rq < nq {
            for (var r = lane; r < n_here; r += LANES) {
                mx = max(mx, sc[rq * TILE + r]);
            }
            for (var r = lane; r < n_here; r += LANES) {
                let s = sc[rq * TILE + r];
                if s > NEG {
                    l += exp(s - mx);
                }
            }
        }
        reduce(lid, vec2<f32>(mx, l));
        let t0 = red[0u];
        let t1 = red[LANES];
        let t2 = red[2u * LANES];
        let t3 = red[3u * LANES];
        let n0 = max(m0, t0.x);
        let n1 = max(m1, t1.x);
        let n2 = max(m2, t2.x);
        let n3 = max(m3, t3.x);
        let al0 = exp(m0 - n0);
        let al1 = exp(m1 - n1);
        let al2 = exp(m2 - n2);
        let al3 = exp(m3 - n3);
        l0 = l0 * al0 + t0.y * exp(t0.x - n0);
        l1 = l1 * al1 + t1.y * exp(t1.x - n1);
        l2 = l2 * al2 + t2.y * exp(t2.x - n2);
        l3 = l3 * al3 + t3.y * exp(t3.x - n3);
        m0 = n0;
        m1 = n1;
        m2 = n2;
        m3 = n3;
        a0 *= al0;
        a1 *= al1;
        a2 *= al2;
        a3 *= al3;
        sc[lid] = prob(sc[lid], n0, 0u < nq);
        sc[TILE + lid] = prob(sc[TILE + lid], n1, 1u < nq);
        sc[2u * TILE + lid] = prob(sc[2u * TILE + lid], n2, 2u < nq);
        sc[3u * TILE + lid] = prob(sc[3u * TILE + lid], n3, 3u < nq);
        workgroupBarrier();
        if kg < n_kg {
            a0 += first4(0u, kg, n_kg, n_here, v0, v1, v2, v3);
            a1 += first4(TILE, kg, n_kg, n_here, v0, v1, v2, v3);
            a2 += first4(2u * TILE, kg, n_kg, n_here, v0, v1, v2, v3);
            a3 += first4(3u * TILE, kg, n_kg, n_here, v0, v1, v2, v3);
            // Four values in flight before any is used.
            var j = kg + 4u * n_kg;
            for (; j + 3u * n_kg < n_here; j += 4u * n_kg) {
                let u0 = value_at(c0 + j, kvh, dim4, d4);
                let u1 = value_at(c0 + j + n_kg, kvh, dim4, d4);
                let u2 = value_at(c0 + j + 2u * n_kg, kvh, dim4, d4);
                let u3 = value_at(c0 + j + 3u * n_kg, kvh, dim4, d4);
                a0 += next4(j, n_kg, u0, u1, u2, u3);
                a1 += next4(TILE + j, n_kg, u0, u1, u2, u3);
                a2 += next4(2u * TILE + j, n_kg, u0, u1, u2, u3);
                a3 += next4(3u * TILE + j, n_kg, u0, u1, u2, u3);
            }
            for (; j < n_here; j += n_kg) {
                let vv = value_at(c0 + j, kvh, dim4, d4);
                a0 += sc[j] * vv;
                a1 += sc[TILE + j] * vv;
                a2 += sc[2u * TILE + j] * vv;
                a3 += sc[3u * TILE + j] * vv;
            }
        }
        workgroupBarrier();
    }
    // Sum the key groups of each dim and write the partials.
    for (var jj = 0u; jj < nq; jj++) {
        sums[lid] = select(select(select(a0, a1, jj == 1u), a2, jj == 2u), a3, jj == 3u);
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
            let m = select(select(select(m0, m1, jj == 1u), m2, jj == 2u), m3, jj == 3u);
            let l = select(select(select(l0, l1, jj == 1u), l2, jj == 2u), l3, jj == 3u);
            part[base] = vec4<f32>(m, l, 0.0, 0.0);
        }
        workgroupBarrier();
    }
}
