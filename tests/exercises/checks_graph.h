/* checks_graph.h: the checks of exercises 1, 4, 5, 6 and 8, which build on
 * a graph: their values against plain loops (with the typical mistakes
 * computed beside them, for the hints), their gradients against finite
 * differences (included by check.c once). */

/* A [T, S] tensor, or says why it is not one. */
static int shaped(const char *what, const ag_tensor *t, int ndim, const int *shape)
{
    if (!t) return CHECK(0, "%s is NULL", what);
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    char have[64], want[64];
    return CHECK(same, "%s is %s, should be %s", what, ag_shape_str(t, have, sizeof have),
                 ag_shape_str_n(ndim, shape, want, sizeof want));
}

/* Why mask[t, s] is what it is, for T queries that are the last of S. */
static void mask_why(const int *idx, const void *ctx, char *buf, size_t len)
{
    const int *ts = ctx, T = ts[0], S = ts[1], t = idx[0], s = idx[1], p = t + S - T;
    snprintf(buf, len, "query %d sits at position %d (%d key%s cached before the %d quer%s); key %d is %s, so %s", t,
             p, S - T, S - T == 1 ? "" : "s", T, T == 1 ? "y" : "ies", s,
             s < p ? "before it" : s == p ? "itself" : "after it",
             s <= p ? "it may be seen: 1" : "it is hidden: 0");
}

static int check_causal_mask(void)
{
    static const char *const axes[2] = {"t", "s"};
    const int sizes[3][2] = {{4, 4}, {3, 7}, {1, 5}};
    ag_graph *g = ag_graph_new();
    for (int c = 0; c < 3; c++) {
        int T = sizes[c][0], S = sizes[c][1];
        char name[64];
        snprintf(name, sizeof name, "the mask (T %d, S %d)", T, S);
        ag_tensor *m = ex_causal_mask(g, T, S);
        if (!shaped(name, m, AG_SHAPE(T, S))) continue;
        double want[4 * 7], square[4 * 7], strict[4 * 7], inverted[4 * 7];
        for (int t = 0; t < T; t++)
            for (int s = 0; s < S; s++) {
                int i = t * S + s, p = t + S - T;
                want[i] = s <= p, square[i] = s <= t, strict[i] = s < p, inverted[i] = s > p;
            }
        const mistake typical[3] = {
            {"off by S - T in time?", "this is the square mask s <= t; query t sits at position t + S - T, after "
                                      "the S - T cached keys", square},
            {"off by one in time?", "the diagonal is 0: a query may see its own position, s <= t + S - T", strict},
            {"sign?", "1 and 0 are swapped: 1 means may attend", inverted},
        };
        report(&(output){.name = name, .ndim = 2, .shape = m->shape, .axes = axes, .got = m->data, .want = want,
                         .typical = typical, .ntypical = 3, .why = mask_why, .ctx = sizes[c]});
    }
    ag_graph_free(g);
    return 0;
}

static int check_alibi(void)
{
    static const char *const axes[3] = {"h", "i", "j"};
    enum { H = 4, T = 5 };
    ag_graph *g = ag_graph_new();
    ag_tensor *b = ex_alibi_bias(g, H, T);
    if (shaped("the bias", b, AG_SHAPE(H, T, T))) {
        double want[H * T * T], head_from_0[H * T * T];
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++) {
                    double m = pow(2, -8.0 * (h + 1) / H), m0 = pow(2, -8.0 * h / H);
                    want[(h * T + i) * T + j] = j <= i ? -m * (i - j) : 0;
                    head_from_0[(h * T + i) * T + j] = j <= i ? -m0 * (i - j) : 0;
                }
        const mistake typical[1] = {
            {"off by one?", "the slopes are 2^(-8 h / H); heads count from 1 in the formula: m_h = 2^(-8 (h + 1) / H)",
             head_from_0}};
        report(&(output){.name = "the bias", .ndim = 3, .shape = b->shape, .axes = axes, .got = b->data, .want = want,
                         .typical = typical, .ntypical = 1});
    }
    ag_graph_free(g);
    return 0;
}

/* L = sum(f(inputs) * w) for a graph-building exercise, and a gradient
 * check of it over the store's parameters. */
typedef struct fd_case {
    ag_store *s;
    ag_tensor *w;  /* store constant, the output's shape */
    ag_tensor *(*f)(ag_graph *g, struct fd_case *c);
    const int *ids;
    double base, eps;
} fd_case;

static ag_tensor *weighted(ag_graph *g, void *ctx)
{
    fd_case *c = ctx;
    return ag_sum_all(g, ag_mul(g, c->f(g, c), c->w));
}

static void gradcheck(const char *what, fd_case *c, const int *out_shape, int out_ndim)
{
    ag_rng r;
    ag_rng_seed(&r, 99);
    c->w = ag_store_constant(c->s, "w", out_ndim, out_shape, NULL);
    for (size_t i = 0; i < c->w->size; i++) c->w->data[i] = 2 * ag_rng_uniform(&r) - 1;
    ag_graph *g = ag_graph_new();
    ag_status st = ag_gradcheck_store(g, weighted, c, c->s, NULL, NULL);
    CHECK(st == AG_OK, "%s's gradient against finite differences: %s", what, ag_graph_error(g));
    ag_graph_free(g);
}

static ag_tensor *rope_of_x(ag_graph *g, fd_case *c) { return ex_rope(g, ag_store_find(c->s, "x"), c->base); }

static int check_rope(void)
{
    static const char *const axes[3] = {"b", "t", "d"};
    enum { B = 2, T = 3, D = 4 };
    fd_case c = {.s = ag_store_new(), .f = rope_of_x, .base = 100};
    ag_tensor *x = ag_param(c.s, "x", AG_SHAPE(B, T, D));
    fill(x->data, B * T * D, 12);
    ag_graph *g = ag_graph_new();
    ag_tensor *y = ex_rope(g, x, c.base);
    if (shaped("the output", y, AG_SHAPE(B, T, D))) {
        /* the rotation, and three ways to get it wrong: the other way round,
         * one position late, the frequencies of i instead of 2i */
        double want[B * T * D], back[B * T * D], late[B * T * D], freq[B * T * D];
        double *out[4] = {want, back, late, freq};
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int i = 0; i < D / 2; i++) {
                    const double *p = x->data + (b * T + t) * D + 2 * i;
                    const double angle[4] = {t * pow(c.base, -2.0 * i / D), -t * pow(c.base, -2.0 * i / D),
                                             (t + 1) * pow(c.base, -2.0 * i / D), t * pow(c.base, -1.0 * i / D)};
                    for (int k = 0; k < 4; k++) {
                        out[k][(b * T + t) * D + 2 * i] = p[0] * cos(angle[k]) - p[1] * sin(angle[k]);
                        out[k][(b * T + t) * D + 2 * i + 1] = p[0] * sin(angle[k]) + p[1] * cos(angle[k]);
                    }
                }
        const mistake typical[3] = {
            {"sign?", "each pair turns the other way: y[2i] = x[2i] cos - x[2i+1] sin", back},
            {"off by one in time?", "position t turns by (t + 1) theta_i: the first position, t = 0, is not turned", late},
            {"scale?", "theta_i = base^(-i / D): the exponent is -2i / D, for the pair (2i, 2i + 1)", freq},
        };
        if (report(&(output){.name = "y", .ndim = 3, .shape = y->shape, .axes = axes, .got = y->data, .want = want,
                             .typical = typical, .ntypical = 3}))
            gradcheck("rope", &c, y->shape, y->ndim);
    }
    ag_graph_free(g);
    ag_store_free(c.s);
    return 0;
}

static ag_tensor *smoothed(ag_graph *g, fd_case *c)
{
    return ex_label_smoothing_loss(g, ag_store_find(c->s, "logits"), c->ids, c->eps);
}

static int check_label_smoothing(void)
{
    enum { N = 4, V = 5 };
    static const int targets[N] = {0, 3, 4, 3};
    fd_case c = {.s = ag_store_new(), .f = smoothed, .ids = targets, .eps = 0.1};
    ag_tensor *logits = ag_param(c.s, "logits", AG_SHAPE(N, V));
    fill(logits->data, N * V, 13);
    ag_graph *g = ag_graph_new();
    ag_tensor *got = ex_label_smoothing_loss(g, logits, targets, c.eps);
    ag_tensor *want = ag_cross_entropy(g, logits, targets, -1, c.eps);
    ag_tensor *unsmoothed = ag_cross_entropy(g, logits, targets, -1, 0);
    if (shaped("the loss", got, 0, NULL)) {
        const mistake typical[1] = {{"missing term?", "this is the loss without smoothing: add eps times the mean "
                                                      "over v of -log p[v]", unsmoothed->data}};
        if (report(&(output){.name = "the loss", .got = got->data, .want = want->data, .typical = typical,
                             .ntypical = 1}))
            gradcheck("the loss", &c, NULL, 0);
    }
    ag_graph_free(g);
    ag_store_free(c.s);
    return 0;
}

static ag_tensor *tied(ag_graph *g, fd_case *c) { return ex_tied_logits(g, ag_store_find(c->s, "E"), c->ids, 2, 3); }

static int check_tying(void)
{
    enum { V = 4, C = 3, B = 2, T = 3 };
    static const int ids[B * T] = {0, 2, 2, 3, 1, 0};
    fd_case c = {.s = ag_store_new(), .f = tied, .ids = ids};
    ag_tensor *E = ag_param(c.s, "E", AG_SHAPE(V, C));
    fill(E->data, V * C, 14);
    ag_graph *g = ag_graph_new();
    ag_tensor *y = ex_tied_logits(g, E, ids, B, T);
    if (shaped("the logits", y, AG_SHAPE(B, T, V))) {
        double want[B * T * V] = {0};
        for (int r = 0; r < B * T; r++)
            for (int v = 0; v < V; v++)
                for (int k = 0; k < C; k++) want[r * V + v] += E->data[ids[r] * C + k] * E->data[v * C + k];
        static const char *const axes[3] = {"b", "t", "v"};
        if (report(&(output){.name = "the logits", .ndim = 3, .shape = y->shape, .axes = axes, .got = y->data,
                             .want = want}))
            gradcheck("the tied logits", &c, y->shape, y->ndim);
    }
    ag_graph_free(g);
    ag_store_free(c.s);
    return 0;
}
