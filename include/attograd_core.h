/* attograd_core.h: tensors, the define-by-run graph, reverse-mode autodiff,
 * the parameter store, gradient checking and threads.  Includes no other
 * attograd header.  Ownership, errors and precision: docs/design.md.
 * Dimension letters: B batch, T/S query/key length, C width, H heads,
 * D head width, V vocabulary, F feed-forward width. */
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

/* The precision is in these symbols' names: a program compiled for one
 * precision does not link with the other's library. */
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

/* ---- Status codes ------------------------------------------------------ */

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

/* ---- Ops: the table of primitives -------------------------------------- */

/* The primitive ops, one line each: X(name, ID) is the op of ops/<name>.c,
 * ag_<name>, whose id is AG_OP_<ID>.  The enum below and the op table
 * (src/core/op_table.c) are both made from this list, so they cannot
 * disagree: an op whose line is missing has no id, and its file does not
 * compile ("'AG_OP_<ID>' undeclared").  A new op is one line at the end,
 * above the comment that closes the list, so that the ids of the others,
 * part of the library's interface, do not move. */
#define AG_OPS(X) \
    X(add, ADD) \
    X(sub, SUB) \
    X(mul, MUL) \
    X(div, DIV) \
    X(scale, SCALE) \
    X(shift, SHIFT) \
    X(neg, NEG) \
    X(exp, EXP) \
    X(log, LOG) \
    X(sqrt, SQRT) \
    X(tanh, TANH) \
    X(relu, RELU) \
    X(gelu, GELU) \
    X(matmul, MATMUL) \
    X(reshape, RESHAPE) \
    X(permute, PERMUTE) \
    X(concat, CONCAT) \
    X(slice, SLICE) \
    X(sum, SUM) \
    X(mean, MEAN) \
    X(max, MAX) \
    X(softmax, SOFTMAX) \
    X(log_softmax, LOG_SOFTMAX) \
    X(masked_fill, MASKED_FILL) \
    X(layer_norm, LAYER_NORM) \
    X(embedding, EMBEDDING) \
    X(dropout, DROPOUT) \
    X(cross_entropy, CROSS_ENTROPY) \
    X(linear, LINEAR) \
    X(masked_softmax, MASKED_SOFTMAX) \
    X(index_add, INDEX_ADD) \
    X(gelu_tanh, GELU_TANH) \
    X(attention, ATTENTION) \
    X(linear_add, LINEAR_ADD) \
    X(expand, EXPAND) \
    X(repeat, REPEAT) \
    X(argmax, ARGMAX) \
    X(topk, TOPK) \
    X(where, WHERE) \
    X(clamp, CLAMP) \
    X(linear_gelu, LINEAR_GELU) \
    X(gelu_linear_add, GELU_LINEAR_ADD) \
    /* the end of the list */

/* AG_OP_LEAF: a tensor no op made; then the ops in the list's order. */
#define AG_OP_ID_(name, ID) AG_OP_##ID,
typedef enum ag_op_id {
    AG_OP_LEAF = 0,
    AG_OPS(AG_OP_ID_)
    AG_OP_COUNT
} ag_op_id;

const char *ag_op_name(int op); /* "matmul"; "leaf" for AG_OP_LEAF */
int ag_op_find(const char *name); /* op id, or -1 */

/* ---- Tensors ----------------------------------------------------------- */

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
/* Only the library makes tensors (private state follows this view). */

/* The op's integer argument i (0..AG_MAX_DIMS+1) and real argument i (0..1),
 * as ops/<name>.c lists them; 0 for a leaf or out of range. */
int ag_tensor_iarg(const ag_tensor *t, int i);
double ag_tensor_farg(const ag_tensor *t, int i);

/* Leaves on g, zero-filled or copied from data (row-major), owned by g until
 * ag_graph_reset (keep constants in a store: ag_store_constant).  NULL and
 * an error on g for a bad shape or no memory.  A gradient flows into a leaf
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

/* ---- Graphs: the tape of one step -------------------------------------- */

ag_graph *ag_graph_new(void); /* NULL when out of memory */
void ag_graph_free(ag_graph *g);
/* Free every tensor of g (the arena keeps its memory) and clear its error. */
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
/* Grad mode (default on).  Off, as torch.no_grad(): ops record nothing for
 * backward, and ag_backward fails with AG_ERR_STATE. */
void ag_graph_set_grad(ag_graph *g, int grad);
int ag_graph_grad(const ag_graph *g);
/* Keep intermediates' gradients after backward (default off, as PyTorch):
 * off, an intermediate's gradient buffer is reused as soon as its node's
 * backward has run, and its grad reads NULL after backward unless
 * ag_retain_grad kept it, so that a training step holds only the few
 * gradients alive at once.  On (keep 1), every intermediate's grad is its
 * gradient after backward (a picture of the whole graph's gradients).
 * Leaves (parameters, inputs with requires_grad) keep theirs either way;
 * AG_CHECK_FINITE keeps them all for its check. */
void ag_graph_set_keep_grads(ag_graph *g, int keep);
int ag_graph_keep_grads(const ag_graph *g);
/* The graph's random stream (dropout).  Seeded, so runs repeat. */
void ag_graph_seed(ag_graph *g, uint64_t seed);
uint64_t *ag_graph_rng(ag_graph *g); /* the state, to save or restore */

/* Tape access, in creation order (a topological order). */
int ag_graph_node_count(const ag_graph *g);
ag_tensor *ag_graph_node(const ag_graph *g, int i);
size_t ag_graph_arena_bytes(const ag_graph *g); /* bytes reserved */
size_t ag_graph_arena_used(const ag_graph *g);  /* bytes in use now */

/* d loss / d x for every x the scalar loss depends on, added (+=) into the
 * leaves' grad (PyTorch's loss.backward(retain_graph=True)); an intermediate's
 * grad may be NULL (see ag_retain_grad; docs/design.md).  AG_ERR_SHAPE for a
 * non-scalar loss, AG_ERR_ARG for a loss not on g's tape, else g's status. */
ag_status ag_backward(ag_graph *g, ag_tensor *loss);

/* PyTorch's y.backward(dy): leaves receive sum_i dy_i d y_i / d leaf, dy
 * being y->size values in y's shape.  Failures as ag_backward. */
ag_status ag_backward_from(ag_graph *g, ag_tensor *y, const ag_real *dy);

/* Keep t's own gradient (PyTorch's retain_grad): after backward t->grad is
 * d loss / d t, accumulated as a leaf's.  Call before ag_backward. */
void ag_retain_grad(ag_tensor *t);

/* AG_ERR_NUMERIC, recorded on g with the first NaN/Inf value (oldest node
 * first) or gradient (newest first), its op, shapes and position; an Inf
 * only where an op makes it.  AG_OK when finite.  Env AG_CHECK_FINITE=1 runs
 * it around every ag_backward (docs/design.md). */
ag_status ag_graph_check_finite(ag_graph *g);

/* ---- Parameter store: persistent tensors (weights) and their gradients ---- */

ag_store *ag_store_new(void); /* NULL when out of memory */
void ag_store_free(ag_store *s);
/* A zero-filled parameter with a zero gradient, owned by s under a unique
 * name; NULL on a duplicate name, bad shape or no memory (ag_store_error). */
ag_tensor *ag_param(ag_store *s, const char *name, int ndim, const int *shape);
ag_tensor *ag_store_find(const ag_store *s, const char *name);
/* A copy of data (zeros when NULL) owned by s until ag_store_free, usable on
 * any graph across resets; not a parameter (no gradient, not counted, not
 * saved).  NULL on a duplicate name, bad shape or no memory (ag_store_error). */
ag_tensor *ag_store_constant(ag_store *s, const char *name, int ndim, const int *shape,
                             const ag_real *data);
int ag_store_count(const ag_store *s);
ag_tensor *ag_store_at(const ag_store *s, int i); /* in insertion order */
size_t ag_store_numel(const ag_store *s);         /* total parameters */
void ag_store_zero_grad(ag_store *s);
const char *ag_store_error(const ag_store *s);

/* Seeded initializers: the same seed gives the same values. */
void ag_init_uniform(ag_tensor *t, double lo, double hi, uint64_t seed);
void ag_init_normal(ag_tensor *t, double mean, double std, uint64_t seed);
void ag_init_const(ag_tensor *t, double value);

/* ---- Random numbers: xoshiro256** seeded by splitmix64 ----------------- */

typedef struct ag_rng {
    uint64_t s[4];
} ag_rng;
void ag_rng_seed(ag_rng *r, uint64_t seed);
uint64_t ag_rng_next(ag_rng *r);
double ag_rng_uniform(ag_rng *r); /* [0, 1), 53 bits */
double ag_rng_normal(ag_rng *r);  /* mean 0, std 1 (Box-Muller) */

/* ---- Primitive ops: a new tensor on g, or NULL with an error on g ---- */

/* Element-wise, NumPy broadcasting (shapes aligned on the right, size-1 axes
 * stretch).  Each op's math: the top of ops/<name>.c. */
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

/* a [..., M, K] @ b [..., K, N] -> [..., M, N], batch axes broadcast; both
 * of rank >= 2. */
ag_tensor *ag_matmul(ag_graph *g, ag_tensor *a, ag_tensor *b);
/* a [..., M, K] @ b [..., N, K]^T -> [..., M, N], no copy of b^T. */
ag_tensor *ag_matmul_bt(ag_graph *g, ag_tensor *a, ag_tensor *b);

/* x's values in a new shape (one axis may be -1), sharing x's data. */
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

/* Over one axis (negative from the end); keepdim keeps it as size 1.  The
 * _all forms give a scalar. */
ag_tensor *ag_sum(ag_graph *g, ag_tensor *x, int axis, int keepdim);
ag_tensor *ag_mean(ag_graph *g, ag_tensor *x, int axis, int keepdim);
ag_tensor *ag_sum_all(ag_graph *g, ag_tensor *x);
ag_tensor *ag_mean_all(ag_graph *g, ag_tensor *x);
/* The gradient goes to the first maximal element. */
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

/* Over the last axis, max-subtracted; an all -inf row gives zeros (softmax)
 * or -inf (log_softmax), never NaN. */
ag_tensor *ag_softmax(ag_graph *g, ag_tensor *x);
ag_tensor *ag_log_softmax(ag_graph *g, ag_tensor *x);

/* y = (mask == 0) ? value : x, mask broadcast to x (data, no gradient);
 * value may be -INFINITY. */
ag_tensor *ag_masked_fill(ag_graph *g, ag_tensor *x, ag_tensor *mask,
                          double value);

/* y = (x - mean) / sqrt(var + eps) * gain + bias over the last axis C
 * (biased variance); gain, bias [C] or NULL (1, 0). */
ag_tensor *ag_layer_norm(ag_graph *g, ag_tensor *x, ag_tensor *gain,
                         ag_tensor *bias, double eps);

/* weight [V, C] rows picked by ids (shape) -> shape + [C]; an id outside
 * [0, V) is AG_ERR_ARG. */
ag_tensor *ag_embedding(ag_graph *g, ag_tensor *weight, const int *ids,
                        int ndim, const int *shape);

/* y [N, C] = 0, then y[idx[i]] += x[i] for each row of x [n, C] (zeros(N,
 * C).index_add(0, idx, x)); an index outside [0, N) is AG_ERR_ARG. */
ag_tensor *ag_index_add(ag_graph *g, ag_tensor *x, const int *idx, int N);

/* Training: each element zeroed with probability p, the rest scaled by
 * 1/(1-p), from g's stream; in eval (or p == 0) y = x. */
ag_tensor *ag_dropout(ag_graph *g, ag_tensor *x, double p);

/* Scalar mean over rows whose target != ignore_index of -(1-ls) lsm[target]
 * - ls mean_v lsm[v], lsm = log_softmax(logits [..., V]), ls = label
 * smoothing; one target per row.  0 when every target is ignored. */
ag_tensor *ag_cross_entropy(ag_graph *g, ag_tensor *logits, const int *targets,
                            int ignore_index, double label_smoothing);
/* PyTorch's reduction="mean" | "sum" | "none" (one loss per row, 0 if ignored). */
typedef enum ag_reduction {
    AG_REDUCTION_MEAN = 0,
    AG_REDUCTION_SUM,
    AG_REDUCTION_NONE
} ag_reduction;
/* ag_cross_entropy with a reduction: a scalar, or [...] for none. */
ag_tensor *ag_cross_entropy_ex(ag_graph *g, ag_tensor *logits, const int *targets,
                               int ignore_index, double label_smoothing,
                               ag_reduction reduction);

/* ---- Gradient checking ------------------------------------------------- */

/* Builds a scalar loss on g; must build the same computation at every call. */
typedef ag_tensor *(*ag_build_fn)(ag_graph *g, void *ctx);

typedef struct ag_gradcheck_result {
    const ag_tensor *input; /* which input */
    double max_abs_err;     /* worst |analytic - numeric| (NaN when one is NaN) */
    double max_rel_err;     /* worst |analytic - numeric| / max(|numeric|, abs_tol) */
    size_t worst_index;     /* element of the worst violation (or error) */
    size_t failed;          /* elements that failed either stage */
    /* the strict stage (strict_step > 0): */
    size_t strict_failed;   /* elements beyond their derived tolerance */
    size_t rough;           /* elements where L is not smooth within the step */
    double strict_worst;    /* worst |analytic - numeric| / tolerance: <= 1 passes */
    double noise;           /* the loss's rounding noise, measured */
} ag_gradcheck_result;

typedef struct ag_gradcheck_opts {
    double eps;     /* central-difference step: 1e-6 */
    double abs_tol; /* pass if |a - n| <= abs_tol + rel_tol * |n|: 1e-5 */
    double rel_tol; /* 1e-3 */
    /* testing the checker: op break_op's backward (0: none) gives its
     * inputs their gradients times break_factor */
    int break_op;
    double break_factor;
    /* the strict stage's largest step h (h, h/2, h/4: Richardson), with a
     * tolerance derived from the error it measures: 1e-3; 0: off */
    double strict_step;
} ag_gradcheck_opts;
#define AG_GRADCHECK_DEFAULTS {1e-6, 1e-5, 1e-3, 0, 1, 1e-3}

/* Analytic d loss / d inputs[i] (store-owned) against (L(x+eps) - L(x-eps))
 * / (2 eps), then the strict stage (docs/testing.md), element by element,
 * g's stream rewound per build; fills results[0..n).  AG_ERR_NUMERIC (g's
 * error names the worst element), the build's error, or AG_ERR_STATE in the
 * float build (double only). */
ag_status ag_gradcheck(ag_graph *g, ag_build_fn build, void *ctx,
                       ag_tensor *const *inputs, int n,
                       const ag_gradcheck_opts *opts,
                       ag_gradcheck_result *results);

/* ag_gradcheck over every parameter of s, in store order; results NULL or
 * ag_store_count(s) entries. */
ag_status ag_gradcheck_store(ag_graph *g, ag_build_fn build, void *ctx, ag_store *s,
                             const ag_gradcheck_opts *opts, ag_gradcheck_result *results);

/* Each op's gradcheck cases (ops/<name>.c): case i checks L = sum(op(inputs)
 * * w), w fixed, inputs from seed; the worst input's result in *worst, a
 * message in err (errlen bytes). */
int ag_op_case_count(int op);
const char *ag_op_case_label(int op, int i);
ag_status ag_op_check(int op, int i, uint64_t seed, const ag_gradcheck_opts *opts,
                      ag_gradcheck_result *worst, char *err, size_t errlen);

/* A whole model's gradient in a few forward passes (docs/testing.md): for
 * random directions u over every element of the inputs, the analytic
 * directional derivative grad . u against the central difference of L
 * along u, extrapolated (steps h, h/2, h/4) with the strict stage's
 * tolerance derived from the loss's measured rounding noise.  The cost is
 * independent of the parameter count.  u's element j of input k is a random
 * sign times the root mean square of input k's values (1 when they are 0). */
typedef struct ag_gradcheck_model_opts {
    int directions;      /* random directions u: 4 */
    uint64_t seed;       /* of the directions (and of the node walk's w): 1 */
    double step;         /* the largest step h along u: 1e-4 */
    int break_op;        /* testing the checker, as in ag_gradcheck_opts */
    double break_factor;
    double node_step;    /* the node walk's largest step h: 1e-3 */
} ag_gradcheck_model_opts;
#define AG_GRADCHECK_MODEL_DEFAULTS {4, 1, 1e-4, 0, 1, 1e-3}

typedef struct ag_gradcheck_model_result {
    int directions;   /* directions checked */
    int failed;       /* directions beyond their tolerance */
    int rough;        /* directions along which L is not smooth within the step: no verdict */
    double worst;     /* worst |analytic - numeric| / tolerance: <= 1 passes */
    double worst_rel; /* worst |analytic - numeric| / |numeric| */
    double visible;   /* the smallest relative error sure to fail: worst tolerance / |numeric| */
    double noise;     /* the loss's rounding noise, measured */
    size_t elements;  /* elements the directions span */
} ag_gradcheck_model_result;

/* The directional check over the n store-owned inputs (their gradients are
 * overwritten), g's stream rewound per build as ag_gradcheck does.  AG_OK
 * when every direction passes (a rough one gives no verdict), AG_ERR_NUMERIC
 * (g's error says which direction and by how much), the build's error, or
 * AG_ERR_STATE in the float build. */
ag_status ag_gradcheck_model(ag_graph *g, ag_build_fn build, void *ctx, ag_tensor *const *inputs, int n,
                             const ag_gradcheck_model_opts *opts, ag_gradcheck_model_result *res);
/* The same over every parameter of s. */
ag_status ag_gradcheck_model_store(ag_graph *g, ag_build_fn build, void *ctx, ag_store *s,
                                   const ag_gradcheck_model_opts *opts, ag_gradcheck_model_result *res);

/* Name the op: every node of the tape that build makes, y = f(x_1..x_k),
 * has its own backward checked: for a random w over y and random
 * directions u_i over its inputs (as above), w . J u from the op's backward
 * against the central difference of w . f(x + h u), f recomputed from the
 * node's own inputs and arguments in a replay of build (steps h, h/2, h/4
 * and a tolerance from the measured noise, as above).  Each failing node
 * is a line on report (NULL: none), in tape order:
 *   node 137 layer_norm (blocks.1.norm2) [64, 10, 64]: d/d input 0 [64, 10, 64] off by 1.0e-04 ...
 * the layer path read from the names of the parameters the node depends
 * on through its inputs. */
typedef struct ag_gradcheck_walk_result {
    int nodes;      /* nodes whose backward was checked */
    int failed;     /* of them, beyond their tolerance */
    int rough;      /* not smooth within the step: no verdict */
    int first;      /* tape index of the first failing node, -1 when none */
    int first_op;   /* its op (0 when none) */
    double worst;   /* worst |analytic - numeric| / tolerance over the nodes */
    double visible; /* worst tolerance / |numeric| over the nodes not flat */
    int flat;       /* nodes whose w . J u is within its tolerance of 0 (a mask's) */
} ag_gradcheck_walk_result;
ag_status ag_gradcheck_nodes(ag_graph *g, ag_build_fn build, void *ctx, const ag_gradcheck_model_opts *opts,
                             FILE *report, ag_gradcheck_walk_result *res);

/* ---- Memory: every allocation of the library goes through these hooks ---- */

typedef struct ag_allocator {
    void *(*alloc)(size_t bytes, void *user);
    void (*release)(void *ptr, void *user);
    void *user;
} ag_allocator;
/* Every allocation of the library; NULL restores malloc/free.  Set it
 * before making any object. */
void ag_set_allocator(const ag_allocator *a);
/* Allocations made so far through the hooks. */
uint64_t ag_alloc_count(void);

/* ---- Threads ----------------------------------------------------------- */

/* Threads the kernels may use (default 1; n < 1 is 1).  Results do not
 * depend on it. */
void ag_set_threads(int n);
int ag_get_threads(void);

/* FAST (default): the kernel room's code where an op has one; REFERENCE:
 * every op's plain code in ops/.  Env AG_KERNELS=reference sets it at first
 * use.  Change it between steps only. */
typedef enum ag_kernels { AG_KERNELS_FAST = 0, AG_KERNELS_REFERENCE = 1 } ag_kernels;
void ag_set_kernels(ag_kernels k);
ag_kernels ag_get_kernels(void);

/* The precision of the matrix products (docs/precision.md).  FP32 (the
 * default): operands and sums in ag_real.  BF16: matmul, linear and its
 * fused forms, and attention's Q K^T and P V, round their operands to
 * bfloat16 (ag_bf16_round) and sum the exact products in ag_real, forward
 * and backward, as PyTorch's autocast does; everything else (parameters,
 * gradients, the optimizer, layer norm, softmax, losses) stays ag_real, and
 * checkpoints are the same.  A graph follows the process default
 * (ag_set_precision) until ag_graph_set_precision sets its own. */
typedef enum ag_precision { AG_PRECISION_FP32 = 0, AG_PRECISION_BF16 = 1 } ag_precision;
void ag_set_precision(ag_precision p);
ag_precision ag_get_precision(void);
void ag_graph_set_precision(ag_graph *g, ag_precision p);
ag_precision ag_graph_precision(const ag_graph *g);
/* "fp32" or "bf16" (a flag's value) into *p: 0, or -1 for another name. */
int ag_precision_parse(const char *name, ag_precision *p);
const char *ag_precision_name(ag_precision p);
/* x rounded to bfloat16 (8 significant bits, float's exponent range), to
 * nearest with ties to even, as PyTorch's tensor.bfloat16(); returned
 * widened to float.  Too large: +-inf; NaN: the NaN 0x7fc0 (ops/bf16.c). */
float ag_bf16_round(float x);

/* Data parallelism: a step's batch split among workers, a thread each.
 * Worker 0 uses the caller's graph and store; worker k > 0 its own graph and
 * a replica store reading the model's values in place (docs/design.md). */
typedef struct ag_team ag_team;
/* Make the model's parameters (same names, shapes, order) in replica. */
typedef ag_status (*ag_team_init_fn)(void *ctx, int worker, ag_store *replica);
/* Build part k's mean loss on g with s's parameters and set *weight to its
 * share of the batch (weights sum to 1; 0 skips it).  Runs on k's thread:
 * write only g and s. */
typedef ag_tensor *(*ag_team_loss_fn)(void *ctx, ag_graph *g, ag_store *s, int part, int nparts,
                                      double *weight);
/* n workers (1..256), init called for k = 1..n-1.  NULL on a bad argument,
 * no memory or a replica unlike s, the reason in err (errlen bytes). */
ag_team *ag_team_new(ag_store *s, int n, ag_team_init_fn init, void *ctx, char *err, size_t errlen);
void ag_team_free(ag_team *t);
int ag_team_size(const ag_team *t);
ag_store *ag_team_store(const ag_team *t, int worker); /* 0: the model's */
/* *loss = sum_k weight_k loss_k over nparts (1..size) parts built at once,
 * its gradient added into s's as ag_backward would; same nparts and seed,
 * same bits.  g's status; on failure zero s's gradients before the next step. */
ag_status ag_team_step(ag_team *t, ag_graph *g, int nparts, ag_team_loss_fn fn, void *ctx, double *loss);

#ifdef __cplusplus
}
#endif
#endif /* ATTOGRAD_CORE_H */
