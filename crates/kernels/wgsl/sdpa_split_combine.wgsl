//! Split-KV attention, second pass: merges the partials of
//! `sdpa_split.wgsl` into the output `[1, seq, heads, D]`. One workgroup per
//! (query row, head). The splits' (max, sum) pairs are loaded at once, an
//! invocation each, into workgroup memory; every invocation takes the
//! global max and the rescaled sum from there, and the weight
//! `exp(m - max)` of each split goes back to workgroup memory. Then
//! invocation `t` owns `vec4` `t % (D / 4)` of the head dim over every
//! `WG / (D / 4)`-th split, and those groups are summed at the end. So no
//! invocation walks all the splits through global memory (64 of them past
//! 8192 keys). The split count comes from the live context
//! (`common/split_plan.wgsl`). f32 math.
//!
//! Bounds: `heads` by `s < n_splits`, which the kernel clamps to
//! `MAX_SPLITS`; `sums` by `lid` and by `g * D / 4 + lid < WG`; no uniform
//! reaches them unclamped.
// variants: f32 f16
// bounds: host-checked

alias Elem = f32;

const WG: u32 = 256u;
/// Most splits (at least the host's `SPLIT_MAX`).
const MAX_SPLITS: u32 = 256u;

struct Params {
    /// Query rows (`S`).
    seq: u32,
    /// Query heads.
    n_heads: u32,
    /// Head dim (a multiple of 4, at most 256).
    head_dim: u32,
    /// Position of the first query row (the context is `start_pos + seq`).
    start_pos: u32,
    /// Split plan constants (`common/split_plan.wgsl`).
    split_target: u32,
    split_min_keys: u32,
    split_tile: u32,
    split_max: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
// include: split_plan.wgsl
@group(0) @binding(1) var<storage, read> part: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<Elem>>;

/// Per split: its running max and sum, then (`.x`) its weight.
var<workgroup> heads: array<vec2<f32>, MAX_SPLITS>;
var<workgroup> sums: array<vec4<f32>, WG>;

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let idx = wid.y * groups.x + wid.x;
    // Workgroup-uniform.
    if idx >= p.seq * p.n_heads {
        return;
    }
    let d4 = p.head_dim / 4u;
    let n_splits = min(split_plan(p.start_pos + p.seq).x, MAX_SPLITS);
    let stride = d4 + 1u;
    let base = idx * n_splits;
    for (var s = lid; s < n_splits; s += WG) {
        heads[s] = part[(base + s) * stride].xy;
    }
    workgroupBarrier();
    var m = -3.402823e38;
    for (var s = 0u; s < n_splits; s++) {
        m = max(m, heads[s].x);
    }
    var l = 0.0;
    for (var s = 0u; s < n_splits; s++) {
        l += heads[s].y * exp(heads[s].x - m);
    }
    workgroupBarrier();
    for (var s = lid; s < n_splits; s += WG) {
        heads[s].x = exp(heads[s].x - m);
    }
    workgroupBarrier();
    let dim = lid % d4;
    let group = lid / d4;
    let n_groups = WG / d4;
    var acc = vec4<f32>(0.0);
    if group < n_groups {
        for (var s = group; s < n_splits; s += n_groups) {
            acc += part[(base + s) * stride + 1u + dim] * heads[s].x;
        }
    }
    sums[lid] = acc;
    workgroupBarrier();
    if lid < d4 {
        var total = vec4<f32>(0.0);
        for (var g = 0u; g < n_groups; g++) {
            total += sums[g * d4 + lid];
        }
        out[idx * d4 + lid] = vec4<Elem>(total / l);
    }
}
