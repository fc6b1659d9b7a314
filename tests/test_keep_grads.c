/* tests/test_keep_grads.c: ag_graph_set_keep_grads, whether intermediates'
 * gradients stay after backward (off by default, as PyTorch: their buffers
 * are reused as soon as their node's backward has run).
 *
 * The promise: the leaves' gradients are the same bits as with the
 * buffers kept, for every model and for repeated backward calls; an
 * intermediate's grad is NULL after backward unless ag_retain_grad kept
 * it (then it is the same gradient) or the graph keeps them all; the arena
 * holds less after backward. */
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* ---- the switch ----------------------------------------------------------- */

Test(keep_grads, is_off_by_default_and_switches)
{
    ag_graph *g = ag_graph_new();
    cr_assert_eq(ag_graph_keep_grads(g), 0);
    ag_graph_set_keep_grads(g, 7);
    cr_assert_eq(ag_graph_keep_grads(g), 1);
    ag_graph_reset(g); /* a setting of the graph, as training mode: kept */
    cr_assert_eq(ag_graph_keep_grads(g), 1);
    ag_graph_set_keep_grads(g, 0);
    cr_assert_eq(ag_graph_keep_grads(g), 0);
    cr_assert_eq(ag_graph_keep_grads(NULL), 0);
    ag_graph_set_keep_grads(NULL, 1); /* no crash */
    ag_graph_free(g);
}

/* By default, as PyTorch: after backward an intermediate's grad is NULL
 * unless retained; leaves (a parameter, an input with requires_grad) get
 * theirs.  L = sum(tanh(x w) * 3): dL/dh = 3, dL/dp = 3 (1 - h^2) for
 * p = x w, h = tanh(p). */
Test(keep_grads, by_default_only_leaves_and_retained_tensors_keep_a_gradient)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = ag_param(s, "w", AG_SHAPE(2, 1));
    w->data[0] = 0.5, w->data[1] = -0.25;
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 2), ((ag_real[]){1, 2, -1, 0.5}));
    ag_set_requires_grad(x, 1);
    ag_tensor *p = ag_matmul(g, x, w), *h = ag_tanh(g, p), *y = ag_scale(g, h, 3), *loss = ag_sum_all(g, y);
    ag_retain_grad(h);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    cr_assert_null(p->grad, "an intermediate not retained has no gradient after backward");
    cr_assert_null(y->grad);
    cr_assert_null(loss->grad);
    expect_close(h->grad, ((double[]){3, 3}), 2, 0, 0, "dh (retained)");
    double dp[2], dx[4], dw[2] = {0, 0};
    for (int i = 0; i < 2; i++) dp[i] = 3 * (1 - (double)h->data[i] * (double)h->data[i]);
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) dx[2 * i + k] = dp[i] * (double)w->data[k], dw[k] += dp[i] * (double)x->data[2 * i + k];
    expect_close(x->grad, dx, 4, TOL(1e-14, 1e-6), TOL(1e-14, 1e-6), "dx (an input leaf)");
    expect_close(w->grad, dw, 2, TOL(1e-14, 1e-6), TOL(1e-14, 1e-6), "dw (a parameter)");
    ag_graph_free(g);
    ag_store_free(s);
}

/* AG_CHECK_FINITE=1 looks at every gradient, so it keeps them: a bad one
 * is named at the intermediate where it appears, as with them kept. */
Test(keep_grads, the_finite_check_sees_the_intermediates_gradients)
{
    ag_graph *g = ag_graph_new();
    setenv("AG_CHECK_FINITE", "1", 1);
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2), ((ag_real[]){0, 1}));
    ag_set_requires_grad(x, 1);
    ag_tensor *h = ag_sqrt(g, ag_scale(g, x, 1)); /* d sqrt / du is Inf at 0: first in the scale's gradient */
    cr_assert_eq(ag_backward(g, ag_sum_all(g, h)), AG_ERR_NUMERIC);
    unsetenv("AG_CHECK_FINITE");
    cr_assert_str_eq(ag_graph_error(g), "check_finite: gradient of scale output [2] has Inf at [0] (node 1, inputs [2])");
    cr_assert_eq(ag_graph_keep_grads(g), 0, "the graph's setting is left as it was");
    ag_graph_free(g);
}

/* ---- the GPT: every parameter's gradient, bit for bit --------------------- */

static const ag_gpt_config gpt_cfg = {.vocab = 11, .context = 6, .hidden = 8, .heads = 2, .ffn = 16, .layers = 2,
                                      .activation = AG_ACT_GELU};

typedef struct run {
    ag_store *s;
    ag_gpt m;
    ag_graph *g;
    size_t used_after;
    ag_real *grads; /* every parameter's gradient, in the store's order */
} run;

/* Two GPT steps' backward (a reset between) with the given setting, the
 * second loss's backward twice: the leaves accumulate three gradients. */
static void gpt_run(run *r, int keep)
{
    int ids[2 * 6], tg[2 * 6];
    for (int i = 0; i < 12; i++) ids[i] = (3 * i + 1) % 11, tg[i] = (5 * i + 2) % 11;
    r->s = ag_store_new(), r->g = ag_graph_new();
    cr_assert_eq(ag_gpt_init(&r->m, r->s, &gpt_cfg, 3), AG_OK, "%s", ag_store_error(r->s));
    ag_graph_set_keep_grads(r->g, keep);
    for (int step = 0; step < 2; step++) {
        ag_graph_reset(r->g);
        ag_tensor *loss = ag_gpt_loss(r->g, &r->m, ids, tg, 2, 6);
        for (int k = 0; k <= step; k++) cr_assert_eq(ag_backward(r->g, loss), AG_OK, "%s", ag_graph_error(r->g));
        r->used_after = ag_graph_arena_used(r->g);
    }
    size_t n = ag_store_numel(r->s), at = 0;
    r->grads = malloc(n * sizeof(ag_real));
    for (int i = 0; i < ag_store_count(r->s); i++) {
        ag_tensor *p = ag_store_at(r->s, i);
        memcpy(r->grads + at, p->grad, p->size * sizeof(ag_real));
        at += p->size;
    }
    cr_assert_eq(at, n);
}

static void run_free(run *r)
{
    ag_gpt_free(&r->m);
    ag_graph_free(r->g);
    ag_store_free(r->s);
    free(r->grads);
}

Test(keep_grads, gives_the_gpt_the_same_parameter_gradients_bit_for_bit)
{
    run kept, dropped;
    gpt_run(&kept, 1);
    gpt_run(&dropped, 0);
    size_t n = ag_store_numel(kept.s);
    cr_assert_eq(memcmp(kept.grads, dropped.grads, n * sizeof(ag_real)), 0,
                 "a parameter gradient differs when intermediates' buffers are reused");
    cr_assert_lt(dropped.used_after, kept.used_after, "arena after backward: %zu bytes dropped, %zu kept",
                 dropped.used_after, kept.used_after);
    /* every intermediate's grad reads NULL; the parameters' are there */
    for (int i = 0; i < ag_graph_node_count(dropped.g); i++) {
        ag_tensor *t = ag_graph_node(dropped.g, i);
        if (t->op != AG_OP_LEAF) cr_assert_null(t->grad, "node %d (%s) kept a gradient", i, ag_op_name(t->op));
    }
    run_free(&kept);
    run_free(&dropped);
}

/* ---- ag_retain_grad still keeps what it is asked to ----------------------- */

/* y = tanh(x W), z = gelu(y) + y, L = sum(z * z): y's gradient comes from
 * two consumers, gelu's buffer is lent to y, and the add's to gelu. */
static ag_tensor *chain(ag_graph *g, ag_tensor *x, ag_tensor *w, ag_tensor **y)
{
    *y = ag_tanh(g, ag_matmul(g, x, w));
    ag_retain_grad(*y);
    ag_tensor *z = ag_add(g, ag_gelu(g, *y), *y);
    return ag_sum_all(g, ag_mul(g, z, z));
}

Test(keep_grads, keeps_a_retained_intermediate_and_the_leaves_exact)
{
    ag_real got[2][2][6], dx[2][6];
    for (int keep = 0; keep < 2; keep++) {
        ag_store *s = ag_store_new();
        ag_tensor *w = ag_param(s, "w", AG_SHAPE(3, 3));
        for (int i = 0; i < 9; i++) w->data[i] = (ag_real)(0.1 * (i - 4));
        ag_graph *g = ag_graph_new();
        ag_graph_set_keep_grads(g, keep);
        ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), (ag_real[]){0.5, -1, 2, 0.25, 1.5, -0.75});
        ag_set_requires_grad(x, 1);
        ag_tensor *y, *loss = chain(g, x, w, &y);
        for (int call = 0; call < 2; call++) { /* a retained grad sums over calls */
            cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
            cr_assert_not_null(y->grad);
            memcpy(got[keep][call], y->grad, sizeof got[keep][call]);
        }
        memcpy(dx[keep], x->grad, sizeof dx[keep]);
        for (int j = 0; j < 6; j++) cr_assert_eq(got[keep][1][j], 2 * got[keep][0][j]);
        ag_graph_free(g);
        ag_store_free(s);
    }
    cr_assert_eq(memcmp(got[0], got[1], sizeof got[0]), 0, "the retained gradient differs");
    cr_assert_eq(memcmp(dx[0], dx[1], sizeof dx[0]), 0, "the input's gradient differs");
}

/* ---- the translator (masks, cross-attention) and a team of two ----------- */

static void s2s_grads(int keep, int workers, ag_real *out, size_t n)
{
    ag_seq2seq_config c = {.src_vocab = 9, .tgt_vocab = 8, .hidden = 8, .heads = 2, .ffn = 16, .layers = 2,
                           .max_len = 6, .pre_norm = 1};
    ag_store *s = ag_store_new();
    ag_seq2seq m;
    cr_assert_eq(ag_seq2seq_init(&m, s, &c, 5), AG_OK, "%s", ag_store_error(s));
    cr_assert_eq(ag_store_numel(s), n);
    char err[256] = "";
    ag_seq2seq_team *t = ag_seq2seq_team_new(&m, s, workers, err, sizeof err);
    cr_assert_not_null(t, "%s", err);
    ag_graph *g = ag_graph_new();
    ag_graph_set_keep_grads(g, keep);
    int src[3 * 5] = {3, 4, 5, 0, 0, 6, 7, 8, 3, 0, 4, 4, 0, 0, 0}, src_valid[3] = {3, 4, 2};
    int tgt_in[3 * 4] = {1, 3, 4, 0, 1, 5, 6, 7, 1, 2, 0, 0};
    int tgt_out[3 * 4] = {3, 4, 2, 0, 5, 6, 7, 2, 2, 0, 0, 0};
    double loss;
    cr_assert_eq(ag_seq2seq_team_step(t, g, src, src_valid, tgt_in, tgt_out, 3, 5, 4, &loss), AG_OK, "%s",
                 ag_graph_error(g));
    size_t at = 0;
    for (int i = 0; i < ag_store_count(s); i++) {
        ag_tensor *p = ag_store_at(s, i);
        memcpy(out + at, p->grad, p->size * sizeof(ag_real));
        at += p->size;
    }
    ag_seq2seq_team_free(t);
    ag_seq2seq_free(&m);
    ag_graph_free(g);
    ag_store_free(s);
}

Test(keep_grads, gives_the_translator_the_same_gradients_on_one_and_two_workers)
{
    ag_seq2seq_config c = {.src_vocab = 9, .tgt_vocab = 8, .hidden = 8, .heads = 2, .ffn = 16, .layers = 2,
                           .max_len = 6, .pre_norm = 1};
    ag_store *s = ag_store_new();
    ag_seq2seq m;
    cr_assert_eq(ag_seq2seq_init(&m, s, &c, 5), AG_OK);
    size_t n = ag_store_numel(s);
    ag_seq2seq_free(&m);
    ag_store_free(s);
    ag_real *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    for (int workers = 1; workers <= 2; workers++) {
        s2s_grads(1, workers, a, n);
        s2s_grads(0, workers, b, n);
        cr_assert_eq(memcmp(a, b, n * sizeof *a), 0, "%d worker(s): a gradient differs", workers);
    }
    free(a);
    free(b);
}
