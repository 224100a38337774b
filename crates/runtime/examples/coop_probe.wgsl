//! Template of the cooperative-matrix GEMM variants that `coop_probe`
//! times: `out[m, n] = sum_k x[m, k] * w[n, k]` with x `[M, K]` f16
//! row-major, w `[N, K]` either f16 rows (dense) or 4-bit `q4gsw` weights
//! held word-major (16-byte word `j` of row `n`, inputs `32 j ..`, at word
//! `j * N + n`) with f16 scales `[K / group, N_pad]` (group 32), f32
//! accumulation, f16 out. Not a kernel-table source: the probe fills the
//! double-braced holes (constants, the staging arrays and stores, the
//! fragment code, unrolled: no loop inside the K loop is left to the driver) and
//! validates the result with naga before it makes a module.
//!
//! A workgroup of `SGM x SGN` subgroups of 32 computes a `BM x BN` block;
//! each subgroup holds `FM x FN` accumulators of 16 x 16 (`BM = SGM * FM *
//! 16`). K advances `TK` inputs a step. Staged variants copy the x tile
//! (row-major, `xs[row * LDE + k]`) and the f16 weight tile (column-major,
//! `ws[col * LDE + k]`) to workgroup memory, `STAGES` copies of each: with
//! 2, the next step's global loads are issued before the current step's
//! multiplies and stored after them, one barrier a step; with 1 and
//! prefetch (as `matmul_coop_large.wgsl`), each step stores the loads held
//! in registers, then after the staging barrier issues the next step's
//! loads (the last step its own again, in bounds), which arrive during its
//! products. A staged row is `TK + PAD` halves (`LDE` staging elements;
//! `PAD` 8 puts rows on different banks, 0 packs the tile). A K step need
//! not divide K: variants with a K tail (a step that is not a power of
//! two) take `ceil(K / TK)` steps and stage zeros for inputs past K (K a
//! multiple of 8). The staging
//! arrays hold f16 scalars (as the shipped kernels do) or `vec4<f16>`
//! (the fragment loads take an 8-byte-aligned pointer and a stride in
//! 8-byte units; a `vec4<u32>` pointer would be wider, but naga 30 gives a
//! fragment loaded through it u32 elements). Direct variants load the
//! fragments from the buffers. Results leave through a 16 x 16 f32 slot
//! per subgroup (`cs`), as in the shipped kernels.

enable f16;
enable wgpu_cooperative_matrix;

/// Fragments per subgroup along M and N.
const FM: u32 = {{FM}}u;
const FN: u32 = {{FN}}u;
/// Subgroups per workgroup along M and N.
const SGM: u32 = {{SGM}}u;
const SGN: u32 = {{SGN}}u;
const WG: u32 = SGM * SGN * 32u;
const BM: u32 = SGM * FM * 16u;
const BN: u32 = SGN * FN * 16u;
/// Inputs per K step.
const TK: u32 = {{TK}}u;
/// Halves per staging element (1: f16 scalars, 4: `vec4<f16>`).
const HE: u32 = {{HE}}u;
/// Halves of padding per staged row (a multiple of 8 with TK, so rows
/// stay 16-byte aligned; 8 starts them on different banks).
const PAD: u32 = {{PAD}}u;
/// Row stride of a staged tile, in staging elements.
const LDE: u32 = (TK + PAD) / HE;
/// Copies of each staged tile.
const STAGES: u32 = {{STAGES}}u;
/// Staging elements and halves per tile copy.
const XS_LEN: u32 = BM * LDE;
const WS_LEN: u32 = BN * LDE;
const XS_HALVES: u32 = BM * (TK + PAD);
const WS_HALVES: u32 = BN * (TK + PAD);

struct Params {
    /// Rows of x.
    m: u32,
    /// Output features.
    n: u32,
    /// Input features (a multiple of TK).
    k: u32,
    /// Row length of the scales.
    n_pad: u32,
    /// Inputs per scale group (32).
    group_size: u32,
    /// Workgroups along N.
    tiles_n: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
/// x, 4 halves an element.
@group(0) @binding(1) var<storage, read> x: array<vec4<f16>>;
{{WEIGHTS}}
@group(0) @binding(4) var<storage, read_write> out: array<f16>;

{{STAGING}}
/// One 16 x 16 f32 slot per subgroup, row-major: fragments on their way
/// out.
var<workgroup> cs: array<f32, SGM * SGN * 256u>;

/// 8 consecutive halves (16 bytes).
struct Eight {
    lo: vec4<f16>,
    hi: vec4<f16>,
}

/// 8 halves of x: row `m0 + i / (TK / 8)`, inputs `k0 + (i % (TK / 8)) * 8
/// ..` (zeros past M, and past K with a K tail).
fn load_x(m0: u32, k0: u32, i: u32) -> Eight {
    let row = m0 + i / (TK / 8u);
    if row >= p.m{{K_GUARD}} {
        return Eight(vec4<f16>(), vec4<f16>());
    }
    let at = (row * p.k + k0) / 4u + (i % (TK / 8u)) * 2u;
    return Eight(x[at], x[at + 1u]);
}

/// Where `load_x`'s unit `i` goes in a staged x tile, in halves.
fn x_at(i: u32) -> u32 {
    return (i / (TK / 8u)) * (TK + PAD) + (i % (TK / 8u)) * 8u;
}

{{WEIGHT_FNS}}

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
            out[row * p.n + col] = f16(cs[sg * 256u + (lane / 2u) * 16u + c]);
        }
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let tile = wid.y * groups.x + wid.x;
    let m0 = (tile / p.tiles_n) * BM;
    let n0 = (tile % p.tiles_n) * BN;
    // This invocation's subgroup, and that subgroup's block.
    let sg = lid / 32u;
    let lane = lid % 32u;
    let wm = (sg / SGN) * (FM * 16u);
    let wn = (sg % SGN) * (FN * 16u);
    let nk = {{NK}};

{{ACCUMULATORS}}
{{MAIN_LOOP}}
{{EPILOGUE}}
}
