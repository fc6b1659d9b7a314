/* threads.c: how many threads the kernels may use.
 *
 * One number for the whole library, 1 by default.  The heavy loops (gemm,
 * softmax, layer_norm, the element-wise ops) split their work into pieces
 * whose boundaries never decide how an output element is computed: each is
 * computed by one thread, in a fixed order, so results are the same
 * whatever the count.  Built without OpenMP the count is remembered and
 * everything runs on the calling thread.
 *
 * A loop runs on one thread, without entering OpenMP at all, when it is
 * small (under ~128K values, some tens of microseconds of work: a fork and
 * join costs microseconds, more when the machine is busy, and a team of one
 * would even call malloc) or already inside a parallel region.
 *
 * On a machine shared with other busy programs, run with
 * OMP_WAIT_POLICY=passive: a thread that has finished its share then sleeps
 * instead of spinning on a core its partner may need. */
#include "internal.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static int nthreads = 1;

void ag_set_threads(int n) { nthreads = n < 1 ? 1 : n > 256 ? 256 : n; }

int ag_get_threads(void) { return nthreads; }

/* Threads for a loop that touches about `work` values. */
int ag__threads_for(size_t work)
{
#ifdef _OPENMP
    if (nthreads <= 1 || work < 131072 || omp_in_parallel()) return 1;
    return nthreads;
#else
    (void)work;
    return 1;
#endif
}
