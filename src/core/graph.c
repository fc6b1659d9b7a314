/* graph.c: the tape of one step, its sticky error, and reverse-mode autodiff.
 *
 * Invariant: the tape lists nodes in creation order.  An op can only use
 * tensors that exist already, so creation order is a topological order and
 * backward is one loop from the newest node to the oldest: no recursion, no
 * sort, any depth. */
#include "core/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define ERR_LEN 512

struct ag_graph {
    ag_arena *arena;
    ag_tensor **nodes; /* the tape; capacity kept across resets */
    int count, cap;
    ag_status status;
    char err[ERR_LEN];
    int training;
    ag_rng rng;
};

int ag__broken_op = -1;
double ag__broken_factor = 1.0;

void ag_debug_break_backward(int op, double factor)
{
    ag__broken_op = op;
    ag__broken_factor = factor;
}

ag_graph *ag_graph_new(void)
{
    ag_graph *g = ag__calloc(1, sizeof *g);
    if (!g) return NULL;
    g->arena = ag__arena_new();
    if (!g->arena) {
        ag__free(g);
        return NULL;
    }
    g->training = 1;
    ag_rng_seed(&g->rng, 0);
    return g;
}

void ag_graph_free(ag_graph *g)
{
    if (!g) return;
    ag__arena_free(g->arena);
    ag__free(g->nodes);
    ag__free(g);
}

void ag_graph_reset(ag_graph *g)
{
    if (!g) return;
    ag__arena_reset(g->arena);
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
void ag_graph_seed(ag_graph *g, uint64_t seed) { if (g) ag_rng_seed(&g->rng, seed); }
uint64_t *ag_graph_rng(ag_graph *g) { return g ? g->rng.s : NULL; }
ag_rng *ag__graph_rng(ag_graph *g) { return &g->rng; }

int ag_graph_node_count(const ag_graph *g) { return g ? g->count : 0; }
ag_tensor *ag_graph_node(const ag_graph *g, int i)
{
    return (g && i >= 0 && i < g->count) ? g->nodes[i] : NULL;
}
size_t ag_graph_arena_bytes(const ag_graph *g) { return g ? ag__arena_reserved(g->arena) : 0; }
size_t ag_graph_arena_used(const ag_graph *g) { return g ? ag__arena_used(g->arena) : 0; }

void *ag__alloc(ag_graph *g, size_t bytes)
{
    void *p = ag__arena_alloc(g->arena, bytes);
    if (!p) ag_graph_fail(g, AG_ERR_NOMEM, "out of memory: arena could not grow by %zu bytes", bytes);
    return p;
}

bool ag__ok(ag_graph *g, const char *op, int n, ...)
{
    if (!g || g->status != AG_OK) return false;
    va_list ap;
    va_start(ap, n);
    bool ok = true;
    for (int i = 0; i < n; i++) {
        if (!va_arg(ap, const ag_tensor *)) {
            ag_graph_fail(g, AG_ERR_ARG, "%s: input %d is NULL", op, i);
            ok = false;
            break;
        }
    }
    va_end(ap);
    return ok;
}

size_t ag__numel(int ndim, const int *shape)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    return n;
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

ag_tensor *ag__node(ag_graph *g, int op, int ndim, const int *shape, int nsrc,
                    ag_tensor *const *src)
{
    const char *name = ag_op_name(op);
    if (ndim < 0 || ndim > AG_MAX_DIMS) {
        ag_graph_fail(g, AG_ERR_SHAPE, "%s: %d axes, at most %d are supported", name, ndim, AG_MAX_DIMS);
        return NULL;
    }
    size_t size = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] > 0 && size > SIZE_MAX / sizeof(ag_real) / (size_t)shape[i])) {
            char buf[96];
            ag_graph_fail(g, AG_ERR_SHAPE, "%s: bad shape %s", name, ag_shape_str_n(ndim, shape, buf, sizeof buf));
            return NULL;
        }
        size *= (size_t)shape[i];
    }
    ag_tensor *t = ag__alloc(g, sizeof *t);
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    t->data = ag__alloc(g, size * sizeof(ag_real));
    if (!t->data) return NULL;
    t->ndim = ndim;
    for (int i = 0; i < AG_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 1;
    t->size = size;
    t->op = op;
    t->nsrc = nsrc;
    for (int i = 0; i < nsrc; i++) {
        t->src[i] = src[i];
        if (src[i] && src[i]->requires_grad) t->requires_grad = 1;
    }
    if (!tape_push(g, t)) return NULL;
    return t;
}

ag_real *ag__grad(ag_graph *g, ag_tensor *x)
{
    if (!x->grad) {
        x->grad = ag__alloc(g, x->size * sizeof(ag_real));
        if (x->grad) memset(x->grad, 0, x->size * sizeof(ag_real));
    } else if (x->grad_unset) { /* reserved by backward's first pass: zero it now */
        memset(x->grad, 0, x->size * sizeof(ag_real));
        x->grad_unset = 0;
    }
    return x->grad;
}

ag_real *ag__grad_fresh(ag_graph *g, ag_tensor *x, bool *fresh)
{
    *fresh = x->grad && x->grad_unset;
    if (*fresh) {
        x->grad_unset = 0; /* the caller writes every element */
        return x->grad;
    }
    return ag__grad(g, x);
}

/* Backward's first pass: x's gradient buffer, left unwritten until its
 * first contribution (ag__grad zero-fills it then; ag__grad_fresh lets the
 * op store into it instead). */
static ag_real *grad_reserve(ag_graph *g, ag_tensor *x)
{
    if (!x->grad) {
        x->grad = ag__alloc(g, x->size * sizeof(ag_real));
        x->grad_unset = x->grad != NULL;
    }
    return x->grad;
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

/* " 'name'" when t has a name, else "". */
static const char *name_str(const ag_tensor *t, char *buf, size_t len)
{
    if (!t->name[0]) return "";
    snprintf(buf, len, " '%s'", t->name);
    return buf;
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
        if (t->op == AG_OP_MASKED_FILL && (double)x == t->farg[0]) continue;
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

/* Reverse-mode autodiff.  Pass 1 marks, newest first, the nodes the loss
 * depends on (a node is live if it is the loss or an input of a live node)
 * that also require grad.  Pass 2, newest first again, calls each live
 * node's backward.  Both passes are plain loops over the tape. */
ag_status ag_backward(ag_graph *g, ag_tensor *loss)
{
    if (!g) return AG_ERR_ARG;
    if (g->status != AG_OK) return g->status;
    if (!loss) return ag_graph_fail(g, AG_ERR_ARG, "backward: loss is NULL");
    if (loss->size != 1) {
        char buf[96];
        return ag_graph_fail(g, AG_ERR_SHAPE, "backward: loss must be a scalar, got %s",
                             ag_shape_str(loss, buf, sizeof buf));
    }
    bool check = check_finite_on();
    if (check) {
        if (check_values(g)) return g->status;
        if (!isfinite(loss->data[0])) {
            char ins[320];
            return ag_graph_fail(g, AG_ERR_NUMERIC, "check_finite: the loss (%s output) is %s (inputs %s)",
                                 ag_op_name(loss->op), nonfinite_name(loss->data[0]), inputs_str(loss, ins, sizeof ins));
        }
    }
    if (!loss->requires_grad) return AG_OK; /* nothing to differentiate */

    /* the loss must be on this tape: find it (usually the newest node) */
    int top = g->count - 1;
    while (top >= 0 && g->nodes[top] != loss) top--;
    if (top < 0) return ag_graph_fail(g, AG_ERR_ARG, "backward: loss is not a node of this graph");

    /* pass 1: liveness, using aux-free scratch: a byte per node */
    unsigned char *live = ag__alloc(g, (size_t)g->count);
    if (!live) return g->status;
    memset(live, 0, (size_t)g->count);
    /* nodes find their inputs by pointer; map tensors to tape slots through a
     * temporary index stored in the tensor: we use the grad pointer being
     * NULL/non-NULL instead, allocating gradients lazily for live nodes. */
    ag_real *dl = ag__grad(g, loss);
    if (!dl) return g->status;
    dl[0] += 1;
    live[top] = 1;
    for (int i = top; i >= 0; i--) {
        ag_tensor *t = g->nodes[i];
        if (!live[i]) {
            /* a node is live when one of its consumers gave it a gradient
             * buffer during this sweep: consumers come later on the tape */
            if (!t->grad) continue;
            live[i] = 1;
        }
        if (t->op == AG_OP_LEAF || !t->requires_grad) continue;
        /* An op whose gradient passes unchanged to its first input (a
         * reshape; an add or sub of same-shape tensors) may share its
         * buffer with that input when the input has none yet: the op is
         * then the input's newest live consumer, the input's other
         * consumers come before it on the tape and run their backward
         * after it, when its gradient is complete.  dx = dy with no copy,
         * and later consumers add to it. */
        const ag_op_desc *vd = ag_op_table[t->op];
        ag_tensor *x0 = t->src[0];
        if (vd && vd->grad_passes_to_src0 && x0 && x0->requires_grad && !x0->grad && x0->size == t->size &&
            (t->nsrc < 2 || t->src[1] != x0)) {
            x0->grad = t->grad;
            x0->grad_unset = 0; /* its state is t's: t's consumers write it first */
        }
        /* make sure every input that needs a gradient has a buffer, so that
         * it is recognised as live when the sweep reaches it */
        for (int k = 0; k < t->nsrc; k++)
            if (t->src[k] && t->src[k]->requires_grad && !grad_reserve(g, t->src[k])) return g->status;
    }

    /* pass 2: newest first, each live op adds into its inputs' gradients */
    for (int i = top; i >= 0; i--) {
        ag_tensor *t = g->nodes[i];
        if (!live[i] || t->op == AG_OP_LEAF || !t->requires_grad) continue;
        const ag_op_desc *d = ag_op_table[t->op];
        if (!d || !d->backward) continue;
        if (t->grad_unset) ag__grad(g, t); /* no consumer contributed: zeros */
        if (t->op == ag__broken_op) {
            for (size_t j = 0; j < t->size; j++) t->grad[j] *= (ag_real)ag__broken_factor;
            d->backward(g, t);
            for (size_t j = 0; j < t->size; j++) t->grad[j] /= (ag_real)ag__broken_factor;
        } else {
            d->backward(g, t);
        }
        if (g->status != AG_OK) return g->status;
    }
    /* a reserved buffer nothing wrote into (a leaf's, say) reads as zeros */
    for (int i = 0; i <= top; i++) {
        ag_tensor *t = g->nodes[i];
        if (t->grad_unset) ag__grad(g, t);
        for (int k = 0; k < t->nsrc; k++)
            if (t->src[k] && t->src[k]->grad_unset) ag__grad(g, t->src[k]);
    }
    return check ? check_gradients(g) : AG_OK;
}
