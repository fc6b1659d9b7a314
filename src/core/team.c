/* team.c: data parallelism: one training step's batch on several threads.
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
 * Why not split each op across threads instead (src/core/threads.c does, for
 * large ops): a toy step is hundreds of small ops, and waking a sleeping
 * helper costs more than one of them gains from it.
 * Here the threads meet twice a step: after the backward passes, and after
 * the sum of the gradients.
 *
 * Invariant: between steps every replica gradient is zero. */
#include "core/internal.h"

#include <math.h>
#include <stdio.h>

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
    if (!s || (n > 1 && !init) || n < 1 || n > MAX_WORKERS) {
        ag__errf(err, errlen, AG_ERR_ARG, "team: %s",
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
            ag__errf(err, errlen, AG_ERR_ARG, "team: replica %d: %s", k,
                     *ag_store_error(t->rep[k]) ? ag_store_error(t->rep[k]) : "init failed");
            goto fail;
        }
        if (k > 1 && ag_store_count(t->rep[k]) != ag_store_count(t->rep[1])) {
            ag__errf(err, errlen, AG_ERR_SHAPE, "team: replica %d has %d parameters, replica 1 %d", k,
                     ag_store_count(t->rep[k]), ag_store_count(t->rep[1]));
            goto fail;
        }
        if (ag__store_borrow(t->rep[k], s) != AG_OK) {
            ag__errf(err, errlen, AG_ERR_SHAPE, "team: %s", ag_store_error(t->rep[k]));
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
                    ag__errf(err, errlen, AG_ERR_SHAPE, "team: replica %d's parameter %d is '%s', replica 1's '%s'",
                             k, p, ag_store_at(t->rep[k], p)->name, ag_store_at(t->rep[1], p)->name);
                    goto fail;
                }
        }
    }
    return t;
nomem:
    ag__errf(err, errlen, AG_ERR_NOMEM, "team: out of memory for %d workers", n);
fail:
    ag_team_free(t);
    return NULL;
}

/* One step's workers: part k's loss and weight, and the gradients' sum. */
typedef struct step_job {
    ag_team *t;
    ag_graph **gw;             /* worker k's graph */
    ag_team_loss_fn fn;
    void *ctx;
    int nw, add;               /* workers; whether their gradients are added (none failed) */
    double *part, *weight;     /* part k's loss and weight */
    size_t numel, nslices;     /* the values summed, in nslices slices */
} step_job;

/* Worker k: its part's loss on its own graph, then backward of w_k L_k. */
static void work_part(void *ctx, size_t i)
{
    const step_job *j = ctx;
    int k = (int)i;
    ag_graph *gk = j->gw[k];
    j->part[k] = 0, j->weight[k] = 0;
    ag_tensor *l = j->fn(j->ctx, gk, ag_team_store(j->t, k), k, j->nw, &j->weight[k]);
    if (j->weight[k] == 0 && ag_graph_status(gk) == AG_OK) return; /* an empty part: no gradient */
    if (ag_backward(gk, ag_scale(gk, l, j->weight[k])) == AG_OK) j->part[k] = l->data[0];
}

/* The sum of the gradients over parameter i's elements [a, b): model's +=
 * worker 1's + worker 2's ... (in that order, whichever thread does it),
 * and each replica's back to zero.  Without `add` (a worker failed) only
 * the zeroing. */
static void gather_piece(void *ctx, int i, ag_tensor *t1, size_t a, size_t b)
{
    (void)t1;
    const step_job *j = ctx;
    ag_real *dw = j->t->param[i]->grad;
    for (int k = 1; k < j->nw; k++) {
        ag_real *dwk = ag_store_at(j->t->rep[k], i)->grad;
        if (j->add)
            for (size_t e = a; e < b; e++) dw[e] += dwk[e];
        memset(dwk + a, 0, (b - a) * sizeof(ag_real));
    }
}

/* Slice i of nslices of the values: the same sums however they are cut. */
static void gather_slice(void *ctx, size_t i)
{
    step_job *j = ctx;
    ag__store_pieces(j->t->rep[1], j->numel * i / j->nslices, j->numel * (i + 1) / j->nslices, gather_piece, j);
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
        ag_graph_set_keep_grads(gw[k], ag_graph_keep_grads(g));
        ag_graph_seed(gw[k], ag_rng_next(ag__graph_rng(g)));
    }
    double part[MAX_WORKERS], weight[MAX_WORKERS];
    step_job job = {t, gw, fn, ctx, nparts, 0, part, weight, ag_store_numel(t->rep[1]), (size_t)nparts};
    ag__parallel_for((size_t)nparts, nparts, work_part, &job);
    /* every worker's result is in: add the replicas' gradients up, each
     * thread a slice of the parameters */
    int failed = 0;
    for (int k = 0; k < nparts; k++) failed |= ag_graph_status(gw[k]) != AG_OK;
    job.add = !failed;
    ag__parallel_for(job.nslices, nparts, gather_slice, &job);
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
