//! The loss half of the fused cross-entropy (`et_vk.fused_ce`):
//! `loss = sum_r (logsumexp(logits[r]) - logits[r, labels[r]]) / n_valid`
//! over the rows whose label is in `[0, vocab)` (the others add nothing;
//! see `train_ce.wgsl`). One workgroup: the rows in turn, each reduced by
//! all invocations, the per-row terms summed in invocation 0 in row order,
//! so the sum is deterministic. f32 only.
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
@group(0) @binding(3) var<storage, read_write> loss: array<Elem>;

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
fn main(@builtin(local_invocation_index) lid: u32) {
    var total = 0.0;
    for (var row = 0u; row < p.rows; row++) {
        // The reductions run for every row (barriers in uniform control
        // flow); an ignored row adds nothing.
        let base = row * p.vocab;
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
        let label = labels[row];
        if label >= 0 && u32(label) < p.vocab {
            total += (mx + log(s) - logits[base + u32(label)]) / p.n_valid;
        }
    }
    if lid == 0u {
        loss[0] = total;
    }
}
