/* ops/layer_norm.c: layer normalisation over the last axis (as PyTorch's
 * F.layer_norm with normalized_shape [C]).
 *
 *   x [..., C], gain [C] or NULL, bias [C] or NULL -> y [..., C]
 *
 * forward, for each row of C values:
 *   mean = sum_i x_i / C
 *   var  = sum_i (x_i - mean)^2 / C              (biased, as PyTorch)
 *   rstd = 1 / sqrt(var + eps)
 *   xhat_i = (x_i - mean) * rstd
 *   y_i  = xhat_i * gain_i + bias_i              (gain 1, bias 0 when NULL)
 * backward (as llm.c's layernorm_backward), per row:
 *   dbias_i += dy_i
 *   dgain_i += dy_i * xhat_i
 *   dxhat_i  = dy_i * gain_i
 *   dx_i    += rstd * (dxhat_i - mean_j dxhat_j - xhat_i * mean_j (dxhat_j xhat_j))
 *   (the two means are the paths through mean and through rstd: every x_j
 *   moves the row's mean and variance, so each dx_i sees the whole row)
 *
 * Rows go to the threads (ag_set_threads) for y and dx; the sums over rows
 * of dgain and dbias are split by columns instead, so each is added up in
 * row order by one thread and the result never depends on the count (on
 * one thread, the dx sweep adds them up as it goes, in the same order).
 *
 * src = {x, gain, bias}, NULL entries allowed.  farg[0] = eps.  aux holds
 * 2 values per row: mean[0..rows) then rstd[0..rows). */
#include "core/internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* src/core/threads.c: threads for a loop touching about `work` values. */

/* A gain or bias must be NULL or exactly [C]. */
static bool check_vec(ag_graph *g, const ag_tensor *x, const ag_tensor *v, const char *what)
{
    if (!v) return true;
    int C = x->shape[x->ndim - 1];
    if (v->ndim == 1 && v->shape[0] == C) return true;
    char sx[96], sv[96];
    ag_graph_fail(g, AG_ERR_SHAPE, "layer_norm: %s must be [%d] for x %s, got %s", what, C,
                  ag_shape_str(x, sx, sizeof sx), ag_shape_str(v, sv, sizeof sv));
    return false;
}

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
 * each row waiting for its mean, its variance and a division, took three
 * times as long at C = 64).  When C is a multiple of QUAD (the models'
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
 * quads' shuffles apart element by element: on [1024, 64] the quad paths
 * made the AVX2 and baseline levels five times slower than AVX-512.
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

/* sum_i x_i (k = 1) or sum_i (x_i - shift)^2 (k = 2) over a row: columns
 * from i0 on (a multiple of LANES) into partial sums acc that hold those
 * of the columns before it. */
static inline AG_ALWAYS_INLINE ag_real row_sum(size_t C, size_t i0, const ag_real *xr, ag_real shift, int k,
                                               lanes acc)
{
    const size_t full = C - C % LANES;
    for (size_t i = i0; i < full; i += LANES) {
        lanes d = lanes_at(xr + i);
        if (k == 2) d -= shift, d *= d;
        acc += d;
    }
    ag_real first = acc[0], s = 0;
    for (size_t i = full; i < C; i++) {
        ag_real d = xr[i];
        if (k == 2) d -= shift, d *= d;
        first += d;
    }
    s += first;
#pragma GCC unroll 4
    for (int l = 1; l < LANES; l++) s += acc[l];
    return s;
}

/* Columns [i, i + QUAD) of rows r = 0..3 (row stride C) added into acc,
 * whose quarter r is row r's LANES partial sums: its values go to its
 * lanes in column order, as in row_sum. */
static inline AG_ALWAYS_INLINE void rows4_step(quad *acc, size_t C, size_t i, const ag_real *x, const ag_real *shift,
                                               int k)
{
    quad d[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        quad_load(&d[r], x + (size_t)r * C + i);
        if (k == 2) d[r] -= shift[r], d[r] *= d[r];
    }
    transpose_quarters(d);
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) *acc += d[c]; /* rows' columns in order */
}

/* Columns [i, i + LANES) of rows r = 0..3 (row stride C) added into
 * acc[r], row r's LANES partial sums, as in row_sum: the rows' chains of
 * additions side by side, in 16-byte vectors. */
static inline AG_ALWAYS_INLINE void rows4_lanes_step(lanes acc[4], size_t C, size_t i, const ag_real *x,
                                                     const ag_real *shift, int k)
{
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        lanes d = lanes_at(x + (size_t)r * C + i);
        if (k == 2) d -= shift[r], d *= d;
        acc[r] += d;
    }
}

/* s[r] = the sums of row_sum over rows r = 0..3 (row stride C): where
 * quads fit (see quads_fit), the first C - C % QUAD columns by quads,
 * else the first C - C % LANES with the four rows side by side; then
 * row_sum finishes each row. */
static inline AG_ALWAYS_INLINE void rows4_sum(size_t C, const ag_real *x, const ag_real *shift, int k, ag_real *s)
{
    const bool q = quads_fit();
    const size_t by_quads = q ? C - C % QUAD : 0, by_lanes = q ? by_quads : C - C % LANES;
    quad acc = {0};
    for (size_t i = 0; i < by_quads; i += QUAD) rows4_step(&acc, C, i, x, shift, k);
    lanes l[4];
    memcpy(l, &acc, sizeof l); /* quarter r: row r's partial sums */
    for (size_t i = by_quads; i < by_lanes; i += LANES) rows4_lanes_step(l, C, i, x, shift, k);
    for (int r = 0; r < 4; r++) s[r] = row_sum(C, by_lanes, x + (size_t)r * C, k == 2 ? shift[r] : 0, k, l[r]);
}

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

/* s[r] = the sums of row_sum over rows r < nb (row stride C), four at a
 * time (sixteen, with whole quads); shift is read for k = 2 only. */
static inline AG_ALWAYS_INLINE void block_sums(size_t C, size_t nb, const ag_real *x, const ag_real *shift, int k,
                                               ag_real *s)
{
    if (nb == 16 && C % QUAD == 0 && quads_fit()) { /* four rows' chains of additions side by side */
        quad acc[4] = {{0}};
        for (size_t i = 0; i < C; i += QUAD)
#pragma GCC unroll 4
            for (size_t g = 0; g < 4; g++) rows4_step(&acc[g], C, i, x + 4 * g * C, k == 2 ? shift + 4 * g : NULL, k);
        rows16_total(acc, s);
        return;
    }
    size_t r = 0;
    for (; r + 4 <= nb; r += 4) rows4_sum(C, x + r * C, k == 2 ? shift + r : NULL, k, s + r);
    for (; r < nb; r++) s[r] = row_sum(C, 0, x + r * C, k == 2 ? shift[r] : 0, k, (lanes){0});
}

/* p[0..n) asked of the memory ahead of use, for reading or for writing
 * (a line to be written is fetched all the same, unless one store writes
 * it whole).  In a training step a layer norm's x and dy, and the fresh
 * buffers for y and dx, are rarely still in L2, and the loops waited on
 * them.  In the GPT's training step (tests/bench/gpt.h), asking for the
 * next block's y took about a tenth off the forward, and asking for x, dy
 * and dx a few rows ahead a sixth off the backward's sweep that makes dx,
 * dgain and dbias together (with its sums sixteen rows at a time, asking
 * 32 rows ahead took a tenth less than 8).  With the rows already in
 * cache they cost: ~8% in the forward, ~4% in that sweep, and a quarter
 * in the sweep that makes dx alone (the per-op table's case), which asks
 * for nothing. */
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

/* The statistics of rows [b0, b0 + nb), nb <= RB:
 *   mean = sum_i x_i / C,  var = sum_i (x_i - mean)^2 / C (from the centred
 *   values, two passes: no cancellation),  rstd = 1 / sqrt(var + eps),
 * into m[0..RB) and s[0..RB) (a short block's rest: harmless values, so
 * that each step is one vector loop over RB) and j->mean, j->rstd. */
static inline AG_ALWAYS_INLINE void block_stats(const norm_job *j, size_t b0, size_t nb, ag_real *m, ag_real *s)
{
    const size_t C = j->C;
    const ag_real *x = j->x + b0 * C;
    for (size_t r = nb; r < RB; r++) m[r] = s[r] = 0;
    block_sums(C, nb, x, NULL, 1, m);
    for (size_t r = 0; r < RB; r++) m[r] /= (ag_real)C;
    block_sums(C, nb, x, m, 2, s);
    for (size_t r = 0; r < RB; r++) s[r] /= (ag_real)C;
#pragma omp simd
    for (size_t r = 0; r < RB; r++) s[r] = (ag_real)(1 / sqrt((double)s[r] + j->eps));
    memcpy(j->mean + b0, m, nb * sizeof *m);
    memcpy(j->rstd + b0, s, nb * sizeof *s);
}

/* y = (x - mean) * rstd * gain + bias for rows [b0, b0 + nb), given their
 * m and s.  The next block's y (next, unless NULL) is asked for ahead
 * (fetch_for_writing): a line as each line of this block's is written
 * when the block goes by quads (in the GPT's step, a tenth faster than
 * asking for all its lines at once), else all at once. */
static inline AG_ALWAYS_INLINE void block_y(const norm_job *j, size_t b0, size_t nb, const ag_real *m,
                                            const ag_real *s, ag_real *next)
{
    const size_t C = j->C;
    const ag_real *x = j->x + b0 * C, *gd = j->gd, *bd = j->bd;
    ag_real *y = j->y + b0 * C;
    if (nb == RB && C % QUAD == 0 && quads_fit()) { /* by quads of columns: each gain and bias quad read once */
        for (size_t i = 0; i < C; i += QUAD) {
            quad g, b;
            quad_load(&g, gd + i), quad_load(&b, bd + i);
#pragma GCC unroll 16 /* RB */
            for (size_t r = 0; r < RB; r++) {
                quad xr;
                quad_load(&xr, x + r * C + i);
                quad yr = (xr - m[r]) * s[r] * g + b;
                memcpy(y + r * C + i, &yr, sizeof yr);
                if (next) fetch_for_writing(next + r * C + i, QUAD);
            }
        }
        return;
    }
    if (next) fetch_for_writing(next, RB * C);
    for (size_t r = 0; r < nb; r++) {
        const ag_real *xr = x + r * C, mr = m[r], sr = s[r];
        ag_real *yr = y + r * C;
#pragma omp simd
        for (size_t i = 0; i < C; i++) yr[i] = (xr[i] - mr) * sr * gd[i] + bd[i];
    }
}

/* Rows [r0, r1) of the forward, RB at a time: a block's statistics, then
 * its y. */
static inline AG_ALWAYS_INLINE void norm_rows_of(const norm_job *j, size_t r0, size_t r1)
{
    const size_t C = j->C;
    for (size_t b0 = r0; b0 < r1; b0 += RB) {
        const size_t nb = r1 - b0 < RB ? r1 - b0 : RB;
        ag_real m[RB], s[RB];
        block_stats(j, b0, nb, m, s);
        block_y(j, b0, nb, m, s, b0 + 2 * RB <= r1 ? j->y + (b0 + RB) * C : NULL); /* a full block follows */
    }
}
/* rows(j, r0, r1), where rows of 64 (the GPT's width) go through a copy
 * of rows in which C is a constant: then every row of a block is an offset
 * from one pointer, where with C a variable gcc made a pointer per row (32
 * for the backward's sixteen rows of x and dy), more than the registers,
 * and read them back from the stack in the inner loops.  On [1024, 64], a
 * tenth off the forward's time and a fifth off the backward's. */
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
static inline AG_ALWAYS_INLINE void norm_rows(const norm_job *j, size_t r0, size_t r1)
{
    by_width(norm_rows_of, j, r0, r1);
}
AG_ISA_CLONES(void, norm_rows, (const norm_job *j, size_t r0, size_t r1), norm_rows(j, r0, r1))

/* Block t of nt of the rows. */
static void norm_rows_at(void *ctx, size_t t)
{
    const norm_job *j = ctx;
    AG_ISA_CALL(norm_rows, (j, j->rows * t / j->nt, j->rows * (t + 1) / j->nt));
}

ag_tensor *ag_layer_norm(ag_graph *g, ag_tensor *x, ag_tensor *gain, ag_tensor *bias, double eps)
{
    if (!ag__ok(g, "layer_norm", 1, x)) return NULL;
    if (x->ndim == 0) {
        ag_graph_fail(g, AG_ERR_SHAPE, "layer_norm: x must have at least 1 axis, got []");
        return NULL;
    }
    if (!check_vec(g, x, gain, "gain") || !check_vec(g, x, bias, "bias")) return NULL;
    if (!(eps >= 0)) {
        ag_graph_fail(g, AG_ERR_ARG, "layer_norm: eps = %g must be >= 0", eps);
        return NULL;
    }
    ag_tensor *src[3] = {x, gain, bias};
    ag_tensor *y = ag__node(g, AG_OP_LAYER_NORM, x->ndim, x->shape, 3, src);
    if (!y) return NULL;
    ag__impl(y)->farg[0] = eps;
    size_t C = (size_t)x->shape[x->ndim - 1];
    if (C == 0) return y; /* no rows to normalise */
    size_t rows = x->size / C;
    ag_real *mean = ag__save(g, (2 * rows + 1) * sizeof(ag_real)), *rstd = mean + rows;
    if (!mean) return NULL;
    ag__impl(y)->aux = mean;
    const ag_real *gd = gain ? gain->data : NULL, *bd = bias ? bias->data : NULL;
    if (!gd || !bd) { /* gain 1 and bias 0 when NULL: one loop for every case */
        ag_real *unit = ag__alloc(g, 2 * C * sizeof(ag_real));
        if (!unit) return NULL;
        for (size_t i = 0; i < C; i++) unit[i] = 1, unit[C + i] = 0;
        gd = gd ? gd : unit, bd = bd ? bd : unit + C;
    }
    int nt = ag__threads_for(x->size);
    norm_job j = {.rows = rows, .C = C, .nt = (size_t)nt, .x = x->data, .gd = gd, .bd = bd, .y = y->data,
                  .mean = mean, .rstd = rstd, .eps = eps};
    ag__parallel_for((size_t)nt, nt, norm_rows_at, &j);
    return y;
}

/* A row's sum_i dxhat_i and sum_i dxhat_i xhat_i, where
 * xhat = (x - mean) * rstd and y = xhat * gain + bias: columns from i0
 * on (a multiple of LANES) into partial sums va, vb that hold those of
 * the columns before it. */
static inline AG_ALWAYS_INLINE void row_dsums(size_t C, size_t i0, const ag_real *xr, const ag_real *dyr,
                                              const ag_real *gd, ag_real mean, ag_real rstd, lanes va, lanes vb,
                                              ag_real *a, ag_real *b)
{
    const size_t full = C - C % LANES;
    for (size_t i = i0; i < full; i += LANES) {
        lanes xhat = (lanes_at(xr + i) - mean) * rstd;
        lanes dxhat = lanes_at(dyr + i) * lanes_at(gd + i); /* y = xhat * gain + bias */
        va += dxhat;
        vb += dxhat * xhat;
    }
    ag_real fa = va[0], fb = vb[0], suma = 0, sumb = 0;
    for (size_t i = full; i < C; i++) {
        ag_real xhat = (xr[i] - mean) * rstd;
        ag_real dxhat = dyr[i] * gd[i];
        fa += dxhat;
        fb += dxhat * xhat;
    }
    suma += fa, sumb += fb;
#pragma GCC unroll 4
    for (int l = 1; l < LANES; l++) suma += va[l], sumb += vb[l];
    *a = suma;
    *b = sumb;
}

/* Columns [i, i + QUAD) of rows r = 0..3 (row stride C) added into va
 * (dxhat) and vb (dxhat * xhat), g = gain's quad there: quarter r of
 * each is row r's LANES partial sums, its values in column order, as in
 * row_dsums. */
static inline AG_ALWAYS_INLINE void rows4_dstep(quad *va, quad *vb, size_t C, size_t i, const ag_real *x,
                                                const ag_real *dy, const quad *g, const ag_real *mean,
                                                const ag_real *rstd)
{
    quad dxhat[4], p[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        quad xr, dyr;
        quad_load(&xr, x + (size_t)r * C + i), quad_load(&dyr, dy + (size_t)r * C + i);
        quad xhat = (xr - mean[r]) * rstd[r];
        dxhat[r] = dyr * *g;
        p[r] = dxhat[r] * xhat;
    }
    transpose_quarters(dxhat), transpose_quarters(p);
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) *va += dxhat[c], *vb += p[c]; /* rows' columns in order */
}

/* Columns [i, i + LANES) of rows r = 0..3 (row stride C) added into
 * va[r] (dxhat) and vb[r] (dxhat * xhat), row r's partial sums, as in
 * row_dsums: the rows side by side, in 16-byte vectors. */
static inline AG_ALWAYS_INLINE void rows4_lanes_dstep(lanes va[4], lanes vb[4], size_t C, size_t i, const ag_real *x,
                                                      const ag_real *dy, const ag_real *gd, const ag_real *mean,
                                                      const ag_real *rstd)
{
    const lanes g = lanes_at(gd + i);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        lanes xhat = (lanes_at(x + (size_t)r * C + i) - mean[r]) * rstd[r];
        lanes dxhat = lanes_at(dy + (size_t)r * C + i) * g;
        va[r] += dxhat;
        vb[r] += dxhat * xhat;
    }
}

/* The same sums for four rows (row stride C): where quads fit (see
 * quads_fit), the first C - C % QUAD columns by quads, else the first
 * C - C % LANES with the four rows side by side; then row_dsums finishes
 * each row. */
static inline AG_ALWAYS_INLINE void rows4_dsums(size_t C, const ag_real *x, const ag_real *dy, const ag_real *gd,
                                                const ag_real *mean, const ag_real *rstd, ag_real *a, ag_real *b)
{
    const bool q = quads_fit();
    const size_t by_quads = q ? C - C % QUAD : 0, by_lanes = q ? by_quads : C - C % LANES;
    quad qa = {0}, qb = {0};
    for (size_t i = 0; i < by_quads; i += QUAD) {
        quad g;
        quad_load(&g, gd + i);
        rows4_dstep(&qa, &qb, C, i, x, dy, &g, mean, rstd);
    }
    lanes va[4], vb[4];
    memcpy(va, &qa, sizeof va), memcpy(vb, &qb, sizeof vb); /* quarter r: row r's partial sums */
    for (size_t i = by_quads; i < by_lanes; i += LANES) rows4_lanes_dstep(va, vb, C, i, x, dy, gd, mean, rstd);
    for (int r = 0; r < 4; r++)
        row_dsums(C, by_lanes, x + (size_t)r * C, dy + (size_t)r * C, gd, mean[r], rstd[r], va[r], vb[r], &a[r],
                  &b[r]);
}

/* The same sums for sixteen rows (row stride C, a multiple of QUAD):
 * four groups of four rows side by side, as block_sums does, finished by
 * rows16_total. */
static inline AG_ALWAYS_INLINE void rows16_dsums(size_t C, const ag_real *x, const ag_real *dy, const ag_real *gd,
                                                 const ag_real *mean, const ag_real *rstd, ag_real *a, ag_real *b)
{
    quad va[4] = {{0}}, vb[4] = {{0}};
    for (size_t i = 0; i < C; i += QUAD) {
        quad g;
        quad_load(&g, gd + i);
#pragma GCC unroll 4
        for (size_t k = 0; k < 4; k++)
            rows4_dstep(&va[k], &vb[k], C, i, x + 4 * k * C, dy + 4 * k * C, &g, mean + 4 * k, rstd + 4 * k);
    }
    rows16_total(va, a), rows16_total(vb, b);
}

/* dx of row r, given its means ar of dxhat and br of dxhat * xhat:
 *   dx = rstd * (dxhat - ar - xhat * br)
 * stored into a fresh dx (nothing in it yet), added otherwise. */
static inline AG_ALWAYS_INLINE void row_dx(const norm_job *j, size_t r, ag_real ar, ag_real br)
{
    const size_t C = j->C;
    const ag_real *xr = j->x + r * C, *dyr = j->dy + r * C, *gd = j->gd, mr = j->mean[r], sr = j->rstd[r];
    ag_real *dxr = j->dx + r * C;
    if (j->fresh) {
#pragma omp simd
        for (size_t i = 0; i < C; i++) {
            ag_real xhat = (xr[i] - mr) * sr;
            dxr[i] = sr * (dyr[i] * gd[i] - ar - xhat * br);
        }
    } else {
#pragma omp simd
        for (size_t i = 0; i < C; i++) {
            ag_real xhat = (xr[i] - mr) * sr;
            dxr[i] += sr * (dyr[i] * gd[i] - ar - xhat * br);
        }
    }
}

/* The same for rows [b0, b0 + NR) (NR = 4 or 1, a constant where called),
 * given their ar and br, and in the same sweep the rows added into dgain
 * and dbias (y = xhat * gain + bias: dgain += dy xhat, dbias += dy), each
 * column in row order as norm_params_backward does: the same bits, and x
 * and dy read once.  Columns outside, rows inside: a column's sums go
 * through memory once per NR rows, not once a row. */
static inline AG_ALWAYS_INLINE void rows_dx_params(const norm_job *j, size_t b0, const size_t NR, const ag_real *ar,
                                                   const ag_real *br, const bool fresh)
{
    const size_t C = j->C;
    const ag_real *x = j->x + b0 * C, *dy = j->dy + b0 * C, *gd = j->gd, *mean = j->mean + b0, *rstd = j->rstd + b0;
    ag_real *dx = j->dx + b0 * C, *dgain = j->dgain, *dbias = j->dbias;
#pragma omp simd
    for (size_t i = 0; i < C; i++) {
        ag_real sg = dgain[i], sb = dbias[i];
#pragma GCC unroll 4
        for (size_t r = 0; r < NR; r++) {
            const ag_real xhat = (x[r * C + i] - mean[r]) * rstd[r], d = dy[r * C + i];
            const ag_real v = rstd[r] * (d * gd[i] - ar[r] - xhat * br[r]);
            dx[r * C + i] = fresh ? v : dx[r * C + i] + v;
            sb += d, sg += d * xhat;
        }
        dgain[i] = sg, dbias[i] = sb;
    }
}

/* rows_dx_params for four rows when C is a multiple of QUAD, by quads of
 * columns: the same values in the same order, with each quad of gain,
 * dgain and dbias read once for the four rows; and when ahead > 0, x, dy
 * and dx of the rows that far on asked for a line as each line is done.
 * The rows' mean, rstd, ar and br are copied first: read through their
 * pointers, each store to dx (an ag_real that might be one of them) would
 * have them read again. */
static inline AG_ALWAYS_INLINE void rows4_dx_params_quads(const norm_job *j, size_t b0, const ag_real *a4,
                                                          const ag_real *b4, const bool fresh, size_t ahead)
{
    const size_t C = j->C;
    const ag_real *x = j->x + b0 * C, *dy = j->dy + b0 * C, *gd = j->gd;
    ag_real *dx = j->dx + b0 * C, *dgain = j->dgain, *dbias = j->dbias;
    ag_real mean[4], rstd[4], ar[4], br[4];
    memcpy(mean, j->mean + b0, sizeof mean), memcpy(rstd, j->rstd + b0, sizeof rstd);
    memcpy(ar, a4, sizeof ar), memcpy(br, b4, sizeof br);
    for (size_t i = 0; i < C; i += QUAD) {
        quad g, sg, sb;
        quad_load(&g, gd + i), quad_load(&sg, dgain + i), quad_load(&sb, dbias + i);
#pragma GCC unroll 4
        for (size_t r = 0; r < 4; r++) {
            const size_t o = r * C + i;
            quad xr, d, v;
            quad_load(&xr, x + o), quad_load(&d, dy + o);
            const quad xhat = (xr - mean[r]) * rstd[r];
            v = rstd[r] * (d * g - ar[r] - xhat * br[r]);
            if (!fresh) {
                quad old;
                quad_load(&old, dx + o);
                v = old + v;
            }
            memcpy(dx + o, &v, sizeof v);
            sb += d, sg += d * xhat;
            if (ahead) {
                fetch_for_reading(x + o + ahead * C, QUAD), fetch_for_reading(dy + o + ahead * C, QUAD);
                fetch_for_writing(dx + o + ahead * C, QUAD);
            }
        }
        memcpy(dgain + i, &sg, sizeof sg), memcpy(dbias + i, &sb, sizeof sb);
    }
}

/* The sweep with dgain and dbias asks for x, dy and dx this many bytes of
 * x ahead: 32 rows of 64 floats, a quarter of L1 for the three. */
enum { AHEAD_BYTES = 8192 };

/* The means a of dxhat and b of dxhat * xhat of rows [b0, b0 + nb)
 * (nb = 16, 4 or 1), into a[0..16) and b[0..16). */
static inline AG_ALWAYS_INLINE void block_dmeans(const norm_job *j, size_t b0, size_t nb, ag_real *a, ag_real *b)
{
    const size_t C = j->C;
    const ag_real *x = j->x + b0 * C, *dy = j->dy + b0 * C, *mean = j->mean + b0, *rstd = j->rstd + b0;
    if (nb == 16) {
        rows16_dsums(C, x, dy, j->gd, mean, rstd, a, b);
        for (size_t r = 0; r < 16; r++) a[r] /= (ag_real)C, b[r] /= (ag_real)C;
        return;
    }
    if (nb == 4) rows4_dsums(C, x, dy, j->gd, mean, rstd, a, b);
    else row_dsums(C, 0, x, dy, j->gd, mean[0], rstd[0], (lanes){0}, (lanes){0}, &a[0], &b[0]);
    for (size_t r = 0; r < nb; r++) a[r] /= (ag_real)C, b[r] /= (ag_real)C;
}

/* dx of rows [b0, b0 + nb), given their means a and b (r1: where the
 * rows end): row by row (row_dx), or with dgain and dbias four rows at a
 * time when j->params (rows4_dx_params_quads in a block of sixteen, else
 * rows_dx_params), while the rows' x and dy are still in L1 (sweeps of
 * sixteen rows were 30% slower with x and dy out of cache).  The rows
 * ahead are asked for a line at a time in a block of sixteen (in the
 * GPT's step, a tenth faster than four rows' lines at once), else at once. */
static inline AG_ALWAYS_INLINE void block_dx(const norm_job *j, size_t b0, size_t nb, size_t r1, const ag_real *a,
                                             const ag_real *b)
{
    if (!j->params) {
        for (size_t r = 0; r < nb; r++) row_dx(j, b0 + r, a[r], b[r]);
        return;
    }
    const bool fresh = j->fresh;
    const size_t rb = j->C * sizeof(ag_real), ahead = rb < AHEAD_BYTES / 4 ? AHEAD_BYTES / rb : 4;
    for (size_t q = 0; q < nb; q += 4) {
        const size_t r = b0 + q, on = r + ahead + 4 <= r1 ? ahead : 0; /* rows on to ask for, if any */
        if (nb == 16) {
            fresh ? rows4_dx_params_quads(j, r, a + q, b + q, true, on)
                  : rows4_dx_params_quads(j, r, a + q, b + q, false, on);
            continue;
        }
        if (on) {
            const size_t o = (r + on) * j->C;
            fetch_for_reading(j->x + o, 4 * j->C), fetch_for_reading(j->dy + o, 4 * j->C);
            fetch_for_writing(j->dx + o, 4 * j->C);
        }
        if (nb == 1) fresh ? rows_dx_params(j, r, 1, a, b, true) : rows_dx_params(j, r, 1, a, b, false);
        else fresh ? rows_dx_params(j, r, 4, a + q, b + q, true) : rows_dx_params(j, r, 4, a + q, b + q, false);
    }
}

/* Rows [r0, r1) of dx: the rows' means a (of dxhat) and b (of
 * dxhat * xhat), sixteen rows at a time when C is a multiple of QUAD and
 * quads fit (rows16_dsums: four groups' chains of additions side by side),
 * else four
 * (rows4_dsums; the last few one by one); then their dx (block_dx). */
static inline AG_ALWAYS_INLINE void norm_rows_backward_of(const norm_job *j, size_t r0, size_t r1)
{
    for (size_t b0 = r0; b0 < r1;) {
        const size_t nb = r1 - b0 >= 16 && j->C % QUAD == 0 && quads_fit() ? 16 : r1 - b0 < 4 ? 1 : 4;
        ag_real a[16], b[16];
        block_dmeans(j, b0, nb, a, b);
        block_dx(j, b0, nb, r1, a, b);
        b0 += nb;
    }
}
static inline AG_ALWAYS_INLINE void norm_rows_backward(const norm_job *j, size_t r0, size_t r1)
{
    by_width(norm_rows_backward_of, j, r0, r1);
}
AG_ISA_CLONES(void, norm_rows_backward, (const norm_job *j, size_t r0, size_t r1), norm_rows_backward(j, r0, r1))

/* Block t of nt of the rows. */
static void norm_rows_backward_at(void *ctx, size_t t)
{
    const norm_job *j = ctx;
    AG_ISA_CALL(norm_rows_backward, (j, j->rows * t / j->nt, j->rows * (t + 1) / j->nt));
}

/* Rows [0, nr) of x and dy (row stride C) added into columns [c0, c1) of
 * dgain and dbias.  A column's sum is its own, in row order: the same bits
 * at any vector width.  nr = RB, a constant: the row loop unrolls, and
 * each column is read and written once per RB rows; other counts take the
 * rows one by one. */
static inline AG_ALWAYS_INLINE void params_rows(size_t C, size_t c0, size_t c1, size_t nr, const ag_real *x,
                                                const ag_real *dy, const ag_real *mean, const ag_real *rstd,
                                                ag_real *dgain, ag_real *dbias)
{
    if (nr == RB) {
        if (dbias) /* y = ... + bias */
#pragma omp simd
            for (size_t i = c0; i < c1; i++) {
                ag_real b = dbias[i];
#pragma GCC unroll 16 /* RB */
                for (size_t r = 0; r < RB; r++) b += dy[r * C + i];
                dbias[i] = b;
            }
        if (dgain) /* y = xhat * gain */
#pragma omp simd
            for (size_t i = c0; i < c1; i++) {
                ag_real g = dgain[i];
#pragma GCC unroll 16 /* RB */
                for (size_t r = 0; r < RB; r++) g += dy[r * C + i] * ((x[r * C + i] - mean[r]) * rstd[r]);
                dgain[i] = g;
            }
        return;
    }
    for (size_t r = 0; r < nr; r++) {
        const ag_real *xr = x + r * C, *dyr = dy + r * C;
        if (dbias)
#pragma omp simd
            for (size_t i = c0; i < c1; i++) dbias[i] += dyr[i];
        if (dgain)
#pragma omp simd
            for (size_t i = c0; i < c1; i++) dgain[i] += dyr[i] * ((xr[i] - mean[r]) * rstd[r]);
    }
}

/* Columns [c0, c1) of dgain and dbias: sums over the rows, RB at a time. */
static inline AG_ALWAYS_INLINE void norm_params_backward(const norm_job *j, size_t c0, size_t c1)
{
    const size_t C = j->C;
    for (size_t r0 = 0; r0 < j->rows; r0 += RB) {
        const size_t nr = j->rows - r0 < RB ? j->rows - r0 : RB;
        params_rows(C, c0, c1, nr, j->x + r0 * C, j->dy + r0 * C, j->mean + r0, j->rstd + r0, j->dgain, j->dbias);
    }
}
AG_ISA_CLONES(void, norm_params_backward, (const norm_job *j, size_t c0, size_t c1), norm_params_backward(j, c0, c1))

/* Block t of nt of the columns. */
static void norm_params_backward_at(void *ctx, size_t t)
{
    const norm_job *j = ctx;
    AG_ISA_CALL(norm_params_backward, (j, j->C * t / j->nt, j->C * (t + 1) / j->nt));
}

static void layer_norm_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0], *gain = y->src[1], *bias = y->src[2];
    bool fresh = false;
    ag_real *dx = x->requires_grad ? ag__grad_fresh(g, x, &fresh) : NULL;
    ag_real *dgain = gain && gain->requires_grad ? ag__grad(g, gain) : NULL;
    ag_real *dbias = bias && bias->requires_grad ? ag__grad(g, bias) : NULL;
    if (ag_graph_status(g) != AG_OK || y->size == 0) return;
    size_t C = (size_t)y->shape[y->ndim - 1], rows = y->size / C;
    ag_real *mean = ag__impl(y)->aux, *rstd = mean + rows;
    const ag_real *gd = gain ? gain->data : NULL;
    if (!gd) { /* gain 1 when NULL */
        ag_real *ones = ag__alloc(g, C * sizeof(ag_real));
        if (!ones) return;
        for (size_t i = 0; i < C; i++) ones[i] = 1;
        gd = ones;
    }
    int nt = ag__threads_for(y->size);
    norm_job j = {.rows = rows, .C = C, .nt = (size_t)nt, .x = x->data, .gd = gd, .dy = y->grad,
                  .mean = mean, .rstd = rstd, .dx = dx, .dgain = dgain, .dbias = dbias,
                  .fresh = fresh};
    /* dx by rows; dgain and dbias by columns, so that each of their sums
     * is made by one thread in row order, whatever the count.  On one
     * thread, with all three wanted, one sweep makes them in that order. */
    j.params = nt == 1 && dx && dgain && dbias;
    if (dx) ag__parallel_for((size_t)nt, nt, norm_rows_backward_at, &j);
    if ((dgain || dbias) && !j.params) ag__parallel_for((size_t)nt, nt, norm_params_backward_at, &j);
}

static ag_tensor *case_affine(ag_graph *g, ag_tensor *const *in) { return ag_layer_norm(g, in[0], in[1], in[2], 1e-5); }
static ag_tensor *case_plain(ag_graph *g, ag_tensor *const *in) { return ag_layer_norm(g, in[0], NULL, NULL, 1e-5); }
static ag_tensor *case_gain_only(ag_graph *g, ag_tensor *const *in)
{
    return ag_layer_norm(g, in[0], in[1], NULL, 1e-5);
}
static ag_tensor *case_bias_only(ag_graph *g, ag_tensor *const *in)
{
    return ag_layer_norm(g, in[0], NULL, in[1], 1e-5);
}
static ag_tensor *case_big_eps(ag_graph *g, ag_tensor *const *in) { return ag_layer_norm(g, in[0], in[1], in[2], 0.5); }

static const ag_op_case cases[] = {
    {"[3, 5] gain [5] bias [5]", 3, {2, 1, 1}, {{3, 5}, {5}, {5}}, -2, 2, 0, case_affine},
    {"[2, 3, 4] no gain, no bias", 1, {3}, {{2, 3, 4}}, -2, 2, 0, case_plain},
    {"[2, 1, 6] gain only", 2, {3, 1}, {{2, 1, 6}, {6}}, -2, 2, 0, case_gain_only},
    {"[4, 3] bias only", 2, {2, 1}, {{4, 3}, {3}}, -2, 2, 0, case_bias_only},
    {"[1, 4] one row, eps 0.5", 3, {2, 1, 1}, {{1, 4}, {4}, {4}}, -2, 2, 0, case_big_eps},
    {"[3, 1] size-1 rows", 3, {2, 1, 1}, {{3, 1}, {1}, {1}}, -2, 2, 0, case_affine},
};

const ag_op_desc ag_op_layer_norm = {.name = "layer_norm", .backward = layer_norm_backward, AG_CASES(cases)};
