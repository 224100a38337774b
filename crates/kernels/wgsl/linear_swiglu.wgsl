//! SwiGLU of two linears of one input in one dispatch
//! (`etwgpu.linear_swiglu`, the tiled route): with
//! `g = x @ w_gate^T + b_gate` and `u = x @ w_up^T + b_up`,
//! `out[m, n] = g * sigmoid(g) * u`.
//!
//! `x` is a contiguous `[M, K]`, both weights contiguous `[N, K]`. The
//! tiling is `matmul.wgsl`'s with a second weight tile and accumulator;
//! f32 accumulation.
// variants: f32 f16

alias Elem = f32;

/// Tile edge; the workgroup is `TILE x TILE`.
const TILE: u32 = 16u;

struct Params {
    m: u32,
    n: u32,
    k: u32,
    /// Bit 0: the gate has a bias; bit 1: the up projection has one.
    has_bias: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> w_gate: array<Elem>;
@group(0) @binding(3) var<storage, read> b_gate: array<Elem>;
@group(0) @binding(4) var<storage, read> w_up: array<Elem>;
@group(0) @binding(5) var<storage, read> b_up: array<Elem>;
@group(0) @binding(6) var<storage, read_write> out: array<Elem>;

var<workgroup> tile_a: array<array<f32, TILE>, TILE>;
var<workgroup> tile_g: array<array<f32, TILE>, TILE>;
var<workgroup> tile_u: array<array<f32, TILE>, TILE>;

@compute @workgroup_size(TILE, TILE)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let row = wid.y * TILE + lid.y;
    let col = wid.x * TILE + lid.x;
    var acc_g = 0.0;
    var acc_u = 0.0;
    let n_tiles = (p.k + TILE - 1u) / TILE;
    for (var t = 0u; t < n_tiles; t++) {
        let ka = t * TILE + lid.x;
        var va = 0.0;
        if row < p.m && ka < p.k {
            va = f32(x[row * p.k + ka]);
        }
        tile_a[lid.y][lid.x] = va;
        let kb = t * TILE + lid.y;
        var vg = 0.0;
        var vu = 0.0;
        if kb < p.k && col < p.n {
            vg = f32(w_gate[col * p.k + kb]);
            vu = f32(w_up[col * p.k + kb]);
        }
        tile_g[lid.y][lid.x] = vg;
        tile_u[lid.y][lid.x] = vu;
        workgroupBarrier();
        for (var kk = 0u; kk < TILE; kk++) {
            acc_g += tile_a[lid.y][kk] * tile_g[kk][lid.x];
            acc_u += tile_a[lid.y][kk] * tile_u[kk][lid.x];
        }
        workgroupBarrier();
    }
    if row < p.m && col < p.n {
        var g = acc_g;
        var u = acc_u;
        if (p.has_bias & 1u) != 0u {
            g += f32(b_gate[col]);
        }
        if (p.has_bias & 2u) != 0u {
            u += f32(b_up[col]);
        }
        out[row * p.n + col] = Elem(g * (1.0 / (1.0 + exp(-g))) * u);
    }
}
