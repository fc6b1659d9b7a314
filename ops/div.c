/* ops/div.c: y = a / b (element-wise), with broadcasting.
 *
 * forward:  y[i] = a[i'] / b[i'']
 * backward: da[i'] += dy[i] / b[i'']
 *           db[i''] -= dy[i] * (a[i'] / b[i'']) / b[i'']     (= dy * y / b)
 *           (summed over the axes along which a or b was stretched)
 *
 * Division by zero follows IEEE 754, as in PyTorch: x / 0 is +-inf (0 / 0 is
 * NaN), and so are the gradients there. */
#include "core/blocks.h"
#include "core/internal.h"

static inline ag_real over(ag_real a, ag_real b) { return a / b; }

AG_ISA_ZIP(div_fwd, over) /* contiguous runs as wide as the CPU's vectors */

/* d(a / b)/da = 1 / b,  d(a / b)/db = -a / b^2, written (a / b) / b so that
 * b * b cannot overflow (PyTorch's form too). */
static void div_bwd(size_t n, const ag_real *a, size_t sa, const ag_real *b, size_t sb, const ag_real *y,
                    const ag_real *dy, ag_real *da, bool fa, ag_real *db, bool fb)
{
    (void)y;
    if (da)
        for (size_t i = 0; i < n; i++) {
            ag_real v = dy[i] / b[i * sb];
            da[i * sa] = fa ? v : da[i * sa] + v;
        }
    if (db)
        for (size_t i = 0; i < n; i++) {
            ag_real v = dy[i] * (a[i * sa] / b[i * sb] / b[i * sb]);
            db[i * sb] = fb ? -v : db[i * sb] - v;
        }
}

ag_tensor *ag_div(ag_graph *g, ag_tensor *a, ag_tensor *b) { return ag__binary(g, AG_OP_DIV, a, b, div_fwd); }

static void div_backward(ag_graph *g, ag_tensor *y) { ag__binary_backward(g, y, div_bwd); }

static ag_tensor *case_div(ag_graph *g, ag_tensor *const *in) { return ag_div(g, in[0], in[1]); }
static ag_tensor *case_self(ag_graph *g, ag_tensor *const *in) { return ag_div(g, in[0], in[0]); }

/* Inputs in [-2, -0.5] u [0.5, 2] (gap 0.5): b stays away from 0, where
 * 1 / b blows up and finite differences say nothing. */
static const ag_op_case cases[] = {
    {"[2, 3] / [2, 3]", 2, {2, 2}, {{2, 3}, {2, 3}}, -2, 2, 0.5, case_div},
    {"[2, 3, 4] / [3, 1] broadcast", 2, {3, 2}, {{2, 3, 4}, {3, 1}}, -2, 2, 0.5, case_div},
    {"[4] / [2, 1, 1] both stretch", 2, {1, 3}, {{4}, {2, 1, 1}}, -2, 2, 0.5, case_div},
    {"[1, 4] / [] size-1 and scalar", 2, {2, 0}, {{1, 4}, {0}}, -2, 2, 0.5, case_div},
    {"x / x (one input used twice)", 1, {2}, {{3, 2}}, -2, 2, 0.5, case_self},
};

const ag_op_desc ag_op_div = {.name = "div", .backward = div_backward, AG_CASES(cases)};
