/* kernels/layer_norm_rows.h: what layer norm's fast forward and backward
 * (layer_norm_forward.c, layer_norm_backward.c) share: 16-byte lanes and
 * 64-byte quads of values, the quarter transposes, the sixteen rows'
 * last additions, the prefetches and the job that a block of rows reads.
 * The reference, and the math, is ops/layer_norm.c. */
#ifndef AG_KERNELS_LAYER_NORM_ROWS_H
#define AG_KERNELS_LAYER_NORM_ROWS_H

#include "core/internal.h"

#include <string.h>


/* ---- the row kernels, compiled once per instruction set ------------------
 *
 * A row's sums go to LANES partial sums, a 16-byte vector's worth (4
 * floats or 2 doubles): lane l takes elements l, l + LANES, l + 2 LANES,
 * ... in order, lane 0 then the rest (C % LANES values) one by one, and
 * the sum is lane 0 + lane 1 + ... in that order.  That is the order in
 * which the baseline build's vector loops have always added a row up, and
 * the kernels compiled for each instruction set (AG_ISA_CLONES,
 * core/internal.h) keep it, with no multiply-add fused
 * (-ffp-contract=off): every level gives the bits the library always gave.
 * Four rows share each vector addition (see QUAD), so that the sums use
 * the machine's whole vector width and each row keeps that order.
 *
 * The forward's rows go in blocks of RB: first every row's sums, then
 * what needs them (the block's divisions and square roots in one vector
 * loop each; y).  No row waits on its own sums: the rows' chains of
 * additions are independent, and the CPU overlaps them (a row at a time,
 * each row would wait for its mean, its variance and a division).  When C is a multiple of QUAD (the models'
 * widths) and a quad is one of the machine's vectors (quads_fit), a
 * block's four groups of four rows go side by side, a quad of
 * columns at a time, so that four chains of additions advance together
 * rather than one group's after another's; the sixteen rows' sums finish
 * in a few vector additions (rows16_total); and y goes by quads of
 * columns, each quad of gain and bias read once for the block.  The
 * backward's sums go the same way, sixteen rows at a time (else four),
 * and its dx four at a time (see norm_rows_backward). */
enum { LANES = 16 / (int)sizeof(ag_real), RB = 16 };
typedef ag_real lanes __attribute__((vector_size(16))); /* GCC and Clang */

static inline AG_ALWAYS_INLINE lanes lanes_at(const ag_real *p)
{
    lanes v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Four rows at once.  A quad is four 16-byte vectors (64 bytes: 16 floats
 * or 8 doubles).  The element-wise work (x - mean, the products) needs no
 * order and is done on quads of one row's QUAD consecutive values, as
 * wide as the machine's vectors; then four rows' quads are transposed by
 * quarters, so that quad c holds the c-th LANES values of rows 0..3, and
 * added into a quad of partial sums whose quarter r is row r's LANES
 * partial sums: each row's values still go to its lanes in column order,
 * one 16-byte step at a time, as in row_sum, but one addition serves four
 * rows. */
enum { QUAD = 4 * LANES };
typedef ag_real quad __attribute__((vector_size(64)));

/* Whether a quad is one of the machine's vectors (AVX-512).  Where it is
 * not, GCC keeps a quad that lives from one iteration of a loop to the
 * next in memory, written in pieces that the next iteration reads whole
 * (a store that cannot forward: a stall every time), and it takes the
 * quads' shuffles apart element by element: the quad paths would make
 * the AVX2 and baseline levels slower than their own vector loops.
 * There the rows go four side by side in 16-byte vectors instead (and y
 * and dx by the compiler's own vector loops), in the same order. */
static inline AG_ALWAYS_INLINE bool quads_fit(void) { return ag__isa() == AG_ISA_AVX512; }

/* Quarters of two quads a, b: [a0 a1 b0 b1], [a2 a3 b2 b3], [a0 a2 b0 b2]
 * and [a1 a3 b1 b3]. */
#ifdef AG_DOUBLE
#define QUARTERS_LO(a, b) __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11)
#define QUARTERS_HI(a, b) __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15)
#define QUARTERS_EVEN(a, b) __builtin_shufflevector(a, b, 0, 1, 4, 5, 8, 9, 12, 13)
#define QUARTERS_ODD(a, b) __builtin_shufflevector(a, b, 2, 3, 6, 7, 10, 11, 14, 15)
#else
#define QUARTERS_LO(a, b) __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23)
#define QUARTERS_HI(a, b) __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31)
#define QUARTERS_EVEN(a, b) __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27)
#define QUARTERS_ODD(a, b) __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31)
#endif

/* v[r] = quarters 0..3 of row r  ->  v[c] = quarter c of rows 0..3 */
static inline AG_ALWAYS_INLINE void transpose_quarters(quad *v)
{
    quad u0 = QUARTERS_LO(v[0], v[1]), u1 = QUARTERS_HI(v[0], v[1]);
    quad u2 = QUARTERS_LO(v[2], v[3]), u3 = QUARTERS_HI(v[2], v[3]);
    v[0] = QUARTERS_EVEN(u0, u2), v[1] = QUARTERS_ODD(u0, u2);
    v[2] = QUARTERS_EVEN(u1, u3), v[3] = QUARTERS_ODD(u1, u3);
}

/* *v = p[0..QUAD) */
static inline AG_ALWAYS_INLINE void quad_load(quad *v, const ag_real *p) { memcpy(v, p, sizeof *v); }

/* s[r] = 0 + lane 0 + lane 1 + ... of rows r = 0..15, whose partial sums
 * are quarter r % 4 of acc[r / 4]: the last step of row_sum (and of
 * row_dsums), with no rest columns, for sixteen rows at once.  Transposed
 * so that vector l holds lane l of every row, the rows' last additions
 * are a few vector ones instead of a chain of scalar ones per row. */
static inline AG_ALWAYS_INLINE void rows16_total(const quad acc[4], ag_real s[16])
{
#ifdef AG_DOUBLE /* acc[g] = rows 4g..4g+3, lanes 0, 1 each */
#define LANE_OF_8_ROWS(a, b, l) __builtin_shufflevector(a, b, l, l + 2, l + 4, l + 6, l + 8, l + 10, l + 12, l + 14)
    quad lo = (quad){0} + LANE_OF_8_ROWS(acc[0], acc[1], 0), hi = (quad){0} + LANE_OF_8_ROWS(acc[2], acc[3], 0);
    lo += LANE_OF_8_ROWS(acc[0], acc[1], 1), hi += LANE_OF_8_ROWS(acc[2], acc[3], 1);
#undef LANE_OF_8_ROWS
    memcpy(s, &lo, sizeof lo), memcpy(s + 8, &hi, sizeof hi);
#else /* acc[g] = rows 4g..4g+3, lanes 0..3 each; first lanes l, l+1 of 8 rows, then lane l of 16 */
#define LANES_OF_8_ROWS(a, b, l)                                                                               \
    __builtin_shufflevector(a, b, l, l + 4, l + 8, l + 12, l + 16, l + 20, l + 24, l + 28, l + 1, l + 5, l + 9, \
                            l + 13, l + 17, l + 21, l + 25, l + 29)
#define LANE_OF_16_ROWS(a, b, h) \
    __builtin_shufflevector(a, b, h, h + 1, h + 2, h + 3, h + 4, h + 5, h + 6, h + 7, h + 16, h + 17, h + 18, \
                            h + 19, h + 20, h + 21, h + 22, h + 23)
    quad l01a = LANES_OF_8_ROWS(acc[0], acc[1], 0), l01b = LANES_OF_8_ROWS(acc[2], acc[3], 0);
    quad l23a = LANES_OF_8_ROWS(acc[0], acc[1], 2), l23b = LANES_OF_8_ROWS(acc[2], acc[3], 2);
    quad t = (quad){0} + LANE_OF_16_ROWS(l01a, l01b, 0);
    t += LANE_OF_16_ROWS(l01a, l01b, 8);
    t += LANE_OF_16_ROWS(l23a, l23b, 0);
    t += LANE_OF_16_ROWS(l23a, l23b, 8);
#undef LANES_OF_8_ROWS
#undef LANE_OF_16_ROWS
    memcpy(s, &t, sizeof t);
#endif
}


/* p[0..n) asked of the memory ahead of use, for reading or for writing
 * (a line to be written is fetched all the same, unless one store writes
 * it whole).  In a training step a layer norm's x and dy, and the fresh
 * buffers for y and dx, are rarely still in L2, and the loops would wait
 * on them; the forward asks for the next block's y, the backward's sweep
 * that makes dx, dgain and dbias together for x, dy and dx some rows
 * ahead.  With the rows already in cache the asking costs, so the sweep
 * that makes dx alone asks for nothing. */
static inline AG_ALWAYS_INLINE void fetch_for_reading(const ag_real *p, size_t n)
{
    for (size_t o = 0; o < n; o += 64 / sizeof *p) __builtin_prefetch(p + o, 0); /* 64-byte lines */
}
static inline AG_ALWAYS_INLINE void fetch_for_writing(ag_real *p, size_t n)
{
    for (size_t o = 0; o < n; o += 64 / sizeof *p) __builtin_prefetch(p + o, 1);
}

/* What the rows of a forward or a backward share; rows are independent. */
typedef struct norm_job {
    size_t rows, C, nt; /* nt: blocks of rows (y, dx) or of columns (dgain, dbias) */
    const ag_real *x, *gd, *bd, *dy;
    ag_real *y, *mean, *rstd, *dx, *dgain, *dbias;
    double eps;
    bool fresh;  /* dx holds nothing yet: stored, not added */
    bool params; /* the dx sweep adds dgain and dbias too (one thread) */
} norm_job;

/* rows(j, r0, r1), where rows of 64 (the GPT's width) go through a copy
 * of rows in which C is a constant: then every row of a block is an offset
 * from one pointer, where with C a variable gcc made a pointer per row (32
 * for the backward's sixteen rows of x and dy), more than the registers,
 * and read them back from the stack in the inner loops. */
static inline AG_ALWAYS_INLINE void by_width(void (*rows)(const norm_job *, size_t, size_t), const norm_job *j,
                                             size_t r0, size_t r1)
{
    if (j->C == 64) {
        norm_job k = *j;
        k.C = 64;
        rows(&k, r0, r1);
        return;
    }
    rows(j, r0, r1);
}
#endif
