/* tests/test_gradcheck_model.c: the whole-model gradient check
 * (ag_gradcheck_model) and the node walk (ag_gradcheck_nodes) on a model a
 * user would write: built from the public header alone, a composition of
 * ops no layer of the library makes (a gated MLP, a layer norm, attention
 * pooling over rows, a head), its input marked for checking as a store
 * tensor.  Unbroken, both pass over seeds 1-20; with any op of the model
 * scaled by 1 + 1e-4, the whole check fails and the walk's first failing
 * node is of that op; the report names the node, its layer and the input.
 * The float build refuses, saying why. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"

enum { N = 5, I = 6, H = 8, K = 3 }; /* rows, input width, hidden width, classes */

/* sigmoid(a) = 1 / (1 + exp(-a)) = exp(-log(1 + exp(-a))), from primitives. */
static ag_tensor *sigmoid(ag_graph *g, ag_tensor *a)
{
    return ag_exp(g, ag_neg(g, ag_log(g, ag_shift(g, ag_exp(g, ag_neg(g, a)), 1))));
}

/* L = cross_entropy(head(pool(norm(tanh(x W1^T + b1) * sigmoid(x W2^T))))). */
static ag_tensor *user_loss(ag_graph *g, void *ctx)
{
    ag_store *s = ctx;
    ag_tensor *x = ag_store_find(s, "input.x");                                           /* [N, I] */
    ag_tensor *a = ag_add(g, ag_matmul_bt(g, x, ag_store_find(s, "mlp.w1")), ag_store_find(s, "mlp.b1"));
    ag_tensor *gate = sigmoid(g, ag_matmul_bt(g, x, ag_store_find(s, "mlp.w2")));         /* [N, H] */
    ag_tensor *h = ag_layer_norm(g, ag_mul(g, ag_tanh(g, a), gate), ag_store_find(s, "norm.gain"), NULL, 1e-5);
    ag_tensor *score = ag_matmul(g, h, ag_store_find(s, "pool.q"));                       /* [N, 1] */
    ag_tensor *p = ag_softmax(g, ag_transpose(g, score, 0, 1));                           /* [1, N] */
    ag_tensor *pooled = ag_matmul(g, p, h);                                                /* [1, H] */
    ag_tensor *logits = ag_matmul_bt(g, pooled, ag_store_find(s, "head.w"));               /* [1, K] */
    static const int target[1] = {2};
    return ag_cross_entropy(g, logits, target, -1, 0);
}

static ag_store *user_store(uint64_t seed)
{
    ag_store *s = ag_store_new();
    ag_init_normal(ag_param(s, "input.x", AG_SHAPE(N, I)), 0, 1, seed);
    ag_init_normal(ag_param(s, "mlp.w1", AG_SHAPE(H, I)), 0, 0.5, seed + 1);
    ag_init_normal(ag_param(s, "mlp.b1", AG_SHAPE(H)), 0, 0.1, seed + 2);
    ag_init_normal(ag_param(s, "mlp.w2", AG_SHAPE(H, I)), 0, 0.5, seed + 3);
    ag_init_normal(ag_param(s, "norm.gain", AG_SHAPE(H)), 1, 0.1, seed + 4);
    ag_init_normal(ag_param(s, "pool.q", AG_SHAPE(H, 1)), 0, 0.5, seed + 5);
    ag_init_normal(ag_param(s, "head.w", AG_SHAPE(K, H)), 0, 0.5, seed + 6);
    cr_assert_eq(ag_store_count(s), 7, "%s", ag_store_error(s));
    return s;
}

#ifdef AG_DOUBLE
Test(gradcheck_model, a_users_model_passes_whole_and_node_by_node_over_seeds_1_to_20)
{
    for (uint64_t seed = 1; seed <= 20; seed++) {
        ag_store *s = user_store(seed);
        ag_graph *g = ag_graph_new();
        ag_gradcheck_model_opts o = AG_GRADCHECK_MODEL_DEFAULTS;
        o.seed = seed;
        ag_gradcheck_model_result r;
        cr_assert_eq(ag_gradcheck_model_store(g, user_loss, s, s, &o, &r), AG_OK, "seed %d: %s", (int)seed,
                     ag_graph_error(g));
        cr_assert_eq(r.directions, 4);
        cr_assert_eq(r.failed, 0);
        cr_assert_eq(r.elements, ag_store_numel(s));
        cr_assert_lt(r.visible, 1e-6, "seed %d: only a relative error above %g shows", (int)seed, r.visible);
        ag_gradcheck_walk_result w;
        cr_assert_eq(ag_gradcheck_nodes(g, user_loss, s, &o, NULL, &w), AG_OK, "seed %d: %s", (int)seed,
                     ag_graph_error(g));
        cr_assert_eq(w.failed, 0);
        cr_assert_eq(w.first, -1);
        cr_assert_geq(w.nodes, 15, "%d nodes", w.nodes);
        ag_graph_free(g);
        ag_store_free(s);
    }
}

/* The ops on the model's tape. */
static void ops_of(ag_graph *g, ag_store *s, int *seen)
{
    ag_graph_reset(g);
    cr_assert_not_null(user_loss(g, s), "%s", ag_graph_error(g));
    memset(seen, 0, AG_OP_COUNT * sizeof *seen);
    for (int i = 0; i < ag_graph_node_count(g); i++) seen[ag_graph_node(g, i)->op]++;
    ag_graph_reset(g);
}

Test(gradcheck_model, every_op_of_the_model_scaled_by_1e_4_fails_and_is_named_first)
{
    ag_store *s = user_store(1);
    ag_graph *g = ag_graph_new();
    int seen[AG_OP_COUNT], mutants = 0;
    ops_of(g, s, seen);
    for (int op = 1; op < AG_OP_COUNT; op++) {
        if (!seen[op]) continue;
        mutants++;
        ag_gradcheck_model_opts o = AG_GRADCHECK_MODEL_DEFAULTS;
        o.break_op = op, o.break_factor = 1.0001;
        ag_gradcheck_model_result r;
        cr_assert_eq(ag_gradcheck_model_store(g, user_loss, s, s, &o, &r), AG_ERR_NUMERIC, "%s: %s",
                     ag_op_name(op), ag_graph_error(g));
        cr_assert_gt(r.failed, 0, "%s", ag_op_name(op));
        cr_assert_not_null(strstr(ag_graph_error(g), "gradcheck_model: direction "), "%s", ag_graph_error(g));
        ag_gradcheck_walk_result w;
        cr_assert_eq(ag_gradcheck_nodes(g, user_loss, s, &o, NULL, &w), AG_ERR_NUMERIC, "%s", ag_op_name(op));
        cr_assert_eq(w.first_op, op, "%s broken, the walk names %s first", ag_op_name(op), ag_op_name(w.first_op));
        cr_assert_eq(w.failed, seen[op], "%s: %d of its %d nodes fail", ag_op_name(op), w.failed, seen[op]);
    }
    cr_assert_geq(mutants, 11, "%d ops on the tape", mutants);
    ag_graph_free(g);
    ag_store_free(s);
}

Test(gradcheck_model, the_report_names_the_node_its_layer_and_the_input)
{
    ag_store *s = user_store(3);
    ag_graph *g = ag_graph_new();
    ag_gradcheck_model_opts o = AG_GRADCHECK_MODEL_DEFAULTS;
    o.break_op = AG_OP_LAYER_NORM, o.break_factor = 1.0001;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ag_gradcheck_walk_result w;
    cr_assert_eq(ag_gradcheck_nodes(g, user_loss, s, &o, f, &w), AG_ERR_NUMERIC);
    fclose(f);
    char want[64];
    snprintf(want, sizeof want, "node %d layer_norm (norm) [5, 8]: w . J u off by 1.0e-04", w.first);
    cr_assert_not_null(strstr(text, want), "wanted '%s' in:\n%s", want, text);
    cr_assert_not_null(strstr(text, "    d/d input 0 [5, 8] off by 1.0e-04"), "%s", text);
    cr_assert_not_null(strstr(text, "    d/d input 1 'norm.gain' [8] off by 1.0e-04"), "%s", text);
    cr_assert_not_null(strstr(ag_graph_error(g), "gradcheck_nodes: 1 of "), "%s", ag_graph_error(g));
    free(text);
    ag_graph_free(g);
    ag_store_free(s);
}

/* A build that makes another computation at its second call. */
static ag_tensor *changing_loss(ag_graph *g, void *ctx)
{
    static int calls;
    ag_tensor *w = ag_store_find(ctx, "mlp.w1");
    ag_tensor *y = calls++ % 2 ? ag_tanh(g, w) : ag_exp(g, w);
    return ag_sum_all(g, y);
}

Test(gradcheck_model, a_build_that_changes_is_named_not_misjudged)
{
    ag_store *s = user_store(1);
    ag_graph *g = ag_graph_new();
    ag_gradcheck_walk_result w;
    cr_assert_eq(ag_gradcheck_nodes(g, changing_loss, s, NULL, NULL, &w), AG_ERR_STATE);
    cr_assert_not_null(strstr(ag_graph_error(g), "must build the same computation at every call"), "%s",
                       ag_graph_error(g));
    ag_graph_free(g);
    ag_store_free(s);
}

Test(gradcheck_model, bad_arguments_say_which)
{
    ag_store *s = user_store(1);
    ag_graph *g = ag_graph_new();
    ag_gradcheck_model_result r;
    ag_gradcheck_model_opts o = AG_GRADCHECK_MODEL_DEFAULTS;
    o.directions = 0;
    cr_assert_eq(ag_gradcheck_model_store(g, user_loss, s, s, &o, &r), AG_ERR_ARG);
    cr_assert_not_null(strstr(ag_graph_error(g), "directions 0"), "%s", ag_graph_error(g));
    cr_assert_eq(ag_gradcheck_model_store(g, NULL, s, s, NULL, &r), AG_ERR_ARG);
    cr_assert_not_null(strstr(ag_graph_error(g), "build is NULL"), "%s", ag_graph_error(g));
    ag_tensor *leaf = ag_tensor_new(g, AG_SHAPE(2));
    cr_assert_eq(ag_gradcheck_model(g, user_loss, s, &leaf, 1, NULL, &r), AG_ERR_ARG);
    cr_assert_not_null(strstr(ag_graph_error(g), "not a store-owned tensor"), "%s", ag_graph_error(g));
    ag_gradcheck_walk_result w;
    ag_graph_set_grad(g, 0);
    cr_assert_eq(ag_gradcheck_nodes(g, user_loss, s, NULL, NULL, &w), AG_ERR_STATE);
    cr_assert_not_null(strstr(ag_graph_error(g), "no-grad mode"), "%s", ag_graph_error(g));
    ag_graph_free(g);
    ag_store_free(s);
}
#else
Test(gradcheck_model, refuses_to_run_in_float_and_says_why)
{
    ag_store *s = user_store(1);
    ag_graph *g = ag_graph_new();
    ag_gradcheck_model_result r;
    ag_gradcheck_walk_result w;
    cr_assert_eq(ag_gradcheck_model_store(g, user_loss, s, s, NULL, &r), AG_ERR_STATE);
    cr_assert_not_null(strstr(ag_graph_error(g), "needs the double build"), "%s", ag_graph_error(g));
    cr_assert_eq(ag_gradcheck_nodes(g, user_loss, s, NULL, NULL, &w), AG_ERR_STATE);
    cr_assert_not_null(strstr(ag_graph_error(g), "needs the double build"), "%s", ag_graph_error(g));
    ag_graph_free(g);
    ag_store_free(s);
}
#endif
