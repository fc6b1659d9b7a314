/* tests/test_graph.c: the engine itself: tape, backward, errors, arena. */
#include <string.h>

#include "common.h"

Test(graph, backward_through_a_5000_node_chain)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = ag_param(s, "w", AG_SHAPE(1));
    w->data[0] = 1;
    ag_graph *g = ag_graph_new();
    ag_tensor *x = w;
    /* y = w + w + ... : 5000 adds deep, dy/dw = 5001 */
    ag_tensor *y = w;
    for (int i = 0; i < 5000; i++) y = ag_add(g, y, x);
    ag_tensor *loss = ag_sum_all(g, y);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    cr_assert_float_eq((double)w->grad[0], 5001.0, 1e-9);
    cr_assert_float_eq((double)loss->data[0], 5001.0, 1e-9);
    ag_graph_free(g);
    ag_store_free(s);
}

Test(graph, gradients_accumulate_for_a_tensor_used_twice)
{
    ag_store *s = ag_store_new();
    ag_tensor *x = ag_param(s, "x", AG_SHAPE(2));
    x->data[0] = 3, x->data[1] = -2;
    ag_graph *g = ag_graph_new();
    /* L = sum(x * x + x) -> dL/dx = 2x + 1 */
    ag_tensor *loss = ag_sum_all(g, ag_add(g, ag_mul(g, x, x), x));
    cr_assert_eq(ag_backward(g, loss), AG_OK);
    expect_close(x->grad, ((double[]){7, -3}), 2, 0, 1e-12, "dx");
    /* a second backward on a fresh graph adds to the store's gradient */
    ag_graph_reset(g);
    loss = ag_sum_all(g, ag_add(g, ag_mul(g, x, x), x));
    cr_assert_eq(ag_backward(g, loss), AG_OK);
    expect_close(x->grad, ((double[]){14, -6}), 2, 0, 1e-12, "dx twice");
    ag_store_zero_grad(s);
    cr_assert_eq(x->grad[0], 0);
    ag_graph_free(g);
    ag_store_free(s);
}

/* Gradient buffers are reserved unwritten and the first contribution is
 * stored (ag__grad_fresh); a reshape shares its input's buffer when it is the
 * input's newest consumer.  Neither may lose or double a contribution: an
 * intermediate h consumed by a reshape and by other ops, in both tape orders,
 * with hand-computed gradients. */
static void shared_view_case(int reshape_first)
{
    ag_store *s = ag_store_new();
    ag_tensor *x = ag_param(s, "x", AG_SHAPE(2, 2));
    for (int i = 0; i < 4; i++) x->data[i] = (ag_real)(i + 1); /* x = [[1, 2], [3, 4]] */
    ag_graph *g = ag_graph_new();
    ag_graph_set_keep_grads(g, 1); /* reads intermediates' gradients */
    /* h = 2 x;  L = sum(reshape(h, [4]) * w) + sum(h * h) + sum(relu(h))
     * dL/dh = w (reshaped) + 2 h + 1,  dL/dx = 2 dL/dh */
    ag_tensor *h = ag_scale(g, x, 2);
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(4), ((ag_real[]){10, 20, 30, 40}));
    ag_tensor *a = NULL, *b;
    if (reshape_first) a = ag_sum_all(g, ag_mul(g, ag_reshape(g, h, AG_SHAPE(4)), w));
    b = ag_add(g, ag_sum_all(g, ag_mul(g, h, h)), ag_sum_all(g, ag_relu(g, h)));
    if (!reshape_first) a = ag_sum_all(g, ag_mul(g, ag_reshape(g, h, AG_SHAPE(4)), w));
    cr_assert_eq(ag_backward(g, ag_add(g, a, b)), AG_OK, "%s", ag_graph_error(g));
    /* h = [2, 4, 6, 8]: dL/dh = [10+4+1, 20+8+1, 30+12+1, 40+16+1] */
    expect_close(h->grad, ((double[]){15, 29, 43, 57}), 4, 0, 1e-12, "dh");
    expect_close(x->grad, ((double[]){30, 58, 86, 114}), 4, 0, 1e-12, "dx");
    ag_graph_free(g);
    ag_store_free(s);
}

Test(graph, a_reshape_and_other_consumers_share_out_the_gradient) { shared_view_case(1); }
Test(graph, a_reshape_as_newest_consumer_shares_its_buffer_exactly) { shared_view_case(0); }

/* The same for add and sub, whose gradient passes unchanged to their first
 * input: h = 2 x feeds h * h (older) and then (h + c) and (h - c) * w (the
 * newest consumers, which may share h's buffer). */
Test(graph, add_and_sub_share_their_first_inputs_buffer_exactly)
{
    ag_store *s = ag_store_new();
    ag_tensor *x = ag_param(s, "x", AG_SHAPE(3));
    for (int i = 0; i < 3; i++) x->data[i] = (ag_real)(i + 1); /* x = [1, 2, 3] */
    ag_graph *g = ag_graph_new();
    ag_graph_set_keep_grads(g, 1); /* reads intermediates' gradients */
    ag_tensor *h = ag_scale(g, x, 2); /* [2, 4, 6] */
    ag_tensor *c = ag_tensor_from(g, AG_SHAPE(3), ((ag_real[]){1, 1, 1}));
    ag_set_requires_grad(c, 1);
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(3), ((ag_real[]){10, 20, 30}));
    ag_tensor *sq = ag_sum_all(g, ag_mul(g, h, h));                   /* dh += 2 h */
    ag_tensor *sum = ag_sum_all(g, ag_add(g, h, c));                  /* dh += 1, dc += 1 */
    ag_tensor *dif = ag_sum_all(g, ag_mul(g, ag_sub(g, h, c), w));    /* dh += w, dc -= w */
    cr_assert_eq(ag_backward(g, ag_add(g, ag_add(g, sq, sum), dif)), AG_OK, "%s", ag_graph_error(g));
    /* dh = 2 h + 1 + w = [15, 29, 43]; dx = 2 dh; dc = 1 - w */
    expect_close(h->grad, ((double[]){15, 29, 43}), 3, 0, 1e-12, "dh");
    expect_close(x->grad, ((double[]){30, 58, 86}), 3, 0, 1e-12, "dx");
    expect_close(c->grad, ((double[]){-9, -19, -29}), 3, 0, 1e-12, "dc");
    ag_graph_free(g);
    ag_store_free(s);
}

Test(graph, a_reused_gradient_buffer_shows_no_old_values)
{
    ag_graph *g = ag_graph_new();
    ag_graph_set_keep_grads(g, 1); /* reads intermediates' gradients */
    /* step 1 leaves gradients of 1 in the arena; step 2 reuses the same
     * bytes for buffers that backward reserves unwritten, and relu's first
     * (and only) contribution must replace them, not add to them */
    for (int step = 0; step < 2; step++) {
        ag_graph_reset(g);
        ag_real v = step ? -1 : 1;
        ag_tensor *x = ag_tensor_from(g, AG_SHAPE(3), ((ag_real[]){v, 2 * v, 3 * v}));
        ag_set_requires_grad(x, 1);
        ag_tensor *h = ag_scale(g, x, 1);
        ag_tensor *loss = ag_sum_all(g, ag_relu(g, h));
        cr_assert_eq(ag_backward(g, loss), AG_OK);
        double want = step ? 0 : 1;
        expect_close(h->grad, ((double[]){want, want, want}), 3, 0, 0, "dh");
        expect_close(x->grad, ((double[]){want, want, want}), 3, 0, 0, "dx");
    }
    ag_graph_free(g);
}

Test(graph, only_nodes_that_need_grad_are_differentiated)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *a = ag_tensor_from(g, AG_SHAPE(2), ((ag_real[]){1, 2}));
    ag_tensor *b = ag_tensor_from(g, AG_SHAPE(2), ((ag_real[]){3, 4}));
    ag_set_requires_grad(a, 1);
    ag_tensor *loss = ag_sum_all(g, ag_mul(g, a, b));
    cr_assert_eq(ag_backward(g, loss), AG_OK);
    cr_assert_not_null(a->grad);
    cr_assert_null(b->grad, "b does not require grad and must not get one");
    expect_close(a->grad, ((double[]){3, 4}), 2, 0, 1e-12, "da");
    ag_graph_free(g);
}

Test(graph, first_error_sticks_and_later_ops_are_harmless)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *a = ag_tensor_new(g, AG_SHAPE(2, 4, 64));
    ag_tensor *b = ag_tensor_new(g, AG_SHAPE(32, 64));
    ag_tensor *c = ag_matmul(g, a, b);
    cr_assert_null(c);
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_graph_error(g), "matmul: inner dims differ: [2, 4, 64] x [32, 64]");
    /* later ops do nothing and keep the first message */
    cr_assert_null(ag_softmax(g, c));
    cr_assert_null(ag_add(g, a, a));
    cr_assert_str_eq(ag_graph_error(g), "matmul: inner dims differ: [2, 4, 64] x [32, 64]");
    cr_assert_eq(ag_backward(g, c), AG_ERR_SHAPE);
    /* reset clears the error */
    ag_graph_reset(g);
    cr_assert_eq(ag_graph_status(g), AG_OK);
    cr_assert_str_eq(ag_graph_error(g), "");
    ag_graph_free(g);
}

Test(graph, backward_needs_a_scalar)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *a = ag_tensor_new(g, AG_SHAPE(2, 3));
    ag_set_requires_grad(a, 1);
    ag_tensor *y = ag_add(g, a, a);
    cr_assert_eq(ag_backward(g, y), AG_ERR_SHAPE);
    cr_assert(strstr(ag_graph_error(g), "scalar") != NULL, "%s", ag_graph_error(g));
    cr_assert(strstr(ag_graph_error(g), "[2, 3]") != NULL, "%s", ag_graph_error(g));
    ag_graph_free(g);
}

Test(graph, broadcast_error_names_both_shapes)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *a = ag_tensor_new(g, AG_SHAPE(2, 3));
    ag_tensor *b = ag_tensor_new(g, AG_SHAPE(4));
    cr_assert_null(ag_add(g, a, b));
    cr_assert(strstr(ag_graph_error(g), "add: shapes do not broadcast: [2, 3] and [4]") != NULL, "%s",
              ag_graph_error(g));
    ag_graph_free(g);
}

Test(graph, bad_axis_is_an_error)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *a = ag_tensor_new(g, AG_SHAPE(2, 3));
    cr_assert_null(ag_sum(g, a, 2, 0));
    cr_assert_str_eq(ag_graph_error(g), "sum: axis 2 out of range for [2, 3]");
    ag_graph_free(g);
}

Test(graph, reset_reuses_the_arena_without_malloc)
{
    ag_graph *g = ag_graph_new();
    ag_store *s = ag_store_new();
    ag_tensor *w = ag_param(s, "w", AG_SHAPE(64, 64));
    uint64_t before = 0;
    for (int step = 0; step < 3; step++) {
        if (step == 2) before = ag_alloc_count();
        ag_graph_reset(g);
        ag_tensor *x = ag_tensor_new(g, AG_SHAPE(300, 64)); /* > 1 MiB in all: several blocks */
        ag_tensor *h = x;
        for (int i = 0; i < 8; i++) h = ag_matmul(g, h, w);
        cr_assert_eq(ag_backward(g, ag_sum_all(g, h)), AG_OK);
    }
    cr_assert_eq(ag_alloc_count(), before, "step 3 made %llu allocations",
                 (unsigned long long)(ag_alloc_count() - before));
    ag_graph_free(g);
    ag_store_free(s);
}

Test(graph, shape_strings)
{
    char buf[64];
    cr_assert_str_eq(ag_shape_str_n(3, (int[]){2, 4, 64}, buf, sizeof buf), "[2, 4, 64]");
    cr_assert_str_eq(ag_shape_str_n(0, NULL, buf, sizeof buf), "[]");
    char tiny[5];
    ag_shape_str_n(3, (int[]){2, 4, 64}, tiny, sizeof tiny);
    cr_assert_eq(strlen(tiny), 4);
}

Test(store, duplicate_names_are_refused)
{
    ag_store *s = ag_store_new();
    cr_assert_not_null(ag_param(s, "w", AG_SHAPE(2)));
    cr_assert_null(ag_param(s, "w", AG_SHAPE(3)));
    cr_assert_str_eq(ag_store_error(s), "param: duplicate name 'w'");
    cr_assert_eq(ag_store_count(s), 1);
    ag_store_free(s);
}

/* A parameter's values and gradient, and a constant's values, start on a
 * cache line (64 bytes, an AVX-512 vector), whatever their sizes. */
Test(store, values_and_gradients_start_on_a_cache_line)
{
    ag_store *s = ag_store_new();
    for (int n = 1; n <= 70; n += 3) {
        char name[16];
        snprintf(name, sizeof name, "w%d", n);
        ag_tensor *w = ag_param(s, name, AG_SHAPE(n));
        cr_assert_not_null(w);
        cr_assert_eq((uintptr_t)w->data % 64, 0, "%s's values at %p", name, (void *)w->data);
        cr_assert_eq((uintptr_t)w->grad % 64, 0, "%s's gradient at %p", name, (void *)w->grad);
        for (int i = 0; i < n; i++) {
            cr_assert_eq(w->data[i], 0);
            cr_assert_eq(w->grad[i], 0);
        }
        snprintf(name, sizeof name, "c%d", n);
        ag_tensor *c = ag_store_constant(s, name, AG_SHAPE(n), NULL);
        cr_assert_not_null(c);
        cr_assert_eq((uintptr_t)c->data % 64, 0, "%s's values at %p", name, (void *)c->data);
    }
    ag_store_free(s);
}

Test(optable, every_op_has_a_name_a_backward_and_a_gradient_check)
{
    for (int op = 1; op < AG_OP_COUNT; op++) {
        cr_expect_neq(ag_op_find(ag_op_name(op)), -1, "op %d has no name", op);
        cr_expect_gt(ag_op_case_count(op), 0, "op %s has no gradient-check case", ag_op_name(op));
    }
}

#ifdef AG_DOUBLE
Test(optable, every_case_of_every_op_passes_gradcheck)
{
    for (int op = 1; op < AG_OP_COUNT; op++) expect_op_gradcheck(ag_op_name(op));
}

Test(gradcheck, catches_a_deliberately_broken_backward)
{
    ag_gradcheck_opts broken = AG_GRADCHECK_DEFAULTS;
    broken.break_op = AG_OP_MATMUL;
    broken.break_factor = 1.01;
    ag_gradcheck_result r;
    char err[128];
    ag_status st = ag_op_check(AG_OP_MATMUL, 0, 1, &broken, &r, err, sizeof err);
    cr_assert_eq(st, AG_ERR_NUMERIC);
    cr_assert_gt(r.failed, 0);
    /* and passes again once repaired */
    cr_assert_eq(ag_op_check(AG_OP_MATMUL, 0, 1, NULL, &r, err, sizeof err), AG_OK);
}
#endif
