/* src/core/blocks.h: element-wise loops that the compiler vectorises at -O2.
 *
 *   ag__map:      y_i   = f(x_i)                 for i < n  (y may be x)
 *   ag__map_grad: dx_i += f(x_i, y_i, dy_i)      for i < n
 *                 (dx_i = f(...) when dx is fresh: nothing written in it yet)
 *
 * At -O2 GCC vectorises only a loop that the vector code replaces whole
 * (its cheapest cost model): not one of n iterations, which would need a
 * scalar remainder and a run-time check that y and x do not overlap.  So
 * these walk the arrays in blocks of 16 (one loop of a fixed count per
 * block, into a local buffer that cannot overlap anything), and send the
 * last, shorter block through zero-padded copies.  f is a static inline
 * function of the caller's; inlined here, its body becomes the vector
 * loop's.  A select in f (c ? a : b) becomes a vector blend only where GCC
 * may assume that comparisons do not trap: a file whose f has one says
 * #pragma GCC optimize("no-trapping-math") before it includes this header
 * (the loops must be compiled with the same options as their caller, or
 * GCC does not vectorise them). */
#ifndef AG_CORE_BLOCKS_H
#define AG_CORE_BLOCKS_H

#include "core/internal.h"

#include <string.h>

#define AG_INLINE static inline __attribute__((always_inline))

enum { AG_BLOCK = 16 };

AG_INLINE void ag__map(size_t n, const ag_real *x, ag_real *y, ag_real (*f)(ag_real))
{
    ag_real t[AG_BLOCK];
    size_t i = 0;
    for (; i + AG_BLOCK <= n; i += AG_BLOCK) {
        for (int l = 0; l < AG_BLOCK; l++) t[l] = f(x[i + l]);
        memcpy(y + i, t, sizeof t);
    }
    if (i < n) {
        ag_real xt[AG_BLOCK] = {0};
        memcpy(xt, x + i, (n - i) * sizeof *x);
        for (int l = 0; l < AG_BLOCK; l++) t[l] = f(xt[l]);
        memcpy(y + i, t, (n - i) * sizeof *y);
    }
}

/* dx_i (+)= f(x_i, y_i, dy_i): `add` a constant where it is called, so that
 * each of the two loops is compiled on its own. */
AG_INLINE void map_grad_loop(size_t n, const ag_real *x, const ag_real *y, const ag_real *dy, ag_real *dx,
                             ag_real (*f)(ag_real x, ag_real y, ag_real dy), const bool add)
{
    ag_real t[AG_BLOCK];
    size_t i = 0;
    for (; i + AG_BLOCK <= n; i += AG_BLOCK) {
        for (int l = 0; l < AG_BLOCK; l++) {
            ag_real v = f(x[i + l], y[i + l], dy[i + l]);
            t[l] = add ? dx[i + l] + v : v;
        }
        memcpy(dx + i, t, sizeof t);
    }
    if (i < n) {
        ag_real pad[4][AG_BLOCK] = {{0}}; /* x, y, dy, dx */
        memcpy(pad[0], x + i, (n - i) * sizeof *x);
        memcpy(pad[1], y + i, (n - i) * sizeof *y);
        memcpy(pad[2], dy + i, (n - i) * sizeof *dy);
        if (add) memcpy(pad[3], dx + i, (n - i) * sizeof *dx);
        for (int l = 0; l < AG_BLOCK; l++) {
            ag_real v = f(pad[0][l], pad[1][l], pad[2][l]);
            pad[3][l] = add ? pad[3][l] + v : v;
        }
        memcpy(dx + i, pad[3], (n - i) * sizeof *dx);
    }
}

/* A fresh dx is stored, not read: one stream of memory less. */
/* y_i = f(a_i, b_i) for i < n, in blocks of 16 as ag__map. */
AG_INLINE void ag__zip(size_t n, const ag_real *a, const ag_real *b, ag_real *y, ag_real (*f)(ag_real, ag_real))
{
    ag_real t[AG_BLOCK];
    size_t i = 0;
    for (; i + AG_BLOCK <= n; i += AG_BLOCK) {
        for (int l = 0; l < AG_BLOCK; l++) t[l] = f(a[i + l], b[i + l]);
        memcpy(y + i, t, sizeof t);
    }
    for (; i < n; i++) y[i] = f(a[i], b[i]);
}

AG_INLINE void ag__map_grad(size_t n, const ag_real *x, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh,
                            ag_real (*f)(ag_real x, ag_real y, ag_real dy))
{
    if (fresh) map_grad_loop(n, x, y, dy, dx, f, false);
    else map_grad_loop(n, x, y, dy, dx, f, true);
}

/* AG_ISA_MAP(name, f) defines `static void name(n, x, y)`, ag__map with f,
 * and AG_ISA_MAP_GRAD(name, f) `static void name(n, x, y, dy, dx)`,
 * ag__map_grad with f: each compiled once per instruction set
 * (AG_ISA_CLONES, core/internal.h), the machine's picked at every call, so
 * that the loop is as wide as the CPU's vectors.  The build's
 * -ffp-contract=off holds in every clone, so every level gives the same
 * bits (tests/test_kernels.c), unless the caller allows multiply-adds to
 * fuse around the definition (GELU's, src/kernels/fastmath.c). */
#define AG_MAP_PARAMS (size_t n, const ag_real *x, ag_real *y)
#define AG_MAP_GRAD_PARAMS (size_t n, const ag_real *x, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh)
#define AG_ISA_MAP(name, f)                                                                           \
    AG_INLINE void name##_loop AG_MAP_PARAMS { ag__map(n, x, y, f); }                                  \
    AG_ISA_CLONES(void, name##_loop, AG_MAP_PARAMS, name##_loop(n, x, y))                               \
    static void name AG_MAP_PARAMS { AG_ISA_CALL(name##_loop, (n, x, y)); }
/* AG_ISA_ZIP(name, f) defines a binary op's forward (ag_binary_fwd,
 * core/internal.h) `static void name(n, a, sa, b, sb, y)`: runs of
 * contiguous a and b (sa = sb = 1) through ag__zip with f, one clone per
 * instruction set; a stretched operand (stride 0) element by element. */
#define AG_ZIP_PARAMS (size_t n, const ag_real *a, const ag_real *b, ag_real *y)
#define AG_ISA_ZIP(name, f)                                                                           \
    AG_INLINE void name##_loop AG_ZIP_PARAMS { ag__zip(n, a, b, y, f); }                               \
    AG_ISA_CLONES(void, name##_loop, AG_ZIP_PARAMS, name##_loop(n, a, b, y))                            \
    static void name(size_t n, const ag_real *a, size_t sa, const ag_real *b, size_t sb, ag_real *y)   \
    {                                                                                                  \
        if (sa == 1 && sb == 1) {                                                                      \
            AG_ISA_CALL(name##_loop, (n, a, b, y));                                                    \
            return;                                                                                    \
        }                                                                                              \
        for (size_t i = 0; i < n; i++) y[i] = f(a[i * sa], b[i * sb]);                                 \
    }
#define AG_ISA_MAP_GRAD(name, f)                                                                      \
    AG_INLINE void name##_loop AG_MAP_GRAD_PARAMS { ag__map_grad(n, x, y, dy, dx, fresh, f); }                \
    AG_ISA_CLONES(void, name##_loop, AG_MAP_GRAD_PARAMS, name##_loop(n, x, y, dy, dx, fresh))                  \
    static void name AG_MAP_GRAD_PARAMS { AG_ISA_CALL(name##_loop, (n, x, y, dy, dx, fresh)); }

/* x[0] + ... + x[n-1] in 16 partial sums (one per vector lane of floats),
 * added up as a tree (as ag__dot's): the same result on every run and in
 * every clone, and no chain of n, or 16, dependent additions.  The partial
 * sums and the tree are vectors (sum16, sum4), so that they stay in
 * registers: an array of 16 would go through memory at every call. */
typedef ag_real ag__sum16 __attribute__((vector_size(16 * sizeof(ag_real))));
typedef ag_real ag__sum4 __attribute__((vector_size(4 * sizeof(ag_real))));
AG_INLINE ag_real ag__sum(size_t n, const ag_real *x)
{
    ag__sum16 lane = {0};
    ag_real s = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        ag__sum16 v;
        memcpy(&v, x + i, sizeof v);
        lane += v;
    }
    for (; i < n; i++) s += x[i];
    /* q[l] = (lane[l] + lane[l + 4]) + (lane[l + 8] + lane[l + 12]) */
    ag__sum4 q0 = __builtin_shufflevector(lane, lane, 0, 1, 2, 3), q1 = __builtin_shufflevector(lane, lane, 4, 5, 6, 7);
    ag__sum4 q2 = __builtin_shufflevector(lane, lane, 8, 9, 10, 11);
    ag__sum4 q3 = __builtin_shufflevector(lane, lane, 12, 13, 14, 15);
    ag__sum4 q = (q0 + q1) + (q2 + q3);
    return s + ((q[0] + q[1]) + (q[2] + q[3]));
}

/* a[0] b[0] + ... + a[n-1] b[n-1] in 16 partial sums, added up as a tree
 * (4 vectors of 4 lanes into one, then its lanes): a chain of 16
 * dependent additions would cost as much as the products of a row of a
 * hundred.  A fixed order: the same result on every run and in every
 * clone, inlined into the caller's (one vector register of partial sums
 * where vectors hold 16 floats). */
AG_INLINE ag_real ag__dot(size_t n, const ag_real *a, const ag_real *b)
{
    ag_real lane[16] = {0}, s = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) lane[l] += a[i + l] * b[i + l];
    for (; i < n; i++) s += a[i] * b[i];
    ag_real q[4];
    for (int l = 0; l < 4; l++) q[l] = (lane[l] + lane[l + 4]) + (lane[l + 8] + lane[l + 12]);
    return s + ((q[0] + q[1]) + (q[2] + q[3]));
}

#endif
