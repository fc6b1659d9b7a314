/* kernels/layer_norm_forward.c: layer norm's forward, fast: rows in
 * blocks, their sums in lanes, four (sixteen) rows' additions side by
 * side, one copy per instruction set.  Tested equal to the reference in
 * ops/layer_norm.c (tests/test_kernels_vs_ref.c); the order of its sums
 * is described in layer_norm_rows.h. */
#include "kernels/kernels.h"
#include "kernels/layer_norm_rows.h"

#include <math.h>

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
 * when the block goes by quads (spread out, the requests do not queue
 * up), else all at once. */
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

bool ag__k_layer_norm_forward(ag_graph *g, size_t rows, size_t C, const ag_real *x, const ag_real *gain,
                              const ag_real *bias, double eps, ag_real *y, ag_real *mean, ag_real *rstd)
{
    if (!gain || !bias) { /* gain 1 and bias 0 when NULL: one loop for every case */
        ag_real *unit = ag__alloc(g, 2 * C * sizeof(ag_real));
        if (!unit) return true; /* the graph holds the failure */
        for (size_t i = 0; i < C; i++) unit[i] = 1, unit[C + i] = 0;
        gain = gain ? gain : unit, bias = bias ? bias : unit + C;
    }
    int nt = ag__threads_for(rows * C);
    norm_job j = {.rows = rows, .C = C, .nt = (size_t)nt, .x = x, .gd = gain, .bd = bias, .y = y,
                  .mean = mean, .rstd = rstd, .eps = eps};
    ag__parallel_for((size_t)nt, nt, norm_rows_at, &j);
    return true;
}
