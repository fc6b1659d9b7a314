/* tests/test_amx.c: the AMX bf16 product (kernels/gemm_amx.c) against a
 * double computation of the same bf16-rounded operands, and its dispatch.
 *
 * The bound.  Each product of two bf16 values is exact in a float, and
 * TDPBF16PS rounds each accumulation to nearest even (Intel's description
 * of the instruction: within one instruction, 32 depths, the even
 * depths' and the odd depths' products are summed apart, then both added
 * to C; a test below checks that bit for bit), and across instructions
 * in an order of its own: so
 * C[i, j], a sum of n = K (+ 1 with beta 1: C's old value) terms in float
 * in some order, is within gamma(n) = n u / (1 - n u) of the exact sum, u
 * = 2^-24, times the sum of the terms' magnitudes (Higham 3.1: any order
 * of additions), plus the double reference's own gamma(n) with u = 2^-53.
 * Intel's description also says that input denormals are read as zero and
 * output denormals flushed to zero: each of the n steps can move the sum
 * by at most 2^-126 (an operand read as 0 moves its product by less than
 * 2^-126 times the other operand, at most 4 here), so the bound adds
 * 4 n 2^-126, which no value of this test comes near.  This is the
 * bound tests/test_bf16.c holds matmul and linear to in bf16; the
 * vdpbf16ps kernel is held to more (ag__gemm's bits), because its order
 * is ag__gemm's; the tiles' order is the hardware's.
 *
 * Skipped, with the reason printed, where the process may not use AMX
 * (no AMX-BF16 in the CPU, the kernel refused the tile data, or a build
 * without the kernel). */
#include "common.h"
#include "core/internal.h"
#include "kernels/amx.h"

#include <float.h>
#include <stdint.h>

#define SKIP_WITHOUT_AMX()                                                                                     \
    do {                                                                                                       \
        const char *why;                                                                                       \
        if (!ag__amx_permitted(&why)) {                                                                        \
            printf("test_amx: skipped: %s\n", why);                                                            \
            cr_skip_test("no AMX: %s", why);                                                                   \
        }                                                                                                      \
    } while (0)

#if AG_AMX_KERNEL
static double gamma_n(int n, double u) { return n * u / (1 - n * u); }
static double rb(float x) { return (double)ag_bf16_round(x); }
static void fill(ag_rng *r, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)ag_rng_normal(r);
}
static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* C1 (from C0, beta) against the exact sum of the rounded products, in
 * double, within the bound above; returns how many entries differ from
 * ag__gemm's bits on rounded operands (C2), for the report. */
static size_t check(int ta, int tb, int M, int N, int K, const float *A, const float *B, int beta, const float *C0,
                    const float *C1, const float *C2)
{
    int lda = ta ? M : K, ldb = tb ? K : N, n = K + beta;
    double rel = gamma_n(n, FLT_EPSILON / 2) + gamma_n(n, DBL_EPSILON / 2), flush = 4.0 * n * 0x1p-126;
    size_t differ = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = beta ? C0[(size_t)i * N + j] : 0, mag = fabs(s);
            for (int k = 0; k < K; k++) {
                double p = rb(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                           rb(tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
                s += p, mag += fabs(p);
            }
            double got = C1[(size_t)i * N + j], bound = rel * mag + flush;
            cr_assert(fabs(got - s) <= bound, "%dx%dx%d ta %d tb %d beta %d C[%d, %d] = %.9g, exact %.9g, bound %.3g",
                      M, N, K, ta, tb, beta, i, j, got, s, bound);
            differ += bits_of(C1[(size_t)i * N + j]) != bits_of(C2[(size_t)i * N + j]);
        }
    return differ;
}

/* Every transpose, beta 0 and 1, shapes with edges in every direction: one
 * value, less than a tile, exactly one tile's depth (32), odd depths, a
 * depth of several blocks (384 each), more rows and columns than one
 * packed panel (128 rows, 1024 columns). */
Test(amx, kernel_within_the_fp32_sum_bound_at_every_shape_and_transpose)
{
    SKIP_WITHOUT_AMX();
    const int sizes[][3] = {{1, 1, 1},     {15, 17, 33}, {16, 16, 32},  {100, 257, 300}, {32, 32, 31},
                            {33, 65, 385}, {7, 3, 99},   {130, 40, 769}, {5, 1030, 64},  {64, 64, 1}};
    ag_rng r;
    ag_rng_seed(&r, 144);
    size_t differ = 0, total = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int beta = 0; beta < 2; beta++) {
                    int M = sizes[s][0], N = sizes[s][1], K = sizes[s][2], lda = ta ? M : K, ldb = tb ? K : N;
                    size_t mk = (size_t)M * K, kn = (size_t)K * N, mn = (size_t)M * N;
                    float *A = malloc(mk * 4), *B = malloc(kn * 4), *Ar = malloc(mk * 4), *Br = malloc(kn * 4),
                          *C0 = malloc(mn * 4), *C1 = malloc(mn * 4), *C2 = malloc(mn * 4);
                    fill(&r, A, mk), fill(&r, B, kn), fill(&r, C0, mn);
                    memcpy(C1, C0, mn * 4), memcpy(C2, C0, mn * 4);
                    ag__gemm_amx(ta, tb, M, N, K, A, lda, B, ldb, (float)beta, C1, N); /* rounds A and B itself */
                    ag__bf16_round_all(mk, A, Ar), ag__bf16_round_all(kn, B, Br);
                    ag__gemm(ta, tb, M, N, K, Ar, lda, Br, ldb, (float)beta, C2, N);
                    differ += check(ta, tb, M, N, K, A, B, beta, C0, C1, C2), total += mn;
                    free(A), free(B), free(Ar), free(Br), free(C0), free(C1), free(C2);
                }
    printf("test_amx: %zu of %zu sums differ from the fp32 kernel's bits on the same rounded operands\n", differ,
           total);
}

/* Intel's pseudo-code of TDPBF16PS, for C[i, j] and one instruction's
 * depth (K <= 32, 16 pairs): the even depths' products summed in order
 * from 0, the odd depths' apart, each addition rounded; then C + (even +
 * odd).  a, b: the rounded operands, b with stride ldb. */
static float tdpbf16ps_model(const float *a, const float *b, int ldb, int K, float c)
{
    float even = 0, odd = 0;
    for (int k = 0; k < K; k += 2) {
        even += a[k] * b[(size_t)k * ldb];
        if (k + 1 < K) odd += a[k + 1] * b[(size_t)(k + 1) * ldb];
    }
    return c + (even + odd);
}

/* Within one instruction the tiles follow that pseudo-code bit for bit
 * (so the packing puts each pair where the instruction expects it).
 * Across instructions their accumulation is their own: this model then
 * gives other last bits for about a quarter of the sums at K = 64, and
 * the test above holds them to the bound instead. */
Test(amx, one_instructions_depth_is_intels_pseudo_code_bit_for_bit)
{
    SKIP_WITHOUT_AMX();
    enum { M = 40, N = 50 };
    const int depths[] = {1, 2, 17, 31, 32};
    ag_rng r;
    ag_rng_seed(&r, 148);
    for (int d = 0; d < 5; d++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int beta = 0; beta < 2; beta++) {
                    int K = depths[d], lda = ta ? M : K, ldb = tb ? K : N;
                    float A[M * 32], B[32 * N], a[32], b[32 * N], C0[M * N], C[M * N];
                    fill(&r, A, (size_t)M * K), fill(&r, B, (size_t)K * N), fill(&r, C0, M * N);
                    memcpy(C, C0, sizeof C);
                    ag__gemm_amx(ta, tb, M, N, K, A, lda, B, ldb, (float)beta, C, N);
                    for (int k = 0; k < K; k++)
                        for (int j = 0; j < N; j++) b[k * N + j] = ag_bf16_round(tb ? B[j * ldb + k] : B[k * ldb + j]);
                    for (int i = 0; i < M; i++) {
                        for (int k = 0; k < K; k++) a[k] = ag_bf16_round(ta ? A[k * lda + i] : A[i * lda + k]);
                        for (int j = 0; j < N; j++) {
                            float want = tdpbf16ps_model(a, b + j, N, K, beta ? C0[i * N + j] : 0);
                            cr_assert_eq(bits_of(C[i * N + j]), bits_of(want),
                                         "K %d ta %d tb %d beta %d C[%d, %d] = %.9g, the pseudo-code's %.9g", K, ta,
                                         tb, beta, i, j, C[i * N + j], want);
                        }
                    }
                }
}

/* Strides wider than the matrices (a block of a bigger one), and C's own
 * stride: the same bits as on compact copies. */
Test(amx, strides_give_the_compact_bits)
{
    SKIP_WITHOUT_AMX();
    enum { M = 45, N = 70, K = 101, LD = 130 };
    ag_rng r;
    ag_rng_seed(&r, 145);
    float *A = malloc(LD * LD * 4), *B = malloc(LD * LD * 4), *C = calloc(LD * LD, 4), *a = malloc(M * K * 4),
          *b = malloc(K * N * 4), *c = malloc(M * N * 4);
    fill(&r, A, LD * LD), fill(&r, B, LD * LD);
    for (int i = 0; i < M; i++) memcpy(a + i * K, A + i * LD, K * 4);
    for (int k = 0; k < K; k++) memcpy(b + k * N, B + k * LD, N * 4);
    ag__gemm_amx(0, 0, M, N, K, A, LD, B, LD, 0, C, LD);
    ag__gemm_amx(0, 0, M, N, K, a, K, b, N, 0, c, N);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            cr_assert_eq(bits_of(C[i * LD + j]), bits_of(c[i * N + j]), "C[%d, %d]: %.9g, compact %.9g", i, j,
                         C[i * LD + j], c[i * N + j]);
    for (int i = 0; i < LD; i++) /* nothing written outside the M x N block */
        for (int j = 0; j < LD; j++)
            if (i >= M || j >= N) cr_assert_eq(C[i * LD + j], 0, "C[%d, %d] written", i, j);
    free(A), free(B), free(C), free(a), free(b), free(c);
}

/* Two threads split C (rows or columns, in whole 32-wide strips), each
 * with its own tile configuration: the same bits as one. */
Test(amx, two_threads_give_one_threads_bits)
{
    SKIP_WITHOUT_AMX();
    const int sizes[][3] = {{300, 200, 500}, {40, 900, 200}};
    ag_rng r;
    ag_rng_seed(&r, 146);
    for (int s = 0; s < 2; s++) {
        int M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
        float *A = malloc((size_t)M * K * 4), *B = malloc((size_t)N * K * 4), *C1 = malloc((size_t)M * N * 4),
              *C2 = malloc((size_t)M * N * 4);
        fill(&r, A, (size_t)M * K), fill(&r, B, (size_t)N * K);
        ag_set_threads(2);
        ag__gemm_amx(0, 1, M, N, K, A, K, B, K, 0, C1, N);
        ag_set_threads(1);
        ag__gemm_amx(0, 1, M, N, K, A, K, B, K, 0, C2, N);
        cr_assert_eq(memcmp(C1, C2, (size_t)M * N * 4), 0, "%dx%dx%d: two threads changed the bits", M, N, K);
        free(A), free(B), free(C1), free(C2);
    }
}

/* A bf16 graph's batched matmul runs its entries' products on two
 * threads at once, each loading its own tile configuration: the same
 * bits as on one thread, and the tiles ran (not vdpbf16ps's bits). */
static void batched_y(int threads, const float *a, const float *b, float *y, int E, int M, int N, int K)
{
    ag_set_threads(threads);
    ag_graph *g = ag_graph_new();
    ag_graph_set_precision(g, AG_PRECISION_BF16);
    ag_tensor *ta = ag_tensor_from(g, 3, (int[]){E, M, K}, a), *tb = ag_tensor_from(g, 2, (int[]){K, N}, b);
    ag_tensor *ty = ag_matmul(g, ta, tb);
    cr_assert_not_null(ty, "%s", ag_graph_error(g));
    memcpy(y, ty->data, (size_t)E * M * N * sizeof *y);
    ag_graph_free(g);
    ag_set_threads(1);
}

Test(amx, batched_products_on_two_threads_give_one_threads_bits)
{
    SKIP_WITHOUT_AMX();
    enum { E = 16, M = 70, N = 90, K = 200 }; /* E M N K / 16 above ag__thread_min_work: two threads */
    ag_set_kernels(AG_KERNELS_FAST); /* the graph's matmul reaches the tiles whatever AG_KERNELS says */
    ag_rng r;
    ag_rng_seed(&r, 149);
    float *a = malloc(E * M * K * 4), *b = malloc(K * N * 4), *y1 = malloc(E * M * N * 4), *y2 = malloc(E * M * N * 4),
          *y3 = malloc(E * M * N * 4);
    fill(&r, a, E * M * K), fill(&r, b, K * N);
    batched_y(2, a, b, y2, E, M, N, K);
    batched_y(1, a, b, y1, E, M, N, K);
    cr_assert_eq(memcmp(y1, y2, E * M * N * 4), 0, "two threads changed the bits");
    ag__isa_force("avx512bf16");
    batched_y(1, a, b, y3, E, M, N, K);
    ag__isa_force(NULL);
    cr_assert_neq(memcmp(y1, y3, E * M * N * 4), 0, "the tiles gave vdpbf16ps's bits: did they run?");
    free(a), free(b), free(y1), free(y2), free(y3);
}

/* The dispatch: "amx" is the best level's bf16 kernel, ag__gemm_bias_res_bf16
 * runs the tiles under it (then adds bias and R, as the fp32 kernel does),
 * and forcing "avx512bf16" or lower turns the tiles off. */
Test(amx, dispatch_follows_the_forced_level)
{
    SKIP_WITHOUT_AMX();
    cr_assert_str_eq(ag__isa_force(NULL), "avx512");
    cr_assert(ag__isa_amx(), "the CPU's best has the tiles off");
    cr_assert_str_eq(ag__isa_bf16_kernel(NULL), "amx");
    enum { M = 70, N = 90, K = 200 };
    ag_rng r;
    ag_rng_seed(&r, 147);
    float *A = malloc(M * K * 4), *B = malloc(N * K * 4), *bias = malloc(N * 4), *R = malloc(M * N * 4),
          *C1 = malloc(M * N * 4), *C2 = malloc(M * N * 4);
    fill(&r, A, M * K), fill(&r, B, N * K), fill(&r, bias, N), fill(&r, R, M * N);
    cr_assert_str_eq(ag__isa_force("amx"), "amx");
    ag__gemm_bias_res_bf16(0, 1, M, N, K, A, K, B, K, 0, C1, N, bias, R);
    ag__gemm_amx(0, 1, M, N, K, A, K, B, K, 0, C2, N);
    for (int i = 0; i < M * N; i++) C2[i] = (C2[i] + bias[i % N]) + R[i];
    cr_assert_eq(memcmp(C1, C2, M * N * 4), 0, "amx: not the tiles' bits, bias and R added");
    const char *lower[] = {"avx512bf16", "avx512", "avx2", "baseline"};
    for (int l = 0; l < 4; l++) {
        ag__isa_force(lower[l]);
        const char *why;
        cr_assert(!ag__isa_amx(), "%s: the tiles still on", lower[l]);
        cr_assert_str_neq(ag__isa_bf16_kernel(&why), "amx");
        cr_assert_not_null(why);
    }
    ag__isa_force("avx512bf16");
    cr_assert_str_eq(ag__isa_bf16_kernel(NULL), "avx512bf16");
    ag__isa_force(NULL);
    free(A), free(B), free(bias), free(R), free(C1), free(C2);
}
#else
Test(amx, kernel_within_the_fp32_sum_bound_at_every_shape_and_transpose) { SKIP_WITHOUT_AMX(); }
#endif
