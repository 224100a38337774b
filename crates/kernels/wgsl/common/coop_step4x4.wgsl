//! One staged K step (32 inputs: two halves of 16) of the large
//! cooperative-matrix GEMMs of one weight (`matmul_coop_large.wgsl`,
//! `q4_gemm_coop_large.wgsl` and its split-K form): each subgroup loads
//! its 4 A fragments (rows `wm ..` of `xs`) and 4 B fragments (columns
//! `wn ..` of `ws`) per half and adds their 16 products into
//! `c0_0 .. c3_3` (`coop_acc4x4.wgsl`). Statements of `main`'s K loop,
//! after the step's tiles are staged and a workgroup barrier; the kernel
//! declares `xs`, `ws`, `XS_LEN`, `WS_LEN` and `LDE`.

        let xb = 0u * XS_LEN;
        let wb = 0u * WS_LEN;
        {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 0u) * LDE + 0u], LDE);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 16u) * LDE + 0u], LDE);
            let a2 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 32u) * LDE + 0u], LDE);
            let a3 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 48u) * LDE + 0u], LDE);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 0u) * LDE + 0u], LDE);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 16u) * LDE + 0u], LDE);
            let b2 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 32u) * LDE + 0u], LDE);
            let b3 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 48u) * LDE + 0u], LDE);
            c0_0 = coopMultiplyAdd(a0, b0, c0_0);
            c0_1 = coopMultiplyAdd(a0, b1, c0_1);
            c0_2 = coopMultiplyAdd(a0, b2, c0_2);
            c0_3 = coopMultiplyAdd(a0, b3, c0_3);
            c1_0 = coopMultiplyAdd(a1, b0, c1_0);
            c1_1 = coopMultiplyAdd(a1, b1, c1_1);
            c1_2 = coopMultiplyAdd(a1, b2, c1_2);
            c1_3 = coopMultiplyAdd(a1, b3, c1_3);
            c2_0 = coopMultiplyAdd(a2, b0, c2_0);
            c2_1 = coopMultiplyAdd(a2, b1, c2_1);
            c2_2 = coopMultiplyAdd(a2, b2, c2_2);
            c2_3 = coopMultiplyAdd(a2, b3, c2_3);
            c3_0 = coopMultiplyAdd(a3, b0, c3_0);
            c3_1 = coopMultiplyAdd(a3, b1, c3_1);
            c3_2 = coopMultiplyAdd(a3, b2, c3_2);
            c3_3 = coopMultiplyAdd(a3, b3, c3_3);
        }
        {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 0u) * LDE + 4u], LDE);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 16u) * LDE + 4u], LDE);
            let a2 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 32u) * LDE + 4u], LDE);
            let a3 = coopLoadT<coop_mat16x16<f16, A>>(&xs[xb + (wm + 48u) * LDE + 4u], LDE);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 0u) * LDE + 4u], LDE);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 16u) * LDE + 4u], LDE);
            let b2 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 32u) * LDE + 4u], LDE);
            let b3 = coopLoad<coop_mat16x16<f16, B>>(&ws[wb + (wn + 48u) * LDE + 4u], LDE);
            c0_0 = coopMultiplyAdd(a0, b0, c0_0);
            c0_1 = coopMultiplyAdd(a0, b1, c0_1);
            c0_2 = coopMultiplyAdd(a0, b2, c0_2);
            c0_3 = coopMultiplyAdd(a0, b3, c0_3);
            c1_0 = coopMultiplyAdd(a1, b0, c1_0);
            c1_1 = coopMultiplyAdd(a1, b1, c1_1);
            c1_2 = coopMultiplyAdd(a1, b2, c1_2);
            c1_3 = coopMultiplyAdd(a1, b3, c1_3);
            c2_0 = coopMultiplyAdd(a2, b0, c2_0);
            c2_1 = coopMultiplyAdd(a2, b1, c2_1);
            c2_2 = coopMultiplyAdd(a2, b2, c2_2);
            c2_3 = coopMultiplyAdd(a2, b3, c2_3);
            c3_0 = coopMultiplyAdd(a3, b0, c3_0);
            c3_1 = coopMultiplyAdd(a3, b1, c3_1);
            c3_2 = coopMultiplyAdd(a3, b2, c3_2);
            c3_3 = coopMultiplyAdd(a3, b3, c3_3);
        }
