/* attograd_compat.h: the deprecated names, kept so that code written
 * against them compiles unchanged (each has a line in CHANGELOG.md,
 * "Deprecated"; they go at 1.0).  Included by attograd.h; define
 * AG_NO_DEPRECATED to hide them.  Nothing in the library uses them. */
#ifndef ATTOGRAD_COMPAT_H
#define ATTOGRAD_COMPAT_H

#include "attograd_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef AG_NO_DEPRECATED

/* ---- layers: the names before the rule "a type that holds parameters ends
 * in _layer, _block or is a model" (docs/design.md, "Names") ------------- */

typedef ag_linear_layer ag_linear;
static inline ag_status ag_linear_init(ag_linear_layer *l, ag_store *s, const char *prefix, int in, int out,
                                       int bias, uint64_t seed)
{
    return ag_linear_layer_init(l, s, prefix, in, out, bias, seed);
}
static inline ag_tensor *ag_linear_forward(ag_graph *g, const ag_linear_layer *l, ag_tensor *x)
{
    return ag_linear_layer_forward(g, l, x);
}

typedef ag_layer_norm_layer ag_layernorm;
static inline ag_status ag_layernorm_init(ag_layer_norm_layer *n, ag_store *s, const char *prefix, int C)
{
    return ag_layer_norm_layer_init(n, s, prefix, C);
}
static inline ag_tensor *ag_layernorm_forward(ag_graph *g, const ag_layer_norm_layer *n, ag_tensor *x)
{
    return ag_layer_norm_layer_forward(g, n, x);
}

typedef ag_mha_layer ag_mha;
static inline ag_status ag_mha_init(ag_mha_layer *m, ag_store *s, const char *prefix, int C, int H, int bias,
                                    double dropout, uint64_t seed)
{
    return ag_mha_layer_init(m, s, prefix, C, H, bias, dropout, seed);
}
static inline ag_tensor *ag_mha_forward(ag_graph *g, const ag_mha_layer *m, ag_tensor *x_q, ag_tensor *x_kv,
                                        ag_tensor *mask, double fill, ag_tensor **weights)
{
    return ag_mha_layer_forward(g, m, x_q, x_kv, mask, fill, weights);
}
static inline ag_tensor *ag_mha_forward_textbook(ag_graph *g, const ag_mha_layer *m, ag_tensor *x_q,
                                                 ag_tensor *x_kv, ag_tensor *mask, double fill,
                                                 ag_tensor **weights)
{
    return ag_mha_layer_forward_textbook(g, m, x_q, x_kv, mask, fill, weights);
}

typedef ag_ffn_layer ag_ffn;
static inline ag_status ag_ffn_init(ag_ffn_layer *f, ag_store *s, const char *prefix, int C, int F, uint64_t seed)
{
    return ag_ffn_layer_init(f, s, prefix, C, F, seed);
}
static inline ag_status ag_ffn_init_ex(ag_ffn_layer *f, ag_store *s, const char *prefix, int C, int F,
                                       ag_activation act, uint64_t seed)
{
    return ag_ffn_layer_init_ex(f, s, prefix, C, F, act, seed);
}
static inline ag_tensor *ag_ffn_forward(ag_graph *g, const ag_ffn_layer *f, ag_tensor *x)
{
    return ag_ffn_layer_forward(g, f, x);
}

#endif /* AG_NO_DEPRECATED */

#ifdef __cplusplus
}
#endif
#endif /* ATTOGRAD_COMPAT_H */
