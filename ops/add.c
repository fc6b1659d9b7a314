/* ops/add.c: y = a + b, with broadcasting.
 *
 * forward:  y[i] = a[i'] + b[i'']        (i', i'': i with stretched axes at 0)
 * backward: da[i'] += dy[i],  db[i''] += dy[i]
 *           (summing dy over the axes along which a or b was stretched) */
#include "core/internal.h"

/* The common case, a and b of y's shape: element-wise loops compiled once
 * per instruction set (AG_ISA_CLONES), the same bits on every level. */
static inline AG_ALWAYS_INLINE void add_same(size_t n, const ag_real *a, const ag_real *b, ag_real *y)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}
AG_ISA_CLONES(void, add_same, (size_t n, const ag_real *a, const ag_real *b, ag_real *y), add_same(n, a, b, y))

/* dx[i] += dy[i] */
static inline AG_ALWAYS_INLINE void add_into(size_t n, const ag_real *dy, ag_real *dx)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] += dy[i];
}
AG_ISA_CLONES(void, add_into, (size_t n, const ag_real *dy, ag_real *dx), add_into(n, dy, dx))

static void add_fwd(size_t n, const ag_real *a, size_t sa, const ag_real *b, size_t sb, ag_real *y)
{
    if (sa == 1 && sb == 1) {
        AG_ISA_CALL(add_same, (n, a, b, y));
        return;
    }
    for (size_t i = 0; i < n; i++) y[i] = a[i * sa] + b[i * sb];
}

static void add_bwd(size_t n, const ag_real *a, size_t sa, const ag_real *b, size_t sb,
                    const ag_real *y, const ag_real *dy, ag_real *da, ag_real *db)
{
    (void)a, (void)b, (void)y;
    if (da && sa == 1)
        AG_ISA_CALL(add_into, (n, dy, da));
    else if (da)
        for (size_t i = 0; i < n; i++) da[i * sa] += dy[i];
    if (db && sb == 1)
        AG_ISA_CALL(add_into, (n, dy, db));
    else if (db)
        for (size_t i = 0; i < n; i++) db[i * sb] += dy[i];
}

ag_tensor *ag_add(ag_graph *g, ag_tensor *a, ag_tensor *b) { return ag__binary(g, AG_OP_ADD, a, b, add_fwd); }

static void add_backward(ag_graph *g, ag_tensor *y) { ag__binary_backward(g, y, add_bwd); }

static ag_tensor *case_add(ag_graph *g, ag_tensor *const *in) { return ag_add(g, in[0], in[1]); }

static const ag_op_case cases[] = {
    {"[2, 3] + [2, 3]", 2, {2, 2}, {{2, 3}, {2, 3}}, -1, 1, 0, case_add},
    {"[2, 3, 4] + [4] broadcast", 2, {3, 1}, {{2, 3, 4}, {4}}, -1, 1, 0, case_add},
    {"[2, 1, 4] + [3, 1] both stretch", 2, {3, 2}, {{2, 1, 4}, {3, 1}}, -1, 1, 0, case_add},
    {"[1] + [] size-1 and scalar", 2, {1, 0}, {{1}, {0}}, -1, 1, 0, case_add},
};

const ag_op_desc ag_op_add = {.name = "add", .backward = add_backward, .grad_passes_to_src0 = true,
                               AG_CASES(cases)};
