//! The epilogue of the large cooperative-matrix GEMMs of one weight
//! that write their output directly (`matmul_coop_large.wgsl`,
//! `q4_gemm_coop_large.wgsl`; the split-K form writes partial sums its
//! own way): each of the 16 accumulators `c0_0 .. c3_3` goes through the
//! subgroup's slot of `cs` to the kernel's `emit(sg, lane, row0, col0)`,
//! with workgroup barriers around each. Statements at the end of `main`.

    let slot = sg * 256u;
    coopStoreT(c0_0, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 0u, n0 + wn + 0u);
    workgroupBarrier();
    coopStoreT(c0_1, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 0u, n0 + wn + 16u);
    workgroupBarrier();
    coopStoreT(c0_2, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 0u, n0 + wn + 32u);
    workgroupBarrier();
    coopStoreT(c0_3, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 0u, n0 + wn + 48u);
    workgroupBarrier();
    coopStoreT(c1_0, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 16u, n0 + wn + 0u);
    workgroupBarrier();
    coopStoreT(c1_1, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 16u, n0 + wn + 16u);
    workgroupBarrier();
    coopStoreT(c1_2, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 16u, n0 + wn + 32u);
    workgroupBarrier();
    coopStoreT(c1_3, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 16u, n0 + wn + 48u);
    workgroupBarrier();
    coopStoreT(c2_0, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 32u, n0 + wn + 0u);
    workgroupBarrier();
    coopStoreT(c2_1, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 32u, n0 + wn + 16u);
    workgroupBarrier();
    coopStoreT(c2_2, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 32u, n0 + wn + 32u);
    workgroupBarrier();
    coopStoreT(c2_3, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 32u, n0 + wn + 48u);
    workgroupBarrier();
    coopStoreT(c3_0, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 48u, n0 + wn + 0u);
    workgroupBarrier();
    coopStoreT(c3_1, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 48u, n0 + wn + 16u);
    workgroupBarrier();
    coopStoreT(c3_2, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 48u, n0 + wn + 32u);
    workgroupBarrier();
    coopStoreT(c3_3, &cs[slot], 16u);
    workgroupBarrier();
    emit(sg, lane, m0 + wm + 48u, n0 + wn + 48u);
