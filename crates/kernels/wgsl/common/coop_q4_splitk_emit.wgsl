//! `emit` of the split-K 4-bit cooperative-matrix GEMMs
//! (`q4_gemm_coop_splitk.wgsl`, `q4_gemm_coop_large_splitk.wgsl`): a
//! fragment from the subgroup's `cs` slot to the partial sums of its
//! split. The kernel declares `p`, `partial` and `cs`
//! (`q4_splitk_decl.wgsl`).

/// Writes the fragment the subgroup `sg` left in its `cs` slot to rows
/// `row0 ..` and columns `col0 ..` of the partial sums at `base`:
/// invocation `lane` writes column `lane % 16` of 8 rows (`(lane / 16) * 8
/// ..`), so each store of the subgroup writes two runs of 16 adjacent
/// outputs (it replaces 8 adjacent columns of one row an invocation, whose
/// stores each touched 16 rows: run bd found writing f32 rather than f16
/// output cost the large kernel 18% at K = 2,048).
fn emit(base: u32, sg: u32, lane: u32, row0: u32, col0: u32) {
    let c = lane % 16u;
    let col = col0 + c;
    if col >= p.n {
        return;
    }
    for (var e = 0u; e < 8u; e++) {
        let r = (lane / 16u) * 8u + e;
        let row = row0 + r;
        if row < p.m {
            partial[base + row * p.n + col] = cs[sg * 256u + r * 16u + c];
        }
    }
}
