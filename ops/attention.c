/* ops/attention.c: scaled dot-product attention over every head of a batch
 * in one node: ag_scaled_dot_product_attention, and what multi-head
 * attention's heads do (src/nn/attention.c) when nobody asks for the
 * attention weights.
 *
 *   q [B, H, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv] (PyTorch's layout),
 *   or q [B, T, H, D], k [B, S, Hkv, D], v [B, S, Hkv, Dv] (the heads
 *   layout: a linear layer's [B, T, C] reshaped, core/heads.h); H a
 *   multiple of Hkv, query head h reading key/value head h / (H / Hkv)
 *   (grouped-query attention); mask, 0/1, and bias M, additive (each
 *   broadcast to [B, H, T, S], or NULL); causal: query t sees keys
 *   s <= t + diag only -> y like q with Dv
 *
 * Each head, Q [T, D], K [S, D], V [S, Dv] and O [T, Dv], is read and
 * written in place:
 *
 * forward:  A  = Q K^T                                      [T, S]
 *           keep = mask != 0 and (not causal or s <= t + diag)
 *           P  = softmax(keep ? scale A + M : fill), row-wise   [T, S]
 *           O  = (P Z) V                                        [T, Dv]
 * backward: dP = (dO V^T) Z,   dV += (P Z)^T dO
 *           dA = keep ? scale P (dP - rowsum(dP P)) : 0     (masked_softmax's)
 *           dQ += dA K,    dK += dA^T Q
 *           dM += keep ? P (dP - rowsum(dP P)) : 0          (= dA / scale)
 *
 * M (no bias: 0) is src[3] when it needs a gradient, which sums over the
 * axes it is broadcast along, on every path (the kernels' heads that
 * share M add their shares in a fixed order; an M that is also q, k or v
 * takes the plain code).  A score M makes -inf has weight exactly 0; a
 * row whose every score is -inf gets 0, as a row that sees no key does.  A NaN or +inf in M makes NaN
 * only the rows of the queries that see its key.
 *
 * Z is dropout's: 1 without it; else each weight's factor, 1 / (1 - p)
 * or 0, a function of the seed, the head and (t, s) (ag__attn_kept), so
 * that the backward draws it again instead of keeping it.
 *
 * The causal rule is a rule, not a tensor: nothing [T, S] is made for it.
 * With fill -inf a hidden key's weight is exactly 0, and the reference
 * leaves its key and value out of the row altogether, so that a NaN or
 * inf there never reaches the row through 0 x NaN; a NaN the row can see
 * makes it NaN (one rule for every tiling: the kernels take a head's rows
 * in blocks, so inputs holding a NaN or inf take this plain code,
 * docs/attention_long.md).  With a finite fill every key has a weight.
 *
 * It equals the three nodes it replaces, matmul_heads(q, k^T),
 * masked_softmax and matmul_heads(., v) (tests/test_fusion.c).  Only P is
 * saved for the backward.  The fast code is kernels/attention.c; for rows
 * of more than AG__FLASH_KEYS keys it keeps no P, only each row's
 * log-sum-exp, and recomputes P in its backward
 * (kernels/attention_flash.c, docs/attention_long.md).
 *
 * Under AG_PRECISION_BF16 the four products round their operands to bf16
 * (ops/bf16.c), as autocast's Q K^T and P V and their backward do, and
 * sum in ag_real: Q, K, V and dO rounded (copies), P Z where it meets V
 * or dO, and dA where it meets K or Q (the gradient of the product Q K^T,
 * which autocast holds in bf16, the product's type).  The scale stays
 * outside the product, in ag_real, on every path: A = bf16(Q) bf16(K)^T,
 * then scale A; dA = scale P (dP - rowsum(dP P)), then rounded.  The
 * softmax, scale, mask and bias stay fp32.  The P-kept and the flash
 * kernels round the same operands (docs/precision.md: how the flash one
 * does, with P's sum known only at a row's end).
 *
 * src = {q, k, v}, and the bias M when it needs a gradient; aux = the
 * heads' description (ag__attn) and P (or the rows' maxima and sums);
 * farg[0] = scale, farg[1] = fill; iarg[0] = 1 when masked; iarg[1] the
 * path taken (1 flash: each row's max and sum kept; 2 the kernel, P kept;
 * 3 the plain code, P kept); iarg[2] = 1 in PyTorch's layout. */
#include "core/heads.h"
#include "core/internal.h"
#include "kernels/kernels.h"

#include <math.h>

typedef struct saved { ag__attn a; ag_real *p; } saved; /* the heads (mask: data, as ids are), P [B, H, T, S]
                                                          * (a.flash: each row's max and sum [B, H, T, 2]) */

/* Element (t, c) of head h of sentence b of q or y (kv false, `rows` T),
 * or of k or v (kv true, rows S: query head h's key/value head). */
static size_t at(const ag__attn *a, int b, int h, int t, int rows, int cols, int c, bool kv)
{
    size_t bh = (size_t)b * (size_t)a->H + (size_t)h;
    return ag__attn_head(a, bh, rows, cols, kv) + (size_t)t * (size_t)ag__attn_ld(a, cols, kv) + (size_t)c;
}

/* Whether row r = (b H + h) T + t of the scores [B, H, T, S] keeps key s:
 * the mask's 1, and s <= t + diag when causal. */
typedef struct maps { ag__mask_map m, b; } maps; /* where a row finds its mask's and its bias's values */

static bool kept(const ag__attn *a, const maps *mm, size_t r, int s)
{
    if (s >= ag__attn_hide(a->causal, a->diag, a->S, (int)(r % (size_t)a->T))) return false;
    return !a->mask || a->mask->data[ag__mask_row(&mm->m, r) + (size_t)s * mm->m.along] != 0;
}

/* M at row r, key s: 0 without a bias. */
static ag_real bias_at(const ag__attn *a, const maps *mm, size_t r, int s)
{
    return a->bias ? a->bias->data[ag__mask_row(&mm->b, r) + (size_t)s * mm->b.along] : 0;
}

static void maps_init(maps *mm, const ag__attn *a)
{
    *mm = (maps){0};
    if (a->mask) ag__mask_map_init(&mm->m, 4, (int[]){a->B, a->H, a->T, a->S}, a->mask);
    if (a->bias) ag__mask_map_init(&mm->b, 4, (int[]){a->B, a->H, a->T, a->S}, a->bias);
}

/* Whether key s reaches row r at all: a hidden key's weight is exactly 0
 * with fill -inf, and then its value (a NaN, an inf) must not reach the
 * row either, through 0 x NaN; with a finite fill every key has a weight. */
static bool reaches(const ag__attn *a, const maps *mm, size_t r, int s)
{
    return a->fill != -INFINITY || kept(a, mm, r, s);
}

/* x as a product's operand: rounded to bf16 under a->bf16, else itself. */
static ag_real operand(const ag__attn *a, ag_real x) { return a->bf16 ? (ag_real)ag_bf16_round((float)x) : x; }

/* The reference forward, a query row of a head at a time (q, k, v
 * already rounded under bf16). */
static void forward_ref(const ag__attn *a, const maps *mm, const ag_real *q, const ag_real *k,
                        const ag_real *v, ag_real *p, ag_real *y)
{
    const int T = a->T, S = a->S, D = a->D, Dv = a->Dv;
    for (size_t r = 0; r < (size_t)a->B * (size_t)a->H * (size_t)T; r++) { /* row t of head h of sentence b */
        int t = (int)(r % (size_t)T), h = (int)(r / (size_t)T % (size_t)a->H), b = (int)(r / (size_t)T / (size_t)a->H);
        ag_real *pr = p + r * (size_t)S;
        for (int s = 0; s < S; s++) { /* A = Q K^T, masked, scaled and biased */
            ag_real dot = 0;
            for (int d = 0; d < D; d++) dot += q[at(a, b, h, t, T, D, d, false)] * k[at(a, b, h, s, S, D, d, true)];
            pr[s] = kept(a, mm, r, s) ? (ag_real)a->scale * dot + bias_at(a, mm, r, s) : (ag_real)a->fill;
        }
        ag__softmax_row_ref((size_t)S, pr, pr);
        for (int e = 0; e < Dv; e++) { /* O = P V */
            ag_real o = 0;
            for (int s = 0; s < S; s++) { /* dropout: P's weight times its factor Z */
                if (!reaches(a, mm, r, s)) continue;
                ag_real pz = operand(a, pr[s] * (ag_real)ag__attn_kept(a, r / (size_t)T, t, s));
                o += pz * v[at(a, b, h, s, S, Dv, e, true)];
            }
            y[at(a, b, h, t, T, Dv, e, false)] = o;
        }
    }
}

/* The reference backward, adding into dq, dk, dv (NULL: not wanted); dp
 * holds S values; xv: q's, k's and v's values (rounded under bf16, and
 * dy too). */
static void backward_ref(const ag__attn *a, const maps *mm, const ag_real *const *xv, const ag_real *p,
                         const ag_real *dy, ag_real *const *dx, ag_real *dm, ag_real *dp)
{
    const int T = a->T, S = a->S, D = a->D, Dv = a->Dv;
    const ag_real *q = xv[0], *k = xv[1], *v = xv[2];
    ag_real *dq = dx[0], *dk = dx[1], *dv = dx[2];
    for (size_t r = 0; r < (size_t)a->B * (size_t)a->H * (size_t)T; r++) { /* row t of head h of sentence b */
        int t = (int)(r % (size_t)T), h = (int)(r / (size_t)T % (size_t)a->H), b = (int)(r / (size_t)T / (size_t)a->H);
        const ag_real *pr = p + r * (size_t)S;
        ag_real dot = 0; /* rowsum(dP P) */
        for (int s = 0; s < S; s++) {
            dp[s] = 0;
            if (!reaches(a, mm, r, s)) continue;
            ag_real z = (ag_real)ag__attn_kept(a, r / (size_t)T, t, s); /* dropout's factor, drawn again */
            ag_real pz = operand(a, pr[s] * z);
            for (int e = 0; e < Dv; e++) {
                dp[s] += dy[at(a, b, h, t, T, Dv, e, false)] * v[at(a, b, h, s, S, Dv, e, true)];
                if (dv) dv[at(a, b, h, s, S, Dv, e, true)] += pz * dy[at(a, b, h, t, T, Dv, e, false)];
            }
            dp[s] *= z;
            dot += dp[s] * pr[s];
        }
        for (int s = 0; s < S; s++) {
            if (!kept(a, mm, r, s)) continue; /* dA = 0 */
            ag_real da = operand(a, (ag_real)a->scale * pr[s] * (dp[s] - dot));
            if (dm) dm[ag__mask_row(&mm->b, r) + (size_t)s * mm->b.along] += pr[s] * (dp[s] - dot);
            for (int d = 0; d < D; d++) {
                if (dq) dq[at(a, b, h, t, T, D, d, false)] += da * k[at(a, b, h, s, S, D, d, true)];
                if (dk) dk[at(a, b, h, s, S, D, d, true)] += da * q[at(a, b, h, t, T, D, d, false)];
            }
        }
    }
}

/* No NaN and no inf in x (x - x is 0 for a finite x, NaN otherwise): in
 * vectors by the kernel room, a test every forward makes. */
static bool finite(const ag_tensor *x) { return ag__k_all_finite(x->size, x->data); }

/* No NaN and no +inf in the bias (-inf hides a key: a score, not a fault). */
static bool below_inf(const ag_tensor *x)
{
    bool ok = true;
    for (size_t i = 0; x && i < x->size; i++) ok &= x->data[i] < INFINITY || x->data[i] == -INFINITY;
    return ok;
}

/* xv: x's values as the products read them, rounded copies under bf16
 * (false: no memory, the failure on g). */
static bool values(ag_graph *g, const ag__attn *a, ag_tensor *const *x, const ag_real **xv)
{
    for (int i = 0; i < 3; i++)
        if (!(xv[i] = a->bf16 ? ag__bf16_operand(g, x[i]->data, x[i]->size) : x[i]->data)) return false;
    return true;
}

ag_tensor *ag__attention(ag_graph *g, ag_tensor *q, ag_tensor *k, ag_tensor *v, const ag__attn_rule *r)
{
    if (!ag__ok(g, "attention", 3, q, k, v) || !ag__attention_fits(g, q, k, v, r)) return NULL; /* core/fits.c */
    int ax_h = r->bhtd ? 1 : 2, ax_t = r->bhtd ? 2 : 1; /* where H and T (S) are */
    ag__attn a = {.B = q->shape[0], .T = q->shape[ax_t], .S = k->shape[ax_t], .H = q->shape[ax_h],
                  .Hkv = k->shape[ax_h], .D = q->shape[3], .Dv = v->shape[3], .bhtd = r->bhtd, .causal = r->causal,
                  .mask = r->mask, .bias = r->bias, .scale = r->scale, .fill = r->fill, .dropout = r->dropout, .seed = r->seed};
    a.diag = r->causal == AG__CAUSAL_BOTTOM_RIGHT ? a.S - a.T : r->diag;
    int shape[4] = {a.B, r->bhtd ? a.H : a.T, r->bhtd ? a.T : a.H, a.Dv};
    /* a bias that needs a gradient is src[3]; every path gives dM */
    ag_tensor *bias = (ag_tensor *)(uintptr_t)r->bias;
    bool dm = bias && bias->requires_grad && ag_graph_grad(g);
    ag_tensor *y = ag__node(g, AG_OP_ATTENTION, 4, shape, dm ? 4 : 3, (ag_tensor *[]){q, k, v, bias});
    if (!y) return NULL;
    ag__impl(y)->farg[0] = a.scale, ag__impl(y)->farg[1] = a.fill, ag__impl(y)->iarg[0] = a.mask != NULL;
    /* a NaN or inf where the kernels' tiles would multiply it by a hidden
     * key's exact 0 (docs/attention_long.md, "one NaN rule"): the plain code */
    a.plain = (a.fill == -INFINITY && !(finite(q) && finite(k) && finite(v) && below_inf(a.bias))) ||
              (a.dropout > 0 && a.D == 0) || (dm && (bias == q || bias == k || bias == v));
    bool kernel = ag__fast() && !a.plain;
    a.flash = kernel && ag__k_attention_flash(&a); /* long rows: a value per row, not P */
    a.bf16 = ag__bf16(g); /* rounded products, on every path */
    size_t np = (size_t)a.B * (size_t)a.H * (size_t)a.T * (size_t)(a.flash ? 2 : a.S);
    size_t head = (sizeof(saved) + 63) / 64 * 64;
    saved *sv = ag__save(g, head + np * sizeof(ag_real)); /* P at the arena's 64-byte alignment */
    if (!sv) return NULL;
    *sv = (saved){a, (ag_real *)((char *)sv + head)};
    /* the path, for ag_attention_path: 1 flash, 2 the kernel keeping P, 3 the plain code */
    ag__impl(y)->iarg[1] = a.flash ? 1 : kernel ? 2 : 3, ag__impl(y)->iarg[2] = a.bhtd;
    ag__impl(y)->aux = sv; /* with no key, P V is an empty sum: the reference's zeros */
    if (np && kernel && ag__k_attention_forward(g, &sv->a, q->data, k->data, v->data, sv->p, y->data))
        return ag_graph_status(g) == AG_OK ? y : NULL;
    const ag_real *xv[3];
    if (!values(g, &a, (ag_tensor *[]){q, k, v}, xv)) return NULL;
    maps mm;
    maps_init(&mm, &a);
    forward_ref(&sv->a, &mm, xv[0], xv[1], xv[2], sv->p, y->data);
    return y;
}

ag_tensor *ag__attention_heads(ag_graph *g, ag_tensor *q, ag_tensor *k, ag_tensor *v, double scale, ag_tensor *mask,
                               double fill)
{
    return ag__attention(g, q, k, v, &(ag__attn_rule){.mask = mask, .scale = scale, .fill = fill});
}

static void attention_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x[3] = {y->src[0], y->src[1], y->src[2]};
    const saved *sv = ag__impl(y)->aux;
    const ag__attn *a = &sv->a;
    bool empty = y->size == 0 || a->T == 0 || a->S == 0; /* the reference's loops give 0 */
    bool kernel = a->flash || (!empty && ag__fast() && !a->plain); /* no P (a.flash): the kernel recomputes it */
    ag_tensor *m = y->nsrc > 3 && y->src[3]->requires_grad ? y->src[3] : NULL; /* the bias, for dM */
    if (kernel && ag__k_attention_backward(g, a, x[0], x[1], x[2], m, sv->p, y->data, y->grad)) return;
    ag_real *dx[3], *dp = ag__alloc(g, ((size_t)a->S + 1) * sizeof(ag_real));
    for (int i = 0; i < 3; i++) dx[i] = x[i]->requires_grad ? ag__grad(g, x[i]) : NULL;
    ag_real *dm = m ? ag__grad(g, m) : NULL;
    const ag_real *xv[3], *dy = y->grad; /* bf16: dO rounded, as autocast's bf16 output's gradient is bf16 */
    if (ag_graph_status(g) != AG_OK || !values(g, a, x, xv) || (a->bf16 && !(dy = ag__bf16_operand(g, dy, y->size))))
        return;
    maps mm;
    maps_init(&mm, a);
    backward_ref(a, &mm, xv, sv->p, dy, dx, dm, dp);
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
/* PyTorch's layout, 4 query heads over 2, the causal rule bottom-right
 * (T 3 over S 5: query t sees keys s <= t + 2); then with dropout 0.3 (a
 * fixed seed: a fixed mask) over a padding mask. */
static ag_tensor *case_gqa_causal(ag_graph *g, ag_tensor *const *in)
{
    return ag__attention(g, in[0], in[1], in[2],
                         &(ag__attn_rule){.scale = 0.6, .fill = -INFINITY, .bhtd = true,
                                          .causal = AG__CAUSAL_BOTTOM_RIGHT});
}
static ag_tensor *case_dropout(ag_graph *g, ag_tensor *const *in)
{
    return ag__attention(g, in[0], in[1], in[2],
                         &(ag__attn_rule){.mask = padding(g), .scale = 0.8, .fill = -INFINITY, .bhtd = true,
                                          .dropout = 0.3, .seed = 5});
}

/* An additive mask (bias) [T, S] = [3, 4] with -inf entries, row 1 all
 * -inf, over the padding mask, causal bottom-right. */
static ag_tensor *case_bias(ag_graph *g, ag_tensor *const *in)
{
    const ag_real inf = INFINITY;
    ag_tensor *bias = ag_tensor_from(g, AG_SHAPE(3, 4), (ag_real[]){0.5, -inf, 0.25, -1, -inf, -inf, -inf, -inf, 1,
                                                                     0, -0.5, 2});
    return ag__attention(g, in[0], in[1], in[2],
                         &(ag__attn_rule){.mask = padding(g), .bias = bias, .scale = 0.9, .fill = -INFINITY,
                                          .bhtd = true, .causal = AG__CAUSAL_BOTTOM_RIGHT});
}

/* The same with the bias an input, [1, 2, 3, 4]: its gradient, summed
 * over B. */
static ag_tensor *case_bias_grad(ag_graph *g, ag_tensor *const *in)
{
    return ag__attention(g, in[0], in[1], in[2],
                         &(ag__attn_rule){.mask = padding(g), .bias = in[3], .scale = 0.9, .fill = -INFINITY,
                                          .bhtd = true, .causal = AG__CAUSAL_BOTTOM_RIGHT});
}

/* q, k, v [B, T or S, H, D or Dv] */
static const ag_op_case cases[] = {
    {"no mask", 3, {4, 4, 4}, {{2, 3, 2, 4}, {2, 5, 2, 4}, {2, 5, 2, 3}}, -1, 1, 0, case_plain},
    {"causal [3, 3], fill -inf", 3, {4, 4, 4}, {{2, 3, 2, 4}, {2, 3, 2, 4}, {2, 3, 2, 4}}, -1, 1, 0, case_causal},
    {"padding, a sentence all -inf", 3, {4, 4, 4}, {{2, 3, 2, 2}, {2, 4, 2, 2}, {2, 4, 2, 3}}, -1, 1, 0, case_padding},
    {"padding, fill -1e9: a uniform row", 3, {4, 4, 4}, {{2, 2, 1, 3}, {2, 4, 1, 3}, {2, 4, 1, 2}}, -1, 1, 0, case_uniform},
    {"size-1 axes", 3, {4, 4, 4}, {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}}, -1, 1, 0, case_plain},
    {"[B, H, T, D], 4 heads over 2, causal bottom-right", 3, {4, 4, 4}, {{2, 4, 3, 3}, {2, 2, 5, 3}, {2, 2, 5, 2}}, -1,
     1, 0, case_gqa_causal},
    {"dropout 0.3 (seed 5), padding", 3, {4, 4, 4}, {{2, 2, 3, 2}, {2, 1, 4, 2}, {2, 1, 4, 3}}, -1, 1, 0, case_dropout},
    {"bias [3, 4] with -inf rows, padding, causal", 3, {4, 4, 4}, {{2, 2, 3, 2}, {2, 1, 4, 2}, {2, 1, 4, 3}}, -1, 1, 0,
     case_bias},
    {"bias [1, 2, 3, 4] with a gradient", 4, {4, 4, 4, 4}, {{2, 2, 3, 2}, {2, 1, 4, 2}, {2, 1, 4, 3}, {1, 2, 3, 4}},
     -1, 1, 0, case_bias_grad},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"q, k, v in [-6, 6]: scores up to 72, rows near one-hot", 3, {4, 4, 4}, {{2, 3, 2, 4}, {2, 5, 2, 4}, {2, 5, 2, 3}},
     -6, 6, 0, case_plain},
};

const ag_op_desc ag_op_attention = {.name = "attention", .backward = attention_backward, AG_CASES(cases),
    AG_EDGES(edges)};
