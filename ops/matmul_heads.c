/* ops/matmul_heads.c: matmul over attention's heads, read and written in
 * place (ag__matmul_heads, for src/nn/attention.c).
 *
 * An operand stored [B, T, H, D] (the output of a linear layer, reshaped:
 * a view) is read as the [B, H, T, D] that permute(x, {0, 2, 1, 3}) would
 * copy out: head h of sentence b is the T x D matrix whose row t starts at
 * ((b T + t) H + h) D, its rows H D apart (core/heads.h).  The output can
 * be written that way too, [B, M, H, N], ready for the reshape back to
 * [B, M, C].  Multi-head attention's two products, per head:
 *
 *   scores = Q K^T:  q [B, T, H, D], k [B, S, H, D] (both in place, b
 *                    transposed) -> [B, H, T, S]
 *   output = P V:    p [B, H, T, S], v [B, S, H, D] (v in place, the
 *                    output too) -> [B, T, H, D]
 *
 * The nodes are matmul's (AG_OP_MATMUL, iarg[1] = the operands in heads
 * layout): the same math, forward and backward (ops/matmul.c), on the
 * [B, H] batch of products, at the heads' offsets and row strides.
 * Nothing is copied and nothing new is derived.  Its gradient-check cases
 * are among matmul's, whose nodes it makes.  All operands are 4-d and
 * their batch axes (B, H) match: no broadcasting. */
#include "core/internal.h"

#include <stdio.h>

/* x's shape as read: [B, H, T, D] for x stored [B, T, H, D] in heads
 * layout, else x's own. */
static void as_read(const ag_tensor *x, int heads, int *shape)
{
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    if (heads) shape[1] = x->shape[2], shape[2] = x->shape[1];
}

ag_tensor *ag__matmul_heads(ag_graph *g, ag_tensor *a, ag_tensor *b, int tb, int heads)
{
    if (!ag__ok(g, "matmul_heads", 2, a, b)) return NULL;
    if (a->ndim != 4 || b->ndim != 4) {
        char s1[96], s2[96];
        ag_graph_fail(g, AG_ERR_SHAPE, "matmul_heads: both inputs need 4 axes: %s x %s",
                      ag_shape_str(a, s1, sizeof s1), ag_shape_str(b, s2, sizeof s2));
        return NULL;
    }
    int la[4], lb[4];
    as_read(a, heads & AG__MM_A, la);
    as_read(b, heads & AG__MM_B, lb);
    return ag__matmul_node(g, "matmul_heads", a, b, tb, heads, la, lb);
}
