/* kernels/gemm_blocks.h: the fp32 blocked product's block sizes and row
 * panels, shared by kernels/gemm.c (the loops and micro-kernels) and
 * kernels/gemm_pack.c (the packing).  Private to those two: the bf16 and
 * AMX products have block sizes of their own. */
#ifndef AG_KERNELS_GEMM_BLOCKS_H
#define AG_KERNELS_GEMM_BLOCKS_H

/* Block sizes, measured on AMD Zen 5 (48 KiB L1, 1 MiB L2) and sane
 * elsewhere.  A B micro-panel (KC x NR) streams from L2 while the kernel's
 * MR rows of A (MR x KC) stay in L1; MC rows of A are reused across the
 * whole width of the packed B block. */
#define MR 6    /* rows of a tile, every instruction set */
#define KC 384  /* depth of a block */
#define MC 72   /* rows of A per block (a multiple of MR) */
#define NC 3072 /* columns of B per block */
#define NV_MAX 4 /* vectors across a tile: NR = NV_MAX VL columns */

/* The row panel at i0 of a product whose rows end at m1: returns its
 * first row; *mr: how many of its MR rows are real, *skip: how many at its
 * top are stored already.  Whole panels are MR rows.  The last, of fewer,
 * is the whole tile that ends at row m1 when the product has MR rows or
 * more (its first rows, computed already by this thread or another, are
 * not stored again), else its mr rows, zero-padded. */
static inline int ag__gemm_panel_at(int i0, int m1, int *mr, int *skip)
{
    *mr = m1 - i0 < MR ? m1 - i0 : MR, *skip = 0;
    if (*mr < MR && i0 + *mr >= MR) *skip = MR - *mr, *mr = MR;
    return i0 - *skip;
}


/* kernels/gemm_pack.c.  mr < MR rows [i0, i0+mr) of op(A), zero rows up to
 * MR, depth [p0, p0+kc): dst[k][MR] (a product of fewer than MR rows). */
void ag__gemm_pack_a_edge(ag_real *dst, const ag_real *A, int ta, int lda, int i0, int mr, int p0, int kc);
/* Rows [ic, ic+mc) of op(A) = A^T (A stored [K, M]) as ag__gemm_panel_at's
 * row panels, panel p at dst + p MR kc, [kc][MR]. */
void ag__gemm_pack_a_block(ag_real *dst, const ag_real *A, int lda, int ic, int mc, int m1, int p0, int kc);
/* A panel of op(B), columns [j0, j0+nr) zero-padded to w: dst[k][w]. */
void ag__gemm_pack_b_panel(ag_real *dst, int w, const ag_real *B, int tb, int ldb, int j0, int nr, int p0, int kc);
/* Columns [j0, j0+nc) of B (not transposed) as panels of NR: panel p at
 * dst + p NR kc, [kc][w], w = its width rounded up to VL. */
void ag__gemm_pack_b_block(ag_real *dst, int NR, int VL, const ag_real *B, int ldb, int j0, int nc, int p0, int kc);

#endif
