/* examples/common/dist_none.c: dist.h without MPI: one process, rank 0.
 * The programs take their single-process paths (ag_team_step) when
 * dist_size() is 1, so dist_team_step only has to refuse. */
#include "dist.h"

int dist_init(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

void dist_finalize(void) {}
int dist_rank(void) { return 0; }
int dist_size(void) { return 1; }
int dist_max(int v) { return v; }

ag_status dist_team_step(ag_graph *g, ag_store *s, int nparts, ag_team_loss_fn fn, void *ctx, double *loss)
{
    (void)s, (void)nparts, (void)fn, (void)ctx, (void)loss;
    if (!g) return AG_ERR_ARG;
    return ag_graph_fail(g, AG_ERR_ARG, "dist_team_step: built without MPI (make MPI=1)");
}
