/* data_parallel.c: the translator's loss and backward on several threads.
 *
 * The loss of a batch is the mean cross-entropy over its N target tokens.
 * Split the sentences into parts k with n_k tokens each, N = sum_k n_k:
 *
 *     L = sum_k (n_k / N) L_k          L_k: the mean over part k's tokens
 *     dL/dw = sum_k d[(n_k / N) L_k]/dw
 *
 * so each worker builds its part's loss on a graph of its own, scales it by
 * n_k / N, and runs backward; the gradients are then added up in worker
 * order.  Worker 0 uses the caller's graph and the model's parameters (its
 * gradients go straight into the model's, added to whatever they hold);
 * worker k > 0 uses a replica of the model whose parameters read the
 * model's values in place and keep gradients of their own, which the end
 * of the step adds into the model's and zeroes again.
 *
 * Why not split each op across threads instead (src/threads.c does, for
 * large ops): a toy step is about a thousand ops of a few microseconds,
 * and waking a sleeping helper costs tens of microseconds on a busy
 * machine.  Here the threads meet twice a step: after the backward passes,
 * and after the sum of the gradients.
 *
 * Invariant: between steps every replica gradient is zero. */
#include "internal.h"

#include <math.h>
#include <stdio.h>

#ifdef _OPENMP
#include <omp.h>
#endif

enum { MAX_WORKERS = 256 }; /* as many as ag_set_threads allows */

struct ag_seq2seq_team {
    int n;                 /* workers */
    const ag_seq2seq *m;   /* worker 0's model ... */
    ag_store *s;           /* ... and its parameters */
    int np;                /* replicas' parameters, in their store's order */
    ag_tensor **param;     /* [np]: the model's parameter of each name */
    ag_seq2seq rep[MAX_WORKERS];       /* rep[k], k > 0: worker k's model */
    ag_store *rep_store[MAX_WORKERS];  /* its parameters (borrowed values) */
    ag_graph *graph[MAX_WORKERS];      /* its graph ([0]: the caller's) */
    size_t numel;          /* sum of the parameters' sizes */
};

int ag_seq2seq_team_size(const ag_seq2seq_team *t) { return t ? t->n : 0; }

void ag_seq2seq_team_free(ag_seq2seq_team *t)
{
    if (!t) return;
    for (int k = 1; k < t->n; k++) {
        ag_seq2seq_free(&t->rep[k]);
        ag_store_free(t->rep_store[k]);
        ag_graph_free(t->graph[k]);
    }
    ag__free(t->param);
    ag__free(t);
}

ag_seq2seq_team *ag_seq2seq_team_new(const ag_seq2seq *m, ag_store *s, int n, char *err, size_t errlen)
{
    char dummy[8];
    if (!err || !errlen) err = dummy, errlen = sizeof dummy;
    if (!m || !s || n < 1 || n > MAX_WORKERS) {
        snprintf(err, errlen, "seq2seq team: %s", !m || !s ? "the model or its store is NULL"
                                                            : "the number of workers must be 1..256");
        return NULL;
    }
    ag_seq2seq_team *t = ag__calloc(1, sizeof *t);
    if (!t) goto nomem;
    t->n = 1, t->m = m, t->s = s;
    for (int k = 1; k < n; k++, t->n++) { /* t->n counts what free must undo */
        t->rep_store[k] = ag_store_new();
        t->graph[k] = ag_graph_new();
        if (!t->rep_store[k] || !t->graph[k]) goto nomem;
        /* the same parameters by name and shape; their initial values are
         * thrown away when they borrow the model's */
        if (ag_seq2seq_init(&t->rep[k], t->rep_store[k], &m->cfg, 0) != AG_OK) {
            snprintf(err, errlen, "seq2seq team: replica %d: %s", k, ag_store_error(t->rep_store[k]));
            ag_seq2seq_team_free(t);
            return NULL;
        }
        if (ag__store_borrow(t->rep_store[k], s) != AG_OK) {
            snprintf(err, errlen, "seq2seq team: %s", ag_store_error(t->rep_store[k]));
            ag_seq2seq_team_free(t);
            return NULL;
        }
    }
    if (n > 1) {
        t->np = ag_store_count(t->rep_store[1]);
        t->param = ag__calloc((size_t)t->np, sizeof *t->param);
        if (!t->param) goto nomem;
        for (int p = 0; p < t->np; p++) {
            t->param[p] = ag_store_find(s, ag_store_at(t->rep_store[1], p)->name);
            t->numel += t->param[p]->size;
        }
    }
    return t;
nomem:
    snprintf(err, errlen, "seq2seq team: out of memory for %d workers", n);
    ag_seq2seq_team_free(t);
    return NULL;
}

/* The sum, for the parameters' values [lo, hi) counted across the whole
 * store in order: model gradient += worker 1's + worker 2's ... (in that
 * order, whichever thread does it), and each replica's back to zero.  With
 * add = 0 (a worker failed) only the zeroing. */
static void gather(ag_seq2seq_team *t, int nw, size_t lo, size_t hi, int add)
{
    size_t off = 0;
    for (int p = 0; p < t->np && off < hi; off += t->param[p]->size, p++) {
        size_t size = t->param[p]->size;
        size_t a = lo > off ? lo - off : 0, b = hi - off < size ? hi - off : size;
        if (a >= b) continue;
        ag_real *dw = t->param[p]->grad;
        for (int k = 1; k < nw; k++) {
            ag_real *dwk = ag_store_at(t->rep_store[k], p)->grad;
            if (add)
                for (size_t i = a; i < b; i++) dw[i] += dwk[i];
            memset(dwk + a, 0, (b - a) * sizeof(ag_real));
        }
    }
}

ag_status ag_seq2seq_team_step(ag_seq2seq_team *t, ag_graph *g, const int *src, const int *src_valid,
                               const int *tgt_in, const int *tgt_out, int B, int S, int T, double *loss)
{
    if (!g) return AG_ERR_ARG;
    if (!ag__ok(g, "seq2seq_team_step", 0)) return ag_graph_status(g);
    if (!t || !loss)
        return ag_graph_fail(g, AG_ERR_ARG, "seq2seq_team_step: %s is NULL", t ? "loss" : "the team");
    *loss = NAN;
    /* the parts: worker k takes sentences [lo[k], lo[k + 1]), n_k target
     * tokens; the cuts give each part about the same number of source and
     * target tokens, the work of a step */
    int nw = t->n < B ? t->n : B, lo[MAX_WORKERS + 1];
    double share[MAX_WORKERS];
    long tokens[MAX_WORKERS], total = 0;
    if (nw > 1 && src_valid && tgt_out && T > 0 && T <= t->m->cfg.max_len) { /* else the loss names the problem */
        long work = 0, done = 0;
        for (int pass = 0; pass < 2; pass++) {
            int k = 1;
            for (int b = 0; b < B; b++) {
                long w = src_valid[b] < 0 ? 0 : src_valid[b] > S ? S : src_valid[b];
                for (int i = 0; i < T; i++) w += tgt_out[(long)b * T + i] != 0;
                if (pass == 0) work += w;
                else
                    for (done += w; k < nw && done * nw >= work * k; k++) lo[k] = b + 1;
            }
            if (pass == 1)
                for (; k < nw; k++) lo[k] = B;
        }
        lo[0] = 0, lo[nw] = B;
        for (int k = 0; k < nw; k++) {
            tokens[k] = 0;
            for (long i = (long)lo[k] * T; i < (long)lo[k + 1] * T; i++) tokens[k] += tgt_out[i] != 0;
            total += tokens[k];
        }
    }
    if (nw <= 1 || total == 0) { /* one worker: the plain step */
        ag_tensor *l = ag_seq2seq_loss(g, t->m, src, src_valid, tgt_in, tgt_out, B, S, T);
        if (ag_backward(g, l) == AG_OK) *loss = l->data[0];
        return ag_graph_status(g);
    }
    ag_graph *gw[MAX_WORKERS];
    const ag_seq2seq *mw[MAX_WORKERS];
    gw[0] = g, mw[0] = t->m;
    for (int k = 1; k < nw; k++) {
        gw[k] = t->graph[k], mw[k] = &t->rep[k];
        ag_graph_reset(gw[k]);
        ag_graph_set_training(gw[k], ag_graph_training(g));
        ag_graph_seed(gw[k], ag_rng_next(ag__graph_rng(g)));
    }
    double part[MAX_WORKERS];
    for (int k = 0; k < nw; k++) share[k] = (double)tokens[k] / (double)total, part[k] = 0;

    int failed = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(nw) reduction(| : failed)
#endif
    {
        int id = 0, nt = 1;
#ifdef _OPENMP
        id = omp_get_thread_num(), nt = omp_get_num_threads();
#endif
        for (int k = id; k < nw; k += nt) {
            if (!tokens[k]) continue; /* only padding: no loss, no gradient */
            ag_graph *gk = gw[k];
            int b0 = lo[k], nb = lo[k + 1] - lo[k];
            ag_tensor *l = ag_seq2seq_loss(gk, mw[k], src + (size_t)b0 * S, src_valid + b0, tgt_in + (size_t)b0 * T,
                                           tgt_out + (size_t)b0 * T, nb, S, T);
            if (ag_backward(gk, ag_scale(gk, l, share[k])) == AG_OK) part[k] = l->data[0];
            failed |= ag_graph_status(gk) != AG_OK;
        }
#ifdef _OPENMP
#pragma omp barrier
#endif
        /* every worker's result is in: add the replicas' gradients up,
         * each thread a slice of the parameters */
        int ok = 1;
        for (int k = 0; k < nw; k++) ok &= ag_graph_status(gw[k]) == AG_OK;
        gather(t, nw, t->numel * (size_t)id / (size_t)nt, t->numel * (size_t)(id + 1) / (size_t)nt, ok);
    }
    if (failed) {
        for (int k = 1; k < nw; k++)
            if (ag_graph_status(gw[k]) != AG_OK && ag_graph_status(g) == AG_OK)
                ag_graph_fail(g, ag_graph_status(gw[k]), "worker %d (sentences %d..%d): %s", k, lo[k], lo[k + 1] - 1,
                              ag_graph_error(gw[k]));
        return ag_graph_status(g);
    }
    double sum = 0;
    for (int k = 0; k < nw; k++) sum += share[k] * part[k];
    *loss = sum;
    return AG_OK;
}
