/* tests/test_team.c: data parallelism (src/core/team.c).  A step split
 * among workers gives the loss and the gradients of one graph, up to the
 * order of sums; one part is one graph, bit for bit; replicas that do not
 * match the model are refused with a message.  The model: the attention
 * benchmark's block, LayerNorm(x + MHA(x, x, x)) with a causal mask, loss
 * mean(y^2), the batch split along B. */
#include "common.h"

#include <string.h>

enum { B = 5, T = 3, C = 8, H = 2 };

typedef struct block {
    ag_mha_layer mha;
    ag_layer_norm_layer norm;
} block;

typedef struct model {
    block w[4]; /* w[k]: worker k's block (w[0]: the model's) */
    ag_real x[B * T * C];
    int bad_init; /* 1: replicas get another parameter name */
    int bad_part; /* > 0: that part builds a matmul of mismatched shapes */
} model;

static ag_status block_init(block *b, ag_store *s, const char *norm_name)
{
    ag_status st = ag_mha_layer_init(&b->mha, s, "attention", C, H, 1, 0, 7);
    return st != AG_OK ? st : ag_layer_norm_layer_init(&b->norm, s, norm_name, C);
}

static ag_status replica_init(void *ctx, int k, ag_store *replica)
{
    model *m = ctx;
    return block_init(&m->w[k], replica, m->bad_init ? "norm2" : "norm");
}

/* part k of n: batch rows [k B / n, (k + 1) B / n), weight = its share of B */
static ag_tensor *part_loss(void *ctx, ag_graph *g, ag_store *s, int k, int n, double *weight)
{
    (void)s;
    model *m = ctx;
    int b0 = B * k / n, nb = B * (k + 1) / n - b0;
    *weight = (double)nb / B;
    if (m->bad_part > 0 && k == m->bad_part) return ag_matmul(g, ag_tensor_new(g, AG_SHAPE(2, 3)), ag_tensor_new(g, AG_SHAPE(4, 5)));
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(nb, T, C), m->x + (size_t)b0 * T * C);
    const block *w = &m->w[k];
    ag_tensor *y = ag_layer_norm_layer_forward(g, &w->norm, ag_add(g, x, ag_mha_layer_forward(g, &w->mha, x, x, ag_causal_mask(g, T, T),
                                                                             -1e9, NULL)));
    return ag_mean_all(g, ag_mul(g, y, y));
}

static void model_make(model *m, ag_store *s)
{
    memset(m, 0, sizeof *m);
    cr_assert_eq(block_init(&m->w[0], s, "norm"), AG_OK);
    for (int i = 0; i < ag_store_count(s); i++) /* biases, gains: not their initial 0 and 1 */
        ag_init_uniform(ag_store_at(s, i), -0.8, 0.8, 20 + (uint64_t)i);
    ag_rng r;
    ag_rng_seed(&r, 3);
    for (int i = 0; i < B * T * C; i++) m->x[i] = (ag_real)(2 * ag_rng_uniform(&r) - 1);
}

/* the loss and all gradients of a step in n parts, from zero gradients */
static double step(model *m, ag_store *s, int n, double *grads)
{
    char err[256];
    ag_team *t = ag_team_new(s, n, replica_init, m, err, sizeof err);
    cr_assert_not_null(t, "%s", err);
    cr_assert_eq(ag_team_size(t), n);
    cr_assert_eq(ag_team_store(t, 0), s);
    ag_graph *g = ag_graph_new();
    ag_store_zero_grad(s);
    double loss = 0;
    cr_assert_eq(ag_team_step(t, g, n, part_loss, m, &loss), AG_OK, "%s", ag_graph_error(g));
    size_t k = 0;
    for (int i = 0; i < ag_store_count(s); i++)
        for (size_t j = 0; j < ag_store_at(s, i)->size; j++) grads[k++] = (double)ag_store_at(s, i)->grad[j];
    ag_graph_free(g);
    ag_team_free(t);
    return loss;
}

Test(team, parts_give_one_graphs_loss_and_gradients)
{
    ag_store *s = ag_store_new();
    model m;
    model_make(&m, s);
    size_t n = ag_store_numel(s);
    double *one = calloc(n, sizeof *one), *many = calloc(n, sizeof *many), big = 0;
    double l1 = step(&m, s, 1, one);
    for (size_t i = 0; i < n; i++) big = fmax(big, fabs(one[i]));
    cr_assert_gt(big, 1e-3, "the gradients are not all zero");
    for (int parts = 2; parts <= 4; parts++) { /* B = 5 rows: parts of 1, 2 and 3 rows */
        double l = step(&m, s, parts, many);
        cr_assert(fabs(l - l1) <= TOL(1e-14, 1e-6) * fabs(l1), "%d parts: loss %.17g, one graph %.17g", parts, l, l1);
        for (size_t i = 0; i < n; i++)
            cr_assert(fabs(many[i] - one[i]) <= TOL(1e-13, 1e-6) * big + TOL(1e-11, 1e-4) * fabs(one[i]),
                      "%d parts: gradient element %zu: %.10g, one graph %.10g", parts, i, many[i], one[i]);
    }
    free(one), free(many);
    ag_store_free(s);
}

Test(team, one_part_is_one_graph_bit_for_bit)
{
    ag_store *s = ag_store_new();
    model m;
    model_make(&m, s);
    size_t n = ag_store_numel(s);
    double *a = calloc(n, sizeof *a);
    double la = step(&m, s, 1, a);
    /* the same loss and backward by hand */
    ag_graph *g = ag_graph_new();
    ag_store_zero_grad(s);
    double w;
    ag_tensor *l = part_loss(&m, g, s, 0, 1, &w);
    cr_assert_eq(ag_backward(g, l), AG_OK);
    cr_assert_eq(w, 1.0);
    cr_assert_eq(la, (double)l->data[0]);
    size_t k = 0;
    for (int i = 0; i < ag_store_count(s); i++)
        for (size_t j = 0; j < ag_store_at(s, i)->size; j++, k++)
            cr_assert_eq(a[k], (double)ag_store_at(s, i)->grad[j], "gradient element %zu", k);
    ag_graph_free(g);
    free(a);
    ag_store_free(s);
}

Test(team, bad_teams_and_steps_are_refused_with_a_message)
{
    ag_store *s = ag_store_new();
    model m;
    model_make(&m, s);
    char err[256];
    cr_assert_null(ag_team_new(NULL, 2, replica_init, &m, err, sizeof err));
    cr_assert_str_eq(err, "team: the store is NULL");
    cr_assert_null(ag_team_new(s, 257, replica_init, &m, err, sizeof err));
    cr_assert_str_eq(err, "team: the number of workers must be 1..256");
    cr_assert_null(ag_team_new(s, 2, NULL, &m, err, sizeof err));
    cr_assert_str_eq(err, "team: no init function");
    m.bad_init = 1; /* a replica whose layer norm has another name */
    cr_assert_null(ag_team_new(s, 2, replica_init, &m, err, sizeof err));
    cr_assert_str_eq(err, "team: borrow: 'norm2.weight' is not in the model's store", "%s", err);
    m.bad_init = 0;

    ag_team *t = ag_team_new(s, 2, replica_init, &m, err, sizeof err);
    cr_assert_not_null(t, "%s", err);
    /* a replica reads the model's values: no parameter of its own */
    ag_store *r = ag_team_store(t, 1);
    cr_assert_null(ag_param(r, "extra", AG_SHAPE(3)));
    cr_assert_str_eq(ag_store_error(r), "param 'extra': this store reads another store's values; add parameters there");
    cr_assert_null(ag_team_store(t, 2));
    ag_graph *g = ag_graph_new();
    double loss;
    cr_assert_eq(ag_team_step(t, g, 3, part_loss, &m, &loss), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "team_step: 3 parts for a team of 2 workers");
    ag_graph_reset(g);
    cr_assert_eq(ag_team_step(t, g, 2, NULL, &m, &loss), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "team_step: the loss function is NULL");
    ag_graph_reset(g);
    cr_assert_eq(ag_team_step(NULL, g, 2, part_loss, &m, &loss), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "team_step: the team is NULL");
    /* worker 1 fails: its message, named; nothing reaches the gradients
     * from it, and the next good step is whole */
    ag_graph_reset(g);
    m.bad_part = 1;
    cr_assert_eq(ag_team_step(t, g, 2, part_loss, &m, &loss), AG_ERR_SHAPE);
    cr_assert(strncmp(ag_graph_error(g), "worker 1 of 2: matmul", 21) == 0, "%s", ag_graph_error(g));
    cr_assert(isnan(loss));
    m.bad_part = 0;
    size_t n = ag_store_numel(s), k = 0;
    double *one = calloc(n, sizeof *one);
    double l1 = step(&m, s, 1, one);
    ag_graph_reset(g);
    ag_store_zero_grad(s);
    cr_assert_eq(ag_team_step(t, g, 2, part_loss, &m, &loss), AG_OK, "%s", ag_graph_error(g));
    cr_assert(fabs(loss - l1) <= TOL(1e-14, 1e-6) * fabs(l1));
    for (int i = 0; i < ag_store_count(s); i++)
        for (size_t j = 0; j < ag_store_at(s, i)->size; j++, k++)
            cr_assert(fabs(ag_store_at(s, i)->grad[j] - one[k]) <= TOL(1e-13, 1e-6) * (1 + fabs(one[k])),
                      "gradient element %zu after a failed step", k);
    free(one);
    ag_graph_free(g);
    ag_team_free(t);
    ag_store_free(s);
}
