/* tests/test_gemm.c: the packed, vectorised gemm against a plain triple loop
 * in double, for every transpose combination, edge tiles and a depth that
 * crosses the KC block. */
#include "common.h"
#include "core/internal.h"

static void reference(int ta, int tb, int M, int N, int K, const ag_real *A, int lda, const ag_real *B, int ldb,
                      double beta, const ag_real *C0, double *out)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = beta * (double)C0[(size_t)i * N + j];
            for (int k = 0; k < K; k++) {
                double a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                double b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                s += a * b;
            }
            out[(size_t)i * N + j] = s;
        }
}

static void check(int ta, int tb, int M, int N, int K, double beta)
{
    ag_rng r;
    ag_rng_seed(&r, (uint64_t)(M * 1000 + N * 10 + K + ta * 7 + tb * 3));
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    ag_real *A = malloc(na * sizeof *A), *B = malloc(nb * sizeof *B), *C = malloc(nc * sizeof *C),
            *C0 = malloc(nc * sizeof *C0);
    double *want = malloc(nc * sizeof *want);
    for (size_t i = 0; i < na; i++) A[i] = (ag_real)(2 * ag_rng_uniform(&r) - 1);
    for (size_t i = 0; i < nb; i++) B[i] = (ag_real)(2 * ag_rng_uniform(&r) - 1);
    for (size_t i = 0; i < nc; i++) C0[i] = C[i] = (ag_real)(2 * ag_rng_uniform(&r) - 1);
    int lda = ta ? M : K, ldb = tb ? K : N;
    reference(ta, tb, M, N, K, A, lda, B, ldb, beta, C0, want);
    ag__gemm(ta, tb, M, N, K, A, lda, B, ldb, (ag_real)beta, C, N);
    /* sums of K products of numbers in [-1, 1]: rounding grows like sqrt(K) */
    char what[96];
    snprintf(what, sizeof what, "gemm ta=%d tb=%d %dx%dx%d beta=%g", ta, tb, M, N, K, beta);
    expect_close(C, want, nc, TOL(1e-12, 2e-5) * sqrt((double)K), 0, what);
    free(A), free(B), free(C), free(C0), free(want);
}

Test(gemm, every_transpose_and_edge_tiles_match_the_triple_loop)
{
    /* M, N, K: edge tiles, depths off and on multiples of 16, one across
     * the KC block (384), attention heads of toy models (10 x 10 x 16,
     * 10 x 16 x 10, 4 x 4 x 8, 1 x 1 x 16), and B wider than 4 panels with
     * few rows (read in place) and more (packed) */
    const int sizes[][3] = {{37, 70, 300}, {6, 32, 64},   {64, 64, 64}, {13, 40, 20},  {100, 17, 9},
                            {7, 129, 257}, {20, 50, 400}, {10, 10, 16}, {10, 16, 10}, {30, 33, 32},
                            {4, 4, 8},     {1, 1, 16},    {3, 2, 1},    {90, 300, 400}, {100, 300, 20}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int beta = 0; beta < 2; beta++) check(ta, tb, sizes[s][0], sizes[s][1], sizes[s][2], beta);
}

/* B (not transposed) read in place, for a product of 90 rows, or packed,
 * for 120: the first 90 rows of C are the same to the bit. */
Test(gemm, b_in_place_or_packed_gives_the_same_bits)
{
    enum { M0 = 90, M1 = 120, N = 600, K = 500 };
    ag_rng r;
    ag_rng_seed(&r, 5);
    ag_real *A = malloc((size_t)M1 * K * sizeof *A), *B = malloc((size_t)K * N * sizeof *B);
    ag_real *C0 = malloc((size_t)M0 * N * sizeof *C0), *C1 = malloc((size_t)M1 * N * sizeof *C1);
    for (size_t i = 0; i < (size_t)M1 * K; i++) A[i] = (ag_real)(2 * ag_rng_uniform(&r) - 1);
    for (size_t i = 0; i < (size_t)K * N; i++) B[i] = (ag_real)(2 * ag_rng_uniform(&r) - 1);
    int nt = ag_get_threads();
    ag_set_threads(1); /* one thread: the path is the rows' count's, not a share's */
    ag__gemm(0, 0, M0, N, K, A, K, B, N, 0, C0, N);
    ag__gemm(0, 0, M1, N, K, A, K, B, N, 0, C1, N);
    ag_set_threads(nt);
    for (size_t i = 0; i < (size_t)M0 * N; i++)
        cr_assert(memcmp(&C0[i], &C1[i], sizeof C0[i]) == 0, "C[%zu, %zu]: %a in place, %a packed", i / N, i % N,
                  (double)C0[i], (double)C1[i]);
    free(A), free(B), free(C0), free(C1);
}

Test(gemm, zero_depth_overwrites_or_keeps)
{
    ag_real C[4] = {1, 2, 3, 4};
    ag__gemm(0, 0, 2, 2, 0, NULL, 1, NULL, 2, 1, C, 2);
    cr_assert_eq(C[3], 4);
    ag__gemm(0, 0, 2, 2, 0, NULL, 1, NULL, 2, 0, C, 2);
    cr_assert_eq(C[0], 0);
    cr_assert_eq(C[3], 0);
}
