/* parts.c: a training step's batch in parts: --parts N threads of one
 * process (an ag_team, src/core/team.c), or the processes of mpirun
 * (examples/common/dist.h), with the same numbers for the same N.
 *
 * The B windows are cut into N runs of consecutive windows, part k being
 * windows [B k / N, B (k + 1) / N); every window has T positions, so part
 * k weighs its share of the windows, n_k / B, and the weighted sum of the
 * parts' mean losses is the batch's mean.  N = 1 is the plain loss and
 * backward, bit for bit. */
#include "gpt.h"
#include "../common/dist.h"

#include <stdlib.h>

/* Worker k > 0 of the team builds its own model into its replica store. */
static ag_status build_replica(void *ctx, int k, ag_store *replica)
{
    parts *p = ctx;
    ag_status st = ag_gpt_init(&p->rep[k], replica, &p->m->cfg, 0);
    if (st == AG_OK) p->built = k + 1;
    return st;
}

int parts_new(parts *p, const model *m, int n)
{
    *p = (parts){.m = m, .n = n};
    if (dist_size() > 1) { /* one part a process: no team */
        if (n > 1 && n != dist_size()) {
            fprintf(stderr, "%s: --parts %d under mpirun -np %d: the processes are the parts (leave --parts out)\n",
                    prog, n, dist_size());
            return 2;
        }
        p->n = dist_size();
        return 0;
    }
    char err[256];
    p->rep = calloc((size_t)n, sizeof *p->rep);
    if (!p->rep || !(p->team = ag_team_new(m->store, n, build_replica, p, err, sizeof err))) {
        fprintf(stderr, "%s: %s\n", prog, p->rep ? err : "out of memory");
        return 1;
    }
    return 0;
}

void parts_free(parts *p)
{
    ag_team_free(p->team);
    for (int k = 1; k < p->built; k++) ag_gpt_free(&p->rep[k]);
    free(p->rep);
    *p = (parts){0};
}

/* Part k of nparts: its windows' mean loss, on worker k's model. */
static ag_tensor *part_loss(void *ctx, ag_graph *g, ag_store *s, int k, int nparts, double *weight)
{
    (void)s;
    const parts *p = ctx;
    int b0 = p->B * k / nparts, nb = p->B * (k + 1) / nparts - b0;
    *weight = (double)nb / (double)p->B;
    if (!nb) return NULL; /* fewer windows than parts: skipped */
    const ag_gpt *net = p->team && k ? &p->rep[k] : &p->m->net;
    return ag_gpt_loss(g, net, p->x + (size_t)b0 * p->T, p->y + (size_t)b0 * p->T, nb, p->T);
}

ag_status parts_step(parts *p, ag_graph *g, const int *x, const int *y, int B, int T, double *loss)
{
    p->x = x, p->y = y, p->B = B, p->T = T;
    if (!p->team) return dist_team_step(g, p->m->store, p->n, part_loss, p, loss);
    return ag_team_step(p->team, g, p->n, part_loss, p, loss);
}
