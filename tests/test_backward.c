/* tests/test_backward.c: what backward promises beyond one call on a fresh
 * tape: repeated and mixed backward calls add exactly, every exposed grad
 * is d loss / d tensor (or NULL), ag_retain_grad, ag_backward_from, and
 * tensors kept across ag_graph_reset. */
#include <string.h>

#include "common.h"

/* w: a parameter of n values 0.5, -1, 1.5, ... */
static ag_tensor *param_w(ag_store *s, int n)
{
    ag_tensor *w = ag_param(s, "w", 1, (int[]){n});
    for (int i = 0; i < n; i++) w->data[i] = (ag_real)((i % 2 ? -1 : 1) * (0.5 + 0.5 * i));
    return w;
}

/* ---- repeated backward --------------------------------------------------- */

Test(backward, the_same_loss_twice_gives_twice_the_gradient)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = ag_param(s, "w", AG_SHAPE(1));
    w->data[0] = 3;
    ag_graph *g = ag_graph_new();
    ag_tensor *loss = ag_sum_all(g, ag_mul(g, w, w)); /* dL/dw = 2w = 6 */
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(w->grad[0], 6);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(w->grad[0], 12, "dw after two calls is %g", (double)w->grad[0]);
    ag_graph_free(g);
    ag_store_free(s);
}

Test(backward, a_five_op_chain_twice_gives_exactly_twice)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = param_w(s, 4);
    ag_graph *g = ag_graph_new();
    ag_graph_set_keep_grads(g, 1); /* reads intermediates' gradients */
    /* L = sum(tanh(exp(0.3 (w + 0.5)))): five ops, w used once, so the
     * second call adds the same numbers in the same order: exactly 2x */
    ag_tensor *loss = ag_sum_all(g, ag_tanh(g, ag_exp(g, ag_scale(g, ag_shift(g, w, 0.5), 0.3))));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    ag_real once[4];
    memcpy(once, w->grad, sizeof once);
    for (int i = 0; i < 4; i++) cr_assert_neq(once[i], 0);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    for (int i = 0; i < 4; i++) cr_assert_eq(w->grad[i], 2 * once[i], "dw[%d] = %g, want %g", i, (double)w->grad[i], 2.0 * once[i]);
    /* the loss's own grad is d loss / d loss = 1, not the number of calls */
    cr_assert_eq(loss->grad[0], 1);
    ag_graph_free(g);
    ag_store_free(s);
}

Test(backward, two_losses_sharing_a_subgraph_give_the_sum)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = param_w(s, 3);
    ag_graph *g = ag_graph_new();
    ag_graph_set_keep_grads(g, 1); /* reads intermediates' gradients */
    /* h = tanh(w); L1 = sum(h); L2 = sum(h * h)
     * dL1/dw = 1 - h^2;  dL2/dw = 2 h (1 - h^2) */
    ag_tensor *h = ag_tanh(g, w);
    ag_tensor *l1 = ag_sum_all(g, h), *l2 = ag_sum_all(g, ag_mul(g, h, h));
    cr_assert_eq(ag_backward(g, l1), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(ag_backward(g, l2), AG_OK, "%s", ag_graph_error(g));
    double want[3];
    for (int i = 0; i < 3; i++) {
        double t = tanh((double)w->data[i]);
        want[i] = (1 - t * t) + 2 * t * (1 - t * t);
    }
    expect_close(w->grad, want, 3, TOL(1e-14, 1e-6), TOL(1e-14, 1e-6), "dw");
    /* h's grad is from the latest call: d L2 / d h = 2h */
    for (int i = 0; i < 3; i++) cr_assert_float_eq((double)h->grad[i], 2 * (double)h->data[i], TOL(1e-14, 1e-6));
    ag_graph_free(g);
    ag_store_free(s);
}

Test(backward, a_backward_after_new_ops_were_recorded)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = param_w(s, 2);
    ag_graph *g = ag_graph_new();
    ag_tensor *l1 = ag_sum_all(g, ag_mul(g, w, w)); /* 2w */
    cr_assert_eq(ag_backward(g, l1), AG_OK, "%s", ag_graph_error(g));
    ag_tensor *l2 = ag_sum_all(g, ag_scale(g, w, 3)); /* 3 */
    cr_assert_eq(ag_backward(g, l2), AG_OK, "%s", ag_graph_error(g));
    double want[2] = {2 * (double)w->data[0] + 3, 2 * (double)w->data[1] + 3};
    expect_close(w->grad, want, 2, 0, 1e-6, "dw");
    ag_graph_free(g);
    ag_store_free(s);
}

/* A second loss on a graph that was not reset, after zero_grad, gets its
 * own gradient only: no older tape node is replayed into it. */
Test(backward, a_second_loss_on_the_same_tape_gets_its_own_gradient)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = ag_param(s, "w", AG_SHAPE(1));
    w->data[0] = 2;
    ag_graph *g = ag_graph_new();
    ag_tensor *h = w;
    for (int i = 0; i < 5; i++) h = ag_add(g, ag_mul(g, h, h), h); /* a deep polynomial in w */
    cr_assert_eq(ag_backward(g, ag_sum_all(g, h)), AG_OK, "%s", ag_graph_error(g));
    ag_store_zero_grad(s);
    ag_tensor *l2 = ag_sum_all(g, ag_shift(g, w, 1)); /* d/dw (w + 1) = 1 */
    cr_assert_eq(ag_backward(g, l2), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(w->grad[0], 1, "dw = %g, want 1", (double)w->grad[0]);
    ag_graph_free(g);
    ag_store_free(s);
}

Test(backward, graph_leaves_accumulate_too)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2), (ag_real[]){1, -2});
    ag_set_requires_grad(x, 1);
    ag_tensor *loss = ag_sum_all(g, ag_reshape(g, ag_mul(g, x, x), AG_SHAPE(2, 1)));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    expect_close(x->grad, ((double[]){4, -8}), 2, 0, 0, "dx after two calls");
    ag_graph_free(g);
}

/* ---- every exposed grad is d loss / d tensor, or NULL ------------------- */

/* a = tanh(x), b = op(a, c), L = sum(a * a) + sum(b * u): dL/db = u, and
 * dL/da = u (through b) + 2a.  b is a's newest consumer, so backward lends
 * b's buffer to a (unless b is retained).  Returns b; *a_out is a. */
typedef ag_tensor *(*bin_fn)(ag_graph *, ag_tensor *, ag_tensor *);
static ag_tensor *shared_case(ag_graph *g, ag_tensor *x, bin_fn op, ag_tensor **a_out, ag_tensor **u_out,
                              bool retain)
{
    ag_tensor *a = ag_tanh(g, x);
    ag_tensor *aa = ag_sum_all(g, ag_mul(g, a, a));
    ag_tensor *c = ag_tensor_from(g, AG_SHAPE(3), (ag_real[]){0.25, -0.5, 2});
    ag_tensor *b = op(g, a, c);
    if (retain) ag_retain_grad(b);
    ag_tensor *u = ag_tensor_from(g, AG_SHAPE(3), (ag_real[]){1, 2, -3});
    ag_tensor *loss = ag_add(g, aa, ag_sum_all(g, ag_mul(g, b, u)));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    *a_out = a;
    *u_out = u;
    return b;
}

static void expect_honest(bin_fn op, double sign)
{
    ag_store *s = ag_store_new();
    ag_tensor *x = param_w(s, 3);
    ag_graph *g = ag_graph_new();
    ag_graph_set_keep_grads(g, 1); /* reads intermediates' gradients */
    for (int retain = 0; retain < 2; retain++) {
        ag_graph_reset(g);
        ag_store_zero_grad(s);
        ag_tensor *a, *u, *b = shared_case(g, x, op, &a, &u, retain);
        double da[3], db[3];
        for (int i = 0; i < 3; i++) da[i] = sign * (double)u->data[i] + 2 * (double)a->data[i], db[i] = (double)u->data[i];
        expect_close(a->grad, da, 3, TOL(1e-14, 1e-6), 0, "da");
        if (retain) {
            cr_assert_not_null(b->grad, "a retained grad is kept");
            expect_close(b->grad, db, 3, 0, 0, "db (retained)");
        } else {
            cr_assert_null(b->grad, "b lent its buffer to a: it must not show a's gradient");
        }
    }
    ag_graph_free(g);
    ag_store_free(s);
}

Test(backward, the_grad_of_an_add_is_its_own_or_null)
{
    expect_honest(ag_add, 1);
}

Test(backward, the_grad_of_a_sub_is_its_own_or_null)
{
    expect_honest(ag_sub, 1); /* b = a - c: db/da = 1 */
}

static ag_tensor *reshape_op(ag_graph *g, ag_tensor *a, ag_tensor *c)
{
    (void)c;
    return ag_reshape(g, a, AG_SHAPE(3));
}

Test(backward, the_grad_of_a_reshape_is_its_own_or_null)
{
    expect_honest(reshape_op, 1);
}

/* The case of the report: b = a + c with a (a leaf) also used in a * a:
 * b's gradient is 1, not 1 + 2a. */
Test(backward, an_add_of_a_leaf_shows_its_own_gradient)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *a = ag_tensor_from(g, AG_SHAPE(2), (ag_real[]){3, -1});
    ag_tensor *c = ag_tensor_from(g, AG_SHAPE(2), (ag_real[]){1, 1});
    ag_set_requires_grad(a, 1);
    ag_tensor *b = ag_add(g, a, c);
    ag_tensor *loss = ag_add(g, ag_sum_all(g, b), ag_sum_all(g, ag_mul(g, a, a)));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    expect_close(a->grad, ((double[]){7, -1}), 2, 0, 0, "da = 1 + 2a");
    if (b->grad) expect_close(b->grad, ((double[]){1, 1}), 2, 0, 0, "db");
    ag_graph_free(g);
}

/* Add&Norm's residual s = x + f(x) inside ag_add_norm (layer_norm(s)): its
 * grad is NULL (its buffer went to x) or, retained, d loss / d s exactly as
 * a backward from s's values as a leaf gives it. */
Test(backward, the_residual_of_add_norm_shows_its_own_gradient_or_null)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = ag_param(s, "w", AG_SHAPE(4, 4));
    ag_init_uniform(w, -1, 1, 5);
    ag_layer_norm_layer norm;
    cr_assert_eq(ag_layer_norm_layer_init(&norm, s, "norm", 4), AG_OK);
    ag_init_uniform(norm.weight, 0.5, 1.5, 6);
    ag_graph *g = ag_graph_new();
    ag_real xs[8] = {0.1, -0.2, 0.3, 0.7, -1, 0.5, 0.25, -0.125}, us[8] = {1, -2, 3, 0.5, 2, 1, -1, 0.25};
    for (int retain = 0; retain < 2; retain++) {
        ag_graph_reset(g);
        ag_tensor *x = ag_tanh(g, ag_matmul(g, ag_tensor_from(g, AG_SHAPE(2, 4), xs), w));
        ag_tensor *y = ag_add_norm(g, &norm, x, ag_relu(g, ag_matmul(g, x, w)), 0);
        ag_tensor *res = y->src[0]; /* layer_norm's input: the residual sum */
        cr_assert_eq(res->op, AG_OP_ADD);
        if (retain) ag_retain_grad(res);
        ag_tensor *loss = ag_sum_all(g, ag_mul(g, y, ag_tensor_from(g, AG_SHAPE(2, 4), us)));
        cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
        if (!retain) {
            cr_assert_null(res->grad, "the residual lent its buffer to x: it must not show x's gradient");
            continue;
        }
        /* the same head from res's values as a leaf */
        ag_graph *h = ag_graph_new();
        ag_tensor *r = ag_tensor_from(h, AG_SHAPE(2, 4), res->data);
        ag_set_requires_grad(r, 1);
        ag_store_zero_grad(s);
        ag_tensor *l2 = ag_sum_all(h, ag_mul(h, ag_layer_norm_layer_forward(h, &norm, r), ag_tensor_from(h, AG_SHAPE(2, 4), us)));
        cr_assert_eq(ag_backward(h, l2), AG_OK, "%s", ag_graph_error(h));
        for (int i = 0; i < 8; i++)
            cr_assert_eq(res->grad[i], r->grad[i], "dres[%d] %g, want %g", i, (double)res->grad[i], (double)r->grad[i]);
        ag_graph_free(h);
    }
    ag_graph_free(g);
    ag_store_free(s);
}

Test(backward, a_retained_grad_sums_over_calls)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = param_w(s, 2);
    ag_graph *g = ag_graph_new();
    ag_tensor *h = ag_reshape(g, ag_tanh(g, w), AG_SHAPE(2, 1));
    ag_retain_grad(h);
    ag_tensor *loss = ag_sum_all(g, ag_scale(g, h, 3));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    expect_close(h->grad, ((double[]){3, 3}), 2, 0, 0, "dh");
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    expect_close(h->grad, ((double[]){6, 6}), 2, 0, 0, "dh twice");
    ag_graph_free(g);
    ag_store_free(s);
}

/* ---- backward from a given output gradient ------------------------------- */

Test(backward, from_a_given_output_gradient_is_backward_of_the_weighted_sum)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = ag_param(s, "w", AG_SHAPE(3, 2));
    ag_init_uniform(w, -1, 1, 9);
    ag_real xs[6] = {0.5, -1, 2, 0.25, 1, -0.75}, dys[4] = {1, -2, 0.5, 3};
    ag_graph *g = ag_graph_new();
    ag_tensor *y = ag_tanh(g, ag_matmul(g, ag_tensor_from(g, AG_SHAPE(2, 3), xs), w));
    cr_assert_eq(ag_backward_from(g, y, dys), AG_OK, "%s", ag_graph_error(g));
    ag_real got[6];
    memcpy(got, w->grad, sizeof got);
    ag_store_zero_grad(s);
    ag_graph_reset(g);
    y = ag_tanh(g, ag_matmul(g, ag_tensor_from(g, AG_SHAPE(2, 3), xs), w));
    ag_tensor *l = ag_sum_all(g, ag_mul(g, y, ag_tensor_from(g, AG_SHAPE(2, 2), dys)));
    cr_assert_eq(ag_backward(g, l), AG_OK);
    for (int i = 0; i < 6; i++) cr_assert_float_eq((double)got[i], (double)w->grad[i], TOL(1e-15, 1e-6));
    /* errors: NULL dy, NULL y */
    cr_assert_eq(ag_backward_from(g, y, NULL), AG_ERR_ARG);
    cr_assert_not_null(strstr(ag_graph_error(g), "dy is NULL"));
    ag_graph_free(g);
    ag_store_free(s);
}

#ifdef AG_DOUBLE
/* ag_backward_from against central differences of sum(y * dy). */
Test(backward, from_a_given_output_gradient_passes_finite_differences)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = ag_param(s, "w", AG_SHAPE(3, 2));
    ag_init_uniform(w, -1, 1, 4);
    ag_real xs[6] = {0.5, -1, 2, 0.25, 1, -0.75}, dys[4] = {1, -2, 0.5, 3};
    ag_graph *g = ag_graph_new();
    ag_tensor *y = ag_gelu(g, ag_matmul(g, ag_tensor_from(g, AG_SHAPE(2, 3), xs), w));
    cr_assert_eq(ag_backward_from(g, y, dys), AG_OK, "%s", ag_graph_error(g));
    for (size_t i = 0; i < w->size; i++) {
        double l[2], keep = w->data[i];
        for (int k = 0; k < 2; k++) {
            w->data[i] = keep + (k ? -1e-6 : 1e-6);
            ag_graph_reset(g);
            ag_tensor *yy = ag_gelu(g, ag_matmul(g, ag_tensor_from(g, AG_SHAPE(2, 3), xs), w));
            l[k] = 0;
            for (int j = 0; j < 4; j++) l[k] += yy->data[j] * dys[j];
        }
        w->data[i] = keep;
        double num = (l[0] - l[1]) / 2e-6;
        cr_assert(fabs(w->grad[i] - num) <= 1e-5 + 1e-3 * fabs(num), "dw[%zu] %g, numeric %g", i, w->grad[i], num);
    }
    ag_graph_free(g);
    ag_store_free(s);
}
#endif

/* ---- tensors kept across ag_graph_reset ---------------------------------- */

Test(stale, a_tensor_kept_across_a_reset_is_refused_by_name)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *mask = ag_set_name(ag_tensor_new(g, AG_SHAPE(4, 4)), "mask");
    ag_graph_reset(g);
    ag_tensor *scores = ag_tensor_new(g, AG_SHAPE(4, 4));
    cr_assert_neq(scores, mask, "the new tensor took the stale one's place");
    cr_assert_null(ag_masked_fill(g, scores, mask, -INFINITY));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "masked_fill: input 1 'mask' [4, 4] was made before ag_graph_reset "
                                        "(keep constants across resets with ag_store_constant)");
    ag_graph_free(g);
}

/* The report's case: a causal mask made once before the training loop.  The
 * first step uses it; the second refuses it by name, where it used to read
 * the scores tensor that took its place and make attention uniform. */
Test(stale, a_causal_mask_made_before_the_loop_is_refused_in_the_second_step)
{
    ag_store *s = ag_store_new();
    ag_mha_layer m;
    cr_assert_eq(ag_mha_layer_init(&m, s, "mha", 8, 2, 1, 0, 1), AG_OK);
    ag_tensor *x = ag_param(s, "x", AG_SHAPE(1, 4, 8));
    ag_init_uniform(x, -1, 1, 2);
    ag_graph *g = ag_graph_new();
    ag_tensor *mask = ag_causal_mask(g, 4, 4);
    for (int step = 0; step < 2; step++) {
        if (step) ag_graph_reset(g);
        ag_tensor *y = ag_mha_layer_forward(g, &m, x, x, mask, AG_MASK_NEG_INF, NULL);
        if (step == 0) {
            cr_assert_not_null(y, "%s", ag_graph_error(g));
        } else {
            cr_assert_null(y);
            cr_assert_not_null(strstr(ag_graph_error(g), "'causal_mask' [4, 4] was made before ag_graph_reset"),
                               "%s", ag_graph_error(g));
        }
    }
    ag_graph_free(g);
    ag_store_free(s);
}

Test(stale, is_caught_in_every_step_of_a_loop_and_after_a_double_reset)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *old = ag_tensor_new(g, AG_SHAPE(3));
    for (int step = 0; step < 3; step++) {
        ag_graph_reset(g);
        ag_graph_reset(g); /* a reset of an empty graph keeps the stamp */
        ag_tensor *x = ag_tensor_new(g, AG_SHAPE(3));
        ag_tensor *y = ag_add(g, x, x);
        cr_assert_not_null(y);
        cr_assert_null(ag_add(g, y, old), "step %d", step);
        cr_assert_not_null(strstr(ag_graph_error(g), "input 1 [3] was made before ag_graph_reset"), "%s",
                           ag_graph_error(g));
        old = y; /* this step's tensor, stale in the next */
    }
    ag_graph_free(g);
}

Test(stale, backward_from_a_stale_loss_is_refused)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = param_w(s, 2);
    ag_graph *g = ag_graph_new();
    ag_tensor *loss = ag_sum_all(g, ag_mul(g, w, w));
    ag_graph_reset(g);
    ag_sum_all(g, ag_mul(g, w, w));
    cr_assert_eq(ag_backward(g, loss), AG_ERR_ARG);
    cr_assert_not_null(strstr(ag_graph_error(g), "backward: input 0 [] was made before ag_graph_reset"), "%s",
                       ag_graph_error(g));
    ag_graph_free(g);
    ag_store_free(s);
}

Test(stale, a_tensor_of_another_graph_is_refused)
{
    ag_graph *g = ag_graph_new(), *other = ag_graph_new();
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(2, 3));
    ag_tensor *e = ag_set_name(ag_tensor_new(other, AG_SHAPE(3, 2)), "enc");
    cr_assert_null(ag_matmul(g, x, e));
    cr_assert_str_eq(ag_graph_error(g), "matmul: input 1 'enc' [3, 2] is from another graph");
    /* a loss of another graph too */
    ag_graph_reset(g);
    cr_assert_eq(ag_backward(g, e), AG_ERR_ARG);
    ag_graph_free(other);
    ag_graph_free(g);
}

Test(stale, parameters_and_store_constants_live_across_resets)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = param_w(s, 4);
    ag_graph *g = ag_graph_new();
    /* a causal mask, made once on the graph, kept in the store */
    ag_tensor *m = ag_causal_mask(g, 4, 4);
    cr_assert_not_null(m);
    ag_tensor *mask = ag_store_constant(s, "causal", m->ndim, m->shape, m->data);
    cr_assert_not_null(mask, "%s", ag_store_error(s));
    cr_assert_eq(mask->requires_grad, 0);
    ag_set_requires_grad(mask, 1);
    cr_assert_eq(mask->requires_grad, 0, "a constant never requires grad");
    cr_assert_eq(ag_store_count(s), 1, "a constant is not a parameter");
    cr_assert_null(ag_store_find(s, "causal"));
    cr_assert_null(ag_store_constant(s, "causal", AG_SHAPE(1), NULL));
    cr_assert_str_eq(ag_store_error(s), "constant: duplicate name 'causal'");
    for (int step = 0; step < 3; step++) {
        ag_graph_reset(g);
        ag_store_zero_grad(s);
        /* scores[i][j] = w[j]; masked: p[i] = softmax over j <= i */
        ag_tensor *scores = ag_add(g, ag_tensor_new(g, AG_SHAPE(4, 4)), w);
        ag_tensor *p = ag_softmax(g, ag_masked_fill(g, scores, mask, -INFINITY));
        cr_assert_not_null(p, "step %d: %s", step, ag_graph_error(g));
        cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, p, p))), AG_OK, "%s", ag_graph_error(g));
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                if (j > i) cr_assert_eq(p->data[i * 4 + j], 0, "step %d: p[%d][%d] is not masked", step, i, j);
                else cr_assert_gt(p->data[i * 4 + j], 0);
        cr_assert_float_eq((double)p->data[0], 1, 1e-6);
    }
    ag_graph_free(g);
    ag_store_free(s);
}

/* ---- shapes whose element count wraps around ------------------------------- */

Test(shape_overflow, reshape_refuses_a_product_that_wraps_around)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(2, 3));
    /* 2147437917 * 2147221127 * 301758930 = 6 mod 2^64 */
    cr_assert_null(ag_reshape(g, x, AG_SHAPE(2147437917, 2147221127, 301758930)));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_not_null(strstr(ag_graph_error(g), "reshape: cannot reshape [2, 3] (6 elements) to "
                                                  "[2147437917, 2147221127, 301758930]"), "%s", ag_graph_error(g));
    ag_graph_reset(g);
    x = ag_tensor_new(g, AG_SHAPE(2, 3));
    cr_assert_null(ag_reshape(g, x, AG_SHAPE(2147437917, -1, 2147221127, 301758930)));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    ag_graph_free(g);
}

Test(shape_overflow, tensors_and_parameters_refuse_a_product_that_wraps_around)
{
    ag_graph *g = ag_graph_new();
    cr_assert_null(ag_tensor_new(g, AG_SHAPE(2147437917, 2147221127, 301758930)));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    ag_store *s = ag_store_new();
    cr_assert_null(ag_param(s, "big", AG_SHAPE(2147437917, 2147221127, 301758930)));
    cr_assert_not_null(strstr(ag_store_error(s), "bad shape"), "%s", ag_store_error(s));
    cr_assert_null(ag_store_constant(s, "big", AG_SHAPE(2147437917, 2147221127, 301758930), NULL));
    ag_store_free(s);
    ag_graph_free(g);
}
