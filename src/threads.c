/* threads.c: how many threads the kernels may use.
 *
 * One number for the whole library, 1 by default.  The heavy loops (gemm,
 * softmax, layer_norm, the element-wise ops) split their work into pieces
 * whose boundaries never depend on the thread count, and each output
 * element is computed by one thread in a fixed order, so results are the
 * same whatever the count.  Built without OpenMP the count is remembered
 * and everything runs on the calling thread. */
#include "internal.h"

static int nthreads = 1;

void ag_set_threads(int n) { nthreads = n < 1 ? 1 : n > 256 ? 256 : n; }

int ag_get_threads(void) { return nthreads; }
