/* attograd_core.h: tensors, a define-by-run graph and reverse-mode autodiff in C11.
 *
 * The core API: it includes no other attograd header.  Most programs include
 * the umbrella attograd.h, which adds layers, optimizers, checkpoints, text
 * and pictures.
 *
 * ---------------------------------------------------------------------------
 * A short tutorial
 * ---------------------------------------------------------------------------
 *
 *   #include "attograd.h"
 *
 *   ag_store *params = ag_store_new();                 // lives for the whole run
 *   ag_tensor *w = ag_param(params, "w", AG_SHAPE(3, 2));
 *   ag_init_uniform(w, -0.5, 0.5, 42);                 // seeded, reproducible
 *
 *   ag_graph *g = ag_graph_new();                      // one per training step
 *   ag_tensor *x = ag_tensor_from(g, AG_SHAPE(4, 3), xs);   // xs: 12 values
 *   ag_tensor *y = ag_tanh(g, ag_matmul(g, x, w));     // [4, 3] @ [3, 2] -> [4, 2]
 *   ag_tensor *loss = ag_mean_all(g, ag_mul(g, y, y));
 *   if (ag_backward(g, loss) != AG_OK)                 // fills w->grad
 *       fprintf(stderr, "%s\n", ag_graph_error(g));
 *   ag_graph_reset(g);                                 // frees every activation at once
 *
 * Every op is computed as it is called (define-by-run, like PyTorch) and
 * recorded on the graph's tape; ag_backward walks the tape backwards.
 *
 * Ownership.  A graph owns one arena: every tensor an op returns, and every
 * gradient backward makes, lives there until ag_graph_reset() or
 * ag_graph_free().  Parameters live in an ag_store, which survives resets;
 * their gradients accumulate in the store until ag_store_zero_grad().  A
 * graph's tensor kept past a reset is refused by the ops it is given to;
 * values every step reuses (a mask) go in the store: ag_store_constant().
 *
 * Errors never abort.  The first error on a graph (a bad shape, a bad axis,
 * out of memory) sticks to it, with a message naming the op and the shapes,
 * e.g. "matmul: inner dims differ: [2, 4, 64] x [32, 64]".  The failing op
 * returns NULL; every op given a NULL input or called on a graph in error
 * returns NULL and does nothing else, so model code reads straight through
 * and the caller checks ag_graph_status() once at the end.
 *
 * Precision.  ag_real is float; built with -DAG_DOUBLE it is double.  The
 * Makefile builds both: build/libattograd.a (float, for training) and
 * build/libattograd64.a (double, for finite-difference gradient checks and
 * float64 parity with PyTorch).  One code path, two scalar types: every
 * kernel is written once.  A program compiled for one precision does not
 * link with the other's library (see ag_graph_new below).
 *
 * Layout.  Every tensor is contiguous and row-major: the last axis is the
 * fastest, so every kernel sees plain arrays.  reshape shares its input's
 * values (a view: tensors are never written after the op that made them);
 * permute, slice and concat make copies.
 *
 * Dimension letters used in comments and docs everywhere:
 *   B batch, T query length, S key length, C model width, H heads,
 *   D head width (C / H), V vocabulary, F feed-forward width.
 */
#ifndef ATTOGRAD_CORE_H
#define ATTOGRAD_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef AG_DOUBLE
typedef double ag_real;
#define AG_REAL_NAME "f64"
#else
typedef float ag_real;
#define AG_REAL_NAME "f32"
#endif

/* Code compiled with -DAG_DOUBLE must link libattograd64.a, and code
 * compiled without it libattograd.a: the other library would read every
 * ag_real at the wrong width.  So the entry points that every program calls
 * (ag_graph_new, ag_store_new) carry the precision in their symbol names,
 * and a mismatch fails to link with, e.g.,
 *   undefined reference to `ag_graph_new_f32'
 * (compiled for float, linked with the double library). */
#ifdef AG_DOUBLE
#define ag_graph_new ag_graph_new_f64
#define ag_store_new ag_store_new_f64
#else
#define ag_graph_new ag_graph_new_f32
#define ag_store_new ag_store_new_f32
#endif

#define AG_MAX_DIMS 6 /* tensors have 0..6 axes */
#define AG_MAX_SRC 4  /* an op has at most this many tensor inputs */

/* AG_SHAPE(2, 4, 64) expands to the pair `3, (const int[]){2, 4, 64}`. */
#define AG_SHAPE(...)                                                          \
    (int)(sizeof((const int[]){__VA_ARGS__}) / sizeof(int)),                   \
        (const int[]) { __VA_ARGS__ }

/* ------------------------------------------------------------------------ */
/* Status codes                                                               */
/* ------------------------------------------------------------------------ */

typedef enum ag_status {
    AG_OK = 0,
    AG_ERR_SHAPE,  /* shapes do not fit the op */
    AG_ERR_ARG,    /* a bad argument: axis, NULL input, bad value */
    AG_ERR_NOMEM,  /* an allocation failed */
    AG_ERR_IO,     /* a file could not be opened, read or written */
    AG_ERR_FORMAT, /* a file's content is not what it should be */
    AG_ERR_STATE,  /* the call does not fit the object's state */
    AG_ERR_NUMERIC /* a NaN or Inf where a finite number was needed */
} ag_status;

const char *ag_status_name(ag_status s); /* "shape error", ... */

/* ------------------------------------------------------------------------ */
/* Ops: the table of primitives                                               */
/* ------------------------------------------------------------------------ */

/* One enum line per op; ops/<name>.c implements it and src/core/op_table.c lists
 * it.  AG_OP_LEAF marks tensors that no op made (inputs, parameters). */
typedef enum ag_op_id {
    AG_OP_LEAF = 0,
    AG_OP_ADD,
    AG_OP_SUB,
    AG_OP_MUL,
    AG_OP_DIV,
    AG_OP_SCALE,
    AG_OP_SHIFT,
    AG_OP_NEG,
    AG_OP_EXP,
    AG_OP_LOG,
    AG_OP_SQRT,
    AG_OP_TANH,
    AG_OP_RELU,
    AG_OP_GELU,
    AG_OP_MATMUL,
    AG_OP_RESHAPE,
    AG_OP_PERMUTE,
    AG_OP_CONCAT,
    AG_OP_SLICE,
    AG_OP_SUM,
    AG_OP_MEAN,
    AG_OP_MAX,
    AG_OP_SOFTMAX,
    AG_OP_LOG_SOFTMAX,
    AG_OP_MASKED_FILL,
    AG_OP_LAYER_NORM,
    AG_OP_EMBEDDING,
    AG_OP_DROPOUT,
    AG_OP_CROSS_ENTROPY,
    AG_OP_LINEAR,
    AG_OP_MASKED_SOFTMAX,
    AG_OP_INDEX_ADD,
    AG_OP_GELU_TANH,
    AG_OP_ATTENTION,
    AG_OP_LINEAR_ADD,
    AG_OP_EXPAND,
    AG_OP_REPEAT,
    AG_OP_ARGMAX,
    AG_OP_TOPK,
    AG_OP_WHERE,
    AG_OP_CLAMP,
    AG_OP_COUNT
} ag_op_id;

const char *ag_op_name(int op); /* "matmul"; "leaf" for AG_OP_LEAF */
int ag_op_find(const char *name); /* op id, or -1 */

/* ------------------------------------------------------------------------ */
/* Tensors                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct ag_graph ag_graph;
typedef struct ag_store ag_store;
typedef struct ag_tensor ag_tensor;

struct ag_tensor {
    int ndim;                  /* 0..AG_MAX_DIMS; 0 is a scalar */
    int shape[AG_MAX_DIMS];    /* shape[ndim..] are 1 */
    size_t size;               /* product of the shape (1 for a scalar) */
    ag_real *data;             /* size values, row-major, contiguous */
    ag_real *grad;             /* d loss / d data, or NULL (see ag_backward) */
    int op;                    /* ag_op_id that made it */
    int nsrc;                  /* number of tensor inputs */
    ag_tensor *src[AG_MAX_SRC];/* tensor inputs, in the op's order */
    int requires_grad;         /* 1 when a gradient must flow into it */
    int is_param;              /* 1 for a parameter (owned by an ag_store) */
    char name[64];             /* user-given name ("q", "scores"), or "" */
};
/* The library allocates every tensor (a graph's, a store's), with private
 * state after this public view: a tensor cannot be made by hand. */

/* The op's own arguments, as ops/<name>.c documents them (an axis, a
 * permutation, a scale, an eps): integer argument i (0..AG_MAX_DIMS+1) and
 * real argument i (0..1); 0 for a leaf or out of range.  For pictures and
 * debuggers. */
int ag_tensor_iarg(const ag_tensor *t, int i);
double ag_tensor_farg(const ag_tensor *t, int i);

/* Leaves on a graph.  They live until ag_graph_reset, like every tensor of
 * the graph: an op given a tensor from before the last reset refuses it
 * with an error that names it (always in the step right after that reset;
 * a tensor kept unused through two or more steps can alias a new one).
 * Keep constants in a store instead, with ag_store_constant.  Zero-filled,
 * or copied from data (size values, row-major).  A leaf gets a gradient
 * only after ag_set_requires_grad(t, 1). */
ag_tensor *ag_tensor_new(ag_graph *g, int ndim, const int *shape);
ag_tensor *ag_tensor_from(ag_graph *g, int ndim, const int *shape,
                          const ag_real *data);
ag_tensor *ag_scalar(ag_graph *g, ag_real value);
void ag_set_requires_grad(ag_tensor *t, int on);
/* Name a tensor for pictures and messages; returns t (NULL passes through). */
ag_tensor *ag_set_name(ag_tensor *t, const char *name);

/* "[2, 4, 64]" into buf (always NUL-terminated); returns buf. */
char *ag_shape_str(const ag_tensor *t, char *buf, size_t len);
char *ag_shape_str_n(int ndim, const int *shape, char *buf, size_t len);
int ag_same_shape(const ag_tensor *a, const ag_tensor *b);
/* Print "name [2, 3]" and the values, rows on lines, to f. */
void ag_tensor_print(FILE *f, const ag_tensor *t, const char *label);

/* ------------------------------------------------------------------------ */
/* Graphs: the tape of one step                                               */
/* ------------------------------------------------------------------------ */

ag_graph *ag_graph_new(void); /* NULL when out of memory */
void ag_graph_free(ag_graph *g);
/* Forget every tensor of the graph (the arena rewinds, its memory is kept)
 * and clear its error.  Parameters are untouched. */
void ag_graph_reset(ag_graph *g);

ag_status ag_graph_status(const ag_graph *g);
const char *ag_graph_error(const ag_graph *g); /* "" when AG_OK */
/* Record an error on the graph (first one wins); returns the status. */
ag_status ag_graph_fail(ag_graph *g, ag_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Training mode switches dropout on (default: on). */
void ag_graph_set_training(ag_graph *g, int training);
int ag_graph_training(const ag_graph *g);
/* Grad mode (default: on).  Off (PyTorch's torch.no_grad()): ops compute
 * their values but record nothing for backward: no tape entry, nothing
 * requires grad, and the state an op saves only for backward is dropped
 * when the next op is made.  ag_backward then fails with AG_ERR_STATE.
 * For inference: a GPT forward uses less arena. */
void ag_graph_set_grad(ag_graph *g, int grad);
int ag_graph_grad(const ag_graph *g);
/* The graph's random stream (dropout).  Seeded, so runs repeat. */
void ag_graph_seed(ag_graph *g, uint64_t seed);
uint64_t *ag_graph_rng(ag_graph *g); /* the state, to save or restore */

/* Tape access, in creation order (a topological order). */
int ag_graph_node_count(const ag_graph *g);
ag_tensor *ag_graph_node(const ag_graph *g, int i);
size_t ag_graph_arena_bytes(const ag_graph *g); /* bytes reserved */
size_t ag_graph_arena_used(const ag_graph *g);  /* bytes in use now */

/* Reverse-mode autodiff from a scalar (size 1) loss: d loss / d loss = 1, then
 * each node the loss depends on, newest first, adds its inputs' gradients.
 * Iterative: no recursion.  As PyTorch's loss.backward(retain_graph=True):
 *   - leaves (parameters, and graph tensors with requires_grad that no op
 *     made) accumulate: each call adds d loss / d leaf into their grad
 *     (parameters' in the store until ag_store_zero_grad).  So calling it
 *     twice on one loss adds twice the gradient, and two losses built on one
 *     tape (sharing a subgraph or not) add the sum of their gradients;
 *   - an intermediate's grad is d loss / d tensor for the latest call that
 *     reached it, or NULL: NULL before backward, without requires_grad, and
 *     for a reshape, add or sub whose gradient buffer went to its input (it
 *     equals the input's gradient there, and backward saves a copy by
 *     sharing it), and for a gelu or gelu_tanh whose buffer did (its
 *     backward turns it into the input's gradient in place).
 *     ag_retain_grad keeps an intermediate's own gradient.
 * The tape may grow after a backward: a later call visits only the nodes
 * its own loss depends on.  Returns AG_ERR_SHAPE for a non-scalar loss,
 * AG_ERR_ARG for a loss that is not on g's tape (of another graph, or from
 * before the last reset), the graph's error when it has one. */
ag_status ag_backward(ag_graph *g, ag_tensor *loss);

/* Backward from a tensor y of any shape, given dy = d out / d y (y->size
 * values, row-major, in y's shape) for some scalar out the caller has in
 * mind: PyTorch's y.backward(dy).  Leaves receive d out / d leaf =
 * sum_i dy_i d y_i / d leaf, as ag_backward on sum(y * dy) would give,
 * without building that product.  ag_backward(g, loss) is
 * ag_backward_from(g, loss, one). */
ag_status ag_backward_from(ag_graph *g, ag_tensor *y, const ag_real *dy);

/* Keep t's own gradient (PyTorch's retain_grad): after each backward that
 * reaches it, t->grad holds d loss / d t, summed over the backward calls as
 * a leaf's is.  Call it when building, before ag_backward.  Costs a copy of
 * t's gradient per call.  A leaf's gradient is always kept: no effect. */
void ag_retain_grad(ag_tensor *t);

/* Debugging NaN and Inf: names the first node of the tape (oldest first)
 * whose values are not finite, then the first gradient that is not (newest
 * first, the order backward fills them), with the op, shapes and position:
 *   "check_finite: log output [4, 5] has NaN at [2, 3] (node 12, inputs [4, 5])"
 *   "check_finite: gradient of parameter 'w' [3, 2] has Inf at [1, 0] (input 1 of node 5, matmul)"
 * NaN is always reported, and so is any non-finite parameter or gradient.
 * An infinity in a forward value is reported only where an op makes it
 * (exp overflowing, log(0), x / 0): not in a leaf, not as masked_fill's fill
 * value, not when the op's inputs already hold one (a -inf mask flowing on).
 * Records AG_ERR_NUMERIC on the graph and returns it; AG_OK when everything
 * is finite; the graph's error if it already has one.  With the environment
 * variable AG_CHECK_FINITE=1, ag_backward checks the forward values and the
 * loss before it starts and every gradient after it ends. */
ag_status ag_graph_check_finite(ag_graph *g);

/* ------------------------------------------------------------------------ */
/* Parameter store: persistent tensors (weights) and their gradients         */
/* ------------------------------------------------------------------------ */

ag_store *ag_store_new(void); /* NULL when out of memory */
void ag_store_free(ag_store *s);
/* Add a zero-filled parameter with a zero gradient; requires_grad is 1.
 * Names are unique ("encoder.blocks.0.attention.w_q.weight"); NULL on a
 * duplicate name, a bad shape or no memory (ag_store_error says which). */
ag_tensor *ag_param(ag_store *s, const char *name, int ndim, const int *shape);
ag_tensor *ag_store_find(const ag_store *s, const char *name);
/* A constant owned by the store: a copy of data (ndim, shape; zeros when
 * data is NULL), for values every step reuses (a causal mask, a table of
 * positions).  Ops on any graph take it, whatever ag_graph_reset did: it
 * lives until ag_store_free.  It is not a parameter: ag_store_count,
 * ag_store_at, ag_store_find, checkpoints and optimizers do not see it,
 * it has no gradient, and ag_set_requires_grad leaves it off.  Names are
 * unique among the store's constants.  NULL (ag_store_error says why) on a
 * duplicate name, a bad shape or no memory. */
ag_tensor *ag_store_constant(ag_store *s, const char *name, int ndim, const int *shape,
                             const ag_real *data);
int ag_store_count(const ag_store *s);
ag_tensor *ag_store_at(const ag_store *s, int i); /* in insertion order */
size_t ag_store_numel(const ag_store *s);         /* total parameters */
void ag_store_zero_grad(ag_store *s);
const char *ag_store_error(const ag_store *s);

/* Seeded initializers (each element from a splitmix/xoshiro stream). */
void ag_init_uniform(ag_tensor *t, double lo, double hi, uint64_t seed);
void ag_init_normal(ag_tensor *t, double mean, double std, uint64_t seed);
void ag_init_const(ag_tensor *t, double value);

/* ------------------------------------------------------------------------ */
/* Random numbers: xoshiro256** seeded by splitmix64                          */
/* ------------------------------------------------------------------------ */

typedef struct ag_rng {
    uint64_t s[4];
} ag_rng;
void ag_rng_seed(ag_rng *r, uint64_t seed);
uint64_t ag_rng_next(ag_rng *r);
double ag_rng_uniform(ag_rng *r); /* [0, 1), 53 bits */
double ag_rng_normal(ag_rng *r);  /* mean 0, std 1 (Box-Muller) */

/* ------------------------------------------------------------------------ */
/* Primitive ops.  Each returns a new tensor on g, or NULL (see Errors).      */
/* The math of each forward and backward is at the top of ops/<name>.c.      */
/* ------------------------------------------------------------------------ */

/* Element-wise with NumPy broadcasting: shapes are aligned on the right and an
 * axis of size 1 (or a missing one) stretches.  Backward sums over the
 * stretched axes. */
ag_tensor *ag_add(ag_graph *g, ag_tensor *a, ag_tensor *b); /* a + b */
ag_tensor *ag_sub(ag_graph *g, ag_tensor *a, ag_tensor *b); /* a - b */
ag_tensor *ag_mul(ag_graph *g, ag_tensor *a, ag_tensor *b); /* a * b */
ag_tensor *ag_div(ag_graph *g, ag_tensor *a, ag_tensor *b); /* a / b */

ag_tensor *ag_scale(ag_graph *g, ag_tensor *x, double s); /* s * x */
ag_tensor *ag_shift(ag_graph *g, ag_tensor *x, double c); /* x + c */
ag_tensor *ag_neg(ag_graph *g, ag_tensor *x);             /* -x */
ag_tensor *ag_exp(ag_graph *g, ag_tensor *x);
ag_tensor *ag_log(ag_graph *g, ag_tensor *x);
ag_tensor *ag_sqrt(ag_graph *g, ag_tensor *x);
ag_tensor *ag_tanh(ag_graph *g, ag_tensor *x);
ag_tensor *ag_relu(ag_graph *g, ag_tensor *x);
ag_tensor *ag_gelu(ag_graph *g, ag_tensor *x); /* x * Phi(x), erf form */
/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): GPT-2's tanh form */
ag_tensor *ag_gelu_tanh(ag_graph *g, ag_tensor *x);

/* Batched matrix product: a [..., M, K] @ b [..., K, N] -> [..., M, N]; the
 * batch axes broadcast.  A 1-d b is not promoted: give shapes of rank >= 2. */
ag_tensor *ag_matmul(ag_graph *g, ag_tensor *a, ag_tensor *b);
/* a @ b^T over the last two axes: a [..., M, K], b [..., N, K] -> [..., M, N]
 * (Q K^T), without a transposed copy of b. */
ag_tensor *ag_matmul_bt(ag_graph *g, ag_tensor *a, ag_tensor *b);

/* Same values, new shape (one axis may be -1: inferred).  The result shares
 * x's data (a view); when it is x's newest consumer, backward gives them one
 * gradient buffer too, and its grad reads NULL after (see ag_backward). */
ag_tensor *ag_reshape(ag_graph *g, ag_tensor *x, int ndim, const int *shape);
/* y.shape[i] = x.shape[perm[i]]. */
ag_tensor *ag_permute(ag_graph *g, ag_tensor *x, const int *perm);
/* Swap two axes (a permute).  Negative axes count from the end. */
ag_tensor *ag_transpose(ag_graph *g, ag_tensor *x, int axis0, int axis1);
/* Join n tensors along axis; every other axis must agree. */
ag_tensor *ag_concat(ag_graph *g, int n, ag_tensor *const *xs, int axis);
/* x[..., start:start+len, ...] along axis (a copy). */
ag_tensor *ag_slice(ag_graph *g, ag_tensor *x, int axis, int start, int len);
/* PyTorch's x.expand(shape): size-1 axes of x stretch to shape's sizes, -1
 * keeps an axis, new leading axes may be added; a copy, whose backward sums
 * over the stretched axes.  A size that is not 1 and differs is an error:
 * "expand: cannot expand [2, 3] to [4, 3]: ...". */
ag_tensor *ag_expand(ag_graph *g, ag_tensor *x, int ndim, const int *shape);
/* PyTorch's x.repeat(reps): x tiled reps[k] times along axis k (ndim >=
 * x->ndim repeats, x read with leading 1s); backward sums the copies.  A
 * negative repeat is an error. */
ag_tensor *ag_repeat(ag_graph *g, ag_tensor *x, int ndim, const int *reps);
/* y = cond != 0 ? a : b element-wise (torch.where), the three broadcast
 * together; cond is data, never differentiated.  da gets dy where cond
 * holds, db elsewhere, each summed over its stretched axes. */
ag_tensor *ag_where(ag_graph *g, ag_tensor *cond, ag_tensor *a, ag_tensor *b);
/* y = min(max(x, lo), hi) (torch.clamp; a bound may be +-INFINITY); dx = dy
 * where lo <= x <= hi, boundaries included as in PyTorch, else 0.  A NaN
 * bound is an error. */
ag_tensor *ag_clamp(ag_graph *g, ag_tensor *x, double lo, double hi);

/* Reductions over one axis (negative counts from the end); keepdim keeps it
 * as size 1.  The _all forms reduce everything to a scalar. */
ag_tensor *ag_sum(ag_graph *g, ag_tensor *x, int axis, int keepdim);
ag_tensor *ag_mean(ag_graph *g, ag_tensor *x, int axis, int keepdim);
ag_tensor *ag_sum_all(ag_graph *g, ag_tensor *x);
ag_tensor *ag_mean_all(ag_graph *g, ag_tensor *x);
/* Max over an axis; the gradient goes to the first maximal element. */
ag_tensor *ag_max(ag_graph *g, ag_tensor *x, int axis, int keepdim);
/* Index of the max over an axis (torch.argmax): ag_real values holding
 * exact integers (PyTorch gives int64), the first on a tie, a NaN counting
 * as the max.  No gradient: the result never requires grad. */
ag_tensor *ag_argmax(ag_graph *g, ag_tensor *x, int axis, int keepdim);
/* The k largest values along axis, sorted, largest first (largest = 0: the
 * k smallest, smallest first): torch.topk.  The gradient goes to the picked
 * elements.  *indices (when not NULL) gets their positions as a leaf of
 * exact integers; equal values in index order.  k outside [0, N] is an error. */
ag_tensor *ag_topk(ag_graph *g, ag_tensor *x, int k, int axis, int largest, ag_tensor **indices);

/* Over the last axis, stable (the row max is subtracted first).  A row that
 * is entirely -inf gives zeros (softmax) or -inf (log_softmax), never NaN. */
ag_tensor *ag_softmax(ag_graph *g, ag_tensor *x);
ag_tensor *ag_log_softmax(ag_graph *g, ag_tensor *x);

/* y = (mask == 0) ? value : x, mask broadcast to x's shape.  The mask is read
 * as data (never differentiated).  value may be -INFINITY. */
ag_tensor *ag_masked_fill(ag_graph *g, ag_tensor *x, ag_tensor *mask,
                          double value);

/* Over the last axis C: y = (x - mean) / sqrt(var + eps) * gain + bias, with
 * the biased variance (as PyTorch).  gain and bias are [C]; either may be
 * NULL (then 1 and 0). */
ag_tensor *ag_layer_norm(ag_graph *g, ag_tensor *x, ag_tensor *gain,
                         ag_tensor *bias, double eps);

/* Rows of weight [V, C] picked by ids (n = product of shape): out is
 * shape + [C].  Backward scatter-adds into weight.  An id outside [0, V) is
 * an error. */
ag_tensor *ag_embedding(ag_graph *g, ag_tensor *weight, const int *ids,
                        int ndim, const int *shape);

/* embedding's adjoint: y [N, C] = 0, then y[idx[i]] += x[i] for each row
 * i of x [n, C] (PyTorch's zeros(N, C).index_add(0, idx, x)).  Backward
 * gathers dx[i] = dy[idx[i]].  An index outside [0, N) is an error. */
ag_tensor *ag_index_add(ag_graph *g, ag_tensor *x, const int *idx, int N);

/* Inverted dropout: in training, each element is zeroed with probability p
 * and the rest scaled by 1/(1-p); in eval (or p == 0) y = x. */
ag_tensor *ag_dropout(ag_graph *g, ag_tensor *x, double p);

/* Mean over the targets that are not ignore_index of
 *   -(1-ls) * log_softmax(logits)[target] - ls * mean_v log_softmax(logits)[v]
 * (ls = label smoothing, 0 for plain cross-entropy).  logits [..., V];
 * targets has one int per row of logits.  Fused log-softmax + NLL.  When
 * every target is ignored the loss is 0 with zero gradient (PyTorch gives
 * NaN).  Returns a scalar. */
ag_tensor *ag_cross_entropy(ag_graph *g, ag_tensor *logits, const int *targets,
                            int ignore_index, double label_smoothing);
/* How the per-row losses are combined: their mean over the rows not
 * ignored (0, ag_cross_entropy's), their sum, or none (one loss per row,
 * shape logits.shape[:-1], 0 for an ignored row), as PyTorch's
 * reduction="mean" | "sum" | "none". */
typedef enum ag_reduction {
    AG_REDUCTION_MEAN = 0,
    AG_REDUCTION_SUM,
    AG_REDUCTION_NONE
} ag_reduction;
/* ag_cross_entropy with a reduction: a scalar for mean and sum, logits
 * [..., V] -> [...] for none (per-token losses). */
ag_tensor *ag_cross_entropy_ex(ag_graph *g, ag_tensor *logits, const int *targets,
                               int ignore_index, double label_smoothing,
                               ag_reduction reduction);

/* ------------------------------------------------------------------------ */
/* Gradient checking                                                          */
/* ------------------------------------------------------------------------ */

/* Builds the scalar loss on g from the tensors in the store and ctx.  Called
 * many times; must build the same computation each time. */
typedef ag_tensor *(*ag_build_fn)(ag_graph *g, void *ctx);

typedef struct ag_gradcheck_result {
    const ag_tensor *input; /* which input */
    double max_abs_err;     /* worst |analytic - numeric| */
    double max_rel_err;     /* worst |analytic - numeric| / max(|numeric|, abs_tol) */
    size_t worst_index;     /* element of the worst violation (or error) */
    size_t failed;          /* elements that broke the tolerance */
} ag_gradcheck_result;

typedef struct ag_gradcheck_opts {
    double eps;     /* central-difference step: 1e-6 */
    double abs_tol; /* pass if |a - n| <= abs_tol + rel_tol * |n|: 1e-5 */
    double rel_tol; /* 1e-3 */
    /* For testing the checker: the analytic backward of op break_op (an
     * ag_op_id; 0 for none) sees its incoming gradient multiplied by
     * break_factor, so the check must fail. */
    int break_op;
    double break_factor;
} ag_gradcheck_opts;
#define AG_GRADCHECK_DEFAULTS {1e-6, 1e-5, 1e-3, 0, 1}

/* Check the analytic gradient of build's loss with respect to each of the n
 * inputs (store-owned tensors) against central finite differences,
 *   numeric = (L(x + eps) - L(x - eps)) / (2 eps),   element by element.
 * The graph's random stream is rewound before every build, so dropout draws
 * the same mask each time.  Fills results[0..n).  Returns AG_OK when every
 * element passes; AG_ERR_NUMERIC when some do not, with g's error naming
 * the worst input and element; or the build's error.
 * Needs the double build (-DAG_DOUBLE, libattograd64.a): in float, rounding
 * (about 6e-8 of L) divided by 2 eps swamps the difference quotient, and
 * most elements would fail whatever the backward.  The float build refuses
 * with AG_ERR_STATE and a message saying so. */
ag_status ag_gradcheck(ag_graph *g, ag_build_fn build, void *ctx,
                       ag_tensor *const *inputs, int n,
                       const ag_gradcheck_opts *opts,
                       ag_gradcheck_result *results);

/* ag_gradcheck over every parameter of s, in the store's order: no input
 * array to fill.  results is NULL or holds ag_store_count(s) entries.  On
 * AG_ERR_NUMERIC, g's error names the worst parameter and element. */
ag_status ag_gradcheck_store(ag_graph *g, ag_build_fn build, void *ctx, ag_store *s,
                             const ag_gradcheck_opts *opts, ag_gradcheck_result *results);

/* The built-in op checks: every op in the table carries cases (shapes, with
 * size-1 and broadcast axes, built in ops/<name>.c).  Case i of op:
 * L = sum(op(inputs) * w) for a fixed random w, inputs drawn from `seed`,
 * checked with ag_gradcheck (worst result over the inputs in *worst). */
int ag_op_case_count(int op);
const char *ag_op_case_label(int op, int i);
ag_status ag_op_check(int op, int i, uint64_t seed, const ag_gradcheck_opts *opts,
                      ag_gradcheck_result *worst, char *err, size_t errlen);

/* Deprecated: set break_op and break_factor in ag_gradcheck_opts.  Makes
 * ag_gradcheck and ag_op_check, when their opts break no op, break op `op`
 * by `factor` (op <= 0 switches it off).  Plain ag_backward is not
 * affected. */
void ag_debug_break_backward(int op, double factor)
#if defined(__GNUC__)
    __attribute__((deprecated("set break_op in ag_gradcheck_opts")))
#endif
    ;

/* ------------------------------------------------------------------------ */
/* Memory: every allocation of the library goes through these hooks          */
/* ------------------------------------------------------------------------ */

typedef struct ag_allocator {
    void *(*alloc)(size_t bytes, void *user);
    void (*release)(void *ptr, void *user);
    void *user;
} ag_allocator;
/* NULL restores malloc/free.  Set it before creating any object. */
void ag_set_allocator(const ag_allocator *a);
/* Number of allocations made so far through the hooks (for benchmarks and
 * tests that prove a step allocates nothing). */
uint64_t ag_alloc_count(void);

/* ------------------------------------------------------------------------ */
/* Threads                                                                    */
/* ------------------------------------------------------------------------ */

/* Threads the kernels may use (matmul, softmax, layer_norm, element-wise
 * ops): 1 by default; n < 1 counts as 1.  Results do not depend on it: each
 * output element is computed by one thread, in the same order. */
void ag_set_threads(int n);
int ag_get_threads(void);

/* Which code runs the ops.  AG_KERNELS_FAST (default): the kernel room's
 * fast code where an op has one; AG_KERNELS_REFERENCE: every op's plain
 * reference in ops/.  The environment's AG_KERNELS=reference sets it at
 * first use; ag_set_kernels overrides.  Set it between steps, not during. */
typedef enum ag_kernels { AG_KERNELS_FAST = 0, AG_KERNELS_REFERENCE = 1 } ag_kernels;
void ag_set_kernels(ag_kernels k);
ag_kernels ag_get_kernels(void);

/* Data parallelism: a training step's batch split among workers, a thread
 * each (src/core/team.c).  For toy models this beats splitting each op:
 * a step is hundreds of small ops, and the threads meet twice a step
 * instead of at every op.  Worker 0 works on the caller's graph and the
 * model's store; worker k > 0 on a graph of its own and a replica store:
 * the same parameters (names, sizes, order), whose values are the model's
 * (read in place, never copied) and whose gradients are the worker's own.
 *
 *   ag_team *t = ag_team_new(store, 2, my_init, &my, err, sizeof err);
 *   ...each step: ag_graph_reset(g); ag_team_step(t, g, 2, my_loss, &batch, &loss);
 *      then clip, optimizer step and zero_grad on store, as usual. */
typedef struct ag_team ag_team;
/* Build the model again into replica (worker k's empty store); any values. */
typedef ag_status (*ag_team_init_fn)(void *ctx, int worker, ag_store *replica);
/* Part k of nparts: build on g, with the parameters of s (the worker's
 * store), the mean loss of part k of the batch, and put in *weight its
 * share of the whole batch's loss (its share of the examples or tokens:
 * the weights of all parts sum to 1).  Weight 0 (and no error on g) skips
 * the part.  The parts are built at once, on different threads: fn must
 * only build on its own g and s, and read (never write) what it shares. */
typedef ag_tensor *(*ag_team_loss_fn)(void *ctx, ag_graph *g, ag_store *s, int part, int nparts,
                                      double *weight);
/* n workers (1..256) for the parameters in s: init is called for k = 1..n-1
 * (not needed for n = 1).  NULL on a bad argument, no memory, or a replica
 * that does not match s (err, errlen bytes, says which). */
ag_team *ag_team_new(ag_store *s, int n, ag_team_init_fn init, void *ctx, char *err, size_t errlen);
void ag_team_free(ag_team *t);
int ag_team_size(const ag_team *t);
ag_store *ag_team_store(const ag_team *t, int worker); /* 0: the model's */
/* One step in nparts parts (1..size), part k on worker k, all at once:
 * each part's loss scaled by its weight, then backward; the replicas'
 * gradients added into s's in worker order (then zeroed), so that s's
 * gradients receive the gradient of the batch's loss, added to what they
 * hold, as ag_backward would.  *loss = sum_k weight_k loss_k.  The same
 * numbers for the same nparts and seed, whatever the threads' timing;
 * another nparts rounds differently and draws other dropout masks: part 0
 * draws from g's stream, part k from a stream seeded by the k-th number
 * g's stream gives in this step.  nparts = 1 is fn on g and ag_backward,
 * bit for bit.  Returns g's status; on failure ag_graph_error(g) names
 * the problem (and the worker), the replicas are clean again, and s's
 * gradients may hold part 0's share, as after a failed ag_backward: zero
 * them before the next step. */
ag_status ag_team_step(ag_team *t, ag_graph *g, int nparts, ag_team_loss_fn fn, void *ctx, double *loss);

#ifdef __cplusplus
}
#endif
#endif /* ATTOGRAD_CORE_H */
