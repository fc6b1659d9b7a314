/* graph.c: the tape of one step, its sticky error, and reverse-mode autodiff.
 *
 * Invariants: the tape lists nodes in creation order.  An op can only use
 * tensors that exist already, so creation order is a topological order and
 * backward is one loop from the newest node to the oldest: no recursion, no
 * sort, any depth.  Every tensor made on a graph carries the graph and its
 * epoch (resets so far), and an op takes only tensors of its own graph and
 * epoch, or store-owned ones: a tensor that outlived its step is refused by
 * name, never read as whatever took its place. */
#include "core/graph.h"

#include <math.h>
#include <stdio.h>

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
    g->drop_grads = 1; /* as PyTorch: intermediates' gradients kept only when asked */
    g->precision = -1;
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
    ag__free(g->temp);
    ag__free(g->copies);
    ag__free(g->nodes);
    ag__free(g->spare);
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
    g->nspare = 0;
    g->causal = NULL;
    g->status = AG_OK;
    g->err[0] = '\0';
}

ag_tensor **ag__graph_causal(ag_graph *g) { return &g->causal; }

/* Kept across calls and resets, and grown only: a new buffer each call
 * would map fresh pages and fault each of them in, every step.  Handed out
 * at a cache line's start, as the arena's blocks are (malloc's 16 bytes
 * would split the vectors of a kernel that reads it across two lines). */
enum { LINE = 64 };
static void *grown(ag_graph *g, void **buf, size_t *cap, size_t bytes)
{
    if (bytes > *cap) {
        ag__free(*buf);
        *cap = 0;
        if (bytes > SIZE_MAX - LINE || !(*buf = ag__malloc(bytes + LINE))) {
            *buf = NULL;
            ag_graph_fail(g, AG_ERR_NOMEM, "no memory for a scratch buffer of %zu bytes", bytes);
            return NULL;
        }
        *cap = bytes;
    }
    return (void *)(((uintptr_t)*buf + LINE - 1) / LINE * LINE);
}

void *ag__temp(ag_graph *g, size_t bytes) { return grown(g, &g->temp, &g->temp_cap, bytes); }
void *ag__temp_copies(ag_graph *g, size_t bytes) { return grown(g, &g->copies, &g->copies_cap, bytes); }

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
void ag_graph_set_keep_grads(ag_graph *g, int keep) { if (g) g->drop_grads = keep == 0; }
int ag_graph_keep_grads(const ag_graph *g) { return g ? !g->drop_grads : 0; }
void ag_graph_set_precision(ag_graph *g, ag_precision p)
{
    if (g) g->precision = p == AG_PRECISION_BF16 ? AG_PRECISION_BF16 : AG_PRECISION_FP32;
}
ag_precision ag_graph_precision(const ag_graph *g)
{
    return g && g->precision >= 0 ? (ag_precision)g->precision : ag_get_precision();
}
bool ag__bf16(const ag_graph *g) { return ag_graph_precision(g) == AG_PRECISION_BF16; }
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

const char *ag__name_str(const ag_tensor *t, char *buf, size_t len)
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
    ag_graph_fail(g, AG_ERR_ARG, "%s: input %d%s %s %s", op, k, ag__name_str(t, name, sizeof name),
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
    if (g->replay) ag__replay_node(g, t);
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
