/* internal.h: what the engine (src/core/) and the ops (ops/) share, never users.
 * The layers (src/nn/) use it too; io, text and viz use only the public
 * headers and core/alloc.h.
 *
 * Prefixes: ag_ is public (attograd.h), ag__ is internal to the library,
 * plain static names are local to one file. */
#ifndef AG_INTERNAL_H
#define AG_INTERNAL_H

#include "attograd_core.h"
#include "core/alloc.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* ---- the private side of a tensor --------------------------------------- */

/* Every tensor the library makes (a graph's node, a store's parameter or
 * constant) is an ag__tensor_impl: the public view that users read comes
 * first, then the op's plumbing and backward's bookkeeping, which users
 * never see.  ag__impl(t) reaches it from the public pointer. */
typedef struct ag__tensor_impl {
    ag_tensor pub;             /* first: a tensor's address is its impl's */
    ag_graph *graph;           /* the graph it was made on; NULL: store-owned */
    uint32_t epoch;            /* the graph's reset count when it was made */
    int slot;                  /* its index on the tape (-1: not on one) */
    int iarg[AG_MAX_DIMS + 2]; /* integer arguments of the op (axis, perm) */
    double farg[2];            /* real arguments of the op (scale, eps, p) */
    void *aux;                 /* op-owned saved state, in the arena */
    /* backward's bookkeeping (src/core/graph.c) */
    ag_real *own;              /* an intermediate's gradient buffer, reused by each backward */
    ag_real *kept;             /* ag_retain_grad: its gradient summed over backward calls */
    uint32_t pass;             /* the backward call that last gave it a buffer */
    bool unset;                /* its buffer is reserved, nothing written yet */
    bool lent;                 /* its buffer went to its input (grad passes to src0) */
    bool retain;               /* ag_retain_grad was called on it */
    bool constant;             /* a store constant: never requires grad */
} ag__tensor_impl;

static inline ag__tensor_impl *ag__impl(const ag_tensor *t) { return (ag__tensor_impl *)(uintptr_t)t; }

/* ---- one descriptor per op --------------------------------------------- */

/* backward(g, y): y->grad holds d loss / d y.  For every input x = y->src[i]
 * with x->requires_grad, it puts d loss / d x into x's gradient buffer, by
 * the one rule of docs/contributing.md (shown in plain code by
 * ops/layer_norm.c's reference backward):
 *
 * Store where fresh, add everywhere else.  A backward that writes every
 * element of an input's gradient takes the buffer from
 * ag__grad_fresh(g, x, &fresh): where fresh, nothing has been written there
 * yet and the buffer holds garbage, so it stores (dx[i] = ...); otherwise
 * the buffer holds other contributions (x is used twice, or is a
 * parameter) and it adds (dx[i] += ...).  A backward that writes only some
 * elements takes ag__grad(g, x), zero-filled, and adds.
 *
 * So a tensor used twice gets both contributions. */
typedef struct ag_op_case ag_op_case;
typedef struct ag_op_desc {
    const char *name;
    void (*backward)(ag_graph *g, ag_tensor *y);
    /* d y / d src[0] is the identity whenever src[0] has y's size (a
     * reshape; add and sub, unless src[0] was broadcast): backward may then
     * give src[0] and y one gradient buffer (see ag_backward), and the op's
     * backward leaves src[0] alone when it finds them shared. */
    bool grad_passes_to_src0;
    /* d y / d src[0] is element-wise and src[0] has y's shape (GELU): backward
     * may give src[0] and y one gradient buffer as above, and the op's
     * backward then turns dy into dx in place when it finds them shared
     * (dx_i = dy_i * dy_i/dx_i: nothing else has written dx yet). */
    bool grad_in_place;
    const ag_op_case *cases; /* gradient-check cases (src/core/opcheck.c runs them) */
    int ncases;
    /* Element-wise (y_i from the inputs' element i alone, broadcast aside):
     * the float-edge check sweeps it over a grid of magnitudes by itself.
     * The element-wise macros set it (src/core/elementwise.h). */
    bool elementwise;
    /* Float-edge cases (tests/edge/float_edges.c), for an op that is not
     * element-wise: cases as above whose values sit where float breaks
     * first (logits near +-80 and +-1e4, large offsets), run in float and
     * compared with the double build's results. */
    const ag_op_case *edges;
    int nedges;
} ag_op_desc;

/* A gradient-check case of an op, kept in the op's own file.  The checker
 * makes n_in store tensors of the given shapes, fills them uniformly in
 * [lo, hi] (values within `gap` of zero are pushed out to +-gap, to stay off
 * kinks such as relu's), calls build to get y, and checks the gradient of
 * L = sum(y * w) for a fixed random w against finite differences.  Inputs
 * that are not differentiated (masks, ids) are made inside build. */
struct ag_op_case {
    const char *label; /* e.g. "[2, 3] + [3] broadcast" */
    int n_in;
    int ndim[AG_MAX_SRC];
    int shape[AG_MAX_SRC][AG_MAX_DIMS];
    double lo, hi, gap;
    ag_tensor *(*build)(ag_graph *g, ag_tensor *const *in);
};
#define AG_CASES(arr) .cases = (arr), .ncases = (int)(sizeof(arr) / sizeof((arr)[0]))
#define AG_EDGES(arr) .edges = (arr), .nedges = (int)(sizeof(arr) / sizeof((arr)[0]))


/* Indexed by ag_op_id; [AG_OP_LEAF] is a descriptor with no backward. */
extern const ag_op_desc *const ag_op_table[AG_OP_COUNT];

/* ---- memory (the allocator hooks are in core/alloc.h) --------------------- */

/* Arena: 64-byte aligned bump allocation in a chain of blocks.  Reset keeps
 * the blocks and reuses them in the same order, so a step that allocates what
 * the previous one did calls malloc zero times. */
typedef struct ag_arena ag_arena;
ag_arena *ag__arena_new(void);
void ag__arena_free(ag_arena *a);
void ag__arena_reset(ag_arena *a);
void *ag__arena_alloc(ag_arena *a, size_t bytes); /* NULL when out of memory */
size_t ag__arena_reserved(const ag_arena *a);
size_t ag__arena_used(const ag_arena *a);

/* Make every parameter of replica r read the values of the parameter of
 * the same name in s (same size): r keeps its own gradients, and frees no
 * values.  For data-parallel workers.  AG_ERR_SHAPE (ag_store_error(r)
 * says which) when a name is missing from s or has another size. */
ag_status ag__store_borrow(ag_store *r, const ag_store *s);
/* Record why a call that acts on a store failed (a layer's init, an
 * optimizer's constructor, clipping): ag_store_error(s) gives it; the
 * message replaces the previous one.  Returns st, for `return
 * ag__store_fail(s, AG_ERR_ARG, ...)`.  s may be NULL (nothing recorded). */
ag_status ag__store_fail(ag_store *s, ag_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The store's values [lo, hi), counted across its parameters in order, as
 * pieces: fn(ctx, i, t, a, b) for elements [a, b) of parameter i, t, for
 * each parameter the range meets.  Threads that share a pass take ranges. */
typedef void (*ag_piece_fn)(void *ctx, int i, ag_tensor *t, size_t a, size_t b);
void ag__store_pieces(ag_store *s, size_t lo, size_t hi, ag_piece_fn fn, void *ctx);

/* From the graph's arena; on failure records AG_ERR_NOMEM and returns NULL. */
void *ag__alloc(ag_graph *g, size_t bytes);
/* An op's state saved for its backward (aux), allocated after its node:
 * ag__alloc, or in no-grad mode scratch that the next node reuses. */
void *ag__save(ag_graph *g, size_t bytes);

/* A scratch buffer of at least `bytes` for the length of one op's call
 * (its forward or its backward), g's own: the next call may reuse it.
 * NULL, with AG_ERR_NOMEM on g, when out of memory. */
void *ag__temp(ag_graph *g, size_t bytes);
/* A second such buffer, for the operand copies of one product's call
 * (kernels/bf16.c's ag__k_bf16_copies): an op may hold ag__temp while it
 * calls the products (ops/gelu_linear_add.c). */
void *ag__temp_copies(ag_graph *g, size_t bytes);

/* The slot of the causal mask that g's layers share until the reset
 * (nn/attention.c): NULL after ag_graph_reset. */
ag_tensor **ag__graph_causal(ag_graph *g);

/* ---- building nodes ------------------------------------------------------ */

/* true when g has no error and each of the n inputs is usable (a NULL or
 * unusable input on a graph with no error records why: "op: input i is
 * NULL", see ag__usable). */
bool ag__ok(ag_graph *g, const char *op, int n, ...);

/* p, an argument of fn that is not a tensor (a layer, a model, an array),
 * is not NULL; otherwise records "fn: what is NULL" (AG_ERR_ARG) on g.
 * Returns false when p is NULL or g is NULL or in error. */
bool ag__given(ag_graph *g, const char *fn, const char *what, const void *p);

/* Record a printf-style message as s's error (ag_store_error) and return
 * st; with s NULL, only returns st.  For the layers' _init functions. */
ag_status ag__store_fail(ag_store *s, ag_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* t may be an input of an op on g: store-owned, or made on g since its last
 * reset.  Otherwise records "op: input k 'name' [shape] was made before
 * ag_graph_reset" (or "is from another graph") and returns false. */
bool ag__usable(ag_graph *g, const char *op, int k, const ag_tensor *t);

/* A new node of `op` with the given shape and inputs: data is allocated
 * (uninitialised), the node goes on the tape, and requires_grad is set when
 * any input requires it.  NULL (error recorded) on a bad shape or no memory. */
ag_tensor *ag__node(ag_graph *g, int op, int ndim, const int *shape, int nsrc,
                    ag_tensor *const *src);

/* A leaf of the given shape whose values are the caller's `data` (not
 * copied, not owned): memory that outlives the step, such as a key/value
 * cache, read by this step's ops.  It never requires grad. */
ag_tensor *ag__view_of(ag_graph *g, ag_real *data, int ndim, const int *shape);

/* x's gradient buffer, allocated zero-filled in the arena on first use. */
ag_real *ag__grad(ag_graph *g, ag_tensor *x);

/* For a backward that sets every element of x's gradient: the buffer, with
 * *fresh = true when nothing has been added to it yet.  Then its contents
 * are undefined and the op must store (=) its contribution into every
 * element; otherwise it adds (+=) as usual.  This saves zero-filling, then
 * adding into, the buffers that have a single consumer: most of them. */
ag_real *ag__grad_fresh(ag_graph *g, ag_tensor *x, bool *fresh);
/* Checked runs hand out fresh buffers filled with NaN, so that a backward
 * that adds into one gives NaN and fails its check: every graph in a build
 * with -DAG_CHECKS (make asan, the -O0 cells), and g while `on` (set by
 * ag_gradcheck, hence by ag_op_check).  ag__graph_poisoned says which. */
void ag__graph_poison(ag_graph *g, bool on);
bool ag__graph_poisoned(const ag_graph *g);

/* Normalise axis (negative counts from the end) for a tensor of ndim axes;
 * records "op: axis A out of range for [..]" and returns -1 when bad. */
int ag__axis(ag_graph *g, const char *op, const ag_tensor *x, int axis);

ag_rng *ag__graph_rng(ag_graph *g);

/* Put printf-style context in front of g's error message (nothing when g
 * has no error): "worker 1: " + "embedding: ...". */
void ag__graph_prefix(ag_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* n Bernoulli draws from r: keep[i] = 1 with probability 1 - p, from a
 * 32-bit uniform per element (two per 64-bit draw of r). */
void ag__rng_keep(ag_rng *r, double p, size_t n, unsigned char *keep);

/* Product of shape[0..n), for (parts of) the shapes of existing tensors,
 * whose product is known to fit. */
size_t ag__numel(int ndim, const int *shape);
/* The product of a shape given by a caller, in *size; false when an entry
 * is negative or the values would not fit in memory (more than
 * SIZE_MAX / sizeof(ag_real) of them: the product could wrap around). */
bool ag__shape_size(int ndim, const int *shape, size_t *size);

/* ---- element-wise engines (src/core/broadcast.c, unary.c) ----------------- */

/* A binary op's kernels work on one run of n elements along the last axis.
 * sa, sb are 1 or 0 (0: that input is broadcast along the run).  The
 * backward kernel adds into da / db at the same strides, or stores into
 * them where fa / fb (fresh: nothing written there yet; only with stride
 * 1); either may be NULL when that input needs no gradient.  da first,
 * then db: for a * a, db adds to what da stored. */
typedef void (*ag_binary_fwd)(size_t n, const ag_real *a, size_t sa,
                              const ag_real *b, size_t sb, ag_real *y);
typedef void (*ag_binary_bwd)(size_t n, const ag_real *a, size_t sa,
                              const ag_real *b, size_t sb, const ag_real *y,
                              const ag_real *dy, ag_real *da, bool fa,
                              ag_real *db, bool fb);
ag_tensor *ag__binary(ag_graph *g, int op, ag_tensor *a, ag_tensor *b,
                      ag_binary_fwd fwd);
/* rows of n contiguous values: row r of y (y + r n) = f(a + r ra, b + r rb),
 * a row stride 0 for an input stretched along the rows (a bias) */
typedef void (*ag_binary_rows)(size_t rows, size_t n, const ag_real *a, size_t ra,
                               const ag_real *b, size_t rb, ag_real *y);
/* ag__binary, with rows_fwd for outputs that are rows of one input's
 * stretched along them ([R, C] + [C]): one call for them all */
ag_tensor *ag__binary_rows(ag_graph *g, int op, ag_tensor *a, ag_tensor *b,
                           ag_binary_fwd fwd, ag_binary_rows rows_fwd);
void ag__binary_backward(ag_graph *g, ag_tensor *y, ag_binary_bwd bwd);

/* A unary op's kernels see whole contiguous arrays; farg is y->farg.
 * backward adds into dx, or stores into it when `fresh` (a gradient that
 * backward reserved and nothing has written yet). */
typedef void (*ag_unary_fwd)(size_t n, const ag_real *x, ag_real *y,
                             const double *farg);
typedef void (*ag_unary_bwd)(size_t n, const ag_real *x, const ag_real *y,
                             const ag_real *dy, ag_real *dx, bool fresh,
                             const double *farg);
ag_tensor *ag__unary(ag_graph *g, int op, ag_tensor *x, ag_unary_fwd fwd,
                     double farg0);
void ag__unary_backward(ag_graph *g, ag_tensor *y, ag_unary_bwd bwd);
/* A unary op whose forward has dy/dx at hand (GELU's): fwd writes y, and
 * the slope s = dy/dx where s is not NULL.  ag__unary_slope asks for s
 * only when y will be differentiated (it requires grad: never in no-grad
 * mode), and keeps it (aux, one value per element) for
 * ag__unary_slope_backward, dx (+)= dy * s: one pass, nothing recomputed. */
typedef void (*ag_unary_fwd_slope)(size_t n, const ag_real *x, ag_real *y,
                                   ag_real *s);
ag_tensor *ag__unary_slope(ag_graph *g, int op, ag_tensor *x, ag_unary_fwd_slope fwd);
void ag__unary_slope_backward(ag_graph *g, ag_tensor *y);

/* Reductions (ops/sum.c, ops/mean.c; src/core/reduce.c): y = sum of x over `axis` (keepdim
 * keeps it as size 1), or over every element when axis is AG__ALL_AXES;
 * divided by the count when `average`.  y->iarg[0] = axis (-1: all),
 * y->iarg[1] = keepdim.  An average over no element is an error. */
#define AG__ALL_AXES (-1000)
ag_tensor *ag__reduce(ag_graph *g, int op, ag_tensor *x, int axis, int keepdim, bool average);
/* dx += dy (spread over the reduced axis), / count when average. */
void ag__reduce_backward(ag_graph *g, ag_tensor *y, bool average);

/* The shape [max(na, nb)] that shapes a [na] and b [nb] broadcast to;
 * 0, or where they do not (the axis counted from the end: -1 the last). */
int ag__broadcast_dims(int na, const int *a, int nb, const int *b, int *shape);
/* Strides st[0..n) to read x (shape xs [nx]) as if it had `shape` [n],
 * each entry of x `unit` values apart: 0 along its stretched or missing
 * axes. */
void ag__broadcast_strides(int nx, const int *xs, int n, const int *shape, size_t unit, size_t *st);
/* Shape that a and b broadcast to; false (and error recorded) when they
 * cannot, with a message naming op and both shapes. */
bool ag__broadcast_shape(ag_graph *g, const char *op, const ag_tensor *a,
                         const ag_tensor *b, int *ndim, int *shape);
/* The element of x that element i of a tensor of `shape` reads when x is
 * broadcast (expand, where) or tiled (repeat) to it, shapes aligned on the
 * right: each index modulo x's size along its axis (ops/expand.c). */
size_t ag__wrap_index(const ag_tensor *x, int ndim, const int *shape, size_t i);
/* mask broadcasts to x's own shape (masked_fill, masked_softmax); records
 * "op: mask [..] does not broadcast to x's shape [..]" when not. */
bool ag__mask_fits(ag_graph *g, const char *op, const ag_tensor *x, const ag_tensor *mask);
/* mask broadcasts to `shape` [nd] (attention's scores); records "op: mask
 * [..] does not broadcast to <what> [..]" when not. */
bool ag__mask_fits_shape(ag_graph *g, const char *op, const ag_tensor *mask, const char *what, int nd,
                         const int *shape);

/* Sum grad (shape `from`) down to a tensor of shape `to` that broadcast to
 * it, adding into dst.  Used by ops whose inputs broadcast. */
void ag__reduce_broadcast_add(const ag_real *grad, int from_ndim,
                              const int *from_shape, ag_real *dst,
                              int to_ndim, const int *to_shape);

/* ---- matrix kernels (src/kernels/gemm.c) ----------------------------------------- */

/* C[M,N] = beta * C + op(A) op(B), with op(A) [M,K], op(B) [K,N].  ta / tb
 * say the stored matrix is the transpose (A stored [K,M], lda its row
 * length).  Row-major.  beta is 0 (overwrite) or 1 (accumulate). */
void ag__gemm(int ta, int tb, int M, int N, int K, const ag_real *A, int lda,
              const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc);
/* The same, then C[i, j] += bias[j] (bias [N], or NULL) and C[i, j] +=
 * R[i, j] (R [M, N] with C's row stride ldc, or NULL), added in the
 * product's store: C = ((op(A) op(B) [+ C]) + bias) + R, rounded as a
 * dense layer followed by an add would round, without a second pass over
 * C. */
void ag__gemm_bias_res(int ta, int tb, int M, int N, int K, const ag_real *A, int lda, const ag_real *B, int ldb,
                       ag_real beta, ag_real *C, int ldc, const ag_real *bias, const ag_real *res);
/* The same two of the operands rounded to bf16 (ops/bf16.c's rule), on a
 * CPU with AVX512_BF16 only (ag__isa_bf16()): packing rounds them and
 * vdpbf16ps multiplies them (kernels/gemm_bf16.c).  The bits of ag__gemm
 * and ag__gemm_bias_res on rounded copies but for subnormals. */
void ag__gemm_bf16(int ta, int tb, int M, int N, int K, const ag_real *A, int lda, const ag_real *B, int ldb,
                   ag_real beta, ag_real *C, int ldc);
void ag__gemm_bias_res_bf16(int ta, int tb, int M, int N, int K, const ag_real *A, int lda, const ag_real *B,
                            int ldb, ag_real beta, ag_real *C, int ldc, const ag_real *bias, const ag_real *res);

/* ---- fused ops (ops/linear*.c, gelu_linear_add.c, masked_softmax.c) ---- */

/* y = x W^T + b: x [..., in], W [out, in], b [out] or NULL -> [..., out]. */
ag_tensor *ag__linear(ag_graph *g, ag_tensor *x, ag_tensor *w, ag_tensor *b);
/* y = (x W^T + b) + r, r of y's shape: linear and then add(r, y) as one op
 * (a residual around a dense layer), with the same bits. */
ag_tensor *ag__linear_add(ag_graph *g, ag_tensor *x, ag_tensor *w, ag_tensor *b, ag_tensor *r);
/* y = gelu(x W^T + b): linear and then gelu as one op (an MLP's first
 * half), with the same bits, keeping GELU's slope but not its input. */
ag_tensor *ag__linear_gelu(ag_graph *g, ag_tensor *x, ag_tensor *w, ag_tensor *b);
/* y = (gelu(h) W^T + b) + r: gelu, linear and add as one op (a pre-norm
 * MLP's second half), with the same bits, keeping only h. */
ag_tensor *ag__gelu_linear_add(ag_graph *g, ag_tensor *h, ag_tensor *w, ag_tensor *b, ag_tensor *r);
/* linear_add's first step back, dr (+)= dy (ops/linear_add.c): false when
 * it failed (recorded on g). */
bool ag__residual_grad(ag_graph *g, ag_tensor *r, const ag_tensor *y);
/* GELU's value x Phi(x) and slope Phi(x) + x phi(x) (ops/gelu.c's math). */
ag_real ag__gelu_value(ag_real x);
ag_real ag__gelu_slope(ag_real x);
/* What the two share (ops/linear.c): the node y [..., O] of op with inputs
 * src, filled with x W^T + b (+ r when r is not NULL); and the gradients
 * of x, W and b from dy, y's. */
ag_tensor *ag__dense_node(ag_graph *g, int op, int nsrc, ag_tensor **src, ag_tensor *x, ag_tensor *w, ag_tensor *b,
                          ag_tensor *r);
void ag__dense_backward(ag_graph *g, const ag_real *dy, ag_tensor *x, ag_tensor *w, ag_tensor *b);
/* The same on N rows of raw values (gelu_linear_add's, whose x is no
 * node): y = x W^T + b (+ r); and dW, db added, dx stored when fresh, else
 * added (NULL: not wanted). */
void ag__dense_rows(ag_graph *g, int N, int I, int O, const ag_real *x, const ag_real *w, const ag_real *b,
                    const ag_real *r, ag_real *y);
void ag__dense_grads(ag_graph *g, int N, const ag_real *dy, const ag_real *x, ag_tensor *w, ag_tensor *b, ag_real *dx,
                     bool fresh);
/* d (+)= dy over n values, a gradient passed on unchanged (add's,
 * reshape's, the residual's of linear_add): a fresh d is a copy of dy;
 * else dy is added, compiled once per instruction set (the kernel room's:
 * kernels/elementwise.c). */
void ag__grad_pass(size_t n, const ag_real *dy, ag_real *d, bool fresh);
/* Batched matmul (b transposed when tb) whose operands in `heads` are in
 * attention's heads layout: stored [B, T, H, D], read as [B, H, T, D]
 * (ops/matmul_heads.c).  AG__MM_Y: the output is written [B, M, H, N]. */
enum { AG__MM_A = 1, AG__MM_B = 2, AG__MM_Y = 4 };
ag_tensor *ag__matmul_heads(ag_graph *g, ag_tensor *a, ag_tensor *b, int tb, int heads);
/* bf16 products (ops/bf16.c): whether g's products are bf16's; y = x
 * rounded to bf16, over n values; a rounded copy of x in g's arena (NULL,
 * the failure recorded on g, when there is no memory). */
bool ag__bf16(const ag_graph *g);
void ag__bf16_round_all(size_t n, const ag_real *x, ag_real *y);
const ag_real *ag__bf16_operand(ag_graph *g, const ag_real *x, size_t n);
/* matmul's node (ops/matmul.c), a and b read with the shapes la, lb;
 * `who` names the op in errors. */
ag_tensor *ag__matmul_node(ag_graph *g, const char *who, ag_tensor *a, ag_tensor *b, int tb, int heads,
                           const int *la, const int *lb);
/* softmax(mask == 0 ? fill : scale * x) over the last axis; mask may be NULL. */
ag_tensor *ag__masked_softmax(ag_graph *g, ag_tensor *x, double scale, ag_tensor *mask, double fill);
/* Where row r of a tensor of `shape` (rows along its last axis) finds its
 * mask values, for a mask that broadcasts to that shape: the mask's stride
 * along each leading axis and along the row (0 where it is stretched).
 * Used by the ops with a mask and by their kernels (src/core/mask_map.c). */
typedef struct ag__mask_map {
    int nd;                  /* leading axes */
    int shape[AG_MAX_DIMS];  /* their sizes */
    size_t st[AG_MAX_DIMS];  /* the mask's stride along each */
    size_t along;            /* and along a row */
} ag__mask_map;
void ag__mask_map_init(ag__mask_map *mm, int ndim, const int *shape, const ag_tensor *mask);
/* Where row r of x (rows of S values) starts in the mask's data. */
size_t ag__mask_row(const ag__mask_map *mm, size_t r);
/* What an attention node computes besides its q, k and v (ops/attention.c):
 * the mask (broadcast to [B, H, T, S], or NULL: 0 hides a key), the
 * scale, the fill a hidden key's score takes; the layout (bhtd: q
 * [B, H, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv]; else the heads layout
 * q [B, T, H, D], k [B, S, Hkv, D], v [B, S, Hkv, Dv]); causal: 0 none,
 * AG__CAUSAL_DIAG query t sees keys s <= t + diag only (top-left: diag 0),
 * AG__CAUSAL_BOTTOM_RIGHT the same with diag = S - T. */
enum { AG__CAUSAL_NONE, AG__CAUSAL_DIAG, AG__CAUSAL_BOTTOM_RIGHT };
typedef struct ag__attn_rule {
    const ag_tensor *mask;
    const ag_tensor *bias; /* additive, broadcast to [B, H, T, S], or NULL */
    double scale, fill;
    bool bhtd;
    int causal, diag;
    double dropout; /* on P, drawn from seed by a counter-based generator */
    uint64_t seed;
} ag__attn_rule;
/* The argument rules of the ops whose rules are long (src/core/fits.c):
 * each records why they do not hold and returns false.  Attention's: q,
 * k and v fit r's layout (H a multiple of Hkv), the mask (or NULL) is
 * usable and broadcasts to the scores' [B, H, T, S]. */
bool ag__attention_fits(ag_graph *g, const ag_tensor *q, const ag_tensor *k, const ag_tensor *v,
                        const ag__attn_rule *r);
/* linear's (op "linear") and linear_add's: x [..., I], W [O, I], b [O] or
 * NULL fit, and r (NULL for linear) has the output's shape [..., O]. */
bool ag__linear_fits(ag_graph *g, const char *op, const ag_tensor *x, const ag_tensor *w, const ag_tensor *b,
                     const ag_tensor *r);
/* cross_entropy's: logits [..., V] with V >= 1, label smoothing in [0, 1],
 * a known reduction, targets given when there are rows, each in [0, V) or
 * ignore_index; *count gets the rows not ignored. */
bool ag__cross_entropy_fits(ag_graph *g, const ag_tensor *logits, const int *targets, int ignore_index, double ls,
                            ag_reduction reduction, size_t *count);
/* Multi-head attention's heads in one node (ops/attention.c): q [B, T, H, D],
 * k [B, S, H, D], v [B, S, H, Dv] (heads layout, read in place), mask
 * broadcast to [B, H, T, S] or NULL -> [B, T, H, Dv]:
 * matmul_heads(masked_softmax(matmul_heads(q, k^T), scale, mask, fill), v). */
ag_tensor *ag__attention_heads(ag_graph *g, ag_tensor *q, ag_tensor *k, ag_tensor *v, double scale, ag_tensor *mask,
                               double fill);
/* The same op with every rule: y [B, T, H, Dv] (heads layout) or
 * [B, H, T, Dv] (r->bhtd). */
ag_tensor *ag__attention(ag_graph *g, ag_tensor *q, ag_tensor *k, ag_tensor *v, const ag__attn_rule *r);

/* ---- shared kernels and threads ------------------------------------------ */

/* y[i] = exp(x[i] - shift) for i < n; returns their sum (src/kernels/rows.c). */
ag_real ag__exp_sum(size_t n, const ag_real *x, ag_real shift, ag_real *y);
/* log-softmax's backward over `rows` rows of n, from its output y:
 * dx_i (+)= dy_i - exp(y_i) sum_j dy_j, stored into a fresh dx
 * (src/kernels/rows.c) */
void ag__log_softmax_grad_rows(size_t rows, size_t n, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh);
/* dst [N, C] = 0, then dst[idx[i]] = src[i] for i < n, in one pass:
 * idx must be strictly increasing (ag__increasing). */
void ag__scatter_rows(ag_real *dst, size_t N, size_t C, const ag_real *src, const int *idx, size_t n);
bool ag__increasing(const int *idx, size_t n);
/* y = softmax(z) over `rows` rows of n values; z may be y (a row of all
 * -inf gives zeros; a row holding a NaN or +inf gives NaNs). */
void ag__softmax_rows(size_t rows, size_t n, const ag_real *z, ag_real *y);
/* The same for one row, softmax's plain reference (ops/softmax.c). */
void ag__softmax_row_ref(size_t n, const ag_real *z, ag_real *y);
/* max_i x_i over n >= 0 values (-inf for none).  NaNs are passed over,
 * except in a row with nothing above -inf: there a NaN gives NaN, so that
 * the row is not taken for a fully masked one. */
ag_real ag__row_max(size_t n, const ag_real *x);
/* Over `rows` rows of n values x: max[r] = ag__row_max of row r, and when
 * that is above -inf, y's row r = exp(x - max[r]) and sum[r] = their sum
 * (ag__exp_sum), else sum[r] = 0 and y's row untouched; bit for bit those
 * two, sixteen rows at a time (src/kernels/rows.c). */
void ag__max_exp_sum_rows(size_t rows, size_t n, const ag_real *x, ag_real *max, ag_real *sum, ag_real *y);
#ifndef AG_DOUBLE
/* y = exp x, log x, tanh x, gelu x = x Phi(x) over n floats (y may be x),
 * vectorised and within a few ulp (src/kernels/fastmath.c); gelu with its
 * slope s = dy/dx = Phi(x) + x phi(x) (the same y, and s from the same
 * exp); GELU's tanh form, x (1 + tanh(k (x + c x^3))) / 2, alone and with
 * its slope likewise (ops/gelu_tanh.c). */
void ag__exp_floats(size_t n, const float *x, float *y);
void ag__log_floats(size_t n, const float *x, float *y);
void ag__tanh_floats(size_t n, const float *x, float *y);
void ag__gelu_floats(size_t n, const float *x, float *y);
void ag__gelu_slope_floats(size_t n, const float *x, float *y, float *s);
void ag__gelu_tanh_floats(size_t n, const float *x, float *y);
void ag__gelu_tanh_slope_floats(size_t n, const float *x, float *y, float *s);
#endif
/* How many threads a loop of `work` element-operations should use: 1 when
 * it is too small to repay a fork and join (src/core/threads.c). */
int ag__threads_for(size_t work);
extern size_t ag__thread_min_work; /* below it, one thread (src/core/threads.c) */
/* body(ctx, i) for every i in [0, n), on nt threads (thread t takes the
 * t-th contiguous block of i) or, for nt <= 1, on the calling thread.
 * Built with OpenMP it uses OpenMP's threads, otherwise pthreads.  Callers
 * make each i's work independent of which thread does it, so the results
 * are the same for every nt (src/core/threads.c). */
typedef void (*ag_loop_fn)(void *ctx, size_t i);
/* 1 where there are no threads at all (WebAssembly built for wasm32-wasi,
 * make wasm): every loop runs on the calling thread. */
#if defined(__wasi__) && !defined(_REENTRANT)
#define AG_NO_THREADS 1
#else
#define AG_NO_THREADS 0
#endif
void ag__parallel_for(size_t n, int nt, ag_loop_fn body, void *ctx);
/* Tests set it to run every loop on the calling thread, i in order (an
 * allocation sweep needs the k-th allocation to be the same every run). */
extern bool ag__threads_off;

/* ---- kernels compiled per instruction set (src/core/cpu.c) ---------------- */

/* x86-64's levels in order (each has the one before), and arm64's one
 * above the baseline: NEON with its fused multiply-add (every arm64 CPU
 * has both). */
enum { AG_ISA_BASE, AG_ISA_AVX2, AG_ISA_AVX512, AG_ISA_NEON, AG_ISA_COUNT };
#if defined(__GNUC__) && defined(__x86_64__)
#define AG_X86_KERNELS 1
#else
#define AG_X86_KERNELS 0
#endif
#if defined(__GNUC__) && defined(__aarch64__) && defined(__ARM_NEON)
#define AG_NEON_KERNELS 1
#else
#define AG_NEON_KERNELS 0
#endif
/* AVX512_BF16's vdpbf16ps, beside the AVX-512 level (kernels/gemm_bf16.c):
 * built with gcc 12 or clang 14 on, which have its intrinsics (-DAG_NO_BF16
 * builds without it); used when the CPU has it and the level is AVX-512,
 * unless forced off.  Forcing "avx512bf16" asks for it, any other level
 * turns it off (ag__isa_force). */
#if AG_X86_KERNELS && !defined(AG_NO_BF16) &&                                                                 \
    ((defined(__clang__) && __clang_major__ >= 14) || (!defined(__clang__) && __GNUC__ >= 12))
#define AG_BF16_KERNEL 1
#else
#define AG_BF16_KERNEL 0
#endif
/* arm64's BFMLALB/BFMLALT (FEAT_BF16), beside the NEON level, the same
 * kernel file: built with gcc 12, whose arm_neon.h declares the bf16
 * intrinsics for a function's own target, or with clang when the whole
 * build targets bf16 (-march=armv8.2-a+bf16: clang 14's arm_neon.h has
 * them only then); -DAG_NO_BF16 builds without it.  Used when the CPU has
 * it (Linux: HWCAP2_BF16) and the level is NEON, unless forced off.
 * Forcing "neonbf16" asks for it. */
#if AG_NEON_KERNELS && !defined(AG_NO_BF16) && defined(__linux__) &&                                          \
    ((defined(__clang__) && defined(__ARM_FEATURE_BF16)) || (!defined(__clang__) && __GNUC__ >= 12))
#define AG_NEON_BF16_KERNEL 1
#else
#define AG_NEON_BF16_KERNEL 0
#endif
/* Whether the bf16 products have a kernel of their own (kernels/gemm_bf16.c)
 * and ag__isa_bf16() says when it runs. */
#define AG_BF16_PRODUCTS (AG_BF16_KERNEL || AG_NEON_BF16_KERNEL)
bool ag__isa_bf16(void);
/* The level in use: the CPU's best, read once, unless forced lower.  Every
 * dispatch asks, so the common path is one load, inlined (-1: not read
 * yet; ag__isa_read reads the CPU). */
extern _Atomic int ag__isa_level;
int ag__isa_read(void);
static inline int ag__isa(void)
{
    int l = atomic_load_explicit(&ag__isa_level, memory_order_relaxed);
    return l >= 0 ? l : ag__isa_read();
}
/* Force "baseline", "avx2", "avx512", "avx512bf16", "amx", "neon" or "neonbf16" (only a
 * level the CPU has; NULL or an unknown name: the CPU's best, AVX512_BF16
 * and AMX on where it has them; kernels/amx.h); returns the name now in use ("avx512" for NULL on an
 * AVX512_BF16 CPU too).  For tests and benchmarks, while no kernel runs. */
const char *ag__isa_force(const char *name);
/* One kernel, several instruction sets.  Write the body once as
 *   static inline AG_ALWAYS_INLINE ret name(params) { ... }
 * then AG_ISA_CLONES(ret, name, params, call) defines name_avx2 and
 * name_avx512, each the statement `call` (which calls the body) compiled
 * for its instruction set, and AG_ISA_CALL(name, args) calls the one that
 * ag__isa() picks (the body itself for the baseline, or off x86).  The
 * AVX2 level includes FMA (cpu.c asks for both).  On arm64 there are no
 * clones: the portable body, compiled for arm64, is already NEON code (its
 * 16-byte vectors are NEON's width, and between AG_FUSED_BEGIN and
 * AG_FUSED_END its multiply-adds fuse), so the NEON level runs the
 * baseline's body everywhere except where a kernel says otherwise (gemm's
 * micro-kernel, src/kernels/gemm.c). */
#define AG_ALWAYS_INLINE __attribute__((always_inline))
#if AG_X86_KERNELS
#define AG_ISA_CLONES(ret, name, params, call)                                                        \
    __attribute__((target("avx2,fma"))) static ret name##_avx2 params { call; }                       \
    __attribute__((target("avx512f"))) static ret name##_avx512 params { call; }
#define AG_ISA_CALL(name, args)                                                                       \
    (ag__isa() == AG_ISA_AVX512 ? name##_avx512 args : ag__isa() == AG_ISA_AVX2 ? name##_avx2 args : name args)
#else
#define AG_ISA_CLONES(ret, name, params, call)
#define AG_ISA_CALL(name, args) (name args)
#endif
/* Between AG_FUSED_BEGIN and AG_FUSED_END (at file scope), a * b + c may
 * be one fused multiply-add where the instruction set has one: for kernels
 * whose stated error bound holds either way (kernels/fastmath.c,
 * kernels/rows.c). */
#if defined(__clang__)
#define AG_FUSED_BEGIN _Pragma("STDC FP_CONTRACT ON")
#define AG_FUSED_END _Pragma("STDC FP_CONTRACT OFF")
#elif defined(__GNUC__)
#define AG_FUSED_BEGIN _Pragma("GCC push_options") _Pragma("GCC optimize(\"fp-contract=fast\")")
#define AG_FUSED_END _Pragma("GCC pop_options")
#else
#define AG_FUSED_BEGIN
#define AG_FUSED_END
#endif
/* The gemm kernel in use: "avx512", "avx2", "neon" or "baseline"; force one by name
 * (for tests and benchmarks), NULL keeps the CPU's choice.  The same as
 * ag__isa_force: every kernel follows (src/kernels/gemm.c). */
const char *ag__gemm_kernel(const char *force);
/* The calling thread takes its gemm packing slot now, if it has none: the
 * first free one from index `from` on; returns its index (-1: none free).
 * For threads.c's short-lived threads (src/kernels/gemm.c). */
int ag__pack_slot_claim(int from);

/* For the gradient checker's test of itself: backward on g multiplies the
 * gradient flowing into every backward of op `op` by `factor`; op <= 0
 * restores the plain op table.  Nothing is checked in backward's loop: g's
 * op table is a copy with that op's backward wrapped. */
void ag__graph_break(ag_graph *g, int op, double factor);

#endif /* AG_INTERNAL_H */
