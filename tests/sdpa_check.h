/* tests/sdpa_check.h: what tests/test_sdpa.c and tests/test_sdpa_bias.c
 * share: a fixture case of tests/reference/make_sdpa_fixtures.py through
 * ag_scaled_dot_product_attention, compared with PyTorch, and inputs made
 * from a seed. */
#ifndef AG_TESTS_SDPA_CHECK_H
#define AG_TESTS_SDPA_CHECK_H

#include "fixture.h"

#include <math.h>
#include <stdbool.h>

#define SDPA_ABS TOL(1e-12, 1e-5)
#define SDPA_REL TOL(1e-9, 1e-4)

static const int to_heads[4] = {0, 2, 1, 3}; /* [B, H, T, D] <-> [B, T, H, D] */

/* Case c of fixture f through the call, in PyTorch's layout or the heads
 * layout, its c.mask and c.bias when stored: out and the gradients of
 * L = sum(out * w) compared with PyTorch's, the bias's too when
 * bias_grad (on the kernels' paths in the fast mode). */
static void check_case(const ag_safetensors *f, const char *c, int heads_layout, int bias_grad)
{
    char n[96];
    ag_graph *g = ag_graph_new();
#define LOAD(x, grad) (snprintf(n, sizeof n, "%s.%s", c, x), load_leaf(g, f, n, grad))
#define OPTIONAL(x) (snprintf(n, sizeof n, "%s.%s", c, x), ag_safetensors_find(f, n) >= 0 ? load_leaf(g, f, n, 0) : NULL)
    ag_tensor *q = LOAD("q", 1), *k = LOAD("k", 1), *v = LOAD("v", 1), *w = LOAD("w", 0);
    ag_tensor *mask = OPTIONAL("mask"), *bias = OPTIONAL("bias");
    if (bias && bias_grad) ag_set_requires_grad(bias, 1);
    int meta[2];
    snprintf(n, sizeof n, "%s.meta", c);
    load_ints(f, n, meta, 2);
    size_t one;
    snprintf(n, sizeof n, "%s.scale", c);
    double *scale = load_f64(f, n, &one);
    ag_sdpa_config cfg = {.mask = mask, .bias = bias, .fill = meta[1] ? 0 : -1e9, .causal = (ag_causal)meta[0],
                          .scale = scale[0], .heads_layout = heads_layout};
    free(scale);
    ag_tensor *y;
    if (heads_layout) {
        ag_tensor *qh = ag_permute(g, q, to_heads), *kh = ag_permute(g, k, to_heads), *vh = ag_permute(g, v, to_heads);
        y = ag_permute(g, ag_scaled_dot_product_attention(g, qh, kh, vh, &cfg), to_heads);
    } else {
        y = ag_scaled_dot_product_attention(g, q, k, v, &cfg);
    }
    cr_assert_not_null(y, "%s: %s", c, ag_graph_error(g));
    backward_weighted(g, y, w);
    snprintf(n, sizeof n, "%s.out", c);
    expect_f64(f, n, y, y->data, SDPA_ABS, SDPA_REL);
    ag_tensor *in[4] = {q, k, v, bias};
    const char *names[4] = {"q", "k", "v", "bias"};
    for (int i = 0; i < (bias && bias_grad ? 4 : 3); i++) {
        snprintf(n, sizeof n, "grad.%s.%s", c, names[i]);
        expect_f64(f, n, in[i], in[i]->grad, SDPA_ABS, SDPA_REL);
    }
    ag_graph_free(g);
#undef LOAD
#undef OPTIONAL
}

/* Every case of fixture `path`, in both kernel modes and both layouts,
 * then (bias_grad) with the bias needing its gradient. */
static void check_cases(const char *path, const char *const *cases, size_t n, int bias_grad)
{
    ag_safetensors *f = open_fixture(path);
    for (int mode = 0; mode < 2; mode++) {
        ag_set_kernels(mode ? AG_KERNELS_REFERENCE : AG_KERNELS_FAST);
        for (size_t i = 0; i < n; i++)
            for (int layout = 0; layout < 2; layout++)
                for (int bg = 0; bg <= bias_grad; bg++) check_case(f, cases[i], layout, bg);
    }
    ag_set_kernels(AG_KERNELS_FAST);
    ag_safetensors_free(f);
}

/* A tensor of g with values in [-2, 2) from seed. */
static ag_tensor *noise(ag_graph *g, int nd, const int *shape, uint32_t seed)
{
    ag_tensor *t = ag_tensor_new(g, nd, shape);
    for (size_t i = 0; i < t->size; i++) {
        seed = seed * 1664525u + 1013904223u;
        t->data[i] = (ag_real)((seed >> 8) * (4.0 / 16777216.0) - 2);
    }
    return t;
}

#ifdef AG_DOUBLE
/* Finite differences through the call: 6 query heads over 2, a [T, S]
 * mask whose row 1 is fully masked, and a bias [1, 6, T, S], ALiBi-like:
 * bias 1 a constant with -inf entries and row T - 1 of head 0 all -inf;
 * bias 2 a parameter whose gradient is checked with the others' (finite:
 * -3 where 1 has -inf, since finite differences of -inf are no check);
 * bias 3 the same as a parameter [T, S], which the 6 heads share. */
typedef struct fd { ag_tensor *q, *k, *v, *mask, *bias, *w; ag_causal causal; double dropout; } fd;

static ag_tensor *build_fd(ag_graph *g, void *p)
{
    fd *c = p;
    ag_sdpa_config cfg = {.mask = c->mask, .bias = c->bias, .causal = c->causal, .dropout_p = c->dropout, .seed = 7};
    return ag_sum_all(g, ag_mul(g, ag_scaled_dot_product_attention(g, c->q, c->k, c->v, &cfg), c->w));
}

static void gradcheck_sdpa(int T, int S, ag_causal causal, double dropout, int bias)
{
    ag_store *s = ag_store_new();
    fd c = {.q = ag_param(s, "q", AG_SHAPE(1, 6, T, 3)), .k = ag_param(s, "k", AG_SHAPE(1, 2, S, 3)),
            .v = ag_param(s, "v", AG_SHAPE(1, 2, S, 2)), .w = ag_param(s, "w", AG_SHAPE(1, 6, T, 2)), .causal = causal,
            .dropout = dropout};
    ag_init_normal(c.q, 0, 1, 1), ag_init_normal(c.k, 0, 1, 2), ag_init_normal(c.v, 0, 1, 3);
    ag_init_normal(c.w, 0, 1, 4);
    ag_real *m = malloc((size_t)6 * (size_t)T * (size_t)S * sizeof *m);
    for (int i = 0; i < T * S; i++) m[i] = (i * 7 % 5) != 0 && i / S != 1; /* row 1 fully masked */
    c.mask = ag_store_constant(s, "mask", AG_SHAPE(T, S), m);
    for (int i = 0; bias && i < 6 * T * S; i++) {
        int h = i / (T * S), t = i / S % T, x = i % S;
        m[i] = (x - t) / (double)(2 << h) + 0.1 * ((i * 13) % 7);
        if ((i * 11) % 9 == 0 || (h == 0 && t == T - 1)) m[i] = bias == 1 ? -INFINITY : -3;
    }
    if (bias == 1) c.bias = ag_store_constant(s, "bias", AG_SHAPE(1, 6, T, S), m);
    if (bias >= 2) {
        c.bias = bias == 2 ? ag_param(s, "bias", AG_SHAPE(1, 6, T, S)) : ag_param(s, "bias", AG_SHAPE(T, S));
        memcpy(c.bias->data, m, c.bias->size * sizeof *m);
    }
    free(m);
    ag_gradcheck_result r[4];
    ag_graph *g = ag_graph_new();
    int n = bias >= 2 ? 4 : 3;
    ag_status st = ag_gradcheck(g, build_fd, &c, (ag_tensor *[]){c.q, c.k, c.v, c.bias}, n, NULL, r);
    for (int i = 0; i < n; i++)
        cr_expect_eq(r[i].failed, 0, "T %d S %d: %s: %zu fail (abs %.3g)", T, S, r[i].input->name, r[i].failed,
                     r[i].max_abs_err);
    cr_assert_eq(st, AG_OK, "%s", ag_graph_error(g));
    ag_graph_free(g);
    ag_store_free(s);
}
#endif

#endif
