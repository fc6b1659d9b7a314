/* ops/mul.c: y = a * b (element-wise), with broadcasting.
 *
 * forward:  y[i] = a[i'] * b[i'']
 * backward: da[i'] += dy[i] * b[i''],  db[i''] += dy[i] * a[i']
 *           (summed over the axes along which a or b was stretched) */
#include "core/internal.h"

static void mul_fwd(size_t n, const ag_real *a, size_t sa, const ag_real *b, size_t sb, ag_real *y)
{
    if (sa == 1 && sb == 1) { /* the common case, vectorised */
#pragma omp simd
        for (size_t i = 0; i < n; i++) y[i] = a[i] * b[i];
        return;
    }
    for (size_t i = 0; i < n; i++) y[i] = a[i * sa] * b[i * sb];
}

static void mul_bwd(size_t n, const ag_real *a, size_t sa, const ag_real *b, size_t sb,
                    const ag_real *y, const ag_real *dy, ag_real *da, ag_real *db)
{
    (void)y;
    if (sa == 1 && sb == 1) { /* the common case, vectorised */
        if (da)
#pragma omp simd
            for (size_t i = 0; i < n; i++) da[i] += dy[i] * b[i];
        if (db)
#pragma omp simd
            for (size_t i = 0; i < n; i++) db[i] += dy[i] * a[i];
        return;
    }
    if (da)
        for (size_t i = 0; i < n; i++) da[i * sa] += dy[i] * b[i * sb];
    if (db)
        for (size_t i = 0; i < n; i++) db[i * sb] += dy[i] * a[i * sa];
}

ag_tensor *ag_mul(ag_graph *g, ag_tensor *a, ag_tensor *b) { return ag__binary(g, AG_OP_MUL, a, b, mul_fwd); }

static void mul_backward(ag_graph *g, ag_tensor *y) { ag__binary_backward(g, y, mul_bwd); }

static ag_tensor *case_mul(ag_graph *g, ag_tensor *const *in) { return ag_mul(g, in[0], in[1]); }
static ag_tensor *case_square(ag_graph *g, ag_tensor *const *in) { return ag_mul(g, in[0], in[0]); }

static const ag_op_case cases[] = {
    {"[2, 3] * [2, 3]", 2, {2, 2}, {{2, 3}, {2, 3}}, -1, 1, 0, case_mul},
    {"[2, 3, 4] * [3, 1] broadcast", 2, {3, 2}, {{2, 3, 4}, {3, 1}}, -1, 1, 0, case_mul},
    {"[1, 4] * [] scalar", 2, {2, 0}, {{1, 4}, {0}}, -1, 1, 0, case_mul},
    {"x * x (one input used twice)", 1, {2}, {{3, 2}}, -1, 1, 0, case_square},
};

const ag_op_desc ag_op_mul = {.name = "mul", .backward = mul_backward, AG_CASES(cases)};
