//! Split-KV attention, second pass: merges the partials of
//! `sdpa_split.wgsl` into the output `[1, seq, heads, D]`. One workgroup per
//! (query row, head); invocation `t` owns `vec4` `t` of the head dim: the
//! global max over the splits, each split's sum and output rescaled by
//! `exp(m - max)`, then normalized. The split count comes from the live
//! context (`common/split_plan.wgsl`). f32 math.
// variants: f32 f16

alias Elem = f32;

const WG: u32 = 64u;

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

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let idx = wid.y * groups.x + wid.x;
    let d4 = p.head_dim / 4u;
    if idx >= p.seq * p.n_heads || lid >= d4 {
        return;
    }
    let n_splits = split_plan(p.start_pos + p.seq).x;
    let stride = d4 + 1u;
    let base = idx * n_splits;
    var m = -3.402823e38;
    for (var s = 0u; s < n_splits; s++) {
        m = max(m, part[(base + s) * stride].x);
    }
    var l = 0.0;
    var acc = vec4<f32>(0.0);
    for (var s = 0u; s < n_splits; s++) {
        let at = (base + s) * stride;
        let w = exp(part[at].x - m);
        l += part[at].y * w;
        acc += part[at + 1u + lid] * w;
    }
    out[idx * d4 + lid] = vec4<Elem>(acc / l);
}
