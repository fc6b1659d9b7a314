/* ops/sub.c: y = a - b, with broadcasting.
 *
 * forward:  y[i] = a[i'] - b[i'']        (i', i'': i with stretched axes at 0)
 * backward: da[i'] += dy[i],  db[i''] -= dy[i]
 *           (summing dy over the axes along which a or b was stretched) */
#include "core/blocks.h"
#include "core/internal.h"

static inline ag_real minus(ag_real a, ag_real b) { return a - b; }

AG_ISA_ZIP(sub_fwd, minus) /* contiguous runs as wide as the CPU's vectors */

/* d(a - b)/da = 1, d(a - b)/db = -1. */
static void sub_bwd(size_t n, const ag_real *a, size_t sa, const ag_real *b, size_t sb, const ag_real *y,
                    const ag_real *dy, ag_real *da, bool fa, ag_real *db, bool fb)
{
    (void)a, (void)b, (void)y;
    if (da)
        for (size_t i = 0; i < n; i++) da[i * sa] = fa ? dy[i] : da[i * sa] + dy[i];
    if (db)
        for (size_t i = 0; i < n; i++) db[i * sb] = fb ? -dy[i] : db[i * sb] - dy[i];
}

ag_tensor *ag_sub(ag_graph *g, ag_tensor *a, ag_tensor *b) { return ag__binary(g, AG_OP_SUB, a, b, sub_fwd); }

static void sub_backward(ag_graph *g, ag_tensor *y) { ag__binary_backward(g, y, sub_bwd); }

static ag_tensor *case_sub(ag_graph *g, ag_tensor *const *in) { return ag_sub(g, in[0], in[1]); }
static ag_tensor *case_self(ag_graph *g, ag_tensor *const *in) { return ag_sub(g, in[0], in[0]); }

static const ag_op_case cases[] = {
    {"[2, 3] - [2, 3]", 2, {2, 2}, {{2, 3}, {2, 3}}, -1, 1, 0, case_sub},
    {"[2, 3, 4] - [4] broadcast", 2, {3, 1}, {{2, 3, 4}, {4}}, -1, 1, 0, case_sub},
    {"[3, 1] - [2, 1, 4] both stretch", 2, {2, 3}, {{3, 1}, {2, 1, 4}}, -1, 1, 0, case_sub},
    {"[1] - [] size-1 and scalar", 2, {1, 0}, {{1}, {0}}, -1, 1, 0, case_sub},
    {"x - x (one input used twice)", 1, {2}, {{2, 3}}, -1, 1, 0, case_self},
};

const ag_op_desc ag_op_sub = {.name = "sub", .backward = sub_backward, .grad_passes_to_src0 = true,
                               AG_CASES(cases)};
