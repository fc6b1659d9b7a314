/* nn_internal.h: what the layers (src/nn/) share, never users: packed
 * rows, and the multi-head attention and blocks that run on them. */
#ifndef AG_NN_INTERNAL_H
#define AG_NN_INTERNAL_H

#include "attograd_nn.h"
#include "attograd_optim.h"
#include "core/internal.h"

/* ---- packed rows: position-wise layers on real tokens only (src/nn/attention.c) --
 *
 * A padded batch [B, T] holds sentence b's tokens at positions 0..len[b]-1
 * and padding after them.  Every position-wise layer (linear, layer norm,
 * dropout, relu, the residual adds) treats each position on its own, so it
 * can run on the n real rows alone, packed [n, C] sentence after sentence:
 * the padding's rows never reach the loss (attention masks them as keys,
 * the loss skips them as targets).  Only attention mixes positions; it
 * unpacks its q, k and v to [B, T, C] (zeros at the padding) and packs its
 * output again. */
typedef struct ag__rows {
    int B, T, n;
    int *at; /* [n]: packed row i is position at[i] = b * T + t */
} ag__rows;
/* Rows of a batch whose sentence b has min(max(len[b], 0), T) real
 * positions; arena memory of g (NULL, with g in error, when out of it). */
ag__rows *ag__rows_new(ag_graph *g, const int *len, int B, int T);
/* [B, T, C] -> [n, C] (embedding) and [n, C] -> [B, T, C] (index_add). */
ag_tensor *ag__pack(ag_graph *g, ag_tensor *x, const ag__rows *r);
ag_tensor *ag__unpack(ag_graph *g, ag_tensor *x, const ag__rows *r);
/* Multi-head attention and the blocks with packed inputs: x_q [rq->n, C]
 * when rq is given, else [B, T, C]; the same for x_kv and rkv, x and rows,
 * enc and enc_rows.  The public forwards are these with NULL rows.  With
 * res (x_q's shape; NULL: none), ag__mha_rows returns res + mha(...), res
 * added by the output projection (linear_add), as a pre-norm block's
 * residual. */
ag_tensor *ag__mha_rows(ag_graph *g, const ag_mha_layer *m, ag_tensor *x_q, const ag__rows *rq, ag_tensor *x_kv,
                        const ag__rows *rkv, ag_tensor *mask, double fill, ag_tensor **weights, ag_tensor *res);
ag_tensor *ag__encoder_block_rows(ag_graph *g, const ag_encoder_block *b, ag_tensor *x, const ag__rows *rows,
                                  ag_tensor *src_mask, ag_tensor **weights);
ag_tensor *ag__decoder_block_rows(ag_graph *g, const ag_decoder_block *b, ag_tensor *x, const ag__rows *rows,
                                  ag_tensor *enc, const ag__rows *enc_rows, ag_tensor *self_mask,
                                  ag_tensor *src_mask, ag_tensor **self_w, ag_tensor **cross_w);
/* QK-norm: x [..., C], a projected q or k, with each head's D values
 * through n (m->q_norm or m->k_norm); x as it is when m has no QK-norm. */
ag_tensor *ag__qk_norm(ag_graph *g, const ag_mha_layer *m, const ag_layer_norm_layer *n, ag_tensor *x);
/* Attention of x [B, T, C] (positions pos ..; queries of rows q0 ..) over
 * a key/value cache of [B, S, C], which it extends; attention over keys and
 * values projected once (src/nn/attention.c). */
ag_tensor *ag__mha_cached(ag_graph *g, const ag_mha_layer *m, ag_tensor *x, int q0, ag_real *keys, ag_real *values,
                          int pos, int S);
ag_tensor *ag__mha_projected(ag_graph *g, const ag_mha_layer *m, ag_tensor *x, ag_tensor *k, ag_tensor *v,
                             ag_tensor *mask, double fill);

/* ---- errors that name the layer (src/nn/linear_layer.c) ------------------ */

/* After a layer's forward: when g went from no error (ok, read before the
 * layer ran) to an error inside it, put the layer's parameter path, param's
 * name less its last `strip` parts, in front of the message
 * ("blocks.0.norm1: layer_norm: ..."), unless a layer inside it already put
 * its own path, which starts with "<this path>.".  Returns y. */
ag_tensor *ag__layer_done(ag_graph *g, bool ok, const ag_tensor *param, int strip, ag_tensor *y);

/* ---- initial values (src/nn/init.c; docs/init.md has the table) ---------- */

/* AG_OK when o (NULL: all zeros) is a valid init; else records why, as
 * "who: init ...", in ag_store_error(s). */
ag_status ag__init_check(ag_store *s, const char *who, const ag_init_opts *o);
/* Draw l's weight and bias as o says (checked), dflt standing for
 * AG_INIT_DEFAULT; residual: l writes into a residual stream (w_o, dense2),
 * which GPT-2's scheme draws narrower.  Seeded by (seed, parameter name). */
void ag__init_linear(ag_linear_layer *l, const ag_init_opts *o, ag_init_scheme dflt, bool residual, uint64_t seed);
/* Draw an embedding table t as o says. */
void ag__init_table(ag_tensor *t, const ag_init_opts *o, uint64_t seed);

/* ---- optimizers and clipping (src/nn/optim.c, src/nn/clip.c) ------------ */

/* Format the reason into the thread's copy (ag_optim_last_error), then onto
 * o and/or s (either may be NULL); returns st. */
ag_status ag__optim_fail(ag_optim *o, ag_store *s, ag_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* fn over all of s's values, in equal contiguous pieces among the threads
 * when the pass touches enough memory (`arrays` arrays of s's size). */
void ag__for_values(ag_store *s, size_t arrays, ag_piece_fn fn, void *ctx);
/* sqrt(sum of every grad^2) over s, the same bits for any thread count;
 * *bad: the first parameter whose sum is not finite, or -1. */
double ag__grad_norm(ag_store *s, int *bad);
/* grad_j = grad_j * coef over n values, in double, as clipping scales. */
void ag__scale_grad(size_t n, ag_real *grad, double coef);
/* clip_grad_norm_'s factor: max_norm / (norm + 1e-6) above max_norm > 0, else 1. */
double ag__clip_coef(double max_norm, double norm);
/* Why a norm is not finite, naming the parameter (a thread's buffer). */
const char *ag__norm_error(ag_store *s, double norm, int bad);

#endif /* AG_NN_INTERNAL_H */
