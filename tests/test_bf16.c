/* tests/test_bf16.c: bf16 products (ops/bf16.c, kernels/gemm_bf16.c).
 *
 * The rounding against PyTorch's x.bfloat16(), bit for bit, on the
 * fixture tests/reference/bf16_round.txt (make_bf16_fixture.py); matmul's
 * and linear's products, forward and backward, against a double
 * computation of the same rounded operands within the bound of a sum in
 * ag_real; the bf16 kernel against the fp32 kernel on the same rounded
 * operands and the reference loops, bit for bit; the switch (per graph,
 * process default); and a bf16 graph's gradients against the fp32 one's
 * within a tolerance derived from bf16's unit roundoff. */
#include "common.h"
#include "core/internal.h"
#include "kernels/amx.h" /* ag__isa_bf16_kernel */

#include <float.h>
#include <stdint.h>

/* The level whose bf16 kernel is tested, and its fp32 kernel's */
#if AG_NEON_KERNELS
#define BF16_LEVEL "neonbf16"
#define FP32_LEVEL "neon"
#else
#define BF16_LEVEL "avx512bf16"
#define FP32_LEVEL "avx512"
#endif

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

Test(bf16, rounding_matches_pytorch_bit_for_bit)
{
    FILE *f = fopen("tests/reference/bf16_round.txt", "r");
    cr_assert_not_null(f, "tests/reference/bf16_round.txt (run from the repository root)");
    char line[256];
    int n = 0, nan = 0, inf = 0, sub = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned in, want;
        if (line[0] == '#') continue;
        cr_assert_eq(sscanf(line, "%x %x", &in, &want), 2, "bad line: %s", line);
        uint32_t got = bits_of(ag_bf16_round(float_of(in)));
        cr_assert_eq(got & 0xffffu, 0, "%08x: the low half is not zero: %08x", in, got);
        cr_assert_eq(got >> 16, want, "%08x (%s): got %04x, PyTorch %04x", in, strchr(line, ' ') + 6, got >> 16, want);
        n++, nan += (in & 0x7fffffffu) > 0x7f800000u, inf += (want & 0x7fffu) == 0x7f80u,
            sub += (in & 0x7f800000u) == 0 && (in & 0x7fffffu);
    }
    fclose(f);
    /* the hostile values are there: NaNs, values that round to inf, subnormals */
    cr_assert_geq(n, 800);
    cr_assert_geq(nan, 8);
    cr_assert_geq(inf, 6);
    cr_assert_geq(sub, 8);
}

/* The kernel room's rounding over arrays (kernels/bf16.c, the vectors of
 * each instruction set this CPU has, and the tail past the last 16) gives
 * the fixture's bits too: every level forced in turn. */
Test(bf16, array_rounding_matches_pytorch_at_every_level)
{
#ifdef AG_DOUBLE
    cr_skip_test("the double build rounds by ops/bf16.c's loop");
#else
    FILE *f = fopen("tests/reference/bf16_round.txt", "r");
    cr_assert_not_null(f, "tests/reference/bf16_round.txt (run from the repository root)");
    enum { MAX = 4096 };
    static float in[MAX], out[MAX];
    static uint32_t want[MAX];
    char line[256];
    int n = 0;
    while (n < MAX && fgets(line, sizeof line, f)) {
        unsigned x, w;
        if (line[0] == '#') continue;
        cr_assert_eq(sscanf(line, "%x %x", &x, &w), 2, "bad line: %s", line);
        in[n] = float_of(x), want[n] = w, n++;
    }
    fclose(f);
    cr_assert_geq(n, 800);
    ag_kernels was = ag_get_kernels();
    ag_set_kernels(AG_KERNELS_FAST);
    const char *levels[] = {"baseline", "avx2", "avx512", "neon"};
    for (int l = 0; l < 4; l++) {
        const char *got_level = ag__isa_force(levels[l]);
        if (strcmp(got_level, levels[l]) != 0) continue; /* not on this CPU */
        for (int start = 0; start < 3; start++) { /* the vectors at other offsets, and the tail */
            memset(out, 0, sizeof out);
            ag__bf16_round_all((size_t)(n - start), in + start, out);
            for (int i = start; i < n; i++)
                cr_assert_eq(bits_of(out[i - start]), want[i] << 16, "%s, offset %d: %08x gives %08x, PyTorch %04x",
                             levels[l], start, bits_of(in[i]), bits_of(out[i - start]), want[i]);
        }
    }
    ag__isa_force(NULL);
    ag_set_kernels(was);
#endif
}

/* u: ag_real's unit roundoff; gamma(n) = n u / (1 - n u) bounds a sum of n
 * terms' rounding, relative to the sum of their magnitudes (Higham 3.1). */
static const double u_real = sizeof(ag_real) == 4 ? FLT_EPSILON / 2 : DBL_EPSILON / 2;
static double gamma_n(int n, double u) { return n * u / (1 - n * u); }

static void fill(ag_rng *r, ag_real *x, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) x[i] = (ag_real)(scale * ag_rng_normal(r));
}
static double rb(ag_real x) { return (double)ag_bf16_round((float)x); }

/* every got[i] within gamma_n(n) mag[i] (the sum in ag_real) plus the
 * double reference's own gamma_n(n) mag[i] of want[i] */
static void expect_sum_bound(const ag_real *got, const double *want, const double *mag, size_t count, int n,
                             const char *what)
{
    double bound = gamma_n(n, u_real) + gamma_n(n, DBL_EPSILON / 2);
    for (size_t i = 0; i < count; i++)
        cr_assert(fabs((double)got[i] - want[i]) <= bound * mag[i], "%s[%zu] = %.9g, exact %.9g, bound %.3g", what, i,
                  (double)got[i], want[i], bound * mag[i]);
}

/* y = x W^T + b, loss = sum(y * c): y, dx = c W, dW = c^T x from rounded
 * x, W, c; db = sum of c, unrounded.  N rows, I in, O out. */
Test(bf16, linear_forward_and_backward_within_the_fp32_sum_bound)
{
    enum { N = 9, I = 700, O = 130 };
    ag_graph *g = ag_graph_new();
    ag_graph_set_precision(g, AG_PRECISION_BF16);
    ag_rng r;
    ag_rng_seed(&r, 44);
    ag_tensor *x = ag_tensor_new(g, 2, (int[]){N, I}), *w = ag_tensor_new(g, 2, (int[]){O, I}),
              *b = ag_tensor_new(g, 1, (int[]){O}), *c = ag_tensor_new(g, 2, (int[]){N, O});
    fill(&r, x->data, x->size, 1), fill(&r, w->data, w->size, 0.05), fill(&r, b->data, b->size, 1),
        fill(&r, c->data, c->size, 1);
    ag_set_requires_grad(x, 1), ag_set_requires_grad(w, 1), ag_set_requires_grad(b, 1);
    ag_tensor *y = ag__linear(g, x, w, b);
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y, c))), AG_OK, "%s", ag_graph_error(g));
    double *want = calloc(N * I + O * I + N * O, sizeof(double)), *mag = calloc(N * I + O * I + N * O, sizeof(double));
    /* y[n, o] = sum_i x w + b: I products and the bias, I + 1 terms */
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            double s = 0, m = 0;
            for (int i = 0; i < I; i++) s += rb(x->data[n * I + i]) * rb(w->data[o * I + i]), m += fabs(rb(x->data[n * I + i]) * rb(w->data[o * I + i]));
            want[n * O + o] = s + b->data[o], mag[n * O + o] = m + fabs(b->data[o]);
        }
    expect_sum_bound(y->data, want, mag, N * O, I + 1, "y");
    /* dx[n, i] = sum_o c[n, o] W[o, i] */
    for (int n = 0; n < N; n++)
        for (int i = 0; i < I; i++) {
            double s = 0, m = 0;
            for (int o = 0; o < O; o++) s += rb(c->data[n * O + o]) * rb(w->data[o * I + i]), m += fabs(rb(c->data[n * O + o]) * rb(w->data[o * I + i]));
            want[n * I + i] = s, mag[n * I + i] = m;
        }
    expect_sum_bound(x->grad, want, mag, N * I, O, "dx");
    /* dW[o, i] = sum_n c[n, o] x[n, i] */
    for (int o = 0; o < O; o++)
        for (int i = 0; i < I; i++) {
            double s = 0, m = 0;
            for (int n = 0; n < N; n++) s += rb(c->data[n * O + o]) * rb(x->data[n * I + i]), m += fabs(rb(c->data[n * O + o]) * rb(x->data[n * I + i]));
            want[o * I + i] = s, mag[o * I + i] = m;
        }
    expect_sum_bound(w->grad, want, mag, O * I, N, "dW");
    /* db[o] = sum_n c[n, o], c itself: no product, nothing rounded to bf16 */
    for (int o = 0; o < O; o++) {
        double s = 0, m = 0;
        for (int n = 0; n < N; n++) s += c->data[n * O + o], m += fabs(c->data[n * O + o]);
        want[o] = s, mag[o] = m;
    }
    expect_sum_bound(b->grad, want, mag, O, N, "db");
    free(want), free(mag);
    ag_graph_free(g);
}

/* The same for matmul, batched with a broadcast b: y = a b, da = c b^T,
 * db = sum over the batch of a^T c. */
Test(bf16, matmul_forward_and_backward_within_the_fp32_sum_bound)
{
    enum { B = 2, M = 5, K = 410, N = 70 };
    ag_graph *g = ag_graph_new();
    ag_graph_set_precision(g, AG_PRECISION_BF16);
    ag_rng r;
    ag_rng_seed(&r, 45);
    ag_tensor *a = ag_tensor_new(g, 3, (int[]){B, M, K}), *b = ag_tensor_new(g, 2, (int[]){K, N}),
              *c = ag_tensor_new(g, 3, (int[]){B, M, N});
    fill(&r, a->data, a->size, 1), fill(&r, b->data, b->size, 0.1), fill(&r, c->data, c->size, 1);
    ag_set_requires_grad(a, 1), ag_set_requires_grad(b, 1);
    ag_tensor *y = ag_matmul(g, a, b);
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y, c))), AG_OK, "%s", ag_graph_error(g));
    double *want = calloc(B * M * K + K * N, sizeof(double)), *mag = calloc(B * M * K + K * N, sizeof(double));
    for (int e = 0; e < B; e++)
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double s = 0, t = 0;
                for (int k = 0; k < K; k++) {
                    double p = rb(a->data[(e * M + m) * K + k]) * rb(b->data[k * N + n]);
                    s += p, t += fabs(p);
                }
                want[(e * M + m) * N + n] = s, mag[(e * M + m) * N + n] = t;
            }
    expect_sum_bound(y->data, want, mag, B * M * N, K, "y");
    for (int e = 0; e < B; e++)
        for (int m = 0; m < M; m++)
            for (int k = 0; k < K; k++) {
                double s = 0, t = 0;
                for (int n = 0; n < N; n++) {
                    double p = rb(c->data[(e * M + m) * N + n]) * rb(b->data[k * N + n]);
                    s += p, t += fabs(p);
                }
                want[(e * M + m) * K + k] = s, mag[(e * M + m) * K + k] = t;
            }
    expect_sum_bound(a->grad, want, mag, B * M * K, N, "da");
    /* the broadcast b: each entry's M-term sum, then the entries' sum: a
     * sum of B M terms in some grouping, bounded by gamma(B M) */
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            double s = 0, t = 0;
            for (int e = 0; e < B; e++)
                for (int m = 0; m < M; m++) {
                    double p = rb(a->data[(e * M + m) * K + k]) * rb(c->data[(e * M + m) * N + n]);
                    s += p, t += fabs(p);
                }
            want[k * N + n] = s, mag[k * N + n] = t;
        }
    expect_sum_bound(b->grad, want, mag, K * N, B * M, "db");
    free(want), free(mag);
    ag_graph_free(g);
}

/* y of a [M, K] x [K, N] matmul on g, into out */
static void matmul_y(ag_graph *g, const ag_real *a, const ag_real *b, int M, int N, int K, ag_real *out)
{
    ag_tensor *ta = ag_tensor_from(g, 2, (int[]){M, K}, a), *tb = ag_tensor_from(g, 2, (int[]){K, N}, b);
    ag_tensor *y = ag_matmul(g, ta, tb);
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    memcpy(out, y->data, y->size * sizeof *out);
    ag_graph_reset(g);
}

/* For a depth of one block (K <= 384) the kernels and the reference add the
 * same exact products in the same order from 0: the same bits, whichever
 * kernel runs (vdpbf16ps's, or a float multiply-add of the rounded
 * values).  Not AMX's tiles, which add in an order of their own: forced
 * off here, held to the bound of a float sum in tests/test_amx.c. */
Test(bf16, kernel_and_reference_agree_to_the_bit_within_one_depth_block)
{
    enum { M = 37, N = 150, K = 383 };
    ag_rng r;
    ag_rng_seed(&r, 46);
    ag_real *a = malloc(M * K * sizeof *a), *b = malloc(K * N * sizeof *b), *y1 = malloc(M * N * sizeof *y1),
            *y2 = malloc(M * N * sizeof *y2), *y3 = malloc(M * N * sizeof *y3);
    fill(&r, a, M * K, 1), fill(&r, b, K * N, 1);
    ag_graph *g = ag_graph_new();
    ag_graph_set_precision(g, AG_PRECISION_BF16);
    ag_kernels was = ag_get_kernels();
    ag_set_kernels(AG_KERNELS_FAST);
    ag__isa_force(BF16_LEVEL); /* where the CPU has it; else its best, the tiles off */
    matmul_y(g, a, b, M, N, K, y1);
    ag__isa_force(NULL);
    ag_set_kernels(AG_KERNELS_REFERENCE);
    matmul_y(g, a, b, M, N, K, y2);
    ag_set_kernels(was);
    cr_assert_eq(memcmp(y1, y2, M * N * sizeof *y1), 0, "kernel and reference differ");
    /* and the switch is not a no-op: fp32's products differ */
    ag_graph_set_precision(g, AG_PRECISION_FP32);
    matmul_y(g, a, b, M, N, K, y3);
    cr_assert_neq(memcmp(y1, y3, M * N * sizeof *y1), 0, "bf16 gave fp32's bits");
    free(a), free(b), free(y1), free(y2), free(y3);
    ag_graph_free(g);
}

#if AG_BF16_PRODUCTS && !defined(AG_DOUBLE)
/* Forces the bf16 kernel's level; skips the test where the CPU lacks it. */
#define SKIP_WITHOUT_BF16_KERNEL()                                                                             \
    do {                                                                                                       \
        if (strcmp(ag__isa_force(BF16_LEVEL), BF16_LEVEL) != 0) {                                              \
            ag__isa_force(NULL);                                                                               \
            cr_skip_test("this CPU has no " BF16_LEVEL);                                                       \
        }                                                                                                      \
    } while (0)

/* The bf16 kernel (vdpbf16ps, or arm64's BFMLALB/T), rounding the operands
 * as it packs them, against the fp32 kernel of its level (AVX-512, NEON)
 * on rounded copies: the same sums in the same order (k ascending in each
 * KC block, blocks added in order), so the same bits, at every transpose,
 * edge tile, odd depth, a depth of several blocks, and for the small
 * products it hands to ag__gemm. */
Test(bf16, bf16_kernel_gives_the_fp32_kernels_bits)
{
    SKIP_WITHOUT_BF16_KERNEL();
    const int sizes[][3] = {{100, 200, 1001}, {6, 64, 384}, {13, 70, 385}, {71, 130, 7}, {7, 3, 99}, {1, 300, 50},
                            {150, 33, 64}, {10, 16, 10}, {3, 5, 7}};
    ag_rng r;
    ag_rng_seed(&r, 47);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int beta = 0; beta < 2; beta++) {
                    int M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
                    float *A = malloc((size_t)M * K * 4), *B = malloc((size_t)K * N * 4), *C1 = malloc((size_t)M * N * 4),
                          *C2 = malloc((size_t)M * N * 4), *Ar = malloc((size_t)M * K * 4), *Br = malloc((size_t)K * N * 4);
                    fill(&r, A, (size_t)M * K, 1), fill(&r, B, (size_t)K * N, 1), fill(&r, C1, (size_t)M * N, 1);
                    ag__bf16_round_all((size_t)M * K, A, Ar), ag__bf16_round_all((size_t)K * N, B, Br);
                    memcpy(C2, C1, (size_t)M * N * 4);
                    int lda = ta ? M : K, ldb = tb ? K : N;
                    ag__isa_force(BF16_LEVEL);
                    ag__gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, (float)beta, C1, N); /* rounds A and B itself */
                    ag__isa_force(FP32_LEVEL);
                    ag__gemm(ta, tb, M, N, K, Ar, lda, Br, ldb, (float)beta, C2, N);
                    for (size_t i = 0; i < (size_t)M * N; i++)
                        cr_assert_eq(bits_of(C1[i]), bits_of(C2[i]), "%dx%dx%d ta %d tb %d beta %d [%zu]: %.9g, %.9g", M,
                                     N, K, ta, tb, beta, i, C1[i], C2[i]);
                    free(A), free(B), free(C1), free(C2), free(Ar), free(Br);
                }
    ag__isa_force(NULL);
}

#if AG_NEON_BF16_KERNEL && !defined(AG_DOUBLE)
/* BFMLALB/T are IEEE fused multiply-adds under FPCR (not flushed: Linux
 * starts a process with FPCR.FZ clear), unlike vdpbf16ps: subnormal
 * operands (A near 2^-130) and sums keep the fp32 kernel's bits, and are
 * not read as 0. */
Test(bf16, bfmlal_keeps_subnormals_as_the_fp32_kernel_does)
{
    SKIP_WITHOUT_BF16_KERNEL();
    enum { M = 20, N = 40, K = 77 };
    ag_rng r;
    ag_rng_seed(&r, 50);
    float A[M * K], B[K * N], Ar[M * K], Br[K * N], C1[M * N], C2[M * N];
    fill(&r, A, M * K, 1), fill(&r, B, K * N, 1);
    for (int i = 0; i < M * K; i++) A[i] = ldexpf(A[i], -130); /* subnormal floats, and bf16 */
    ag__bf16_round_all(M * K, A, Ar), ag__bf16_round_all(K * N, B, Br);
    ag__gemm_bf16(0, 0, M, N, K, A, K, B, N, 0, C1, N);
    ag__isa_force(FP32_LEVEL);
    ag__gemm(0, 0, M, N, K, Ar, K, Br, N, 0, C2, N);
    ag__isa_force(NULL);
    int nonzero = 0;
    for (int i = 0; i < M * N; i++) {
        cr_assert_eq(bits_of(C1[i]), bits_of(C2[i]), "[%d]: %g, %g", i, C1[i], C2[i]);
        nonzero += C1[i] != 0;
    }
    cr_assert_gt(nonzero, M * N / 2, "subnormals read as 0: %d of %d sums nonzero", nonzero, M * N);
}
#endif

/* A graph's bf16 matmul, forward, with the bf16 kernel and with the fp32
 * kernel on rounded copies (the level forced below the bf16 kernel's): the
 * same bits, over depths of several blocks; and the forced level does not
 * run the bf16 kernel. */
Test(bf16, forcing_the_fp32_level_keeps_a_graphs_bits)
{
    SKIP_WITHOUT_BF16_KERNEL();
    enum { M = 50, N = 70, K = 1001 };
    ag_rng r;
    ag_rng_seed(&r, 49);
    ag_real *a = malloc(M * K * sizeof *a), *b = malloc(K * N * sizeof *b), *y1 = malloc(M * N * sizeof *y1),
            *y2 = malloc(M * N * sizeof *y2);
    fill(&r, a, M * K, 1), fill(&r, b, K * N, 1);
    ag_graph *g = ag_graph_new();
    ag_graph_set_precision(g, AG_PRECISION_BF16);
    cr_assert_str_eq(ag__isa_bf16_kernel(NULL), BF16_LEVEL);
    matmul_y(g, a, b, M, N, K, y1);
    ag__isa_force(FP32_LEVEL);
    cr_assert(!ag__isa_bf16(), FP32_LEVEL " forced: the bf16 kernel still on");
    cr_assert_str_eq(ag__isa_bf16_kernel(NULL), "fp32 kernel");
    matmul_y(g, a, b, M, N, K, y2);
    ag__isa_force(NULL);
    cr_assert_eq(memcmp(y1, y2, M * N * sizeof *y1), 0, "the bf16 kernel and the forced fp32 level differ");
    free(a), free(b), free(y1), free(y2);
    ag_graph_free(g);
}

/* The bias and the residual of linear_add, added in the fp32 kernel's
 * order, and two threads: the same bits. */
Test(bf16, bf16_kernel_bias_residual_and_threads_keep_the_bits)
{
    SKIP_WITHOUT_BF16_KERNEL();
    enum { M = 200, N = 300, K = 500 };
    ag_rng r;
    ag_rng_seed(&r, 48);
    float *A = malloc(M * K * 4), *B = malloc(N * K * 4), *bias = malloc(N * 4), *R = malloc(M * N * 4),
          *C1 = malloc(M * N * 4), *C2 = malloc(M * N * 4);
    fill(&r, A, M * K, 1), fill(&r, B, N * K, 1), fill(&r, bias, N, 1), fill(&r, R, M * N, 1);
    ag_set_threads(2);
    ag__isa_force(BF16_LEVEL);
    ag__gemm_bias_res_bf16(0, 1, M, N, K, A, K, B, K, 0, C1, N, bias, R);
    ag_set_threads(1);
    ag__isa_force(FP32_LEVEL);
    ag__bf16_round_all(M * K, A, A), ag__bf16_round_all(N * K, B, B);
    ag__gemm_bias_res(0, 1, M, N, K, A, K, B, K, 0, C2, N, bias, R);
    ag__isa_force(NULL);
    cr_assert_eq(memcmp(C1, C2, M * N * 4), 0, "bias, residual or threads changed the bits");
    free(A), free(B), free(bias), free(R), free(C1), free(C2);
}
#endif

/* Without a bf16 instruction (the level forced below the bf16 kernel's)
 * the fp32 gemm multiplies rounded copies of the operands: they last one
 * product's call, so that a bf16 graph's arena holds what the fp32 one's
 * does, byte for byte: a linear layer, a matmul, forward and backward. */
static size_t arena_after_step(ag_precision p, int N, int I, int O)
{
    ag_graph *g = ag_graph_new();
    ag_graph_set_precision(g, p);
    ag_rng r;
    ag_rng_seed(&r, 51);
    ag_tensor *x = ag_tensor_new(g, 2, (int[]){N, I}), *w = ag_tensor_new(g, 2, (int[]){O, I}),
              *b = ag_tensor_new(g, 1, (int[]){O}), *v = ag_tensor_new(g, 2, (int[]){O, I});
    fill(&r, x->data, x->size, 1), fill(&r, w->data, w->size, 0.05), fill(&r, b->data, b->size, 1),
        fill(&r, v->data, v->size, 0.05);
    ag_set_requires_grad(x, 1), ag_set_requires_grad(w, 1), ag_set_requires_grad(v, 1);
    ag_tensor *y = ag_matmul(g, ag__linear(g, x, w, b), v); /* [N, O] [O, I] */
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y, y))), AG_OK, "%s", ag_graph_error(g));
    size_t used = ag_graph_arena_used(g);
    ag_graph_free(g);
    return used;
}

Test(bf16, rounded_copies_last_one_call)
{
    ag_kernels was = ag_get_kernels();
    ag_set_kernels(AG_KERNELS_FAST);
    ag__isa_force(FP32_LEVEL);
    cr_assert(!ag__isa_bf16(), FP32_LEVEL " forced: the bf16 kernel still on");
    size_t fp32 = arena_after_step(AG_PRECISION_FP32, 64, 300, 200);
    size_t bf16 = arena_after_step(AG_PRECISION_BF16, 64, 300, 200);
    ag__isa_force(NULL);
    ag_set_kernels(was);
    cr_assert_eq(bf16, fp32, "a bf16 graph's arena holds %zu bytes, the fp32 one's %zu", bf16, fp32);
}

/* The bf16 products' kernel in use, printed (as bench's machine line
 * names it); where AG_EXPECT_BF16_KERNEL names one (make arm64-test: qemu's
 * CPU has FEAT_BF16), it must be that one, so that a CPU bit not seen
 * fails rather than testing the fp32 kernel twice. */
Test(bf16, the_kernel_in_use_is_the_one_expected)
{
    ag__isa_force(NULL);
    const char *kernel = ag__isa_bf16_kernel(NULL), *want = getenv("AG_EXPECT_BF16_KERNEL");
    printf("test_bf16: bf16 products: %s\n", kernel);
    if (want) cr_assert_str_eq(kernel, want, "bf16 products: %s, expected %s", kernel, want);
}

Test(bf16, a_graph_follows_the_process_default_until_it_sets_its_own)
{
    ag_graph *g = ag_graph_new();
    cr_assert_eq(ag_graph_precision(g), AG_PRECISION_FP32);
    ag_set_precision(AG_PRECISION_BF16);
    cr_assert_eq(ag_graph_precision(g), AG_PRECISION_BF16);
    ag_graph_set_precision(g, AG_PRECISION_FP32);
    cr_assert_eq(ag_graph_precision(g), AG_PRECISION_FP32);
    ag_set_precision(AG_PRECISION_FP32);
    ag_graph_set_precision(g, AG_PRECISION_BF16);
    cr_assert_eq(ag_graph_precision(g), AG_PRECISION_BF16);
    ag_precision p;
    cr_assert_eq(ag_precision_parse("bf16", &p), 0);
    cr_assert_eq(p, AG_PRECISION_BF16);
    cr_assert_eq(ag_precision_parse("fp16", &p), -1);
    cr_assert_str_eq(ag_precision_name(AG_PRECISION_FP32), "fp32");
    ag_graph_free(g);
}

/* A two-layer network, loss = sum(c * linear(gelu(linear(x, W1, b1)), W2,
 * b2)): the gradients of a bf16 graph against an fp32 graph's.  Each
 * product's operands are rounded with relative error at most u = 2^-8
 * (bf16's unit roundoff), so to first order a gradient moves by at most
 * (number of rounded operands on its path) u times the sum of its terms'
 * magnitudes.  dW2 = c^T h: c, h, and h's own x, W1: 4; dW1 = dz^T x with
 * dz = (c W2) gelu'(z): c, W2, dz, x, and z's x, W1: 6; dx = dz W1: 6.
 * Normwise, with gelu' at most 1.13 and |gelu''| below 0.8 (the z path),
 * the tolerance is 8 u: |g_bf16 - g_fp32| <= 8 u |g|, in 2-norms. */
static void two_layers(ag_precision p, ag_real *out, size_t *n)
{
    enum { N = 16, I = 96, H = 160, O = 24 };
    ag_graph *g = ag_graph_new();
    ag_graph_set_precision(g, p);
    ag_rng r;
    ag_rng_seed(&r, 49);
    ag_tensor *x = ag_tensor_new(g, 2, (int[]){N, I}), *w1 = ag_tensor_new(g, 2, (int[]){H, I}),
              *b1 = ag_tensor_new(g, 1, (int[]){H}), *w2 = ag_tensor_new(g, 2, (int[]){O, H}),
              *b2 = ag_tensor_new(g, 1, (int[]){O}), *c = ag_tensor_new(g, 2, (int[]){N, O});
    fill(&r, x->data, x->size, 1), fill(&r, w1->data, w1->size, 0.1), fill(&r, b1->data, b1->size, 0.1),
        fill(&r, w2->data, w2->size, 0.1), fill(&r, b2->data, b2->size, 0.1), fill(&r, c->data, c->size, 1);
    ag_tensor *leaves[] = {x, w1, b1, w2, b2};
    for (int i = 0; i < 5; i++) ag_set_requires_grad(leaves[i], 1);
    ag_tensor *y = ag__linear(g, ag_gelu(g, ag__linear(g, x, w1, b1)), w2, b2);
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y, c))), AG_OK, "%s", ag_graph_error(g));
    *n = 0;
    for (int i = 0; i < 5; i++) {
        memcpy(out + *n, leaves[i]->grad, leaves[i]->size * sizeof *out);
        n[1 + i] = leaves[i]->size;
        *n += leaves[i]->size;
    }
    ag_graph_free(g);
}

Test(bf16, gradients_of_a_bf16_graph_within_8_bf16_roundoffs_of_fp32s)
{
    static ag_real g16[40000], g32[40000];
    size_t n16[6], n32[6];
    two_layers(AG_PRECISION_BF16, g16, n16);
    two_layers(AG_PRECISION_FP32, g32, n32);
    cr_assert_eq(n16[0], n32[0]);
    const char *names[] = {"x", "W1", "b1", "W2", "b2"};
    const double u = 1.0 / 256;
    size_t at = 0;
    for (int t = 0; t < 5; t++) {
        double d2 = 0, g2 = 0;
        for (size_t i = at; i < at + n32[1 + t]; i++)
            d2 += ((double)g16[i] - g32[i]) * ((double)g16[i] - g32[i]), g2 += (double)g32[i] * g32[i];
        double rel = sqrt(d2 / g2);
        cr_assert(rel <= 8 * u, "d%s: relative difference %.3g, tolerance %.3g", names[t], rel, 8 * u);
        if (t == 4) /* db2 = sum of c: no product on its path, fp32's bits */
            cr_assert(d2 == 0, "db2 moved by %.3g", rel);
        else /* bf16 moved the others: the products did run in bf16 */
            cr_assert(rel > u_real, "d%s: bf16 and fp32 agree to %.3g: no bf16 rounding happened?", names[t], rel);
        at += n32[1 + t];
    }
}
