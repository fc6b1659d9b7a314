/* dot.c: the graph as a picture, in Graphviz's DOT language.
 *
 * One DOT node per tensor, one edge per (input, op) use, drawn top to
 * bottom in tape order.  The tape already is a topological order (an op can
 * only use tensors that exist), so everything here is plain loops:
 *   1. map every tape tensor to its slot (a pointer hash, no recursion);
 *   2. with a root, sweep the tape from the root down to slot 0, marking the
 *      inputs of every marked node: the root's ancestors, as in backward;
 *   3. emit the marked nodes in tape order, each input first met off the
 *      tape (a parameter, or a tensor of another graph) as a node of its own.
 * Tensor ids in the file: "n<slot>" on the tape, "p<k>" off it, numbered in
 * the order they are met, so the same graph always gives the same file. */
#include "viz/viz.h"

#include <math.h>
#include <stdio.h>

/* ---- a pointer -> id map: open addressing, linear probing -------------- */

typedef struct ptrmap {
    const ag_tensor **key;
    int *val;
    size_t mask; /* capacity - 1, capacity a power of two */
} ptrmap;

static int map_init(ptrmap *m, size_t entries)
{
    size_t cap = 64;
    while (cap < 2 * entries) cap *= 2;
    m->key = ag__calloc(cap, sizeof *m->key);
    m->val = ag__calloc(cap, sizeof *m->val);
    m->mask = cap - 1;
    return m->key && m->val;
}

static void map_free(ptrmap *m)
{
    ag__free(m->key);
    ag__free(m->val);
}

static size_t slot_of(const ptrmap *m, const ag_tensor *t)
{
    uint64_t h = (uint64_t)(uintptr_t)t; /* splitmix64's finaliser spreads the bits */
    h ^= h >> 30, h *= 0xbf58476d1ce4e5b9ull, h ^= h >> 27, h *= 0x94d049bb133111ebull, h ^= h >> 31;
    size_t i = (size_t)h & m->mask;
    while (m->key[i] && m->key[i] != t) i = (i + 1) & m->mask;
    return i;
}

/* id of t, or -1 when absent */
static int map_get(const ptrmap *m, const ag_tensor *t)
{
    size_t i = slot_of(m, t);
    return m->key[i] ? m->val[i] : -1;
}

static void map_put(ptrmap *m, const ag_tensor *t, int id)
{
    size_t i = slot_of(m, t);
    m->key[i] = t;
    m->val[i] = id;
}

/* ---- labels ---------------------------------------------------------------- */

/* The op and its arguments, as they read in model code: "scale x0.125",
 * "sum axis=1", "permute (0, 2, 1, 3)", "masked_softmax x0.125 fill -inf". */
static void op_text(ag__text *o, const ag_tensor *t)
{
    const char *name = ag_op_name(t->op);
    switch (t->op) {
    case AG_OP_SCALE: ag__text_printf(o, "%s \xc3\x97%.4g", name, ag_tensor_farg(t, 0)); break; /* U+00D7 */
    case AG_OP_SHIFT: ag__text_printf(o, "%s %+.4g", name, ag_tensor_farg(t, 0)); break;
    case AG_OP_MASKED_FILL: ag__text_printf(o, "%s %.4g", name, ag_tensor_farg(t, 0)); break;
    case AG_OP_MASKED_SOFTMAX: /* src = {x, mask}: the scale, and the fill when masked */
        ag__text_printf(o, "%s \xc3\x97%.4g", name, ag_tensor_farg(t, 0));
        if (t->nsrc > 1 && t->src[1]) ag__text_printf(o, " fill %.4g", ag_tensor_farg(t, 1));
        break;
    case AG_OP_ATTENTION: /* every head in one node: the scale, and the fill when masked */
        ag__text_printf(o, "%s \xc3\x97%.4g per head", name, ag_tensor_farg(t, 0));
        if (ag_tensor_iarg(t, 0)) ag__text_printf(o, " fill %.4g", ag_tensor_farg(t, 1));
        break;
    case AG_OP_DROPOUT: ag__text_printf(o, "%s p=%.3g", name, ag_tensor_farg(t, 0)); break;
    case AG_OP_MATMUL: /* b transposed; operands read (written) in place per head */
        ag__text_printf(o, "%s%s%s", name, ag_tensor_iarg(t, 0) ? " (a b^T)" : "", ag_tensor_iarg(t, 1) ? " per head" : "");
        break;
    case AG_OP_SUM:
    case AG_OP_MEAN:
        if (ag_tensor_iarg(t, 0) < 0) ag__text_printf(o, "%s (all)", name);
        else ag__text_printf(o, "%s axis=%d%s", name, ag_tensor_iarg(t, 0), ag_tensor_iarg(t, 1) ? " keepdim" : "");
        break;
    case AG_OP_MAX: ag__text_printf(o, "%s axis=%d%s", name, ag_tensor_iarg(t, 0), ag_tensor_iarg(t, 1) ? " keepdim" : ""); break;
    case AG_OP_CONCAT: ag__text_printf(o, "%s axis=%d", name, ag_tensor_iarg(t, 0)); break;
    case AG_OP_SLICE:
        ag__text_printf(o, "%s axis=%d [%d:%d]", name, ag_tensor_iarg(t, 0), ag_tensor_iarg(t, 1), ag_tensor_iarg(t, 1) + ag_tensor_iarg(t, 2));
        break;
    case AG_OP_PERMUTE:
        ag__text_printf(o, "%s (", name);
        for (int i = 0; i < t->ndim; i++) ag__text_printf(o, "%s%d", i ? ", " : "", ag_tensor_iarg(t, i));
        ag__text_puts(o, ")");
        break;
    case AG_OP_CROSS_ENTROPY:
        if (ag_tensor_farg(t, 0) > 0) ag__text_printf(o, "%s ls=%.3g", name, ag_tensor_farg(t, 0));
        else ag__text_puts(o, name);
        break;
    default: ag__text_puts(o, name);
    }
}

/* "min -1.2  max 3.4  norm 5.6" of n values (NaN and inf counted apart);
 * "value 0.94" of a single one. */
static void stats_text(ag__text *o, const char *what, const ag_real *x, size_t n)
{
    double mn = INFINITY, mx = -INFINITY, ss = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double v = (double)x[i];
        if (!isfinite(v)) {
            bad++;
            continue;
        }
        if (v < mn) mn = v;
        if (v > mx) mx = v;
        ss += v * v;
    }
    ag__text_printf(o, "\\n%s", what);
    if (n == 1 && !bad) ag__text_printf(o, "%s%.4g", *what ? "" : "value ", mn);
    else if (bad < n) ag__text_printf(o, "min %.3g  max %.3g  norm %.3g", mn, mx, sqrt(ss));
    if (bad) ag__text_printf(o, "%s%zu NaN/inf", bad < n ? "  " : "", bad);
}

enum { KIND_OP, KIND_NAMED, KIND_INPUT, KIND_PARAM, KIND_OTHER };

static void emit_node(ag__text *o, const ag_tensor *t, int id, int ntape, int kind, int is_root, int flags)
{
    static const char *const style[] = {
        [KIND_OP] = "shape=box, style=\"rounded,filled\", fillcolor=\"#dce9f7\", color=\"#4a78a8\"",
        [KIND_NAMED] = "shape=box, style=\"rounded,filled\", fillcolor=\"#b3d0f0\", color=\"#2b5f94\"",
        [KIND_INPUT] = "shape=ellipse, style=filled, fillcolor=\"#d6f0d6\", color=\"#3c8d3c\"",
        [KIND_PARAM] = "shape=cylinder, style=filled, fillcolor=\"#fde0c0\", color=\"#c07020\"",
        [KIND_OTHER] = "shape=ellipse, style=\"dashed,filled\", fillcolor=\"#eeeeee\", color=\"#888888\"",
    };
    char shape[96];
    ag_shape_str(t, shape, sizeof shape);
    ag__text_printf(o, "  %c%d [%s", id < ntape ? 'n' : 'p', id < ntape ? id : id - ntape,
                    style[kind == KIND_OP && t->name[0] ? KIND_NAMED : kind]);
    /* a tensor the model named (q, k, scores, attn) stands out */
    if (kind == KIND_OP && t->name[0]) ag__text_puts(o, ", penwidth=2");
    if (is_root) ag__text_puts(o, ", peripheries=2");

    /* label: first line the name (and op), then the shape, then statistics */
    ag__text_puts(o, ", label=\"");
    if (kind == KIND_OP) {
        if (t->name[0]) ag__text_dot(o, t->name, 40), ag__text_puts(o, " = ");
        op_text(o, t);
    } else if (t->name[0])
        ag__text_dot(o, t->name, 48);
    else
        ag__text_puts(o, kind == KIND_PARAM ? "parameter" : kind == KIND_INPUT ? "input" : "other graph");
    ag__text_printf(o, "\\n%s", shape);
    if ((flags & AG_DOT_VALUES) && t->data) stats_text(o, "", t->data, t->size);
    if ((flags & AG_DOT_GRADS) && t->grad) stats_text(o, "grad ", t->grad, t->size);

    /* tooltip (shown on hover in a browser): the whole story in one line */
    ag__text_puts(o, "\", tooltip=\"");
    ag__text_dot(o, t->name[0] ? t->name : "(unnamed)", 0);
    ag__text_printf(o, ": %s %s%s%s", kind == KIND_PARAM ? "parameter" : kind == KIND_OP ? ag_op_name(t->op) : "leaf",
                    shape, t->requires_grad ? ", requires grad" : "", is_root ? ", root" : "");
    ag__text_puts(o, "\"];\n");
}

/* Mark in live the nodes to draw: all of them, or root (node top) and the
 * nodes it was computed from (a walk down the tape, which is in
 * topological order, so one pass finds them all). */
static void mark_live(const ag_graph *g, const ptrmap *map, int top, int all, unsigned char *live)
{
    if (all) {
        memset(live, 1, (size_t)top + 1);
        return;
    }
    live[top] = 1;
    for (int i = top; i >= 0; i--) {
        if (!live[i]) continue;
        const ag_tensor *t = ag_graph_node(g, i);
        for (int k = 0; k < t->nsrc; k++) {
            int j = t->src[k] ? map_get(map, t->src[k]) : -1;
            if (j >= 0) live[j] = 1;
        }
    }
}

/* What the caption counts. */
typedef struct tally {
    int ops, inputs, params;
} tally;

/* The live nodes up to top, each with its inputs that are not on the tape
 * (parameters and strangers, numbered n, n + 1, ... in map) and its edges. */
static tally draw_nodes(ag__text *o, const ag_graph *g, ptrmap *map, const unsigned char *live, int top,
                        int is_root_top, int flags)
{
    int n = ag_graph_node_count(g), next_off = n;
    tally c = {0, 0, 0};
    for (int i = 0; i <= top; i++) {
        if (!live[i]) continue;
        const ag_tensor *t = ag_graph_node(g, i);
        for (int k = 0; k < t->nsrc; k++) {
            const ag_tensor *s = t->src[k];
            if (!s || map_get(map, s) >= 0) continue;
            map_put(map, s, next_off);
            emit_node(o, s, next_off++, n, s->is_param ? KIND_PARAM : KIND_OTHER, 0, flags);
            c.params += s->is_param != 0;
        }
        int kind = t->op != AG_OP_LEAF ? KIND_OP : t->is_param ? KIND_PARAM : KIND_INPUT;
        emit_node(o, t, i, n, kind, is_root_top && i == top, flags);
        c.ops += kind == KIND_OP;
        c.inputs += kind == KIND_INPUT;
        for (int k = 0; k < t->nsrc; k++) {
            if (!t->src[k]) continue;
            int j = map_get(map, t->src[k]);
            ag__text_printf(o, "  %c%d -> n%d;\n", j < n ? 'n' : 'p', j < n ? j : j - n, i);
        }
    }
    return c;
}

/* The caption: what is drawn, and the graph's error if it has one. */
static void draw_caption(ag__text *o, const ag_graph *g, tally c)
{
    ag__text_printf(o, "  labelloc=b;\n  fontname=\"Helvetica\";\n  fontsize=12;\n"
                       "  label=\"%d op%s, %d input%s (green), %d parameter%s (orange)",
                    c.ops, c.ops == 1 ? "" : "s", c.inputs, c.inputs == 1 ? "" : "s", c.params,
                    c.params == 1 ? "" : "s");
    if (ag_graph_status(g) != AG_OK) {
        ag__text_puts(o, "\\ngraph error: ");
        ag__text_dot(o, ag_graph_error(g), 200);
    }
    ag__text_puts(o, "\";\n}\n");
}

ag_status ag_graph_write_dot(const ag_graph *g, const ag_tensor *root, int flags, const char *path, char *err,
                             size_t errlen)
{
    const char *what = "dot";
    if (!g || !path)
        return ag__errf(err, errlen, AG_ERR_ARG, "%s: %s is NULL", what, !g ? "the graph" : "the output path");
    int n = ag_graph_node_count(g);
    ptrmap map = {0};
    unsigned char *live = ag__calloc((size_t)n + 1, 1);
    if (!live || !map_init(&map, (size_t)n * (1 + AG_MAX_SRC) + 1)) {
        ag__free(live);
        map_free(&map);
        return ag__errf(err, errlen, AG_ERR_NOMEM, "%s: out of memory drawing %d nodes for '%s'", what, n, path);
    }
    for (int i = 0; i < n; i++) map_put(&map, ag_graph_node(g, i), i);
    int top = root ? map_get(&map, root) : n - 1;
    if (top < 0 && root) {
        ag__free(live);
        map_free(&map);
        char sh[96];
        return ag__errf(err, errlen, AG_ERR_ARG, "%s: '%s': the root tensor %s%s%s is not on the graph's tape", what,
                        path, root->name[0] ? root->name : "", root->name[0] ? " " : "",
                        ag_shape_str(root, sh, sizeof sh));
    }
    mark_live(g, &map, top, !root, live);
    ag__text o = {0};
    ag__text_puts(&o, "digraph attograd {\n"
                      "  rankdir=TB;\n"
                      "  node [fontname=\"Helvetica\", fontsize=11, margin=\"0.12,0.05\"];\n"
                      "  edge [color=\"#666666\", arrowsize=0.7];\n");
    draw_caption(&o, g, draw_nodes(&o, g, &map, live, top, root != NULL, flags));
    ag_status st = ag__text_save(&o, what, path, err, errlen);
    ag__text_free(&o);
    ag__free(live);
    map_free(&map);
    return st;
}
