//! The gradient half of the fused cross-entropy (`et_vk.fused_ce`):
//! `dlogits[r] = (softmax(logits[r]) - onehot(labels[r])) / n_valid` for
//! rows whose label is in `[0, vocab)`, zero for the others (a negative
//! label is ignored, as upstream masks it; one past the vocabulary is
//! ignored the same way rather than read out of bounds). One workgroup
//! per row: a strided share of the row each for the max, the sum of
//! exponentials and the write. The loss is `train_ce_loss.wgsl`. f32 only.
// variants: f32

alias Elem = f32;

/// Invocations per workgroup; the reductions assume a power of two.
const WG: u32 = 64u;

struct Params {
    rows: u32,
    vocab: u32,
    n_valid: f32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<Elem>;
@group(0) @binding(2) var<storage, read> labels: array<i32>;
@group(0) @binding(3) var<storage, read_write> dlogits: array<Elem>;

var<workgroup> red: array<f32, WG>;

/// `v` reduced over the workgroup by max (`is_max`) or sum; every
/// invocation gets the result. Call in uniform control flow.
fn reduce(v: f32, lid: u32, is_max: bool) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if lid < stride {
            let o = red[lid + stride];
            red[lid] = select(red[lid] + o, max(red[lid], o), is_max);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let row = wid.y * groups.x + wid.x;
    // Workgroup-uniform: either every invocation of a group returns or none.
    if row >= p.rows {
        return;
    }
    let base = row * p.vocab;
    let label = labels[row];
    let valid = label >= 0 && u32(label) < p.vocab;
    // The reductions run for every row (barriers in uniform control flow);
    // an ignored row writes zeros.
    var mx = -3.402823e38;
    for (var j = lid; j < p.vocab; j += WG) {
        mx = max(mx, logits[base + j]);
    }
    mx = reduce(mx, lid, true);
    var s = 0.0;
    for (var j = lid; j < p.vocab; j += WG) {
        s += exp(logits[base + j] - mx);
    }
    s = reduce(s, lid, false);
    for (var j = lid; j < p.vocab; j += WG) {
        var d = 0.0;
        if valid {
            let onehot = select(0.0, 1.0, j == u32(label));
            d = (exp(logits[base + j] - mx) / s - onehot) / p.n_valid;
        }
        dlogits[base + j] = d;
    }
}
