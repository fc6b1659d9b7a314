/* kernels/softmax.c: softmax's rows, fast (the math and the reference are
 * ops/softmax.c).  The forward is the row kernel the attention ops share
 * (ag__softmax_rows, kernels/rows.c); the backward goes in blocks of
 * 16 that -O2 vectorises (core/blocks.h), one clone per instruction set
 * (AG_ISA_CLONES), all giving the same bits. */
#include "core/blocks.h"
#include "core/internal.h"
#include "kernels/kernels.h"

bool ag__k_softmax_forward(size_t rows, size_t n, const ag_real *x, ag_real *y)
{
    ag__softmax_rows(rows, n, x, y);
    return true;
}

/* dx_i (+)= y_i (dy_i - sum_j dy_j y_j) over `rows` rows of n: stored into
 * a fresh dx (nothing in it yet), else added. */
#define ROWS_PARAMS (size_t rows, size_t n, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh)
static inline AG_ALWAYS_INLINE void backward_rows ROWS_PARAMS
{
    for (size_t r = 0; r < rows; r++) {
        const ag_real *yr = y + r * n, *dyr = dy + r * n;
        ag_real *dxr = dx + r * n, dot = ag__dot(n, dyr, yr); /* sum_j dy_j y_j */
        size_t i = 0;
        for (; i + AG_BLOCK <= n; i += AG_BLOCK) {
            ag_real t[AG_BLOCK];
            if (fresh)
                for (int l = 0; l < AG_BLOCK; l++) t[l] = yr[i + l] * (dyr[i + l] - dot);
            else
                for (int l = 0; l < AG_BLOCK; l++) t[l] = dxr[i + l] + yr[i + l] * (dyr[i + l] - dot);
            memcpy(dxr + i, t, sizeof t);
        }
        for (; i < n; i++) dxr[i] = fresh ? yr[i] * (dyr[i] - dot) : dxr[i] + yr[i] * (dyr[i] - dot);
    }
}
AG_ISA_CLONES(void, backward_rows, ROWS_PARAMS, backward_rows(rows, n, y, dy, dx, fresh))

bool ag__k_softmax_backward(size_t rows, size_t n, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh)
{
    AG_ISA_CALL(backward_rows, (rows, n, y, dy, dx, fresh));
    return true;
}
