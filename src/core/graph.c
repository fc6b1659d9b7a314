/* graph.c: the tape of one step, its sticky error, and reverse-mode autodiff.
 *
 * Invariants: the tape lists nodes in creation order.  An op can only use
 * tensors that exist already, so creation order is a topological order and
 * backward is one loop from the newest node to the oldest: no recursion, no
 * sort, any depth.  Every tensor made on a graph carries the graph and its
 * epoch (resets so far), and an op takes only tensors of its own graph and
 * epoch, or store-owned ones: a tensor that outlived its step is refused by
 * name, never read as whatever took its place. */
#include "core/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define ERR_LEN 512

struct ag_graph {
    ag_arena *arena;   /* values, gradients and the ops' saved state */
    ag_arena *heads;   /* tensor headers, two slots each (see header_new) */
    ag_arena *scratch; /* no-grad mode: the newest op's saved state (ag__save) */
    ag_tensor **nodes; /* the tape; capacity kept across resets */
    int count, cap;
    int made;          /* headers made since the last reset */
    uint32_t epoch;    /* resets that followed a made tensor: the stamp of tensors */
    uint32_t passes;   /* backward calls so far: the stamp of their buffers */
    ag_status status;
    char err[ERR_LEN];
    int training;
    int no_grad;       /* ag_graph_set_grad(g, 0): nothing recorded for backward */
    ag_rng rng;
    /* the op table backward reads: ag_op_table, or a copy with one op's
     * backward wrapped by ag__graph_break (the gradient checker's test) */
    const ag_op_desc *const *ops;
    const ag_op_desc *table[AG_OP_COUNT];
    ag_op_desc broken;             /* the wrapping descriptor */
    const ag_op_desc *broken_real; /* the op it wraps */
    double broken_factor;
    bool poison;       /* fill fresh gradient buffers with NaN (ag__graph_poison) */
};

ag_graph *ag_graph_new(void)
{
    ag_graph *g = ag__calloc(1, sizeof *g);
    if (!g) return NULL;
    g->arena = ag__arena_new();
    g->heads = ag__arena_new();
    if (!g->arena || !g->heads) {
        ag_graph_free(g);
        return NULL;
    }
    g->training = 1;
    g->ops = ag_op_table;
    ag_rng_seed(&g->rng, 0);
    return g;
}

void ag_graph_free(ag_graph *g)
{
    if (!g) return;
    ag__arena_free(g->arena);
    ag__arena_free(g->heads);
    ag__arena_free(g->scratch);
    ag__free(g->nodes);
    ag__free(g);
}

/* A reset that follows no new tensor keeps the epoch: the headers of the
 * one before stay where they are, so a stale tensor is still recognised. */
void ag_graph_reset(ag_graph *g)
{
    if (!g) return;
    if (g->made) g->epoch++;
    g->made = 0;
    ag__arena_reset(g->arena);
    ag__arena_reset(g->heads);
    g->count = 0;
    g->status = AG_OK;
    g->err[0] = '\0';
}

ag_status ag_graph_status(const ag_graph *g) { return g ? g->status : AG_ERR_ARG; }
const char *ag_graph_error(const ag_graph *g) { return g ? g->err : "graph is NULL"; }

ag_status ag_graph_fail(ag_graph *g, ag_status s, const char *fmt, ...)
{
    if (!g) return s;
    if (g->status == AG_OK) {
        va_list ap;
        va_start(ap, fmt);
        ag__verrf(g->err, sizeof g->err, s, fmt, ap);
        va_end(ap);
        g->status = s;
    }
    return g->status;
}

void ag__graph_prefix(ag_graph *g, const char *fmt, ...)
{
    if (!g || g->status == AG_OK) return;
    char head[ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    ag__verrf(head, sizeof head, AG_OK, fmt, ap);
    va_end(ap);
    size_t h = strlen(head); /* < ERR_LEN */
    memmove(g->err + h, g->err, ERR_LEN - 1 - h); /* the message's end may fall off */
    memcpy(g->err, head, h);
    g->err[ERR_LEN - 1] = 0;
}

void ag_graph_set_training(ag_graph *g, int training) { if (g) g->training = training != 0; }
int ag_graph_training(const ag_graph *g) { return g ? g->training : 0; }
void ag_graph_set_grad(ag_graph *g, int grad) { if (g) g->no_grad = grad == 0; }
int ag_graph_grad(const ag_graph *g) { return g ? !g->no_grad : 0; }
void ag_graph_seed(ag_graph *g, uint64_t seed) { if (g) ag_rng_seed(&g->rng, seed); }
uint64_t *ag_graph_rng(ag_graph *g) { return g ? g->rng.s : NULL; }
ag_rng *ag__graph_rng(ag_graph *g) { return &g->rng; }

int ag_graph_node_count(const ag_graph *g) { return g ? g->count : 0; }
ag_tensor *ag_graph_node(const ag_graph *g, int i)
{
    return (g && i >= 0 && i < g->count) ? g->nodes[i] : NULL;
}
size_t ag_graph_arena_bytes(const ag_graph *g)
{
    if (!g) return 0;
    return ag__arena_reserved(g->arena) + ag__arena_reserved(g->heads) + (g->scratch ? ag__arena_reserved(g->scratch) : 0);
}
size_t ag_graph_arena_used(const ag_graph *g)
{
    if (!g) return 0;
    return ag__arena_used(g->arena) + ag__arena_used(g->heads) + (g->scratch ? ag__arena_used(g->scratch) : 0);
}

void *ag__alloc(ag_graph *g, size_t bytes)
{
    void *p = ag__arena_alloc(g->arena, bytes);
    if (!p) ag_graph_fail(g, AG_ERR_NOMEM, "out of memory: arena could not grow by %zu bytes", bytes);
    return p;
}

/* With grad on, the saved state lives in the arena until the reset, for
 * backward.  In no-grad mode nothing will read it after its op returns:
 * every op's state shares one scratch arena, emptied when the next node is
 * made (ag__node), so it costs the largest op's state, not the sum. */
void *ag__save(ag_graph *g, size_t bytes)
{
    if (!g->no_grad) return ag__alloc(g, bytes);
    if (!g->scratch && !(g->scratch = ag__arena_new())) {
        ag_graph_fail(g, AG_ERR_NOMEM, "out of memory: no scratch arena for %zu bytes", bytes);
        return NULL;
    }
    void *p = ag__arena_alloc(g->scratch, bytes);
    if (!p) ag_graph_fail(g, AG_ERR_NOMEM, "out of memory: scratch arena could not grow by %zu bytes", bytes);
    return p;
}

/* " 'name'" when t has a name, else "". */
static const char *name_str(const ag_tensor *t, char *buf, size_t len)
{
    if (!t->name[0]) return "";
    snprintf(buf, len, " '%s'", t->name);
    return buf;
}

/* Store-owned, or made on g in its current epoch: ag__usable's test. */
static inline bool fresh_here(const ag_graph *g, const ag_tensor *t)
{
    const ag__tensor_impl *n = ag__impl(t);
    return !n->graph || (n->graph == g && n->epoch == g->epoch);
}

bool ag__usable(ag_graph *g, const char *op, int k, const ag_tensor *t)
{
    if (fresh_here(g, t)) return true;
    const ag__tensor_impl *n = ag__impl(t);
    char name[80], shape[96];
    ag_graph_fail(g, AG_ERR_ARG, "%s: input %d%s %s %s", op, k, name_str(t, name, sizeof name),
                  ag_shape_str(t, shape, sizeof shape),
                  n->graph == g ? "was made before ag_graph_reset (keep constants across resets with "
                                  "ag_store_constant)"
                                : "is from another graph");
    return false;
}

bool ag__ok(ag_graph *g, const char *op, int n, ...)
{
    if (!g || g->status != AG_OK) return false;
    va_list ap;
    va_start(ap, n);
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        const ag_tensor *t = va_arg(ap, const ag_tensor *);
        if (!t) {
            ag_graph_fail(g, AG_ERR_ARG, "%s: input %d is NULL", op, i);
            ok = false;
        } else if (!fresh_here(g, t)) {
            ok = ag__usable(g, op, i, t);
        }
    }
    va_end(ap);
    return ok;
}

bool ag__given(ag_graph *g, const char *fn, const char *what, const void *p)
{
    if (!g || g->status != AG_OK) return false;
    if (!p) ag_graph_fail(g, AG_ERR_ARG, "%s: %s is NULL", fn, what);
    return p != NULL;
}

size_t ag__numel(int ndim, const int *shape)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    return n;
}

bool ag__shape_size(int ndim, const int *shape, size_t *size)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return false;
        if (shape[i] > 0 && n > SIZE_MAX / sizeof(ag_real) / (size_t)shape[i]) return false;
        n *= (size_t)shape[i];
    }
    *size = n;
    return true;
}

/* Push t on the tape, growing it (geometrically, kept across resets). */
static bool tape_push(ag_graph *g, ag_tensor *t)
{
    if (g->count == g->cap) {
        int cap = g->cap ? 2 * g->cap : 256;
        ag_tensor **n = ag__malloc((size_t)cap * sizeof *n);
        if (!n) {
            ag_graph_fail(g, AG_ERR_NOMEM, "out of memory: tape of %d nodes", cap);
            return false;
        }
        if (g->count) memcpy(n, g->nodes, (size_t)g->count * sizeof *n);
        ag__free(g->nodes);
        g->nodes = n;
        g->cap = cap;
    }
    g->nodes[g->count++] = t;
    return true;
}

/* A zeroed header for a new tensor.  Each header takes two slots of the
 * headers' arena and uses the one of its epoch's parity: the arena hands
 * out the same slots in every step, so the headers of the epoch before
 * survive the current one untouched.  A tensor kept across a reset thus
 * still reads as what it was, with its old stamp, instead of as the new
 * tensor that took its place (which the same address would otherwise hold). */
static ag__tensor_impl *header_new(ag_graph *g)
{
    enum { SLOT = (sizeof(ag__tensor_impl) + 63) / 64 * 64 };
    unsigned char *two = ag__arena_alloc(g->heads, 2 * SLOT);
    if (!two) {
        ag_graph_fail(g, AG_ERR_NOMEM, "out of memory: arena could not grow by %d bytes", 2 * SLOT);
        return NULL;
    }
    ag__tensor_impl *n = (ag__tensor_impl *)(two + (g->epoch & 1) * SLOT);
    memset(n, 0, sizeof *n);
    g->made++;
    return n;
}

ag_tensor *ag__node(ag_graph *g, int op, int ndim, const int *shape, int nsrc,
                    ag_tensor *const *src)
{
    const char *name = ag_op_name(op);
    if (ndim < 0 || ndim > AG_MAX_DIMS) {
        ag_graph_fail(g, AG_ERR_SHAPE, "%s: %d axes, at most %d are supported", name, ndim, AG_MAX_DIMS);
        return NULL;
    }
    size_t size;
    if (!ag__shape_size(ndim, shape, &size)) {
        char buf[96];
        ag_graph_fail(g, AG_ERR_SHAPE, "%s: bad shape %s", name, ag_shape_str_n(ndim, shape, buf, sizeof buf));
        return NULL;
    }
    for (int i = 0; i < nsrc; i++)
        if (src[i] && !fresh_here(g, src[i]) && !ag__usable(g, name, i, src[i])) return NULL;
    ag__tensor_impl *n = header_new(g);
    if (!n) return NULL;
    ag_tensor *t = &n->pub;
    t->data = ag__alloc(g, size * sizeof(ag_real));
    if (!t->data) return NULL;
    t->ndim = ndim;
    for (int i = 0; i < AG_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 1;
    t->size = size;
    t->op = op;
    t->nsrc = nsrc;
    for (int i = 0; i < nsrc; i++) {
        t->src[i] = src[i];
        if (src[i] && src[i]->requires_grad && !g->no_grad) t->requires_grad = 1;
    }
    n->graph = g;
    n->epoch = g->epoch;
    if (g->no_grad) { /* off the tape; the op before is done with its scratch */
        n->slot = -1;
        if (g->scratch) ag__arena_reset(g->scratch);
        return t;
    }
    n->slot = g->count;
    if (!tape_push(g, t)) return NULL;
    return t;
}

ag_tensor *ag__view_of(ag_graph *g, ag_real *data, int ndim, const int *shape)
{
    size_t size;
    if (!ag__ok(g, "view_of", 0)) return NULL;
    if (!data || ndim < 0 || ndim > AG_MAX_DIMS || !ag__shape_size(ndim, shape, &size)) {
        ag_graph_fail(g, AG_ERR_ARG, "view_of: %s", data ? "bad shape" : "data is NULL");
        return NULL;
    }
    ag__tensor_impl *n = header_new(g);
    if (!n) return NULL;
    ag_tensor *t = &n->pub;
    t->data = data;
    t->ndim = ndim;
    for (int i = 0; i < AG_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 1;
    t->size = size;
    t->op = AG_OP_LEAF;
    n->graph = g;
    n->epoch = g->epoch;
    n->slot = g->no_grad ? -1 : g->count;
    if (!g->no_grad && !tape_push(g, t)) return NULL;
    return t;
}

ag_real *ag__grad(ag_graph *g, ag_tensor *x)
{
    ag__tensor_impl *n = ag__impl(x);
    if (!x->grad) {
        x->grad = ag__alloc(g, x->size * sizeof(ag_real));
        if (!x->grad) return NULL;
        memset(x->grad, 0, x->size * sizeof(ag_real));
        if (x->op != AG_OP_LEAF) n->own = x->grad;
    } else if (n->unset) { /* reserved by backward's first pass: zero it now */
        memset(x->grad, 0, x->size * sizeof(ag_real));
        n->unset = false;
    }
    return x->grad;
}

/* A fresh buffer holds whatever the arena held: in a checked run it holds
 * NaNs instead, so that a backward that adds into it (+=) where it should
 * store (=) gives NaN, not last step's numbers plus this step's. */
#ifdef AG_CHECKS
#define AG_CHECKS_ON 1
#else
#define AG_CHECKS_ON 0
#endif
static void poison(ag_real *d, size_t n)
{
    for (size_t i = 0; i < n; i++) d[i] = (ag_real)NAN;
}

void ag__graph_poison(ag_graph *g, bool on) { g->poison = on; }
bool ag__graph_poisoned(const ag_graph *g) { return AG_CHECKS_ON || g->poison; }

ag_real *ag__grad_fresh(ag_graph *g, ag_tensor *x, bool *fresh)
{
    ag__tensor_impl *n = ag__impl(x);
    *fresh = x->grad && n->unset;
    if (*fresh) {
        n->unset = false; /* the caller writes every element */
        if (AG_CHECKS_ON || g->poison) poison(x->grad, x->size);
        return x->grad;
    }
    return ag__grad(g, x);
}

int ag__axis(ag_graph *g, const char *op, const ag_tensor *x, int axis)
{
    int a = axis < 0 ? axis + x->ndim : axis;
    if (a < 0 || a >= x->ndim) {
        char buf[96];
        ag_graph_fail(g, AG_ERR_ARG, "%s: axis %d out of range for %s", op, axis, ag_shape_str(x, buf, sizeof buf));
        return -1;
    }
    return a;
}

/* ---- finiteness checks (a debugging aid) --------------------------------- */

/* Which non-finite value x is, for messages. */
static const char *nonfinite_name(ag_real x)
{
    return isnan(x) ? "NaN" : x > 0 ? "Inf" : "-Inf";
}

/* "[2, 3]": the position of flat element i of t. */
static const char *index_str(const ag_tensor *t, size_t i, char *buf, size_t len)
{
    int idx[AG_MAX_DIMS];
    for (int k = t->ndim - 1; k >= 0; k--) {
        size_t d = t->shape[k] > 0 ? (size_t)t->shape[k] : 1;
        idx[k] = (int)(i % d);
        i /= d;
    }
    return ag_shape_str_n(t->ndim, idx, buf, len);
}

/* "[4, 5], [5]": the shapes of t's inputs. */
static const char *inputs_str(const ag_tensor *t, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; k < t->nsrc && at < len; k++) {
        char one[96];
        const char *s = t->src[k] ? ag_shape_str(t->src[k], one, sizeof one) : "NULL";
        int n = snprintf(buf + at, len - at, "%s%s", k ? ", " : "", s);
        if (n < 0) break;
        at += (size_t)n;
    }
    return t->nsrc ? buf : "none";
}

static bool has_inf(const ag_tensor *t)
{
    if (!t || !t->data) return false;
    for (size_t i = 0; i < t->size; i++)
        if (isinf(t->data[i])) return true;
    return false;
}

/* The first element of t->data that t's op should not have made, or
 * t->size.  NaN is never right.  An infinity is passed over when the op got
 * one from an input (it is carried, not made: a -inf mask fill flowing into
 * a max or a log_softmax), when it is a leaf's (user data, e.g. an additive
 * mask), and when it is masked_fill's fill value. */
static size_t first_bad_value(const ag_tensor *t)
{
    int inputs_inf = -1; /* not looked at yet */
    for (size_t i = 0; i < t->size; i++) {
        ag_real x = t->data[i];
        if (isfinite(x)) continue;
        if (isnan(x)) return i;
        if (t->op == AG_OP_LEAF) continue;
        if (t->op == AG_OP_MASKED_FILL && (double)x == ag__impl(t)->farg[0]) continue;
        if (inputs_inf < 0) {
            inputs_inf = 0;
            for (int k = 0; k < t->nsrc; k++)
                if (has_inf(t->src[k])) inputs_inf = 1;
        }
        if (!inputs_inf) return i;
    }
    return t->size;
}

/* The first NaN or +-Inf of x[0..n), or n. */
static size_t first_nonfinite(const ag_real *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return n;
}

/* Parameter input k of node i (a store tensor, not on the tape): its values
 * (grad 0) or its gradient (grad 1) must all be finite. */
static ag_status check_param(ag_graph *g, int i, int k, int grad)
{
    const ag_tensor *t = g->nodes[i], *p = t->src[k];
    const ag_real *v = grad ? p->grad : p->data;
    size_t j = v ? first_nonfinite(v, p->size) : p->size;
    if (j == p->size) return AG_OK;
    char shape[96], at[96];
    return ag_graph_fail(g, AG_ERR_NUMERIC, "check_finite: %sparameter '%s' %s has %s at %s (input %d of node %d, %s)",
                         grad ? "gradient of " : "", p->name, ag_shape_str(p, shape, sizeof shape),
                         nonfinite_name(v[j]), index_str(p, j, at, sizeof at), k, i, ag_op_name(t->op));
}

/* Forward values, oldest node first: each node's parameter inputs, then the
 * node itself. */
static ag_status check_values(ag_graph *g)
{
    for (int i = 0; i < g->count; i++) {
        const ag_tensor *t = g->nodes[i];
        for (int k = 0; k < t->nsrc; k++)
            if (t->src[k] && t->src[k]->is_param && check_param(g, i, k, 0)) return g->status;
        size_t j = first_bad_value(t);
        if (j == t->size) continue;
        char name[80], shape[96], at[96], ins[320];
        if (t->op == AG_OP_LEAF)
            return ag_graph_fail(g, AG_ERR_NUMERIC, "check_finite: leaf%s %s has %s at %s (node %d)",
                                 name_str(t, name, sizeof name), ag_shape_str(t, shape, sizeof shape),
                                 nonfinite_name(t->data[j]), index_str(t, j, at, sizeof at), i);
        return ag_graph_fail(g, AG_ERR_NUMERIC, "check_finite: %s output%s %s has %s at %s (node %d, inputs %s)",
                             ag_op_name(t->op), name_str(t, name, sizeof name), ag_shape_str(t, shape, sizeof shape),
                             nonfinite_name(t->data[j]), index_str(t, j, at, sizeof at), i,
                             inputs_str(t, ins, sizeof ins));
    }
    return AG_OK;
}

/* Gradients, newest node first (the order backward fills them): a node's
 * gradient is complete before its backward adds into its inputs, so the
 * first bad one found was made by the backward of one of its consumers. */
static ag_status check_gradients(ag_graph *g)
{
    for (int i = g->count - 1; i >= 0; i--) {
        const ag_tensor *t = g->nodes[i];
        size_t j = t->grad ? first_nonfinite(t->grad, t->size) : t->size;
        if (j < t->size) {
            char name[80], shape[96], at[96], ins[320];
            if (t->op == AG_OP_LEAF)
                return ag_graph_fail(g, AG_ERR_NUMERIC, "check_finite: gradient of leaf%s %s has %s at %s (node %d)",
                                     name_str(t, name, sizeof name), ag_shape_str(t, shape, sizeof shape),
                                     nonfinite_name(t->grad[j]), index_str(t, j, at, sizeof at), i);
            return ag_graph_fail(g, AG_ERR_NUMERIC,
                                 "check_finite: gradient of %s output%s %s has %s at %s (node %d, inputs %s)",
                                 ag_op_name(t->op), name_str(t, name, sizeof name), ag_shape_str(t, shape, sizeof shape),
                                 nonfinite_name(t->grad[j]), index_str(t, j, at, sizeof at), i,
                                 inputs_str(t, ins, sizeof ins));
        }
        for (int k = 0; k < t->nsrc; k++)
            if (t->src[k] && t->src[k]->is_param && check_param(g, i, k, 1)) return g->status;
    }
    return AG_OK;
}

ag_status ag_graph_check_finite(ag_graph *g)
{
    if (!g) return AG_ERR_ARG;
    if (g->status != AG_OK) return g->status; /* the tape may be half-built */
    if (check_values(g)) return g->status;
    return check_gradients(g);
}

/* AG_CHECK_FINITE set to anything but "" or "0" turns the checks on in
 * ag_backward.  Read at each call, so a test can switch it. */
static bool check_finite_on(void)
{
    const char *v = getenv("AG_CHECK_FINITE");
    return v && v[0] && strcmp(v, "0") != 0;
}

/* ---- backward ------------------------------------------------------------ */

/* Gradient buffers.  A leaf's gradient (a graph input's, a parameter's)
 * accumulates over backward calls, as PyTorch's .grad does.  An
 * intermediate's is backward's working space: each call starts it afresh,
 * so that a second backward, or a second loss on the same tape, adds
 * exactly its own gradient into the leaves.  Its memory (`own`) is kept
 * and reused by the next call of the same step. */

/* In backward call `pass`, give x (an input of a live node) its buffer. */
static bool reserve(ag_graph *g, ag_tensor *x, uint32_t pass)
{
    ag__tensor_impl *n = ag__impl(x);
    if (x->op == AG_OP_LEAF) { /* accumulates: a buffer once, kept */
        if (!x->grad) {
            x->grad = ag__alloc(g, x->size * sizeof(ag_real));
            n->unset = true;
        }
        return x->grad != NULL;
    }
    if (n->pass == pass) return true; /* reserved already in this call */
    if (!n->own && !(n->own = ag__alloc(g, x->size * sizeof(ag_real)))) return false;
    n->pass = pass;
    n->lent = false;
    n->unset = true;
    x->grad = n->own;
    return true;
}

/* src[0] of t is one of its other inputs too (x + x; a residual that is
 * also the dense layer's input): its gradient is then more than dy. */
static bool src0_used_again(const ag_tensor *t)
{
    for (int k = 1; k < t->nsrc; k++)
        if (t->src[k] == t->src[0]) return true;
    return false;
}

/* An op whose gradient passes unchanged to its first input (a reshape; an
 * add or sub of same-shape tensors; the residual of linear_add), or turns
 * into it in place (GELU: dx_i = dy_i s_i), may give that input its own
 * buffer when the input has none yet in this call: the op is then the
 * input's newest live consumer, the input's other consumers come before it
 * on the tape and run their backward after it, when its gradient is
 * complete.  dx = dy with no copy (or dy turned into dx where it lies), and
 * the later consumers add to it.  Only between intermediates of this tape:
 * a leaf's buffer accumulates across calls. */
static void maybe_share(ag_graph *g, ag_tensor *t, uint32_t pass)
{
    ag_tensor *x0 = t->src[0];
    ag__tensor_impl *n0 = x0 ? ag__impl(x0) : NULL;
    const ag_op_desc *op = g->ops[t->op];
    if (!(op->grad_passes_to_src0 || op->grad_in_place) || !x0 || !x0->requires_grad || x0->op == AG_OP_LEAF ||
        n0->graph != g || n0->pass == pass || x0->size != t->size || src0_used_again(t))
        return;
    n0->pass = pass;
    n0->lent = false;
    n0->unset = false; /* its state is t's: t's consumers write it first */
    x0->grad = t->grad;
    ag__impl(t)->lent = true;
}

/* The gradient checker's test of itself: the broken op's backward sees its
 * incoming gradient scaled by the factor. */
static void broken_backward(ag_graph *g, ag_tensor *y)
{
    ag_real f = (ag_real)g->broken_factor;
    for (size_t j = 0; j < y->size; j++) y->grad[j] *= f;
    g->broken_real->backward(g, y);
    for (size_t j = 0; j < y->size; j++) y->grad[j] /= f;
}

void ag__graph_break(ag_graph *g, int op, double factor)
{
    g->ops = ag_op_table;
    if (op <= AG_OP_LEAF || op >= AG_OP_COUNT || !ag_op_table[op]->backward) return;
    memcpy(g->table, ag_op_table, sizeof g->table);
    g->broken_real = ag_op_table[op];
    g->broken = *g->broken_real;
    g->broken.backward = broken_backward;
    g->broken_factor = factor;
    g->table[op] = &g->broken;
    g->ops = g->table;
}

/* ag_retain_grad's tensors: kept += grad, once grad is complete (just
 * before the node's own backward, which is when a shared buffer holds
 * exactly its gradient). */
static bool keep_grad(ag_graph *g, ag_tensor *t)
{
    ag__tensor_impl *n = ag__impl(t);
    if (!n->kept) {
        if (!(n->kept = ag__alloc(g, t->size * sizeof(ag_real)))) return false;
        memset(n->kept, 0, t->size * sizeof(ag_real));
    }
    for (size_t j = 0; j < t->size; j++) n->kept[j] += t->grad[j];
    return true;
}

/* What each node of the tape [0, top] shows as grad after call `pass`:
 * buffers reserved and never written read as zeros; an intermediate that
 * lent its buffer to its input shows NULL (the buffer holds the input's
 * gradient), a retained one its sum over calls. */
static void finish(ag_graph *g, int top, uint32_t pass)
{
    for (int i = 0; i <= top; i++) {
        ag_tensor *t = g->nodes[i];
        ag__tensor_impl *n = ag__impl(t);
        if (n->unset) ag__grad(g, t);
        if (t->op == AG_OP_LEAF || n->pass != pass) continue;
        if (n->retain) t->grad = n->kept;
        else if (n->lent) t->grad = NULL;
    }
}

/* Where y is on g's tape, or -1 (recorded) when it is not. */
static int tape_slot(ag_graph *g, const char *what, ag_tensor *y)
{
    if (!ag__usable(g, what, 0, y)) return -1;
    int i = ag__impl(y)->slot;
    if (ag__impl(y)->graph != g || i < 0 || i >= g->count || g->nodes[i] != y) {
        ag_graph_fail(g, AG_ERR_ARG, "%s: the tensor is not a node of this graph", what);
        return -1;
    }
    return i;
}

/* Reverse-mode autodiff from y with d out / d y = dy (NULL: ones).  Pass
 * 1 marks, newest first, the nodes y depends on (y, and every input of a
 * live node) that require grad, and gives each input a buffer.  Pass 2,
 * newest first again, calls each live node's backward.  Both are plain
 * loops over the tape. */
static ag_status backward(ag_graph *g, const char *what, ag_tensor *y, const ag_real *dy)
{
    int top = tape_slot(g, what, y);
    if (top < 0) return g->status;
    if (!y->requires_grad) return AG_OK; /* nothing to differentiate */
    uint32_t pass = ++g->passes;
    unsigned char *live = ag__alloc(g, (size_t)g->count);
    if (!live) return g->status;
    memset(live, 0, (size_t)g->count);

    /* the seed: y's buffer holds dy */
    if (!reserve(g, y, pass) || !ag__grad(g, y)) return g->status;
    for (size_t j = 0; j < y->size; j++) y->grad[j] += dy ? dy[j] : 1;
    live[top] = 1;

    for (int i = top; i >= 0; i--) { /* pass 1 */
        ag_tensor *t = g->nodes[i];
        if (!live[i] || t->op == AG_OP_LEAF || !t->requires_grad) continue;
        maybe_share(g, t, pass);
        for (int k = 0; k < t->nsrc; k++) {
            ag_tensor *x = t->src[k];
            if (!x || !x->requires_grad) continue;
            if (!reserve(g, x, pass)) return g->status;
            if (ag__impl(x)->graph == g) live[ag__impl(x)->slot] = 1;
        }
    }
    for (int i = top; i >= 0; i--) { /* pass 2 */
        ag_tensor *t = g->nodes[i];
        if (!live[i] || t->op == AG_OP_LEAF || !t->requires_grad) continue;
        if (ag__impl(t)->unset) ag__grad(g, t); /* no consumer contributed: zeros */
        if (ag__impl(t)->retain && !keep_grad(g, t)) return g->status;
        g->ops[t->op]->backward(g, t);
        if (g->status != AG_OK) return g->status;
    }
    finish(g, top, pass);
    return AG_OK;
}

/* AG_CHECK_FINITE's checks of the forward values and of the seed. */
static ag_status check_before(ag_graph *g, ag_tensor *y, const ag_real *dy)
{
    if (check_values(g)) return g->status;
    for (size_t j = 0; j < y->size; j++) {
        ag_real v = dy ? dy[j] : y->data[j];
        if (isfinite(v)) continue;
        char ins[320];
        if (dy) return ag_graph_fail(g, AG_ERR_NUMERIC, "check_finite: dy has %s at flat index %zu", nonfinite_name(v), j);
        return ag_graph_fail(g, AG_ERR_NUMERIC, "check_finite: the loss (%s output) is %s (inputs %s)",
                             ag_op_name(y->op), nonfinite_name(v), inputs_str(y, ins, sizeof ins));
    }
    return AG_OK;
}

static ag_status backward_checked(ag_graph *g, const char *what, ag_tensor *y, const ag_real *dy)
{
    if (g->no_grad)
        return ag_graph_fail(g, AG_ERR_STATE, "%s: the graph is in no-grad mode (ag_graph_set_grad(g, 0)): "
                             "its ops recorded nothing to differentiate", what);
    bool check = check_finite_on();
    if (check && check_before(g, y, dy)) return g->status;
    if (backward(g, what, y, dy)) return g->status;
    return check ? check_gradients(g) : AG_OK;
}

ag_status ag_backward(ag_graph *g, ag_tensor *loss)
{
    if (!g) return AG_ERR_ARG;
    if (g->status != AG_OK) return g->status;
    if (!loss) return ag_graph_fail(g, AG_ERR_ARG, "backward: loss is NULL");
    if (!ag__usable(g, "backward", 0, loss)) return g->status;
    if (loss->size != 1) {
        char buf[96];
        return ag_graph_fail(g, AG_ERR_SHAPE, "backward: loss must be a scalar, got %s",
                             ag_shape_str(loss, buf, sizeof buf));
    }
    return backward_checked(g, "backward", loss, NULL);
}

ag_status ag_backward_from(ag_graph *g, ag_tensor *y, const ag_real *dy)
{
    if (!g) return AG_ERR_ARG;
    if (g->status != AG_OK) return g->status;
    if (!y) return ag_graph_fail(g, AG_ERR_ARG, "backward_from: y is NULL");
    if (!dy) return ag_graph_fail(g, AG_ERR_ARG, "backward_from: dy is NULL");
    return backward_checked(g, "backward_from", y, dy);
}

void ag_retain_grad(ag_tensor *t)
{
    if (t && t->op != AG_OP_LEAF) ag__impl(t)->retain = true;
}
