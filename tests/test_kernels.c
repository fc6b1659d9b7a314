/* tests/test_kernels.c: every instruction set's kernels against plain
 * reference loops, the portable baseline included.
 *
 * Each test runs once per level the CPU has (ag__isa_force): on x86-64
 * "baseline", "avx2" and "avx512", on arm64 "baseline" and "neon", so
 * the portable code is checked on every machine.  Where a kernel promises
 * an order of operations the reference follows it and the comparison is
 * bit for bit: gemm's tiles (k ascending per depth block, one rounding per
 * multiply and add, or one fused multiply-add on the FMA levels: every
 * level but the baseline), the
 * dropout draws and the row max.  exp, whose float polynomial may fuse
 * where the instruction set can, is checked against double within its
 * error bound.  The element-wise ops (exp, log, tanh, sqrt, GELU in both
 * forms, softmax and log-softmax's backward), one clone per level, must
 * give the baseline's bits: no multiply-add may fuse there; softmax and
 * log-softmax, whose exps go through exp_sum, and GELU, whose erfc
 * polynomial fuses, stay within their bounds. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "core/internal.h"

static const char *const levels[] = {"baseline", "avx2", "avx512", "neon"};
enum { NLEVELS = sizeof levels / sizeof levels[0] };

/* Force level l; false when the CPU lacks it. */
static bool use_level(int l) { return strcmp(ag__isa_force(levels[l]), levels[l]) == 0; }

static ag_real *uniform(size_t n, uint64_t seed)
{
    ag_rng r;
    ag_rng_seed(&r, seed);
    ag_real *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = (ag_real)(2 * ag_rng_uniform(&r) - 1);
    return v;
}

/* ---- gemm: C = beta C + op(A) op(B) in the blocked kernel's order ---------- */

enum { KC = 384 }; /* src/kernels/gemm.c's depth block */

static ag_real mul_add(ag_real a, ag_real b, ag_real c, bool fused)
{
#ifdef AG_DOUBLE
    return fused ? fma(a, b, c) : c + a * b;
#else
    return fused ? fmaf(a, b, c) : c + a * b;
#endif
}

/* Element (i, j): per depth block of KC, acc = 0, acc += a_ik b_kj for k
 * ascending (fused or not), then C = acc (first block, beta 0) or C + acc;
 * after the last block, C + bias[j] when a bias is given. */
static void gemm_reference(int ta, int tb, int M, int N, int K, const ag_real *A, const ag_real *B, int beta,
                           ag_real *C, const ag_real *bias, bool fused)
{
    int lda = ta ? M : K, ldb = tb ? K : N;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            ag_real c = C[(size_t)i * N + j];
            for (int p0 = 0; p0 < K; p0 += KC) {
                ag_real acc = 0;
                for (int k = p0; k < K && k < p0 + KC; k++) {
                    ag_real a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                    ag_real b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                    acc = mul_add(a, b, acc, fused);
                }
                c = p0 == 0 && !beta ? acc : c + acc;
            }
            C[(size_t)i * N + j] = bias ? c + bias[j] : c;
        }
}

Test(kernels, every_gemm_kernel_is_the_reference_loop_bit_for_bit)
{
    /* products past gemm's plain loops (M N K >= 256): full and edge tiles,
     * a depth across KC, narrow heads (the AVX-512 head kernel's shapes, its
     * blocks of 16 rows among them), and B read in place (few rows, or rows
     * up to 4 panels wide, the last panel partial), A^T packed (more than 4
     * panels wide: 70 columns and more on AVX2, 300 on AVX-512; 80 rows: two
     * row blocks, the last tile reaching back into the first); each without
     * and with a bias added in the store (ag__gemm_bias_res) */
    static const int shapes[][3] = {{37, 70, 300}, {6, 32, 64}, {10, 10, 16}, {10, 16, 10}, {13, 17, 40},
                                    {7, 129, 800}, {64, 64, 64}, {2, 100, 50},  {50, 3, 20},  {1, 64, 16},
                                    {40, 200, 400}, {16, 16, 32}, {28, 9, 20}, {80, 300, 420}};
    int tested = 0;
    for (int l = 0; l < NLEVELS; l++) {
        if (!use_level(l)) continue;
        tested++;
        bool fused = l != 0; /* the baseline multiplies, then adds */
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int t = 0; t < 16; t++) {
                int ta = t & 1, tb = (t >> 1) & 1, beta = (t >> 2) & 1, biased = t >> 3;
                int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                ag_real *A = uniform((size_t)M * K, 1 + s), *B = uniform((size_t)K * N, 100 + s);
                ag_real *C = uniform((size_t)M * N, 200 + s), *want = malloc((size_t)M * N * sizeof *want);
                ag_real *bias = biased ? uniform((size_t)N, 300 + s) : NULL;
                memcpy(want, C, (size_t)M * N * sizeof *want);
                if (biased)
                    ag__gemm_bias_res(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, (ag_real)beta, C, N, bias, NULL);
                else ag__gemm(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, (ag_real)beta, C, N);
                gemm_reference(ta, tb, M, N, K, A, B, beta, want, bias, fused);
                for (int i = 0; i < M * N; i++)
                    cr_assert(memcmp(&C[i], &want[i], sizeof *C) == 0,
                              "%s: %dx%dx%d ta=%d tb=%d beta=%d bias=%d: C[%d] = %.9g, the loop gives %.9g",
                              levels[l], M, N, K, ta, tb, beta, biased, i, (double)C[i], (double)want[i]);
                free(A), free(B), free(C), free(want), free(bias);
            }
    }
    ag__isa_force(NULL);
    cr_assert_geq(tested, 1, "the baseline always runs");
}

/* ---- dropout's draws: eight xoshiro256** streams side by side ------------- */

/* keep[i] by the definition: lane l is a generator whose state is the
 * next four draws of r; each of its outputs gives keep[i + l] (low 32
 * bits) and keep[i + 8 + l] (high); the last n mod 16 come from r itself. */
static void keep_reference(ag_rng *r, double p, size_t n, unsigned char *keep)
{
    uint64_t below = (uint64_t)ceil(p * 0x1.0p32);
    ag_rng lane[8];
    for (int l = 0; l < 8; l++)
        for (int w = 0; w < 4; w++) lane[l].s[w] = ag_rng_next(r);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 8; l++) {
            uint64_t out = ag_rng_next(&lane[l]);
            keep[i + l] = (out & 0xffffffffu) >= below;
            keep[i + 8 + l] = (out >> 32) >= below;
        }
    for (; i < n; i++) keep[i] = (ag_rng_next(r) & 0xffffffffu) >= below;
}

Test(kernels, every_dropout_kernel_draws_the_reference_bits)
{
    static const size_t sizes[] = {0, 1, 15, 16, 17, 100, 4099};
    static const double probs[] = {0, 0.1, 0.5, 1};
    for (int l = 0; l < NLEVELS; l++) {
        if (!use_level(l)) continue;
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (size_t q = 0; q < sizeof probs / sizeof probs[0]; q++) {
                size_t n = sizes[s];
                unsigned char *got = malloc(n + 1), *want = malloc(n + 1);
                ag_rng r1, r2;
                ag_rng_seed(&r1, 42 + s), ag_rng_seed(&r2, 42 + s);
                ag__rng_keep(&r1, probs[q], n, got);
                keep_reference(&r2, probs[q], n, want);
                cr_assert(memcmp(got, want, n) == 0, "%s: n=%zu p=%g: keep[] differs", levels[l], n, probs[q]);
                cr_assert(memcmp(&r1, &r2, sizeof r1) == 0, "%s: n=%zu: the generator ends elsewhere", levels[l], n);
                free(got), free(want);
            }
    }
    ag__isa_force(NULL);
}

/* ---- rows: max, exp and softmax ---------------------------------------------- */

Test(kernels, every_row_max_kernel_is_the_plain_loop)
{
    for (int l = 0; l < NLEVELS; l++) {
        if (!use_level(l)) continue;
        for (size_t n = 0; n <= 70; n++) {
            ag_real *x = uniform(n, 7 + n);
            if (n > 3) x[n / 2] = NAN, x[1] = -INFINITY; /* NaN is passed over */
            ag_real want = -INFINITY;
            for (size_t i = 0; i < n; i++) want = x[i] > want ? x[i] : want;
            ag_real got = ag__row_max(n, x);
            cr_assert(memcmp(&got, &want, sizeof got) == 0, "%s: n=%zu: max %g, the loop gives %g", levels[l], n,
                      (double)got, (double)want);
            free(x);
        }
    }
    ag__isa_force(NULL);
}

/* exp's error bound: float's polynomial is within 2 ulp (plus the rounding
 * of x - shift); double calls libm. */
#define EXP_TOL TOL(4 * DBL_EPSILON, 4 * FLT_EPSILON)

Test(kernels, every_exp_sum_kernel_is_within_the_bound)
{
    for (int l = 0; l < NLEVELS; l++) {
        if (!use_level(l)) continue;
        for (size_t n = 1; n <= 100; n += 11) {
            ag_real *x = uniform(n, 30 + n), *y = malloc(n * sizeof *y);
            for (size_t i = 0; i < n; i++) x[i] *= 20; /* [-20, 20] */
            if (n > 2) x[0] = -INFINITY, x[1] = -100; /* exp gives 0 */
            ag_real shift = 3;
            double sum = 0;
            ag_real got = ag__exp_sum(n, x, shift, y);
            for (size_t i = 0; i < n; i++) {
                double want = exp((double)(x[i] - shift));
                sum += want;
                cr_assert(fabs(y[i] - want) <= EXP_TOL * want + 1e-37, "%s: n=%zu: exp(%g) = %.9g, want %.9g",
                          levels[l], n, (double)(x[i] - shift), (double)y[i], want);
            }
            cr_assert(fabs(got - sum) <= (EXP_TOL + n * TOL(DBL_EPSILON, FLT_EPSILON)) * sum,
                      "%s: n=%zu: sum %.9g, want %.9g", levels[l], n, (double)got, sum);
            free(x), free(y);
        }
    }
    ag__isa_force(NULL);
}

/* ag__max_exp_sum_rows takes sixteen rows side by side: each row's max,
 * exps and sum are the bits ag__row_max and ag__exp_sum give it alone,
 * for row counts around and between the sixteens, a fully masked row (max
 * -inf, sum 0, its exps untouched) and a row holding a NaN among them. */
Test(kernels, every_grouped_max_exp_sum_is_each_row_alone)
{
    const size_t widths[] = {1, 5, 16, 33, 64, 70}, counts[] = {1, 15, 16, 17, 37};
    for (int l = 0; l < NLEVELS; l++) {
        if (!use_level(l)) continue;
        for (size_t w = 0; w < sizeof widths / sizeof *widths; w++)
            for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
                size_t n = widths[w], rows = counts[c];
                ag_real *x = uniform(rows * n, 50 + rows * n), *y = malloc(rows * n * sizeof *y);
                ag_real *e = malloc(n * sizeof *e);
                ag_real *mx = malloc(rows * sizeof *mx), *sum = malloc(rows * sizeof *sum);
                for (size_t i = 0; i < rows * n; i++) x[i] *= 20, y[i] = 7;
                if (rows > 2) /* row 1 masked, row 2 with a NaN */
                    for (size_t i = 0; i < n; i++) x[n + i] = -INFINITY, x[2 * n + i] = i == n / 2 ? NAN : x[2 * n + i];
                ag__max_exp_sum_rows(rows, n, x, mx, sum, y);
                for (size_t r = 0; r < rows; r++) {
                    ag_real m = ag__row_max(n, x + r * n), s = 0;
                    for (size_t i = 0; i < n; i++) e[i] = 7;
                    if (m != -INFINITY) s = ag__exp_sum(n, x + r * n, m, e);
                    cr_assert(memcmp(&mx[r], &m, sizeof m) == 0, "%s: %zu rows of %zu: row %zu max %g, alone %g",
                              levels[l], rows, n, r, (double)mx[r], (double)m);
                    cr_assert(memcmp(&sum[r], &s, sizeof s) == 0, "%s: %zu rows of %zu: row %zu sum %.9g, alone %.9g",
                              levels[l], rows, n, r, (double)sum[r], (double)s);
                    cr_assert(memcmp(y + r * n, e, n * sizeof *e) == 0, "%s: %zu rows of %zu: row %zu exps differ",
                              levels[l], rows, n, r);
                }
                free(x), free(y), free(e), free(mx), free(sum);
            }
    }
    ag__isa_force(NULL);
}

Test(kernels, every_softmax_kernel_is_within_the_bound)
{
    for (int l = 0; l < NLEVELS; l++) {
        if (!use_level(l)) continue;
        /* the short rows (n <= 64) stay in registers; longer ones take the
         * max and exp loops */
        static const size_t widths[] = {1, 5, 16, 17, 33, 64, 65, 200};
        for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
            size_t n = widths[w], rows = 3;
            ag_real *z = uniform(rows * n, 60 + w), *y = malloc(rows * n * sizeof *y);
            for (size_t i = 0; i < n; i++) z[2 * n + i] = -INFINITY; /* a fully masked row: zeros */
            if (n > 1) z[1] = -INFINITY;
            ag__softmax_rows(rows, n, z, y);
            for (size_t r = 0; r < 2; r++) {
                double m = -INFINITY, s = 0;
                for (size_t i = 0; i < n; i++) m = fmax(m, (double)z[r * n + i]);
                for (size_t i = 0; i < n; i++) s += exp((double)z[r * n + i] - m);
                for (size_t i = 0; i < n; i++) {
                    double want = exp((double)z[r * n + i] - m) / s;
                    cr_assert(fabs(y[r * n + i] - want) <= (2 * EXP_TOL + n * TOL(DBL_EPSILON, FLT_EPSILON)) * want,
                              "%s: n=%zu row %zu: y[%zu] = %.9g, want %.9g", levels[l], n, r, i,
                              (double)y[r * n + i], want);
                }
            }
            for (size_t i = 0; i < n; i++) cr_assert(y[2 * n + i] == 0, "%s: n=%zu: a masked row gives zeros", levels[l], n);
            free(z), free(y);
        }
    }
    ag__isa_force(NULL);
}

/* ---- element-wise ops: every level gives the baseline's bits --------------- */

typedef ag_tensor *(*unary_op)(ag_graph *g, ag_tensor *x);

/* y = op(x) and dx from dy, on [rows, n] of x in [lo, lo + 8) (dx starts
 * at zero), into y and dx. */
static void run_op(unary_op op, int rows, int n, ag_real lo, ag_real *y, ag_real *dx)
{
    size_t size = (size_t)rows * (size_t)n;
    ag_real *x = uniform(size, 90 + size), *dy = uniform(size, 91 + size);
    for (size_t i = 0; i < size; i++) x[i] = lo + 4 * (x[i] + 1);
    ag_graph *g = ag_graph_new();
    ag_tensor *xt = ag_tensor_from(g, 2, (int[]){rows, n}, x);
    ag_set_requires_grad(xt, 1);
    ag_tensor *yt = op(g, xt);
    cr_assert(yt && ag_backward_from(g, yt, dy) == AG_OK, "%s", ag_graph_error(g));
    memcpy(y, yt->data, size * sizeof *y);
    memcpy(dx, xt->grad, size * sizeof *dx);
    ag_graph_free(g);
    free(x), free(dy);
}

enum { ROWS = 1, ERF };

Test(kernels, every_elementwise_kernel_matches_the_baseline)
{
    static const struct {
        const char *name;
        unary_op op;
        ag_real lo; /* x in [lo, lo + 8) */
        int fused; /* 0: no multiply-add fuses, the same bits on every level;
                    * ROWS: exps through exp_sum's multiply-adds; ERF: GELU's
                    * erfc polynomial fused, within 8 ulp of double each */
    } ops[] = {{"exp", ag_exp, -4, 0},          {"log", ag_log, 0.01f, 0},
               {"tanh", ag_tanh, -4, 0},        {"sqrt", ag_sqrt, 0.01f, 0},
               {"gelu", ag_gelu, -5, ERF},      {"gelu_tanh", ag_gelu_tanh, -5, 0},
               {"softmax", ag_softmax, -4, ROWS}, {"log_softmax", ag_log_softmax, -4, ROWS}};
    /* every padded tail, and rows longer than softmax's short ones and
     * log-softmax's pieces of 256 */
    static const int shapes[][2] = {{1, 1}, {3, 15}, {2, 16}, {3, 17}, {4, 70}, {2, 300}, {1, 4099}};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int rows = shapes[s][0], n = shapes[s][1];
            size_t size = (size_t)rows * (size_t)n;
            ag_real *y0 = malloc(size * sizeof *y0), *dx0 = malloc(size * sizeof *dx0);
            ag_real *y = malloc(size * sizeof *y), *dx = malloc(size * sizeof *dx);
            cr_assert(use_level(0));
            run_op(ops[o].op, rows, n, ops[o].lo, y0, dx0);
            for (int l = 1; l < NLEVELS; l++) {
                if (!use_level(l)) continue;
                run_op(ops[o].op, rows, n, ops[o].lo, y, dx);
                for (size_t i = 0; i < size && ops[o].fused; i++) {
                    /* exp's bound (2 ulp each side) and the row's sum, or
                     * GELU's 8 ulp each side; dx from those y, relative to
                     * the terms' size (|dy| <= 1) */
                    double tol = ops[o].fused == ERF ? 16 * TOL(DBL_EPSILON, FLT_EPSILON)
                                                     : 2 * EXP_TOL + n * TOL(DBL_EPSILON, FLT_EPSILON);
                    cr_assert(fabs(y[i] - y0[i]) <= tol * fabs(y0[i]), "%s %s [%d, %d]: y[%zu] = %a, baseline %a",
                              levels[l], ops[o].name, rows, n, i, (double)y[i], (double)y0[i]);
                    cr_assert(fabs(dx[i] - dx0[i]) <= tol * (fabs(dx0[i]) + 1),
                              "%s %s [%d, %d]: dx[%zu] = %a, baseline %a", levels[l], ops[o].name, rows, n, i,
                              (double)dx[i], (double)dx0[i]);
                }
                for (size_t i = 0; i < size && !ops[o].fused; i++) {
                    cr_assert(memcmp(&y[i], &y0[i], sizeof *y) == 0, "%s %s [%d, %d]: y[%zu] = %a, baseline %a",
                              levels[l], ops[o].name, rows, n, i, (double)y[i], (double)y0[i]);
                    cr_assert(memcmp(&dx[i], &dx0[i], sizeof *dx) == 0,
                              "%s %s [%d, %d]: dx[%zu] = %a, baseline %a", levels[l], ops[o].name, rows, n, i,
                              (double)dx[i], (double)dx0[i]);
                }
            }
            free(y0), free(dx0), free(y), free(dx);
        }
    ag__isa_force(NULL);
}

/* softmax and log-softmax's backward store into a fresh gradient and add
 * into one that holds something: x through both, a fully masked row
 * among them, gets the sum of what each gives alone. */
static void softmax_pair(int which, const ag_real *x, const ag_real *dy, ag_real *dx)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *xt = ag_tensor_from(g, 2, (int[]){3, 40}, x);
    ag_set_requires_grad(xt, 1);
    ag_tensor *y = which == 0 ? ag_softmax(g, xt) : which == 1 ? ag_log_softmax(g, xt)
                                                               : ag_add(g, ag_softmax(g, xt), ag_log_softmax(g, xt));
    cr_assert(y && ag_backward_from(g, y, dy) == AG_OK, "%s", ag_graph_error(g));
    memcpy(dx, xt->grad, 120 * sizeof *dx);
    ag_graph_free(g);
}

Test(kernels, softmax_backward_stores_or_adds)
{
    ag_real *x = uniform(120, 5), *dy = uniform(120, 6), a[120], b[120], ab[120];
    for (int i = 40; i < 80; i++) x[i] = -INFINITY; /* row 1 fully masked */
    softmax_pair(0, x, dy, a), softmax_pair(1, x, dy, b), softmax_pair(2, x, dy, ab);
    for (int i = 0; i < 120; i++) {
        ag_real want = a[i] + b[i];
        /* equal values (a zero's sign may differ: -0 stored, or 0 + -0) */
        cr_assert(ab[i] == want, "dx[%d] = %g, want %g + %g", i, (double)ab[i],
                  (double)a[i], (double)b[i]);
        if (i >= 40 && i < 80) cr_assert(ab[i] == 0, "a masked row gets no gradient: dx[%d] = %g", i, (double)ab[i]);
    }
    free(x), free(dy);
}
