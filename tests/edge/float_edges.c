/* tests/edge/float_edges.c: every op of the table at the edges of float,
 * its float forward and backward against its double ones.
 *
 * One source, built twice (tests/edge/edge.mk): build/float_edges64,
 * linked with the double library, runs the cases and prints every value
 * it gets; build/float_edges32, linked with the float library, runs the
 * same cases on the same inputs (values that float holds exactly) and
 * compares its values with those it reads:
 *
 *   build/float_edges64 [--op NAME] [--mutants] > F
 *   build/float_edges32 --against F [the same flags]   (F may be -: stdin)
 *
 * The cases, for each op of the table (or NAME alone):
 *   - an element-wise op (its descriptor's .elementwise: the macros of
 *     src/core/elementwise.h set it) is swept by itself: its first case
 *     whose inputs share one shape is built on every value of the grid
 *     below (every pair, for two inputs), so that a new element-wise op is
 *     covered without a line written for it;
 *   - an op's .edges cases (ops/<name>.c, AG_EDGES): its own inputs where
 *     float breaks first, such as rows of logits near +-80 and +-1e4 or
 *     rows far from zero for a norm; an op that is not element-wise and has
 *     none fails the run.
 * Each case: y = op(inputs), then backward from a fixed random dy (dy = 1
 * in the sweep, so that dx is the derivative); compared: y and the
 * gradient of every input.
 *
 * The rule, for each value, d from double and f from float:
 *   - d not finite, or beyond float's range (|d| > FLT_MAX): float cannot
 *     hold it; not compared (counted as "beyond float's range");
 *   - f not finite where d is: fails;
 *   - |f - d| > K eps (s + |d|) + FLT_MIN fails, eps = FLT_EPSILON, K =
 *     64; s = 0 for y in the sweep (each value on its own: relative
 *     error), and in a case the largest |d| of the tensor (rows mix large
 *     and small values: their error is the row's rounding); a gradient's s
 *     adds |dy| |y| / max(1, |x|) (see run).  FLT_MIN: values below
 *     float's normal range keep no relative precision;
 *   - in the sweep of a one-input op, a value double holds within float's
 *     range at one magnitude and not at all at the next fails: an
 *     intermediate overflowed in double too (double_overflow).
 *
 * --mutants: three ops written as a contributor might write them, each
 * composed of ops of the table, where float breaks: softplus as
 * log(1 + exp(x)) (swept as an element-wise op), softmax without the max
 * subtracted and log_softmax as log(softmax(x)) (on softmax's and
 * log_softmax's edge cases).  Each must fail; the run fails if one passes.
 *
 * Prints a line per op (what was checked, how many values, how many
 * failed) and the failures; exit status 0 when every op passes (and with
 * --mutants every mutant fails), 1 otherwise, 2 on bad usage. */
#include "attograd.h"
#include "core/internal.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K 64 /* the tolerance, in float's epsilons */

/* The grid of the sweep: 0 and these magnitudes, each with both signs,
 * from float's smallest normal numbers to its largest. */
static const double magnitudes[] = {1e-37, 1e-20, 1e-8, 1e-3, 0.1, 0.5, 1,   2,   4,    10,   20,  50,
                                    80,    88.5,  100,  300,  1e3, 1e4, 1e6, 1e10, 1e20, 1e30, 3e38};
#define NMAG (sizeof magnitudes / sizeof magnitudes[0])
#define NGRID (2 * NMAG + 1)
static double grid(size_t i) { return i == 0 ? 0 : i <= NMAG ? magnitudes[i - 1] : -magnitudes[i - 1 - NMAG]; }

/* ---- the two sides: the double build writes, the float build compares ---- */

static FILE *against; /* the float build: the double build's output */
static const char *fail_word = "FAIL"; /* "caught" for a mutant: a failure it must show */
static const char *only_op;
typedef struct tally {
    long compared, beyond, failed, shown;
} tally;

/* What a comparison needs besides the values: the tensor's scale (the
 * largest |d|: rows mix large and small values) or none (the sweep: each
 * value on its own), and for a gradient the size it may take from dy. */
typedef struct scope {
    bool rowwise;           /* s = the tensor's largest |d| */
    const double *gscale;   /* per element, a gradient's floor |dy| |y| / max(1, |x|), or NULL */
    double gscale_all;      /* the same for a whole case */
    double *const *inputs;  /* the sweep: each element's inputs, for the messages */
    int nin;
} scope;

/* The double build prints n values under a key; the float build reads the
 * same key and compares.  The double values read last are kept in *got
 * (y's, for the gradients' floor). */
static void emit(const char *key, const ag_real *v, size_t n, const scope *sc, tally *t, double *got)
{
    if (!against) {
        printf("%s %zu\n", key, n);
        for (size_t i = 0; i < n; i++) printf("%.17g\n", (double)v[i]);
        return;
    }
    char line[512], want[512];
    snprintf(want, sizeof want, "%s %zu\n", key, n);
    if (!fgets(line, sizeof line, against) || strcmp(line, want)) {
        printf("float_edges: the double build's output has '%.*s' where '%s %zu' was due: rebuild both\n",
               (int)strcspn(line, "\n"), line, key, n);
        exit(1);
    }
    static double d[1 << 16];
    if (n > sizeof d / sizeof d[0]) exit(2);
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        if (!fgets(line, sizeof line, against)) exit(1);
        d[i] = strtod(line, NULL);
        if (got) got[i] = d[i];
        if (isfinite(d[i]) && fabs(d[i]) <= FLT_MAX && fabs(d[i]) > s) s = fabs(d[i]);
    }
    if (!sc->rowwise) s = 0;
    s += sc->gscale_all;
    for (size_t i = 0; i < n; i++) {
        double f = (double)v[i];
        if (!isfinite(d[i]) || fabs(d[i]) > FLT_MAX) {
            t->beyond++;
            continue;
        }
        t->compared++;
        double tol = K * FLT_EPSILON * (s + (sc->gscale ? sc->gscale[i] : 0) + fabs(d[i])) + FLT_MIN;
        if (isfinite(f) && fabs(f - d[i]) <= tol) continue;
        t->failed++;
        if (t->shown++ >= (strcmp(fail_word, "FAIL") ? 2 : 6)) continue;
        printf("  %s %s[%zu]: float %.9g, double %.17g", fail_word, key, i, f, d[i]);
        if (isfinite(f)) printf(" (error %.3g, tolerance %.3g)", fabs(f - d[i]), tol);
        else printf(" (not finite in float where double is)");
        for (int k = 0; k < sc->nin; k++) printf("%s%.9g", k ? ", " : " at input ", sc->inputs[k][i]);
        printf("\n");
    }
}

/* ---- running a case ---------------------------------------------------- */

typedef ag_tensor *(*build_fn)(ag_graph *g, ag_tensor *const *in);

/* Build c on inputs whose values are in vals[k] (float-exact), backward
 * from dy (1 everywhere in the sweep, else fixed random values in [-1,
 * 1]), and emit y and each input's gradient under "key/y", "key/dx0", ... */
static void run(const ag_op_case *c, build_fn build, double *const *vals, const char *key, bool sweeping,
                tally *t, double *ygot, double *dxgot)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *in[AG_MAX_SRC] = {0};
    double xmax = 0;
    for (int k = 0; k < c->n_in; k++) {
        in[k] = ag_tensor_new(g, c->ndim[k], c->shape[k]);
        for (size_t j = 0; in[k] && j < in[k]->size; j++) {
            in[k]->data[j] = (ag_real)vals[k][j];
            xmax = fmax(xmax, fabs(vals[k][j]));
        }
        ag_set_requires_grad(in[k], 1);
    }
    ag_tensor *y = build(g, in);
    char k2[256];
    if (!y) {
        printf("float_edges: %s: %s\n", key, ag_graph_error(g));
        exit(1);
    }
    snprintf(k2, sizeof k2, "%s/y", key);
    double *yd = calloc(y->size ? y->size : 1, sizeof *yd), *floor = calloc(y->size ? y->size : 1, sizeof *floor);
    scope sc = {.rowwise = !sweeping, .inputs = vals, .nin = sweeping ? c->n_in : 0};
    emit(k2, y->data, y->size, &sc, t, yd);
    if (ygot) memcpy(ygot, yd, y->size * sizeof *yd);
    /* A gradient may be off by eps |dy| |y| / |x| as well as by eps |dx|: a
     * backward reads the forward's rounded output (tanh's 1 - y^2 loses
     * dx's relative digits where y is near 1, not dy's), and |y| / |x| is
     * the size of dy/dx that the forward's values show.  |x| below 1
     * counts as 1. */
    double ymax = 0;
    for (size_t i = 0; i < y->size; i++) {
        double xi = 0;
        for (int k = 0; sweeping && k < c->n_in; k++) xi = fmax(xi, fabs(vals[k][i]));
        if (isfinite(yd[i]) && fabs(yd[i]) <= FLT_MAX) {
            floor[i] = fabs(yd[i]) / fmax(1, xi);
            ymax = fmax(ymax, fabs(yd[i]));
        }
    }
    ag_real *dy = malloc((y->size ? y->size : 1) * sizeof *dy);
    ag_rng r;
    ag_rng_seed(&r, 7);
    for (size_t i = 0; i < y->size; i++) dy[i] = sweeping ? 1 : (ag_real)(float)(2 * ag_rng_uniform(&r) - 1);
    if (y->requires_grad && ag_backward_from(g, y, dy) != AG_OK) {
        printf("float_edges: %s: backward: %s\n", key, ag_graph_error(g));
        exit(1);
    }
    sc.gscale = sweeping ? floor : NULL;
    sc.gscale_all = sweeping ? 0 : ymax / fmax(1, xmax); /* |dy| <= 1 */
    for (int k = 0; k < c->n_in && y->requires_grad; k++) {
        snprintf(k2, sizeof k2, "%s/dx%d", key, k);
        if (in[k]->grad) emit(k2, in[k]->grad, in[k]->size, &sc, t, k == 0 ? dxgot : NULL);
    }
    free(dy), free(yd), free(floor);
    ag_graph_free(g);
}

/* Where the double build itself overflows: along each sign of the grid,
 * from small magnitudes to large, a value that is finite and within
 * float's range and then, at the next magnitude, not finite at all is an
 * intermediate that overflowed (log(1 + e^x) in double at x = 1000, its
 * value 1000), not a result beyond range (e^x passes float's largest
 * before double's).  Fails, as a float value would. */
static void double_overflow(const char *name, const char *what, const double *v, tally *t)
{
    for (int sign = 0; sign < 2; sign++)
        for (size_t i = 1; i < NMAG; i++) {
            size_t at = 1 + i + sign * NMAG, before = at - 1;
            bool held = isfinite(v[before]) && fabs(v[before]) <= FLT_MAX;
            if (!held || isfinite(v[at])) continue;
            t->failed++;
            if (t->shown++ < 6)
                printf("  %s %s/sweep: %s is %.9g at x = %.9g, then %g at x = %.9g in double: an intermediate "
                       "overflows\n", fail_word, name, what, v[before], grid(before), v[at], grid(at));
        }
}

/* The sweep of an element-wise op: its first case whose inputs share a
 * shape, built by build (NULL: the case's own), on every tuple of grid
 * values, a case's worth at a time (each element of a chunk its own
 * tuple).  False when the op has no such case. */
static bool sweep(const char *name, const ag_op_desc *d, build_fn build, tally *t)
{
    const ag_op_case *c = NULL;
    for (int i = 0; i < d->ncases && !c; i++) {
        bool same = true;
        for (int k = 1; k < d->cases[i].n_in; k++)
            same = same && d->cases[i].ndim[k] == d->cases[i].ndim[0] &&
                   !memcmp(d->cases[i].shape[k], d->cases[i].shape[0], sizeof d->cases[i].shape[0]);
        if (same) c = &d->cases[i];
    }
    if (!c) return false;
    size_t n = ag__numel(c->ndim[0], c->shape[0]), tuples = 1;
    for (int k = 0; k < c->n_in; k++) tuples *= NGRID;
    double *vals[AG_MAX_SRC], *yd = calloc(n, sizeof(double)), *dxd = calloc(n, sizeof(double));
    double ygrid[NGRID], dxgrid[NGRID]; /* a unary op's double values along the grid */
    for (int k = 0; k < c->n_in; k++) vals[k] = calloc(n, sizeof(double));
    for (size_t first = 0; first < tuples; first += n) {
        /* element j of this chunk is tuple first + j (past the end: tuple 0) */
        for (size_t j = 0; j < n; j++) {
            size_t tu = first + j < tuples ? first + j : 0;
            for (int k = 0; k < c->n_in; k++, tu /= NGRID) vals[k][j] = (float)grid(tu % NGRID);
        }
        char key[160];
        snprintf(key, sizeof key, "%s/sweep/%zu", name, first / n);
        for (size_t j = 0; j < n; j++) yd[j] = dxd[j] = 0;
        run(c, build ? build : c->build, vals, key, true, t, yd, dxd);
        for (size_t j = 0; c->n_in == 1 && j < n && first + j < tuples; j++)
            ygrid[first + j] = yd[j], dxgrid[first + j] = dxd[j];
    }
    if (against && c->n_in == 1) {
        double_overflow(name, "y", ygrid, t);
        double_overflow(name, "dx", dxgrid, t);
    }
    for (int k = 0; k < c->n_in; k++) free(vals[k]);
    free(yd), free(dxd);
    return true;
}

/* An edge case: its inputs drawn in [lo, hi] (the gap kept around 0) from
 * a fixed seed, rounded to float. */
static void edge(const char *name, int i, const ag_op_case *c, build_fn build, tally *t)
{
    double *vals[AG_MAX_SRC];
    ag_rng r;
    ag_rng_seed(&r, 11 + (uint64_t)i);
    for (int k = 0; k < c->n_in; k++) {
        size_t n = ag__numel(c->ndim[k], c->shape[k]);
        vals[k] = calloc(n ? n : 1, sizeof(double));
        for (size_t j = 0; j < n; j++) {
            double v = c->lo + (c->hi - c->lo) * ag_rng_uniform(&r);
            if (v > -c->gap && v < c->gap) v = v < 0 ? -c->gap : c->gap;
            vals[k][j] = (float)v;
        }
    }
    char key[160];
    snprintf(key, sizeof key, "%s/edge %d '%s'", name, i, c->label);
    run(c, build, vals, key, false, t, NULL, NULL);
    for (int k = 0; k < c->n_in; k++) free(vals[k]);
}

static void report(const char *name, const char *what, const tally *t)
{
    if (against)
        printf("float_edges: %-15s %s: %ld values compared, %ld beyond float's range, %ld failed\n", name, what,
               t->compared, t->beyond, t->failed);
}

/* One op: swept when element-wise, then its edge cases; false when it
 * fails (or has nothing to be checked on).  Adds its counts to *all. */
static bool check_op(const ag_op_desc *d, tally *all)
{
    tally t = {0};
    if (!d->elementwise && !d->nedges) {
        if (against)
            printf("float_edges: %-15s FAIL: neither element-wise nor any edge case (.edges, "
                   "docs/contributing.md)\n", d->name);
        return false;
    }
    if (d->elementwise && !sweep(d->name, d, NULL, &t)) {
        if (against)
            printf("float_edges: %-15s FAIL: element-wise, but no case whose inputs share one shape to sweep\n",
                   d->name);
        return false;
    }
    for (int i = 0; i < d->nedges; i++) edge(d->name, i, &d->edges[i], d->edges[i].build, &t);
    char what[64];
    snprintf(what, sizeof what, "%s%d edge case(s)", d->elementwise ? "swept over the grid, " : "", d->nedges);
    report(d->name, what, &t);
    all->compared += t.compared, all->beyond += t.beyond, all->failed += t.failed;
    return t.failed == 0;
}

/* ---- the mutants ------------------------------------------------------- */

/* softplus as log(1 + exp(x)): exp overflows in float at x = 89 */
static ag_tensor *naive_softplus(ag_graph *g, ag_tensor *const *in)
{
    return ag_log(g, ag_shift(g, ag_exp(g, in[0]), 1));
}
/* softmax as exp(x) / sum exp(x), without the row's max subtracted */
static ag_tensor *softmax_no_max(ag_graph *g, ag_tensor *const *in)
{
    ag_tensor *e = ag_exp(g, in[0]);
    return ag_div(g, e, ag_sum(g, e, -1, 1));
}
/* log_softmax as log(softmax(x)): a probability that underflows gives -inf */
static ag_tensor *log_of_softmax(ag_graph *g, ag_tensor *const *in) { return ag_log(g, ag_softmax(g, in[0])); }

/* Each mutant on the cases of the op it stands for: whether it failed. */
static bool mutant(const char *name, const char *like, build_fn build)
{
    const ag_op_desc *d = ag_op_table[ag_op_find(like)];
    tally t = {0};
    fail_word = "caught";
    if (d->elementwise) sweep(name, d, build, &t);
    for (int i = 0; i < d->nedges; i++) edge(name, i, &d->edges[i], build, &t);
    if (against)
        printf("float_edges: mutant %s (%s's cases): %ld values compared, %ld failed: %s\n", name, like, t.compared,
               t.failed, t.failed ? "caught" : "NOT CAUGHT");
    fail_word = "FAIL";
    return t.failed > 0;
}

int main(int argc, char **argv)
{
    bool mutants = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--against") && i + 1 < argc) {
            against = !strcmp(argv[i + 1], "-") ? stdin : fopen(argv[i + 1], "r");
            if (!against) return fprintf(stderr, "float_edges: cannot read %s\n", argv[i + 1]), 2;
            i++;
        } else if (!strcmp(argv[i], "--op") && i + 1 < argc) {
            only_op = argv[++i];
            if (ag_op_find(only_op) <= 0) return fprintf(stderr, "float_edges: no op '%s'\n", only_op), 2;
        } else if (!strcmp(argv[i], "--mutants")) {
            mutants = true;
        } else {
            fprintf(stderr, "usage: float_edges [--op NAME] [--mutants] [--against FILE|-]\n");
            return 2;
        }
    }
    bool is_double = sizeof(ag_real) == sizeof(double);
    if (is_double == (against != NULL)) {
        fprintf(stderr, "float_edges: the double build writes, the float build compares (--against)\n");
        return 2;
    }
    ag__threads_off = true; /* the same sums in every run */
    int ops = 0, failed = 0;
    tally all = {0}; /* every op's values, for the last line */
    for (int op = 1; op < AG_OP_COUNT; op++) {
        if (only_op && strcmp(only_op, ag_op_table[op]->name)) continue;
        ops++;
        failed += !check_op(ag_op_table[op], &all);
    }
    int missed = 0;
    if (mutants) {
        missed += !mutant("naive_softplus", "exp", naive_softplus);
        missed += !mutant("softmax_no_max", "softmax", softmax_no_max);
        missed += !mutant("log_of_softmax", "log_softmax", log_of_softmax);
    }
    if (!against) return 0;
    printf("float edges: %d ops, %ld values compared with the double build, %ld beyond float's range, "
           "%d ops failed%s\n", ops, all.compared, all.beyond, failed,
           mutants ? (missed ? "; a mutant was NOT caught" : "; 3 mutants, each caught") : "");
    return failed || missed ? 1 : 0;
}
