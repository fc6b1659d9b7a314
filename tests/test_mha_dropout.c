/* tests/test_mha_dropout.c: the multi-head layer's dropout, drawn inside
 * the fused attention node.
 *
 * An ag_mha_layer with dropout in training mode over more than 256 keys
 * takes the one node of ag_scaled_dot_product_attention (the mask a
 * function of the seed, the head and (t, s), drawn again in the
 * backward): it keeps each row's max and sum, no [T, S] matrix (no P, no
 * mask, no causal mask).  Over 256 keys or fewer it keeps P as three
 * nodes, as the textbook path does.  Its gradient passes finite differences with the seed
 * fixed; the textbook path (and a layer asked for its weights) still
 * drops P as a node of its own; ag_gpt with dropout builds no three-node
 * attention. */
#include "common.h"

#include <string.h>

enum { T = 300, C = 8, H = 2 }; /* 300 keys: past the seam (flash) */

/* x [1, T, C] with values in [-1, 1) from seed */
static void fill_noise(ag_tensor *x, uint32_t seed)
{
    for (size_t i = 0; i < x->size; i++) {
        seed = seed * 1664525u + 1013904223u;
        x->data[i] = (ag_real)((seed >> 8) * (2.0 / 16777216.0) - 1);
    }
}

typedef struct layer_case {
    ag_mha_layer m;
    ag_tensor *x, *w; /* the input [1, T, C] and the loss's weights */
} layer_case;

static void layer_case_init(layer_case *c, ag_store *s, int t, int causal, double p)
{
    cr_assert_eq(ag_mha_layer_init(&c->m, s, "mha", C, H, 1, p, 3), AG_OK, "%s", ag_store_error(s));
    c->m.causal = causal;
    c->x = ag_param(s, "x", AG_SHAPE(1, t, C)), c->w = ag_param(s, "w", AG_SHAPE(1, t, C));
    fill_noise(c->x, 5), fill_noise(c->w, 6);
}

/* A graph seeded with seed, in training mode, that took L's backward;
 * *y gets the layer's output, *loss L. */
static ag_graph *backward_of(layer_case *c, uint64_t seed, ag_tensor **y, ag_tensor **loss)
{
    ag_graph *g = ag_graph_new();
    ag_graph_seed(g, seed);
    ag_graph_set_training(g, 1);
    *y = ag_mha_layer_forward(g, &c->m, c->x, c->x, NULL, AG_MASK_NEG_INF, NULL);
    cr_assert_not_null(*y, "%s", ag_graph_error(g));
    *loss = ag_sum_all(g, ag_mul(g, *y, c->w));
    cr_assert_eq(ag_backward(g, *loss), AG_OK, "%s", ag_graph_error(g));
    return g;
}

Test(mha_dropout, a_training_layer_keeps_no_t_by_s_matrix)
{
    ag_tensor *y, *loss;
    ag_set_kernels(AG_KERNELS_FAST);
    ag_store *s = ag_store_new();
    layer_case c;
    layer_case_init(&c, s, T, 1, 0.1);
    ag_graph *g = backward_of(&c, 1, &y, &loss);
    ag_attention_stats st;
    ag_graph_attention_stats(g, &st);
    cr_assert(st.flash == 1 && st.p_kept == 0 && st.plain == 0 && st.three_nodes == 0 && st.textbook == 0,
              "flash %d, P kept %d, plain %d, three nodes %d, textbook %d", st.flash, st.p_kept, st.plain,
              st.three_nodes, st.textbook);
    cr_assert_eq(st.kept_bytes, (size_t)H * T * 2 * sizeof(ag_real), "%zu bytes kept", st.kept_bytes);
    /* everything the graph holds, forward and backward, is less than one
     * [T, S] matrix (P, dropout's mask and the causal mask would be 4) */
    size_t used = ag_graph_arena_used(g);
    cr_assert_lt(used, (size_t)T * T * sizeof(ag_real), "%zu bytes in the arena", used);
    ag_real with = loss->data[0];
    ag_graph_free(g);
    /* dropout did apply: eval mode gives another loss */
    g = ag_graph_new();
    ag_graph_seed(g, 1);
    ag_graph_set_training(g, 0);
    y = ag_mha_layer_forward(g, &c.m, c.x, c.x, NULL, AG_MASK_NEG_INF, NULL);
    ag_tensor *eval = ag_sum_all(g, ag_mul(g, y, c.w));
    cr_assert_not_null(eval, "%s", ag_graph_error(g));
    cr_assert_neq(eval->data[0], with, "dropout changed nothing");
    ag_graph_free(g);
    ag_store_free(s);
}

#ifdef AG_DOUBLE
/* L = sum(layer(x) * w), training mode: dropout on */
static ag_tensor *layer_loss(ag_graph *g, void *p)
{
    layer_case *c = p;
    ag_graph_set_training(g, 1);
    ag_tensor *y = ag_mha_layer_forward(g, &c->m, c->x, c->x, NULL, AG_MASK_NEG_INF, NULL);
    return ag_sum_all(g, ag_mul(g, y, c->w));
}

/* The seed fixed (g's stream rewound per build), the mask is fixed: the
 * backward's redrawn mask is the forward's.  Every weight and bias element
 * by element (dQ, dK and dV reach them all), x along random directions. */
static void gradcheck_layer(int causal)
{
    ag_store *s = ag_store_new();
    layer_case c;
    layer_case_init(&c, s, T, causal, 0.1);
    ag_graph *g = ag_graph_new();
    ag_graph_seed(g, 2);
    ag_linear_layer *ls[4] = {&c.m.w_q, &c.m.w_k, &c.m.w_v, &c.m.w_o};
    ag_tensor *in[8];
    for (int i = 0; i < 4; i++) in[2 * i] = ls[i]->weight, in[2 * i + 1] = ls[i]->bias;
    ag_gradcheck_result r[8];
    ag_status st = ag_gradcheck(g, layer_loss, &c, in, 8, NULL, r);
    for (int i = 0; i < 8; i++)
        cr_expect_eq(r[i].failed, 0, "causal %d: %s: %zu fail (abs %.3g)", causal, r[i].input->name, r[i].failed,
                     r[i].max_abs_err);
    cr_assert_eq(st, AG_OK, "causal %d: %s", causal, ag_graph_error(g));
    ag_gradcheck_model_result mr;
    st = ag_gradcheck_model(g, layer_loss, &c, &c.x, 1, NULL, &mr);
    cr_assert_eq(st, AG_OK, "causal %d: x: %s", causal, ag_graph_error(g));
    cr_assert_eq(mr.failed, 0, "causal %d: x: worst %g", causal, mr.worst);
    ag_graph_free(g);
    ag_store_free(s);
}

Test(mha_dropout, gradients_pass_finite_differences_with_the_mask_fixed)
{
    gradcheck_layer(1);
    gradcheck_layer(0);
}
#endif

/* The fused node's dropout on its kernels against its plain code
 * (AG_KERNELS_REFERENCE), causal, at lengths where the blocks of queries
 * are 16 (S <= 32) or 64 (the kernel that keeps P) and past the seam (the
 * flash kernel): the same values and gradients.  Called as a user calls
 * it (ag_scaled_dot_product_attention, heads layout): the layer itself
 * takes three nodes over 256 keys or fewer.  gq gets dL/dx, x being q, k
 * and v. */
static void layer_run(int t, ag_kernels mode, ag_real *y, ag_real *gq)
{
    ag_set_kernels(mode);
    ag_store *s = ag_store_new();
    ag_tensor *x = ag_param(s, "x", AG_SHAPE(1, t, H, C / H)), *w = ag_param(s, "w", AG_SHAPE(1, t, H, C / H));
    fill_noise(x, 5), fill_noise(w, 6);
    ag_graph *g = ag_graph_new();
    ag_graph_set_training(g, 1);
    ag_sdpa_config cfg = {.causal = AG_CAUSAL_TOP_LEFT, .dropout_p = 0.1, .seed = 3, .heads_layout = 1};
    ag_tensor *out = ag_scaled_dot_product_attention(g, x, x, x, &cfg);
    cr_assert_not_null(out, "%s", ag_graph_error(g));
    cr_assert_str_eq(ag_attention_path(out, NULL), mode != AG_KERNELS_FAST ? "plain" : t > 256 ? "flash" : "P kept");
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, out, w))), AG_OK, "%s", ag_graph_error(g));
    memcpy(y, out->data, out->size * sizeof *y);
    memcpy(gq, x->grad, x->size * sizeof *gq);
    ag_graph_free(g);
    ag_store_free(s);
    ag_set_kernels(AG_KERNELS_FAST);
}

Test(mha_dropout, the_kernel_draws_what_the_plain_code_draws)
{
    static ag_real y[2][T * C], gq[2][T * C];
    const int lengths[] = {10, 17, 32, 33, T};
    for (int i = 0; i < 5; i++) {
        int t = lengths[i];
        layer_run(t, AG_KERNELS_FAST, y[0], gq[0]);
        layer_run(t, AG_KERNELS_REFERENCE, y[1], gq[1]);
        double dy = 0, dg = 0;
        for (int e = 0; e < t * C; e++) dy = fmax(dy, fabs((double)y[0][e] - y[1][e]));
        for (int e = 0; e < t * C; e++) dg = fmax(dg, fabs((double)gq[0][e] - gq[1][e]));
        cr_expect_leq(dy, TOL(1e-13, 1e-5), "T %d: values differ by %g", t, dy);
        cr_expect_leq(dg, TOL(1e-12, 1e-4), "T %d: dx differs by %g", t, dg);
    }
}

/* The textbook layer still drops P as a node of its own, drawing from g's
 * stream: the same numbers as the fast layer asked for its weights (three
 * nodes, the same ag_dropout) and, over 256 keys or fewer, as the fast
 * layer not asked (three nodes too: P is kept there anyway). */
Test(mha_dropout, the_textbook_path_still_drops_p_as_a_node)
{
    ag_store *s = ag_store_new();
    layer_case c;
    layer_case_init(&c, s, 12, 1, 0.5);
    ag_tensor *out[3];
    ag_graph *g[3];
    for (int i = 0; i < 3; i++) {
        g[i] = ag_graph_new();
        ag_graph_seed(g[i], 11);
        ag_tensor *w = NULL;
        out[i] = i == 0   ? ag_mha_layer_forward_textbook(g[i], &c.m, c.x, c.x, NULL, AG_MASK_NEG_INF, NULL)
                 : i == 1 ? ag_mha_layer_forward(g[i], &c.m, c.x, c.x, NULL, AG_MASK_NEG_INF, &w)
                          : ag_mha_layer_forward(g[i], &c.m, c.x, c.x, NULL, AG_MASK_NEG_INF, NULL);
        cr_assert_not_null(out[i], "%s", ag_graph_error(g[i]));
    }
    ag_attention_stats st[3];
    for (int i = 0; i < 3; i++) ag_graph_attention_stats(g[i], &st[i]);
    cr_assert(st[0].textbook == 1 && st[1].three_nodes == 1 && st[2].three_nodes == 1, "%d %d %d",
              st[0].textbook, st[1].three_nodes, st[2].three_nodes);
    double worst[2] = {0, 0};
    for (size_t i = 0; i < out[0]->size; i++)
        for (int j = 0; j < 2; j++) worst[j] = fmax(worst[j], fabs((double)out[0]->data[i] - out[1 + j]->data[i]));
    cr_assert_leq(worst[0], TOL(1e-12, 2e-5), "textbook against three nodes, weights asked: %g", worst[0]);
    cr_assert_leq(worst[1], TOL(1e-12, 2e-5), "textbook against three nodes, 12 keys: %g", worst[1]);
    for (int i = 0; i < 3; i++) ag_graph_free(g[i]);
    ag_store_free(s);
}

/* GPT with dropout in training: every layer's attention is the one node. */
Test(mha_dropout, a_gpt_with_dropout_builds_no_three_node_attention)
{
    ag_set_kernels(AG_KERNELS_FAST);
    ag_store *s = ag_store_new();
    ag_gpt m;
    ag_gpt_config cfg = {.vocab = 7, .context = T, .hidden = C, .heads = H, .ffn = 12, .layers = 2, .dropout = 0.1};
    cr_assert_eq(ag_gpt_init(&m, s, &cfg, 3), AG_OK, "%s", ag_store_error(s));
    int ids[T], targets[T];
    for (int t = 0; t < T; t++) ids[t] = t * 5 % 7, targets[t] = (t * 5 + 1) % 7;
    ag_graph *g = ag_graph_new();
    ag_graph_set_training(g, 1);
    ag_tensor *loss = ag_gpt_loss(g, &m, ids, targets, 1, T);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    ag_attention_stats st;
    ag_graph_attention_stats(g, &st);
    cr_assert(st.flash == 2 && st.three_nodes == 0 && st.p_kept == 0 && st.textbook == 0,
              "flash %d, three nodes %d, P kept %d, textbook %d", st.flash, st.three_nodes, st.p_kept, st.textbook);
    cr_assert_eq(st.kept_bytes, (size_t)2 * H * T * 2 * sizeof(ag_real), "%zu bytes kept", st.kept_bytes);
    ag_graph_free(g);
    ag_gpt_free(&m);
    ag_store_free(s);
}
