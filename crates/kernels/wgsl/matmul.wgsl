//! Batched matrix product with an optional broadcast bias:
//! `out[b, m, n] = alpha * sum_k A[b, m, k] * B[b, k, n] + beta * bias[b, m, n]`.
//!
//! Operands are addressed through strides (in elements), so a transposed
//! weight (`linear`'s `[N, K]`) and a broadcast bias (stride 0) need no copy.
//! The output is contiguous `[batch, M, N]`. Classic 16x16 shared-memory
//! tiling, accumulating in f32. An optional activation epilogue (`act`
//! of `common/act.wgsl`, `ACT_COPY` for none) applies to the result: the
//! fused `etwgpu.linear_act` and `etwgpu.addmm_act`.
//!
//! Bounds: `tile_a` and `tile_b` are indexed by `lid.x, lid.y < TILE` and
//! `kk < TILE`; no uniform reaches them.
// variants: f32 f16
// bounds: host-checked

alias Elem = f32;

/// Tile edge; the workgroup is `TILE x TILE` and the shared tiles are sized
/// from it, so it is a `const` rather than an `override`.
const TILE: u32 = 16u;

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
    _pad0: u32,
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

var<workgroup> tile_a: array<array<f32, TILE>, TILE>;
var<workgroup> tile_b: array<array<f32, TILE>, TILE>;

@compute @workgroup_size(TILE, TILE)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let batch = wid.z;
    let row = wid.y * TILE + lid.y;
    let col = wid.x * TILE + lid.x;
    var acc = 0.0;
    let n_tiles = (p.k + TILE - 1u) / TILE;
    for (var t = 0u; t < n_tiles; t++) {
        let ka = t * TILE + lid.x;
        var va = 0.0;
        if row < p.m && ka < p.k {
            va = f32(a[batch * p.a_sb + row * p.a_sm + ka * p.a_sk]);
        }
        tile_a[lid.y][lid.x] = va;
        let kb = t * TILE + lid.y;
        var vb = 0.0;
        if kb < p.k && col < p.n {
            vb = f32(b[batch * p.b_sb + kb * p.b_sk + col * p.b_sn]);
        }
        tile_b[lid.y][lid.x] = vb;
        workgroupBarrier();
        for (var kk = 0u; kk < TILE; kk++) {
            acc += tile_a[lid.y][kk] * tile_b[kk][lid.x];
        }
        workgroupBarrier();
    }
    if row < p.m && col < p.n {
        var r = p.alpha * acc;
        if p.has_bias != 0u {
            r += p.beta * f32(bias[batch * p.bias_sb + row * p.bias_sm + col * p.bias_sn]);
        }
        out[(batch * p.m + row) * p.n + col] = Elem(act(p.act, r, p.act_p0, p.act_p1));
    }
}

// include: act.wgsl
