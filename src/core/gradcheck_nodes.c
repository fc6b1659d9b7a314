/* gradcheck_nodes.c: every node's own backward, checked on a model's tape,
 * to name the op that is wrong.
 *
 * For node i, y = f(x_1..x_k), a random w over y and a random direction u
 * over its inputs give the scalar phi_i(t) = w . f(x + t u), whose slope
 * at 0 is w . J u = sum_k (J_k^T w) . u_k: the op's backward run alone
 * with dy = w gives the analytic side.  The numeric side recomputes f from
 * the node's own inputs and arguments by replaying the build on a second
 * graph: when node i goes on the replay's tape (ag__node calls
 * ag__replay_node), its inputs are moved by t u; when the next node
 * starts, y's values give phi_i(t), and the inputs and y get their
 * unmoved values back, so that the rest of the replay is the model's.  So
 * one replay measures phi_i(t) of every node at once, whatever the op
 * (fused ops included), and the walk costs some 25 forward passes: the
 * strict stage's steps h, h/2, h/4 either side, a step 1e-3 h for its
 * roughness test, and 17 points 1e-7 apart for each node's rounding noise.
 * A node that fails is checked again input by input, to say which
 * input's gradient is wrong. */
#include "core/gradcheck.h"
#include "core/graph.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

enum { NOISE_POINTS = 17 }; /* t = -8..8 times 1e-7 */

typedef struct node_info {
    bool checked;               /* its backward is checked */
    double scale[AG_MAX_SRC];   /* its inputs' directions' scale; 0: not moved */
    int alias[AG_MAX_SRC];      /* the first input with the same values (x * x) */
    double ana[AG_MAX_SRC + 1]; /* w . J_k u_k per input, and their sum */
    double noise[2];            /* third differences: sum of squares, count */
    double f[NOISE_POINTS];     /* phi at the noise points */
    double d[3], d_eps;         /* central differences at h, h/2, h/4 and eps */
    double e[3];                /* phi(t) + phi(-t) at t = h, h/2, h/4 (the kink test's) */
    char path[64];              /* the layer path */
} node_info;

struct ag__replay {
    ag_graph *tape;     /* the walked graph: the nodes' unmoved values */
    node_info *info;    /* per slot */
    uint64_t seed;
    int only;           /* -1: every input moves; k: input k only */
    double t;           /* this replay's step along u */
    double *phi;        /* out: phi[slot] */
    ag_tensor *pending; /* the replay's node whose inputs are moved, or NULL */
    ag_real *saved;     /* their values */
    bool mismatch;      /* the replay's tape is not the walked one */
};

static uint64_t stream(uint64_t seed, int slot, int k)
{
    return seed * 0x9e3779b97f4a7c15ull ^ ((uint64_t)slot << 8 | (uint64_t)k) * 0xbf58476d1ce4e5b9ull;
}

/* w . y, w's signs from the node's stream; 0 where the walked y is not
 * finite (a mask's -inf).  Summed with Neumaier's compensation: a plain
 * sum of thousands of values rounds each partial sum, an error that moves
 * little between the noise points, 1e-7 apart, and much between the
 * steps h apart, so that the noise measured would miss it. */
static double w_dot(uint64_t seed, int slot, const ag_tensor *walked, const ag_real *y)
{
    ag_rng r;
    ag_rng_seed(&r, stream(seed, slot, AG_MAX_SRC));
    double sum = 0, c = 0;
    for (size_t j = 0; j < walked->size; j++) {
        double s = ag__sign(&r);
        if (!isfinite((double)walked->data[j])) continue;
        double v = s * (double)y[j], t = sum + v;
        c += fabs(sum) >= fabs(v) ? (sum - t) + v : (v - t) + sum;
        sum = t;
    }
    return sum + c;
}

/* sqrt(sum y_j^2) over y's finite values: each value of y is rounded once
 * when stored, which puts noise of deviation u |y| / sqrt(3) on w . y, the
 * least the noise of a node can be (ag__noise_sigma's floor). */
static double norm2(const ag_tensor *y)
{
    double sum = 0;
    for (size_t j = 0; j < y->size; j++)
        if (isfinite((double)y->data[j])) sum += (double)y->data[j] * (double)y->data[j];
    return sqrt(sum);
}

/* Input k of node `slot` moves (as input `alias` of it) in this replay. */
static bool moves(const struct ag__replay *r, const node_info *n, int k)
{
    return n->scale[k] > 0 && n->alias[k] == k && (r->only < 0 || r->only == k);
}

/* x (an input of the node) at x + t u (u from the node's stream for input
 * k); at x, the walked values, when t == 0. */
static void move(const node_info *n, uint64_t seed, int slot, int k, ag_real *x, size_t size, double t)
{
    ag_rng r;
    ag_rng_seed(&r, stream(seed, slot, k));
    for (size_t e = 0; e < size; e++) {
        double v = ag__sign(&r) * n->scale[k];
        if (isfinite((double)x[e])) x[e] = (ag_real)((double)x[e] + t * v);
    }
}

/* The pending node is done: phi from its values, then its inputs and its
 * values as they were. */
static void finish_pending(struct ag__replay *r)
{
    ag_tensor *y = r->pending;
    if (!y) return;
    int slot = ag__impl(y)->slot;
    const ag_tensor *walked = r->tape->nodes[slot];
    if (walked->size != y->size) r->mismatch = true; /* (a reshape gets its size after ag__node) */
    if (!r->mismatch) r->phi[slot] = w_dot(r->seed, slot, walked, y->data);
    size_t at = 0;
    for (int k = 0; k < y->nsrc; k++)
        if (moves(r, &r->info[slot], k)) {
            memcpy(y->src[k]->data, r->saved + at, y->src[k]->size * sizeof(ag_real));
            at += y->src[k]->size;
        }
    if (!r->mismatch) memcpy(y->data, walked->data, y->size * sizeof(ag_real));
    r->pending = NULL;
}

void ag__replay_node(ag_graph *g, ag_tensor *t)
{
    struct ag__replay *r = g->replay;
    finish_pending(r);
    int slot = ag__impl(t)->slot;
    const ag_tensor *walked = slot < r->tape->count ? r->tape->nodes[slot] : NULL;
    if (!walked || walked->op != t->op || walked->nsrc != t->nsrc) {
        r->mismatch = true;
        g->replay = NULL; /* the rest of this replay is not measured */
        return;
    }
    const node_info *n = &r->info[slot];
    if (!n->checked) return;
    size_t at = 0;
    for (int k = 0; k < t->nsrc; k++)
        if (moves(r, n, k)) {
            memcpy(r->saved + at, t->src[k]->data, t->src[k]->size * sizeof(ag_real));
            move(n, r->seed, slot, k, t->src[k]->data, t->src[k]->size, r->t);
            at += t->src[k]->size;
        }
    r->pending = t;
}

/* ---- the layer path ------------------------------------------------------ */

/* The common dotted prefix of a and b into a ("blocks.1.attn.q" and
 * "blocks.1.attn.k": "blocks.1.attn"). */
static void common_prefix(char *a, const char *b)
{
    size_t i = 0, cut = 0;
    for (; a[i] && a[i] == b[i]; i++)
        if (a[i] == '.') cut = i;
    if (!a[i] && (!b[i] || b[i] == '.')) return; /* a is b, or a prefix of b at a dot */
    a[cut] = 0;
}

/* A parameter's path is its name without the last part
 * ("blocks.1.norm2.weight": "blocks.1.norm2"); a node's is the common part
 * of its parameters' paths when it has parameters as inputs, else of its
 * inputs' paths, else the newest input's. */
static void layer_path(const ag_graph *g, node_info *info, int slot)
{
    const ag_tensor *y = g->nodes[slot];
    char *p = info[slot].path;
    p[0] = 0;
    if (y->is_param) {
        snprintf(p, sizeof info->path, "%s", y->name);
        char *dot = strrchr(p, '.');
        if (dot) *dot = 0;
        return;
    }
    for (int pass = 0; pass < 2 && !p[0]; pass++) {
        bool any = false;
        for (int k = 0; k < y->nsrc; k++) {
            const ag_tensor *x = y->src[k];
            if (!x || (pass == 0 && !x->is_param)) continue;
            char own[64];
            if (x->is_param) {
                snprintf(own, sizeof own, "%s", x->name);
                char *dot = strrchr(own, '.');
                if (dot) *dot = 0;
            } else {
                int s = ag__impl(x)->slot;
                if (ag__impl(x)->graph != g || s < 0 || s >= slot) continue;
                memcpy(own, info[s].path, sizeof own);
            }
            if (!own[0]) continue;
            if (!any) snprintf(p, sizeof info->path, "%s", own), any = true;
            else common_prefix(p, own);
        }
    }
    if (p[0]) return;
    int newest = -1;
    for (int k = 0; k < y->nsrc; k++) {
        const ag_tensor *x = y->src[k];
        if (x && ag__impl(x)->graph == g && ag__impl(x)->slot < slot && ag__impl(x)->slot > newest)
            newest = ag__impl(x)->slot;
    }
    if (newest >= 0) memcpy(p, info[newest].path, sizeof info->path);
}

/* ---- the analytic side: each node's backward alone ----------------------- */

/* Scratch for one node's backward: dy (w) and a gradient per input. */
typedef struct scratch {
    ag_real *w, *dx[AG_MAX_SRC];
} scratch;

/* After node slot's backward: each input's gradient J_k^T w dotted with
 * its direction u_k into n->ana[k] (an input given twice counted once, in
 * the first's place), their sum last. */
static void node_dots(const ag_tensor *y, node_info *n, uint64_t seed, int slot)
{
    for (int k = 0; k <= AG_MAX_SRC; k++) n->ana[k] = 0;
    for (int k = 0; k < y->nsrc; k++) {
        const ag_tensor *x = y->src[k];
        int a = n->alias[k];
        bool again = false;
        for (int m = 0; m < k; m++) again = again || y->src[m] == x;
        if (!x || !x->requires_grad || again || !(n->scale[a] > 0)) continue;
        ag_rng r;
        ag_rng_seed(&r, stream(seed, slot, a));
        double sum = 0;
        for (size_t e = 0; e < x->size; e++) {
            double v = ag__sign(&r) * n->scale[a];
            if (isfinite((double)x->data[e])) sum += (double)x->grad[e] * v;
        }
        n->ana[a] += sum, n->ana[AG_MAX_SRC] += sum;
    }
}

/* w . J_k u_k for each input k of node slot: its backward run alone with
 * dy = w, into zeroed buffers that stand in for the inputs' own. */
static void node_analytic(ag_graph *g, node_info *n, uint64_t seed, int slot, const scratch *s)
{
    ag_tensor *y = g->nodes[slot];
    ag_rng r;
    ag_rng_seed(&r, stream(seed, slot, AG_MAX_SRC));
    for (size_t j = 0; j < y->size; j++) {
        double v = ag__sign(&r);
        s->w[j] = isfinite((double)y->data[j]) ? (ag_real)v : 0;
    }
    ag_real *keep_grad[AG_MAX_SRC];
    bool keep_unset[AG_MAX_SRC];
    for (int k = 0; k < y->nsrc; k++) {
        ag_tensor *x = y->src[k];
        if (!x) continue;
        keep_grad[k] = x->grad, keep_unset[k] = ag__impl(x)->unset;
        bool again = false; /* an input given twice gets one buffer */
        for (int m = 0; m < k; m++) again = again || y->src[m] == x;
        if (!x->requires_grad || again) continue;
        memset(s->dx[k], 0, x->size * sizeof(ag_real));
        x->grad = s->dx[k], ag__impl(x)->unset = false;
    }
    ag_real *keep_dy = y->grad;
    bool lent = ag__impl(y)->lent;
    y->grad = s->w, ag__impl(y)->lent = false;
    g->ops[y->op]->backward(g, y);
    y->grad = keep_dy, ag__impl(y)->lent = lent;
    node_dots(y, n, seed, slot);
    for (int k = y->nsrc - 1; k >= 0; k--) /* in reverse: a repeated input's first pointer is the one kept */
        if (y->src[k]) y->src[k]->grad = keep_grad[k], ag__impl(y->src[k])->unset = keep_unset[k];
}

/* ---- the walk ------------------------------------------------------------ */

typedef struct walk {
    ag_graph *g, *rg;       /* the walked graph and the replays' */
    ag_build_fn build;
    void *ctx;
    ag_rng rng0;
    struct ag__replay r;
    int count;              /* nodes on the walked tape */
} walk;

/* phi[slot] of every checked node at step t (inputs `only`, -1: all). */
static ag_status replay(walk *w, int only, double t)
{
    w->r.only = only, w->r.t = t, w->r.pending = NULL;
    ag_graph_reset(w->rg);
    *ag__graph_rng(w->rg) = w->rng0;
    w->rg->replay = &w->r;
    w->build(w->rg, w->ctx);
    if (w->rg->replay) finish_pending(&w->r);
    w->rg->replay = NULL;
    if (w->r.mismatch || w->rg->count != w->count)
        return ag_graph_fail(w->g, AG_ERR_STATE,
                             "gradcheck_nodes: the build made another tape on its replay: it must build the same "
                             "computation at every call");
    if (ag_graph_status(w->rg) != AG_OK)
        return ag_graph_fail(w->g, ag_graph_status(w->rg), "gradcheck_nodes: replay: %s", ag_graph_error(w->rg));
    return AG_OK;
}

/* The noise points, then D(h), D(h/2), D(h/4) and D(eps) of every node,
 * its inputs `only` moving (-1: all). */
static ag_status measure(walk *w, int only, double h, bool noise)
{
    const int n = w->count;
    ag_status st = AG_OK;
    for (int j = 0; noise && j < NOISE_POINTS && st == AG_OK; j++) {
        if ((st = replay(w, only, (j - NOISE_POINTS / 2) * 1e-7)) != AG_OK) break;
        for (int i = 0; i < n; i++) w->r.info[i].f[j] = w->r.phi[i];
    }
    const double steps[4] = {h, h / 2, h / 4, 1e-3 * h};
    for (int k = 0; k < 4 && st == AG_OK; k++) {
        if ((st = replay(w, only, steps[k])) != AG_OK) break;
        for (int i = 0; i < n; i++) *(k < 3 ? &w->r.info[i].d[k] : &w->r.info[i].d_eps) = w->r.phi[i];
        if ((st = replay(w, only, -steps[k])) != AG_OK) break;
        for (int i = 0; i < n; i++) {
            double *d = k < 3 ? &w->r.info[i].d[k] : &w->r.info[i].d_eps;
            if (k < 3) w->r.info[i].e[k] = *d + w->r.phi[i];
            *d = (*d - w->r.phi[i]) / (2 * steps[k]);
        }
    }
    return st;
}

/* The strict verdict on node i for the analytic value a. */
static ag__strict verdict(const node_info *n, double h, double sigma)
{
    ag__strict s;
    ag__strict_from(n->d, h, sigma, n->d_eps, 1e-3 * h, &s);
    const double phi0 = n->f[NOISE_POINTS / 2], e[3] = {n->e[0] - 2 * phi0, n->e[1] - 2 * phi0, n->e[2] - 2 * phi0};
    if (ag__kink_here(e, h, sigma)) s.rough = true; /* at the point itself: no step resolves it */
    return s;
}

/* "node 137 layer_norm (blocks.1.norm2) [32, 32, 64]: " and what, on f. */
static void report_line(FILE *f, const ag_graph *g, const node_info *n, int slot, const char *what)
{
    if (!f) return;
    const ag_tensor *y = g->nodes[slot];
    char shape[96];
    fprintf(f, "node %d %s", slot, ag_op_name(y->op));
    if (n->path[0]) fprintf(f, " (%s)", n->path);
    fprintf(f, " %s: %s\n", ag_shape_str(y, shape, sizeof shape), what);
}

/* A failing node's verdict: the node as a whole (rel, tol relative to the
 * slope), then each input found wrong alone (off[k] > 0). */
typedef struct node_fail {
    double rel, tol, off[AG_MAX_SRC], off_tol[AG_MAX_SRC];
} node_fail;

/* Which of the failing nodes' inputs are wrong: each input checked alone. */
static ag_status attribute(walk *w, node_fail *fail, const double *sigma, double h)
{
    const int n = w->count;
    for (int k = 0; k < AG_MAX_SRC; k++) {
        const struct ag__replay alone = {.only = k};
        bool any = false;
        for (int i = 0; i < n && !any; i++) any = fail[i].rel > 0 && moves(&alone, &w->r.info[i], k);
        if (!any) continue;
        ag_status st = measure(w, k, h, false);
        if (st != AG_OK) return st;
        for (int i = 0; i < n; i++) {
            node_info *ni = &w->r.info[i];
            if (!(fail[i].rel > 0) || !moves(&alone, ni, k)) continue;
            ag__strict s = verdict(ni, h, sigma[i]);
            double err = fabs(ni->ana[k] - s.numeric);
            if (s.rough || err <= s.tol) continue;
            fail[i].off[k] = err / fabs(s.numeric), fail[i].off_tol[k] = s.tol / fabs(s.numeric);
        }
    }
    return AG_OK;
}

/* The failing nodes, in tape order: the node, then each wrong input. */
static void report_failures(const walk *w, const node_fail *fail, FILE *f)
{
    for (int i = 0; f && i < w->count; i++) {
        if (!(fail[i].rel > 0)) continue;
        char what[160];
        snprintf(what, sizeof what, "w . J u off by %.1e (tolerance %.1e)", fail[i].rel, fail[i].tol);
        report_line(f, w->g, &w->r.info[i], i, what);
        for (int k = 0; k < AG_MAX_SRC; k++) {
            if (!(fail[i].off[k] > 0)) continue;
            const ag_tensor *x = w->g->nodes[i]->src[k];
            char shape[96];
            fprintf(f, "    d/d input %d%s%s%s %s off by %.1e (tolerance %.1e)\n", k, x->name[0] ? " '" : "",
                    x->name, x->name[0] ? "'" : "", ag_shape_str(x, shape, sizeof shape), fail[i].off[k],
                    fail[i].off_tol[k]);
        }
    }
}

/* Each node's verdict into best[i]: the strict stage at step h; where
 * that is rough or its spread is most of the tolerance (a relu's kinks
 * within the step), again at h/10 and h/100, the smallest smooth step's
 * kept (as gradcheck_model.c's directions). */
enum { SHRINK_STEPS = 2 };
static ag_status verdicts(walk *w, double h, const double *sigma, ag__strict *best)
{
    const int n = w->count;
    for (int k = 0; k <= SHRINK_STEPS; k++, h /= 10) {
        bool need = false;
        for (int i = 0; i < n && !need; i++)
            need = w->r.info[i].checked && (k == 0 || best[i].rough || best[i].spread > best[i].tol - best[i].spread);
        if (!need) break;
        ag_status st = k ? measure(w, -1, h, false) : AG_OK;
        if (st != AG_OK) return st;
        for (int i = 0; i < n; i++) {
            if (!w->r.info[i].checked) continue;
            ag__strict t = verdict(&w->r.info[i], h, sigma[i]);
            if (k == 0 || !t.rough) best[i] = t; /* the smallest smooth step */
        }
    }
    return AG_OK;
}

/* The walk proper, on g's tape of `count` nodes. */
static ag_status walk_nodes(walk *w, const ag_gradcheck_model_opts *o, FILE *report, ag_gradcheck_walk_result *res)
{
    const int n = w->count;
    const double h = o->node_step;
    ag_status st = measure(w, -1, h, true);
    if (st != AG_OK) return st;
    node_fail *fail = ag__calloc((size_t)n, sizeof *fail);
    double *sigma = ag__calloc((size_t)n, sizeof *sigma);
    ag__strict *best = ag__calloc((size_t)n, sizeof *best);
    if (!fail || !sigma || !best) {
        ag__free(fail), ag__free(sigma), ag__free(best);
        return ag_graph_fail(w->g, AG_ERR_NOMEM, "gradcheck_nodes: out of memory for %d nodes", n);
    }
    for (int i = 0; i < n; i++) {
        double sc[2] = {0, 0};
        ag__noise_add(w->r.info[i].f, NOISE_POINTS, sc);
        double phi0 = w->r.info[i].f[NOISE_POINTS / 2], y2 = w->r.info[i].checked ? norm2(w->g->nodes[i]) : 0;
        sigma[i] = ag__noise_sigma(sc, sqrt(phi0 * phi0 + y2 * y2));
    }
    st = verdicts(w, h, sigma, best);
    for (int i = 0; i < n && st == AG_OK; i++) {
        node_info *ni = &w->r.info[i];
        if (!ni->checked) continue;
        const ag__strict s = best[i];
        res->nodes++;
        if (s.rough) {
            res->rough++;
            report_line(report, w->g, ni, i, "not smooth within the step: no verdict");
            continue;
        }
        double err = fabs(ni->ana[AG_MAX_SRC] - s.numeric), ratio = err == 0 ? 0 : err / s.tol;
        double vis = s.tol / fabs(s.numeric);
        if (ratio > res->worst || isnan(ratio)) res->worst = isnan(ratio) ? INFINITY : ratio;
        if (!(fabs(s.numeric) > s.tol)) res->flat++; /* only an absolute error shows */
        else if (vis > res->visible || isnan(vis)) res->visible = isnan(vis) ? INFINITY : vis;
        if (err <= s.tol) continue;
        fail[i].rel = isnan(err) ? INFINITY : fmax(err / fabs(s.numeric), DBL_MIN), fail[i].tol = vis;
        res->failed++;
        if (res->first < 0) res->first = i, res->first_op = w->g->nodes[i]->op;
    }
    if (st == AG_OK && res->failed) st = attribute(w, fail, sigma, h);
    if (st == AG_OK) report_failures(w, fail, report);
    ag__free(fail), ag__free(sigma), ag__free(best);
    return st;
}

/* Which nodes are checked, their inputs' scales, paths and analytic
 * values; *room the largest input and output sizes. */
static ag_status prepare(walk *w, const ag_gradcheck_model_opts *o)
{
    ag_graph *g = w->g;
    size_t big = 1, moved = 1;
    for (int i = 0; i < w->count; i++) {
        const ag_tensor *y = g->nodes[i];
        node_info *ni = &w->r.info[i];
        layer_path(g, w->r.info, i);
        ni->checked = y->op != AG_OP_LEAF && y->requires_grad && g->ops[y->op]->backward;
        size_t sum = 0;
        for (int k = 0; k < y->nsrc; k++) {
            const ag_tensor *x = y->src[k];
            ni->alias[k] = k;
            if (!x || !x->requires_grad) continue;
            for (int m = 0; m < k && ni->alias[k] == k; m++)
                if (y->src[m] && y->src[m]->data == x->data && y->src[m]->size == x->size) ni->alias[k] = m;
            if (ni->alias[k] != k) continue;
            ni->scale[k] = ag__rms(x->data, x->size);
            sum += x->size;
            if (x->size > big) big = x->size;
        }
        if (y->size > big) big = y->size;
        if (sum > moved) moved = sum;
    }
    scratch s = {ag__malloc(big * sizeof(ag_real)), {NULL}};
    bool ok = s.w != NULL;
    for (int k = 0; k < AG_MAX_SRC; k++) ok = ok && (s.dx[k] = ag__malloc(big * sizeof(ag_real)));
    w->r.saved = ag__malloc(moved * sizeof(ag_real));
    w->r.phi = ag__calloc((size_t)w->count, sizeof *w->r.phi);
    ok = ok && w->r.saved && w->r.phi;
    ag__graph_break(g, o->break_op, o->break_factor);
    for (int i = 0; ok && i < w->count && g->status == AG_OK; i++)
        if (w->r.info[i].checked) node_analytic(g, &w->r.info[i], o->seed, i, &s);
    ag__graph_break(g, 0, 1);
    ag__free(s.w);
    for (int k = 0; k < AG_MAX_SRC; k++) ag__free(s.dx[k]);
    if (!ok) return ag_graph_fail(g, AG_ERR_NOMEM, "gradcheck_nodes: out of memory for %zu values", big);
    return g->status;
}

ag_status ag_gradcheck_nodes(ag_graph *g, ag_build_fn build, void *ctx, const ag_gradcheck_model_opts *opts,
                             FILE *report, ag_gradcheck_walk_result *res)
{
    if (!g) return AG_ERR_ARG;
    ag_graph_reset(g);
    if (!build || !res) return ag_graph_fail(g, AG_ERR_ARG, "gradcheck_nodes: %s is NULL", !build ? "build" : "res");
    if (sizeof(ag_real) != sizeof(double))
        return ag_graph_fail(g, AG_ERR_STATE,
                             "gradcheck_nodes: needs the double build (compile with -DAG_DOUBLE, link "
                             "libattograd64.a): in float, rounding swamps the finite differences");
    if (!ag_graph_grad(g))
        return ag_graph_fail(g, AG_ERR_STATE, "gradcheck_nodes: the graph is in no-grad mode: its tape would hold "
                                              "nothing to check (ag_graph_set_grad(g, 1))");
    ag_gradcheck_model_opts o = AG_GRADCHECK_MODEL_DEFAULTS;
    if (opts) o = *opts;
    if (!(o.node_step > 0) || !isfinite(o.node_step))
        return ag_graph_fail(g, AG_ERR_ARG, "gradcheck_nodes: node_step %g must be positive", o.node_step);
    *res = (ag_gradcheck_walk_result){.first = -1};
    walk w = {.g = g, .build = build, .ctx = ctx, .rng0 = *ag__graph_rng(g)};
    const ag__probe p = {g, build, ctx, &w.rng0};
    ag_tensor *loss;
    ag_status st = ag__build_loss(&p, &loss);
    if (st != AG_OK) return st;
    w.count = g->count;
    w.r = (struct ag__replay){.tape = g, .seed = o.seed};
    w.r.info = ag__calloc((size_t)w.count, sizeof *w.r.info);
    w.rg = ag_graph_new();
    if (!w.r.info || !w.rg) st = ag_graph_fail(g, AG_ERR_NOMEM, "gradcheck_nodes: out of memory for %d nodes", w.count);
    if (st == AG_OK) {
        ag_graph_set_training(w.rg, ag_graph_training(g));
        st = prepare(&w, &o);
    }
    if (st == AG_OK) st = walk_nodes(&w, &o, report, res);
    ag_graph_free(w.rg);
    ag__free(w.r.info), ag__free(w.r.saved), ag__free(w.r.phi);
    *ag__graph_rng(g) = w.rng0;
    if (st != AG_OK) return st;
    ag_graph_reset(g);
    if (!res->failed) return AG_OK;
    return ag_graph_fail(g, AG_ERR_NUMERIC, "gradcheck_nodes: %d of %d nodes fail, the first node %d %s", res->failed,
                         res->nodes, res->first, ag_op_name(res->first_op));
}
