/* kernels/mode.c: which room runs the ops, the kernels or the references.
 *
 * Every op has a plain reference forward and backward in its file in ops/
 * (the code a reader learns from).  Some ops also have a fast kernel in
 * src/kernels/ (vectorised, tiled, per instruction set), tested equal to
 * that reference.  AG_KERNELS_FAST (the default) runs the kernels where
 * they exist; AG_KERNELS_REFERENCE runs every op through its reference, so
 * that the whole test suite can run on the readable code.
 *
 * The environment variable AG_KERNELS=reference (or =fast) sets the mode
 * when the library first asks for it; ag_set_kernels overrides it. */
#include "kernels/kernels.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic int mode = -1; /* -1: not read from the environment yet */

static int from_environment(void)
{
    const char *v = getenv("AG_KERNELS");
    return v && strcmp(v, "reference") == 0 ? AG_KERNELS_REFERENCE : AG_KERNELS_FAST;
}

void ag_set_kernels(ag_kernels k)
{
    atomic_store_explicit(&mode, k == AG_KERNELS_REFERENCE ? AG_KERNELS_REFERENCE : AG_KERNELS_FAST,
                          memory_order_relaxed);
}

ag_kernels ag_get_kernels(void)
{
    int m = atomic_load_explicit(&mode, memory_order_relaxed);
    if (m < 0) {
        m = from_environment();
        atomic_store_explicit(&mode, m, memory_order_relaxed);
    }
    return (ag_kernels)m;
}

bool ag__fast(void) { return ag_get_kernels() == AG_KERNELS_FAST; }
