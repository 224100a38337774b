//! Matrix-vector route of the batched matrix product, for few rows (decode):
//! `out[b, m, n] = alpha * sum_k A[b, m, k] * B[b, k, n] + beta * bias[b, m, n]`.
//!
//! One workgroup per output element; its invocations split K and reduce in
//! shared memory, accumulating in f32. Reads of B are coalesced when K is
//! its contiguous axis (a `linear` weight `[N, K]`). Operands are addressed
//! through strides, as in `matmul.wgsl`, whose `Params` layout this shares.
//! The grid is folded into x and y (x at most 65535 workgroups); the host
//! sizes it for exactly `batch * M * N` workgroups' worth of indices. The
//! activation epilogue is `matmul.wgsl`'s.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup; the reduction assumes a power of two.
const WG: u32 = 64u;

struct Params {
    m: u32,
    n: u32,
    k: u32,
    has_bias: u32,
    a_sb: u32,
    a_sm: u32,
    a_sk: u32,
    b_sb: u32,
    b_sk: u32,
    b_sn: u32,
    bias_sb: u32,
    bias_sm: u32,
    bias_sn: u32,
    /// Batch count (`_pad0` in `matmul.wgsl`).
    batch: u32,
    alpha: f32,
    beta: f32,
    act: u32,
    act_p0: f32,
    act_p1: f32,
    _pad1: u32,
}

// Non-finite values come from bit patterns read at run time: WGSL makes a
// constant expression that evaluates to NaN or infinity an error (Chrome's
// Tint rejects `bitcast<f32>(0x7fc00000u)`).
var<private> nan_bits: u32 = 0x7fc00000u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<Elem>;
@group(0) @binding(2) var<storage, read> b: array<Elem>;
@group(0) @binding(3) var<storage, read> bias: array<Elem>;
@group(0) @binding(4) var<storage, read_write> out: array<Elem>;

var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let idx = wid.y * groups.x + wid.x;
    let per_batch = p.m * p.n;
    // Workgroup-uniform: either every invocation of a group returns or none.
    if idx >= per_batch * p.batch {
        return;
    }
    let batch = idx / per_batch;
    let row = (idx % per_batch) / p.n;
    let col = idx % p.n;
    let a_base = batch * p.a_sb + row * p.a_sm;
    let b_base = batch * p.b_sb + col * p.b_sn;
    var acc = 0.0;
    for (var kk = lid; kk < p.k; kk += WG) {
        acc += f32(a[a_base + kk * p.a_sk]) * f32(b[b_base + kk * p.b_sk]);
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if lid < stride {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    if lid == 0u {
        var r = p.alpha * partial[0];
        if p.has_bias != 0u {
            r += p.beta * f32(bias[batch * p.bias_sb + row * p.bias_sm + col * p.bias_sn]);
        }
        out[idx] = Elem(act(p.act, r, p.act_p0, p.act_p1));
    }
}

// include: act.wgsl
