/* kernels/dropout.c: dropout's loops as vector loops (the math and the
 * reference are ops/dropout.c).  Each element is the reference's one
 * product, dy_i scale_i or x_i scale_i: the same bits, more lanes. */
#include "core/internal.h"
#include "kernels/kernels.h"

bool ag__k_dropout_forward(size_t n, const ag_real *x, const unsigned char *kept, ag_real keep, ag_real *y)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = x[i] * (kept[i] ? keep : 0);
    return true;
}

bool ag__k_dropout_backward(size_t n, const ag_real *dy, const unsigned char *kept, ag_real keep, ag_real *dx,
                            bool fresh)
{
    if (!kept) { /* y = x: dy passed on */
        ag__grad_pass(n, dy, dx, fresh);
    } else if (fresh) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) dx[i] = dy[i] * (kept[i] ? keep : 0);
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) dx[i] += dy[i] * (kept[i] ? keep : 0);
    }
    return true;
}
