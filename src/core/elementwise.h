/* src/core/elementwise.h: an element-wise op written as its scalar math.
 *
 * An element-wise op of ops/ is two plain C functions, its value and its
 * derivative, then one line:
 *
 *   static ag_real tanh_f(ag_real x) { return tanh(x); }                 y = tanh(x)
 *   static ag_real tanh_df(ag_real x, ag_real y) { return 1 - y * y; }   dy/dx
 *   AG_UNARY_OP(tanh, AG_OP_TANH)
 *
 * The line makes the rest, the same for every op:
 *   - the reference forward, y_i = f(x_i), and backward, dx_i = dy_i
 *     df(x_i, y_i) stored into a fresh gradient buffer or added (+=) into
 *     one that holds other contributions: plain scalar loops over f and df;
 *   - the public function ag_tanh(g, x), its backward and its descriptor
 *     ag_op_tanh (with the op's gradient-check cases, an array `cases`
 *     defined above the line);
 *   - the threads (src/core/unary.c cuts the arrays in pieces).
 * An op with a fast kernel in the kernel room (src/kernels/elementwise.c:
 * vectors, one clone per instruction set, the float build's vectorised
 * exp and tanh) reaches it through its one entry in that room's table;
 * the engine runs it when ag__fast() (AG_KERNELS_FAST, the default), and
 * the reference otherwise.  A new op needs no kernel: without one, it runs
 * its reference in both modes.
 *
 * AG_UNARY_OP_ARG(scale, AG_OP_SCALE): the same for an op with a real
 * argument c (y = c x): f(x, c), df(x, y, c), and ag_scale(g, x, c).
 * AG_BINARY_OP(mul, AG_OP_MUL): y = f(a, b) with broadcasting, and its two
 * partial derivatives, mul_da(a, b, y) = dy/da and mul_db(a, b, y) = dy/db:
 * the backward sums dy_i da_i over the axes along which an input was
 * stretched. */
#ifndef AG_CORE_ELEMENTWISE_H
#define AG_CORE_ELEMENTWISE_H

#include "core/internal.h"

/* An op's reference kernels, made by the macros below from its math. */
typedef struct ag__unary_ref {
    ag_unary_fwd fwd;
    ag_unary_bwd bwd;
} ag__unary_ref;
typedef struct ag__binary_ref {
    ag_binary_fwd fwd;
    ag_binary_bwd bwd;
} ag__binary_ref;

/* y = op(x), by the kernel room's kernel for `op` when there is one and
 * ag__fast(), else by ref (src/core/unary.c); c is y->farg[0]. */
ag_tensor *ag__unary_op(ag_graph *g, int op, ag_tensor *x, const ag__unary_ref *ref, double c);
/* Its backward: the kernel's when the forward ran it, else ref's. */
void ag__unary_op_backward(ag_graph *g, ag_tensor *y, const ag__unary_ref *ref);
/* y = op(a, b) with broadcasting, and its backward, likewise
 * (src/core/broadcast.c). */
ag_tensor *ag__binary_op(ag_graph *g, int op, ag_tensor *a, ag_tensor *b, const ag__binary_ref *ref);
void ag__binary_op_backward(ag_graph *g, ag_tensor *y, const ag__binary_ref *ref);

/* Start of piece t of nt of n elements, on a 16-element boundary (a cache
 * line of floats: threads never write the same line).  Element-wise ops
 * give the same values however the pieces fall. */
static inline size_t ag__piece(size_t n, int t, int nt)
{
    size_t at = n / 16 * (size_t)t / (size_t)nt * 16;
    return t == nt ? n : at;
}

/* dx_i = dy_i d_i (fresh) or dx_i += dy_i d_i, d_i the derivative at i. */
#define AG__GRAD_LOOP(n, dx, dy, fresh, d)                                                    \
    do {                                                                                      \
        if (fresh)                                                                            \
            for (size_t i = 0; i < (n); i++) (dx)[i] = (dy)[i] * (d);                         \
        else                                                                                  \
            for (size_t i = 0; i < (n); i++) (dx)[i] += (dy)[i] * (d);                        \
    } while (0)

/* The descriptor; __VA_ARGS__ adds fields (.grad_in_place = true). */
#define AG__UNARY_DESC(fn, ...)                                                             \
    static void fn##_backward(ag_graph *g, ag_tensor *y) { ag__unary_op_backward(g, y, &fn##_ref); } \
    const ag_op_desc ag_op_##fn = {.name = #fn, .backward = fn##_backward, AG_CASES(cases), .elementwise = true, __VA_ARGS__};

#define AG_UNARY_OP(fn, OP, ...)                                                            \
    static void fn##_fwd(size_t n, const ag_real *x, ag_real *y, const double *farg)        \
    {                                                                                         \
        (void)farg;                                                                           \
        for (size_t i = 0; i < n; i++) y[i] = fn##_f(x[i]);                                 \
    }                                                                                         \
    static void fn##_bwd(size_t n, const ag_real *x, const ag_real *y, const ag_real *dy, ag_real *dx, \
                           bool fresh, const double *farg)                                    \
    {                                                                                         \
        (void)farg;                                                                           \
        AG__GRAD_LOOP(n, dx, dy, fresh, fn##_df(x[i], y[i]));                               \
    }                                                                                         \
    static const ag__unary_ref fn##_ref = {fn##_fwd, fn##_bwd};                         \
    ag_tensor *ag_##fn(ag_graph *g, ag_tensor *x) { return ag__unary_op(g, OP, x, &fn##_ref, 0); } \
    AG__UNARY_DESC(fn, __VA_ARGS__)

#define AG_UNARY_OP_ARG(fn, OP, ...)                                                        \
    static void fn##_fwd(size_t n, const ag_real *x, ag_real *y, const double *farg)        \
    {                                                                                         \
        ag_real c = (ag_real)farg[0];                                                         \
        for (size_t i = 0; i < n; i++) y[i] = fn##_f(x[i], c);                              \
    }                                                                                         \
    static void fn##_bwd(size_t n, const ag_real *x, const ag_real *y, const ag_real *dy, ag_real *dx, \
                           bool fresh, const double *farg)                                    \
    {                                                                                         \
        ag_real c = (ag_real)farg[0];                                                         \
        AG__GRAD_LOOP(n, dx, dy, fresh, fn##_df(x[i], y[i], c));                            \
    }                                                                                         \
    static const ag__unary_ref fn##_ref = {fn##_fwd, fn##_bwd};                         \
    ag_tensor *ag_##fn(ag_graph *g, ag_tensor *x, double c) { return ag__unary_op(g, OP, x, &fn##_ref, c); } \
    AG__UNARY_DESC(fn, __VA_ARGS__)

/* A binary op's runs: a and b at strides sa, sb (0: stretched along the
 * run); a fresh da or db (stride 1) is stored, else added into. */
#define AG_BINARY_OP(fn, OP, ...)                                                           \
    static void fn##_fwd(size_t n, const ag_real *a, size_t sa, const ag_real *b, size_t sb, ag_real *y) \
    {                                                                                         \
        for (size_t i = 0; i < n; i++) y[i] = fn##_f(a[i * sa], b[i * sb]);                 \
    }                                                                                         \
    static void fn##_bwd(size_t n, const ag_real *a, size_t sa, const ag_real *b, size_t sb, const ag_real *y, \
                           const ag_real *dy, ag_real *da, bool fa, ag_real *db, bool fb)     \
    {                                                                                         \
        for (size_t i = 0; da && i < n; i++) {                                                \
            ag_real v = dy[i] * fn##_da(a[i * sa], b[i * sb], y[i]);                        \
            da[i * sa] = fa ? v : da[i * sa] + v;                                             \
        }                                                                                     \
        for (size_t i = 0; db && i < n; i++) {                                                \
            ag_real v = dy[i] * fn##_db(a[i * sa], b[i * sb], y[i]);                        \
            db[i * sb] = fb ? v : db[i * sb] + v;                                             \
        }                                                                                     \
    }                                                                                         \
    static const ag__binary_ref fn##_ref = {fn##_fwd, fn##_bwd};                        \
    ag_tensor *ag_##fn(ag_graph *g, ag_tensor *a, ag_tensor *b) { return ag__binary_op(g, OP, a, b, &fn##_ref); } \
    static void fn##_backward(ag_graph *g, ag_tensor *y) { ag__binary_op_backward(g, y, &fn##_ref); } \
    const ag_op_desc ag_op_##fn = {.name = #fn, .backward = fn##_backward, AG_CASES(cases), .elementwise = true, __VA_ARGS__};

#endif
