//! SwiGLU of two linears of one input in one dispatch, matrix-vector
//! route for few rows (`etwgpu.linear_swiglu` at decode): with
//! `g = x @ w_gate^T + b_gate` and `u = x @ w_up^T + b_up`,
//! `out[m, n] = g * sigmoid(g) * u`.
//!
//! The work split is `linear_gemv.wgsl`'s: an invocation owns `COLS`
//! adjacent columns and one of `lanes` slices of K (picked by the host),
//! loads one `vec4` of each column of both weights before using any, reads
//! x once for all of them and accumulates in f32. Lanes meet in a
//! workgroup-memory tree reduction. The host routes here only when K is a
//! multiple of 4. Columns past N read the last column and are not stored.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup.
const WG: u32 = 256u;
/// Output columns per invocation.
const COLS: u32 = 4u;
/// Most rows of x.
const MAX_ROWS: u32 = 4u;

struct Params {
    m: u32,
    n: u32,
    /// Input features (a multiple of 4).
    k: u32,
    /// Bit 0: the gate has a bias; bit 1: the up projection has one.
    has_bias: u32,
    /// Invocations that split one column's K: a power of two, at most `WG`.
    lanes: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> w_gate: array<vec4<Elem>>;
@group(0) @binding(3) var<storage, read> b_gate: array<Elem>;
@group(0) @binding(4) var<storage, read> w_up: array<vec4<Elem>>;
@group(0) @binding(5) var<storage, read> b_up: array<Elem>;
@group(0) @binding(6) var<storage, read_write> out: array<Elem>;

var<workgroup> partial_g: array<vec4<f32>, WG>;
var<workgroup> partial_u: array<vec4<f32>, WG>;

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let lanes = p.lanes;
    let lane = lid & (lanes - 1u);
    let slot = lid / lanes;
    let col0 = ((wid.y * groups.x + wid.x) * (WG / lanes) + slot) * COLS;
    let k4 = p.k / 4u;
    var acc_g = array<vec4<f32>, MAX_ROWS>();
    var acc_u = array<vec4<f32>, MAX_ROWS>();
    if col0 < p.n {
        let last = p.n - 1u;
        let c1 = min(col0 + 1u, last);
        let c2 = min(col0 + 2u, last);
        let c3 = min(col0 + 3u, last);
        for (var j = lane; j < k4; j += lanes) {
            let g0 = vec4<f32>(w_gate[col0 * k4 + j]);
            let g1 = vec4<f32>(w_gate[c1 * k4 + j]);
            let g2 = vec4<f32>(w_gate[c2 * k4 + j]);
            let g3 = vec4<f32>(w_gate[c3 * k4 + j]);
            let u0 = vec4<f32>(w_up[col0 * k4 + j]);
            let u1 = vec4<f32>(w_up[c1 * k4 + j]);
            let u2 = vec4<f32>(w_up[c2 * k4 + j]);
            let u3 = vec4<f32>(w_up[c3 * k4 + j]);
            for (var r = 0u; r < MAX_ROWS; r++) {
                if r < p.m {
                    let xv = vec4<f32>(x[r * k4 + j]);
                    acc_g[r] += vec4<f32>(dot(xv, g0), dot(xv, g1), dot(xv, g2), dot(xv, g3));
                    acc_u[r] += vec4<f32>(dot(xv, u0), dot(xv, u1), dot(xv, u2), dot(xv, u3));
                }
            }
        }
    }
    // One row at a time (the condition is uniform), so that the workgroup
    // memory stays small.
    for (var r = 0u; r < MAX_ROWS; r++) {
        if r < p.m {
            partial_g[lid] = acc_g[r];
            partial_u[lid] = acc_u[r];
            workgroupBarrier();
            for (var stride = lanes / 2u; stride > 0u; stride /= 2u) {
                if lane < stride {
                    partial_g[lid] += partial_g[lid + stride];
                    partial_u[lid] += partial_u[lid + stride];
                }
                workgroupBarrier();
            }
            if lane == 0u && col0 < p.n {
                let gv = partial_g[lid];
                let uv = partial_u[lid];
                for (var c = 0u; c < COLS; c++) {
                    let col = col0 + c;
                    if col < p.n {
                        var g = gv[c];
                        var u = uv[c];
                        if (p.has_bias & 1u) != 0u {
                            g += f32(b_gate[col]);
                        }
                        if (p.has_bias & 2u) != 0u {
                            u += f32(b_up[col]);
                        }
                        out[r * p.n + col] = Elem(g * (1.0 / (1.0 + exp(-g))) * u);
                    }
                }
            }
            workgroupBarrier();
        }
    }
}
