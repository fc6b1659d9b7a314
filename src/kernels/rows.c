/* kernels/rows.c: the row kernels of softmax, log-softmax and
 * cross-entropy: a row's max, its exps and their sum (the float build's exp
 * by kernels/fastmath.h), sixteen rows side by side, softmax's rows and
 * log-softmax's backward.  Each is one clone per instruction set, the same
 * order of operations in each. */
#include "core/internal.h"

#include <math.h>

/* Let the compiler turn selects (c ? a : b) into vector blends: nothing here
 * reads the floating-point exception flags, which is all that
 * -ftrapping-math protects, and it keeps GCC from if-converting them.  Set
 * before core/blocks.h, whose loops must share their callers' options. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "core/blocks.h"
#include "kernels/fastmath.h"

/* ---- exp over a row (softmax and its fused forms) ----------------------- */

/* NaN and +inf in a row of softmax, log-softmax or cross-entropy: the row
 * max passes NaNs over (one vector max an element), and the exps still
 * see them: exp(NaN - max) is NaN, and so is exp(inf - inf) when the max
 * is +inf; the row's sum is then NaN and so is every output, as in
 * PyTorch.  The one row this misses is one with nothing above -inf but a
 * NaN, whose max is -inf, the mark of a fully masked row: there, and only
 * there (a rare branch), the row is searched for a NaN. */
static bool has_nan(size_t n, const ag_real *x)
{
    for (size_t i = 0; i < n; i++)
        if (x[i] != x[i]) return true;
    return false;
}

#ifndef AG_DOUBLE
/* Here only, a * b + c may be one fused multiply-add where the clone's
 * instruction set has one (the polynomial below is a chain of them): the
 * result stays within exp_core's error bound, and the same on every run. */
AG_FUSED_BEGIN
#endif

/* The largest of n values, in 16 running maxima (vector lanes): the max
 * does not depend on the order, so this is the same value as a plain
 * loop.  NaNs are passed over, but a row of nothing above -inf that holds
 * a NaN gives NaN: it is not a fully masked row (see has_nan).
 * max_lanes keeps the running maxima of the whole vectors in lane and
 * returns the rest's max; row_max folds the lanes in pairs. */
static inline AG_ALWAYS_INLINE ag_real max_lanes(size_t n, const ag_real *x, ag_real lane[16])
{
    ag_real m = -INFINITY;
    for (int l = 0; l < 16; l++) lane[l] = -INFINITY;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) {
            ag_real v = x[i + l];
            lane[l] = v > lane[l] ? v : lane[l];
        }
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static inline AG_ALWAYS_INLINE ag_real row_max(size_t n, const ag_real *x)
{
    ag_real lane[16], m = max_lanes(n, x, lane);
    for (int w = 8; w >= 1; w /= 2) /* the lanes in pairs: 4 vector steps */
#pragma GCC unroll 8
        for (int l = 0; l < w; l++) lane[l] = lane[l + w] > lane[l] ? lane[l + w] : lane[l];
    m = lane[0] > m ? lane[0] : m;
    return m == -INFINITY && has_nan(n, x) ? NAN : m;
}

AG_ISA_CLONES(ag_real, row_max, (size_t n, const ag_real *x), return row_max(n, x))
ag_real ag__row_max(size_t n, const ag_real *x) { return AG_ISA_CALL(row_max, (n, x)); }

#ifndef AG_DOUBLE
/* y_i = exp(x_i - shift) for i < n (y may be x), added up in 16 partial
 * sums (vector lanes), lane l of the sum of the y_i with i % 16 = l.  The
 * last piece of fewer than 16 (a whole row of a toy model's attention)
 * goes through a padded copy, so that it is a vector step too: its
 * padding is -inf, whose exp is 0. */
static inline AG_ALWAYS_INLINE void exp_lanes(size_t n, const ag_real *x, ag_real shift, ag_real *y, ag_real lane[16])
{
    ag_real lane2[16] = {0};
    for (int l = 0; l < 16; l++) lane[l] = 0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) { /* two independent vectors in flight */
#pragma omp simd
        for (int l = 0; l < 16; l++) lane[l] += y[i + l] = exp_core(x[i + l] - shift, 0);
#pragma omp simd
        for (int l = 0; l < 16; l++) lane2[l] += y[i + 16 + l] = exp_core(x[i + 16 + l] - shift, 0);
    }
    for (; i + 16 <= n; i += 16)
#pragma omp simd
        for (int l = 0; l < 16; l++) lane[l] += y[i + l] = exp_core(x[i + l] - shift, 0);
    for (int l = 0; l < 16; l++) lane[l] += lane2[l];
    if (i < n) {
        ag_real xt[16], yt[16];
        for (int l = 0; l < 16; l++) xt[l] = i + l < n ? x[i + l] : -INFINITY;
#pragma omp simd
        for (int l = 0; l < 16; l++) lane[l] += yt[l] = exp_core(xt[l] - shift, 0);
        for (size_t l = 0; i + l < n; l++) y[i + l] = yt[l];
    }
}
#endif

/* y_i = exp(x_i - shift) for i < n (y may be x); returns sum_i y_i.  The
 * float build vectorises for the machine (one clone per instruction set,
 * picked by ag__isa): exp_lanes, then the lanes in a fixed order. */
static inline AG_ALWAYS_INLINE ag_real exp_sum(size_t n, const ag_real *x, ag_real shift, ag_real *y)
{
    ag_real s = 0;
#ifdef AG_DOUBLE
    for (size_t i = 0; i < n; i++) s += y[i] = exp(x[i] - shift);
#else
    ag_real lane[16];
    exp_lanes(n, x, shift, y, lane);
    /* the lanes in pairs: 8 + 4 + 2 + 1 additions in 4 vector steps */
    for (int l = 0; l < 8; l++) lane[l] += lane[l + 8];
    for (int l = 0; l < 4; l++) lane[l] += lane[l + 4];
    for (int l = 0; l < 2; l++) lane[l] += lane[l + 2];
    s = lane[0] + lane[1];
#endif
    return s;
}
AG_ISA_CLONES(ag_real, exp_sum, (size_t n, const ag_real *x, ag_real shift, ag_real *y), return exp_sum(n, x, shift, y))
ag_real ag__exp_sum(size_t n, const ag_real *x, ag_real shift, ag_real *y)
{
    return AG_ISA_CALL(exp_sum, (n, x, shift, y));
}

/* ---- row max and exps, sixteen rows side by side ------------------------ */

#ifndef AG_DOUBLE
typedef float lanes16 __attribute__((vector_size(64))); /* GCC and Clang */

/* The last steps of row_max (max) and exp_sum (sum) for one pair of
 * halves: lane l of lo with lane l of hi, which was lane l + w of its row.
 * (Vectors by address: a 64-byte one by value is an ABI matter.) */
static inline AG_ALWAYS_INLINE void fold_pair(lanes16 *out, const lanes16 *lo, const lanes16 *hi, bool max)
{
    if (!max) {
        *out = *lo + *hi;
        return;
    }
    for (int l = 0; l < 16; l++) (*out)[l] = (*hi)[l] > (*lo)[l] ? (*hi)[l] : (*lo)[l];
}

/* Of two vectors each holding rows of 2w lanes, one after another: the
 * first halves of their rows (h = 0) or the second halves (h = w), in
 * order, w lanes each.  Lane i of the result is lane i % w of half i / w. */
#define HALF_LANE(i, w, h) ((i) / (w) * 2 * (w) + (i) % (w) + (h))
#define HALVES(a, b, w, h)                                                                                   \
    __builtin_shufflevector(a, b, HALF_LANE(0, w, h), HALF_LANE(1, w, h), HALF_LANE(2, w, h),                \
                            HALF_LANE(3, w, h), HALF_LANE(4, w, h), HALF_LANE(5, w, h), HALF_LANE(6, w, h),  \
                            HALF_LANE(7, w, h), HALF_LANE(8, w, h), HALF_LANE(9, w, h), HALF_LANE(10, w, h), \
                            HALF_LANE(11, w, h), HALF_LANE(12, w, h), HALF_LANE(13, w, h),                   \
                            HALF_LANE(14, w, h), HALF_LANE(15, w, h))

/* Lane r of the result: the 16 lanes of row r (a[r]) folded in pairs, l
 * with l + w for w = 8, 4, 2, 1, as row_max and exp_sum fold one row's.
 * Each step packs twice as many rows into a vector, half as many lanes
 * each, so that sixteen rows take 15 vector steps where one row took 4. */
static inline AG_ALWAYS_INLINE void fold16(const lanes16 a[16], bool max, float out[16])
{
    lanes16 b[8], c[4], d[2], e, lo, hi;
    for (int k = 0; k < 8; k++) { /* rows 2k, 2k + 1: 8 lanes each */
        lo = HALVES(a[2 * k], a[2 * k + 1], 8, 0), hi = HALVES(a[2 * k], a[2 * k + 1], 8, 8);
        fold_pair(&b[k], &lo, &hi, max);
    }
    for (int k = 0; k < 4; k++) { /* rows 4k..4k + 3: 4 lanes each */
        lo = HALVES(b[2 * k], b[2 * k + 1], 4, 0), hi = HALVES(b[2 * k], b[2 * k + 1], 4, 4);
        fold_pair(&c[k], &lo, &hi, max);
    }
    for (int k = 0; k < 2; k++) { /* rows 8k..8k + 7: 2 lanes each */
        lo = HALVES(c[2 * k], c[2 * k + 1], 2, 0), hi = HALVES(c[2 * k], c[2 * k + 1], 2, 2);
        fold_pair(&d[k], &lo, &hi, max);
    }
    lo = HALVES(d[0], d[1], 1, 0), hi = HALVES(d[0], d[1], 1, 1);
    fold_pair(&e, &lo, &hi, max);
    memcpy(out, &e, sizeof e);
}
#undef HALF_LANE
#undef HALVES

/* max_exp_sum_rows for 16 rows: every row's lanes, then one fold16. */
static inline AG_ALWAYS_INLINE void max_exp_sum16(size_t n, const float *x, float *max, float *sum, float *y)
{
    lanes16 a[16];
    float rest[16], lane[16];
    for (int r = 0; r < 16; r++) {
        rest[r] = max_lanes(n, x + r * n, lane);
        memcpy(&a[r], lane, sizeof lane);
    }
    float m[16], s[16];
    fold16(a, true, m);
    for (int r = 0; r < 16; r++) { /* row_max's last step */
        float mr = m[r] > rest[r] ? m[r] : rest[r];
        max[r] = mr == -INFINITY && has_nan(n, x + r * n) ? NAN : mr;
    }
    for (int r = 0; r < 16; r++) {
        if (max[r] == -INFINITY) { /* nothing above -inf: no exps, sum 0 */
            a[r] = (lanes16){0};
            continue;
        }
        exp_lanes(n, x + r * n, max[r], y + r * n, lane);
        memcpy(&a[r], lane, sizeof lane);
    }
    fold16(a, false, s);
    memcpy(sum, s, sizeof s);
}
#endif

/* Over `rows` rows of n values x (row stride n): max[r] = row_max(row r),
 * and when that is above -inf, y's row r = exp(x - max[r]) and sum[r] =
 * their sum (exp_sum), else sum[r] = 0 (y's row left as it was).  Bit for
 * bit row_max's and exp_sum's: each row's lanes fold in their order, but
 * the float build folds sixteen rows side by side (fold16), whose chains
 * of folds overlap instead of waiting one after another. */
static inline AG_ALWAYS_INLINE void max_exp_sum_rows(size_t rows, size_t n, const ag_real *x, ag_real *max,
                                                     ag_real *sum, ag_real *y)
{
    size_t r = 0;
#ifndef AG_DOUBLE
    for (; r + 16 <= rows; r += 16)
        if (n == 64) /* the GPT's vocabulary: a constant width, loops unrolled */
            max_exp_sum16(64, x + r * n, max + r, sum + r, y + r * n);
        else
            max_exp_sum16(n, x + r * n, max + r, sum + r, y + r * n);
#endif
    for (; r < rows; r++) {
        max[r] = row_max(n, x + r * n);
        sum[r] = max[r] == -INFINITY ? 0 : exp_sum(n, x + r * n, max[r], y + r * n);
    }
}
#define MAX_EXP_SUM_PARAMS (size_t rows, size_t n, const ag_real *x, ag_real *max, ag_real *sum, ag_real *y)
AG_ISA_CLONES(void, max_exp_sum_rows, MAX_EXP_SUM_PARAMS, max_exp_sum_rows(rows, n, x, max, sum, y))
void ag__max_exp_sum_rows MAX_EXP_SUM_PARAMS { AG_ISA_CALL(max_exp_sum_rows, (rows, n, x, max, sum, y)); }

/* The backward's exps are taken this many at a time, into a buffer on the
 * stack. */
enum { EXP_PIECE = 256 };

/* dx_i (+)= dy_i - exp(y_i) s for i < n (stored where `fresh`): a piece's
 * exps into a buffer (exp_sum's vector loop), then the update in blocks of
 * 16 (core/blocks.h), then the rest. */
static inline AG_ALWAYS_INLINE void log_softmax_grad_row(size_t n, const ag_real *y, const ag_real *dy, ag_real s,
                                                         ag_real *dx, bool fresh)
{
    for (size_t j = 0; j < n; j += EXP_PIECE) {
        size_t k = n - j < EXP_PIECE ? n - j : EXP_PIECE, i = 0;
        ag_real e[EXP_PIECE];
        exp_sum(k, y + j, 0, e);
        const ag_real *dyp = dy + j;
        ag_real *dxp = dx + j;
        for (; i + AG_BLOCK <= k; i += AG_BLOCK) {
            ag_real t[AG_BLOCK];
            if (fresh)
                for (int l = 0; l < AG_BLOCK; l++) t[l] = dyp[i + l] - e[i + l] * s;
            else
                for (int l = 0; l < AG_BLOCK; l++) t[l] = dxp[i + l] + (dyp[i + l] - e[i + l] * s);
            memcpy(dxp + i, t, sizeof t);
        }
        for (; i < k; i++) dxp[i] = fresh ? dyp[i] - e[i] * s : dxp[i] + (dyp[i] - e[i] * s);
    }
}

/* log-softmax's backward over `rows` rows of n:
 *   y_i = x_i - m - log(sum_j exp(x_j - m))  ->  dx_i (+)= dy_i - exp(y_i) sum_j dy_j
 * A masked row is -inf throughout and gets nothing; a live row has max_i
 * y_i = -log(sum) > -inf (its first y is most often finite, which settles
 * it); a row with a NaN or +inf input is NaN throughout, and so its dx. */
static inline AG_ALWAYS_INLINE void log_softmax_grad(size_t rows, size_t n, const ag_real *y, const ag_real *dy,
                                                     ag_real *dx, bool fresh)
{
    for (size_t r = 0; r < rows; r++) {
        const ag_real *yr = y + r * n, *dyr = dy + r * n;
        ag_real *dxr = dx + r * n;
        if (yr[0] == -INFINITY && row_max(n, yr) == -INFINITY) {
            if (fresh) memset(dxr, 0, n * sizeof *dxr); /* nothing flows into it */
            continue;
        }
        log_softmax_grad_row(n, yr, dyr, ag__sum(n, dyr), dxr, fresh); /* sum_j dy_j */
    }
}
#define LSM_GRAD_PARAMS (size_t rows, size_t n, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh)
AG_ISA_CLONES(void, log_softmax_grad, LSM_GRAD_PARAMS, log_softmax_grad(rows, n, y, dy, dx, fresh))
void ag__log_softmax_grad_rows LSM_GRAD_PARAMS { AG_ISA_CALL(log_softmax_grad, (rows, n, y, dy, dx, fresh)); }

#ifndef AG_DOUBLE
/* softmax of one row of n <= 16 NV floats held in NV vectors of 16 lanes,
 * the padding -inf: the max, the exps and the sum in registers, lanes
 * combined in pairs (8 + 4 + 2 + 1) in a fixed order; then y = e / sum.
 * NV is a constant where it is called, so each width is its own loop. */
static inline __attribute__((always_inline)) void softmax_short(const float *zr, float *yr, size_t n, const int NV)
{
    float e[64], t[16];
#pragma omp simd
    for (size_t l = 0; l < 16 * (size_t)NV; l++) e[l] = l < n ? zr[l] : -INFINITY;
    for (int l = 0; l < 16; l++) t[l] = e[l];
    for (int v = 1; v < NV; v++)
        for (int l = 0; l < 16; l++) t[l] = e[16 * v + l] > t[l] ? e[16 * v + l] : t[l];
    for (int l = 0; l < 8; l++) t[l] = t[l + 8] > t[l] ? t[l + 8] : t[l];
    for (int l = 0; l < 4; l++) t[l] = t[l + 4] > t[l] ? t[l + 4] : t[l];
    for (int l = 0; l < 2; l++) t[l] = t[l + 2] > t[l] ? t[l + 2] : t[l];
    float m = t[1] > t[0] ? t[1] : t[0];
    if (m == -INFINITY) { /* every key masked with -inf, or NaNs among them */
        float fill = has_nan(n, zr) ? NAN : 0;
        for (size_t l = 0; l < n; l++) yr[l] = fill;
        return;
    }
#pragma omp simd
    for (int l = 0; l < 16 * NV; l++) e[l] = exp_core(e[l] - m, 0);
    for (int l = 0; l < 16; l++) t[l] = e[l];
    for (int v = 1; v < NV; v++)
        for (int l = 0; l < 16; l++) t[l] += e[16 * v + l];
    for (int l = 0; l < 8; l++) t[l] += t[l + 8];
    for (int l = 0; l < 4; l++) t[l] += t[l + 4];
    for (int l = 0; l < 2; l++) t[l] += t[l + 2];
    float inv = 1 / (t[0] + t[1]);
#pragma omp simd
    for (size_t l = 0; l < 16 * (size_t)NV; l++)
        if (l < n) yr[l] = e[l] * inv;
}
#endif

/* softmax over each of `rows` rows of n values z (z may be y):
 *   y = exp(z - max) / sum exp(z - max);  a row of all -inf gives zeros;
 *   a NaN or +inf in a row makes the whole row NaN (see has_nan).
 * A row of 64 or fewer floats (attention's rows at toy sizes) stays in
 * vector registers from end to end (softmax_short); longer ones take
 * row_max and exp_sum. */
static inline AG_ALWAYS_INLINE void softmax_rows(size_t rows, size_t n, const ag_real *z, ag_real *y)
{
#ifndef AG_DOUBLE
    if (n <= 64) {
        for (size_t r = 0; r < rows; r++) {
            const float *zr = z + r * n;
            float *yr = y + r * n;
            switch ((n + 15) / 16) {
            case 1: softmax_short(zr, yr, n, 1); break;
            case 2: softmax_short(zr, yr, n, 2); break;
            case 3: softmax_short(zr, yr, n, 3); break;
            default: softmax_short(zr, yr, n, 4); break;
            }
        }
        return;
    }
#endif
    for (size_t r = 0; r < rows; r++) {
        const ag_real *zr = z + r * n;
        ag_real *yr = y + r * n;
        ag_real m = row_max(n, zr);
        if (m == -INFINITY) { /* every key masked with -inf */
            memset(yr, 0, n * sizeof(ag_real));
            continue;
        }
        ag_real inv = 1 / exp_sum(n, zr, m, yr);
#pragma omp simd
        for (size_t j = 0; j < n; j++) yr[j] *= inv;
    }
}
AG_ISA_CLONES(void, softmax_rows, (size_t rows, size_t n, const ag_real *z, ag_real *y), softmax_rows(rows, n, z, y))
void ag__softmax_rows(size_t rows, size_t n, const ag_real *z, ag_real *y)
{
    AG_ISA_CALL(softmax_rows, (rows, n, z, y));
}
#ifndef AG_DOUBLE
AG_FUSED_END
#endif
