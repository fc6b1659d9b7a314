/* tests/exercises/check.c: the checker of the exercises in
 * examples/exercises/: `check N` tests exercise N against the library (or a
 * plain loop written here) on values drawn from a fixed seed, and against
 * finite differences where it builds a graph.  Prints what is wrong, or
 * that the exercise passes; exits 0 only when it passes.  Built in double
 * (make exercise N=...). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exercises.h"

static int fails;

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

/* Every a[i] within 1e-9 + 1e-6 |b[i]| of b[i]; names the first that is not. */
static int close_all(const char *what, const double *a, const double *b, int n)
{
    for (int i = 0; i < n; i++)
        if (!(fabs(a[i] - b[i]) <= 1e-9 + 1e-6 * fabs(b[i])))
            return CHECK(0, "%s[%d] is %.10g, should be %.10g", what, i, a[i], b[i]);
    return 1;
}

#include "checks_graph.h"
#include "checks_math.h"

int main(int argc, char **argv)
{
    static int (*const check[])(void) = {NULL,          check_causal_mask, check_layer_norm, check_attention,
                                         check_rope,    check_alibi,       check_label_smoothing,
                                         check_kv_cache, check_tying,      check_clip,       check_warmup};
    int n = argc == 2 ? atoi(argv[1]) : 0;
    if (n < 1 || n > 10) {
        fprintf(stderr, "usage: check N (1 to 10)\n");
        return 2;
    }
    printf("exercise %d:\n", n);
    check[n]();
    printf(fails ? "exercise %d: not yet (%d wrong)\n" : "exercise %d: passes\n", n, fails);
    return fails ? 1 : 0;
}
