/* exercises.h: eleven exercises, each a function to write in its own file
 * (01_causal_mask.c ... 11_window_weights.c).  Each file holds a stub that
 * does nothing useful; `make exercise N=3` builds the checker against the
 * files as they are and reports every output of exercise 3, right or
 * wrong, with a hint for each wrong one, or says that it passes.  Worked
 * answers: docs/answers.md.  The exercises build in double
 * (libattograd64.a), so that gradients can be checked by finite
 * differences. */
#ifndef EXERCISES_H
#define EXERCISES_H

#include "attograd.h"

/* 01. The causal mask for T queries that are the last T of S positions
 *     (S >= T: a decoder with S - T positions in its key/value cache):
 *     [T, S], 1 where query t may attend to key s (s <= t + S - T), else 0. */
ag_tensor *ex_causal_mask(ag_graph *g, int T, int S);

/* 02. Layer norm's backward over rows of C: given x [N, C], gain [C], eps
 *     and dy [N, C] for y = (x - mean) / sqrt(var + eps) * gain + bias
 *     (biased variance), write dx [N, C], dgain [C] and dbias [C]. */
void ex_layer_norm_backward(int N, int C, const double *x, const double *gain, double eps, const double *dy,
                            double *dx, double *dgain, double *dbias);

/* 03. Attention's backward as one op: for out = softmax(q k^T / sqrt(D)) v,
 *     q [T, D], k [S, D], v [S, D], and dout [T, D], write dq [T, D],
 *     dk [S, D] and dv [S, D]. */
void ex_attention_backward(int T, int S, int D, const double *q, const double *k, const double *v,
                           const double *dout, double *dq, double *dk, double *dv);

/* 04. Rotary positions (RoPE) from ops: x [..., T, D], D even; each pair
 *     (x[t, 2i], x[t, 2i + 1]) rotated by the angle t * base^(-2i / D):
 *     y[2i] = x[2i] cos - x[2i+1] sin,  y[2i+1] = x[2i] sin + x[2i+1] cos. */
ag_tensor *ex_rope(ag_graph *g, ag_tensor *x, double base);

/* 05. ALiBi's bias [H, T, T] for causal attention: bias[h, i, j] =
 *     -m_h (i - j) for j <= i, 0 for j > i (the causal mask hides those),
 *     slopes m_h = 2^(-8 (h + 1) / H). */
ag_tensor *ex_alibi_bias(ag_graph *g, int H, int T);

/* 06. Cross-entropy with label smoothing, from ops: logits [N, V], one
 *     target per row; the mean over rows of
 *     -(1 - eps) log p[target] - eps * mean_v log p[v],  p = softmax(logits). */
ag_tensor *ex_label_smoothing_loss(ag_graph *g, ag_tensor *logits, const int *targets, double eps);

/* 07. One step of decoding with a key/value cache, one head of width D:
 *     append k_t and v_t [D] as row len of k_cache and v_cache, then write
 *     out [D] = softmax(q_t k_cache[0..len]^T / sqrt(D)) v_cache[0..len]. */
void ex_cached_attention(int D, const double *q_t, const double *k_t, const double *v_t, double *k_cache,
                         double *v_cache, int len, double *out);

/* 08. Weight tying: the same table E [V, C] embeds the ids [B, T] and
 *     makes the logits: logits [B, T, V] = E[ids] E^T. */
ag_tensor *ex_tied_logits(ag_graph *g, ag_tensor *E, const int *ids, int B, int T);

/* 09. Gradient clipping by the global norm: norm = sqrt(sum of grad^2 over
 *     every parameter of s); when norm > max_norm scale every grad by
 *     max_norm / (norm + 1e-6).  Returns norm. */
double ex_clip_grad_norm(ag_store *s, double max_norm);

/* 10. A learning-rate warmup, then cosine decay: base_lr * step / warmup
 *     for step <= warmup, then base_lr * (1 + cos(pi * p)) / 2 with
 *     p = (step - warmup) / (total - warmup); steps count from 1. */
double ex_warmup_cosine(double base_lr, long step, long warmup, long total);

/* 11. Attention weights predicted by hand: the tour's four tokens
 *     (examples/README.md, steps 1 to 5: Q = K = V = X, scores
 *     Q K^T / sqrt(3)) under a window mask, each token seeing itself and
 *     the token before it (mask[t][s] = 1 for t - 1 <= s <= t).  Returns
 *     P [4, 4], row by row, to 4 decimals. */
const double *ex_window_weights(void);

#endif
