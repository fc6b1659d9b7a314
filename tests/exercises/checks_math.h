/* checks_math.h: the checks of exercises 2, 3, 7, 9 and 10, which compute
 * by hand: against the library's own gradients, attention and schedules
 * (included by check.c once). */

/* The graph's gradients of L = sum(y * w) for y = layer_norm(x, gain, bias). */
static int check_layer_norm(void)
{
    enum { N = 3, C = 5 };
    const double eps = 1e-5;
    double w[N * C], dx[N * C], dgain[C], dbias[C];
    ag_graph *g = ag_graph_new();
    ag_tensor *x = leaf(g, AG_SHAPE(N, C), 1), *gain = leaf(g, AG_SHAPE(C), 2), *bias = leaf(g, AG_SHAPE(C), 3);
    ag_tensor *wt = leaf(g, AG_SHAPE(N, C), 4);
    ag_set_requires_grad(x, 1), ag_set_requires_grad(gain, 1), ag_set_requires_grad(bias, 1);
    memcpy(w, wt->data, sizeof w);
    ag_backward(g, ag_sum_all(g, ag_mul(g, ag_layer_norm(g, x, gain, bias, eps), wt)));
    memset(dx, 0, sizeof dx), memset(dgain, 0, sizeof dgain), memset(dbias, 0, sizeof dbias);
    ex_layer_norm_backward(N, C, x->data, gain->data, eps, w, dx, dgain, dbias);
    (void)(close_all("dx", dx, x->grad, N * C) && close_all("dgain", dgain, gain->grad, C) &&
        close_all("dbias", dbias, bias->grad, C));
    ag_graph_free(g);
    return 0;
}

/* The graph's gradients of L = sum(attention(q, k, v) * w). */
static int check_attention(void)
{
    enum { T = 3, S = 4, D = 2 };
    double dq[T * D] = {0}, dk[S * D] = {0}, dv[S * D] = {0};
    ag_graph *g = ag_graph_new();
    ag_tensor *q = leaf(g, AG_SHAPE(T, D), 5), *k = leaf(g, AG_SHAPE(S, D), 6), *v = leaf(g, AG_SHAPE(S, D), 7);
    ag_tensor *w = leaf(g, AG_SHAPE(T, D), 8);
    ag_set_requires_grad(q, 1), ag_set_requires_grad(k, 1), ag_set_requires_grad(v, 1);
    ag_backward(g, ag_sum_all(g, ag_mul(g, ag_attention(g, q, k, v, NULL, 0, 0, NULL), w)));
    ex_attention_backward(T, S, D, q->data, k->data, v->data, w->data, dq, dk, dv);
    (void)(close_all("dq", dq, q->grad, T * D) && close_all("dk", dk, k->grad, S * D) && close_all("dv", dv, v->grad, S * D));
    ag_graph_free(g);
    return 0;
}

/* Each step's output against causal attention over the whole sequence. */
static int check_kv_cache(void)
{
    enum { T = 5, D = 4 };
    double kc[T * D] = {0}, vc[T * D] = {0}, out[T * D] = {0};
    ag_graph *g = ag_graph_new();
    ag_tensor *q = leaf(g, AG_SHAPE(T, D), 9), *k = leaf(g, AG_SHAPE(T, D), 10), *v = leaf(g, AG_SHAPE(T, D), 11);
    ag_tensor *want = ag_attention(g, q, k, v, ag_causal_mask(g, T, T), AG_MASK_NEG_INF, 0, NULL);
    for (int t = 0; t < T; t++)
        ex_cached_attention(D, q->data + t * D, k->data + t * D, v->data + t * D, kc, vc, t, out + t * D);
    (void)(close_all("the cache's keys", kc, k->data, T * D) && close_all("the cache's values", vc, v->data, T * D) &&
        close_all("out", out, want->data, T * D));
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
        if (CHECK(fabs(got - want) <= 1e-12 * want, "the norm is %.10g, should be %.10g", got, want))
            for (int i = 0; i < 2; i++)
                if (!close_all(names[i], ag_store_at(a, i)->grad, ag_store_at(b, i)->grad, sizes[i])) break;
        ag_store_free(a);
        ag_store_free(b);
    }
    return 0;
}

/* Against ag_lr_schedule's "cosine" at every step of two runs. */
static int check_warmup(void)
{
    const long runs[2][2] = {{10, 50}, {0, 20}}; /* warmup, total */
    for (int r = 0; r < 2; r++)
        for (long step = 1; step <= runs[r][1]; step++) {
            double got = ex_warmup_cosine(3e-4, step, runs[r][0], runs[r][1]);
            double want = ag_lr_schedule(3e-4, step, runs[r][0], runs[r][1], "cosine");
            if (!CHECK(fabs(got - want) <= 1e-15, "warmup %ld, total %ld, step %ld: %.10g, should be %.10g",
                       runs[r][0], runs[r][1], step, got, want))
                return 0;
        }
    return 0;
}
