/* examples/common/dist_mpi.c: dist.h over MPI (built by `make MPI=1`).
 *
 * A step in N parts, process k running part k, is ag_team_step's
 * arithmetic spread over processes (src/core/team.c):
 *
 *   - the random streams: every process starts the step from process 0's
 *     stream on g, draws the N - 1 seeds of parts 1..N-1 from it, as the
 *     team does; process 0 runs part 0 on g's stream after those draws,
 *     process k > 0 on g seeded with the k-th seed.
 *   - each part adds the gradient of w_k L_k to its gradients: process 0
 *     to what its store held, process k > 0 to zeros (a replica's).
 *   - the sum: G = G_0 + G_1 + ... + G_{N-1}, in that order for every
 *     element, as the team adds its replicas into the model's, and the
 *     loss sum_k w_k L_k from 0 in part order.
 *
 * MPI_Allreduce would add in an order of its own, so the sum is done by
 * hand, reduce-scatter then all-gather: process j owns slice j of the
 * gradient, receives every process's copy of that slice (MPI_Alltoallv),
 * adds them in process order, and the summed slices go to everyone
 * (MPI_Allgatherv).  Each process sends and receives about twice the
 * gradient, in rounds of at most CHUNK values so that the buffers stay
 * small and the counts fit MPI's int. */
#include "dist.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CHUNK = 1 << 22, MSG = 240 };

/* What each process tells the others after its part. */
typedef struct part_report {
    int status; /* ag_status */
    double weight, loss;
    char msg[MSG];
} part_report;

static int me, procs = 1;
static part_report *reports; /* every process's, for the step */

int dist_init(int *argc, char ***argv)
{
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, "MPI_Init failed\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &procs);
    reports = malloc((size_t)procs * sizeof *reports);
    if (dist_max(!reports)) {
        fprintf(stderr, "process %d: out of memory\n", me);
        dist_finalize();
        return 1;
    }
    return 0;
}

void dist_finalize(void)
{
    free(reports);
    reports = NULL;
    MPI_Finalize();
}
int dist_rank(void) { return me; }
int dist_size(void) { return procs; }

int dist_max(int v)
{
    int all = v;
    MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return all;
}

/* Copy values [a, b) of the store's gradients (every parameter's, in store
 * order) into buf, or buf into them. */
static void copy_grads(ag_store *s, size_t a, size_t b, ag_real *buf, int into_buf)
{
    size_t at = 0;
    for (int i = 0; i < ag_store_count(s) && at < b; i++) {
        ag_tensor *p = ag_store_at(s, i);
        if (!p->grad) continue;
        size_t lo = at > a ? at : a, hi = at + p->size < b ? at + p->size : b;
        if (lo < hi) {
            ag_real *g = p->grad + (lo - at), *x = buf + (lo - a);
            if (into_buf) memcpy(x, g, (hi - lo) * sizeof *x);
            else memcpy(g, x, (hi - lo) * sizeof *x);
        }
        at += p->size;
    }
}

static size_t grad_count(ag_store *s)
{
    size_t n = 0;
    for (int i = 0; i < ag_store_count(s); i++)
        if (ag_store_at(s, i)->grad) n += ag_store_at(s, i)->size;
    return n;
}

/* One round: values [a, a + n) of the gradients summed over the first
 * nparts processes, in process order.  send: n values; recv: procs slices
 * of at most n / procs + 1 values; counts: 4 x procs ints. */
static int sum_round(ag_store *s, size_t a, int n, int nparts, ag_real *send, ag_real *recv, int *counts)
{
    int *cnt = counts, *off = counts + procs, *rcnt = counts + 2 * procs, *roff = counts + 3 * procs;
    const int z = (int)sizeof(ag_real); /* bytes a value */
    for (int j = 0; j < procs; j++) {
        int lo = (int)((long long)n * j / procs), hi = (int)((long long)n * (j + 1) / procs);
        cnt[j] = (hi - lo) * z, off[j] = lo * z;
    }
    int mine = cnt[me] / z;
    for (int j = 0; j < procs; j++) rcnt[j] = mine * z, roff[j] = j * mine * z;
    copy_grads(s, a, a + (size_t)n, send, 1);
    if (MPI_Alltoallv(send, cnt, off, MPI_BYTE, recv, rcnt, roff, MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS) return 1;
    ag_real *sum = send + off[me] / z; /* this process's slice, summed in place */
    for (int e = 0; e < mine; e++) {
        ag_real v = recv[e];
        for (int k = 1; k < nparts; k++) v += recv[(size_t)k * mine + e];
        sum[e] = v;
    }
    if (MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, send, cnt, off, MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS) return 1;
    copy_grads(s, a, a + (size_t)n, send, 0);
    return 0;
}

/* Every process's gradients become the sum of the first nparts'. */
static int sum_grads(ag_store *s, int nparts)
{
    size_t total = grad_count(s), chunk = total < CHUNK ? total : CHUNK;
    ag_real *send = malloc((chunk ? chunk : 1) * sizeof *send);
    ag_real *recv = malloc((chunk + (size_t)procs) * sizeof *recv);
    int *counts = malloc(4 * (size_t)procs * sizeof *counts);
    int rc = dist_max(!send || !recv || !counts); /* all go on, or none */
    for (size_t a = 0; !rc && a < total; a += chunk)
        rc = sum_round(s, a, (int)(total - a < chunk ? total - a : chunk), nparts, send, recv, counts);
    free(send), free(recv), free(counts);
    return rc;
}

/* This process's part: ag_team_step's work_part (or its plain step for
 * one part), on g already seeded. */
static void run_part(ag_graph *g, ag_store *s, int nparts, ag_team_loss_fn fn, void *ctx, part_report *r)
{
    double w = 1;
    if (nparts == 1) { /* the plain step: no scaling */
        ag_tensor *l = fn(ctx, g, s, 0, 1, &w);
        if (ag_backward(g, l) == AG_OK) r->loss = l->data[0];
        r->weight = 1;
        return;
    }
    w = 0;
    ag_tensor *l = fn(ctx, g, s, me, nparts, &w);
    r->weight = w;
    if (w == 0 && ag_graph_status(g) == AG_OK) return; /* an empty part */
    if (ag_backward(g, ag_scale(g, l, w)) == AG_OK) r->loss = l->data[0];
}

/* The step's start on every process: process 0's stream, the parts'
 * seeds drawn from it, and g seeded for this process's part. */
static void seed_part(ag_graph *g, int nparts)
{
    MPI_Bcast(ag_graph_rng(g), 4, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (nparts == 1) return;
    ag_rng r;
    memcpy(r.s, ag_graph_rng(g), sizeof r.s);
    uint64_t seed = 0;
    for (int k = 1; k < nparts; k++) {
        uint64_t x = ag_rng_next(&r);
        if (k == me) seed = x;
    }
    memcpy(ag_graph_rng(g), r.s, sizeof r.s);
    if (me > 0) ag_graph_seed(g, seed);
}

ag_status dist_team_step(ag_graph *g, ag_store *s, int nparts, ag_team_loss_fn fn, void *ctx, double *loss)
{
    if (!g) return AG_ERR_ARG;
    if (!s || !fn || !loss)
        return ag_graph_fail(g, AG_ERR_ARG, "dist_team_step: %s is NULL", !s ? "the store" : !fn ? "the loss function" : "loss");
    *loss = NAN;
    if (nparts < 1 || nparts > procs)
        return ag_graph_fail(g, AG_ERR_ARG, "dist_team_step: %d parts for %d processes", nparts, procs);
    seed_part(g, nparts);
    part_report mine = {0};
    if (me > 0) ag_store_zero_grad(s); /* a replica's gradients: part k's alone */
    if (me < nparts && ag_graph_status(g) == AG_OK) run_part(g, s, nparts, fn, ctx, &mine);
    mine.status = ag_graph_status(g);
    if (mine.status != AG_OK) snprintf(mine.msg, sizeof mine.msg, "%s", ag_graph_error(g));
    MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, reports, (int)sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
    int failed = -1;
    for (int k = 0; k < procs && failed < 0; k++)
        if (reports[k].status != AG_OK) failed = k;
    if (failed < 0 && sum_grads(s, nparts))
        return ag_graph_fail(g, AG_ERR_NOMEM, "dist_team_step: out of memory for the gradients' sum");
    if (failed >= 0) {
        if (ag_graph_status(g) == AG_OK)
            ag_graph_fail(g, (ag_status)reports[failed].status, "process %d of %d: %s", failed, procs,
                          reports[failed].msg);
        return ag_graph_status(g);
    }
    double sum = 0;
    for (int k = 0; k < nparts; k++) sum += reports[k].weight * reports[k].loss;
    *loss = nparts == 1 ? reports[0].loss : sum;
    return AG_OK;
}
