/* kernels/linear.c: the dense layer's products by gemm (the math and the
 * reference are ops/linear.c, and r ops/linear_add.c's): the forward
 * adds b and r in the product's store (ag__gemm_bias_res), or for a
 * handful of rows makes y^T = W x^T (the gemm then reads W in place and
 * rearranges only x); the backward's dx and dW are products, db a sum of
 * rows compiled per instruction set.  bf16: the products of the operands
 * rounded to bf16 (ops/bf16.c), by ag__gemm_bf16 or on rounded copies. */
#include "core/internal.h"
#include "kernels/kernels.h"

#include <string.h>

/* The bias gradient, compiled once per instruction set (AG_ISA_CLONES):
 * db[o] is a sum over the rows in row order, each column on its own: every
 * level gives the same bits, whatever its vector width. */

/* db[o] += dy[n, o] for all N rows, in row order, for NV vectors of
 * columns (NV VW of them): their sums stay in registers down the rows, NV
 * independent chains of additions, so that dy is read once, at the rate
 * the loads go rather than the additions' latency.  Vectors of 32 bytes,
 * which every level holds in registers (AVX-512 in halves of its own). */
typedef ag_real cols_v __attribute__((vector_size(32)));
enum { VW = 32 / (int)sizeof(ag_real) }; /* columns of a cols_v */
static inline AG_ALWAYS_INLINE void bias_cols(int N, int O, const ag_real *dy, ag_real *db, const int NV)
{
    cols_v s[8];
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) memcpy(&s[v], db + v * VW, sizeof s[v]);
    for (int n = 0; n < N; n++) {
        const ag_real *d = dy + (size_t)n * O;
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            cols_v x;
            memcpy(&x, d + v * VW, sizeof x);
            s[v] += x;
        }
    }
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) memcpy(db + v * VW, &s[v], sizeof s[v]);
}

/* db[o] += sum over N rows of dy[n, o], in row order: 8 vectors of
 * columns at a time (AVX2 holds their sums in half its registers), then
 * 4, 2, 1, then the last columns one by one */
static inline AG_ALWAYS_INLINE void bias_grad(int N, int O, const ag_real *dy, ag_real *db)
{
    int o = 0;
    for (; o + 8 * VW <= O; o += 8 * VW) bias_cols(N, O, dy + o, db + o, 8);
    if (o + 4 * VW <= O) bias_cols(N, O, dy + o, db + o, 4), o += 4 * VW;
    if (o + 2 * VW <= O) bias_cols(N, O, dy + o, db + o, 2), o += 2 * VW;
    if (o + VW <= O) bias_cols(N, O, dy + o, db + o, 1), o += VW;
    for (; o < O; o++) {
        ag_real s = db[o];
        for (int n = 0; n < N; n++) s += dy[(size_t)n * O + o];
        db[o] = s;
    }
}
AG_ISA_CLONES(void, bias_grad, (int N, int O, const ag_real *dy, ag_real *db), bias_grad(N, O, dy, db))

typedef void gemm_fn(int, int, int, int, int, const ag_real *, int, const ag_real *, int, ag_real, ag_real *, int);

/* bf16 products: ag__gemm_bf16 rounds the operands as it packs them where
 * the CPU has AVX512_BF16 (vdp); elsewhere ag__gemm multiplies rounded
 * copies (ag__k_bf16_copies), which replace the operands named in x. */
static bool bf16_operands(ag_graph *g, bool vdp, int count, const ag_real **x[], const size_t n[])
{
    return vdp || ag__k_bf16_copies(g, count, x, n);
}

bool ag__k_linear_forward(ag_graph *g, int N, int I, int O, const ag_real *x, const ag_real *w, const ag_real *b,
                          const ag_real *r, ag_real *y, bool bf16)
{
    bool vdp = bf16 && ag__isa_bf16();
    if (bf16 && !bf16_operands(g, vdp, 2, (const ag_real **[]){&x, &w}, (size_t[]){(size_t)N * I, (size_t)O * I}))
        return true; /* the graph holds the failure */
    /* For a handful of rows, y^T = W x^T: each y[n, o] is the same sum in
     * the same order as x W^T's, b and r added on the way back. */
    if (N > 0 && 4 * N <= O && N <= 16) {
        ag_real *yt = ag__alloc(g, (size_t)O * N * sizeof(ag_real));
        if (!yt) return true; /* the graph holds the failure */
        (vdp ? ag__gemm_bf16 : ag__gemm)(0, 1, O, N, I, w, I, x, I, 0, yt, N);
        for (int n = 0; n < N; n++)
            for (int o = 0; o < O; o++) {
                size_t at = (size_t)n * O + o;
                ag_real v = b ? yt[(size_t)o * N + n] + b[o] : yt[(size_t)o * N + n];
                y[at] = r ? v + r[at] : v;
            }
    } else {
        (vdp ? ag__gemm_bias_res_bf16 : ag__gemm_bias_res)(0, 1, N, O, I, x, I, w, I, 0, y, O, b, r);
    }
    return true;
}

bool ag__k_linear_backward(ag_graph *g, int N, int I, int O, const ag_real *dy, const ag_real *x, const ag_real *w,
                           ag_real *dx, bool fresh, ag_real *dw, ag_real *db, bool bf16)
{
    bool vdp = bf16 && ag__isa_bf16();
    gemm_fn *gemm = vdp ? ag__gemm_bf16 : ag__gemm;
    const ag_real *dyp = dy; /* the products' dy (db is summed from dy itself) */
    if (bf16 && !bf16_operands(g, vdp, 3, (const ag_real **[]){&dyp, &w, &x},
                               (size_t[]){(size_t)N * O, dx ? (size_t)O * I : 0, dw ? (size_t)N * I : 0}))
        return true; /* the graph holds the failure */
    /* y = x W^T:  dx += dy W  [N, O] x [O, I] */
    if (dx) gemm(0, 0, N, I, O, dyp, O, w, I, fresh ? 0 : 1, dx, I);
    /* y = x W^T:  dW += dy^T x  [O, N] x [N, I] */
    if (dw) gemm(1, 0, O, I, N, dyp, O, x, I, 1, dw, I);
    /* y = ... + b:  db += sum over rows of dy */
    if (db) AG_ISA_CALL(bias_grad, (N, O, dy, db));
    return true;
}
