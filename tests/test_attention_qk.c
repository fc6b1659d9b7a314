/* tests/test_attention_qk.c: ag_attention_qk reads back the queries, keys,
 * scale and mask behind attention weights, on both paths (fast and
 * textbook), for multi-head attention and plain ag_attention:
 *   - q and k equal the linear layers' outputs x W_q^T + b, x W_k^T + b,
 *     head h being features h D .. h D + D - 1;
 *   - softmax(scale q_t.k_s, masked where the mask is 0) gives P back;
 *   - weights made another way (after dropout, any other op) are refused
 *     with a message, and the outputs stay NULL. */
#include "common.h"

#include <string.h>

enum { B = 2, T = 3, S = 4, C = 8, H = 2, D = C / H };

static ag_tensor *random_tensor(ag_graph *g, int ndim, const int *shape, uint64_t seed)
{
    ag_tensor *x = ag_tensor_new(g, ndim, shape);
    cr_assert_not_null(x);
    ag_init_uniform(x, -1, 1, seed);
    return x;
}

/* q [B, H, R, D] against y = lin(x) [B, R, C]: q[b, h, r, d] = y[b, r, h D + d] */
static void expect_heads(ag_graph *g, const ag_linear_layer *lin, ag_tensor *x, const ag_tensor *q, int R, const char *what)
{
    ag_tensor *y = ag_linear_layer_forward(g, lin, x);
    cr_assert_not_null(y);
    expect_shape(q, B, H, R, D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int r = 0; r < R; r++)
                for (int d = 0; d < D; d++)
                    cr_assert_eq(q->data[((b * H + h) * R + r) * D + d], y->data[(b * R + r) * C + h * D + d],
                                 "%s[%d, %d, %d, %d]", what, b, h, r, d);
}

/* P's rows from q, k, scale and mask ([B, 1, 1, S], [T, S] or NULL) */
static void expect_weights(const ag_tensor *P, const ag_tensor *q, const ag_tensor *k, double scale,
                           const ag_tensor *mask, int Tq, int Sk)
{
    int rows = (int)(P->size / (size_t)Sk), per_b = rows / B;
    for (int r = 0; r < rows; r++) {
        double z[16], mx = -INFINITY, sum = 0;
        int b = r / per_b, t = r % Tq;
        for (int s = 0; s < Sk; s++) {
            double dot = 0;
            for (int d = 0; d < D; d++) dot += (double)q->data[r * D + d] * k->data[(r / Tq * Sk + s) * D + d];
            int keep = !mask || (mask->ndim == 2 ? mask->data[t * Sk + s] : mask->data[b * Sk + s]) != 0;
            z[s] = keep ? scale * dot : -INFINITY;
            mx = z[s] > mx ? z[s] : mx;
        }
        for (int s = 0; s < Sk; s++) sum += exp(z[s] - mx);
        for (int s = 0; s < Sk; s++) {
            double want = exp(z[s] - mx) / sum;
            cr_assert(fabs(P->data[r * Sk + s] - want) <= TOL(1e-12, 1e-5), "P[%d, %d] = %g, want %g", r, s,
                      (double)P->data[r * Sk + s], want);
        }
    }
}

static void mha_case(int textbook, int causal)
{
    ag_store *st = ag_store_new();
    ag_graph *g = ag_graph_new();
    ag_graph_set_training(g, 0); /* eval: no dropout on the weights */
    ag_mha_layer m;
    cr_assert_eq(ag_mha_layer_init(&m, st, "mha", C, H, 1, 0.1, 7), AG_OK);
    m.textbook = textbook, m.causal = causal;
    int kv = causal ? T : S;
    ag_tensor *xq = random_tensor(g, AG_SHAPE(B, T, C), 1);
    ag_tensor *xkv = causal ? xq : random_tensor(g, AG_SHAPE(B, S, C), 2);
    int valid[B] = {kv, 2};
    ag_tensor *pad = ag_padding_mask(g, valid, B, 0, T, kv), *P = NULL, *q, *k, *mask;
    cr_assert_not_null(ag_mha_layer_forward(g, &m, xq, xkv, causal ? NULL : pad, AG_MASK_NEG_INF, &P));
    double scale = 0;
    cr_assert_eq(ag_attention_qk(g, P, &q, &k, &scale, &mask), AG_OK, "%s", ag_graph_error(g));
    cr_assert_float_eq(scale, 1 / sqrt((double)D), 1e-15);
    expect_heads(g, &m.w_q, xq, q, T, "q");
    expect_heads(g, &m.w_k, xkv, k, kv, "k");
    cr_assert_not_null(mask, "the mask is returned");
    if (!causal) cr_assert_eq(mask, pad);
    else
        for (int t = 0; t < T; t++)
            for (int s = 0; s < T; s++) cr_assert_eq(mask->data[t * T + s] != 0, s <= t);
    expect_weights(P, q, k, scale, mask, T, kv);
    ag_graph_free(g);
    ag_store_free(st);
}

Test(attention_qk, fast_cross_attention) { mha_case(0, 0); }
Test(attention_qk, textbook_cross_attention) { mha_case(1, 0); }
Test(attention_qk, fast_causal) { mha_case(0, 1); }
Test(attention_qk, textbook_causal) { mha_case(1, 1); }

Test(attention_qk, plain_attention_without_mask)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *q0 = random_tensor(g, AG_SHAPE(B, T, D), 3), *k0 = random_tensor(g, AG_SHAPE(B, S, D), 4);
    ag_tensor *v0 = random_tensor(g, AG_SHAPE(B, S, D), 5), *P, *q, *k, *mask = q0;
    double scale;
    cr_assert_not_null(ag_attention(g, q0, k0, v0, NULL, 0, 0, &P));
    cr_assert_eq(ag_attention_qk(g, P, &q, &k, &scale, &mask), AG_OK, "%s", ag_graph_error(g));
    cr_assert_null(mask);
    cr_assert(q != q0 && !memcmp(q->data, q0->data, q0->size * sizeof(ag_real)), "q is a copy of the queries");
    cr_assert(!memcmp(k->data, k0->data, k0->size * sizeof(ag_real)));
    expect_weights(P, q, k, scale, NULL, T, S);
    ag_graph_free(g);
}

Test(attention_qk, refuses_other_tensors)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = random_tensor(g, AG_SHAPE(B, T, D), 3), *q = x, *k = x, *mask = x, *P;
    double scale;
    ag_tensor *y = ag_softmax(g, x);
    cr_assert_eq(ag_attention_qk(g, y, &q, &k, &scale, &mask), AG_ERR_ARG);
    cr_assert(!q && !k && !mask, "the outputs stay NULL");
    cr_assert(strstr(ag_graph_error(g), "not attention weights"), "%s", ag_graph_error(g));
    /* after dropout, the weights are not the softmax's */
    ag_graph_reset(g);
    ag_graph_set_training(g, 1);
    x = random_tensor(g, AG_SHAPE(B, T, D), 3);
    cr_assert_not_null(ag_attention(g, x, x, x, NULL, 0, 0.5, &P));
    cr_assert_eq(ag_attention_qk(g, P, &q, &k, &scale, NULL), AG_ERR_ARG);
    ag_graph_reset(g);
    cr_assert_eq(ag_attention_qk(g, NULL, &q, &k, &scale, NULL), AG_ERR_ARG);
    ag_graph_free(g);
}
