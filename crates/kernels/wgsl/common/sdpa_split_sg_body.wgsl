//! The body of the subgroup form of the split-KV partials
//! (`sdpa_split_sg.wgsl`, `sdpa_split_sg_rope.wgsl`): everything but the
//! parameters, the bindings and how the query and the call's new keys are
//! read. The including family declares `Params` (with `merge_queries`),
//! the bindings `q`, `k_new`, `v_new`, `k_cache`, `v_cache`, `part`, and
//! `fn query_at(row, h, d, d4) -> vec4<f32>` (`vec4` `d` of query row
//! `row`, head `h`) and `fn new_key(t, kvh, d, d4) -> vec4<KvElem>` (`vec4`
//! `d` of the call's key `t` of kv head `kvh`, as the cache stores it).

const WG: u32 = 128u;
/// Query vectors per workgroup.
const MAXQ: u32 = 4u;
/// `vec4`s of the head dim one invocation may own in the values
/// (`D / 4 <= MAX_DPL * subgroup size`, which the host checks).
const MAX_DPL: u32 = 4u;
/// Most subgroups of a workgroup (subgroups of at least 4).
const MAX_SG: u32 = 32u;
/// `vec4`s of workgroup memory for the final merge of the subgroups.
const SUMS: u32 = 512u;
/// Keys (and values) loaded at once by one invocation.
const KB: u32 = 8u;
/// Score of a masked key.
const NEG: f32 = -3.402823e38;

/// `vec4` `d` of key `key` of kv head `kvh` (`d4` per row), as the cache
/// holds it: the new keys through `new_key`, the older ones from the cache.
fn key_at(key: u32, kvh: u32, d: u32, d4: u32) -> vec4<f32> {
    if key >= p.start_pos {
        return vec4<f32>(new_key(key - p.start_pos, kvh, d, d4));
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

/// The workgroup's query vectors, `d4` `vec4`s each.
var<workgroup> qs: array<vec4<f32>, 256>;
/// Per subgroup: its running max (`[sg]`) and sum (`[MAX_SG + sg]`), a
/// lane per query vector.
var<workgroup> sml: array<vec4<f32>, 64>;
/// The subgroups' rescaled outputs on their way to one sum.
var<workgroup> sums: array<vec4<f32>, SUMS>;

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(subgroup_id) sg_id: u32,
    @builtin(num_subgroups) n_sg: u32,
) {
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
                let dst = (key * p.n_kv_heads + kvh) * d4 + e % d4;
                k_cache[dst] = new_key(key - p.start_pos, kvh, e % d4, d4);
                v_cache[dst] = vec4<KvElem>(v_new[((key - p.start_pos) * p.n_kv_heads + kvh) * d4 + e % d4]);
            }
        }
    }
    for (var e = lid; e < nq * d4; e += WG) {
        let j = j0 + e / d4;
        qs[e] = query_at(j / group, kvh * group + j % group, e % d4, d4);
    }
    workgroupBarrier();
    // Per query vector: the keys its row sees end at `lim`.
    var lim: array<u32, MAXQ>;
    for (var jj = 0u; jj < MAXQ; jj++) {
        lim[jj] = p.start_pos + (j0 + jj) / group + 1u;
    }
    // The values: a subgroup's lanes form `kgs` key groups of `r` lanes;
    // lane `dl` of a group owns `vec4`s `dl, dl + r, ...` of the head dim.
    let n = sg_size;
    let r = min(n, d4);
    let kgs = n / r;
    let kg = lane / r;
    let dl = lane % r;
    let owns = kg < kgs;
    // Running max and sum of each query vector (a component each), and its
    // output (`acc[jj * MAX_DPL + i]`: `vec4` `dl + i * r`). Loops over
    // query vectors and dims run to constants, so these stay in registers.
    var m_run = vec4<f32>(NEG);
    var l_run = vec4<f32>(0.0);
    var acc: array<vec4<f32>, 16>;
    // Each subgroup walks its own runs of `n` keys, a key per lane: no
    // workgroup barrier until the merge.
    for (var c0 = begin + sg_id * n; c0 < end; c0 += n_sg * n) {
        let key = c0 + lane;
        var dots: array<vec4<f32>, MAXQ>;
        if key < end {
            // `KB` loads of the key in flight before any is used.
            var d = 0u;
            for (; d + KB <= d4; d += KB) {
                var kk: array<vec4<f32>, KB>;
                for (var u = 0u; u < KB; u++) {
                    kk[u] = key_at(key, kvh, d + u, d4);
                }
                for (var jj = 0u; jj < MAXQ; jj++) {
                    for (var u = 0u; u < KB; u++) {
                        dots[jj] += qs[jj * d4 + d + u] * kk[u];
                    }
                }
            }
            for (; d < d4; d++) {
                let kv = key_at(key, kvh, d, d4);
                for (var jj = 0u; jj < MAXQ; jj++) {
                    dots[jj] += qs[jj * d4 + d] * kv;
                }
            }
        }
        var s = vec4<f32>(NEG);
        for (var jj = 0u; jj < MAXQ; jj++) {
            if jj < nq && key < end && key < lim[jj] {
                s[jj] = (dots[jj].x + dots[jj].y + dots[jj].z + dots[jj].w) * p.scale;
            }
        }
        let m_new = max(m_run, subgroupMax(s));
        let alpha = exp(m_run - m_new);
        let pr = select(vec4<f32>(0.0), exp(s - m_new), s > vec4<f32>(NEG));
        l_run = l_run * alpha + subgroupAdd(pr);
        m_run = m_new;
        for (var e = 0u; e < MAXQ * MAX_DPL; e++) {
            acc[e] *= alpha[e / MAX_DPL];
        }
        // Key group `kg` takes keys `kg, kg + kgs, ...` of the run, `KB` at
        // a time; each key's probabilities come from the lane that scored
        // it. (Subgroup-uniform trip counts: every lane shuffles.)
        let n_keys = min(n, end - c0);
        for (var t = kg; t < n + kg; t += kgs * KB) {
            var pk: array<vec4<f32>, KB>;
            for (var u = 0u; u < KB; u++) {
                pk[u] = subgroupShuffle(pr, min(t + u * kgs, n - 1u));
            }
            for (var i = 0u; i < MAX_DPL; i++) {
                let dim = dl + i * r;
                if owns && dim < d4 {
                    var vv: array<vec4<f32>, KB>;
                    for (var u = 0u; u < KB; u++) {
                        if t + u * kgs < n_keys {
                            vv[u] = value_at(c0 + t + u * kgs, kvh, dim, d4);
                        }
                    }
                    for (var jj = 0u; jj < MAXQ; jj++) {
                        var a = acc[jj * MAX_DPL + i];
                        for (var u = 0u; u < KB; u++) {
                            a += pk[u][jj] * vv[u];
                        }
                        acc[jj * MAX_DPL + i] = a;
                    }
                }
            }
        }
    }
    // Merge the subgroups once: the workgroup's max and sum per query
    // vector, then the outputs rescaled to that max and summed over the
    // (subgroup, key group) rows, `p.merge_queries` query vectors a pass
    // (as many as `sums` holds at the device's smallest subgroups).
    if lane == 0u {
        sml[sg_id] = m_run;
        sml[MAX_SG + sg_id] = l_run;
    }
    workgroupBarrier();
    var m_all = vec4<f32>(NEG);
    for (var g = 0u; g < n_sg; g++) {
        m_all = max(m_all, sml[g]);
    }
    var l_all = vec4<f32>(0.0);
    for (var g = 0u; g < n_sg; g++) {
        l_all += sml[MAX_SG + g] * exp(sml[g] - m_all);
    }
    let f = exp(m_run - m_all);
    let rows = n_sg * kgs;
    let row = sg_id * kgs + kg;
    let qp = p.merge_queries;
    for (var batch = 0u; batch * qp < nq; batch++) {
        for (var jj = 0u; jj < MAXQ; jj++) {
            if jj / qp == batch && owns {
                for (var i = 0u; i < MAX_DPL; i++) {
                    let dim = dl + i * r;
                    if dim < d4 {
                        sums[((jj % qp) * rows + row) * d4 + dim] = acc[jj * MAX_DPL + i] * f[jj];
                    }
                }
            }
        }
        workgroupBarrier();
        let q_here = min(qp, nq - batch * qp);
        for (var e = lid; e < q_here * d4; e += WG) {
            let qq = e / d4;
            let dim = e % d4;
            var total = vec4<f32>(0.0);
            for (var rr = 0u; rr < rows; rr++) {
                total += sums[(qq * rows + rr) * d4 + dim];
            }
            let jj = batch * qp + qq;
            let j = j0 + jj;
            let h = kvh * group + j % group;
            let base = (((j / group) * p.n_heads + h) * n_splits + split) * (d4 + 1u);
            part[base + 1u + dim] = total;
            if dim == 0u {
                part[base] = vec4<f32>(m_all[jj], l_all[jj], 0.0, 0.0);
            }
        }
        workgroupBarrier();
    }
}
