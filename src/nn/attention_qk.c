/* attention_qk.c: the queries and keys behind a tensor of attention weights,
 * read back from the graph that made it, for pictures that show a score
 * being computed (q_t[d] k_s[d] for each d, their sum, the scale).
 *
 * Either path of src/nn/attention.c leaves them on the tape:
 *
 *   fast      P = masked_softmax(scores; scale, mask)
 *             scores = matmul_bt(q, k), or matmul_heads(q, k) reading the
 *             heads in place from q [B, T, H, D] and k [B, S, H, D]
 *   textbook  P = softmax(masked_fill(scale(matmul(q, transpose(k)), s), mask))
 *             (masked_fill only with a mask), q [..., T, D], k [..., S, D]
 *
 * The copies come out in P's batch axes: [..., T, D] and [..., S, D], heads
 * as [B, H, T, D].  Nothing is recomputed: the values are the ones the
 * scores were made from. */
#include "nn/nn_internal.h"

/* x [..., R, D] (or [B, R, H, D] read as [B, H, R, D] when heads) copied
 * out with P's batch axes; NULL, with g failed, when the batch axes differ
 * (a broadcast product). */
static ag_tensor *operand(ag_graph *g, const ag_tensor *x, int heads, const ag_tensor *P, int R)
{
    int nd = P->ndim, shape[AG_MAX_DIMS], logical[AG_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) logical[i] = x->shape[i];
    if (heads) logical[1] = x->shape[2], logical[2] = x->shape[1];
    int same = x->ndim == nd && logical[nd - 2] == R;
    for (int i = 0; same && i < nd - 2; i++) same = logical[i] == P->shape[i];
    if (!same) {
        char a[96], b[96];
        ag_graph_fail(g, AG_ERR_SHAPE, "attention_qk: operand %s does not have the batch axes of the weights %s",
                      ag_shape_str(x, a, sizeof a), ag_shape_str(P, b, sizeof b));
        return NULL;
    }
    for (int i = 0; i < nd; i++) shape[i] = logical[i];
    ag_tensor *y = ag_tensor_new(g, nd, shape);
    if (!y || !heads) return y ? (memcpy(y->data, x->data, x->size * sizeof(ag_real)), y) : NULL;
    int B = x->shape[0], T = x->shape[1], H = x->shape[2], D = x->shape[3];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                memcpy(y->data + (((size_t)b * H + h) * T + t) * D, x->data + (((size_t)b * T + t) * H + h) * D,
                       (size_t)D * sizeof(ag_real));
    return y;
}

/* The textbook chain under P = softmax(...): the product q k^T, the scale
 * and the mask; NULL when the chain is another. */
static const ag_tensor *textbook_product(const ag_tensor *P, double *scale, ag_tensor **mask)
{
    const ag_tensor *s = P->src[0];
    *mask = NULL;
    if (s && s->op == AG_OP_MASKED_FILL) *mask = s->src[1], s = s->src[0];
    if (!s || s->op != AG_OP_SCALE) return NULL;
    *scale = ag_tensor_farg(s, 0);
    const ag_tensor *qk = s->src[0];
    if (!qk || qk->op != AG_OP_MATMUL || ag_tensor_iarg(qk, 0) != 0 || ag_tensor_iarg(qk, 1) != 0) return NULL;
    const ag_tensor *kt = qk->src[1];
    return kt && kt->op == AG_OP_PERMUTE ? qk : NULL;
}

ag_status ag_attention_qk(ag_graph *g, const ag_tensor *weights, ag_tensor **q, ag_tensor **k, double *scale,
                          ag_tensor **mask)
{
    if (q) *q = NULL;
    if (k) *k = NULL;
    if (mask) *mask = NULL;
    if (!ag__ok(g, "attention_qk", 0)) return ag_graph_status(g);
    if (!weights || !q || !k || !scale) return ag_graph_fail(g, AG_ERR_ARG, "attention_qk: an argument is NULL");
    const ag_tensor *P = weights, *qk = NULL;
    ag_tensor *m = NULL;
    double s = 0;
    int heads = 0, fast = P->op == AG_OP_MASKED_SOFTMAX && P->nsrc >= 1;
    if (fast) {
        qk = P->src[0], s = ag_tensor_farg(P, 0), m = P->nsrc > 1 ? P->src[1] : NULL;
        heads = qk && qk->op == AG_OP_MATMUL ? ag_tensor_iarg(qk, 1) : 0;
        if (!qk || qk->op != AG_OP_MATMUL || ag_tensor_iarg(qk, 0) != 1 || (heads && heads != (AG__MM_A | AG__MM_B)))
            qk = NULL;
    } else if (P->op == AG_OP_SOFTMAX && P->nsrc >= 1)
        qk = textbook_product(P, &s, &m);
    if (!qk || P->ndim < 2)
        return ag_graph_fail(g, AG_ERR_ARG,
                             "attention_qk: '%s' (op %s) is not attention weights as ag_attention or "
                             "ag_mha_layer_forward return them without dropout",
                             P->name[0] ? P->name : "weights", ag_op_name(P->op));
    const ag_tensor *kk = fast ? qk->src[1] : qk->src[1]->src[0];
    ag_tensor *qc = operand(g, qk->src[0], heads, P, P->shape[P->ndim - 2]);
    ag_tensor *kc = qc ? operand(g, kk, heads, P, P->shape[P->ndim - 1]) : NULL;
    if (!qc || !kc) return ag_graph_status(g);
    *q = ag_set_name(qc, "q"), *k = ag_set_name(kc, "k"), *scale = s;
    if (mask) *mask = m;
    return AG_OK;
}
