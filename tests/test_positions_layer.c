/* tests/test_positions_layer.c: the learned position table for inputs that
 * are not token ids, and the class token in front of a sequence: names,
 * initial scale, values by hand, error messages, and (in double) gradient
 * checks.  Their PyTorch parity is in tests/test_user_ops.c. */
#include <string.h>

#include "common.h"

Test(positions_layer, makes_a_pytorch_named_table_at_gpt2_scale)
{
    ag_store *s = ag_store_new();
    ag_learned_positions p;
    cr_assert_eq(ag_learned_positions_init(&p, s, "pos", 64, 16, 1), AG_OK, "%s", ag_store_error(s));
    cr_assert_eq(ag_store_count(s), 1);
    cr_assert_eq(ag_store_find(s, "pos.weight"), p.weight, "nn.Embedding's name: <prefix>.weight");
    expect_shape(p.weight, 64, 16);
    double sum = 0, sq = 0;
    for (size_t i = 0; i < p.weight->size; i++) sum += p.weight->data[i], sq += p.weight->data[i] * p.weight->data[i];
    double n = (double)p.weight->size, mean = sum / n, sd = sqrt(sq / n - mean * mean);
    /* 1024 draws of N(0, 0.02): the sample std within 10% of 0.02, the mean
     * within 4 standard errors (0.02 / 32 each) of 0 */
    cr_assert(fabs(sd - 0.02) < 0.002, "std %g, want 0.02", sd);
    cr_assert(fabs(mean) < 4 * 0.02 / 32, "mean %g", mean);
    /* seeded by (seed, name): the same table again, another with another seed */
    ag_store *s2 = ag_store_new();
    ag_learned_positions q, r;
    cr_assert_eq(ag_learned_positions_init(&q, s2, "pos", 64, 16, 1), AG_OK);
    cr_assert_eq(ag_learned_positions_init(&r, s2, "other", 64, 16, 2), AG_OK);
    cr_assert_eq(memcmp(p.weight->data, q.weight->data, p.weight->size * sizeof(ag_real)), 0);
    cr_assert_neq(memcmp(p.weight->data, r.weight->data, p.weight->size * sizeof(ag_real)), 0);
    ag_store_free(s2);
    ag_store_free(s);
}

Test(positions_layer, adds_the_first_t_rows_to_every_batch)
{
    ag_store *s = ag_store_new();
    ag_learned_positions p;
    cr_assert_eq(ag_learned_positions_init(&p, s, "pos", 3, 2, 1), AG_OK);
    for (size_t i = 0; i < 6; i++) p.weight->data[i] = (ag_real)(10 * (i + 1)); /* rows (10, 20) (30, 40) (50, 60) */
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 2, 2), (ag_real[]){1, 2, 3, 4, 5, 6, 7, 8});
    ag_tensor *y = ag_learned_positions_forward(g, &p, x);
    expect_shape(y, 2, 2, 2);
    expect_close(y->data, ((double[]){11, 22, 33, 44, 15, 26, 37, 48}), 8, 0, 0, "x + P[:2]");
    /* d sum(y) / dP: each of the first T rows once per batch, the rest 0 */
    cr_assert_eq(ag_backward(g, ag_sum_all(g, y)), AG_OK, "%s", ag_graph_error(g));
    expect_close(p.weight->grad, ((double[]){2, 2, 2, 2, 0, 0}), 6, 0, 0, "dP");
    /* any leading axes, or none: [T, C] */
    ag_tensor *t = ag_learned_positions_forward(g, &p, ag_tensor_new(g, AG_SHAPE(3, 2)));
    expect_close(t->data, ((double[]){10, 20, 30, 40, 50, 60}), 6, 0, 0, "[T, C]");
    ag_graph_free(g);
    ag_store_free(s);
}

Test(positions_layer, bad_sizes_and_inputs_are_errors)
{
    ag_store *s = ag_store_new();
    ag_learned_positions p;
    cr_assert_eq(ag_learned_positions_init(&p, s, "pos", 0, 4, 1), AG_ERR_ARG);
    cr_assert_str_eq(ag_store_error(s), "learned_positions 'pos': bad size (max_T 0, C 4: both must be >= 1)");
    cr_assert_eq(ag_learned_positions_init(&p, s, NULL, 4, 4, 1), AG_ERR_ARG);
    cr_assert_str_eq(ag_store_error(s), "learned_positions_init: prefix is NULL");
    cr_assert_eq(ag_learned_positions_init(&p, s, "pos", 4, 3, 1), AG_OK);
    cr_assert_eq(ag_learned_positions_init(&p, s, "pos", 4, 3, 1), AG_ERR_ARG, "a name used twice");
    cr_assert_eq(ag_learned_positions_init(&p, s, "pos2", 4, 3, 1), AG_OK);
    ag_graph *g = ag_graph_new();
    cr_assert_null(ag_learned_positions_forward(g, &p, ag_tensor_new(g, AG_SHAPE(2, 5, 3))));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_graph_error(g), "learned_positions 'pos2.weight': input [2, 5, 3] is not [..., T, C] with "
                                        "C = 3 and 1 <= T <= 4 (the learned positions)");
    ag_graph_reset(g);
    cr_assert_null(ag_learned_positions_forward(g, &p, ag_tensor_new(g, AG_SHAPE(2, 4, 2))));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    ag_graph_reset(g);
    cr_assert_null(ag_learned_positions_forward(g, NULL, ag_tensor_new(g, AG_SHAPE(4, 3))));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG, "%s", ag_graph_error(g));
    ag_graph_free(g);
    ag_store_free(s);
}

Test(positions_layer, prepend_token_puts_the_token_first_in_every_sequence)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *cls = ag_tensor_from(g, AG_SHAPE(2), (ag_real[]){-1, -2});
    ag_set_requires_grad(cls, 1);
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 1, 2), (ag_real[]){1, 2, 3, 4});
    ag_tensor *y = ag_prepend_token(g, cls, x);
    expect_shape(y, 2, 2, 2);
    expect_close(y->data, ((double[]){-1, -2, 1, 2, -1, -2, 3, 4}), 8, 0, 0, "[cls; x]");
    cr_assert_eq(ag_backward(g, ag_sum_all(g, y)), AG_OK, "%s", ag_graph_error(g));
    expect_close(cls->grad, ((double[]){2, 2}), 2, 0, 0, "d cls: summed over the batch");
    /* [1, 1, C] and [1, C] tokens too */
    expect_shape(ag_prepend_token(g, ag_tensor_new(g, AG_SHAPE(1, 1, 2)), x), 2, 2, 2);
    expect_shape(ag_prepend_token(g, ag_tensor_new(g, AG_SHAPE(1, 2)), x), 2, 2, 2);
    cr_assert_null(ag_prepend_token(g, ag_tensor_new(g, AG_SHAPE(2, 1, 2)), x));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_graph_error(g), "prepend_token: token [2, 1, 2] and x [2, 1, 2]: want x [B, N, C] and a "
                                        "token [C], [1, C] or [1, 1, C]");
    ag_graph_reset(g);
    cr_assert_null(ag_prepend_token(g, ag_tensor_new(g, AG_SHAPE(3)), ag_tensor_new(g, AG_SHAPE(2, 2))));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    ag_graph_free(g);
}

#ifdef AG_DOUBLE
/* A small ViT front: tokens [cls; x] plus learned positions, through tanh
 * (so that the loss is not linear in the parameters). */
typedef struct vit_front {
    ag_learned_positions pos;
    ag_tensor *cls, *x;
} vit_front;

static ag_tensor *build_front(ag_graph *g, void *ctx)
{
    vit_front *v = ctx;
    ag_tensor *h = ag_learned_positions_forward(g, &v->pos, ag_prepend_token(g, v->cls, v->x));
    return ag_sum_all(g, ag_tanh(g, ag_mul(g, h, h)));
}

Test(positions_layer, gradcheck_of_class_token_and_positions)
{
    ag_store *s = ag_store_new();
    vit_front v;
    cr_assert_eq(ag_learned_positions_init(&v.pos, s, "pos", 5, 3, 1), AG_OK);
    ag_init_normal(v.pos.weight, 0, 0.5, 2); /* 0.02 would leave tanh nearly linear */
    v.cls = ag_param(s, "cls", AG_SHAPE(1, 1, 3));
    v.x = ag_param(s, "x", AG_SHAPE(2, 3, 3)); /* B 2, N 3, C 3: N + 1 = 4 of the 5 positions */
    ag_init_normal(v.cls, 0, 0.5, 3);
    ag_init_normal(v.x, 0, 0.5, 4);
    ag_graph *g = ag_graph_new();
    ag_status st = ag_gradcheck_store(g, build_front, &v, s, NULL, NULL);
    cr_assert_eq(st, AG_OK, "%s", ag_graph_error(g));
    ag_graph_free(g);
    ag_store_free(s);
}
#endif
