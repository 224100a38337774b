//! Three linears of one input in one dispatch (`etwgpu.linear_qkv`, the
//! tiled route): `out_j[m, n] = sum_k x[m, k] * w_j[n, k] + b_j[n]` for
//! j = 0, 1, 2 (Q, K, V), each with its own N.
//!
//! `x` is a contiguous `[M, K]`, each weight a contiguous `[N_j, K]` (the
//! `linear` layout). Workgroup z picks the projection; the tiling is
//! `matmul.wgsl`'s (16x16 shared-memory tiles, f32 accumulation).
//! Workgroups past one projection's N return before any barrier (the
//! condition is workgroup-uniform).
// variants: f32 f16

alias Elem = f32;

/// Tile edge; the workgroup is `TILE x TILE`.
const TILE: u32 = 16u;

struct Params {
    m: u32,
    k: u32,
    n0: u32,
    n1: u32,
    n2: u32,
    /// Bit j set: projection j has a bias.
    has_bias: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> w0: array<Elem>;
@group(0) @binding(3) var<storage, read> w1: array<Elem>;
@group(0) @binding(4) var<storage, read> w2: array<Elem>;
@group(0) @binding(5) var<storage, read> b0: array<Elem>;
@group(0) @binding(6) var<storage, read> b1: array<Elem>;
@group(0) @binding(7) var<storage, read> b2: array<Elem>;
@group(0) @binding(8) var<storage, read_write> out0: array<Elem>;
@group(0) @binding(9) var<storage, read_write> out1: array<Elem>;
@group(0) @binding(10) var<storage, read_write> out2: array<Elem>;

var<workgroup> tile_a: array<array<f32, TILE>, TILE>;
var<workgroup> tile_b: array<array<f32, TILE>, TILE>;

fn n_of(j: u32) -> u32 {
    switch j {
        case 0u: { return p.n0; }
        case 1u: { return p.n1; }
        default: { return p.n2; }
    }
}

fn weight(j: u32, idx: u32) -> f32 {
    switch j {
        case 0u: { return f32(w0[idx]); }
        case 1u: { return f32(w1[idx]); }
        default: { return f32(w2[idx]); }
    }
}

// include: qkv_out.wgsl

@compute @workgroup_size(TILE, TILE)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let j = wid.z;
    let n = n_of(j);
    if wid.x * TILE >= n {
        return;
    }
    let row = wid.y * TILE + lid.y;
    let col = wid.x * TILE + lid.x;
    var acc = 0.0;
    let n_tiles = (p.k + TILE - 1u) / TILE;
    for (var t = 0u; t < n_tiles; t++) {
        let ka = t * TILE + lid.x;
        var va = 0.0;
        if row < p.m && ka < p.k {
            va = f32(x[row * p.k + ka]);
        }
        tile_a[lid.y][lid.x] = va;
        let kb = t * TILE + lid.y;
        var vb = 0.0;
        if kb < p.k && col < n {
            vb = weight(j, col * p.k + kb);
        }
        tile_b[lid.y][lid.x] = vb;
        workgroupBarrier();
        for (var kk = 0u; kk < TILE; kk++) {
            acc += tile_a[lid.y][kk] * tile_b[kk][lid.x];
        }
        workgroupBarrier();
    }
    if row < p.m && col < n {
        store(j, row * n + col, acc + bias(j, col));
    }
}
