/* backward.c: reverse-mode autodiff over the tape (src/core/graph.c).
 *
 * The tape lists nodes in creation order, which is a topological order:
 * backward is one loop from the newest node to the oldest, no recursion,
 * no sort, any depth. */
#include "core/graph.h"

#include <stdlib.h>

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

/* ---- recycled buffers (ag_graph_set_keep_grads(g, 0)) ------------------ */

/* A buffer of `bytes` from the spans given back, the smallest that holds
 * it (its rest given back again), or from the arena when none does. */
static ag_real *spare_take(ag_graph *g, size_t bytes)
{
    bytes = (bytes + 63) & ~(size_t)63; /* the arena's alignment, kept */
    int best = -1;
    for (int i = 0; i < g->nspare; i++)
        if (g->spare[i].bytes >= bytes && (best < 0 || g->spare[i].bytes < g->spare[best].bytes)) best = i;
    if (best < 0) return ag__alloc(g, bytes);
    ag__span *s = &g->spare[best];
    ag_real *p = (ag_real *)(void *)s->p;
    s->p += bytes, s->bytes -= bytes;
    if (s->bytes == 0) *s = g->spare[--g->nspare];
    return p;
}

/* Room in the list of spans given back for `nodes` more: each live node
 * gives back at most one span in a call (spare_take never adds one), so
 * this, at a call's start, is the list's only allocation. */
static bool spare_room(ag_graph *g, int nodes)
{
    if (g->nspare + nodes <= g->spare_cap) return true;
    int cap = g->nspare + nodes > 64 ? g->nspare + nodes : 64;
    ag__span *m = ag__malloc((size_t)cap * sizeof *m);
    if (!m) {
        ag_graph_fail(g, AG_ERR_NOMEM, "backward: out of memory for a list of %d gradient buffers", cap);
        return false;
    }
    if (g->nspare) memcpy(m, g->spare, (size_t)g->nspare * sizeof *m);
    ag__free(g->spare);
    g->spare = m, g->spare_cap = cap;
    return true;
}

/* Give t's gradient buffer back: its node's backward has run, and every
 * consumer of t ran before it, so nothing reads or writes it again in this
 * call.  The list has room (spare_room). */
static void spare_give(ag_graph *g, ag_tensor *t)
{
    ag__tensor_impl *n = ag__impl(t);
    if (!n->own) return;
    g->spare[g->nspare++] = (ag__span){(unsigned char *)n->own, (t->size * sizeof(ag_real) + 63) & ~(size_t)63};
    n->own = NULL;
    t->grad = NULL;
}

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
    if (!n->own && !(n->own = g->drop_grads ? spare_take(g, x->size * sizeof(ag_real))
                                              : ag__alloc(g, x->size * sizeof(ag_real))))
        return false;
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
    if (g->drop_grads) /* the buffer is x0's now: x0 gives it back */
        n0->own = ag__impl(t)->own, ag__impl(t)->own = NULL;
}

/* The gradient checker's test of itself: the broken op's backward gives its
 * inputs their gradients times the factor.  A backward is linear in dy, so
 * it runs on dy times the factor; dy is put back afterwards, unless y lent
 * its buffer to src[0] (maybe_share): the buffer is then src[0]'s gradient,
 * which must keep the factor. */
static void broken_backward(ag_graph *g, ag_tensor *y)
{
    ag_real f = (ag_real)g->broken_factor;
    for (size_t j = 0; j < y->size; j++) y->grad[j] *= f;
    g->broken_real->backward(g, y);
    if (ag__impl(y)->lent) return;
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
 * live node) that require grad.  Pass 2, newest first again, gives each
 * live node's inputs their buffers and calls its backward; with
 * intermediates' gradients dropped (ag_graph_set_keep_grads), the node's
 * own buffer is then given back for the nodes after it.  Both are plain
 * loops over the tape. */
static ag_status backward(ag_graph *g, const char *what, ag_tensor *y, const ag_real *dy)
{
    int top = tape_slot(g, what, y);
    if (top < 0) return g->status;
    if (!y->requires_grad) return AG_OK; /* nothing to differentiate */
    uint32_t pass = ++g->passes;
    unsigned char *live = ag__alloc(g, (size_t)g->count);
    if (!live || (g->drop_grads && !spare_room(g, top + 1))) return g->status;
    memset(live, 0, (size_t)g->count);

    /* the seed: y's buffer holds dy */
    if (!reserve(g, y, pass) || !ag__grad(g, y)) return g->status;
    for (size_t j = 0; j < y->size; j++) y->grad[j] += dy ? dy[j] : 1;
    live[top] = 1;

    for (int i = top; i >= 0; i--) { /* pass 1 */
        ag_tensor *t = g->nodes[i];
        if (!live[i] || t->op == AG_OP_LEAF || !t->requires_grad) continue;
        for (int k = 0; k < t->nsrc; k++) {
            ag_tensor *x = t->src[k];
            if (x && x->requires_grad && ag__impl(x)->graph == g) live[ag__impl(x)->slot] = 1;
        }
    }
    for (int i = top; i >= 0; i--) { /* pass 2 */
        ag_tensor *t = g->nodes[i];
        if (!live[i] || t->op == AG_OP_LEAF || !t->requires_grad) continue;
        maybe_share(g, t, pass);
        for (int k = 0; k < t->nsrc; k++)
            if (t->src[k] && t->src[k]->requires_grad && !reserve(g, t->src[k], pass)) return g->status;
        if (ag__impl(t)->unset) ag__grad(g, t); /* no consumer contributed: zeros */
        if (ag__impl(t)->retain && !keep_grad(g, t)) return g->status;
        g->ops[t->op]->backward(g, t);
        if (g->status != AG_OK) return g->status;
        if (g->drop_grads && !ag__impl(t)->lent) spare_give(g, t);
    }
    finish(g, top, pass);
    return AG_OK;
}

static ag_status backward_checked(ag_graph *g, const char *what, ag_tensor *y, const ag_real *dy)
{
    if (g->no_grad)
        return ag_graph_fail(g, AG_ERR_STATE, "%s: the graph is in no-grad mode (ag_graph_set_grad(g, 0)): "
                             "its ops recorded nothing to differentiate", what);
    bool check = check_finite_on();
    if (check && ag__check_before(g, y, dy)) return g->status;
    int drop = g->drop_grads;
    g->drop_grads = drop && !check; /* the check reads every intermediate's gradient */
    ag_status st = backward(g, what, y, dy);
    g->drop_grads = drop;
    if (st) return g->status;
    return check ? ag__check_gradients(g) : AG_OK;
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
