/* ops/add.c: y = a + b, with broadcasting.
 *
 * forward:  y[i] = a[i'] + b[i'']        (i', i'': i with stretched axes at 0)
 * backward: da[i'] += dy[i],  db[i''] += dy[i]
 *           (summing dy over the axes along which a or b was stretched) */
#include "core/blocks.h"
#include "core/internal.h"

static inline ag_real plus(ag_real a, ag_real b) { return a + b; }

AG_ISA_ZIP(add_fwd, plus) /* contiguous runs as wide as the CPU's vectors */

/* Rows of y = a + b (ag_binary_rows: row r at a + r ra, b + r rb; a bias
 * has row stride 0), all in one clone per instruction set: a [R, C] + [C]
 * pays the dispatch once, not once per row. */
#define ADD_ROWS_PARAMS (size_t rows, size_t n, const ag_real *a, size_t ra, const ag_real *b, size_t rb, ag_real *y)
static inline AG_ALWAYS_INLINE void add_rows_loop ADD_ROWS_PARAMS
{
    for (size_t r = 0; r < rows; r++) ag__zip(n, a + r * ra, b + r * rb, y + r * n, plus);
}
AG_ISA_CLONES(void, add_rows_loop, ADD_ROWS_PARAMS, add_rows_loop(rows, n, a, ra, b, rb, y))
static void add_rows ADD_ROWS_PARAMS { AG_ISA_CALL(add_rows_loop, (rows, n, a, ra, b, rb, y)); }

/* dx[i] += dy[i], compiled once per instruction set (AG_ISA_CLONES), the
 * same bits on every level */
static inline AG_ALWAYS_INLINE void add_into(size_t n, const ag_real *dy, ag_real *dx)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] += dy[i];
}
AG_ISA_CLONES(void, add_into, (size_t n, const ag_real *dy, ag_real *dx), add_into(n, dy, dx))

void ag__grad_pass(size_t n, const ag_real *dy, ag_real *d, bool fresh)
{
    if (fresh) memcpy(d, dy, n * sizeof *d);
    else AG_ISA_CALL(add_into, (n, dy, d));
}

/* d_i (+)= dy_i at stride s: a fresh d (stride 1) is a copy of dy. */
static void pass_on(size_t n, const ag_real *dy, ag_real *d, size_t s, bool fresh)
{
    if (fresh || s == 1)
        ag__grad_pass(n, dy, d, fresh);
    else
        for (size_t i = 0; i < n; i++) d[i * s] += dy[i];
}

static void add_bwd(size_t n, const ag_real *a, size_t sa, const ag_real *b, size_t sb, const ag_real *y,
                    const ag_real *dy, ag_real *da, bool fa, ag_real *db, bool fb)
{
    (void)a, (void)b, (void)y;
    if (da) pass_on(n, dy, da, sa, fa);
    if (db) pass_on(n, dy, db, sb, fb);
}

ag_tensor *ag_add(ag_graph *g, ag_tensor *a, ag_tensor *b)
{
    return ag__binary_rows(g, AG_OP_ADD, a, b, add_fwd, add_rows);
}

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
