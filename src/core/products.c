/* core/products.c: where the matrices of matmul's products are: the plan
 * (ag__products, kernels/kernels.h) that its reference loops (ops/matmul.c)
 * and its gemm calls (kernels/matmul.c) walk.
 *
 * An operand's matrices are row-major and its batch axes broadcast: along
 * an axis it was stretched on, its stride is 0, so every product along
 * that axis reads the same matrix.  Or it is in attention's heads layout
 * (core/heads.h, ops/matmul_heads.c): stored [B, T, H, D], read as the
 * [B, H, T, D] batch of T x D matrices, rows H D apart; the output too,
 * [B, M, H, N]. */
#include "core/heads.h"
#include "core/internal.h"
#include "kernels/kernels.h"

/* x's strides st[0..nb): along y's batch axes (batch: their sizes; 0 where
 * x was stretched), then st[nb]: between its rows. */
static void strides(const ag_tensor *x, int heads, int nb, const int *batch, size_t *st)
{
    if (heads) {
        ag__head_strides(x->shape[1], x->shape[2], x->shape[3], st);
    } else {
        st[nb] = (size_t)x->shape[x->ndim - 1];
        ag__broadcast_strides(x->ndim - 2, x->shape, nb, batch, st[nb] * (size_t)x->shape[x->ndim - 2], st);
    }
}

void ag__products_plan(ag__products *p, const ag_tensor *a, const ag_tensor *b, const ag_tensor *y, int tb,
                       int heads)
{
    int nb = y->ndim - 2;
    *p = (ag__products){.tb = tb, .nb = nb, .count = 1, .K = a->shape[a->ndim - 1]};
    for (int i = 0; i < nb; i++) p->shape[i] = y->shape[i];
    p->M = y->shape[nb], p->N = y->shape[nb + 1];
    if (heads & AG__MM_Y) p->shape[1] = y->shape[2], p->M = y->shape[1]; /* stored [B, M, H, N] */
    for (int i = 0; i < nb; i++) p->count *= (size_t)p->shape[i];
    strides(a, heads & AG__MM_A, nb, p->shape, p->a);
    strides(b, heads & AG__MM_B, nb, p->shape, p->b);
    strides(y, heads & AG__MM_Y, nb, p->shape, p->y);
}
