/* tests/exercises/check.c: the checker of the exercises in
 * examples/exercises/: `check N` tests exercise N against the library (or a
 * plain loop written here) on values drawn from a fixed seed, and against
 * finite differences where it builds a graph.  It reports every output of
 * the exercise, right or wrong, with a hint for each wrong one
 * (report.h), then that the exercise passes or how many outputs are wrong;
 * exits 0 only when it passes.  Built in double (make exercise N=...). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exercises.h"
#include "report.h"

/* A check that is not a tensor's values (a shape, a gradient check). */
#define CHECK(cond, ...) ((cond) ? 1 : (fails++, printf("  wrong: " __VA_ARGS__), printf("\n"), 0))

static void fill(double *x, int n, uint64_t seed)
{
    ag_rng r;
    ag_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) x[i] = 2 * ag_rng_uniform(&r) - 1;
}

static ag_tensor *leaf(ag_graph *g, int ndim, const int *shape, uint64_t seed)
{
    ag_tensor *t = ag_tensor_new(g, ndim, shape);
    if (t) fill(t->data, (int)t->size, seed);
    return t;
}

/* Output buffers handed to an exercise start as NaN, as the library's fresh
 * gradient buffers do: a value never set, or added to before it was set,
 * shows as NaN instead of passing for a 0. */
static void poison(double *x, int n)
{
    for (int i = 0; i < n; i++) x[i] = NAN;
}

/* Some value of x was set (not every one is still NaN). */
static int written(const double *x, int n)
{
    for (int i = 0; i < n; i++)
        if (!isnan(x[i])) return 1;
    return 0;
}

static const char *const poisoned_hint =
    "the checker hands you buffers filled with NaN (as the library's fresh gradient buffers are): a value "
    "never set, or added to (+=) before it was set, stays NaN";

#include "checks_graph.h"
#include "checks_math.h"

int main(int argc, char **argv)
{
    static int (*const check[])(void) = {NULL,           check_causal_mask, check_layer_norm, check_attention,
                                         check_rope,     check_alibi,       check_label_smoothing,
                                         check_kv_cache, check_tying,       check_clip,       check_warmup,
                                         check_window};
    const int count = (int)(sizeof check / sizeof *check) - 1;
    int n = argc == 2 ? atoi(argv[1]) : 0;
    if (n < 1 || n > count) {
        fprintf(stderr, "usage: check N (1 to %d)\n", count);
        return 2;
    }
    printf("exercise %d:\n", n);
    check[n]();
    printf(fails ? "exercise %d: not yet (%d wrong)\n" : "exercise %d: passes\n", n, fails);
    return fails ? 1 : 0;
}
