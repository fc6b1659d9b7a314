/* tests/test_textbook.c: the textbook attention path against the fast one.
 *
 * ag_attention_textbook and ag_mha_layer_forward_textbook build attention from
 * public ops only (matmul, transpose, scale, masked_fill, softmax; heads by
 * reshape + permute); ag_attention and ag_mha_layer_forward use the fused
 * masked_softmax and the per-head matmul.  They must be one function: same
 * outputs, same attention weights, and the same gradient for every
 * parameter and every input, on both tutorials' cases:
 *   - the PyTorch tutorial's MultiHeadSelfAttention (d_model 64, 8 heads,
 *     x [2, 4, 64], -1e9 where mask == 0, LayerNorm(x + W_o(concat(heads))));
 *   - d2l.ai's MultiHeadAttention (num_hiddens 100, 5 heads, no bias,
 *     queries [2, 4, 100], keys = values [2, 6, 100], valid_lens [3, 2]),
 *     in eval and in training (dropout 0.5: both draw the same mask).
 * Inputs are random (d2l's are ones, which make every score equal and
 * would hide a wrong head or a transposed product).
 * Tolerance: |fast - textbook| <= 1e-12 (1 + |textbook|) in double; 2e-5 in
 * float (the sums run in another order).  The loss weighs every output
 * element differently: L = sum(out * w), w uniform in [-1, 1]. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

#define TOL_TB TOL(1e-12, 2e-5)

typedef enum { FAST, TEXTBOOK } path;

/* L = sum(y * w), w fixed random. */
static ag_tensor *weigh(ag_graph *g, ag_tensor *y, uint64_t seed)
{
    if (!y) return NULL;
    ag_tensor *w = ag_tensor_new(g, y->ndim, y->shape);
    if (!w) return NULL;
    ag_init_uniform(w, -1, 1, seed);
    return ag_sum_all(g, ag_mul(g, y, w));
}

/* What one run leaves: the output, the weights, every store gradient. */
typedef struct run {
    size_t n_out, n_w;
    double *out, *w;
    int n_grads;
    double *grads[16];
    size_t grad_n[16];
} run;

static double *keep(const ag_real *v, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    cr_assert_not_null(d);
    for (size_t i = 0; i < n; i++) d[i] = (double)v[i];
    return d;
}

static run keep_run(const ag_store *s, const ag_tensor *out, const ag_tensor *w)
{
    run r = {.n_out = out->size, .n_w = w->size, .out = keep(out->data, out->size), .w = keep(w->data, w->size)};
    r.n_grads = ag_store_count(s);
    cr_assert_leq(r.n_grads, 16);
    for (int i = 0; i < r.n_grads; i++) {
        const ag_tensor *p = ag_store_at(s, i);
        cr_assert_not_null(p->grad, "%s has no gradient", p->name);
        r.grads[i] = keep(p->grad, p->size);
        r.grad_n[i] = p->size;
    }
    return r;
}

static void drop_run(run *r)
{
    free(r->out), free(r->w);
    for (int i = 0; i < r->n_grads; i++) free(r->grads[i]);
}

/* fast and textbook agree, value by value; the textbook's is the reference */
static void expect_same(const run *fast, const run *tb, const ag_store *s, const char *what)
{
    char label[160];
    cr_assert_eq(fast->n_out, tb->n_out);
    for (size_t i = 0; i < tb->n_out; i++)
        cr_assert_leq(fabs(fast->out[i] - tb->out[i]), TOL_TB * (1 + fabs(tb->out[i])), "%s: out[%zu] %.17g vs %.17g",
                      what, i, fast->out[i], tb->out[i]);
    for (size_t i = 0; i < tb->n_w; i++)
        cr_assert_leq(fabs(fast->w[i] - tb->w[i]), TOL_TB * (1 + fabs(tb->w[i])), "%s: weights[%zu]", what, i);
    cr_assert_eq(fast->n_grads, tb->n_grads);
    for (int k = 0; k < tb->n_grads; k++) {
        snprintf(label, sizeof label, "%s: d%s", what, ag_store_at(s, k)->name);
        for (size_t i = 0; i < tb->grad_n[k]; i++)
            cr_assert_leq(fabs(fast->grads[k][i] - tb->grads[k][i]), TOL_TB * (1 + fabs(tb->grads[k][i])),
                          "%s[%zu]: fast %.17g, textbook %.17g", label, i, fast->grads[k][i], tb->grads[k][i]);
    }
}

/* Every gradient must be a real signal, not zeros on both sides. */
static void expect_nonzero_grads(const run *r, const ag_store *s)
{
    for (int k = 0; k < r->n_grads; k++) {
        double norm = 0;
        for (size_t i = 0; i < r->grad_n[k]; i++) norm += r->grads[k][i] * r->grads[k][i];
        cr_assert_gt(norm, 0, "d%s is all zeros", ag_store_at(s, k)->name);
    }
}

/* ---- the PyTorch tutorial's MultiHeadSelfAttention ------------------------ */

enum { PT_B = 2, PT_T = 4, PT_C = 64, PT_H = 8 };

static run pytorch_run(path how, int masked)
{
    ag_store *s = ag_store_new();
    ag_mha_layer mha;
    ag_layer_norm_layer norm;
    cr_assert_eq(ag_mha_layer_init(&mha, s, "mha", PT_C, PT_H, 1, 0.0, 3), AG_OK);
    cr_assert_eq(ag_layer_norm_layer_init(&norm, s, "layer_norm", PT_C), AG_OK);
    ag_tensor *x = ag_param(s, "x", AG_SHAPE(PT_B, PT_T, PT_C)); /* an input: its gradient is checked too */
    cr_assert_not_null(x);
    ag_init_normal(x, 0, 1, 4);
    ag_init_normal(norm.weight, 1, 0.1, 5); /* not the identity, so LayerNorm's gain matters */
    ag_graph *g = ag_graph_new();
    ag_tensor *mask = NULL;
    if (masked) { /* sentence 0 hides its last key, sentence 1 its last two */
        mask = ag_tensor_new(g, AG_SHAPE(PT_B, 1, 1, PT_T));
        ag_init_const(mask, 1);
        mask->data[3] = 0, mask->data[PT_T + 2] = 0, mask->data[PT_T + 3] = 0;
    }
    ag_tensor *w = NULL;
    ag_tensor *a = how == FAST ? ag_mha_layer_forward(g, &mha, x, x, mask, -1e9, &w)
                               : ag_mha_layer_forward_textbook(g, &mha, x, x, mask, -1e9, &w);
    ag_tensor *out = ag_add_norm(g, &norm, x, a, 0);
    cr_assert_eq(ag_backward(g, weigh(g, out, 6)), AG_OK, "%s", ag_graph_error(g));
    expect_shape(w, PT_B, PT_H, PT_T, PT_T);
    run r = keep_run(s, out, w);
    ag_graph_free(g);
    ag_store_free(s);
    return r;
}

/* The store of a case, for the gradients' names. */
static void pytorch_names(ag_store *s)
{
    ag_mha_layer mha;
    ag_layer_norm_layer norm;
    ag_mha_layer_init(&mha, s, "mha", PT_C, PT_H, 1, 0.0, 3);
    ag_layer_norm_layer_init(&norm, s, "layer_norm", PT_C);
    ag_param(s, "x", AG_SHAPE(PT_B, PT_T, PT_C));
}

/* Both paths of a case, with option 0 and 1 (no mask / mask, eval /
 * training): the same numbers, and every gradient non-zero. */
static void compare(run (*one)(path, int), void (*names)(ag_store *), const char *what[2])
{
    for (int opt = 0; opt <= 1; opt++) {
        run fast = one(FAST, opt), tb = one(TEXTBOOK, opt);
        ag_store *s = ag_store_new();
        names(s);
        expect_same(&fast, &tb, s, what[opt]);
        expect_nonzero_grads(&tb, s);
        ag_store_free(s);
        drop_run(&fast), drop_run(&tb);
    }
}

Test(textbook, pytorch_tutorial_fast_equals_textbook)
{
    compare(pytorch_run, pytorch_names, (const char *[2]){"pytorch", "pytorch, masked"});
}

/* ---- a causal self-attention (ag_mha_layer.causal: the mask made inside) ------- */

static run causal_run(path how, int padded)
{
    ag_store *s = ag_store_new();
    ag_mha_layer mha;
    cr_assert_eq(ag_mha_layer_init(&mha, s, "mha", PT_C, PT_H, 1, 0.0, 13), AG_OK);
    mha.causal = 1;
    ag_tensor *x = ag_param(s, "x", AG_SHAPE(PT_B, PT_T, PT_C));
    cr_assert_not_null(x);
    ag_init_normal(x, 0, 1, 14);
    ag_graph *g = ag_graph_new();
    const int valid[PT_B] = {4, 3};
    ag_tensor *mask = padded ? ag_padding_mask(g, valid, PT_B, 0, PT_T, PT_T) : NULL;
    ag_tensor *w = NULL;
    ag_tensor *out = how == FAST ? ag_mha_layer_forward(g, &mha, x, x, mask, AG_MASK_NEG_INF, &w)
                                 : ag_mha_layer_forward_textbook(g, &mha, x, x, mask, AG_MASK_NEG_INF, &w);
    cr_assert_eq(ag_backward(g, weigh(g, out, 15)), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(w->data[1], 0, "query 0 sees key 1");
    run r = keep_run(s, out, w);
    ag_graph_free(g);
    ag_store_free(s);
    return r;
}

static void causal_names(ag_store *s)
{
    ag_mha_layer mha;
    ag_mha_layer_init(&mha, s, "mha", PT_C, PT_H, 1, 0.0, 13);
    ag_param(s, "x", AG_SHAPE(PT_B, PT_T, PT_C));
}

Test(textbook, causal_flag_fast_equals_textbook)
{
    compare(causal_run, causal_names, (const char *[2]){"causal", "causal and padded"});
}

/* ---- d2l.ai's MultiHeadAttention ------------------------------------------ */

enum { D2_B = 2, D2_T = 4, D2_S = 6, D2_C = 100, D2_H = 5 };

static void d2l_store(ag_store *s, ag_mha_layer *mha)
{
    cr_assert_eq(ag_mha_layer_init(mha, s, "attention", D2_C, D2_H, 0, 0.5, 7), AG_OK);
    cr_assert_not_null(ag_param(s, "queries", AG_SHAPE(D2_B, D2_T, D2_C)));
    cr_assert_not_null(ag_param(s, "keys_values", AG_SHAPE(D2_B, D2_S, D2_C)));
}

static run d2l_run(path how, int training)
{
    ag_store *s = ag_store_new();
    ag_mha_layer mha;
    d2l_store(s, &mha);
    ag_tensor *q = ag_store_find(s, "queries"), *kv = ag_store_find(s, "keys_values");
    ag_init_normal(q, 0, 1, 8), ag_init_normal(kv, 0, 1, 9);
    ag_graph *g = ag_graph_new();
    ag_graph_seed(g, 11); /* the same dropout draws on both paths */
    ag_graph_set_training(g, training);
    const int valid_lens[D2_B] = {3, 2};
    ag_tensor *mask = ag_padding_mask(g, valid_lens, D2_B, 0, D2_T, D2_S);
    ag_tensor *w = NULL;
    ag_tensor *out = how == FAST ? ag_mha_layer_forward(g, &mha, q, kv, mask, -1e6, &w)
                                 : ag_mha_layer_forward_textbook(g, &mha, q, kv, mask, -1e6, &w);
    cr_assert_eq(ag_backward(g, weigh(g, out, 12)), AG_OK, "%s", ag_graph_error(g));
    expect_shape(out, D2_B, D2_T, D2_C);
    expect_shape(w, D2_B, D2_H, D2_T, D2_S);
    /* keys past valid_lens get no weight on either path */
    for (int b = 0; b < D2_B; b++)
        for (int s2 = valid_lens[b]; s2 < D2_S; s2++) cr_assert_eq(w->data[(size_t)b * D2_H * D2_T * D2_S + s2], 0);
    run r = keep_run(s, out, w);
    ag_graph_free(g);
    ag_store_free(s);
    return r;
}

static void d2l_names(ag_store *s)
{
    ag_mha_layer mha;
    d2l_store(s, &mha);
}

Test(textbook, d2l_fast_equals_textbook)
{
    compare(d2l_run, d2l_names, (const char *[2]){"d2l, eval", "d2l, dropout 0.5"});
}

/* ---- the textbook graph is made of the public ops it names ---------------- */

/* Count the ops that out was computed from (each node once). */
static void count_ops(const ag_tensor *t, const ag_tensor **seen, int *nseen, int *count)
{
    for (int i = 0; i < *nseen; i++)
        if (seen[i] == t) return;
    cr_assert_lt(*nseen, 256);
    seen[(*nseen)++] = t;
    count[t->op]++;
    for (int k = 0; k < t->nsrc; k++)
        if (t->src[k]) count_ops(t->src[k], seen, nseen, count);
}

Test(textbook, built_from_public_ops_only)
{
    ag_store *s = ag_store_new();
    ag_mha_layer mha;
    cr_assert_eq(ag_mha_layer_init(&mha, s, "mha", 8, 2, 1, 0.0, 1), AG_OK);
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(1, 3, 8));
    ag_init_normal(x, 0, 1, 2);
    ag_tensor *mask = ag_causal_mask(g, 3, 3);
    ag_tensor *out = ag_mha_layer_forward_textbook(g, &mha, x, x, mask, AG_MASK_NEG_INF, NULL);
    cr_assert_eq(ag_graph_status(g), AG_OK, "%s", ag_graph_error(g));
    const ag_tensor *seen[256];
    int nseen = 0, count[AG_OP_COUNT] = {0};
    count_ops(out, seen, &nseen, count);
    cr_assert_eq(count[AG_OP_MASKED_SOFTMAX], 0, "the fused softmax is on the textbook path");
    cr_assert_eq(count[AG_OP_LINEAR], 4, "W_q, W_k, W_v, W_o");
    cr_assert_eq(count[AG_OP_PERMUTE], 3 + 1 + 1, "3 head splits, K^T, the join");
    cr_assert_eq(count[AG_OP_RESHAPE], 3 + 1, "3 head splits, the join");
    cr_assert_eq(count[AG_OP_MATMUL], 2, "Q K^T and P V");
    cr_assert_eq(count[AG_OP_SCALE], 1);
    cr_assert_eq(count[AG_OP_MASKED_FILL], 1);
    cr_assert_eq(count[AG_OP_SOFTMAX], 1);
    /* and an ag_mha_layer with .textbook = 1 takes the same path through a block */
    ag_mha_layer tb = mha;
    tb.textbook = 1;
    ag_tensor *out2 = ag_mha_layer_forward(g, &tb, x, x, mask, AG_MASK_NEG_INF, NULL);
    cr_assert_eq(ag_graph_status(g), AG_OK, "%s", ag_graph_error(g));
    for (size_t i = 0; i < out->size; i++) cr_assert_eq(out->data[i], out2->data[i]);
    ag_graph_free(g);
    ag_store_free(s);
}

Test(textbook, attention_textbook_bad_input_is_an_error)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *q = ag_tensor_new(g, AG_SHAPE(2, 3, 4)), *k = ag_tensor_new(g, AG_SHAPE(2, 5, 6));
    cr_assert_null(ag_attention_textbook(g, q, k, k, NULL, AG_MASK_NEG_INF, 0, NULL));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_not_null(strstr(ag_graph_error(g), "matmul"), "%s", ag_graph_error(g));
    ag_graph_reset(g);
    cr_assert_null(ag_attention_textbook(g, NULL, k, k, NULL, AG_MASK_NEG_INF, 0, NULL));
    cr_assert_neq(ag_graph_status(g), AG_OK);
    ag_graph_reset(g);
    cr_assert_null(ag_mha_layer_forward_textbook(g, NULL, q, q, NULL, 0, NULL));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG);
    ag_graph_free(g);
}
