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
 * small (under ~1M values, some hundreds of microseconds of work) or
 * already inside a parallel region.  A fork and join costs microseconds on
 * an idle machine, but waking a sleeping helper (OMP_WAIT_POLICY=passive,
 * below) took tens of microseconds on the virtual machine this was tuned
 * on: with a threshold of 128K values, attention at (8, 32, 128, 8) ran at
 * 1.19 ms on two threads against 0.79 ms with this one, and the large sizes
 * kept their gain.  (A team of one would even call malloc.)
 *
 * On a machine shared with other busy programs, run with
 * OMP_WAIT_POLICY=passive: a thread that has finished its share then sleeps
 * instead of spinning on a core its partner may need. */
#include "core/internal.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static int nthreads = 1;

/* The least work worth a team of threads (tests lower it, so that their
 * small cases take the threaded paths). */
size_t ag__thread_min_work = 1048576;

void ag_set_threads(int n) { nthreads = n < 1 ? 1 : n > 256 ? 256 : n; }

int ag_get_threads(void) { return nthreads; }

/* Threads for a loop that touches about `work` values. */
int ag__threads_for(size_t work)
{
#ifdef _OPENMP
    if (nthreads <= 1 || work < ag__thread_min_work || omp_in_parallel()) return 1;
    return nthreads;
#else
    (void)work;
    return 1;
#endif
}
