/* test_residual_layers.c: the public residual forms of the linear and
 * feed-forward layers,
 *   ag_linear_layer_forward_add(l, x, res) = res + x W^T + b
 *   ag_ffn_layer_forward_add(f, x, res)    = res + dense2(act(dense1(x)))
 * against the composition a user writes, ag_add(res, forward(x)): the same
 * bits in the value and in every gradient (x and res are parameters here,
 * so that theirs are compared too), less of the arena, and shape errors
 * that name the shapes. */
#include "common.h"

#include <string.h>

enum { B = 2, C = 8, F = 32 };
static int T; /* positions: set by each test (past 256, GELU recomputed) */
static ag_activation act;

static ag_tensor *param(ag_store *s, const char *name, int d0, int d1, int d2, uint64_t seed)
{
    ag_tensor *p = ag_param(s, name, AG_SHAPE(d0, d1, d2));
    ag_init_uniform(p, -1, 1, seed);
    return p;
}

/* loss = sum(y * y) with y = res + layer(x), fused or composed */
static ag_tensor *ffn_build(ag_graph *g, ag_store *s, int fused, ag_tensor **y)
{
    ag_ffn_layer f;
    cr_assert_eq(ag_ffn_layer_init_ex(&f, s, "ffn", C, F, act, 3), AG_OK);
    ag_tensor *x = param(s, "x", B, T, C, 4), *res = param(s, "res", B, T, C, 5);
    *y = fused ? ag_ffn_layer_forward_add(g, &f, x, res) : ag_add(g, res, ag_ffn_layer_forward(g, &f, x));
    cr_assert_not_null(*y, "%s", ag_graph_error(g));
    return ag_sum_all(g, ag_mul(g, *y, *y));
}

static ag_tensor *linear_build(ag_graph *g, ag_store *s, int fused, ag_tensor **y)
{
    ag_linear_layer l;
    cr_assert_eq(ag_linear_layer_init(&l, s, "lin", C, F, 1, 3), AG_OK);
    ag_tensor *x = param(s, "x", B, T, C, 4), *res = param(s, "res", B, T, F, 5);
    *y = fused ? ag_linear_layer_forward_add(g, &l, x, res) : ag_add(g, res, ag_linear_layer_forward(g, &l, x));
    cr_assert_not_null(*y, "%s", ag_graph_error(g));
    return ag_sum_all(g, ag_mul(g, *y, *y));
}

/* the fused call's outcome equals the composition's bit for bit; returns
 * the two forwards' arena bytes (fused, composed) */
static void same_bits(fused_build_fn build, const char *what, size_t bytes[2])
{
    ag_real *out[2];
    size_t n[2];
    for (int fused = 0; fused < 2; fused++) {
        ag_store *s = ag_store_new();
        out[fused] = fused_outcome(s, build, fused, 0, &n[fused], &bytes[!fused]);
        ag_store_free(s);
    }
    cr_assert_eq(n[0], n[1]);
    for (size_t i = 0; i < n[0]; i++)
        cr_assert(memcmp(&out[0][i], &out[1][i], sizeof(ag_real)) == 0,
                  "%s, T %d: value %zu of the outcome: fused %.17g, composed %.17g", what, T, i, (double)out[1][i],
                  (double)out[0][i]);
    free(out[0]), free(out[1]);
}

Test(residual_layers, linear_forward_add_is_the_add_of_the_linear_bit_for_bit)
{
    size_t bytes[2];
    T = 5;
    same_bits(linear_build, "linear", bytes);
    cr_expect_lt(bytes[0], bytes[1], "fused %zu bytes, composed %zu", bytes[0], bytes[1]);
}

Test(residual_layers, ffn_forward_add_is_the_add_of_the_ffn_bit_for_bit)
{
    const ag_activation acts[] = {AG_ACT_RELU, AG_ACT_GELU, AG_ACT_GELU_TANH};
    const int lengths[] = {5, 300}; /* 300: GELU recomputed in the backward */
    for (int a = 0; a < 3; a++)
        for (int i = 0; i < 2; i++) {
            size_t bytes[2];
            act = acts[a], T = lengths[i];
            same_bits(ffn_build, "ffn", bytes);
            cr_expect_lt(bytes[0], bytes[1], "act %d, T %d: fused %zu bytes, composed %zu", (int)act, T, bytes[0],
                         bytes[1]);
        }
}

Test(residual_layers, a_residual_of_another_shape_is_named)
{
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    ag_linear_layer l;
    ag_ffn_layer f;
    cr_assert_eq(ag_linear_layer_init(&l, s, "lin", 3, 4, 1, 1), AG_OK);
    cr_assert_eq(ag_ffn_layer_init(&f, s, "ffn", 4, 8, 1), AG_OK);
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(2, 3)), *res = ag_tensor_new(g, AG_SHAPE(2, 3));
    cr_assert_null(ag_linear_layer_forward_add(g, &l, x, res));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE, "%s", ag_graph_error(g));
    cr_expect(strstr(ag_graph_error(g), "lin") && strstr(ag_graph_error(g), "[2, 3]"), "%s", ag_graph_error(g));
    ag_graph_reset(g);
    ag_tensor *x4 = ag_tensor_new(g, AG_SHAPE(2, 4));
    cr_assert_null(ag_ffn_layer_forward_add(g, &f, x4, ag_tensor_new(g, AG_SHAPE(2, 5))));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE, "%s", ag_graph_error(g));
    cr_expect(strstr(ag_graph_error(g), "ffn") && strstr(ag_graph_error(g), "[2, 5]"), "%s", ag_graph_error(g));
    ag_graph_reset(g);
    cr_assert_null(ag_ffn_layer_forward_add(g, &f, x4, NULL));
    cr_assert_neq(ag_graph_status(g), AG_OK);
    ag_graph_free(g);
    ag_store_free(s);
}
