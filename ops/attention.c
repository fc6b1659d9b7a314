/* ops/attention.c: scaled dot-product attention over every head of a batch
 * in one node, what multi-head attention's heads do (src/nn/attention.c)
 * when nobody asks for the attention weights and no dropout applies.
 *
 *   q [B, T, H, D], k [B, S, H, D], v [B, S, H, Dv], mask (broadcast to
 *   [B, H, T, S]) or NULL -> y [B, T, H, Dv]
 *
 * Head h of sentence b, Q [T, D], K [S, D], V [S, Dv] and O [T, Dv], is read
 * and written in place, rows H D apart (the heads layout, core/heads.h):
 *
 * forward:  A  = Q K^T                                      [T, S]
 *           P  = softmax(mask ? scale A : fill), row-wise   [T, S]
 *           O  = P V                                        [T, Dv]
 * backward: dP = dO V^T,   dV += P^T dO
 *           dA = mask ? scale P (dP - rowsum(dP P)) : 0     (masked_softmax's)
 *           dQ += dA K,    dK += dA^T Q
 *
 * It equals the three nodes it replaces, matmul_heads(q, k^T),
 * masked_softmax and matmul_heads(., v) (tests/test_fusion.c).  Only P is
 * saved for the backward.  The fast code is kernels/attention.c; for rows
 * of more than AG__FLASH_KEYS keys it keeps no P, only each row's
 * log-sum-exp, and recomputes P in its backward
 * (kernels/attention_flash.c, docs/attention_long.md).
 *
 * src = {q, k, v}; aux = the heads' description (ag__attn) and P (or the
 * rows' maxima and sums);
 * farg[0] = scale, farg[1] = fill; iarg[0] = 1 when masked. */
#include "core/heads.h"
#include "core/internal.h"
#include "kernels/kernels.h"

#include <math.h>

typedef struct saved { ag__attn a; ag_real *p; } saved; /* the heads (mask: data, as ids are), P [B, H, T, S]
                                                          * (a.flash: each row's max and sum [B, H, T, 2]) */

/* Element (t, c) of head h of sentence b of x stored [B, rows, H, cols]. */
static size_t at(const ag__attn *a, int b, int h, int t, int rows, int cols, int c)
{
    return ag__head_row(rows, a->H, cols, b, h, t) + (size_t)c;
}

/* Whether row r of the scores [B, H, T, S] keeps key s. */
static bool kept(const ag__attn *a, const ag__mask_map *mm, size_t r, int s)
{
    return !a->mask || a->mask->data[ag__mask_row(mm, r) + (size_t)s * mm->along] != 0;
}

/* The reference forward, a query row of a head at a time. */
static void forward_ref(const ag__attn *a, const ag__mask_map *mm, const ag_real *q, const ag_real *k,
                        const ag_real *v, ag_real *p, ag_real *y)
{
    const int T = a->T, S = a->S, D = a->D, Dv = a->Dv;
    for (size_t r = 0; r < (size_t)a->B * (size_t)a->H * (size_t)T; r++) { /* row t of head h of sentence b */
        int t = (int)(r % (size_t)T), h = (int)(r / (size_t)T % (size_t)a->H), b = (int)(r / (size_t)T / (size_t)a->H);
        ag_real *pr = p + r * (size_t)S;
        for (int s = 0; s < S; s++) { /* A = Q K^T, masked and scaled */
            ag_real dot = 0;
            for (int d = 0; d < D; d++) dot += q[at(a, b, h, t, T, D, d)] * k[at(a, b, h, s, S, D, d)];
            pr[s] = kept(a, mm, r, s) ? (ag_real)a->scale * dot : (ag_real)a->fill;
        }
        ag__softmax_row_ref((size_t)S, pr, pr);
        for (int e = 0; e < Dv; e++) { /* O = P V */
            ag_real o = 0;
            for (int s = 0; s < S; s++) o += pr[s] * v[at(a, b, h, s, S, Dv, e)];
            y[at(a, b, h, t, T, Dv, e)] = o;
        }
    }
}

/* The reference backward, adding into dq, dk, dv (NULL: not wanted); dp
 * holds S values. */
static void backward_ref(const ag__attn *a, const ag__mask_map *mm, ag_tensor *const *x, const ag_real *p,
                         const ag_real *dy, ag_real *const *dx, ag_real *dp)
{
    const int T = a->T, S = a->S, D = a->D, Dv = a->Dv;
    const ag_real *q = x[0]->data, *k = x[1]->data, *v = x[2]->data;
    ag_real *dq = dx[0], *dk = dx[1], *dv = dx[2];
    for (size_t r = 0; r < (size_t)a->B * (size_t)a->H * (size_t)T; r++) { /* row t of head h of sentence b */
        int t = (int)(r % (size_t)T), h = (int)(r / (size_t)T % (size_t)a->H), b = (int)(r / (size_t)T / (size_t)a->H);
        const ag_real *pr = p + r * (size_t)S;
        ag_real dot = 0; /* rowsum(dP P) */
        for (int s = 0; s < S; s++) {
            dp[s] = 0;
            for (int e = 0; e < Dv; e++) {
                dp[s] += dy[at(a, b, h, t, T, Dv, e)] * v[at(a, b, h, s, S, Dv, e)];
                if (dv) dv[at(a, b, h, s, S, Dv, e)] += pr[s] * dy[at(a, b, h, t, T, Dv, e)];
            }
            dot += dp[s] * pr[s];
        }
        for (int s = 0; s < S; s++) {
            ag_real da = kept(a, mm, r, s) ? (ag_real)a->scale * pr[s] * (dp[s] - dot) : 0;
            for (int d = 0; d < D; d++) {
                if (dq) dq[at(a, b, h, t, T, D, d)] += da * k[at(a, b, h, s, S, D, d)];
                if (dk) dk[at(a, b, h, s, S, D, d)] += da * q[at(a, b, h, t, T, D, d)];
            }
        }
    }
}

ag_tensor *ag__attention_heads(ag_graph *g, ag_tensor *q, ag_tensor *k, ag_tensor *v, double scale, ag_tensor *mask,
                               double fill)
{
    if (!ag__ok(g, "attention", 3, q, k, v) || !ag__attention_fits(g, q, k, v, mask)) return NULL; /* core/fits.c */
    ag__attn a = {.B = q->shape[0], .T = q->shape[1], .S = k->shape[1], .H = q->shape[2], .D = q->shape[3],
                  .Dv = v->shape[3], .mask = mask, .scale = scale, .fill = fill};
    ag_tensor *y = ag__node(g, AG_OP_ATTENTION, 4, (int[]){a.B, a.T, a.H, a.Dv}, 3, (ag_tensor *[]){q, k, v});
    if (!y) return NULL;
    ag__impl(y)->farg[0] = scale, ag__impl(y)->farg[1] = fill, ag__impl(y)->iarg[0] = mask != NULL;
    a.flash = ag__fast() && ag__k_attention_flash(&a); /* long rows: a value per row, not P */
    size_t np = (size_t)a.B * (size_t)a.H * (size_t)a.T * (size_t)(a.flash ? 2 : a.S);
    size_t head = (sizeof(saved) + 63) / 64 * 64;
    saved *sv = ag__save(g, head + np * sizeof(ag_real)); /* P at the arena's 64-byte alignment */
    if (!sv) return NULL;
    *sv = (saved){a, (ag_real *)((char *)sv + head)};
    ag__impl(y)->aux = sv; /* with no key, P V is an empty sum: the reference's zeros */
    if (np && ag__fast() && ag__k_attention_forward(g, &sv->a, q->data, k->data, v->data, sv->p, y->data))
        return ag_graph_status(g) == AG_OK ? y : NULL;
    ag__mask_map mm = {0};
    if (mask) ag__mask_map_init(&mm, 4, (int[]){a.B, a.H, a.T, a.S}, mask);
    forward_ref(&sv->a, &mm, q->data, k->data, v->data, sv->p, y->data);
    return y;
}

static void attention_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x[3] = {y->src[0], y->src[1], y->src[2]};
    const saved *sv = ag__impl(y)->aux;
    const ag__attn *a = &sv->a;
    bool empty = y->size == 0 || a->T == 0 || a->S == 0; /* the reference's loops give 0 */
    bool kernel = a->flash || (!empty && ag__fast()); /* no P (a.flash): the kernel recomputes it */
    if (kernel && ag__k_attention_backward(g, a, x[0], x[1], x[2], sv->p, y->data, y->grad)) return;
    ag_real *dx[3], *dp = ag__alloc(g, ((size_t)a->S + 1) * sizeof(ag_real));
    for (int i = 0; i < 3; i++) dx[i] = x[i]->requires_grad ? ag__grad(g, x[i]) : NULL;
    if (ag_graph_status(g) != AG_OK) return;
    ag__mask_map mm = {0};
    if (a->mask) ag__mask_map_init(&mm, 4, (int[]){a->B, a->H, a->T, a->S}, a->mask);
    backward_ref(a, &mm, x, sv->p, y->grad, dx, dp);
}

/* Fixed masks, made inside the builds: they are data, not checked inputs.
 * padding [B, 1, 1, S] = [2, 1, 1, 4]: sentence 1 masks every key. */
static ag_tensor *causal(ag_graph *g) { return ag_tensor_from(g, AG_SHAPE(3, 3), (ag_real[]){1, 0, 0, 1, 1, 0, 1, 1, 1}); }
static ag_tensor *padding(ag_graph *g) { return ag_tensor_from(g, AG_SHAPE(2, 1, 1, 4), (ag_real[]){1, 1, 0, 1, 0, 0, 0, 0}); }
#define HEADS(scale, mask, fill) ag__attention_heads(g, in[0], in[1], in[2], scale, mask, fill)
static ag_tensor *case_plain(ag_graph *g, ag_tensor *const *in) { return HEADS(0.5, NULL, 0); }
static ag_tensor *case_causal(ag_graph *g, ag_tensor *const *in) { return HEADS(0.7, causal(g), -INFINITY); }
static ag_tensor *case_padding(ag_graph *g, ag_tensor *const *in) { return HEADS(1.3, padding(g), -INFINITY); }
static ag_tensor *case_uniform(ag_graph *g, ag_tensor *const *in) { return HEADS(1.3, padding(g), -1e9); }

/* q, k, v [B, T or S, H, D or Dv] */
static const ag_op_case cases[] = {
    {"no mask", 3, {4, 4, 4}, {{2, 3, 2, 4}, {2, 5, 2, 4}, {2, 5, 2, 3}}, -1, 1, 0, case_plain},
    {"causal [3, 3], fill -inf", 3, {4, 4, 4}, {{2, 3, 2, 4}, {2, 3, 2, 4}, {2, 3, 2, 4}}, -1, 1, 0, case_causal},
    {"padding, a sentence all -inf", 3, {4, 4, 4}, {{2, 3, 2, 2}, {2, 4, 2, 2}, {2, 4, 2, 3}}, -1, 1, 0, case_padding},
    {"padding, fill -1e9: a uniform row", 3, {4, 4, 4}, {{2, 2, 1, 3}, {2, 4, 1, 3}, {2, 4, 1, 2}}, -1, 1, 0, case_uniform},
    {"size-1 axes", 3, {4, 4, 4}, {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}}, -1, 1, 0, case_plain},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"q, k, v in [-6, 6]: scores up to 72, rows near one-hot", 3, {4, 4, 4}, {{2, 3, 2, 4}, {2, 5, 2, 4}, {2, 5, 2, 3}},
     -6, 6, 0, case_plain},
};

const ag_op_desc ag_op_attention = {.name = "attention", .backward = attention_backward, AG_CASES(cases),
    AG_EDGES(edges)};
