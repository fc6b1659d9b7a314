/* kernels/layer_norm_backward.c: layer norm's backward, fast: each row's
 * two means of the backward in lanes (four or sixteen rows side by side),
 * then dx; dgain and dbias by columns, or in dx's sweep on one thread.
 * Tested equal to the reference in ops/layer_norm.c
 * (tests/test_kernels_vs_ref.c). */
#include "kernels/kernels.h"
#include "kernels/layer_norm_rows.h"

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
 * rows_dx_params), while the rows' x and dy are still in L1 (a sweep of
 * sixteen rows would find them out of cache).  The rows ahead are asked
 * for a line at a time in a block of sixteen, else at once. */
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
bool ag__k_layer_norm_backward(ag_graph *g, size_t rows, size_t C, const ag_real *x, const ag_real *gain,
                               const ag_real *mean, const ag_real *rstd, const ag_real *dy, ag_real *dx, bool fresh,
                               ag_real *dgain, ag_real *dbias)
{
    if (!gain) { /* gain 1 when NULL */
        ag_real *ones = ag__alloc(g, C * sizeof(ag_real));
        if (!ones) return true; /* the graph holds the failure */
        for (size_t i = 0; i < C; i++) ones[i] = 1;
        gain = ones;
    }
    int nt = ag__threads_for(rows * C);
    norm_job j = {.rows = rows, .C = C, .nt = (size_t)nt, .x = x, .gd = gain, .dy = dy,
                  .mean = (ag_real *)(uintptr_t)mean, .rstd = (ag_real *)(uintptr_t)rstd, .dx = dx,
                  .dgain = dgain, .dbias = dbias, .fresh = fresh};
    /* dx by rows; dgain and dbias by columns, so that each of their sums
     * is made by one thread in row order, whatever the count.  On one
     * thread, with all three wanted, one sweep makes them in that order. */
    j.params = nt == 1 && dx && dgain && dbias;
    if (dx) ag__parallel_for((size_t)nt, nt, norm_rows_backward_at, &j);
    if ((dgain || dbias) && !j.params) ag__parallel_for((size_t)nt, nt, norm_params_backward_at, &j);
    return true;
}
