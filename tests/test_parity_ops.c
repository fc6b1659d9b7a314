/* tests/test_parity_ops.c: the core ops against PyTorch.
 *
 * tests/reference/make_fixtures.py ran each op in PyTorch (float64) and
 * stored its inputs, its output and the gradients of L = sum(out * w) for a
 * fixed random w in tests/reference/ops.safetensors (see the README there).
 * Here the same inputs go through attograd and everything must agree: to
 * 1e-10 relative in the double build, 1e-5 in the float build.  The inputs
 * are multiples of 2^-16, so both builds read them exactly. */
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define OPS_FIXTURE "tests/reference/ops.safetensors"
#define ABS TOL(1e-12, 1e-6)
#define REL TOL(1e-10, 1e-5)

/* ---- reading the fixture ------------------------------------------------- */

static ag_st *open_fixture(const char *path)
{
    ag_st *f = NULL;
    char err[256] = "";
    ag_status st = ag_st_load(path, &f, err, sizeof err);
    cr_assert_eq(st, AG_OK, "%s (run the tests from the repository root; regenerate with "
                            "/usr/bin/python3 tests/reference/make_fixtures.py)", err);
    return f;
}

static int stored(const ag_st *f, const char *name)
{
    int i = ag_st_find(f, name);
    cr_assert_geq(i, 0, "the fixture has no tensor %s", name);
    return i;
}

/* A leaf of g with the stored tensor's shape and values. */
static ag_tensor *load_leaf(ag_graph *g, const ag_st *f, const char *name, int requires_grad)
{
    int i = stored(f, name), nd = ag_st_ndim(f, i), shape[AG_MAX_DIMS];
    cr_assert(nd >= 0 && nd <= AG_MAX_DIMS, "%s has %d axes", name, nd);
    for (int d = 0; d < nd; d++) shape[d] = (int)ag_st_shape(f, i)[d];
    ag_tensor *t = ag_tensor_new(g, nd, shape);
    cr_assert_not_null(t, "%s: %s", name, ag_graph_error(g));
    char err[256] = "";
    cr_assert_eq(ag_st_read_tensor(f, name, t, err, sizeof err), AG_OK, "%s", err);
    ag_set_requires_grad(t, requires_grad);
    return ag_set_name(t, name);
}

/* n stored ints (I64), which must be exactly n. */
static void load_ints(const ag_st *f, const char *name, int *dst, size_t n)
{
    cr_assert_eq(ag_st_numel(f, stored(f, name)), n, "%s: element count", name);
    char err[256] = "";
    cr_assert_eq(ag_st_read_int(f, name, dst, n, err, sizeof err), AG_OK, "%s", err);
}

/* The stored F64 values, exactly (not rounded to ag_real): the reference.
 * The caller frees them. */
static double *load_f64(const ag_st *f, const char *name, size_t *n)
{
    int i = stored(f, name);
    cr_assert_str_eq(ag_st_dtype(f, i), "F64", "%s", name);
    *n = ag_st_numel(f, i);
    double *v = malloc((*n ? *n : 1) * sizeof *v);
    cr_assert_not_null(v);
    const unsigned char *b = ag_st_bytes(f, i);
    for (size_t k = 0; k < *n; k++) {
        uint64_t u = 0;
        for (int j = 0; j < 8; j++) u |= (uint64_t)b[8 * k + (size_t)j] << (8 * j);
        memcpy(&v[k], &u, sizeof v[k]);
    }
    return v;
}

/* got (t's data or gradient) matches stored tensor `name`, shape included;
 * a scalar t matches a stored [1]. */
static void expect_stored(const ag_st *f, const char *name, const ag_tensor *t, const ag_real *got)
{
    cr_assert_not_null(t, "%s: no tensor", name);
    cr_assert_not_null(got, "%s: no values (no gradient reached it?)", name);
    int i = stored(f, name), nd = ag_st_ndim(f, i);
    if (t->ndim == 0) {
        cr_assert_eq(ag_st_numel(f, i), 1, "%s: a scalar, stored with %zu elements", name,
                     ag_st_numel(f, i));
    } else {
        cr_assert_eq(t->ndim, nd, "%s: %d axes, stored %d", name, t->ndim, nd);
        for (int d = 0; d < nd; d++)
            cr_assert_eq((int64_t)t->shape[d], ag_st_shape(f, i)[d], "%s: axis %d is %d, stored %lld",
                         name, d, t->shape[d], (long long)ag_st_shape(f, i)[d]);
    }
    size_t n;
    double *want = load_f64(f, name, &n);
    cr_assert_eq(n, t->size, "%s: %zu values, stored %zu", name, t->size, n);
    expect_close(got, want, n, ABS, REL, name);
    free(want);
}

/* L = sum(y * w), then backward. */
static void backward_weighted(ag_graph *g, ag_tensor *y, ag_tensor *w)
{
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    ag_tensor *loss = ag_sum_all(g, ag_mul(g, y, w));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
}

/* ---- the ops --------------------------------------------------------------- */

typedef ag_tensor *(*unary_fn)(ag_graph *g, ag_tensor *x);

/* An op of one input x: out and grad.x against the fixture's case `c`. */
static void check_unary(const char *c, unary_fn op)
{
    char name[64];
    ag_st *f = open_fixture(OPS_FIXTURE);
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
    ag_st_free(f);
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
    ag_st *f = open_fixture(OPS_FIXTURE);
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
    ag_st_free(f);
}

Test(parity_ops, matmul_with_broadcast_batch)
{
    ag_st *f = open_fixture(OPS_FIXTURE);
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
    ag_st_free(f);
}

/* Cross-entropy case c: logits [2, 3, 5], targets [2, 3], ignore_index and
 * label smoothing from the fixture; L = loss. */
static void check_cross_entropy(const char *c)
{
    char name[64];
    int targets[6], ignore;
    size_t n;
    ag_st *f = open_fixture(OPS_FIXTURE);
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
    ag_st_free(f);
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
    ag_st *f = open_fixture(OPS_FIXTURE);
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
    ag_st_free(f);
}
