//! The second pass of a split-K GEMM (`q4_gemm_coop_splitk.wgsl`): the
//! output is the sum of the splits' f32 partial sums, plus the bias:
//! `out[m, n] = sum_s partial[s, m, n] + bias[n]`, summed in f32 in split
//! order, one invocation an output element.
// variants: f32 f16

alias Elem = f32;

const WG: u32 = 256u;

struct Params {
    /// Output elements (M x N).
    numel: u32,
    /// Output features.
    n: u32,
    /// Splits along K.
    splits: u32,
    has_bias: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
/// `[splits, M, N]`.
@group(0) @binding(1) var<storage, read> partial: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<Elem>;
@group(0) @binding(3) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    var v = 0.0;
    for (var s = 0u; s < p.splits; s++) {
        v += partial[s * p.numel + i];
    }
    if p.has_bias != 0u {
        v += f32(bias[i % p.n]);
    }
    out[i] = Elem(v);
}
