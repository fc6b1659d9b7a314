/* kernels/gemm_small.c: products too small to repay packing (M N K below
 * kernels/gemm.c's GEMM_SMALL), by plain loops vectorised for the
 * machine. */
#include "kernels/gemm.h"

/* a . b over n values: 16 partial sums (vector lanes), added up in a fixed
 * order at the end. */
static inline ag_real dot(const ag_real *a, const ag_real *b, int n)
{
    ag_real s = 0;
    int k = 0;
    if (n >= 16) {
        ag_real lane[16] = {0};
        for (; k + 16 <= n; k += 16)
#pragma omp simd
            for (int l = 0; l < 16; l++) lane[l] += a[k + l] * b[k + l];
        for (int l = 0; l < 16; l++) s += lane[l];
    }
    for (; k < n; k++) s += a[k] * b[k];
    return s;
}

/* Row by row: c_i += a_ik b_k (rows of B) or c_ij += a_i . b_j (B stored
 * transposed: rows of A and B both contiguous, a dot product), the inner
 * loop vectorised for the machine (one clone per instruction set). */
static inline AG_ALWAYS_INLINE void small_loops(int ta, int tb, int M, int N, int K, const ag_real *A, int lda,
                                                const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc)
{
    if (N <= 16 && K <= 64) {
        /* A row of C fits in one vector (a toy head: T, S, D of 4 to 16):
         * op(B), zero-padded to 16 columns, and a row of C built in
         * registers, one multiply-add of 16 per k. */
        ag_real bp[64 * 16], acc[16];
        for (int k = 0; k < K; k++)
            for (int j = N; j < 16; j++) bp[k * 16 + j] = 0;
        if (tb) /* B stored [N, K] */
            for (int j = 0; j < N; j++)
                for (int k = 0; k < K; k++) bp[k * 16 + j] = B[(size_t)j * ldb + k];
        else
            for (int k = 0; k < K; k++)
                for (int j = 0; j < N; j++) bp[k * 16 + j] = B[(size_t)k * ldb + j];
        for (int i = 0; i < M; i++) {
            for (int j = 0; j < 16; j++) acc[j] = 0;
            for (int k = 0; k < K; k++) {
                ag_real aik = AT(A, ta, lda, i, k);
#pragma omp simd
                for (int j = 0; j < 16; j++) acc[j] += aik * bp[k * 16 + j];
            }
            ag_real *c = C + (size_t)i * ldc;
            if (beta == 0)
                for (int j = 0; j < N; j++) c[j] = acc[j];
            else
                for (int j = 0; j < N; j++) c[j] += acc[j];
        }
        return;
    }
    for (int i = 0; i < M; i++) {
        ag_real *c = C + (size_t)i * ldc;
        if (beta == 0)
            for (int j = 0; j < N; j++) c[j] = 0;
        if (!tb) {
            for (int k = 0; k < K; k++) {
                ag_real aik = AT(A, ta, lda, i, k);
                const ag_real *b = B + (size_t)k * ldb;
#pragma omp simd
                for (int j = 0; j < N; j++) c[j] += aik * b[j];
            }
        } else if (!ta) {
            const ag_real *a = A + (size_t)i * lda;
            for (int j = 0; j < N; j++) c[j] += dot(a, B + (size_t)j * ldb, K);
        } else {
            for (int j = 0; j < N; j++) {
                const ag_real *b = B + (size_t)j * ldb;
                ag_real s = 0;
                for (int k = 0; k < K; k++) s += A[(size_t)k * lda + i] * b[k];
                c[j] += s;
            }
        }
    }
}
#define SMALL_PARAMS                                                                                              \
    (int ta, int tb, int M, int N, int K, const ag_real *A, int lda, const ag_real *B, int ldb, ag_real beta,       \
     ag_real *C, int ldc)
#define SMALL_ARGS (ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc)
AG_ISA_CLONES(void, small_loops, SMALL_PARAMS, small_loops SMALL_ARGS)
void ag__gemm_small SMALL_PARAMS { AG_ISA_CALL(small_loops, SMALL_ARGS); }
