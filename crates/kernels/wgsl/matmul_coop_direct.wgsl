//! Dense float16 linear on cooperative matrices, operands loaded straight
//! from the storage buffers: `out[m, n] = sum_k x[m, k] * w[n, k] + bias[n]`
//! with x `[M, K]` and w `[N, K]` row-major f16, f32 accumulation.
//!
//! The output tiling is `matmul_coop.wgsl`'s (a `BM x BN` block per
//! workgroup of 8 subgroups of 32, 2 x 2 fragments of 16 x 16 per
//! subgroup, written out through the subgroup's `cs` slot), but there is
//! no workgroup-memory staging and no barrier in the K loop: each subgroup
//! loads its x fragments row-major and its w fragments column-major (as B)
//! from the buffers. Fragments that reach past M or N read rows the
//! output never keeps (wgpu's bounds checks and Vulkan's robust buffer
//! access keep those reads inside the buffers). The host routes here only
//! float16 linears with `K % 32 == 0` on devices whose subgroups have 32
//! invocations.
// variants: f16

enable wgpu_cooperative_matrix;

alias Elem = f32;

/// Output rows per workgroup.
const BM: u32 = 64u;
/// Output columns per workgroup.
const BN: u32 = 128u;

struct Params {
    /// Rows of x.
    m: u32,
    /// Output features.
    n: u32,
    /// Input features (a multiple of 32).
    k: u32,
    has_bias: u32,
    /// Workgroups along N.
    tiles_n: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> w: array<Elem>;
@group(0) @binding(3) var<storage, read> bias: array<Elem>;
@group(0) @binding(4) var<storage, read_write> out: array<Elem>;

/// One 16 x 16 f32 slot per subgroup, row-major: fragments on their way
/// out (and the zeros the accumulators start from).
var<workgroup> cs: array<f32, 2048>;

/// Writes the fragment the subgroup `sg` left in its `cs` slot to rows
/// `row0 ..` and columns `col0 ..` of the output: invocation `lane` writes
/// 8 consecutive columns of one row.
fn emit(sg: u32, lane: u32, row0: u32, col0: u32) {
    let row = row0 + lane / 2u;
    if row >= p.m {
        return;
    }
    for (var e = 0u; e < 8u; e++) {
        let c = (lane % 2u) * 8u + e;
        let col = col0 + c;
        if col < p.n {
            var v = cs[sg * 256u + (lane / 2u) * 16u + c];
            if p.has_bias != 0u {
                v += f32(bias[col]);
            }
            out[row * p.n + col] = Elem(v);
        }
    }
}

@compute @workgroup_size(256)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let tile = wid.y * groups.x + wid.x;
    let m0 = (tile / p.tiles_n) * BM;
    let n0 = (tile % p.tiles_n) * BN;
    let sg = lid / 32u;
    let lane = lid % 32u;
    let wm = m0 + (sg / 4u) * 32u;
    let wn = n0 + (sg % 4u) * 32u;
    // Fragment rows past the end start at the last row: their results are
    // dropped by `emit`.
    let r0 = min(wm, p.m - 1u);
    let r1 = min(wm + 16u, p.m - 1u);
    let c0 = min(wn, p.n - 1u);
    let c1 = min(wn + 16u, p.n - 1u);

    for (var i = 0u; i < 8u; i++) {
        cs[lid * 8u + i] = 0.0;
    }
    workgroupBarrier();
    var c00 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c01 = c00;
    var c10 = c00;
    var c11 = c00;
    for (var k0 = 0u; k0 < p.k; k0 += 16u) {
        let a0 = coopLoadT<coop_mat16x16<f16, A>>(&x[r0 * p.k + k0], p.k);
        let a1 = coopLoadT<coop_mat16x16<f16, A>>(&x[r1 * p.k + k0], p.k);
        let b0 = coopLoad<coop_mat16x16<f16, B>>(&w[c0 * p.k + k0], p.k);
        let b1 = coopLoad<coop_mat16x16<f16, B>>(&w[c1 * p.k + k0], p.k);
        c00 = coopMultiplyAdd(a0, b0, c00);
        c01 = coopMultiplyAdd(a0, b1, c01);
        c10 = coopMultiplyAdd(a1, b0, c10);
        c11 = coopMultiplyAdd(a1, b1, c11);
    }

    let slot = sg * 256u;
    coopStoreT(c00, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, wm, wn);
    workgroupBarrier();
    coopStoreT(c01, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, wm, wn + 16u);
    workgroupBarrier();
    coopStoreT(c10, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, wm + 16u, wn);
    workgroupBarrier();
    coopStoreT(c11, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, wm + 16u, wn + 16u);
}
