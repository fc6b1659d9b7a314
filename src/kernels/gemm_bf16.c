/* gemm_bf16.c: C = beta C + op(A) op(B) (+ bias, + R) for operands that are
 * bf16 values already (ops/bf16.c rounded them).  ag__gemm computes their
 * products: each product of two bf16 values is exact in a float, so a
 * float fused multiply-add of the rounded values rounds exactly as a bf16
 * dot product step does. */
#include "core/internal.h"
#include "kernels/gemm.h"

void ag__gemm_bf16(int ta, int tb, int M, int N, int K, const ag_real *A, int lda, const ag_real *B, int ldb,
                   ag_real beta, ag_real *C, int ldc)
{
    ag__gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

void ag__gemm_bias_res_bf16(int ta, int tb, int M, int N, int K, const ag_real *A, int lda, const ag_real *B,
                            int ldb, ag_real beta, ag_real *C, int ldc, const ag_real *bias, const ag_real *res)
{
    ag__gemm_bias_res(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, bias, res);
}
