/* tests/test_user_ops.c: expand, repeat, argmax, topk, where and clamp:
 * values and gradients by hand, error messages, (in double) the ops'
 * gradient-check cases, and PyTorch parity on
 * tests/reference/user_ops.safetensors (written by make_user_ops.py), with
 * the learned positions and the class token. */
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

/* A leaf [ndim, shape] holding the given values, requiring grad. */
static ag_tensor *leaf(ag_graph *g, int ndim, const int *shape, const ag_real *v)
{
    ag_tensor *t = ag_tensor_from(g, ndim, shape, v);
    cr_assert_not_null(t, "%s", ag_graph_error(g));
    ag_set_requires_grad(t, 1);
    return t;
}

/* Backward from y with dy = 1, 2, 3, ...: each input's gradient shows
 * which elements of y it reached. */
static void backward_ramp(ag_graph *g, ag_tensor *y)
{
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    ag_real *dy = malloc(y->size * sizeof *dy);
    cr_assert_not_null(dy);
    for (size_t i = 0; i < y->size; i++) dy[i] = (ag_real)(i + 1);
    cr_assert_eq(ag_backward_from(g, y, dy), AG_OK, "%s", ag_graph_error(g));
    free(dy);
}

static void expect_error(ag_graph *g, ag_status st, const char *msg)
{
    cr_assert_eq(ag_graph_status(g), st, "status %d, want %d (%s)", ag_graph_status(g), st, ag_graph_error(g));
    cr_assert_str_eq(ag_graph_error(g), msg);
    ag_graph_reset(g);
}

/* ---- expand and repeat ------------------------------------------------------ */

Test(user_ops, expand_stretches_size_1_axes_and_sums_back)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = leaf(g, AG_SHAPE(1, 3, 1), (ag_real[]){1, 2, 3});
    ag_tensor *y = ag_expand(g, x, AG_SHAPE(2, -1, 2));
    expect_shape(y, 2, 3, 2);
    expect_close(y->data, ((double[]){1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}), 12, 0, 0, "y");
    backward_ramp(g, y);
    /* x[0, k, 0] collects dy[b, k, j] over b and j: e.g. 1 + 2 + 7 + 8 */
    expect_close(x->grad, ((double[]){18, 26, 34}), 3, 0, 0, "dx");
    /* new leading axes, and a scalar */
    ag_tensor *z = ag_expand(g, ag_tensor_from(g, AG_SHAPE(2), (ag_real[]){5, 6}), AG_SHAPE(2, 1, 2));
    expect_shape(z, 2, 1, 2);
    expect_close(z->data, ((double[]){5, 6, 5, 6}), 4, 0, 0, "z");
    ag_tensor *s = ag_expand(g, ag_scalar(g, 4), AG_SHAPE(3));
    expect_close(s->data, ((double[]){4, 4, 4}), 3, 0, 0, "s");
    ag_graph_free(g);
}

Test(user_ops, expand_bad_shapes_are_errors)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(2, 3));
    cr_assert_null(ag_expand(g, x, AG_SHAPE(4, 3)));
    expect_error(g, AG_ERR_SHAPE, "expand: cannot expand [2, 3] to [4, 3]: axis 0 has a size that is not 1");
    x = ag_tensor_new(g, AG_SHAPE(2, 3));
    cr_assert_null(ag_expand(g, x, AG_SHAPE(3)));
    expect_error(g, AG_ERR_SHAPE, "expand: cannot expand [2, 3] to [3]: fewer axes than the input's 2");
    x = ag_tensor_new(g, AG_SHAPE(2, 3));
    cr_assert_null(ag_expand(g, x, AG_SHAPE(-1, 2, 3)));
    expect_error(g, AG_ERR_SHAPE, "expand: cannot expand [2, 3] to [-1, 2, 3]: axis 0 is new and needs a size >= 0");
    x = ag_tensor_new(g, AG_SHAPE(1, 3));
    cr_assert_null(ag_expand(g, x, AG_SHAPE(-2, 3)));
    expect_error(g, AG_ERR_SHAPE, "expand: cannot expand [1, 3] to [-2, 3]: axis 0 needs a size >= 0 or -1");
    cr_assert_null(ag_expand(g, NULL, AG_SHAPE(3)));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG, "%s", ag_graph_error(g));
    ag_graph_free(g);
}

Test(user_ops, repeat_tiles_whole_copies_and_sums_back)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = leaf(g, AG_SHAPE(2), (ag_real[]){1, 2});
    ag_tensor *y = ag_repeat(g, x, AG_SHAPE(2, 3));
    expect_shape(y, 2, 6);
    expect_close(y->data, ((double[]){1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2}), 12, 0, 0, "y");
    backward_ramp(g, y);
    expect_close(x->grad, ((double[]){1 + 3 + 5 + 7 + 9 + 11, 2 + 4 + 6 + 8 + 10 + 12}), 2, 0, 0, "dx");
    /* copies end to end, not each element twice: [[a], [b]] -> [[a, a], [b, b]] along axis 1 only */
    ag_tensor *c = ag_repeat(g, ag_tensor_from(g, AG_SHAPE(2, 1), (ag_real[]){7, 8}), AG_SHAPE(1, 2));
    expect_close(c->data, ((double[]){7, 7, 8, 8}), 4, 0, 0, "c");
    ag_tensor *r = ag_repeat(g, ag_tensor_from(g, AG_SHAPE(1, 2), (ag_real[]){7, 8}), AG_SHAPE(2, 2));
    expect_close(r->data, ((double[]){7, 8, 7, 8, 7, 8, 7, 8}), 8, 0, 0, "r");
    expect_shape(ag_repeat(g, x, AG_SHAPE(0)), 0);
    ag_graph_free(g);
}

Test(user_ops, repeat_bad_repeats_are_errors)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(2, 3));
    cr_assert_null(ag_repeat(g, x, AG_SHAPE(2)));
    expect_error(g, AG_ERR_ARG, "repeat: 1 repeats for [2, 3] (needs 2 to 6, one per axis)");
    x = ag_tensor_new(g, AG_SHAPE(2, 3));
    cr_assert_null(ag_repeat(g, x, AG_SHAPE(1, -1)));
    expect_error(g, AG_ERR_ARG, "repeat: repeats [1, -1] for [2, 3]: axis 1 is negative");
    ag_graph_free(g);
}

/* ---- argmax and topk ---------------------------------------------------------- */

Test(user_ops, argmax_takes_the_first_maximum_and_a_nan)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = leaf(g, AG_SHAPE(2, 4), (ag_real[]){1, 5, 5, 2, NAN, 3, NAN, 0});
    ag_tensor *r = ag_argmax(g, x, 1, 0);
    expect_shape(r, 2);
    expect_close(r->data, ((double[]){1, 0}), 2, 0, 0, "argmax rows");
    cr_assert_eq(r->requires_grad, 0, "indices never require grad");
    ag_tensor *c = ag_argmax(g, x, 0, 1);
    expect_shape(c, 1, 4);
    expect_close(c->data, ((double[]){1, 0, 1, 0}), 4, 0, 0, "argmax columns");
    /* accuracy, the use it is for: predictions against integer targets */
    const int targets[2] = {1, 3};
    int right = 0;
    for (int i = 0; i < 2; i++) right += (int)r->data[i] == targets[i];
    cr_assert_eq(right, 1);
    cr_assert_null(ag_argmax(g, x, 2, 0));
    expect_error(g, AG_ERR_ARG, "argmax: axis 2 out of range for [2, 4]");
    cr_assert_null(ag_argmax(g, ag_tensor_new(g, AG_SHAPE(3, 0)), -1, 0));
    expect_error(g, AG_ERR_SHAPE,
                 sizeof(ag_real) == 4 ? "argmax: axis -1 of [3, 0] has 0 elements (needs 1 to 2^24)"
                                      : "argmax: axis -1 of [3, 0] has 0 elements (needs 1 to 2^53)");
    ag_graph_free(g);
}

Test(user_ops, topk_sorts_picks_ties_in_index_order_and_scatters_back)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = leaf(g, AG_SHAPE(2, 5), (ag_real[]){1, 4, 4, 2, 0, 3, -1, 7, 3, NAN});
    ag_tensor *idx = NULL;
    ag_tensor *y = ag_topk(g, x, 3, -1, 1, &idx);
    expect_shape(y, 2, 3);
    expect_shape(idx, 2, 3);
    expect_close(idx->data, ((double[]){1, 2, 3, 4, 2, 0}), 6, 0, 0, "indices");
    expect_close(y->data, ((double[]){4, 4, 2}), 3, 0, 0, "row 0");
    cr_assert(isnan(y->data[3]), "a NaN is the largest");
    expect_close(y->data + 4, ((double[]){7, 3}), 2, 0, 0, "row 1");
    cr_assert_eq(idx->requires_grad, 0);
    backward_ramp(g, y);
    expect_close(x->grad, ((double[]){0, 1, 2, 3, 0, 6, 0, 5, 0, 4}), 10, 0, 0, "dx");
    ag_tensor *s = ag_topk(g, x, 2, 1, 0, &idx);
    expect_close(s->data, ((double[]){0, 1, -1, 3}), 4, 0, 0, "smallest");
    expect_close(idx->data, ((double[]){4, 0, 1, 0}), 4, 0, 0, "smallest's indices");
    ag_tensor *cols = ag_topk(g, x, 1, 0, 1, NULL); /* along axis 0: [1, 5] */
    expect_close(cols->data, ((double[]){3, 4, 7, 3, 0}), 4, 0, 0, "columns");
    cr_assert(isnan(cols->data[4]));
    expect_shape(ag_topk(g, x, 0, 1, 1, NULL), 2, 0);
    cr_assert_null(ag_topk(g, x, 6, 1, 1, &idx));
    cr_assert_null(idx, "no indices on failure");
    expect_error(g, AG_ERR_ARG, "topk: k = 6 out of range for axis 1 of size 5 in [2, 5]");
    ag_graph_free(g);
}

/* ---- where and clamp ------------------------------------------------------------ */

Test(user_ops, where_picks_by_cond_with_broadcasting)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *cond = ag_tensor_from(g, AG_SHAPE(2, 1), (ag_real[]){1, 0});
    ag_tensor *a = leaf(g, AG_SHAPE(1, 3), (ag_real[]){1, 2, 3});
    ag_tensor *b = leaf(g, 0, NULL, (ag_real[]){9});
    ag_set_requires_grad(cond, 1); /* even so: cond is data, never differentiated */
    ag_tensor *y = ag_where(g, cond, a, b);
    expect_shape(y, 2, 3);
    expect_close(y->data, ((double[]){1, 2, 3, 9, 9, 9}), 6, 0, 0, "y");
    backward_ramp(g, y);
    expect_close(a->grad, ((double[]){1, 2, 3}), 3, 0, 0, "da");
    expect_close(b->grad, ((double[]){4 + 5 + 6}), 1, 0, 0, "db");
    cr_assert(!cond->grad || (cond->grad[0] == 0 && cond->grad[1] == 0), "no gradient reaches cond");
    ag_tensor *no = ag_where(g, cond, ag_tensor_new(g, AG_SHAPE(3)), ag_tensor_new(g, AG_SHAPE(3)));
    cr_assert_eq(no->requires_grad, 0, "only cond requires grad: y does not");
    cr_assert_null(ag_where(g, ag_tensor_new(g, AG_SHAPE(2, 3)), ag_tensor_new(g, AG_SHAPE(4)), b));
    expect_error(g, AG_ERR_SHAPE, "where: shapes do not broadcast: cond [2, 3], a [4], b [] (axis -1)");
    ag_graph_free(g);
}

Test(user_ops, clamp_passes_the_gradient_inside_the_closed_interval)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = leaf(g, AG_SHAPE(6), (ag_real[]){-2, -0.5, 0, 0.5, 2, NAN});
    ag_tensor *y = ag_clamp(g, x, -0.5, 0.5);
    expect_close(y->data, ((double[]){-0.5, -0.5, 0, 0.5, 0.5}), 5, 0, 0, "y");
    cr_assert(isnan(y->data[5]), "a NaN stays NaN");
    backward_ramp(g, y);
    /* PyTorch's clamp_backward: 1 where lo <= x <= hi, the bounds included */
    expect_close(x->grad, ((double[]){0, 2, 3, 4, 0, 0}), 6, 0, 0, "dx");
    ag_tensor *one = ag_clamp(g, x, 0, INFINITY);
    expect_close(one->data, ((double[]){0, 0, 0, 0.5, 2}), 5, 0, 0, "relu-like");
    ag_tensor *crossed = ag_clamp(g, x, 1, -1); /* lo > hi: all hi, as torch.clamp */
    expect_close(crossed->data, ((double[]){-1, -1, -1, -1, -1}), 5, 0, 0, "lo > hi");
    cr_assert_null(ag_clamp(g, x, NAN, 1));
    expect_error(g, AG_ERR_ARG, "clamp: bounds [nan, 1] for [6]: a bound is NaN");
    ag_graph_free(g);
}

#ifdef AG_DOUBLE
Test(user_ops, expand_gradcheck) { expect_op_gradcheck("expand"); }
Test(user_ops, repeat_gradcheck) { expect_op_gradcheck("repeat"); }
Test(user_ops, argmax_gradcheck) { expect_op_gradcheck("argmax"); }
Test(user_ops, topk_gradcheck) { expect_op_gradcheck("topk"); }
Test(user_ops, where_gradcheck) { expect_op_gradcheck("where"); }
Test(user_ops, clamp_gradcheck) { expect_op_gradcheck("clamp"); }
#endif

/* ---- PyTorch parity ------------------------------------------------------------- */

#define USER_FIXTURE "tests/reference/user_ops.safetensors"
#define ABS TOL(1e-12, 1e-6)
#define REL TOL(1e-10, 1e-5)

typedef ag_tensor *(*one_fn)(ag_graph *g, ag_tensor *x);

/* Case c of one input x: c.out and grad.c.x against out = op(x). */
static void check_one(const char *c, one_fn op)
{
    char name[64];
    ag_safetensors *f = open_fixture(USER_FIXTURE);
    ag_graph *g = ag_graph_new();
    snprintf(name, sizeof name, "%s.x", c);
    ag_tensor *x = load_leaf(g, f, name, 1);
    snprintf(name, sizeof name, "%s.w", c);
    ag_tensor *y = op(g, x);
    backward_weighted(g, y, load_leaf(g, f, name, 0));
    snprintf(name, sizeof name, "%s.out", c);
    expect_f64(f, name, y, y->data, ABS, REL);
    snprintf(name, sizeof name, "grad.%s.x", c);
    expect_f64(f, name, x, x->grad, ABS, REL);
    ag_graph_free(g);
    ag_safetensors_free(f);
}

static ag_tensor *expand_case(ag_graph *g, ag_tensor *x) { return ag_expand(g, x, AG_SHAPE(2, 2, -1, 4)); }
static ag_tensor *repeat_case(ag_graph *g, ag_tensor *x) { return ag_repeat(g, x, AG_SHAPE(2, 1, 2)); }
static ag_tensor *clamp_case(ag_graph *g, ag_tensor *x) { return ag_clamp(g, x, -0.5, 0.5); }
static ag_tensor *clamp_min_case(ag_graph *g, ag_tensor *x) { return ag_clamp(g, x, 0.25, INFINITY); }

Test(user_ops_parity, expand) { check_one("expand", expand_case); }
Test(user_ops_parity, repeat) { check_one("repeat", repeat_case); }
Test(user_ops_parity, clamp_with_values_on_the_bounds) { check_one("clamp", clamp_case); }
Test(user_ops_parity, clamp_min_only) { check_one("clamp_min", clamp_min_case); }

Test(user_ops_parity, where_broadcasts_cond_a_and_b)
{
    ag_safetensors *f = open_fixture(USER_FIXTURE);
    ag_graph *g = ag_graph_new();
    ag_tensor *a = load_leaf(g, f, "where.a", 1), *b = load_leaf(g, f, "where.b", 1);
    ag_tensor *y = ag_where(g, load_leaf(g, f, "where.cond", 0), a, b);
    backward_weighted(g, y, load_leaf(g, f, "where.w", 0));
    expect_f64(f, "where.out", y, y->data, ABS, REL);
    expect_f64(f, "grad.where.a", a, a->grad, ABS, REL);
    expect_f64(f, "grad.where.b", b, b->grad, ABS, REL);
    ag_graph_free(g);
    ag_safetensors_free(f);
}

/* y's values, exact integers, equal the stored int64 indices `name`. */
static void expect_indices(const ag_safetensors *f, const char *name, const ag_tensor *y)
{
    cr_assert_not_null(y);
    int *want = malloc(y->size * sizeof *want);
    cr_assert_not_null(want);
    load_ints(f, name, want, y->size);
    for (size_t i = 0; i < y->size; i++)
        cr_assert_eq(y->data[i], (ag_real)want[i], "%s[%zu] = %g, want %d", name, i, (double)y->data[i], want[i]);
    free(want);
}

Test(user_ops_parity, argmax_with_ties)
{
    ag_safetensors *f = open_fixture(USER_FIXTURE);
    ag_graph *g = ag_graph_new();
    ag_tensor *x = load_leaf(g, f, "argmax.x", 0);
    ag_tensor *rows = ag_argmax(g, x, 1, 0), *cols = ag_argmax(g, x, 0, 1);
    expect_shape(cols, 1, 5);
    expect_indices(f, "argmax.out1", rows);
    expect_indices(f, "argmax.out0", cols);
    ag_graph_free(g);
    ag_safetensors_free(f);
}

static void check_topk(const char *c, int k, int axis, int largest)
{
    char name[64];
    ag_safetensors *f = open_fixture(USER_FIXTURE);
    ag_graph *g = ag_graph_new();
    snprintf(name, sizeof name, "%s.x", c);
    ag_tensor *x = load_leaf(g, f, name, 1), *idx = NULL;
    ag_tensor *y = ag_topk(g, x, k, axis, largest, &idx);
    snprintf(name, sizeof name, "%s.w", c);
    backward_weighted(g, y, load_leaf(g, f, name, 0));
    snprintf(name, sizeof name, "%s.out", c);
    expect_f64(f, name, y, y->data, ABS, REL);
    snprintf(name, sizeof name, "%s.indices", c);
    expect_indices(f, name, idx);
    snprintf(name, sizeof name, "grad.%s.x", c);
    expect_f64(f, name, x, x->grad, ABS, REL);
    ag_graph_free(g);
    ag_safetensors_free(f);
}

Test(user_ops_parity, topk_largest) { check_topk("topk", 3, -1, 1); }
Test(user_ops_parity, topk_smallest_along_axis_1) { check_topk("topk_small", 2, 1, 0); }

Test(user_ops_parity, learned_positions_added_to_b_t_c)
{
    ag_safetensors *f = open_fixture(USER_FIXTURE);
    ag_store *s = ag_store_new();
    ag_learned_positions pos;
    cr_assert_eq(ag_learned_positions_init(&pos, s, "positions.pos", 5, 4, 1), AG_OK, "%s", ag_store_error(s));
    char err[256] = "";
    cr_assert_eq(ag_safetensors_read_tensor(f, "positions.pos.weight", pos.weight, err, sizeof err), AG_OK, "%s",
                 err);
    ag_graph *g = ag_graph_new();
    ag_tensor *x = load_leaf(g, f, "positions.x", 1);
    ag_tensor *y = ag_learned_positions_forward(g, &pos, x);
    backward_weighted(g, y, load_leaf(g, f, "positions.w", 0));
    expect_f64(f, "positions.out", y, y->data, ABS, REL);
    expect_f64(f, "grad.positions.x", x, x->grad, ABS, REL);
    expect_f64(f, "grad.positions.pos.weight", pos.weight, pos.weight->grad, ABS, REL);
    ag_graph_free(g);
    ag_store_free(s);
    ag_safetensors_free(f);
}

Test(user_ops_parity, class_token_prepended)
{
    ag_safetensors *f = open_fixture(USER_FIXTURE);
    ag_graph *g = ag_graph_new();
    ag_tensor *cls = load_leaf(g, f, "prepend.cls", 1), *x = load_leaf(g, f, "prepend.x", 1);
    ag_tensor *y = ag_prepend_token(g, cls, x);
    expect_shape(y, 2, 4, 4);
    backward_weighted(g, y, load_leaf(g, f, "prepend.w", 0));
    expect_f64(f, "prepend.out", y, y->data, ABS, REL);
    expect_f64(f, "grad.prepend.cls", cls, cls->grad, ABS, REL);
    expect_f64(f, "grad.prepend.x", x, x->grad, ABS, REL);
    ag_graph_free(g);
    ag_safetensors_free(f);
}
