//! The 4 x 4 zeroed f32 accumulator fragments `c0_0 .. c3_3` of a
//! subgroup's 64 x 64 block in the large cooperative-matrix GEMMs of one
//! weight (`matmul_coop_large.wgsl`, `q4_gemm_coop_large.wgsl` and its
//! split-K form), loaded from `cs` after the kernel zeroed it; statements
//! of `main`, between two workgroup barriers.

    var c0_0 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c0_1 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c0_2 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c0_3 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c1_0 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c1_1 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c1_2 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c1_3 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c2_0 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c2_1 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c2_2 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c2_3 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c3_0 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c3_1 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c3_2 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
    var c3_3 = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);
