/* gemm.c: C = beta * C + op(A) op(B), row-major, every transpose combination
 * that matmul's forward and backward need.
 *
 * This is the portable reference kernel: loops ordered so the innermost one
 * runs along contiguous memory (i-k-j for A B, an inner dot product for
 * A B^T).  A blocked, vectorised kernel can replace it behind the same
 * signature. */
#include "internal.h"

void ag__gemm(int ta, int tb, int M, int N, int K, const ag_real *A, int lda,
              const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc)
{
    for (int i = 0; i < M; i++) {
        ag_real *c = C + (size_t)i * ldc;
        if (beta == 0)
            for (int j = 0; j < N; j++) c[j] = 0;
        if (!tb) {
            /* c[i, :] += sum_k a(i, k) * B[k, :] */
            for (int k = 0; k < K; k++) {
                ag_real aik = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                const ag_real *b = B + (size_t)k * ldb;
                for (int j = 0; j < N; j++) c[j] += aik * b[j];
            }
        } else {
            /* c[i, j] += dot(a(i, :), B[j, :]) */
            for (int j = 0; j < N; j++) {
                const ag_real *b = B + (size_t)j * ldb;
                ag_real s = 0;
                if (!ta) {
                    const ag_real *a = A + (size_t)i * lda;
                    for (int k = 0; k < K; k++) s += a[k] * b[k];
                } else {
                    for (int k = 0; k < K; k++) s += A[(size_t)k * lda + i] * b[k];
                }
                c[j] += s;
            }
        }
    }
}
