/* tests/test_robust.c: numerical safety and hostile input.
 *
 *   - attention with a fully masked query row gives zeros (fill -inf) and
 *     finite gradients; scores and logits of +-1e4 stay finite;
 *   - ag_graph_check_finite and AG_CHECK_FINITE=1 name the first op whose
 *     output or gradient is NaN or Inf, with shapes and position, and raise
 *     no false alarm on masked attention or a whole seq2seq training step;
 *   - gradient clipping refuses a non-finite norm;
 *   - the safetensors reader rejects every truncation and survives every
 *     single-byte change of a valid checkpoint, and every cut of the
 *     tests/st_corpus.h files (a deterministic fuzz that runs in make test,
 *     beside tests/fuzz/, whose libFuzzer runs take minutes);
 *   - the data-file reader names the line of each kind of bad line. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "st_corpus.h"

/* ---- attention: masked rows and large scores ------------------------------------ */

/* q [1, 1, 3, 2], k [1, 1, 4, 2], v [1, 1, 4, 3]; the mask [1, 1, 3, 4] lets
 * query 0 see keys 0-1, query 1 none, query 2 all. */
static const ag_real Q[6] = {0.5, -1, 1.5, 0.25, -0.75, 2};
static const ag_real K[8] = {1, 0.5, -0.5, 1, 2, -1, 0.25, 0.75};
static const ag_real V[12] = {1, 2, 3, -1, 0.5, 4, 2, -2, 1, 0, 1, -3};
static const ag_real MASK[12] = {1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
static const ag_real W_OUT[9] = {1, -2, 0.5, 3, 1, -1, 0.25, 2, -0.5};

typedef struct attn_run {
    ag_graph *g;
    ag_tensor *q, *k, *v, *out, *p;
} attn_run;

static attn_run attend(double fill, double scale)
{
    attn_run r = {ag_graph_new(), 0, 0, 0, 0, 0};
    ag_real q[6];
    for (int i = 0; i < 6; i++) q[i] = (ag_real)(Q[i] * scale);
    r.q = ag_tensor_from(r.g, AG_SHAPE(1, 1, 3, 2), q);
    r.k = ag_tensor_from(r.g, AG_SHAPE(1, 1, 4, 2), K);
    r.v = ag_tensor_from(r.g, AG_SHAPE(1, 1, 4, 3), V);
    ag_set_requires_grad(r.q, 1);
    ag_set_requires_grad(r.k, 1);
    ag_set_requires_grad(r.v, 1);
    ag_tensor *mask = ag_tensor_from(r.g, AG_SHAPE(1, 1, 3, 4), MASK);
    r.out = ag_attention(r.g, r.q, r.k, r.v, mask, fill, 0, &r.p);
    ag_tensor *w = ag_tensor_from(r.g, AG_SHAPE(1, 1, 3, 3), W_OUT);
    cr_assert_eq(ag_backward(r.g, ag_sum_all(r.g, ag_mul(r.g, r.out, w))), AG_OK, "%s", ag_graph_error(r.g));
    return r;
}

static void expect_all_finite(const ag_tensor *t, const ag_real *x, const char *what)
{
    cr_assert_not_null(x, "%s: no values", what);
    for (size_t i = 0; i < t->size; i++) cr_assert(isfinite(x[i]), "%s[%zu] = %g", what, i, (double)x[i]);
}

Test(robust, attention_fully_masked_row_gives_zeros_and_finite_gradients)
{
    attn_run r = attend(-INFINITY, 1);
    /* query 1 sees no key: zero weights, zero output */
    for (int s = 0; s < 4; s++) cr_assert_eq(r.p->data[4 + s], 0, "p[1][%d] = %g", s, (double)r.p->data[4 + s]);
    for (int d = 0; d < 3; d++) cr_assert_eq(r.out->data[3 + d], 0, "out[1][%d] = %g", d, (double)r.out->data[3 + d]);
    /* the other rows are distributions over the keys they may see */
    double sum0 = (double)r.p->data[0] + (double)r.p->data[1], sum2 = 0;
    for (int s = 0; s < 4; s++) sum2 += (double)r.p->data[8 + s];
    cr_assert_eq(r.p->data[2], 0);
    cr_assert_eq(r.p->data[3], 0);
    cr_assert(fabs(sum0 - 1) < TOL(1e-15, 1e-6) && fabs(sum2 - 1) < TOL(1e-15, 1e-6), "rows sum to %g, %g", sum0, sum2);
    /* by hand for query 0: scores (q.k)/sqrt(2) over keys 0 and 1 */
    double s0 = (0.5 * 1 + -1 * 0.5) / sqrt(2.0), s1 = (0.5 * -0.5 + -1 * 1) / sqrt(2.0);
    double p0 = 1 / (1 + exp(s1 - s0));
    expect_close(r.p->data, ((double[]){p0, 1 - p0}), 2, TOL(1e-14, 1e-6), 0, "p[0]");
    expect_all_finite(r.q, r.q->grad, "dq");
    expect_all_finite(r.k, r.k->grad, "dk");
    expect_all_finite(r.v, r.v->grad, "dv");
    /* the masked query gets no gradient, and neither do keys nobody sees
     * (key 2 and 3 are seen by query 2 only, keys 0 and 1 by 0 and 2) */
    cr_assert_eq(r.q->grad[2], 0);
    cr_assert_eq(r.q->grad[3], 0);
    ag_graph_free(r.g);
}

Test(robust, attention_fully_masked_row_with_a_finite_fill_is_uniform)
{
    /* -1e9 (the PyTorch tutorial's fill): a row with no allowed key gets
     * equal weights over all keys, as in PyTorch, and stays finite */
    attn_run r = attend(-1e9, 1);
    for (int s = 0; s < 4; s++)
        cr_assert(fabs((double)r.p->data[4 + s] - 0.25) < TOL(1e-15, 1e-7), "p[1][%d] = %g", s, (double)r.p->data[4 + s]);
    for (int d = 0; d < 3; d++) {
        double mean = (V[d] + V[3 + d] + V[6 + d] + V[9 + d]) / 4.0;
        cr_assert(fabs((double)r.out->data[3 + d] - mean) < TOL(1e-14, 1e-6), "out[1][%d]", d);
    }
    expect_all_finite(r.q, r.q->grad, "dq");
    expect_all_finite(r.k, r.k->grad, "dk");
    expect_all_finite(r.v, r.v->grad, "dv");
    ag_graph_free(r.g);
}

Test(robust, attention_scores_of_1e4_stay_finite)
{
    /* q scaled so that the scores reach about +-1e4: the softmax saturates
     * to one-hot rows, and everything stays finite */
    attn_run r = attend(-INFINITY, 1e4 / 2.2);
    double top = 0;
    for (size_t i = 0; i < r.p->size; i++) top = fmax(top, fabs((double)r.p->data[i]));
    cr_assert_eq(top, 1, "a saturated softmax row is one-hot");
    expect_all_finite(r.out, r.out->data, "out");
    expect_all_finite(r.q, r.q->grad, "dq");
    expect_all_finite(r.k, r.k->grad, "dk");
    expect_all_finite(r.v, r.v->grad, "dv");
    ag_graph_free(r.g);
}

Test(robust, logits_of_1e4_give_finite_losses_and_gradients)
{
    ag_graph *g = ag_graph_new();
    const ag_real big[8] = {1e4, -1e4, 0, 1, -1e4, -1e4, 1e4, 1e4};
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 4), big);
    ag_set_requires_grad(x, 1);
    const int tgt[2] = {1, 0};
    /* label smoothing spreads the loss over every logit, -1e4 ones too */
    ag_tensor *ce = ag_cross_entropy(g, x, tgt, -100, 0.1);
    ag_tensor *ls = ag_sum_all(g, ag_mul(g, ag_log_softmax(g, x), ag_softmax(g, x)));
    ag_tensor *loss = ag_add(g, ce, ls);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    cr_assert(isfinite(ce->data[0]) && isfinite(ls->data[0]), "losses %g %g", (double)ce->data[0], (double)ls->data[0]);
    /* row 0: -log p(target 1) = 2e4; row 1: -log p(0) = 2e4 + log 2;
     * smoothing adds 0.1 * mean over v of -log p(v) */
    double r0 = 0.9 * 2e4 + 0.1 * (0 + 2e4 + 1e4 + (1e4 - 1)) / 4;
    double r1 = 0.9 * (2e4 + log(2.0)) + 0.1 * ((2e4 + log(2.0)) * 2 + log(2.0) * 2) / 4;
    expect_close(ce->data, ((double[]){(r0 + r1) / 2}), 1, 0, TOL(1e-12, 1e-6), "cross_entropy");
    expect_all_finite(x, x->grad, "dx");
    ag_graph_free(g);
}

/* ---- ag_graph_check_finite -------------------------------------------------------- */

Test(robust, check_finite_names_the_op_that_made_a_nan)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 2, 3, 4, 5, -6}));
    ag_tensor *y = ag_log(g, x);                  /* node 1: log(-6) is NaN */
    ag_tensor *z = ag_exp(g, ag_scale(g, y, 2));  /* carries it on */
    cr_assert_not_null(z);
    cr_assert_eq(ag_graph_check_finite(g), AG_ERR_NUMERIC);
    cr_assert_str_eq(ag_graph_error(g), "check_finite: log output [2, 3] has NaN at [1, 2] (node 1, inputs [2, 3])");
    /* sticky like any error: later ops do nothing, the check says it again */
    cr_assert_null(ag_exp(g, z));
    cr_assert_eq(ag_graph_check_finite(g), AG_ERR_NUMERIC);
    ag_graph_reset(g);
    ag_tensor *ok = ag_log(g, ag_tensor_from(g, AG_SHAPE(3), ((ag_real[]){1, 2, 3})));
    cr_assert_not_null(ok);
    cr_assert_eq(ag_graph_check_finite(g), AG_OK, "%s", ag_graph_error(g));
    ag_graph_free(g);
}

Test(robust, check_finite_names_overflow_and_division_by_zero)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_set_name(ag_tensor_from(g, AG_SHAPE(3), ((ag_real[]){1, 1000, 2})), "x");
    ag_set_name(ag_exp(g, x), "e");
    cr_assert_eq(ag_graph_check_finite(g), AG_ERR_NUMERIC);
    cr_assert_str_eq(ag_graph_error(g), "check_finite: exp output 'e' [3] has Inf at [1] (node 1, inputs [3])");
    ag_graph_reset(g);
    ag_tensor *a = ag_tensor_from(g, AG_SHAPE(2, 2), ((ag_real[]){1, -2, 3, 4}));
    ag_tensor *b = ag_tensor_from(g, AG_SHAPE(2), ((ag_real[]){1, 0}));
    ag_div(g, a, b);
    cr_assert_eq(ag_graph_check_finite(g), AG_ERR_NUMERIC);
    cr_assert_str_eq(ag_graph_error(g), "check_finite: div output [2, 2] has -Inf at [0, 1] (node 2, inputs [2, 2], [2])");
    ag_graph_free(g);
}

Test(robust, check_finite_accepts_masks_of_minus_infinity)
{
    /* -inf as a fill value, carried on by max and log_softmax, and in a
     * leaf (an additive mask): no alarm.  A NaN in a leaf is one. */
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 2, 3, 4, 5, 6}));
    ag_tensor *mask = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 0, 1, 0, 0, 0}));
    ag_set_requires_grad(x, 1);
    ag_tensor *m = ag_masked_fill(g, x, mask, -INFINITY);
    ag_tensor *p = ag_softmax(g, m);
    ag_tensor *lp = ag_log_softmax(g, m);
    ag_tensor *mx = ag_max(g, m, -1, 0);
    ag_tensor *add = ag_tensor_from(g, AG_SHAPE(3), ((ag_real[]){0, -INFINITY, 0}));
    ag_tensor *p2 = ag_softmax(g, ag_add(g, x, add));
    cr_assert(p && lp && mx && p2);
    cr_assert(isinf(lp->data[1]) && isinf(mx->data[1]), "the masked row carries -inf");
    ag_tensor *keep = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 0, 1, 0, 0, 0}));
    ag_tensor *loss = ag_add(g, ag_sum_all(g, ag_mul(g, p, x)), ag_sum_all(g, ag_masked_fill(g, lp, keep, 0)));
    cr_assert_eq(ag_backward(g, ag_add(g, loss, ag_sum_all(g, p2))), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(ag_graph_check_finite(g), AG_OK, "%s", ag_graph_error(g));

    ag_graph_reset(g);
    ag_set_name(ag_tensor_from(g, AG_SHAPE(2), ((ag_real[]){0, NAN})), "data");
    cr_assert_eq(ag_graph_check_finite(g), AG_ERR_NUMERIC);
    cr_assert_str_eq(ag_graph_error(g), "check_finite: leaf 'data' [2] has NaN at [1] (node 0)");
    ag_graph_free(g);
}

Test(robust, check_finite_names_a_bad_gradient_and_a_bad_parameter)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = ag_param(s, "w", AG_SHAPE(2, 2));
    ag_init_const(w, 1);
    w->data[3] = 0; /* sqrt is finite at 0, its derivative is not */
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 2), ((ag_real[]){1, 2, 3, 4}));
    ag_tensor *loss = ag_sum_all(g, ag_mul(g, ag_sqrt(g, w), x));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    cr_assert(isinf(w->grad[3]), "dw[3] = %g", (double)w->grad[3]);
    cr_assert_eq(ag_graph_check_finite(g), AG_ERR_NUMERIC);
    cr_assert_str_eq(ag_graph_error(g),
                     "check_finite: gradient of parameter 'w' [2, 2] has Inf at [1, 1] (input 0 of node 1, sqrt)");
    /* and clipping refuses that gradient, leaving it as it is */
    double norm = 0;
    cr_assert_eq(ag_clip_grad_norm(s, 1.0, &norm), AG_ERR_NUMERIC);
    cr_assert(!isfinite(norm), "norm %g", norm);
    cr_assert(isinf(w->grad[3]) && w->grad[0] == (ag_real)0.5, "grads unchanged");

    /* a parameter holding a NaN is named before anything made from it */
    ag_graph_reset(g);
    ag_store_zero_grad(s);
    w->data[1] = NAN;
    ag_sqrt(g, w);
    cr_assert_eq(ag_graph_check_finite(g), AG_ERR_NUMERIC);
    cr_assert_str_eq(ag_graph_error(g), "check_finite: parameter 'w' [2, 2] has NaN at [0, 1] (input 0 of node 0, sqrt)");
    ag_graph_free(g);
    ag_store_free(s);
}

Test(robust, check_finite_names_the_newest_bad_gradient_of_the_graph)
{
    /* y = sqrt(x) at x = 0: dy is finite, dx = dy / (2 sqrt(x)) is not */
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_set_name(ag_tensor_from(g, AG_SHAPE(3), ((ag_real[]){4, 0, 1})), "x");
    ag_set_requires_grad(x, 1);
    ag_tensor *y = ag_sqrt(g, x);
    cr_assert_eq(ag_backward(g, ag_sum_all(g, y)), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(ag_graph_check_finite(g), AG_ERR_NUMERIC);
    cr_assert_str_eq(ag_graph_error(g), "check_finite: gradient of leaf 'x' [3] has Inf at [1] (node 0)");
    ag_graph_free(g);
}

/* AG_CHECK_FINITE=1 makes ag_backward run the checks itself. */
Test(robust, env_switch_checks_values_before_and_gradients_after_backward)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 2, 3, 4, 5, -6}));
    ag_set_requires_grad(x, 1);
    ag_tensor *loss = ag_sum_all(g, ag_log(g, x));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "off: backward runs on NaN");

    setenv("AG_CHECK_FINITE", "1", 1);
    ag_graph_reset(g);
    x = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 2, 3, 4, 5, -6}));
    ag_set_requires_grad(x, 1);
    loss = ag_sum_all(g, ag_log(g, x));
    cr_assert_eq(ag_backward(g, loss), AG_ERR_NUMERIC);
    cr_assert_str_eq(ag_graph_error(g), "check_finite: log output [2, 3] has NaN at [1, 2] (node 1, inputs [2, 3])");
    cr_assert_null(x->grad, "the backward did not run");

    /* a bad gradient: found after the backward */
    ag_graph_reset(g);
    x = ag_tensor_from(g, AG_SHAPE(2), ((ag_real[]){0, 1}));
    ag_set_requires_grad(x, 1);
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_sqrt(g, x))), AG_ERR_NUMERIC);
    cr_assert_str_eq(ag_graph_error(g), "check_finite: gradient of leaf [2] has Inf at [0] (node 0)");

    /* an infinite loss made of carried infinities: the target's logit is masked */
    ag_graph_reset(g);
    x = ag_tensor_from(g, AG_SHAPE(1, 3), ((ag_real[]){1, 2, 3}));
    ag_set_requires_grad(x, 1);
    ag_tensor *mask = ag_tensor_from(g, AG_SHAPE(3), ((ag_real[]){1, 0, 1}));
    ag_tensor *ce = ag_cross_entropy(g, ag_masked_fill(g, x, mask, -INFINITY), (const int[]){1}, -100, 0);
    cr_assert_eq(ag_backward(g, ce), AG_ERR_NUMERIC);
    cr_assert_str_eq(ag_graph_error(g), "check_finite: the loss (cross_entropy output) is Inf (inputs [1, 3])");

    /* a masked class that is not the target leaves the loss finite (as in
     * PyTorch): no alarm */
    ag_graph_reset(g);
    x = ag_tensor_from(g, AG_SHAPE(1, 3), ((ag_real[]){1, 2, 3}));
    ag_set_requires_grad(x, 1);
    mask = ag_tensor_from(g, AG_SHAPE(3), ((ag_real[]){1, 0, 1}));
    ce = ag_cross_entropy(g, ag_masked_fill(g, x, mask, -INFINITY), (const int[]){2}, -100, 0);
    cr_assert_eq(ag_backward(g, ce), AG_OK, "%s", ag_graph_error(g));
    expect_close(ce->data, ((double[]){log(1 + exp(-2.0))}), 1, TOL(1e-15, 1e-7), 0, "loss");
    expect_close(x->grad, ((double[]){1 / (1 + exp(2.0)), 0, -1 / (1 + exp(2.0))}), 3, TOL(1e-15, 1e-7), 0, "dx");

    /* "0" switches it off again */
    setenv("AG_CHECK_FINITE", "0", 1);
    ag_graph_reset(g);
    x = ag_tensor_from(g, AG_SHAPE(2), ((ag_real[]){0, 1}));
    ag_set_requires_grad(x, 1);
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_sqrt(g, x))), AG_OK);
    unsetenv("AG_CHECK_FINITE");
    ag_graph_free(g);
}

Test(robust, env_switch_raises_no_false_alarm_on_a_masked_training_step)
{
    /* a seq2seq step: padding and causal masks of -inf, dropout, cross
     * entropy with ignored padding targets */
    setenv("AG_CHECK_FINITE", "1", 1);
    const ag_seq2seq_config cfg = {.src_vocab = 9, .tgt_vocab = 8, .hidden = 8, .heads = 2, .ffn = 16,
                                   .layers = 2, .max_len = 6, .dropout = 0.1};
    ag_store *s = ag_store_new();
    ag_seq2seq m;
    cr_assert_eq(ag_seq2seq_init(&m, s, &cfg, 1), AG_OK);
    ag_graph *g = ag_graph_new();
    const int src[2 * 4] = {4, 5, 2, 0, 6, 7, 8, 2}, valid[2] = {3, 4};
    const int tin[2 * 3] = {1, 4, 5, 1, 6, 2}, tout[2 * 3] = {4, 5, 2, 6, 2, 0};
    ag_tensor *loss = ag_seq2seq_loss(g, &m, src, valid, tin, tout, 2, 4, 3);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(ag_graph_check_finite(g), AG_OK, "%s", ag_graph_error(g));
    cr_assert_gt(ag_graph_node_count(g), 100);
    unsetenv("AG_CHECK_FINITE");
    ag_graph_free(g);
    ag_seq2seq_free(&m);
    ag_store_free(s);
}

Test(robust, check_finite_on_a_graph_in_error_returns_its_error)
{
    ag_graph *g = ag_graph_new();
    ag_matmul(g, ag_tensor_new(g, AG_SHAPE(2, 3)), ag_tensor_new(g, AG_SHAPE(2, 3)));
    cr_assert_eq(ag_graph_check_finite(g), AG_ERR_SHAPE);
    cr_assert_eq(ag_graph_check_finite(NULL), AG_ERR_ARG);
    ag_graph_free(g);
}

/* ---- the safetensors reader on mutated files --------------------------------------- */

/* A valid checkpoint of three tensors and metadata, as ag_safetensors_save writes it. */
static unsigned char *valid_checkpoint(size_t *len)
{
    ag_safetensors_writer *w = ag_safetensors_writer_new();
    const ag_real a[6] = {1, -2, 3.5, 0, 1e-3, 7};
    cr_assert_eq(ag_safetensors_add(w, "enc.w", "F32", AG_SHAPE(2, 3), a), AG_OK);
    cr_assert_eq(ag_safetensors_add(w, "enc.b", "F64", AG_SHAPE(3), a), AG_OK);
    cr_assert_eq(ag_safetensors_add(w, "s", "F32", 0, NULL, a), AG_OK);
    cr_assert_eq(ag_safetensors_add_int(w, "ids", AG_SHAPE(2), (const int[]){5, -1}), AG_OK);
    cr_assert_eq(ag_safetensors_add_meta(w, "format", "robust"), AG_OK);
    char path[64], err[256];
    snprintf(path, sizeof path, "/tmp/ag_robust_%d.safetensors", (int)getpid());
    cr_assert_eq(ag_safetensors_save(w, path, err, sizeof err), AG_OK, "%s", err);
    ag_safetensors_writer_free(w);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    unsigned char *b = malloc(1 << 16);
    *len = fread(b, 1, 1 << 16, f);
    fclose(f);
    unlink(path);
    return b;
}

/* Bytes per element of a dtype the reader accepted. */
static size_t dtype_size(const char *d)
{
    static const char *const names[] = {"BOOL", "U8", "I8", "I16", "U16", "F16", "BF16",
                                        "I32",  "U32", "F32", "F64", "I64", "U64"};
    static const size_t sizes[] = {1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (!strcmp(d, names[i])) return sizes[i];
    cr_assert_fail("the reader accepted dtype '%s'", d);
    return 0;
}

/* Parse b; a success must hold tensors whose bytes all lie in the buffer
 * (each is read: ASan would catch a read outside it), a failure a NULL and
 * a message naming the buffer. */
static ag_status parse_any(const unsigned char *b, size_t len, char *err, size_t errlen)
{
    ag_safetensors *f = (ag_safetensors *)1;
    ag_status st = ag_safetensors_parse(b, len, &f, err, errlen);
    if (st != AG_OK) {
        cr_assert_null(f);
        cr_assert(strncmp(err, "safetensors buffer: ", 20) == 0, "%s", err);
        return st;
    }
    size_t total = 0;
    volatile unsigned sum = 0;
    for (int i = 0; i < ag_safetensors_count(f); i++) {
        const unsigned char *p = ag_safetensors_bytes(f, i);
        size_t n = ag_safetensors_numel(f, i) * dtype_size(ag_safetensors_dtype(f, i));
        for (size_t k = 0; k < n; k++) sum += p[k];
        total += n;
    }
    (void)sum; /* read only to touch every byte */
    cr_assert_leq(total, len, "tensors of %zu bytes in a file of %zu", total, len);
    ag_safetensors_free(f);
    return AG_OK;
}

Test(robust, every_truncation_of_a_checkpoint_is_rejected)
{
    size_t len;
    unsigned char *b = valid_checkpoint(&len);
    char err[512];
    cr_assert_eq(parse_any(b, len, err, sizeof err), AG_OK, "%s", err);
    for (size_t n = 0; n < len; n++) {
        unsigned char *cut = malloc(n ? n : 1); /* exactly n bytes: ASan sees any overread */
        memcpy(cut, b, n);
        ag_status st = parse_any(cut, n, err, sizeof err);
        cr_assert_eq(st, AG_ERR_FORMAT, "the first %zu of %zu bytes were accepted", n, len);
        free(cut);
    }
    /* and one byte too many is trailing data */
    unsigned char *more = malloc(len + 1);
    memcpy(more, b, len);
    more[len] = 0;
    cr_assert_eq(parse_any(more, len + 1, err, sizeof err), AG_ERR_FORMAT);
    cr_assert_not_null(strstr(err, "1 trailing bytes"), "%s", err);
    free(more);
    free(b);
}

Test(robust, every_single_byte_change_of_a_checkpoint_is_survived)
{
    size_t len;
    unsigned char *b = valid_checkpoint(&len);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)b[i] << (8 * i);
    static const unsigned char values[] = {0x00, 0x01, 0x7f, 0x80, 0xff, ' ', '"', '-', '9', '[', '{', '}', ',', 'e'};
    char err[512];
    long rejected = 0, accepted = 0;
    unsigned char *m = malloc(len);
    /* the length field and the header: every byte, each to every value above */
    for (size_t at = 0; at < 8 + hlen; at++)
        for (size_t v = 0; v < sizeof values; v++) {
            if (b[at] == values[v]) continue;
            memcpy(m, b, len);
            m[at] = values[v];
            ag_status st = parse_any(m, len, err, sizeof err);
            cr_assert(st == AG_OK || st == AG_ERR_FORMAT, "byte %zu = 0x%02x: %s", at, values[v], ag_status_name(st));
            if (st == AG_OK) accepted++;
            else rejected++;
            /* a change in the length field or the JSON structure is caught */
            if (at < 8) cr_assert_eq(st, AG_ERR_FORMAT, "length byte %zu = 0x%02x accepted", at, values[v]);
        }
    cr_assert_gt(rejected, 10 * accepted, "%ld rejected, %ld accepted", rejected, accepted);
    free(m);
    free(b);
}

Test(robust, corpus_cases_survive_every_truncation)
{
    /* the corrupt and valid files of st_corpus.h, cut at every length */
    char err[512];
    for (int good = 0; good < 2; good++) {
        size_t n_cases = good ? ST_CORPUS_GOOD_COUNT : ST_CORPUS_BAD_COUNT;
        for (size_t i = 0; i < n_cases; i++) {
            const st_corpus_case *c = good ? &st_corpus_good[i] : &st_corpus_bad[i];
            size_t len;
            unsigned char *b = st_corpus_build(c, &len);
            for (size_t n = 0; n <= len && n < 600; n++) {
                unsigned char *cut = malloc(n ? n : 1);
                memcpy(cut, b, n);
                ag_status st = parse_any(cut, n, err, sizeof err);
                /* a cut valid file is never valid (a cut corrupt one may be) */
                if (good && n < len)
                    cr_assert_eq(st, AG_ERR_FORMAT, "case '%s' cut to %zu of %zu bytes accepted", c->what, n, len);
                free(cut);
            }
            free(b);
        }
    }
}

/* ---- the data-file reader on hostile lines ------------------------------------------ */

Test(robust, pairs_reader_names_the_line_of_each_bad_kind)
{
    /* line 2 no tab, 3 empty, 4 invalid UTF-8, 5 a 10,000-byte line, 6 only a tab */
    size_t cap = 20000, at = 0;
    char *buf = malloc(cap);
    at += (size_t)snprintf(buf + at, cap - at, "Go.\tVa !\nno tab\n\nbad \xff byte\tx\n");
    memset(buf + at, 'a', 10000);
    at += 10000;
    at += (size_t)snprintf(buf + at, cap - at, "\tlong\n\t\nHi.\tSalut !\n");
    ag_pairs *p;
    char err[512];
    cr_assert_eq(ag_pairs_parse(buf, at, "hostile.tsv", &p, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(p->n, 2);
    cr_assert_eq(p->n_skipped, 5);
    const char *want[5] = {"hostile.tsv:2: no tab between source and target; line skipped",
                           "hostile.tsv:3: empty line; line skipped",
                           "hostile.tsv:4: invalid UTF-8 at column 5; line skipped",
                           "hostile.tsv:5: line is 10005 bytes long, more than 4096; line skipped",
                           "hostile.tsv:6: empty source sentence; line skipped"};
    for (int i = 0; i < 5; i++) cr_assert_str_eq(p->warnings[i], want[i]);
    cr_assert_eq(p->pairs[1].line, 7);
    ag_pairs_free(p);

    /* nothing usable: an error that quotes the first bad line */
    cr_assert_eq(ag_pairs_parse("\n\nx\n", 4, "none.tsv", &p, err, sizeof err), AG_ERR_FORMAT);
    cr_assert_null(p);
    cr_assert_str_eq(err, "none.tsv: no usable sentence pairs (3 lines skipped; first: none.tsv:1: empty line; "
                          "line skipped)");
    free(buf);
}
