/* examples/common/dist.h: data-parallel training across processes (MPI),
 * for the examples' train commands.
 *
 * Built with `make MPI=1`, the programs link dist_mpi.c (Open MPI); without
 * it, dist_none.c: one process, and no MPI anywhere.  The library itself
 * never depends on MPI.
 *
 * Under `mpirun -np N`, process r runs part r of each step's N parts, and
 * the gradients are added up in part order, as ag_team_step adds its
 * workers' (src/core/team.c): the same bits as one process running
 * ag_team_step with nparts = N.  Every process reads the same data and
 * builds the same batch; process 0 alone prints and writes files. */
#ifndef EXAMPLES_DIST_H
#define EXAMPLES_DIST_H

#include "attograd.h"

/* MPI_Init (with MPI); 0, or 1 with a message when it fails. */
int dist_init(int *argc, char ***argv);
void dist_finalize(void);
int dist_rank(void); /* this process: 0..dist_size()-1 */
int dist_size(void); /* the processes: 1 without mpirun */

/* ag_team_step(team, g, nparts, fn, ctx, loss) across the processes
 * (nparts 1..dist_size()): process k runs part k on its own g and s (the
 * model's store), a process k >= nparts none; then every s holds the sum
 * of the parts' gradients (process 0's added to what its s held), and
 * *loss the step's loss.  g's random stream is process 0's.  Every process
 * must call it, with the same nparts.  On failure every process returns
 * it, and g's error names the process that failed. */
ag_status dist_team_step(ag_graph *g, ag_store *s, int nparts, ag_team_loss_fn fn, void *ctx, double *loss);

/* The largest of every process's v (each must call it): a stop signal
 * that one process caught stops all at the same step. */
int dist_max(int v);

#endif
