/* nn_internal.h: what the layers (src/nn/) share, never users: packed
 * rows, and the multi-head attention and blocks that run on them. */
#ifndef AG_NN_INTERNAL_H
#define AG_NN_INTERNAL_H

#include "attograd_nn.h"
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
ag_tensor *ag__mha_rows(ag_graph *g, const ag_mha *m, ag_tensor *x_q, const ag__rows *rq, ag_tensor *x_kv,
                        const ag__rows *rkv, ag_tensor *mask, double fill, ag_tensor **weights, ag_tensor *res);
ag_tensor *ag__encoder_block_rows(ag_graph *g, const ag_encoder_block *b, ag_tensor *x, const ag__rows *rows,
                                  ag_tensor *src_mask, ag_tensor **weights);
ag_tensor *ag__decoder_block_rows(ag_graph *g, const ag_decoder_block *b, ag_tensor *x, const ag__rows *rows,
                                  ag_tensor *enc, const ag__rows *enc_rows, ag_tensor *self_mask,
                                  ag_tensor *src_mask, ag_tensor **self_w, ag_tensor **cross_w);
/* QK-norm: x [..., C], a projected q or k, with each head's D values
 * through n (m->q_norm or m->k_norm); x as it is when m has no QK-norm. */
ag_tensor *ag__qk_norm(ag_graph *g, const ag_mha *m, const ag_layernorm *n, ag_tensor *x);
/* Attention of x [B, T, C] (positions pos ..; queries of rows q0 ..) over
 * a key/value cache of [B, S, C], which it extends; attention over keys and
 * values projected once (src/nn/attention.c). */
ag_tensor *ag__mha_cached(ag_graph *g, const ag_mha *m, ag_tensor *x, int q0, ag_real *keys, ag_real *values,
                          int pos, int S);
ag_tensor *ag__mha_projected(ag_graph *g, const ag_mha *m, ag_tensor *x, ag_tensor *k, ag_tensor *v,
                             ag_tensor *mask, double fill);

#endif /* AG_NN_INTERNAL_H */
