/* checks_math.h: the checks of exercises 2, 3, 7, 9, 10 and 11, which
 * compute by hand: against the library's own gradients, attention and
 * schedules, and the tour's numbers (included by check.c once). */

/* The graph's gradients of L = sum(y * w) for y = layer_norm(x, gain, bias). */
static int check_layer_norm(void)
{
    static const char *const axes[2] = {"n", "c"};
    enum { N = 3, C = 5 };
    const double eps = 1e-5;
    double w[N * C], dx[N * C], dgain[C], dbias[C];
    ag_graph *g = ag_graph_new();
    ag_tensor *x = leaf(g, AG_SHAPE(N, C), 1), *gain = leaf(g, AG_SHAPE(C), 2), *bias = leaf(g, AG_SHAPE(C), 3);
    ag_tensor *wt = leaf(g, AG_SHAPE(N, C), 4);
    ag_set_requires_grad(x, 1), ag_set_requires_grad(gain, 1), ag_set_requires_grad(bias, 1);
    memcpy(w, wt->data, sizeof w);
    ag_backward(g, ag_sum_all(g, ag_mul(g, ag_layer_norm(g, x, gain, bias, eps), wt)));
    poison(dx, N * C), poison(dgain, C), poison(dbias, C);
    ex_layer_norm_backward(N, C, x->data, gain->data, eps, w, dx, dgain, dbias);
    int rx = report(&(output){.name = "dx", .ndim = 2, .shape = x->shape, .axes = axes, .got = dx, .want = x->grad,
                              .nan_hint = poisoned_hint});
    int rg = report(&(output){.name = "dgain", .ndim = 1, .shape = gain->shape, .axes = axes + 1, .got = dgain,
                              .want = gain->grad, .nan_hint = poisoned_hint});
    int rb = report(&(output){.name = "dbias", .ndim = 1, .shape = bias->shape, .axes = axes + 1, .got = dbias,
                              .want = bias->grad, .nan_hint = poisoned_hint});
    if (!rx && rg && rb && written(dx, N * C))
        printf("  where to look: dgain = sum(dy xhat) is right, so xhat is: dx has three paths, directly through "
               "xhat, through the row's mean and through its variance\n");
    ag_graph_free(g);
    return 0;
}

/* The graph's gradients of L = sum(attention(q, k, v) * w). */
static int check_attention(void)
{
    static const char *const q_axes[2] = {"t", "d"}, *const kv_axes[2] = {"s", "d"};
    enum { T = 3, S = 4, D = 2 };
    double dq[T * D], dk[S * D], dv[S * D];
    ag_graph *g = ag_graph_new();
    ag_tensor *q = leaf(g, AG_SHAPE(T, D), 5), *k = leaf(g, AG_SHAPE(S, D), 6), *v = leaf(g, AG_SHAPE(S, D), 7);
    ag_tensor *w = leaf(g, AG_SHAPE(T, D), 8);
    ag_set_requires_grad(q, 1), ag_set_requires_grad(k, 1), ag_set_requires_grad(v, 1);
    ag_backward(g, ag_sum_all(g, ag_mul(g, ag_attention(g, q, k, v, NULL, 0, 0, NULL), w)));
    poison(dq, T * D), poison(dk, S * D), poison(dv, S * D);
    ex_attention_backward(T, S, D, q->data, k->data, v->data, w->data, dq, dk, dv);
    int rq = report(&(output){.name = "dq", .ndim = 2, .shape = q->shape, .axes = q_axes, .got = dq,
                              .want = q->grad, .nan_hint = poisoned_hint});
    int rk = report(&(output){.name = "dk", .ndim = 2, .shape = k->shape, .axes = kv_axes, .got = dk,
                              .want = k->grad, .nan_hint = poisoned_hint});
    int rv = report(&(output){.name = "dv", .ndim = 2, .shape = v->shape, .axes = kv_axes, .got = dv,
                              .want = v->grad, .nan_hint = poisoned_hint});
    /* where to look, once every output has been written (a stub's are not) */
    if (!written(dq, T * D) || !written(dk, S * D) || !written(dv, S * D)) rq = rk = rv = 1;
    if (rv && !(rq && rk))
        printf("  where to look: dv = P^T dout is right, so P is: the mistake is after it, %s\n",
               rq   ? "in dk = dS^T q / sqrt(D) (dq, from the same dS, is right)"
               : rk ? "in dq = dS k / sqrt(D) (dk, from the same dS, is right)"
                    : "in what dq and dk share: dS = P * (dP - rowsum(dP * P)), or the 1/sqrt(D) both carry");
    else if (!rv && rq && rk)
        printf("  where to look: dq and dk are right, so P and dS are: dv = P^T dout, summed over the queries t\n");
    else if (!rv)
        printf("  where to look: dv = P^T dout is wrong too: check P itself first (the scale 1/sqrt(D), the row's "
               "maximum, the division by the row's sum)\n");
    ag_graph_free(g);
    return 0;
}

/* Why out at decoding step t is what it is. */
static void cache_why(const int *idx, const void *ctx, char *buf, size_t len)
{
    (void)ctx;
    snprintf(buf, len, "at decoding step %d (len %d) the new token's key joins the cache as row %d, and q_%d attends "
                       "over rows 0..%d: %d key%s, the new one included", idx[0], idx[0], idx[0], idx[0], idx[0],
             idx[0] + 1, idx[0] ? "s" : "");
}

/* Each step's output against causal attention over the whole sequence. */
static int check_kv_cache(void)
{
    static const char *const axes[2] = {"step", "d"};
    enum { T = 5, D = 4 };
    double kc[T * D], vc[T * D], out[T * D];
    poison(kc, T * D), poison(vc, T * D), poison(out, T * D);
    ag_graph *g = ag_graph_new();
    ag_tensor *q = leaf(g, AG_SHAPE(T, D), 9), *k = leaf(g, AG_SHAPE(T, D), 10), *v = leaf(g, AG_SHAPE(T, D), 11);
    ag_tensor *want = ag_attention(g, q, k, v, ag_causal_mask(g, T, T), AG_MASK_NEG_INF, 0, NULL);
    /* the new key left out: each query over the rows before it (none at step 0) */
    ag_tensor *before = ag_tensor_new(g, AG_SHAPE(T, T));
    for (int t = 0; t < T; t++)
        for (int s = 0; s < t; s++) before->data[t * T + s] = 1;
    ag_tensor *without_new = ag_attention(g, q, k, v, before, AG_MASK_NEG_INF, 0, NULL);
    for (int t = 0; t < T; t++)
        ex_cached_attention(D, q->data + t * D, k->data + t * D, v->data + t * D, kc, vc, t, out + t * D);
    static const char *const cache_hint = "the cache came filled with NaN: row len must be written at step len";
    report(&(output){.name = "the cache's keys", .ndim = 2, .shape = k->shape, .axes = axes, .got = kc,
                     .want = k->data, .nan_hint = cache_hint});
    report(&(output){.name = "the cache's values", .ndim = 2, .shape = v->shape, .axes = axes, .got = vc,
                     .want = v->data, .nan_hint = cache_hint});
    const mistake typical[1] = {{"off by one in time?", "each query attends over the rows before it only: the new "
                                                        "key and value (row len) belong in the sum, s = 0..len",
                                 without_new->data}};
    report(&(output){.name = "out", .ndim = 2, .shape = q->shape, .axes = axes, .got = out, .want = want->data,
                     .typical = typical, .ntypical = 1, .why = cache_why,
                     .nan_hint = "rows of the cache not written yet hold NaN, and so does out before you set it: "
                                 "at step len read rows 0..len only, after writing row len, and set out before "
                                 "adding to it"});
    ag_graph_free(g);
    return 0;
}

/* Against ag_clip_grad_norm on a twin store, below and above the limit. */
static int check_clip(void)
{
    for (int round = 0; round < 2; round++) {
        ag_store *a = ag_store_new(), *b = ag_store_new();
        const char *names[2] = {"w", "b"};
        const int sizes[2] = {6, 3};
        for (int i = 0; i < 2; i++) {
            ag_tensor *pa = ag_param(a, names[i], AG_SHAPE(sizes[i])), *pb = ag_param(b, names[i], AG_SHAPE(sizes[i]));
            fill(pa->grad, sizes[i], 20 + (uint64_t)i);
            memcpy(pb->grad, pa->grad, (size_t)sizes[i] * sizeof *pa->grad);
        }
        double max_norm = round == 0 ? 0.5 : 100, want, got = ex_clip_grad_norm(a, max_norm);
        ag_clip_grad_norm(b, max_norm, &want);
        char name[96];
        snprintf(name, sizeof name, "max_norm %g (%s): the norm", max_norm, round == 0 ? "clips" : "leaves as is");
        report(&(output){.name = name, .got = &got, .want = &want, .rel = 1e-12});
        for (int i = 0; i < 2; i++) {
            snprintf(name, sizeof name, "max_norm %g: %s's gradient", max_norm, names[i]);
            report(&(output){.name = name, .ndim = 1, .shape = sizes + i, .got = ag_store_at(a, i)->grad,
                             .want = ag_store_at(b, i)->grad});
        }
        ag_store_free(a);
        ag_store_free(b);
    }
    return 0;
}

/* Why the rate at index i (step i + 1) is what it is. */
static void warmup_why(const int *idx, const void *ctx, char *buf, size_t len)
{
    const long *run = ctx, step = idx[0] + 1, warmup = run[0], total = run[1];
    if (step <= warmup)
        snprintf(buf, len, "i %d is step %ld (steps count from 1), in the warmup: base_lr * %ld / %ld", idx[0], step,
                 step, warmup);
    else
        snprintf(buf, len, "i %d is step %ld (steps count from 1), after the warmup of %ld: p = (%ld - %ld) / "
                           "(%ld - %ld), base_lr (1 + cos(pi p)) / 2", idx[0], step, warmup, step, warmup, total, warmup);
}

/* Against ag_lr_schedule's "cosine" at every step of two runs. */
static int check_warmup(void)
{
    static const long runs[2][2] = {{10, 50}, {0, 20}}; /* warmup, total */
    for (int r = 0; r < 2; r++) {
        double got[50], want[50];
        for (long step = 1; step <= runs[r][1]; step++) {
            got[step - 1] = ex_warmup_cosine(3e-4, step, runs[r][0], runs[r][1]);
            want[step - 1] = ag_lr_schedule(3e-4, step, runs[r][0], runs[r][1], "cosine");
        }
        char name[64];
        const int n = (int)runs[r][1];
        snprintf(name, sizeof name, "the rates (warmup %ld, total %ld)", runs[r][0], runs[r][1]);
        static const char *const axes[1] = {"i"};
        report(&(output){.name = name, .ndim = 1, .shape = &n, .axes = axes, .got = got, .want = want, .abs = 1e-15,
                         .why = warmup_why, .ctx = runs[r]});
    }
    return 0;
}

/* The tour's four tokens, each seeing itself and the token before it:
 * the weights against softmax(mask(X X^T / sqrt(3))) computed here. */
static int check_window(void)
{
    static const char *const axes[2] = {"t", "s"};
    enum { T = 4, C = 3 };
    static const double X[T * C] = {1, 0, 1, 0, 2, 0, 1, 1, 0, 0, 1, 2}; /* the tour's X (attention_demo, section 3) */
    const int shape[2] = {T, T};
    /* the window, and three ways to get it wrong: without the scale,
     * the causal mask instead of the window, the window one step early */
    double want[T * T], unscaled[T * T], causal[T * T], early[T * T];
    double *out[4] = {want, unscaled, causal, early};
    for (int k = 0; k < 4; k++)
        for (int t = 0; t < T; t++) {
            double z[T], max = -INFINITY, sum = 0;
            for (int s = 0; s < T; s++) {
                int seen = k == 2 ? s <= t : k == 3 ? (s == t - 1 || s == t - 2 || (t == 0 && s == 0))
                                                    : (s == t - 1 || s == t);
                z[s] = -INFINITY;
                if (seen) {
                    z[s] = 0;
                    for (int c = 0; c < C; c++) z[s] += X[t * C + c] * X[s * C + c];
                    if (k != 1) z[s] /= sqrt((double)C);
                }
                max = z[s] > max ? z[s] : max;
            }
            for (int s = 0; s < T; s++) sum += z[s] = exp(z[s] - max);
            for (int s = 0; s < T; s++) out[k][t * T + s] = z[s] / sum;
        }
    const mistake typical[3] = {
        {"scale?", "these are the weights of the unscaled scores Q K^T: divide them by sqrt(D) = sqrt(3) first",
         unscaled},
        {"missing term?", "this is the causal mask: every key s <= t; the window keeps only s = t - 1 and s = t",
         causal},
        {"off by one in time?", "keys t - 2 and t - 1: a token sees itself (s = t) and the one before", early},
    };
    report(&(output){.name = "P", .ndim = 2, .shape = shape, .axes = axes, .got = ex_window_weights(), .want = want,
                     .abs = 1e-4, .typical = typical, .ntypical = 3});
    return 0;
}
