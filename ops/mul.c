/* ops/mul.c: y = a * b (element-wise), with broadcasting.
 *
 * forward:  y[i] = a[i'] * b[i'']
 * backward: da[i'] += dy[i] * b[i''],  db[i''] += dy[i] * a[i']
 *           (summed over the axes along which a or b was stretched) */
#include "core/blocks.h"
#include "core/internal.h"

static inline ag_real times(ag_real a, ag_real b) { return a * b; }

AG_ISA_ZIP(mul_fwd, times) /* contiguous runs as wide as the CPU's vectors */

/* d_i += u_i v_i for i < n, or d_i = u_i v_i where `fresh`, in blocks of
 * 16 (core/blocks.h), one clone per instruction set (no multiply-add
 * fuses: the same bits in each). */
#define MAC_PARAMS (size_t n, const ag_real *u, const ag_real *v, ag_real *d, bool fresh)
static inline AG_ALWAYS_INLINE void mac MAC_PARAMS
{
    ag_real t[AG_BLOCK];
    size_t i = 0;
    for (; i + AG_BLOCK <= n; i += AG_BLOCK) {
        if (fresh)
            for (int l = 0; l < AG_BLOCK; l++) t[l] = u[i + l] * v[i + l];
        else
            for (int l = 0; l < AG_BLOCK; l++) t[l] = d[i + l] + u[i + l] * v[i + l];
        memcpy(d + i, t, sizeof t);
    }
    for (; i < n; i++) d[i] = fresh ? u[i] * v[i] : d[i] + u[i] * v[i];
}
AG_ISA_CLONES(void, mac, MAC_PARAMS, mac(n, u, v, d, fresh))

static void mul_bwd(size_t n, const ag_real *a, size_t sa, const ag_real *b, size_t sb, const ag_real *y,
                    const ag_real *dy, ag_real *da, bool fa, ag_real *db, bool fb)
{
    (void)y;
    if (sa == 1 && sb == 1) { /* the common case, as wide as the CPU's vectors */
        if (da) AG_ISA_CALL(mac, (n, dy, b, da, fa));
        if (db) AG_ISA_CALL(mac, (n, dy, a, db, fb));
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
