/* attograd_compat.h: the names before 0.2, kept until 1.0 so that code
 * written against them compiles unchanged (CHANGELOG.md, "Deprecated").
 * attograd.h includes it unless AG_NO_DEPRECATED is defined. */
#ifndef ATTOGRAD_COMPAT_H
#define ATTOGRAD_COMPAT_H

#include "attograd_core.h"
#include "attograd_io.h"
#include "attograd_nn.h"
#include "attograd_optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ag_st_* are ag_safetensors_* (attograd_io.h). */
typedef ag_safetensors ag_st;
typedef ag_safetensors_writer ag_st_writer;
#define ag_st_load ag_safetensors_load
#define ag_st_parse ag_safetensors_parse
#define ag_st_free ag_safetensors_free
#define ag_st_count ag_safetensors_count
#define ag_st_name ag_safetensors_name
#define ag_st_find ag_safetensors_find
#define ag_st_dtype ag_safetensors_dtype
#define ag_st_ndim ag_safetensors_ndim
#define ag_st_shape ag_safetensors_shape
#define ag_st_numel ag_safetensors_numel
#define ag_st_bytes ag_safetensors_bytes
#define ag_st_meta ag_safetensors_meta
#define ag_st_meta_count ag_safetensors_meta_count
#define ag_st_meta_key ag_safetensors_meta_key
#define ag_st_read ag_safetensors_read
#define ag_st_read_tensor ag_safetensors_read_tensor
#define ag_st_read_int ag_safetensors_read_int
#define ag_st_writer_new ag_safetensors_writer_new
#define ag_st_writer_free ag_safetensors_writer_free
#define ag_st_add ag_safetensors_add
#define ag_st_add_int ag_safetensors_add_int
#define ag_st_add_meta ag_safetensors_add_meta
#define ag_st_save ag_safetensors_save

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

/* ag_norm is the layer norm layer (attograd_nn.h). */
typedef ag_layer_norm_layer ag_norm;
ag_status ag_norm_init(ag_norm *n, ag_store *s, const char *prefix, int C);
ag_tensor *ag_norm_forward(ag_graph *g, const ag_norm *n, ag_tensor *x);

/* The calling thread's last optimizer, clip or schedule failure, or "".  Use
 * ag_store_error, ag_optim_error or ag_lr_schedule_check. */
const char *ag_optim_last_error(void);

/* Breaks op `op`'s backward by `factor` in ag_gradcheck and ag_op_check
 * (op <= 0: off).  Use break_op and break_factor in ag_gradcheck_opts. */
void ag_debug_break_backward(int op, double factor)
#if defined(__GNUC__)
    __attribute__((deprecated("set break_op in ag_gradcheck_opts")))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif /* ATTOGRAD_COMPAT_H */
