/* data_parallel.c: one training step's batch on several threads.
 *
 * A loss that is a mean over a batch is the weighted sum of its parts'
 * means.  Split the batch into parts k of weight w_k (part k's share of the
 * examples or tokens, sum_k w_k = 1):
 *
 *     L = sum_k w_k L_k        dL/dp = sum_k d(w_k L_k)/dp
 *
 * so each worker builds its part's loss on a graph of its own, scales it by
 * w_k, and runs backward; the gradients are then added up in worker order.
 * Worker 0 uses the caller's graph and the model's parameters (its
 * gradients go straight into the model's, added to whatever they hold);
 * worker k > 0 uses a replica of the model whose parameters read the
 * model's values in place and keep gradients of their own, which the end
 * of the step adds into the model's and zeroes again.
 *
 * Why not split each op across threads instead (src/threads.c does, for
 * large ops): a toy step is hundreds of ops of a few microseconds, and
 * waking a sleeping helper costs tens of microseconds on a busy machine.
 * Here the threads meet twice a step: after the backward passes, and after
 * the sum of the gradients.
 *
 * Invariant: between steps every replica gradient is zero. */
#include "internal.h"

#include <math.h>
#include <stdio.h>

#ifdef _OPENMP
#include <omp.h>
#endif

enum { MAX_WORKERS = 256 }; /* as many as ag_set_threads allows */

struct ag_team {
    int n;                            /* workers */
    ag_store *s;                      /* the model's parameters (worker 0's) */
    ag_tensor **param;                /* the model's parameter of each of a replica's, in its store's order */
    ag_store *rep[MAX_WORKERS];       /* rep[k], k > 0: worker k's parameters (borrowed values) */
    ag_graph *graph[MAX_WORKERS];     /* graph[k], k > 0: its graph (worker 0: the caller's) */
};

int ag_team_size(const ag_team *t) { return t ? t->n : 0; }

ag_store *ag_team_store(const ag_team *t, int worker)
{
    if (!t || worker < 0 || worker >= t->n) return NULL;
    return worker ? t->rep[worker] : t->s;
}

void ag_team_free(ag_team *t)
{
    if (!t) return;
    for (int k = 1; k < t->n; k++) {
        ag_store_free(t->rep[k]);
        ag_graph_free(t->graph[k]);
    }
    ag__free(t->param);
    ag__free(t);
}

ag_team *ag_team_new(ag_store *s, int n, ag_team_init_fn init, void *ctx, char *err, size_t errlen)
{
    char dummy[8];
    if (!err || !errlen) err = dummy, errlen = sizeof dummy;
    if (!s || (n > 1 && !init) || n < 1 || n > MAX_WORKERS) {
        snprintf(err, errlen, "team: %s",
                 !s ? "the store is NULL"
                    : n < 1 || n > MAX_WORKERS ? "the number of workers must be 1..256" : "no init function");
        return NULL;
    }
    ag_team *t = ag__calloc(1, sizeof *t);
    if (!t) goto nomem;
    t->n = 1, t->s = s;
    for (int k = 1; k < n; k++) {
        t->n = k + 1; /* what ag_team_free must undo */
        t->rep[k] = ag_store_new();
        t->graph[k] = ag_graph_new();
        if (!t->rep[k] || !t->graph[k]) goto nomem;
        /* the same parameters by name and size; their initial values are
         * thrown away when they borrow the model's */
        if (init(ctx, k, t->rep[k]) != AG_OK) {
            snprintf(err, errlen, "team: replica %d: %s", k,
                     *ag_store_error(t->rep[k]) ? ag_store_error(t->rep[k]) : "init failed");
            goto fail;
        }
        if (k > 1 && ag_store_count(t->rep[k]) != ag_store_count(t->rep[1])) {
            snprintf(err, errlen, "team: replica %d has %d parameters, replica 1 %d", k, ag_store_count(t->rep[k]),
                     ag_store_count(t->rep[1]));
            goto fail;
        }
        if (ag__store_borrow(t->rep[k], s) != AG_OK) {
            snprintf(err, errlen, "team: %s", ag_store_error(t->rep[k]));
            goto fail;
        }
    }
    if (n > 1) {
        int np = ag_store_count(t->rep[1]);
        t->param = ag__calloc((size_t)(np ? np : 1), sizeof *t->param);
        if (!t->param) goto nomem;
        for (int p = 0; p < np; p++) {
            t->param[p] = ag_store_find(s, ag_store_at(t->rep[1], p)->name);
            for (int k = 2; k < n; k++)
                if (strcmp(ag_store_at(t->rep[k], p)->name, ag_store_at(t->rep[1], p)->name)) {
                    snprintf(err, errlen, "team: replica %d's parameter %d is '%s', replica 1's '%s'", k, p,
                             ag_store_at(t->rep[k], p)->name, ag_store_at(t->rep[1], p)->name);
                    goto fail;
                }
        }
    }
    return t;
nomem:
    snprintf(err, errlen, "team: out of memory for %d workers", n);
fail:
    ag_team_free(t);
    return NULL;
}

/* The sum of the gradients over parameter i's elements [a, b): model's +=
 * worker 1's + worker 2's ... (in that order, whichever thread does it),
 * and each replica's back to zero.  Without `add` (a worker failed) only
 * the zeroing. */
typedef struct gather_job {
    ag_team *t;
    int nw, add;
} gather_job;

static void gather_piece(void *ctx, int i, ag_tensor *t1, size_t a, size_t b)
{
    (void)t1;
    const gather_job *j = ctx;
    ag_real *dw = j->t->param[i]->grad;
    for (int k = 1; k < j->nw; k++) {
        ag_real *dwk = ag_store_at(j->t->rep[k], i)->grad;
        if (j->add)
            for (size_t e = a; e < b; e++) dw[e] += dwk[e];
        memset(dwk + a, 0, (b - a) * sizeof(ag_real));
    }
}

ag_status ag_team_step(ag_team *t, ag_graph *g, int nparts, ag_team_loss_fn fn, void *ctx, double *loss)
{
    if (!g) return AG_ERR_ARG;
    if (!ag__ok(g, "team_step", 0)) return ag_graph_status(g);
    if (!t || !fn || !loss)
        return ag_graph_fail(g, AG_ERR_ARG, "team_step: %s is NULL", !t ? "the team" : !fn ? "the loss function" : "loss");
    *loss = NAN;
    if (nparts < 1 || nparts > t->n)
        return ag_graph_fail(g, AG_ERR_ARG, "team_step: %d parts for a team of %d workers", nparts, t->n);
    if (nparts == 1) { /* the plain step */
        double w = 1;
        ag_tensor *l = fn(ctx, g, t->s, 0, 1, &w);
        if (ag_backward(g, l) == AG_OK) *loss = l->data[0];
        return ag_graph_status(g);
    }
    ag_graph *gw[MAX_WORKERS];
    gw[0] = g;
    for (int k = 1; k < nparts; k++) {
        gw[k] = t->graph[k];
        ag_graph_reset(gw[k]);
        ag_graph_set_training(gw[k], ag_graph_training(g));
        ag_graph_seed(gw[k], ag_rng_next(ag__graph_rng(g)));
    }
    double part[MAX_WORKERS], weight[MAX_WORKERS];
    size_t numel = ag_store_numel(t->rep[1]); /* the values the threads share out to sum */
    int failed = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(nparts) reduction(| : failed)
#endif
    {
        int id = 0, nt = 1;
#ifdef _OPENMP
        id = omp_get_thread_num(), nt = omp_get_num_threads();
#endif
        for (int k = id; k < nparts; k += nt) {
            ag_graph *gk = gw[k];
            part[k] = 0, weight[k] = 0;
            ag_tensor *l = fn(ctx, gk, ag_team_store(t, k), k, nparts, &weight[k]);
            if (weight[k] == 0 && ag_graph_status(gk) == AG_OK) continue; /* an empty part: no gradient */
            if (ag_backward(gk, ag_scale(gk, l, weight[k])) == AG_OK) part[k] = l->data[0];
            failed |= ag_graph_status(gk) != AG_OK;
        }
#ifdef _OPENMP
#pragma omp barrier
#endif
        /* every worker's result is in: add the replicas' gradients up,
         * each thread a slice of the parameters */
        int ok = 1;
        for (int k = 0; k < nparts; k++) ok &= ag_graph_status(gw[k]) == AG_OK;
        gather_job job = {t, nparts, ok};
        ag__store_pieces(t->rep[1], numel * (size_t)id / (size_t)nt, numel * (size_t)(id + 1) / (size_t)nt,
                         gather_piece, &job);
    }
    if (failed) {
        for (int k = 1; k < nparts; k++)
            if (ag_graph_status(gw[k]) != AG_OK && ag_graph_status(g) == AG_OK)
                ag_graph_fail(g, ag_graph_status(gw[k]), "worker %d of %d: %s", k, nparts, ag_graph_error(gw[k]));
        return ag_graph_status(g);
    }
    double sum = 0;
    for (int k = 0; k < nparts; k++) sum += weight[k] * part[k];
    *loss = sum;
    return AG_OK;
}

/* ---- the translator's team ------------------------------------------------- */

struct ag_seq2seq_team {
    ag_team *team;
    const ag_seq2seq *m;
    ag_seq2seq rep[MAX_WORKERS]; /* rep[k], k > 0: worker k's model */
};

static ag_status seq2seq_init(void *ctx, int k, ag_store *replica)
{
    ag_seq2seq_team *st = ctx;
    return ag_seq2seq_init(&st->rep[k], replica, &st->m->cfg, 0);
}

int ag_seq2seq_team_size(const ag_seq2seq_team *t) { return t ? ag_team_size(t->team) : 0; }

void ag_seq2seq_team_free(ag_seq2seq_team *t)
{
    if (!t) return;
    for (int k = 1; k < MAX_WORKERS; k++) ag_seq2seq_free(&t->rep[k]);
    ag_team_free(t->team);
    ag__free(t);
}

ag_seq2seq_team *ag_seq2seq_team_new(const ag_seq2seq *m, ag_store *s, int n, char *err, size_t errlen)
{
    char dummy[8];
    if (!err || !errlen) err = dummy, errlen = sizeof dummy;
    if (!m) {
        snprintf(err, errlen, "team: the model is NULL");
        return NULL;
    }
    ag_seq2seq_team *t = ag__calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "team: out of memory for %d workers", n);
        return NULL;
    }
    t->m = m;
    t->team = ag_team_new(s, n, seq2seq_init, t, err, errlen);
    if (!t->team) {
        ag_seq2seq_team_free(t);
        return NULL;
    }
    return t;
}

/* One step's batch, cut into parts: part k is sentences [lo[k], lo[k + 1])
 * with tokens[k] target tokens. */
typedef struct seq2seq_parts {
    const ag_seq2seq_team *t;
    const int *src, *src_valid, *tgt_in, *tgt_out;
    int S, T;
    int lo[MAX_WORKERS + 1];
    long tokens[MAX_WORKERS], total;
} seq2seq_parts;

/* Sentence b's target tokens (not <pad>). */
static long target_tokens(const seq2seq_parts *p, int b)
{
    long n = 0;
    for (int i = 0; i < p->T; i++) n += p->tgt_out[(long)b * p->T + i] != 0;
    return n;
}

/* Sentence b's share of a step's work: its source tokens, and twice its
 * target tokens. */
static long sentence_work(const seq2seq_parts *p, int b)
{
    int v = p->src_valid[b];
    return (v < 0 ? 0 : v > p->S ? p->S : v) + 2 * target_tokens(p, b);
}

static ag_tensor *seq2seq_part_loss(void *ctx, ag_graph *g, ag_store *s, int k, int nparts, double *weight)
{
    (void)s;
    const seq2seq_parts *p = ctx;
    const ag_seq2seq *m = k ? &p->t->rep[k] : p->t->m;
    int b0 = p->lo[k], nb = p->lo[k + 1] - b0, S = p->S, T = p->T;
    *weight = (double)p->tokens[k] / (double)p->total;
    if (!p->tokens[k]) return NULL; /* only padding: skipped */
    ag_tensor *l = ag_seq2seq_loss(g, m, p->src + (size_t)b0 * S, p->src_valid + b0, p->tgt_in + (size_t)b0 * T,
                                   p->tgt_out + (size_t)b0 * T, nb, S, T);
    if (nparts > 1) ag__graph_prefix(g, "sentences %d..%d of the batch: ", b0, b0 + nb - 1);
    return l;
}

ag_status ag_seq2seq_team_step(ag_seq2seq_team *t, ag_graph *g, const int *src, const int *src_valid,
                               const int *tgt_in, const int *tgt_out, int B, int S, int T, double *loss)
{
    if (!g) return AG_ERR_ARG;
    if (!t) return ag_graph_fail(g, AG_ERR_ARG, "seq2seq_team_step: the team is NULL");
    if (loss) *loss = NAN;
    /* The cuts give each part about the same work: a source token's
     * (encoder, and the cross-attention's keys and values) plus twice its
     * target tokens' (decoder and output layer: at the defaults 80K and
     * 174K multiply-adds a token, with a target vocabulary of 1225).  Bad
     * batches go to one worker, whose ag_seq2seq_loss names the problem. */
    seq2seq_parts p = {.t = t, .src = src, .src_valid = src_valid, .tgt_in = tgt_in, .tgt_out = tgt_out, .S = S, .T = T};
    int nw = ag_team_size(t->team) < B ? ag_team_size(t->team) : B;
    if (nw > 1 && src_valid && tgt_out && T > 0 && T <= t->m->cfg.max_len) {
        long work = 0, done = 0;
        for (int b = 0; b < B; b++) work += sentence_work(&p, b);
        int k = 1; /* lo[k]: after the sentence that brings the work done to k / nw of it */
        for (int b = 0; b < B && k < nw; b++)
            for (done += sentence_work(&p, b); k < nw && done * nw >= work * k; k++) p.lo[k] = b + 1;
        for (; k < nw; k++) p.lo[k] = B;
        p.lo[0] = 0, p.lo[nw] = B;
        for (k = 0; k < nw; k++) {
            p.tokens[k] = 0;
            for (int b = p.lo[k]; b < p.lo[k + 1]; b++) p.tokens[k] += target_tokens(&p, b);
            p.total += p.tokens[k];
        }
    }
    if (nw <= 1 || p.total == 0) { /* one part: the plain step */
        nw = 1, p.lo[0] = 0, p.lo[1] = B, p.tokens[0] = p.total = 1;
    }
    return ag_team_step(t->team, g, nw, seq2seq_part_loss, &p, loss);
}
