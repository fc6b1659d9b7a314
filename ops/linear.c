/* ops/linear.c: the dense layer y = x W^T + b, as one op (PyTorch's
 * F.linear), and linear_add, the dense layer with a residual r added to
 * its output: y = r + (x W^T + b), a pre-norm block's x + proj(...).
 *
 *   x [..., I], W [O, I], b [O] or NULL -> y [..., O];  r, if any: y's shape
 *   (x is read as N = size / I rows of I values)
 *
 * forward:  y[n, o] = (sum_i x[n, i] W[o, i] + b[o]) + r[n, o]
 * backward: dr[n, o] += dy[n, o]
 *           dx[n, i] += sum_o dy[n, o] W[o, i]     dx = dy W      [N, O] x [O, I]
 *           dW[o, i] += sum_n dy[n, o] x[n, i]     dW = dy^T x    [O, N] x [N, I]
 *           db[o]    += sum_n dy[n, o]
 *
 * linear_add rounds as linear followed by add does: the product's store
 * adds b, then r (ag__gemm_bias_res), and its backward runs add's part (dr)
 * before linear's, as the two nodes' backward would.  It saves add's pass
 * over y and, since r is its first input, the copy of dy: r may take dy's
 * buffer as its gradient, as add's first operand does (see
 * grad_passes_to_src0), unless r is also x, W or b of the op.
 *
 * The same as reshape(add(matmul(reshape(x, [N, I]), transpose(W)), b)),
 * which is how ag_linear_forward used to be written, minus what that costs:
 * the copies of the two reshapes and of W^T (forward and backward), and a
 * broadcasting add whose backward sums dy over rows through stride-0 walks.
 * The gemm reads W as stored and packs the transpose itself.
 *
 * linear: src = {x, W, b};  linear_add: src = {r, x, W, b};  b may be NULL. */
#include "core/internal.h"

#include <stdio.h>
#include <string.h>

/* ---- the bias gradient: compiled once per instruction set (AG_ISA_CLONES) --
 *
 * db[o] is a sum over the rows in row order, each column on its own: every
 * level gives the same bits, whatever its vector width.  (The forward's
 * y = x W^T + b adds b in the product's store: ag__gemm_bias_res.) */

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


/* x [..., I], W [O, I], b [O] or NULL fit, and r (if given) has the
 * output's shape [..., O]; otherwise the error names them. */
static bool dense_fits(ag_graph *g, const char *op, const ag_tensor *x, const ag_tensor *w, const ag_tensor *b,
                       const ag_tensor *r)
{
    char sx[96], sw[96], sb[96], sr[96];
    if (w->ndim != 2 || x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1] ||
        (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))) {
        ag_graph_fail(g, AG_ERR_SHAPE, "%s: x %s, weight %s and bias %s do not fit x [..., I], W [O, I], b [O]", op,
                      ag_shape_str(x, sx, sizeof sx), ag_shape_str(w, sw, sizeof sw),
                      b ? ag_shape_str(b, sb, sizeof sb) : "none");
        return false;
    }
    bool same = r && r->ndim == x->ndim;
    for (int d = 0; same && d < x->ndim; d++)
        same = r->shape[d] == (d == x->ndim - 1 ? w->shape[0] : x->shape[d]);
    if (r && !same) {
        ag_graph_fail(g, AG_ERR_SHAPE, "%s: the residual %s is not the shape of x %s times W^T %s", op,
                      ag_shape_str(r, sr, sizeof sr), ag_shape_str(x, sx, sizeof sx),
                      ag_shape_str(w, sw, sizeof sw));
        return false;
    }
    return true;
}

/* The node y [..., O] of op with inputs src, filled with x W^T + b (+ r). */
static ag_tensor *dense_node(ag_graph *g, int op, int nsrc, ag_tensor **src, ag_tensor *x, ag_tensor *w,
                             ag_tensor *b, ag_tensor *r)
{
    int I = w->shape[1], O = w->shape[0], shape[AG_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
    shape[x->ndim - 1] = O;
    ag_tensor *y = ag__node(g, op, x->ndim, shape, nsrc, src);
    if (!y) return NULL;
    int N = (int)ag__numel(x->ndim - 1, x->shape); /* rows */
    const ag_real *bd = b ? b->data : NULL, *rd = r ? r->data : NULL;
    /* y = x W^T + b (+ r), b and r added as the product is stored.  For a
     * handful of rows, y^T = W x^T instead: the gemm then reads W in place
     * and rearranges only x (N I values, not O I), and y^T is transposed
     * back, b and r added on the way; each y[n, o] is the same sum in the
     * same order. */
    if (N > 0 && 4 * N <= O && N <= 16) {
        ag_real *yt = ag__alloc(g, (size_t)O * N * sizeof(ag_real));
        if (!yt) return NULL;
        ag__gemm(0, 1, O, N, I, w->data, I, x->data, I, 0, yt, N);
        for (int n = 0; n < N; n++)
            for (int o = 0; o < O; o++) {
                size_t at = (size_t)n * O + o;
                ag_real v = bd ? yt[(size_t)o * N + n] + bd[o] : yt[(size_t)o * N + n];
                y->data[at] = rd ? v + rd[at] : v;
            }
    } else {
        ag__gemm_bias_res(0, 1, N, O, I, x->data, I, w->data, I, 0, y->data, O, bd, rd);
    }
    return y;
}

ag_tensor *ag__linear(ag_graph *g, ag_tensor *x, ag_tensor *w, ag_tensor *b)
{
    if (!ag__ok(g, "linear", 2, x, w) || !dense_fits(g, "linear", x, w, b, NULL)) return NULL;
    ag_tensor *src[3] = {x, w, b};
    return dense_node(g, AG_OP_LINEAR, 3, src, x, w, b, NULL);
}

ag_tensor *ag__linear_add(ag_graph *g, ag_tensor *x, ag_tensor *w, ag_tensor *b, ag_tensor *r)
{
    if (!ag__ok(g, "linear_add", 3, x, w, r) || !dense_fits(g, "linear_add", x, w, b, r)) return NULL;
    ag_tensor *src[4] = {r, x, w, b};
    return dense_node(g, AG_OP_LINEAR_ADD, 4, src, x, w, b, r);
}

/* dx, dW and db of y = x W^T + b, from dy (y's gradient). */
static void dense_backward(ag_graph *g, const ag_real *dy, ag_tensor *x, ag_tensor *w, ag_tensor *b)
{
    bool fresh = false; /* dx holds nothing yet: the product overwrites it */
    ag_real *dx = x->requires_grad ? ag__grad_fresh(g, x, &fresh) : NULL;
    ag_real *dw = w->requires_grad ? ag__grad(g, w) : NULL;
    ag_real *db = b && b->requires_grad ? ag__grad(g, b) : NULL;
    if (ag_graph_status(g) != AG_OK) return;
    int I = w->shape[1], O = w->shape[0];
    int N = (int)ag__numel(x->ndim - 1, x->shape); /* rows */
    /* y = x W^T:  dx += dy W  [N, O] x [O, I] */
    if (dx) ag__gemm(0, 0, N, I, O, dy, O, w->data, I, fresh ? 0 : 1, dx, I);
    /* y = x W^T:  dW += dy^T x  [O, N] x [N, I] */
    if (dw) ag__gemm(1, 0, O, I, N, dy, O, x->data, I, 1, dw, I);
    /* y = ... + b:  db += sum over rows of dy */
    if (db) AG_ISA_CALL(bias_grad, (N, O, dy, db));
}

static void linear_backward(ag_graph *g, ag_tensor *y) { dense_backward(g, y->grad, y->src[0], y->src[1], y->src[2]); }

static void linear_add_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *r = y->src[0];
    /* y = ... + r:  dr += dy, before the rest, as add's backward runs
     * before linear's.  Nothing to do when r took dy's buffer. */
    if (r->requires_grad && r->grad != y->grad) {
        bool fresh = false;
        ag_real *dr = ag__grad_fresh(g, r, &fresh);
        if (!dr) return;
        ag__grad_pass(y->size, y->grad, dr, fresh);
    }
    dense_backward(g, y->grad, y->src[1], y->src[2], y->src[3]);
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

/* inputs {x, W, b, r}, {x, W, r}, or {x, W, b} with r = x or r = W */
static ag_tensor *case_res(ag_graph *g, ag_tensor *const *in) { return ag__linear_add(g, in[0], in[1], in[2], in[3]); }
static ag_tensor *case_res_nobias(ag_graph *g, ag_tensor *const *in)
{
    return ag__linear_add(g, in[0], in[1], NULL, in[2]);
}
static ag_tensor *case_res_is_x(ag_graph *g, ag_tensor *const *in)
{
    return ag__linear_add(g, in[0], in[1], in[2], in[0]);
}
static ag_tensor *case_res_is_w(ag_graph *g, ag_tensor *const *in)
{
    return ag__linear_add(g, in[0], in[1], in[2], in[1]);
}

static const ag_op_case add_cases[] = {
    {"[3, 4] W [2, 4] b [2] + r [3, 2]", 4, {2, 2, 1, 2}, {{3, 4}, {2, 4}, {2}, {3, 2}}, -1, 1, 0, case_res},
    {"[2, 3, 4] W [5, 4] b [5] + r [2, 3, 5] batch axes", 4, {3, 2, 1, 3}, {{2, 3, 4}, {5, 4}, {5}, {2, 3, 5}},
     -1, 1, 0, case_res},
    {"[4, 3] W [2, 3] + r [4, 2] no bias", 3, {2, 2, 2}, {{4, 3}, {2, 3}, {4, 2}}, -1, 1, 0, case_res_nobias},
    {"[1, 1] W [1, 1] b [1] + r [1, 1] size-1", 4, {2, 2, 1, 2}, {{1, 1}, {1, 1}, {1}, {1, 1}}, -1, 1, 0,
     case_res},
    {"[2, 1, 3] W [3, 3] b [3] + r = x", 3, {3, 2, 1}, {{2, 1, 3}, {3, 3}, {3}}, -1, 1, 0, case_res_is_x},
    {"[3, 3] W [3, 3] b [3] + r = W", 3, {2, 2, 1}, {{3, 3}, {3, 3}, {3}}, -1, 1, 0, case_res_is_w},
    {"[2, 8] W [12, 8] b [12] + r [2, 12] a few rows", 4, {2, 2, 1, 2}, {{2, 8}, {12, 8}, {12}, {2, 12}}, -1, 1,
     0, case_res},
    {"[13, 24] W [40, 24] b [40] + r [13, 40] packed kernel", 4, {2, 2, 1, 2},
     {{13, 24}, {40, 24}, {40}, {13, 40}}, -1, 1, 0, case_res},
};

const ag_op_desc ag_op_linear_add = {.name = "linear_add", .backward = linear_add_backward,
                                     .grad_passes_to_src0 = true, AG_CASES(add_cases)};
