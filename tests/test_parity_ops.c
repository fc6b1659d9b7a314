/* tests/test_parity_ops.c: the core ops against PyTorch.
 *
 * tests/reference/make_fixtures.py ran each op in PyTorch (float64) and
 * stored its inputs, its output and the gradients of L = sum(out * w) for a
 * fixed random w in tests/reference/ops.safetensors (see the README there).
 * Here the same inputs go through attograd and everything must agree: to
 * 1e-10 relative in the double build, 1e-5 in the float build.  The inputs
 * are multiples of 2^-16, so both builds read them exactly. */
#include <stdlib.h>

#include "fixture.h"

#define OPS_FIXTURE "tests/reference/ops.safetensors"
#define ABS TOL(1e-12, 1e-6)
#define REL TOL(1e-10, 1e-5)

/* got (t's data or gradient) matches stored tensor `name`. */
static void expect_stored(const ag_safetensors *f, const char *name, const ag_tensor *t, const ag_real *got)
{
    expect_f64(f, name, t, got, ABS, REL);
}

/* ---- the ops --------------------------------------------------------------- */

typedef ag_tensor *(*unary_fn)(ag_graph *g, ag_tensor *x);

/* An op of one input x: out and grad.x against the fixture's case `c`. */
static void check_unary(const char *c, unary_fn op)
{
    char name[64];
    ag_safetensors *f = open_fixture(OPS_FIXTURE);
    ag_graph *g = ag_graph_new();
    snprintf(name, sizeof name, "%s.x", c);
    ag_tensor *x = load_leaf(g, f, name, 1);
    snprintf(name, sizeof name, "%s.w", c);
    ag_tensor *w = load_leaf(g, f, name, 0);
    ag_tensor *y = op(g, x);
    backward_weighted(g, y, w);
    snprintf(name, sizeof name, "%s.out", c);
    expect_stored(f, name, y, y->data);
    snprintf(name, sizeof name, "grad.%s.x", c);
    expect_stored(f, name, x, x->grad);
    ag_graph_free(g);
    ag_safetensors_free(f);
}

Test(parity_ops, softmax)
{
    check_unary("softmax", ag_softmax);
}

Test(parity_ops, log_softmax)
{
    check_unary("log_softmax", ag_log_softmax);
}

Test(parity_ops, layer_norm_with_gain_and_bias)
{
    ag_safetensors *f = open_fixture(OPS_FIXTURE);
    ag_graph *g = ag_graph_new();
    ag_tensor *x = load_leaf(g, f, "layer_norm.x", 1);
    ag_tensor *gain = load_leaf(g, f, "layer_norm.weight", 1);
    ag_tensor *bias = load_leaf(g, f, "layer_norm.bias", 1);
    ag_tensor *w = load_leaf(g, f, "layer_norm.w", 0);
    ag_tensor *y = ag_layer_norm(g, x, gain, bias, 1e-5);
    backward_weighted(g, y, w);
    expect_stored(f, "layer_norm.out", y, y->data);
    expect_stored(f, "grad.layer_norm.x", x, x->grad);
    expect_stored(f, "grad.layer_norm.weight", gain, gain->grad);
    expect_stored(f, "grad.layer_norm.bias", bias, bias->grad);
    ag_graph_free(g);
    ag_safetensors_free(f);
}

Test(parity_ops, matmul_with_broadcast_batch)
{
    ag_safetensors *f = open_fixture(OPS_FIXTURE);
    ag_graph *g = ag_graph_new();
    ag_tensor *a = load_leaf(g, f, "matmul.a", 1); /* [2, 1, 3, 4] */
    ag_tensor *b = load_leaf(g, f, "matmul.b", 1); /* [3, 4, 5] */
    ag_tensor *w = load_leaf(g, f, "matmul.w", 0);
    ag_tensor *y = ag_matmul(g, a, b);
    expect_shape(y, 2, 3, 3, 5);
    backward_weighted(g, y, w);
    expect_stored(f, "matmul.out", y, y->data);
    /* a's batch axis of size 1 was stretched over 3: its gradient sums them */
    expect_stored(f, "grad.matmul.a", a, a->grad);
    /* b had no leading batch axis: its gradient sums over a's batch of 2 */
    expect_stored(f, "grad.matmul.b", b, b->grad);
    ag_graph_free(g);
    ag_safetensors_free(f);
}

/* Cross-entropy case c: logits [2, 3, 5], targets [2, 3], ignore_index and
 * label smoothing from the fixture; L = loss. */
static void check_cross_entropy(const char *c)
{
    char name[64];
    int targets[6], ignore;
    size_t n;
    ag_safetensors *f = open_fixture(OPS_FIXTURE);
    ag_graph *g = ag_graph_new();
    snprintf(name, sizeof name, "%s.logits", c);
    ag_tensor *logits = load_leaf(g, f, name, 1);
    snprintf(name, sizeof name, "%s.targets", c);
    load_ints(f, name, targets, 6);
    snprintf(name, sizeof name, "%s.ignore_index", c);
    load_ints(f, name, &ignore, 1);
    snprintf(name, sizeof name, "%s.label_smoothing", c);
    double *ls = load_f64(f, name, &n);
    cr_assert_eq(n, 1);
    int ignored = 0;
    for (int i = 0; i < 6; i++) ignored += targets[i] == ignore;
    cr_assert(ignored > 0 && ignored < 6, "the case must mix ignored and counted targets");

    ag_tensor *loss = ag_cross_entropy(g, logits, targets, ignore, ls[0]);
    cr_assert_not_null(loss, "%s", ag_graph_error(g));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    snprintf(name, sizeof name, "%s.out", c);
    expect_stored(f, name, loss, loss->data);
    snprintf(name, sizeof name, "grad.%s.logits", c);
    expect_stored(f, name, logits, logits->grad);
    free(ls);
    ag_graph_free(g);
    ag_safetensors_free(f);
}

Test(parity_ops, cross_entropy_with_ignore_index)
{
    check_cross_entropy("cross_entropy");
}

Test(parity_ops, cross_entropy_with_label_smoothing_and_ignore_index)
{
    check_cross_entropy("cross_entropy_ls");
}

Test(parity_ops, embedding_with_repeated_ids)
{
    int ids[6];
    ag_safetensors *f = open_fixture(OPS_FIXTURE);
    ag_graph *g = ag_graph_new();
    ag_tensor *weight = load_leaf(g, f, "embedding.weight", 1); /* [6, 4] */
    load_ints(f, "embedding.ids", ids, 6);                      /* [2, 3] */
    ag_tensor *w = load_leaf(g, f, "embedding.w", 0);
    ag_tensor *y = ag_embedding(g, weight, ids, AG_SHAPE(2, 3));
    expect_shape(y, 2, 3, 4);
    backward_weighted(g, y, w);
    expect_stored(f, "embedding.out", y, y->data);
    /* id 1 appears three times: its row of the gradient is the sum of three */
    expect_stored(f, "grad.embedding.weight", weight, weight->grad);
    ag_graph_free(g);
    ag_safetensors_free(f);
}

Test(parity_ops, index_add_with_a_repeated_index)
{
    int idx[5];
    ag_safetensors *f = open_fixture(OPS_FIXTURE);
    ag_graph *g = ag_graph_new();
    ag_tensor *x = load_leaf(g, f, "index_add.x", 1); /* [5, 3] */
    load_ints(f, "index_add.idx", idx, 5);
    ag_tensor *w = load_leaf(g, f, "index_add.w", 0);
    ag_tensor *y = ag_index_add(g, x, idx, 7);
    expect_shape(y, 7, 3);
    backward_weighted(g, y, w);
    expect_stored(f, "index_add.out", y, y->data);
    expect_stored(f, "grad.index_add.x", x, x->grad);
    ag_graph_free(g);
    ag_safetensors_free(f);
}
