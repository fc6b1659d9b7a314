/* core/fits.c: the argument rules of the ops whose rules take more than a
 * line or two: attention's q, k, v and mask; linear's and linear_add's x,
 * W, b and residual; cross_entropy's targets, label smoothing and
 * reduction.  Each op file states its rules in its comment and calls its
 * check from here, so that it reads as its math.  A check that fails
 * records a message naming what was wrong and returns false. */
#include "core/internal.h"

#include <math.h>
#include <stdio.h>

/* The additive mask (bias) broadcasts to the scores [B, H, T, S]. */
static bool bias_fits(ag_graph *g, const ag_tensor *bias, const int *scores)
{
    char sb[96], ss[96];
    bool fits = bias->ndim <= 4;
    for (int i = 0; fits && i < bias->ndim; i++) {
        int d = bias->shape[i], it = 4 - bias->ndim + i;
        fits = d == 1 || d == scores[it];
    }
    if (!fits) {
        ag_graph_fail(g, AG_ERR_SHAPE, "attention: the additive mask (bias) %s does not broadcast to the scores' "
                      "[B, H, T, S] = %s", ag_shape_str(bias, sb, sizeof sb), ag_shape_str_n(4, scores, ss, sizeof ss));
        return false;
    }
    return true;
}

bool ag__attention_fits(ag_graph *g, const ag_tensor *q, const ag_tensor *k, const ag_tensor *v,
                        const ag__attn_rule *r)
{
    if (r->mask && !ag__usable(g, "attention", 3, r->mask)) return false;
    if (r->bias && !ag__usable(g, "attention", 4, r->bias)) return false;
    int ax_h = r->bhtd ? 1 : 2, ax_t = r->bhtd ? 2 : 1; /* where H and T (S) are */
    const char *want = r->bhtd ? "[B, H, T, D], [B, Hkv, S, D], [B, Hkv, S, Dv]"
                               : "[B, T, H, D], [B, S, Hkv, D], [B, S, Hkv, Dv]";
    char a[96], b[96], c[96];
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4 || k->shape[0] != q->shape[0] || v->shape[0] != q->shape[0] ||
        v->shape[ax_h] != k->shape[ax_h] || k->shape[3] != q->shape[3] || v->shape[ax_t] != k->shape[ax_t]) {
        ag_graph_fail(g, AG_ERR_SHAPE, "attention: q %s, k %s, v %s do not fit %s", ag_shape_str(q, a, sizeof a),
                      ag_shape_str(k, b, sizeof b), ag_shape_str(v, c, sizeof c), want);
        return false;
    }
    int H = q->shape[ax_h], Hkv = k->shape[ax_h];
    if (Hkv == 0 ? H != 0 : H % Hkv != 0) {
        ag_graph_fail(g, AG_ERR_SHAPE, "attention: q %s has %d heads, not a multiple of the %d of k %s and v %s",
                      ag_shape_str(q, a, sizeof a), H, Hkv, ag_shape_str(k, b, sizeof b), ag_shape_str(v, c, sizeof c));
        return false;
    }
    if (!(r->scale == r->scale) || isinf(r->scale)) {
        ag_graph_fail(g, AG_ERR_ARG, "attention: the scale %g is not finite", r->scale);
        return false;
    }
    int scores[4] = {q->shape[0], H, q->shape[ax_t], k->shape[ax_t]};
    if (r->mask && !ag__mask_fits_shape(g, "attention", r->mask, "the scores' [B, H, T, S] =", 4, scores))
        return false;
    return !r->bias || bias_fits(g, r->bias, scores);
}

bool ag__linear_fits(ag_graph *g, const char *op, const ag_tensor *x, const ag_tensor *w, const ag_tensor *b,
                     const ag_tensor *r)
{
    char sx[96], sw[96], sb[96], sr[96];
    if (w->ndim != 2 || x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1] ||
        (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))) {
        ag_graph_fail(g, AG_ERR_SHAPE, "%s: x %s, weight %s and bias %s do not fit x [..., I], W [O, I], b [O]", op,
                      ag_shape_str(x, sx, sizeof sx), ag_shape_str(w, sw, sizeof sw),
                      b ? ag_shape_str(b, sb, sizeof sb) : "none");
        return false;
    }
    bool same = r && r->ndim == x->ndim;
    for (int d = 0; same && d < x->ndim; d++)
        same = r->shape[d] == (d == x->ndim - 1 ? w->shape[0] : x->shape[d]);
    if (r && !same) {
        ag_graph_fail(g, AG_ERR_SHAPE, "%s: the residual %s is not the shape of x %s times W^T %s", op,
                      ag_shape_str(r, sr, sizeof sr), ag_shape_str(x, sx, sizeof sx),
                      ag_shape_str(w, sw, sizeof sw));
        return false;
    }
    return true;
}

bool ag__cross_entropy_fits(ag_graph *g, const ag_tensor *logits, const int *targets, int ignore_index, double ls,
                            ag_reduction reduction, size_t *count)
{
    char sl[96];
    if (logits->ndim == 0 || logits->shape[logits->ndim - 1] == 0) {
        ag_graph_fail(g, AG_ERR_SHAPE, "cross_entropy: logits must be [..., V] with V >= 1, got %s",
                      ag_shape_str(logits, sl, sizeof sl));
        return false;
    }
    if (!(ls >= 0 && ls <= 1)) {
        ag_graph_fail(g, AG_ERR_ARG, "cross_entropy: label_smoothing = %g must be in [0, 1]", ls);
        return false;
    }
    if (reduction != AG_REDUCTION_MEAN && reduction != AG_REDUCTION_SUM && reduction != AG_REDUCTION_NONE) {
        ag_graph_fail(g, AG_ERR_ARG, "cross_entropy: reduction %d is not mean (%d), sum (%d) or none (%d)",
                      (int)reduction, AG_REDUCTION_MEAN, AG_REDUCTION_SUM, AG_REDUCTION_NONE);
        return false;
    }
    int V = logits->shape[logits->ndim - 1];
    size_t rows = logits->size / (size_t)V;
    if (rows > 0 && !targets) {
        ag_graph_fail(g, AG_ERR_ARG, "cross_entropy: targets is NULL for logits %s",
                      ag_shape_str(logits, sl, sizeof sl));
        return false;
    }
    *count = 0;
    for (size_t r = 0; r < rows; r++) {
        if (targets[r] == ignore_index) continue;
        if (targets[r] < 0 || targets[r] >= V) {
            ag_graph_fail(g, AG_ERR_ARG, "cross_entropy: target %d at position %zu out of range [0, %d)",
                          targets[r], r, V);
            return false;
        }
        (*count)++;
    }
    return true;
}
