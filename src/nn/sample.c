/* sample.c: the sampler: the next token from a row of logits l[V].
 *
 * The filters act in this order (ag_sampling):
 *   temperature  w_v = exp((l_v - max l) / temperature); 0: greedy, the
 *                largest finite logit, the lowest id on ties
 *   top_k        keep v when l_v >= the k-th largest logit (every tie of
 *                it kept); 0 or >= V: all
 *   top_p        nucleus: p_v = w_v / sum w; keep v when the probability
 *                of the tokens strictly more probable than v is < top_p:
 *                the smallest set of the most probable tokens whose total
 *                is >= top_p, with every tie of its least probable token;
 *                1: all.  Without ties this is HF transformers'
 *                TopPLogitsWarper (remove when the ascending cumulative
 *                probability is <= 1 - top_p); it keeps at least one.
 * A logit that is not finite (-inf: a masked token, NaN, +inf) is never
 * drawn.  The draw is the inverse CDF in id order: with u uniform in
 * [0, 1), the first v (of the kept ones) with u * sum w < w_0 + ... + w_v.
 *
 * Invariant: with top_p 1 the sampler draws the same token, bit for bit,
 * as before top-p existed (the same weights, summed in the same order). */
#include "nn/nn_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int descending(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* The largest finite logit, the lowest id on ties; -1 when none is finite. */
static int argmax(const ag_real *l, int V)
{
    int best = -1;
    for (int v = 0; v < V; v++)
        if (isfinite((double)l[v]) && (best < 0 || l[v] > l[best])) best = v;
    return best;
}

/* top-p on the weights w[V] (0: not kept): zero every v whose more probable
 * tokens already hold top_p of the total.  sorted: V doubles of room. */
static void nucleus(double *w, int V, double top_p, double *sorted)
{
    int n = 0;
    double total = 0;
    for (int v = 0; v < V; v++)
        if (w[v] > 0) sorted[n++] = w[v], total += w[v];
    qsort(sorted, (size_t)n, sizeof *sorted, descending);
    double above = 0, keep = sorted[0]; /* the smallest weight kept */
    for (int i = 0; i < n && above / total < top_p;) {
        keep = sorted[i]; /* a group of equal weights, kept whole */
        while (i < n && sorted[i] == keep) above += sorted[i++];
    }
    for (int v = 0; v < V; v++)
        if (w[v] < keep) w[v] = 0;
}

/* w[V] = the unnormalised weights drawn from (one-hot at the argmax for
 * temperature <= 0); the argmax, or -1 when no logit is finite.  work: V
 * doubles of room (for top-k and top-p). */
static int weights(const ag_real *l, int V, const ag_sampling *s, double *w, double *work)
{
    int best = argmax(l, V);
    if (best < 0) return -1;
    if (s->temperature <= 0) {
        for (int v = 0; v < V; v++) w[v] = v == best;
        return best;
    }
    /* top-k: keep the logits >= the k-th largest (all of them on a tie) */
    double cut = -INFINITY;
    if (s->top_k > 0 && s->top_k < V) {
        for (int v = 0; v < V; v++) work[v] = isfinite((double)l[v]) ? (double)l[v] : -INFINITY;
        qsort(work, (size_t)V, sizeof *work, descending);
        cut = work[s->top_k - 1];
    }
    /* w_v = exp((l_v - max) / temperature) over the kept v */
    double max = l[best];
    for (int v = 0; v < V; v++) {
        double x = l[v];
        w[v] = isfinite(x) && x >= cut ? exp((x - max) / s->temperature) : 0;
    }
    if (s->top_p < 1) nucleus(w, V, s->top_p, work);
    return best;
}

int ag_sample_draw(const double *w, int V, double u)
{
    if (!w || V < 1) return -1;
    double total = 0, acc = 0;
    for (int v = 0; v < V; v++) total += w[v] > 0 ? w[v] : 0;
    if (!(total > 0)) return -1;
    u *= total;
    int last = -1;
    for (int v = 0; v < V; v++) {
        if (!(w[v] > 0)) continue;
        acc += w[v];
        last = v;
        if (u < acc) return v;
    }
    return last; /* u rounded up to the total */
}

ag_status ag_sampling_check(const ag_sampling *s, char *err, size_t errlen)
{
    char why[96];
    if (!s) snprintf(why, sizeof why, "the sampling options are NULL");
    else if (!(s->temperature >= 0) || !isfinite(s->temperature))
        snprintf(why, sizeof why, "temperature %g: want a finite number >= 0 (0: greedy)", s->temperature);
    else if (s->top_k < 0) snprintf(why, sizeof why, "top_k %d: want a whole number >= 0 (0: all)", s->top_k);
    else if (!(s->top_p > 0 && s->top_p <= 1))
        snprintf(why, sizeof why, "top_p %g: want 0 < top_p <= 1 (1: all)", s->top_p);
    else return AG_OK;
    if (err && errlen) snprintf(err, errlen, "%s", why);
    return AG_ERR_ARG;
}

int ag_sample_next(const ag_real *logits, int V, const ag_sampling *s, ag_rng *rng, double *work)
{
    if (!logits || V < 1 || !rng || !work || ag_sampling_check(s, NULL, 0) != AG_OK) return -1;
    int best = weights(logits, V, s, work, work + V);
    if (best < 0 || s->temperature <= 0) return best;
    return ag_sample_draw(work, V, ag_rng_uniform(rng));
}

int ag_sample_logits(const ag_real *logits, int V, double temperature, int top_k, ag_rng *rng, double *work)
{
    if (!logits || V < 1 || !rng || !work) return -1;
    ag_sampling s = {.temperature = temperature > 0 ? temperature : 0, .top_k = top_k > 0 ? top_k : 0, .top_p = 1};
    int best = weights(logits, V, &s, work, work); /* top_p 1: work is room for top-k only */
    if (best < 0 || s.temperature <= 0) return best;
    return ag_sample_draw(work, V, ag_rng_uniform(rng));
}

ag_status ag_sample_dist(const ag_real *logits, int V, const ag_sampling *s, double *before, double *after,
                         char *err, size_t errlen)
{
    if (!logits || !before || !after || V < 1) {
        if (err && errlen) snprintf(err, errlen, "%s", V < 1 ? "the vocabulary is empty" : "logits, before or after is NULL");
        return AG_ERR_ARG;
    }
    if (ag_sampling_check(s, err, errlen) != AG_OK) return AG_ERR_ARG;
    double *work = ag__malloc((size_t)V * sizeof *work);
    if (!work) {
        if (err && errlen) snprintf(err, errlen, "out of memory for %d logits", V);
        return AG_ERR_NOMEM;
    }
    /* before: softmax(l), temperature 1, no filter */
    ag_sampling plain = {.temperature = 1, .top_p = 1};
    int best = weights(logits, V, &plain, before, work);
    if (best >= 0) weights(logits, V, s, after, work);
    ag__free(work);
    if (best < 0) {
        if (err && errlen) snprintf(err, errlen, "no logit is finite");
        return AG_ERR_NUMERIC;
    }
    for (double *p = before; p; p = p == before ? after : NULL) {
        double total = 0;
        for (int v = 0; v < V; v++) total += p[v];
        for (int v = 0; v < V; v++) p[v] /= total;
    }
    return AG_OK;
}
