/* ops/linear.c: the dense layer y = x W^T + b, as one op (PyTorch's
 * F.linear).
 *
 *   x [..., I], W [O, I], b [O] or NULL -> y [..., O]
 *   (x is read as N = size / I rows of I values)
 *
 * forward:  y[n, o] = sum_i x[n, i] W[o, i] + b[o]
 * backward: dx[n, i] += sum_o dy[n, o] W[o, i]     dx = dy W      [N, O] x [O, I]
 *           dW[o, i] += sum_n dy[n, o] x[n, i]     dW = dy^T x    [O, N] x [N, I]
 *           db[o]    += sum_n dy[n, o]
 *
 * The same as reshape(add(matmul(reshape(x, [N, I]), transpose(W)), b)),
 * which is how ag_linear_forward used to be written, minus what that costs:
 * the copies of the two reshapes and of W^T (forward and backward), and a
 * broadcasting add whose backward sums dy over rows through stride-0 walks.
 * The gemm reads W as stored and packs the transpose itself.
 *
 * src = {x, W, b}; b may be NULL. */
#include "core/internal.h"

#include <stdio.h>
#include <string.h>

/* ---- the bias gradient: compiled once per instruction set (AG_ISA_CLONES) --
 *
 * db[o] is a sum over the rows in row order, each column on its own: every
 * level gives the same bits, whatever its vector width.  (The forward's
 * y = x W^T + b adds b in the product's store: ag__gemm_bias.) */

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


ag_tensor *ag__linear(ag_graph *g, ag_tensor *x, ag_tensor *w, ag_tensor *b)
{
    if (!ag__ok(g, "linear", 2, x, w)) return NULL;
    char sx[96], sw[96], sb[96];
    if (w->ndim != 2 || x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1] ||
        (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))) {
        ag_graph_fail(g, AG_ERR_SHAPE, "linear: x %s, weight %s and bias %s do not fit x [..., I], W [O, I], b [O]",
                      ag_shape_str(x, sx, sizeof sx), ag_shape_str(w, sw, sizeof sw),
                      b ? ag_shape_str(b, sb, sizeof sb) : "none");
        return NULL;
    }
    int I = w->shape[1], O = w->shape[0], shape[AG_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
    shape[x->ndim - 1] = O;
    ag_tensor *src[3] = {x, w, b};
    ag_tensor *y = ag__node(g, AG_OP_LINEAR, x->ndim, shape, 3, src);
    if (!y) return NULL;
    int N = (int)ag__numel(x->ndim - 1, x->shape); /* rows */
    /* y = x W^T + b, b added as the product is stored.  For a handful of
     * rows, y^T = W x^T instead: the gemm then reads W in place and
     * rearranges only x (N I values, not O I), and y^T is transposed back,
     * b added on the way; each y[n, o] is the same sum in the same order. */
    if (N > 0 && 4 * N <= O && N <= 16) {
        ag_real *yt = ag__alloc(g, (size_t)O * N * sizeof(ag_real));
        if (!yt) return NULL;
        ag__gemm(0, 1, O, N, I, w->data, I, x->data, I, 0, yt, N);
        for (int n = 0; n < N; n++)
            for (int o = 0; o < O; o++)
                y->data[(size_t)n * O + o] = b ? yt[(size_t)o * N + n] + b->data[o] : yt[(size_t)o * N + n];
    } else {
        ag__gemm_bias(0, 1, N, O, I, x->data, I, w->data, I, 0, y->data, O, b ? b->data : NULL);
    }
    return y;
}

static void linear_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0], *w = y->src[1], *b = y->src[2];
    bool fresh = false; /* dx holds nothing yet: the product overwrites it */
    ag_real *dx = x->requires_grad ? ag__grad_fresh(g, x, &fresh) : NULL;
    ag_real *dw = w->requires_grad ? ag__grad(g, w) : NULL;
    ag_real *db = b && b->requires_grad ? ag__grad(g, b) : NULL;
    if (ag_graph_status(g) != AG_OK) return;
    int I = w->shape[1], O = w->shape[0];
    int N = (int)ag__numel(x->ndim - 1, x->shape); /* rows */
    /* y = x W^T:  dx += dy W  [N, O] x [O, I] */
    if (dx) ag__gemm(0, 0, N, I, O, y->grad, O, w->data, I, fresh ? 0 : 1, dx, I);
    /* y = x W^T:  dW += dy^T x  [O, N] x [N, I] */
    if (dw) ag__gemm(1, 0, O, I, N, y->grad, O, x->data, I, 1, dw, I);
    /* y = ... + b:  db += sum over rows of dy */
    if (db) AG_ISA_CALL(bias_grad, (N, O, y->grad, db));
}

static ag_tensor *case_bias(ag_graph *g, ag_tensor *const *in) { return ag__linear(g, in[0], in[1], in[2]); }
static ag_tensor *case_nobias(ag_graph *g, ag_tensor *const *in) { return ag__linear(g, in[0], in[1], NULL); }

static const ag_op_case cases[] = {
    {"[3, 4] W [2, 4] b [2]", 3, {2, 2, 1}, {{3, 4}, {2, 4}, {2}}, -1, 1, 0, case_bias},
    {"[2, 3, 4] W [5, 4] b [5] batch axes", 3, {3, 2, 1}, {{2, 3, 4}, {5, 4}, {5}}, -1, 1, 0, case_bias},
    {"[4, 3] W [2, 3] no bias", 2, {2, 2}, {{4, 3}, {2, 3}}, -1, 1, 0, case_nobias},
    {"[1, 1] W [1, 1] b [1] size-1", 3, {2, 2, 1}, {{1, 1}, {1, 1}, {1}}, -1, 1, 0, case_bias},
    {"[13, 24] W [40, 24] b [40] packed kernel", 3, {2, 2, 1}, {{13, 24}, {40, 24}, {40}}, -1, 1, 0, case_bias},
};

const ag_op_desc ag_op_linear = {.name = "linear", .backward = linear_backward, AG_CASES(cases)};
