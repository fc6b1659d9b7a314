/* backward_tour: the tour's 4-token example, backward, step by step.
 *
 * The forward pass is the tour's (examples/README.md): four tokens of width
 * 3, X = [[1,0,1], [0,2,0], [1,1,0], [0,1,2]], identity maps W_q = W_k =
 * W_v = I so that Q = K = V = X, the causal mask, then one encoder-style
 * block and an output layer over a vocabulary of 5:
 *
 *   S = Q K^T / sqrt(3) + M;  P = softmax(S);  O = P V        attention
 *   h = LayerNorm1(O + X)                                      Add&Norm
 *   z = LayerNorm2(FFN(h) + h),  FFN(h) = W2 relu(W1 h + b1) + b2
 *   logits = z W_out^T + b_out;  L = mean_t -log softmax(logits_t)[y_t]
 *
 * with targets y = [1, 2, 3, 4] (each token "predicts the next").  The
 * program follows dL/d(each tensor) from the loss back to Q, K and V,
 * prints it, names the op file whose backward computed it, and checks it:
 *   - against central finite differences: a zero "probe" is added to each
 *     tensor (t + probe has the same value), and dL/dprobe, which is dL/dt,
 *     is checked by ag_gradcheck (eps 1e-6, |a - n| <= 1e-5 + 1e-3 |n|);
 *     the tensor's own gradient (ag_retain_grad) must equal it;
 *   - against the formula the tour derives, computed here by hand from the
 *     forward values: (softmax - onehot) / 4, the LayerNorm backward,
 *     dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dP * P)),
 *     dQ = dS K / sqrt(D), dK = dS^T Q / sqrt(D).
 * Built against the double library (as build/gradcheck is): in float the
 * finite differences would drown in rounding.
 *
 * With --dot FILE it writes the graph of the same forward pass (no probes)
 * after backward, with each tensor's value and gradient (min, max, norm):
 * AG_DOT_VALUES | AG_DOT_GRADS.
 *
 * With --html FILE it writes the explorer page (docs/explorer.md): P, dP,
 * dS, dQ, dK and dV as heatmaps side by side, each with its formula, its op
 * file and its checks (backward_tour_html.h).
 *
 * --break OP multiplies the gradient flowing into op OP's backward by 1.01
 * in the finite-difference check (as build/gradcheck --break does), to
 * watch the check catch it.
 *
 * What the live page (--live PAGE.html, docs/explorer.md) asks of it, the
 * page running this program compiled to WebAssembly:
 *   --mask R,C   flips cell (R, C) of the causal mask (query R, key C, from
 *                0): 1 allows the key, 0 forbids it (repeat for more cells)
 *   --steps N    first N steps of plain SGD (--lr, 0.1 by default) on every
 *                parameter, from the tour's start; the checks then look at
 *                the trained model, and the page draws the N losses
 *   --json FILE  the page's data alone ("-": stdout, the report then going
 *                to stderr)
 *   --live PAGE  the live page: the data, and build/wasm/backward_tour.wasm
 *                (make wasm; --wasm FILE names another) to recompute it
 *
 * Usage: backward_tour [--dot FILE] [--html FILE] [--break OP] [--mask R,C]... [--steps N] [--lr X]
 *                      [--json FILE] [--live PAGE [--wasm FILE]]
 * (exit 0 when every check passes, 1 when one fails) */
#include "attograd.h"
#include "backward_tour_html.h"
#include "common/live_page.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T = 4, D = 3, F = 4, V = 5, STEPS_MAX = 1000 };

/* The tensors whose gradient the tour prints, in backward order. */
enum {
    LOGITS, Z, R2, FOUT, FRELU, FPRE, H, R1, O, P, SM, S, QK, Q, K, VV, NSTEP
};

static const struct step {
    const char *name, *formula, *file;
} STEPS[NSTEP] = {
    [LOGITS] = {"logits", "dlogits = (softmax(logits) - onehot(y)) / 4", "ops/cross_entropy.c"},
    [Z] = {"z", "dz = dlogits W_out", "ops/linear.c"},
    [R2] = {"FFN(h) + h", "LayerNorm2 backward (see the tour)", "ops/layer_norm.c"},
    [FOUT] = {"FFN(h)", "d(FFN(h)) = d(FFN(h) + h): add passes it on", "ops/add.c"},
    [FRELU] = {"relu(W1 h + b1)", "d = d(FFN(h)) W2", "ops/linear.c"},
    [FPRE] = {"W1 h + b1", "d = d(relu) where W1 h + b1 > 0, else 0", "ops/relu.c"},
    [H] = {"h", "dh = d(FFN(h) + h) + d(W1 h + b1) W1: the fan-out sums", "ops/add.c + ops/linear.c"},
    [R1] = {"O + X", "LayerNorm1 backward", "ops/layer_norm.c"},
    [O] = {"O = P V", "dO = d(O + X)", "ops/add.c"},
    [P] = {"P", "dP = dO V^T", "ops/matmul.c"},
    [SM] = {"S + M", "dS = P * (dP - rowsum(dP * P))", "ops/softmax.c"},
    [S] = {"S = Q K^T / sqrt(D)", "dS where the mask is 1, 0 where it is 0", "ops/masked_fill.c"},
    [QK] = {"Q K^T", "d(Q K^T) = dS / sqrt(D)", "ops/scale.c"},
    [Q] = {"Q", "dQ = d(Q K^T) K = dS K / sqrt(D)", "ops/matmul.c"},
    [K] = {"K", "dK = d(Q K^T)^T Q = dS^T Q / sqrt(D)  (through K^T: ops/permute.c)", "ops/matmul.c"},
    [VV] = {"V", "dV = P^T dO", "ops/matmul.c"},
};

typedef struct model {
    ag_store *s;
    ag_linear_layer wq, wk, wv, out;
    ag_layer_norm_layer norm1, norm2;
    ag_ffn_layer ffn;
    ag_tensor *probe[NSTEP]; /* zeros, the same shape as each step's tensor */
    int probes;              /* 1: add each probe to its tensor */
    ag_tensor *t[NSTEP];     /* the last build's tensors (before the probe) */
    ag_real allow[T * T];    /* the mask: causal, unless --mask flipped cells */
    int edited;              /* --mask flipped a cell */
    ag_tensor *mask;
} model;

static const ag_real X[T * D] = {1, 0, 1, 0, 2, 0, 1, 1, 0, 0, 1, 2};
static const int Y[T] = {1, 2, 3, 4};

/* Record step i's tensor, keep its own gradient (an add's or a reshape's
 * would otherwise go to its input's buffer), and go on with it (plus its
 * probe). */
static ag_tensor *at(ag_graph *g, model *m, int i, ag_tensor *t)
{
    m->t[i] = t;
    if (t) ag_retain_grad(t);
    return m->probes ? ag_add(g, t, m->probe[i]) : t;
}

/* The forward pass, one step per line; returns the loss. */
static ag_tensor *forward(ag_graph *g, void *ctx)
{
    model *m = ctx;
    ag_tensor *x = ag_set_name(ag_tensor_from(g, AG_SHAPE(T, D), X), "X");
    ag_tensor *mask = m->mask = m->edited ? ag_tensor_from(g, AG_SHAPE(T, T), m->allow) : ag_causal_mask(g, T, T);
    /* attention, the textbook way (ag_attention_textbook, written out) */
    ag_tensor *q = at(g, m, Q, ag_set_name(ag_linear_layer_forward(g, &m->wq, x), "Q"));
    ag_tensor *k = at(g, m, K, ag_set_name(ag_linear_layer_forward(g, &m->wk, x), "K"));
    ag_tensor *v = at(g, m, VV, ag_set_name(ag_linear_layer_forward(g, &m->wv, x), "V"));
    ag_tensor *qk = at(g, m, QK, ag_set_name(ag_matmul(g, q, ag_transpose(g, k, 0, 1)), "Q K^T"));
    ag_tensor *s = at(g, m, S, ag_set_name(ag_scale(g, qk, 1 / sqrt((double)D)), "S"));
    ag_tensor *sm = at(g, m, SM, ag_set_name(ag_masked_fill(g, s, mask, -INFINITY), "S + M"));
    ag_tensor *p = at(g, m, P, ag_set_name(ag_softmax(g, sm), "P"));
    ag_tensor *o = at(g, m, O, ag_set_name(ag_matmul(g, p, v), "O = P V"));
    /* Add&Norm: the sublayer, then the skip */
    ag_tensor *r1 = at(g, m, R1, ag_set_name(ag_add(g, o, x), "O + X"));
    ag_tensor *h = at(g, m, H, ag_set_name(ag_layer_norm_layer_forward(g, &m->norm1, r1), "h"));
    /* FFN, and the second Add&Norm: h fans out to the FFN and the add */
    ag_tensor *f1 = at(g, m, FPRE, ag_set_name(ag_linear_layer_forward(g, &m->ffn.dense1, h), "W1 h + b1"));
    ag_tensor *a1 = at(g, m, FRELU, ag_set_name(ag_relu(g, f1), "relu"));
    ag_tensor *f = at(g, m, FOUT, ag_set_name(ag_linear_layer_forward(g, &m->ffn.dense2, a1), "FFN(h)"));
    ag_tensor *r2 = at(g, m, R2, ag_set_name(ag_add(g, f, h), "FFN(h) + h"));
    ag_tensor *z = at(g, m, Z, ag_set_name(ag_layer_norm_layer_forward(g, &m->norm2, r2), "z"));
    ag_tensor *logits = at(g, m, LOGITS, ag_set_name(ag_linear_layer_forward(g, &m->out, z), "logits"));
    return ag_set_name(ag_cross_entropy(g, logits, Y, -1, 0), "loss");
}

static int model_init(model *m)
{
    memset(m, 0, sizeof *m);
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) m->allow[i * T + j] = j <= i; /* ag_causal_mask's */
    if (!(m->s = ag_store_new())) return 1;
    ag_status st = ag_linear_layer_init(&m->wq, m->s, "w_q", D, D, 0, 1);
    if (st == AG_OK) st = ag_linear_layer_init(&m->wk, m->s, "w_k", D, D, 0, 1);
    if (st == AG_OK) st = ag_linear_layer_init(&m->wv, m->s, "w_v", D, D, 0, 1);
    if (st == AG_OK) st = ag_layer_norm_layer_init(&m->norm1, m->s, "norm1", D);
    if (st == AG_OK) st = ag_ffn_layer_init(&m->ffn, m->s, "ffn", D, F, 2);
    if (st == AG_OK) st = ag_layer_norm_layer_init(&m->norm2, m->s, "norm2", D);
    if (st == AG_OK) st = ag_linear_layer_init(&m->out, m->s, "out", D, V, 1, 3);
    if (st != AG_OK) return 1;
    /* identity maps: Q = K = V = X, the numbers of the forward tour */
    ag_linear_layer *id[3] = {&m->wq, &m->wk, &m->wv};
    for (int j = 0; j < 3; j++) {
        ag_init_const(id[j]->weight, 0);
        for (int i = 0; i < D; i++) id[j]->weight->data[i * D + i] = 1;
    }
    /* a probe per step, shaped like its tensor: learn the shapes from a build */
    ag_graph *g = ag_graph_new();
    int rc = g && forward(g, m) && ag_graph_status(g) == AG_OK ? 0 : 1;
    for (int i = 0; i < NSTEP && !rc; i++) {
        char name[32];
        snprintf(name, sizeof name, "probe.%d", i);
        m->probe[i] = ag_param(m->s, name, m->t[i]->ndim, m->t[i]->shape);
        if (!m->probe[i]) rc = 1;
    }
    ag_graph_free(g);
    return rc;
}

/* ---- the formulas, by hand, from the forward values ------------------------ */

static double max_diff(const ag_real *a, const double *b, int n)
{
    double w = 0;
    for (int i = 0; i < n; i++) { /* a NaN is the largest difference, never dropped */
        double d = fabs((double)a[i] - b[i]);
        w = isnan(d) || isnan(w) ? NAN : fmax(w, d);
    }
    return w;
}

/* y = a [n, k] b [k, m], with a or b read transposed when ta / tb */
static void mm(const ag_real *a, int ta, const ag_real *b, int tb, int n, int k, int mcols, double *y)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < mcols; j++) {
            double acc = 0;
            for (int l = 0; l < k; l++) acc += (double)(ta ? a[l * n + i] : a[i * k + l]) * (tb ? b[j * k + l] : b[l * mcols + j]);
            y[i * mcols + j] = acc;
        }
}

/* LayerNorm backward over rows of C, gain g (bias does not matter):
 *   xhat = (x - mean) / sigma,  dxhat = dy * g,
 *   dx = (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) / sigma */
static void layer_norm_backward(const ag_real *x, const ag_real *dy, const ag_real *gain, int rows, int C, double *dx)
{
    for (int r = 0; r < rows; r++) {
        const ag_real *xr = x + r * C, *dyr = dy + r * C;
        double mean = 0, var = 0, m1 = 0, m2 = 0, xhat[16], dxh[16];
        for (int c = 0; c < C; c++) mean += xr[c] / (double)C;
        for (int c = 0; c < C; c++) var += (xr[c] - mean) * (xr[c] - mean) / C;
        double sigma = sqrt(var + 1e-5);
        for (int c = 0; c < C; c++) {
            xhat[c] = (xr[c] - mean) / sigma, dxh[c] = dyr[c] * (double)gain[c];
            m1 += dxh[c] / C, m2 += dxh[c] * xhat[c] / C;
        }
        for (int c = 0; c < C; c++) dx[r * C + c] = (dxh[c] - m1 - xhat[c] * m2) / sigma;
    }
}

/* Each formula of the tour against the gradient backward left: the worst
 * difference per step.  G(i) is dL/d(step i's tensor), read from its probe
 * (main checks that the tensor's retained gradient equals it). */
static void formulas(const model *m, double err[NSTEP])
{
    ag_tensor *const *t = m->t;
#define G(i) (m->probe[i]->grad)
    double want[64], tmp[64];
    for (int i = 0; i < NSTEP; i++) err[i] = -1; /* a step without a check fails */
    /* the loss: (softmax - onehot) / T */
    for (int r = 0; r < T; r++) {
        const ag_real *l = t[LOGITS]->data + r * V;
        double mx = l[0], sum = 0;
        for (int c = 1; c < V; c++) mx = fmax(mx, l[c]);
        for (int c = 0; c < V; c++) sum += exp(l[c] - mx);
        for (int c = 0; c < V; c++) want[r * V + c] = (exp(l[c] - mx) / sum - (c == Y[r])) / T;
    }
    err[LOGITS] = max_diff(G(LOGITS), want, T * V);
    /* dz = dlogits W_out  ([T, V] [V, D]) */
    mm(G(LOGITS), 0, m->out.weight->data, 0, T, V, D, want);
    err[Z] = max_diff(G(Z), want, T * D);
    /* the adds pass their gradient on; relu gates it; W2 and the scale */
    for (int i = 0; i < T * D; i++) want[i] = G(R2)[i];
    err[FOUT] = max_diff(G(FOUT), want, T * D);
    for (int i = 0; i < T * D; i++) want[i] = G(R1)[i];
    err[O] = max_diff(G(O), want, T * D);
    mm(G(FOUT), 0, m->ffn.dense2.weight->data, 0, T, D, F, want);
    err[FRELU] = max_diff(G(FRELU), want, T * F);
    for (int i = 0; i < T * F; i++) want[i] = t[FPRE]->data[i] > 0 ? G(FRELU)[i] : 0;
    err[FPRE] = max_diff(G(FPRE), want, T * F);
    for (int i = 0; i < T * T; i++) want[i] = m->mask->data[i] != 0 ? G(SM)[i] : 0;
    err[S] = max_diff(G(S), want, T * T);
    for (int i = 0; i < T * T; i++) want[i] = G(S)[i] / sqrt((double)D);
    err[QK] = max_diff(G(QK), want, T * T);
    /* the two LayerNorms */
    layer_norm_backward(t[R2]->data, G(Z), m->norm2.weight->data, T, D, want);
    err[R2] = max_diff(G(R2), want, T * D);
    layer_norm_backward(t[R1]->data, G(H), m->norm1.weight->data, T, D, want);
    err[R1] = max_diff(G(R1), want, T * D);
    /* the fan-out: dh = d(FFN(h) + h) + d(W1 h + b1) W1 */
    mm(G(FPRE), 0, m->ffn.dense1.weight->data, 0, T, F, D, want);
    for (int i = 0; i < T * D; i++) want[i] += G(R2)[i];
    err[H] = max_diff(G(H), want, T * D);
    /* attention: dV = P^T dO, dP = dO V^T */
    mm(t[P]->data, 1, G(O), 0, T, T, D, want);
    err[VV] = max_diff(G(VV), want, T * D);
    mm(G(O), 0, t[VV]->data, 1, T, D, T, want);
    err[P] = max_diff(G(P), want, T * T);
    /* dS = P * (dP - rowsum(dP * P)) */
    for (int r = 0; r < T; r++) {
        double dot = 0;
        for (int c = 0; c < T; c++) dot += (double)G(P)[r * T + c] * t[P]->data[r * T + c];
        for (int c = 0; c < T; c++) want[r * T + c] = t[P]->data[r * T + c] * (G(P)[r * T + c] - dot);
    }
    err[SM] = max_diff(G(SM), want, T * T);
    /* dQ = dS K / sqrt(D), dK = dS^T Q / sqrt(D) (dS of the scaled scores) */
    mm(G(S), 0, t[K]->data, 0, T, T, D, tmp);
    for (int i = 0; i < T * D; i++) want[i] = tmp[i] / sqrt((double)D);
    err[Q] = max_diff(G(Q), want, T * D);
    mm(G(S), 1, t[Q]->data, 0, T, T, D, tmp);
    for (int i = 0; i < T * D; i++) want[i] = tmp[i] / sqrt((double)D);
    err[K] = max_diff(G(K), want, T * D);
#undef G
}

/* ---- printing ---------------------------------------------------------------- */

/* Where the report goes: stdout, or stderr when --json - takes stdout. */
static FILE *report;

static void print_grad(const ag_tensor *t, const ag_real *grad)
{
    int cols = t->shape[t->ndim - 1], rows = (int)(t->size / (size_t)cols);
    for (int r = 0; r < rows; r++) {
        fprintf(report, "   ");
        for (int c = 0; c < cols; c++) fprintf(report, " %9.5f", (double)grad[r * cols + c]);
        fprintf(report, "\n");
    }
}

static int write_picture(model *m, const char *path)
{
    ag_graph *g = ag_graph_new();
    char err[512];
    m->probes = 0;
    ag_graph_set_keep_grads(g, 1); /* the picture shows every node's gradient */
    ag_store_zero_grad(m->s);
    ag_status st = g ? ag_backward(g, forward(g, m)) : AG_ERR_NOMEM;
    if (st == AG_OK) st = ag_graph_write_dot(g, NULL, AG_DOT_VALUES | AG_DOT_GRADS, path, err, sizeof err);
    else snprintf(err, sizeof err, "%s", g ? ag_graph_error(g) : "no memory");
    ag_graph_free(g);
    if (st != AG_OK) fprintf(stderr, "backward_tour: %s\n", err);
    else fprintf(report, "wrote %s\n", path);
    return st != AG_OK;
}

/* The outputs that take the page's data: --html, --json, --live. */
typedef struct outputs {
    const char *html, *json, *live, *wasm, *argv0;
} outputs;

/* The page's panels (P, then the gradients of attention's steps) to each
 * output asked for; 0, or 1 after a message. */
static int write_pages(const model *m, const ag_gradcheck_result *res, const double *err, const int *ok,
                       double loss, const double *losses, int steps, double lr, const outputs *o)
{
    static const struct {
        int step;
        const char *name;
    } shown[] = {{P, "dP"}, {SM, "dS"}, {Q, "dQ"}, {K, "dK"}, {VV, "dV"}};
    enum { N = sizeof shown / sizeof shown[0] };
    static const char *const group[N] = {"dP and dS: one colour scale", "dP and dS: one colour scale",
                                         "dQ, dK and dV: one colour scale", "dQ, dK and dV: one colour scale",
                                         "dQ, dK and dV: one colour scale"};
    static const char *const note[N] = {
        "A masked cell of dP is a gradient that reaches no score: P is 0 there, and dS = P * (...) is 0.",
        "A masked cell of dS is 0 by the mask: masked_fill's backward passes nothing there."};
    tour_panel p[N + 1] = {{"P", "P = softmax(S + M), row by row", "ops/softmax.c", m->t[P], m->t[P]->data, 1,
                            -1, -1, 1, "P: the attention weights, 0 to the largest", m->mask,
                            "A masked cell of P is a weight the softmax never gave: exp(-inf) is 0.", NULL}};
    for (int i = 0; i < N; i++) {
        int s = shown[i].step;
        p[i + 1] = (tour_panel){shown[i].name, STEPS[s].formula, STEPS[s].file, m->t[s], m->probe[s]->grad, 0,
                                res[s].max_abs_err, err[s], ok[s], group[i], m->mask, note[i],
                                s == K || s == VV ? "token (key)" : NULL}; /* a row of dK or dV is a key's */
    }
    tour_page pg = {loss, p, N + 1, m->allow, T, losses, steps, lr};
    static const char *const args[] = {"--json", "-", NULL}; /* the live page adds --steps and --mask */
    live_spec live = {"backward_tour", o->argv0, o->wasm, o->live, TOUR_TITLE, NULL, NULL, args, NULL};
    explorer_out x;
    if (!explorer_open(&x, "backward_tour")) return 1;
    tour_json(x.f, &pg);
    if (fclose(x.f) != 0) {
        fprintf(stderr, "backward_tour: the page's data: %s\n", strerror(errno));
        free(x.buf);
        return 1;
    }
    int rc = explorer_write("backward_tour", x.buf, x.len,
                            &(explorer_dest){o->html, o->json, o->live ? &live : NULL, TOUR_TITLE});
    free(x.buf);
    if (!rc && o->html) fprintf(report, "wrote %s\n", o->html);
    if (!rc && o->live) fprintf(report, "wrote %s\n", o->live);
    return rc;
}

/* steps of SGD (learning rate lr) on every parameter, from where the model
 * is; losses[i] is the loss before step i.  0, or 1 after a message. */
static int train(model *m, int steps, double lr, double *losses)
{
    ag_graph *g = ag_graph_new();
    ag_optim *opt = ag_sgd_new(m->s, lr, 0, 0, 0);
    int rc = !g || !opt;
    m->probes = 0;
    for (int i = 0; i < steps && !rc; i++) {
        ag_graph_reset(g);
        ag_store_zero_grad(m->s);
        ag_tensor *loss = forward(g, m);
        rc = ag_backward(g, loss) != AG_OK;
        if (!rc) losses[i] = (double)loss->data[0], rc = ag_optim_step(opt) != AG_OK;
        if (!rc) fprintf(report, "step %d: loss %.6f\n", i + 1, losses[i]);
    }
    if (rc) fprintf(stderr, "backward_tour: training: %s\n", !g || !opt ? "no memory" : ag_graph_error(g));
    ag_optim_free(opt);
    ag_graph_free(g);
    return rc;
}

/* "R,C" with both in [0, T): flip that cell of the mask.  0, or 2 after a
 * message. */
static int flip_mask(model *m, const char *v)
{
    int r, c, end = 0;
    if (sscanf(v, "%d,%d%n", &r, &c, &end) != 2 || v[end] || r < 0 || r >= T || c < 0 || c >= T) {
        fprintf(stderr, "backward_tour: --mask wants ROW,COL with both in 0..%d, got '%s'\n", T - 1, v);
        return 2;
    }
    m->allow[r * T + c] = 1 - m->allow[r * T + c];
    m->edited = 1;
    return 0;
}

static int usage(const char *flag)
{
    fprintf(stderr, "backward_tour: unknown flag or missing value '%s'\nusage: backward_tour [--dot FILE] [--html FILE] "
                    "[--break OP] [--mask R,C]... [--steps N] [--lr X] [--json FILE] [--live PAGE [--wasm FILE]]\n",
            flag);
    return 2;
}

int main(int argc, char **argv)
{
    const char *dot = NULL;
    outputs out = {.argv0 = argv[0]};
    const char *masks[T * T];
    int nmask = 0, steps = 0;
    double lr = 0.1;
    ag_gradcheck_opts opts = AG_GRADCHECK_DEFAULTS;
    report = stdout;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end;
        if (!v) return usage(f);
        i++;
        if (!strcmp(f, "--dot")) dot = v;
        else if (!strcmp(f, "--html")) out.html = v;
        else if (!strcmp(f, "--json")) out.json = v;
        else if (!strcmp(f, "--live")) out.live = v;
        else if (!strcmp(f, "--wasm")) out.wasm = v;
        else if (!strcmp(f, "--mask") && nmask < T * T) masks[nmask++] = v;
        else if (!strcmp(f, "--steps")) {
            long n = strtol(v, &end, 10);
            if (*end || end == v || n < 0 || n > STEPS_MAX) {
                fprintf(stderr, "backward_tour: --steps wants a whole number in 0..%d, got '%s'\n", STEPS_MAX, v);
                return 2;
            }
            steps = (int)n;
        } else if (!strcmp(f, "--lr")) {
            lr = strtod(v, &end);
            if (*end || end == v || !(lr > 0 && lr <= 10)) {
                fprintf(stderr, "backward_tour: --lr wants a number in (0, 10], got '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(f, "--break")) {
            int op = ag_op_find(v);
            if (op <= 0) {
                fprintf(stderr, "backward_tour: no op named '%s'\n", v);
                return 2;
            }
            opts.break_op = op, opts.break_factor = 1.01;
        } else return usage(f);
    }
    if (out.json && !strcmp(out.json, "-")) report = stderr;
#ifndef AG_DOUBLE
    fprintf(stderr, "backward_tour: build it against the double library (-DAG_DOUBLE, libattograd64.a)\n");
    return 2;
#endif
    model m;
    ag_graph *g = ag_graph_new();
    if (!g || model_init(&m)) {
        fprintf(stderr, "backward_tour: could not build the model: %s\n", g ? ag_graph_error(g) : "no memory");
        return 1;
    }
    for (int i = 0; i < nmask; i++)
        if (flip_mask(&m, masks[i])) return 2;
    double losses[STEPS_MAX];
    if (train(&m, steps, lr, losses)) return 1;
    /* 1. finite differences through the probes */
    m.probes = 1;
    ag_gradcheck_result res[NSTEP];
    ag_status fd = ag_gradcheck(g, forward, &m, m.probe, NSTEP, &opts, res);
    /* 2. one clean forward and backward, to read the gradients */
    ag_graph_reset(g);
    ag_store_zero_grad(m.s);
    ag_tensor *loss = forward(g, &m);
    if (ag_backward(g, loss) != AG_OK) {
        fprintf(stderr, "backward_tour: %s\n", ag_graph_error(g));
        return 1;
    }
    double err[NSTEP];
    formulas(&m, err);
    if (opts.break_op > 0)
        fprintf(report,
                "--break %s: in the finite-difference check only, %s's backward multiplies the gradient it\n"
                "receives by %.2f.  The gradients printed below, and their formulas by hand, are the true\n"
                "backward's; the check's column compares that broken backward with finite differences, so\n"
                "it fails (the FAIL lines) for each tensor whose gradient goes through %s's backward.\n\n",
                ag_op_name(opts.break_op), ag_op_name(opts.break_op), opts.break_factor, ag_op_name(opts.break_op));
    fprintf(report, "loss L = %.6f (mean cross-entropy of 4 tokens, targets 1 2 3 4)\n", (double)loss->data[0]);
    if (tour_masked_rows(report, m.allow, T)) fputc('\n', report);
    int bad = fd != AG_OK, oks[NSTEP];
    for (int i = 0; i < NSTEP; i++) {
        const ag_tensor *t = m.t[i];
        char shape[64];
        /* the tensor's own gradient (retained) is its probe's */
        const ag_real *grad = m.probe[i]->grad;
        int same = t->grad && !memcmp(t->grad, grad, t->size * sizeof(ag_real));
        int ok = res[i].failed == 0 && same && err[i] >= 0 && err[i] <= 1e-12;
        bad |= !ok, oks[i] = ok;
        fprintf(report, "\nd %s %s   by %s\n  %s\n", STEPS[i].name, ag_shape_str(t, shape, sizeof shape),
                STEPS[i].file, STEPS[i].formula);
        print_grad(t, grad);
        fprintf(report, "  finite differences%s: max |analytic - numeric| %.1e", opts.break_op > 0 ? " (broken)" : "",
                res[i].max_abs_err);
        fprintf(report, "; the formula by hand: max diff %.1e", err[i]);
        fprintf(report, "  %s\n", ok ? "ok" : "FAIL");
    }
    fprintf(report, "\n%s\n", bad ? "some gradient FAILED its check" : "every gradient matches finite differences");
    if (write_pages(&m, res, err, oks, (double)loss->data[0], losses, steps, lr, &out)) bad = 1;
    if (dot && write_picture(&m, dot)) bad = 1;
    ag_graph_free(g);
    ag_store_free(m.s);
    return bad;
}
