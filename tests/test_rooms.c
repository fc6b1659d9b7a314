/* tests/test_rooms.c: the element-wise ops' two rooms and the poisoned
 * gradient buffers.
 *
 *   - each element-wise op's fast kernel (src/kernels/elementwise.c) gives
 *     its reference's values (ops/<name>.c, AG_KERNELS_REFERENCE), forward
 *     and backward, on long runs, broadcasts and scalars: to within 1e-13
 *     relative in double and 2e-6 in float (the vectorised exp, log, tanh
 *     and GELU are within a few ulp of libm), and the reference runs when
 *     asked for (a float exp whose bits differ between the two);
 *   - a GELU made by the kernel (its slope kept) is differentiated by that
 *     kernel's backward even when the mode changes before backward;
 *   - in a poisoned graph, a fresh gradient buffer is NaN, and each op's
 *     gradient check still passes. */
#include "common.h"

#include "core/internal.h"

#include <string.h>

#ifdef AG_CHECKS
#define AG_CHECKS_BUILD 1 /* every graph poisoned */
#else
#define AG_CHECKS_BUILD 0
#endif
#define PI 3.14159265358979323846

static void zero_grad(ag_tensor *t) { memset(t->grad, 0, t->size * sizeof(ag_real)); }

enum { N = 37 * 5 }; /* [37, 5]: whole blocks of 16 and a rest */

typedef ag_tensor *(*unary_fn)(ag_graph *, ag_tensor *);
typedef ag_tensor *(*binary_fn)(ag_graph *, ag_tensor *, ag_tensor *);

static ag_tensor *scale_by_3(ag_graph *g, ag_tensor *x) { return ag_scale(g, x, 3); }
static ag_tensor *shift_by_2(ag_graph *g, ag_tensor *x) { return ag_shift(g, x, -2); }

/* One run: y = op(...) at the inputs in s, loss = sum(y * w) with w
 * fixed; y and the inputs' gradients copied out (out: y then each input's
 * gradient).  The op is called on 1 * x, so that its backward meets a
 * fresh buffer. */
typedef struct run {
    ag_real out[4 * N];
    size_t n, end[3]; /* where y, dx and dz end in out */
    int parts;
} run;

static void one_run(ag_kernels mode, unary_fn u, binary_fn b, ag_tensor *x, ag_tensor *z, run *r)
{
    ag_set_kernels(mode);
    ag_graph *g = ag_graph_new();
    zero_grad(x);
    if (z) zero_grad(z);
    ag_tensor *xi = ag_scale(g, x, 1), *y = u ? u(g, xi) : b(g, xi, ag_scale(g, z, 1));
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    ag_real w[N];
    for (size_t i = 0; i < y->size; i++) w[i] = (ag_real)(0.25 + 0.5 * (double)(i % 7) / 7);
    ag_tensor *loss = ag_sum_all(g, ag_mul(g, y, ag_tensor_from(g, y->ndim, y->shape, w)));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    r->n = 0, r->parts = 0;
    memcpy(r->out, y->data, y->size * sizeof(ag_real)), r->n += y->size, r->end[r->parts++] = r->n;
    memcpy(r->out + r->n, x->grad, x->size * sizeof(ag_real)), r->n += x->size, r->end[r->parts++] = r->n;
    if (z) memcpy(r->out + r->n, z->grad, z->size * sizeof(ag_real)), r->n += z->size, r->end[r->parts++] = r->n;
    ag_graph_free(g);
    ag_set_kernels(AG_KERNELS_FAST);
}

static void expect_rooms_agree(const char *name, unary_fn u, binary_fn b, ag_tensor *x, ag_tensor *z)
{
    run fast, ref;
    one_run(AG_KERNELS_FAST, u, b, x, z, &fast);
    one_run(AG_KERNELS_REFERENCE, u, b, x, z, &ref);
    cr_assert_eq(fast.n, ref.n);
    /* within tol of the largest value of y, dx or dz: 1 - y^2 near y = 1
     * (tanh), and gradients summed over a broadcast, amplify the ulps that
     * the inputs differ by */
    double tol = TOL(1e-13, 2e-6);
    for (int p = 0, i = 0; p < fast.parts; p++) {
        double big = 0;
        for (size_t k = (size_t)i; k < ref.end[p]; k++) big = fmax(big, fabs(ref.out[k]));
        for (; (size_t)i < ref.end[p]; i++) {
            double f = fast.out[i], r = ref.out[i];
            cr_assert(fabs(f - r) <= tol * big || (isnan(f) && isnan(r)),
                      "%s: value %d: kernel %.17g, reference %.17g", name, i, f, r);
        }
    }
}

static ag_tensor *filled(ag_store *s, const char *name, int ndim, const int *shape, double lo, double hi,
                         uint64_t seed)
{
    ag_tensor *t = ag_param(s, name, ndim, shape);
    cr_assert_not_null(t);
    ag_rng r;
    ag_rng_seed(&r, seed);
    for (size_t i = 0; i < t->size; i++) {
        double v = lo + (hi - lo) * ag_rng_uniform(&r);
        t->data[i] = (ag_real)(fabs(v) < 0.05 ? 0.05 : v); /* off relu's kink and div's pole */
    }
    return t;
}

Test(rooms, every_unary_kernel_gives_its_references_values)
{
    static const struct { const char *name; unary_fn f; double lo, hi; } ops[] = {
        {"exp", ag_exp, -8, 8},   {"log", ag_log, 0.01, 50},     {"sqrt", ag_sqrt, 0.01, 50},
        {"tanh", ag_tanh, -6, 6}, {"relu", ag_relu, -3, 3},      {"gelu", ag_gelu, -6, 6},
        {"gelu_tanh", ag_gelu_tanh, -6, 6}, {"neg", ag_neg, -3, 3}, {"scale", scale_by_3, -3, 3},
        {"shift", shift_by_2, -3, 3},
    };
    ag_store *s = ag_store_new();
    static const int big[2] = {37, 5}, one[1] = {1};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        ag_tensor *x = filled(s, ops[k].name, 2, big, ops[k].lo, ops[k].hi, 11 + k);
        expect_rooms_agree(ops[k].name, ops[k].f, NULL, x, NULL);
        char scalar[32];
        snprintf(scalar, sizeof scalar, "%s[1]", ops[k].name);
        expect_rooms_agree(scalar, ops[k].f, NULL, filled(s, scalar, 1, one, ops[k].lo, ops[k].hi, 3), NULL);
    }
    ag_store_free(s);
}

Test(rooms, every_binary_kernel_gives_its_references_values)
{
    static const struct { const char *name; binary_fn f; } ops[] = {
        {"add", ag_add}, {"sub", ag_sub}, {"mul", ag_mul}, {"div", ag_div},
    };
    /* same shapes; a row stretched over the rows (a bias); a column; both stretched */
    static const int shapes[4][2][2] = {{{37, 5}, {37, 5}}, {{37, 5}, {1, 5}}, {{37, 5}, {37, 1}}, {{37, 1}, {1, 5}}};
    ag_store *s = ag_store_new();
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        for (int c = 0; c < 4; c++) {
            char na[32], nb[32];
            snprintf(na, sizeof na, "%s a%d", ops[k].name, c), snprintf(nb, sizeof nb, "%s b%d", ops[k].name, c);
            ag_tensor *a = filled(s, na, 2, shapes[c][0], -3, 3, 5 + k), *b = filled(s, nb, 2, shapes[c][1], -3, 3, 9 + c);
            expect_rooms_agree(na, NULL, ops[k].f, a, b);
        }
    ag_store_free(s);
}

#ifndef AG_DOUBLE
/* The reference mode runs the scalar loops: the float build's fast exp
 * (kernels/fastmath.c, within 1 ulp) and libm's correctly rounded one
 * differ somewhere on a sweep. */
Test(rooms, the_reference_mode_runs_the_reference)
{
    enum { M = 4096 };
    static const int shape[1] = {M};
    ag_real v[M];
    for (int i = 0; i < M; i++) v[i] = (ag_real)(-20 + 40.0 * i / M);
    ag_real y[2][M];
    for (int mode = 0; mode < 2; mode++) {
        ag_set_kernels(mode ? AG_KERNELS_REFERENCE : AG_KERNELS_FAST);
        ag_graph *g = ag_graph_new();
        ag_tensor *e = ag_exp(g, ag_tensor_from(g, 1, shape, v));
        cr_assert_not_null(e);
        memcpy(y[mode], e->data, sizeof y[mode]);
        ag_graph_free(g);
    }
    ag_set_kernels(AG_KERNELS_FAST);
    int differ = 0;
    for (int i = 0; i < M; i++) {
        differ += y[0][i] != y[1][i];
        cr_assert_eq(y[1][i], (float)exp((double)v[i]), "exp(%.9g)", (double)v[i]);
    }
    cr_assert_gt(differ, 0, "the two modes gave the same bits for all %d exps", M);
}
#endif

/* A GELU whose forward ran the kernel keeps its slope; its backward uses
 * it even when the mode is the reference by then (and the other way). */
Test(rooms, gelu_is_differentiated_by_the_room_that_made_it)
{
    static const int shape[1] = {40};
    ag_store *s = ag_store_new();
    ag_tensor *x = filled(s, "x", 1, shape, -4, 4, 2);
    ag_real want[40];
    for (int i = 0; i < 40; i++) {
        double v = x->data[i], phi = exp(-0.5 * v * v) / sqrt(2 * PI);
        want[i] = (ag_real)(0.5 * (1 + erf(v / sqrt(2))) + v * phi);
    }
    for (int first = 0; first < 2; first++) {
        ag_set_kernels(first ? AG_KERNELS_REFERENCE : AG_KERNELS_FAST);
        ag_graph *g = ag_graph_new();
        zero_grad(x);
        ag_tensor *y = ag_sum_all(g, ag_gelu(g, ag_scale(g, x, 1)));
        ag_set_kernels(first ? AG_KERNELS_FAST : AG_KERNELS_REFERENCE);
        cr_assert_eq(ag_backward(g, y), AG_OK, "%s", ag_graph_error(g));
        for (int i = 0; i < 40; i++)
            cr_assert_float_eq(x->grad[i], want[i], TOL(1e-12, 2e-6), "x = %g", (double)x->data[i]);
        ag_graph_free(g);
    }
    ag_set_kernels(AG_KERNELS_FAST);
    ag_store_free(s);
}

/* A poisoned graph hands out fresh buffers full of NaN; an unpoisoned one
 * hands out the arena's memory (unless the build is a checking one). */
Test(rooms, a_poisoned_graph_fills_fresh_buffers_with_nan)
{
    static const int shape[1] = {20};
    for (int on = 0; on < 2; on++) {
        ag_graph *g = ag_graph_new();
        ag__graph_poison(g, on);
        cr_assert_eq(ag__graph_poisoned(g), on || AG_CHECKS_BUILD);
        ag_tensor *x = ag_tensor_new(g, 1, shape);
        ag_set_requires_grad(x, 1);
        ag_tensor *h = ag_scale(g, x, 2), *loss = ag_sum_all(g, ag_exp(g, h));
        cr_assert_not_null(loss);
        cr_assert_eq(ag_backward(g, loss), AG_OK);
        for (int i = 0; i < 20; i++) cr_assert_float_eq(x->grad[i], 2, 1e-6); /* every fresh buffer stored */
        bool fresh;
        ag_graph_reset(g);
        ag_tensor *t = ag_tensor_new(g, 1, shape);
        t->grad = ag__alloc(g, 20 * sizeof(ag_real)); /* reserved, nothing written: as backward leaves it */
        ag__impl(t)->unset = true;
        ag_real *d = ag__grad_fresh(g, t, &fresh);
        cr_assert(fresh);
        if (ag__graph_poisoned(g))
            for (int i = 0; i < 20; i++) cr_assert(isnan(d[i]), "element %d of a fresh buffer is %g", i, (double)d[i]);
        ag_graph_free(g);
    }
}

#ifdef AG_DOUBLE
/* The cases of every element-wise op pass in both modes (gradcheck:
 * poisoned, twice across a reset, on parameters and on intermediates). */
Test(rooms, every_elementwise_op_passes_its_cases_in_both_modes)
{
    static const char *names[] = {"add", "sub", "mul", "div", "scale", "shift", "neg", "exp",
                                  "log", "sqrt", "tanh", "relu", "gelu", "gelu_tanh"};
    for (int mode = 0; mode < 2; mode++) {
        ag_set_kernels(mode ? AG_KERNELS_REFERENCE : AG_KERNELS_FAST);
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
            int op = ag_op_find(names[k]);
            cr_assert_geq(op, 0, "%s", names[k]);
            for (int i = 0; i < ag_op_case_count(op); i++) {
                char err[256];
                ag_gradcheck_result r;
                cr_expect_eq(ag_op_check(op, i, 3, NULL, &r, err, sizeof err), AG_OK, "%s case %d (%s mode): %s",
                             names[k], i, mode ? "reference" : "fast", err);
            }
        }
    }
    ag_set_kernels(AG_KERNELS_FAST);
}
#endif
