/* linear_layer.c: the dense layer and layer norm as parameter holders over ops,
 * and the initializers they use.  Every init failure leaves a message in
 * ag_store_error naming the layer and the bad value. */
#include "nn/nn_internal.h"
#include "attograd_compat.h" /* defines the deprecated ag_norm_* */

#include <math.h>
#include <stdio.h>

uint64_t ag_param_seed(uint64_t seed, const char *name)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; p && *p; p++) h = (h ^ *p) * 1099511628211ull;
    return h ^ (seed * 0x9e3779b97f4a7c15ull);
}

void ag_init_xavier_uniform(ag_tensor *w, uint64_t seed)
{
    if (!w || w->ndim < 2) return;
    double fan_out = w->shape[0], fan_in = (double)(w->size / (size_t)w->shape[0]);
    double a = sqrt(6.0 / (fan_in + fan_out));
    ag_init_uniform(w, -a, a, seed);
}

static ag_status make(ag_store *s, ag_tensor **t, const char *prefix, const char *leaf, int ndim,
                      const int *shape)
{
    char name[64];
    int n = snprintf(name, sizeof name, "%s.%s", prefix, leaf);
    if (n < 0 || (size_t)n >= sizeof name)
        return ag__store_fail(s, AG_ERR_ARG, "param '%s.%s': the name is longer than %zu bytes", prefix, leaf,
                              sizeof name - 1);
    *t = ag_param(s, name, ndim, shape); /* its failure says why in the store */
    return *t ? AG_OK : AG_ERR_ARG;
}

ag_status ag_linear_layer_init_ex(ag_linear_layer *l, ag_store *s, const char *prefix, int in, int out, int bias,
                            const ag_init_opts *init, uint64_t seed)
{
    if (!l || !prefix) return ag__store_fail(s, AG_ERR_ARG, "linear_init: %s is NULL", l ? "prefix" : "layer");
    memset(l, 0, sizeof *l);
    if (!s || !prefix || in <= 0 || out <= 0)
        return ag__store_fail(s, AG_ERR_ARG, "linear '%s': %s (in %d, out %d: both must be >= 1)",
                              prefix ? prefix : "(null)", prefix ? "bad size" : "prefix is NULL", in, out);
    char who[80];
    snprintf(who, sizeof who, "linear '%s'", prefix);
    ag_status st = ag__init_check(s, who, init);
    if (st != AG_OK) return st;
    l->in = in;
    l->out = out;
    st = make(s, &l->weight, prefix, "weight", AG_SHAPE(out, in));
    if (st == AG_OK && bias) st = make(s, &l->bias, prefix, "bias", AG_SHAPE(out));
    if (st != AG_OK) return st;
    ag__init_linear(l, init, AG_INIT_TORCH, false, seed); /* by default nn.Linear's */
    return AG_OK;
}

ag_status ag_linear_layer_init(ag_linear_layer *l, ag_store *s, const char *prefix, int in, int out, int bias,
                         uint64_t seed)
{
    return ag_linear_layer_init_ex(l, s, prefix, in, out, bias, NULL, seed);
}

ag_tensor *ag__layer_done(ag_graph *g, bool ok, const ag_tensor *param, int strip, ag_tensor *y)
{
    if (!ok || ag_graph_status(g) == AG_OK || !param) return y;
    char path[sizeof param->name];
    snprintf(path, sizeof path, "%s", param->name);
    for (int i = 0; i < strip; i++) {
        char *dot = strrchr(path, '.');
        if (!dot) return y;
        *dot = 0;
    }
    const char *err = ag_graph_error(g);
    size_t n = strlen(path);
    if (strncmp(err, path, n) == 0 && err[n] == '.') return y; /* a layer inside said */
    ag__graph_prefix(g, "%s: ", path);
    return y;
}

/* y = x W^T + b:  x [..., in] -> [..., out], one op (ops/linear.c) */
ag_tensor *ag_linear_layer_forward(ag_graph *g, const ag_linear_layer *l, ag_tensor *x)
{
    if (!ag__given(g, "linear_forward", "layer", l)) return NULL;
    bool ok = ag_graph_status(g) == AG_OK;
    if (!ag__ok(g, "linear", 1, x)) return ag__layer_done(g, ok, l->weight, 1, NULL);
    if (x->ndim < 1 || x->shape[x->ndim - 1] != l->in) {
        char a[96], b[96];
        ag_graph_fail(g, AG_ERR_SHAPE, "linear: input %s does not end in %d features (weight %s)",
                      ag_shape_str(x, a, sizeof a), l->in, ag_shape_str(l->weight, b, sizeof b));
        return ag__layer_done(g, ok, l->weight, 1, NULL);
    }
    return ag__layer_done(g, ok, l->weight, 1, ag__linear(g, x, l->weight, l->bias));
}

/* y = x W^T + b + res, one op (ops/linear_add.c): the bits of
 * ag_add(g, res, ag_linear_layer_forward(g, l, x)) without the add's own
 * node (a residual connection's last projection: x + W_o a). */
ag_tensor *ag_linear_layer_forward_add(ag_graph *g, const ag_linear_layer *l, ag_tensor *x, ag_tensor *res)
{
    if (!ag__given(g, "linear_forward_add", "layer", l)) return NULL;
    bool ok = ag_graph_status(g) == AG_OK;
    if (!ag__ok(g, "linear_add", 2, x, res)) return ag__layer_done(g, ok, l->weight, 1, NULL);
    return ag__layer_done(g, ok, l->weight, 1, ag__linear_add(g, x, l->weight, l->bias, res));
}

ag_status ag_layer_norm_layer_init(ag_layer_norm_layer *n, ag_store *s, const char *prefix, int C)
{
    if (!n || !prefix) return ag__store_fail(s, AG_ERR_ARG, "layernorm_init: %s is NULL", n ? "prefix" : "layer");
    memset(n, 0, sizeof *n);
    if (!s || !prefix || C <= 0)
        return ag__store_fail(s, AG_ERR_ARG, "layernorm '%s': %s (C %d must be >= 1)", prefix ? prefix : "(null)",
                              prefix ? "bad size" : "prefix is NULL", C);
    n->eps = 1e-5;
    ag_status st = make(s, &n->weight, prefix, "weight", AG_SHAPE(C));
    if (st == AG_OK) st = make(s, &n->bias, prefix, "bias", AG_SHAPE(C));
    if (st != AG_OK) return st;
    ag_init_const(n->weight, 1);
    return AG_OK;
}

ag_tensor *ag_layer_norm_layer_forward(ag_graph *g, const ag_layer_norm_layer *n, ag_tensor *x)
{
    if (!ag__given(g, "layernorm_forward", "layer", n)) return NULL;
    bool ok = ag_graph_status(g) == AG_OK;
    return ag__layer_done(g, ok, n->weight, 1, ag_layer_norm(g, x, n->weight, n->bias, n->eps));
}

/* the deprecated names */
ag_status ag_norm_init(ag_norm *n, ag_store *s, const char *prefix, int C)
{
    return ag_layer_norm_layer_init(n, s, prefix, C);
}

ag_tensor *ag_norm_forward(ag_graph *g, const ag_norm *n, ag_tensor *x) { return ag_layer_norm_layer_forward(g, n, x); }
