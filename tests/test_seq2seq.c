/* tests/test_seq2seq.c: the translator's loss runs its position-wise layers
 * on the real tokens only, packed [n, C] (src/seq2seq.c).  It must give the
 * loss and the gradients of the padded layout, where every position is
 * computed and the cross-entropy ignores the <pad> targets; and it must
 * pass finite differences on its own. */
#include "common.h"

#include "../src/internal.h"

enum { B = 3, S = 5, T = 4, V = 9 };

typedef struct tiny {
    ag_store *s;
    ag_seq2seq m;
    int src[B * S], src_valid[B], tgt_in[B * T], tgt_out[B * T];
} tiny;

static void tiny_make(tiny *t, uint64_t seed)
{
    t->s = ag_store_new();
    ag_seq2seq_config cfg = {.src_vocab = V, .tgt_vocab = V, .hidden = 4, .heads = 2, .ffn = 6, .layers = 2,
                             .max_len = 6, .dropout = 0};
    cr_assert_eq(ag_seq2seq_init(&t->m, t->s, &cfg, seed), AG_OK, "%s", ag_store_error(t->s));
    /* layer norms start at gain 1, bias 0, biases at 0: move them all */
    for (int i = 0; i < ag_store_count(t->s); i++) {
        ag_tensor *p = ag_store_at(t->s, i);
        if (strstr(p->name, "norm")) ag_init_uniform(p, 0.5, 1.5, seed + 3 + (uint64_t)i);
        if (strstr(p->name, "bias")) ag_init_uniform(p, -0.3, 0.3, seed + 50 + (uint64_t)i);
    }
    /* sources of 5 (full), 2 and 1 tokens (<eos> = 2 last); targets of 4
     * (no padding), 2 and 3 tokens: the padded positions hold garbage ids,
     * which must not matter */
    static const int src[B * S] = {4, 5, 6, 7, 2, /**/ 8, 2, 7, 7, 7, /**/ 2, 5, 5, 5, 5};
    static const int valid[B] = {5, 2, 1};
    static const int tin[B * T] = {1, 4, 5, 6, /**/ 1, 7, 3, 3, /**/ 1, 8, 4, 6};
    static const int tout[B * T] = {4, 5, 6, 2, /**/ 7, 2, 0, 0, /**/ 8, 4, 2, 0};
    memcpy(t->src, src, sizeof src), memcpy(t->src_valid, valid, sizeof valid);
    memcpy(t->tgt_in, tin, sizeof tin), memcpy(t->tgt_out, tout, sizeof tout);
}

static ag_tensor *packed_loss(ag_graph *g, void *p)
{
    tiny *t = p;
    return ag_seq2seq_loss(g, &t->m, t->src, t->src_valid, t->tgt_in, t->tgt_out, B, S, T);
}

/* every position computed: logits [B, T, V], <pad> targets ignored */
static ag_tensor *padded_loss(ag_graph *g, void *p)
{
    tiny *t = p;
    ag_tensor *mask = NULL;
    ag_tensor *enc = ag_seq2seq_encode(g, &t->m, t->src, t->src_valid, B, S, &mask);
    ag_tensor *logits = ag_seq2seq_decode(g, &t->m, enc, mask, t->tgt_in, B, T);
    return ag_cross_entropy(g, logits, t->tgt_out, 0, 0.0);
}

/* the loss and every parameter's gradient after one backward */
static double loss_and_grads(tiny *t, ag_build_fn build, double *grads, size_t cap)
{
    ag_graph *g = ag_graph_new();
    ag_store_zero_grad(t->s);
    ag_tensor *loss = build(g, t);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    double l = (double)loss->data[0];
    size_t k = 0;
    for (int i = 0; i < ag_store_count(t->s); i++) {
        ag_tensor *p = ag_store_at(t->s, i);
        for (size_t j = 0; j < p->size; j++) {
            cr_assert_lt(k, cap);
            grads[k++] = (double)p->grad[j];
        }
    }
    ag_graph_free(g);
    return l;
}

Test(seq2seq, packed_rows_give_the_padded_loss_and_gradients)
{
    tiny t;
    tiny_make(&t, 5);
    size_t n = ag_store_numel(t.s);
    double *packed = calloc(n, sizeof *packed), *padded = calloc(n, sizeof *padded);
    double lp = loss_and_grads(&t, packed_loss, packed, n);
    double ld = loss_and_grads(&t, padded_loss, padded, n);
    /* the same sums in another order: rounding apart (f32: a few ulps of
     * terms near 1, over sums of up to 12 rows) */
    cr_assert(fabs(lp - ld) <= TOL(1e-13, 1e-6) * fabs(ld), "loss %.17g packed, %.17g padded", lp, ld);
    cr_assert_gt(lp, 0.5, "a real loss, not an empty one: %g", lp);
    double big = 0;
    for (size_t i = 0; i < n; i++) big = fmax(big, fabs(padded[i]));
    cr_assert_gt(big, 1e-3, "the gradients are not all zero");
    for (size_t i = 0; i < n; i++)
        cr_assert(fabs(packed[i] - padded[i]) <= TOL(1e-13, 1e-6) * big + TOL(1e-11, 1e-4) * fabs(padded[i]),
                  "gradient element %zu: %.10g packed, %.10g padded", i, packed[i], padded[i]);
    free(packed), free(padded);
    ag_seq2seq_free(&t.m);
    ag_store_free(t.s);
}

Test(seq2seq, garbage_in_the_padding_changes_nothing)
{
    tiny t;
    tiny_make(&t, 6);
    ag_graph *g = ag_graph_new();
    double a = (double)packed_loss(g, &t)->data[0];
    ag_graph_reset(g);
    t.src[S + 3] = 1, t.tgt_in[T + 3] = 8; /* padded positions of sentence 1 */
    double b = (double)packed_loss(g, &t)->data[0];
    cr_assert_eq(a, b, "%.17g vs %.17g", a, b);
    ag_graph_free(g);
    ag_seq2seq_free(&t.m);
    ag_store_free(t.s);
}

Test(seq2seq, rows_of_a_padded_batch)
{
    ag_graph *g = ag_graph_new();
    const int len[3] = {2, 0, 7}; /* 7 > T: all 3 positions */
    ag__rows *r = ag__rows_new(g, len, 3, 3);
    cr_assert_not_null(r);
    cr_assert_eq(r->n, 5);
    const int want[5] = {0, 1, 6, 7, 8};
    for (int i = 0; i < 5; i++) cr_assert_eq(r->at[i], want[i], "at[%d]", i);
    /* pack then unpack: the real rows back, zeros at the padding */
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(3, 3, 2));
    for (int i = 0; i < 18; i++) x->data[i] = (ag_real)(i + 1);
    ag_tensor *p = ag__pack(g, x, r);
    expect_shape(p, 5, 2);
    expect_close(p->data, ((double[]){1, 2, 3, 4, 13, 14, 15, 16, 17, 18}), 10, 0, 0, "packed");
    ag_tensor *u = ag__unpack(g, p, r);
    expect_shape(u, 3, 3, 2);
    expect_close(u->data, ((double[]){1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 13, 14, 15, 16, 17, 18}), 18, 0, 0,
                 "unpacked");
    cr_assert_null(ag__rows_new(g, NULL, 3, 3));
    cr_assert_str_eq(ag_graph_error(g), "rows: lengths NULL for B 3, T 3");
    ag_graph_free(g);
}

Test(seq2seq, bad_batches_are_errors)
{
    tiny t;
    tiny_make(&t, 7);
    ag_graph *g = ag_graph_new();
    cr_assert_null(ag_seq2seq_loss(g, &t.m, t.src, NULL, t.tgt_in, t.tgt_out, B, S, T));
    cr_assert_str_eq(ag_graph_error(g), "seq2seq_loss: a batch of B 3, S 5, T 4 with a NULL array");
    ag_graph_reset(g);
    int tin[B * 7] = {0}, tout[B * 7] = {0}; /* targets of 7 tokens: one more than the model's positions */
    cr_assert_null(ag_seq2seq_loss(g, &t.m, t.src, t.src_valid, tin, tout, B, S, 7));
    cr_assert_str_eq(ag_graph_error(g), "seq2seq: sequence of 7 tokens, the model has positions for 6");
    ag_graph_free(g);
    ag_seq2seq_free(&t.m);
    ag_store_free(t.s);
}

#ifdef AG_DOUBLE
Test(seq2seq, packed_loss_gradcheck_every_parameter)
{
    tiny t;
    tiny_make(&t, 8);
    int n = ag_store_count(t.s);
    ag_tensor **in = calloc((size_t)n, sizeof *in);
    ag_gradcheck_result *r = calloc((size_t)n, sizeof *r);
    for (int i = 0; i < n; i++) in[i] = ag_store_at(t.s, i);
    ag_graph *g = ag_graph_new();
    ag_status st = ag_gradcheck(g, packed_loss, &t, in, n, NULL, r);
    cr_assert_eq(st, AG_OK, "%s", ag_graph_error(g));
    for (int i = 0; i < n; i++)
        cr_expect_eq(r[i].failed, 0, "%s: %zu elements fail (max abs %.3g, rel %.3g)", r[i].input->name,
                     r[i].failed, r[i].max_abs_err, r[i].max_rel_err);
    ag_graph_free(g);
    free(in), free(r);
    ag_seq2seq_free(&t.m);
    ag_store_free(t.s);
}
#endif
