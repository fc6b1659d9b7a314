/* tests/bench/gpt.h: section 4 of `make bench` (included by bench.c once,
 * after its functions emit, now, best_time, ratio_cell): the GPT of
 * examples/gpt/ against its PyTorch twin (tests/reference/gpt.py bench),
 * measured in the same run.
 *
 *   - a training step (forward, backward, clip 1 and Adam 1e-3 in one pass: gpt train's) of
 *     examples/gpt's default model: vocab 64, context 32, width 64, 4
 *     heads, GELU MLP 256, 2 pre-norm layers, tied, batch 32 of random
 *     ids; at N > 1 threads the batch is split among N workers
 *     (ag_team_step), as the translator's trainer does;
 *   - greedy generation from a one-token prompt, tokens per second, with
 *     the key/value cache and without (every window recomputed), against
 *     PyTorch's nanoGPT-style generate loop (no cache) and the same loop
 *     with a key/value cache;
 *   - achieved GFLOP/s of the GPT's training step and of the translator's
 *     (translate train's model, a batch of 64 full-length pairs, SGD): the
 *     matrix products' flops (backward = 2 x forward) per second, against
 *     the gemm's best on one core (a 512^3 product), the bound for a step
 *     made of products. */

enum { GPT_V = 64, GPT_T = 32, GPT_C = 64, GPT_H = 4, GPT_F = 256, GPT_L = 2, GPT_B = 32, GPT_PARTS = 8 };

typedef struct gpt_bench {
    ag_store *store;
    ag_gpt net[GPT_PARTS]; /* net[k]: worker k's (net[0]: the model's) */
    ag_graph *g;
    ag_optim *opt;
    ag_team *team;
    int parts;
    int ids[GPT_B * GPT_T], targets[GPT_B * GPT_T];
} gpt_bench;

static const ag_gpt_config gpt_cfg = {.vocab = GPT_V, .context = GPT_T, .hidden = GPT_C, .heads = GPT_H,
                                      .ffn = GPT_F, .layers = GPT_L, .activation = AG_ACT_GELU};

static ag_status gpt_replica(void *ctx, int k, ag_store *s)
{
    return ag_gpt_init(&((gpt_bench *)ctx)->net[k], s, &gpt_cfg, 0);
}

/* Part k of n: rows [k B / n, (k + 1) B / n) of the batch. */
static ag_tensor *gpt_part(void *ctx, ag_graph *g, ag_store *s, int k, int n, double *weight)
{
    (void)s;
    gpt_bench *b = ctx;
    int r0 = GPT_B * k / n, nr = GPT_B * (k + 1) / n - r0;
    *weight = (double)nr / GPT_B;
    size_t at = (size_t)r0 * GPT_T;
    return ag_gpt_loss(g, &b->net[k], b->ids + at, b->targets + at, nr, GPT_T);
}

static void gpt_step(void *p)
{
    gpt_bench *b = p;
    double loss, norm;
    ag_graph_reset(b->g);
    if (ag_team_step(b->team, b->g, b->parts, gpt_part, b, &loss) != AG_OK ||
        ag_optim_step_clip_zero(b->opt, 1.0, &norm) != AG_OK) {
        fprintf(stderr, "bench: GPT step failed: %s %s\n", ag_graph_error(b->g), ag_optim_error(b->opt));
        exit(1);
    }
}

static int gpt_bench_new(gpt_bench *b, int threads)
{
    memset(b, 0, sizeof *b);
    char err[256] = "";
    b->parts = threads < GPT_PARTS ? threads : GPT_PARTS;
    b->store = ag_store_new();
    b->g = ag_graph_new();
    if (!b->store || !b->g || ag_gpt_init(&b->net[0], b->store, &gpt_cfg, 0) != AG_OK) return 1;
    b->opt = ag_adam_new(b->store, 1e-3, 0.9, 0.999, 1e-8, 0, 0);
    b->team = ag_team_new(b->store, b->parts, gpt_replica, b, err, sizeof err);
    if (!b->opt || !b->team) {
        fprintf(stderr, "bench: GPT: %s\n", err);
        return 1;
    }
    ag_rng rng;
    ag_rng_seed(&rng, 0x9e7);
    for (int i = 0; i < GPT_B * GPT_T; i++)
        b->ids[i] = (int)(ag_rng_next(&rng) % GPT_V), b->targets[i] = (int)(ag_rng_next(&rng) % GPT_V);
    return 0;
}

static void gpt_bench_free(gpt_bench *b)
{
    ag_team_free(b->team);
    ag_optim_free(b->opt);
    for (int k = 0; k < GPT_PARTS; k++) ag_gpt_free(&b->net[k]);
    ag_graph_free(b->g);
    ag_store_free(b->store);
}

/* The PyTorch side at `threads`: step ms and generation tok/s for 31 and
 * 200 new tokens, without and with a key/value cache; 0 when it did not
 * run. */
typedef struct torch_gpt {
    double step_ms, gen[2], gen_cached[2]; /* 31 and 200 new tokens */
} torch_gpt;

static torch_gpt torch_gpt_run(const char *python, int threads, double budget)
{
    torch_gpt r = {0};
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "OMP_NUM_THREADS=%d OPENBLAS_NUM_THREADS=%d MKL_NUM_THREADS=%d %s tests/reference/gpt.py bench "
             "--threads %d --seconds %g --new 31,200",
             threads, threads, threads, python, threads, 5 * budget);
    FILE *f = popen(cmd, "r");
    char line[1024] = "";
    if (!f) return r;
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    pclose(f);
    const char *p, *key[2] = {"\"31\":", "\"200\":"};
    if ((p = strstr(line, "\"step_ms\":"))) r.step_ms = strtod(p + 10, NULL);
    const char *plain = strstr(line, "\"generate_tok_s\":"), *cached = strstr(line, "\"generate_cached_tok_s\":");
    for (int i = 0; i < 2; i++) {
        if (plain && (p = strstr(plain, key[i]))) r.gen[i] = strtod(p + strlen(key[i]), NULL);
        if (cached && (p = strstr(cached, key[i]))) r.gen_cached[i] = strtod(p + strlen(key[i]), NULL);
    }
    return r;
}

typedef struct gen_ctx {
    ag_gpt *m;
    ag_graph *g;
    int n_new, no_cache;
    int out[256];
} gen_ctx;

static void gpt_generate(void *p)
{
    gen_ctx *c = p;
    ag_sample_opts o = {.temperature = 0, .no_cache = c->no_cache};
    if (ag_gpt_sample(c->g, c->m, (int[]){0}, 1, c->n_new, &o, c->out) != AG_OK) {
        fprintf(stderr, "bench: GPT generation failed: %s\n", ag_graph_error(c->g));
        exit(1);
    }
}

/* Tokens per second of greedy generation of n_new tokens (one thread). */
static double gpt_gen_rate(ag_gpt *m, int n_new, int no_cache, double budget)
{
    gen_ctx c = {.m = m, .g = ag_graph_new(), .n_new = n_new, .no_cache = no_cache};
    double s = best_time(gpt_generate, &c, budget);
    ag_graph_free(c.g);
    return n_new / s;
}

/* The flops of the step's matrix products: per layer q, k, v, o (4 B T C^2
 * multiply-adds), Q K^T and P V (2 B T^2 C), the MLP (2 B T C F); the
 * tied logits (B T C V); backward twice the forward's. */
static double gpt_step_flops(void)
{
    double B = GPT_B, T = GPT_T, C = GPT_C, F = GPT_F, V = GPT_V;
    double layer = 4 * B * T * C * C + 2 * B * T * T * C + 2 * B * T * C * F;
    return 3 * 2 * (GPT_L * layer + B * T * C * V);
}

typedef struct peak_ctx {
    float *a, *b, *c;
} peak_ctx;

static void peak_gemm(void *p)
{
    peak_ctx *k = p;
    ag__gemm(0, 0, 512, 512, 512, k->a, 512, k->b, 512, 0, k->c, 512);
}

/* GFLOP/s of the gemm on one core, a 512^3 product: the bound. */
static double gemm_peak(double budget)
{
    ag_set_threads(1);
    peak_ctx k = {malloc(512 * 512 * sizeof(float)), malloc(512 * 512 * sizeof(float)),
                  malloc(512 * 512 * sizeof(float))};
    if (!k.a || !k.b || !k.c) return 0;
    for (int i = 0; i < 512 * 512; i++) k.a[i] = (float)(i % 7) / 7, k.b[i] = (float)(i % 5) / 5;
    double s = best_time(peak_gemm, &k, budget);
    free(k.a), free(k.b), free(k.c);
    return 2.0 * 512 * 512 * 512 / s / 1e9;
}

typedef struct s2s_ctx {
    ag_store *store;
    ag_seq2seq net;
    ag_graph *g;
    ag_optim *opt;
    int src[BATCH * MAX_LEN], valid[BATCH], tin[BATCH * MAX_LEN], tout[BATCH * MAX_LEN];
} s2s_ctx;

static void s2s_step(void *p)
{
    s2s_ctx *c = p;
    double norm;
    ag_graph_reset(c->g);
    ag_tensor *loss = ag_seq2seq_loss(c->g, &c->net, c->src, c->valid, c->tin, c->tout, BATCH, MAX_LEN, MAX_LEN);
    if (ag_backward(c->g, loss) != AG_OK || ag_clip_grad_norm(c->store, CLIP, &norm) != AG_OK ||
        ag_optim_step(c->opt) != AG_OK) {
        fprintf(stderr, "bench: translator step failed: %s\n", ag_graph_error(c->g));
        exit(1);
    }
    ag_store_zero_grad(c->store);
}

/* The translator's step on a full batch (B pairs of S = T = MAX_LEN
 * tokens), one thread: GFLOP/s of its products, *flops set.  Encoder layer:
 * q, k, v, o (4 B S C^2 multiply-adds), Q K^T and P V (2 B S^2 C), the FFN
 * (2 B S C F); decoder layer: self-attention (4 B T C^2 + 2 B T^2 C), the
 * cross-attention's q, o (2 B T C^2), k, v of the encoder output
 * (2 B S C^2), its products (2 B T S C), the FFN (2 B T C F); the output
 * layer (B T C V); backward twice the forward's. */
static double translator_gflops(const char *data_path, double budget, double *flops)
{
    dataset d = {0};
    int sv = 0, tv = 0;
    *flops = 0;
    if (load_data(data_path, &d, &sv, &tv)) return 0;
    dataset_free(&d);
    ag_set_threads(1);
    s2s_ctx *c = calloc(1, sizeof *c);
    /* translate train's default model: pre-norm (its norms are not products) */
    ag_seq2seq_config cfg = {sv, tv, HIDDEN, HEADS, FFN, LAYERS, MAX_LEN, DROPOUT, AG_SEQ2SEQ_INIT_SCALED, 1, 0};
    if (!c || !(c->store = ag_store_new()) || !(c->g = ag_graph_new()) ||
        ag_seq2seq_init(&c->net, c->store, &cfg, 0) != AG_OK || !(c->opt = ag_sgd_new(c->store, LR, MOMENTUM, 0, 1)))
        return 0;
    for (int i = 0; i < BATCH * MAX_LEN; i++)
        c->src[i] = 4 + i % (sv - 4), c->tin[i] = 4 + i % (tv - 4), c->tout[i] = 4 + (i + 1) % (tv - 4);
    for (int b = 0; b < BATCH; b++) c->valid[b] = MAX_LEN;
    double s = best_time(s2s_step, c, 5 * budget);
    double B = BATCH, S = MAX_LEN, T = MAX_LEN, C = HIDDEN, F = FFN, V = tv;
    double enc = 4 * B * S * C * C + 2 * B * S * S * C + 2 * B * S * C * F;
    double dec = 4 * B * T * C * C + 2 * B * T * T * C + 2 * B * T * C * C + 2 * B * S * C * C + 2 * B * T * S * C +
                 2 * B * T * C * F;
    *flops = 3 * 2 * (LAYERS * (enc + dec) + B * T * C * V);
    ag_optim_free(c->opt);
    ag_seq2seq_free(&c->net);
    ag_graph_free(c->g);
    ag_store_free(c->store);
    free(c);
    return *flops / s / 1e9;
}

/* The best of what each side has measured so far (shortest times, highest
 * rates): rounds alternate the two programs, so that neither gets only the
 * quiet or only the busy moments of a shared machine. */
typedef struct gpt_results {
    torch_gpt ref[8];
    double step[8];         /* attograd's seconds per step at threads[t] */
    double gen[2], gen_no[2]; /* tokens/s, with and without the cache */
} gpt_results;

static double keep_min(double old, double x) { return x > 0 && (old == 0 || x < old) ? x : old; }
static double keep_max(double old, double x) { return x > old ? x : old; }

static int gpt_round(gpt_results *r, const int *threads, int nthreads, const char *python, int have_ref,
                     double budget, ag_gpt *m)
{
    for (int t = 0; t < nthreads && t < 8; t++) {
        if (!have_ref) break;
        torch_gpt x = torch_gpt_run(python, threads[t], budget);
        r->ref[t].step_ms = keep_min(r->ref[t].step_ms, x.step_ms);
        for (int i = 0; i < 2; i++)
            r->ref[t].gen[i] = keep_max(r->ref[t].gen[i], x.gen[i]),
            r->ref[t].gen_cached[i] = keep_max(r->ref[t].gen_cached[i], x.gen_cached[i]);
    }
    for (int t = 0; t < nthreads && t < 8; t++) {
        ag_set_threads(threads[t]);
        gpt_bench b;
        if (gpt_bench_new(&b, threads[t])) return 1;
        r->step[t] = keep_min(r->step[t], best_time(gpt_step, &b, 5 * budget));
        gpt_bench_free(&b);
    }
    ag_set_threads(1);
    const int lens[2] = {GPT_T - 1, 200};
    for (int i = 0; i < 2; i++) {
        r->gen[i] = keep_max(r->gen[i], gpt_gen_rate(m, lens[i], 0, 2 * budget));
        r->gen_no[i] = keep_max(r->gen_no[i], gpt_gen_rate(m, lens[i], 1, 2 * budget));
    }
    return 0;
}

static void bench_gpt(const int *threads, int nthreads, const char *python, int have_torch, double budget,
                      const char *data_path)
{
#ifdef AG_DOUBLE
    (void)threads, (void)nthreads, (void)python, (void)have_torch, (void)budget, (void)data_path;
    emit("\n### 5. GPT: float builds only\n");
#else
    enum { ROUNDS = 2 };
    int have_ref = have_torch && access("tests/reference/gpt.py", R_OK) == 0;
    emit("\n### 5. GPT (examples/gpt): training step and generation\n\n");
    emit("vocab %d, context %d, width %d, %d heads, GELU (erf) MLP %d, %d pre-norm layers, tied, batch %d of "
         "random ids; Adam lr 1e-3, clip 1.  At N threads attograd splits the batch among N workers "
         "(ag_team_step); PyTorch splits each op.  PyTorch: %s.  %d rounds, each PyTorch then attograd; each "
         "figure is the best over the rounds.\n\n",
         GPT_V, GPT_T, GPT_C, GPT_H, GPT_F, GPT_L, GPT_B,
         have_ref ? "tests/reference/gpt.py bench, same model and step, measured in the same run"
                  : "not available, attograd alone",
         ROUNDS);
    ag_store *s = ag_store_new();
    ag_gpt m;
    gpt_results r = {0};
    if (!s || ag_gpt_init(&m, s, &gpt_cfg, 0) != AG_OK) {
        emit("(the model could not be built: skipped)\n");
        return;
    }
    for (int k = 0; k < ROUNDS; k++)
        if (gpt_round(&r, threads, nthreads, python, have_ref, budget, &m)) {
            emit("(the model could not be built: skipped)\n");
            return;
        }
    double ref_best = 0;
    for (int t = 0; t < nthreads && t < 8; t++) ref_best = keep_min(ref_best, r.ref[t].step_ms);
    double peak = gemm_peak(budget), flops = gpt_step_flops(), step1 = r.step[0];
    emit("| threads | attograd ms/step | PyTorch ms/step, same threads | speed-up | vs PyTorch's best (%.2f ms) | "
         "target | attograd GFLOP/s (of the 1-core gemm peak %.1f) |\n", ref_best, peak);
    emit("|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int t = 0; t < nthreads && t < 8; t++) {
        double sec = r.step[t];
        char same[32], best[32];
        ratio_cell(same, sizeof same, r.ref[t].step_ms > 0 ? r.ref[t].step_ms / (1e3 * sec) : 0);
        ratio_cell(best, sizeof best, ref_best > 0 ? ref_best / (1e3 * sec) : 0);
        emit("| %d | %.2f | %.2f | %s | %s | %s | %.2f (%.0f%%) |\n", threads[t], 1e3 * sec, r.ref[t].step_ms, same,
             best, threads[t] == 1 ? "3x" : "4x vs best", flops / sec / 1e9, 100 * flops / sec / 1e9 / peak);
    }
    double tflops, tgf = translator_gflops(data_path, budget, &tflops);
    emit("\nAchieved GFLOP/s at one thread (matrix products' flops, backward = 2 x forward, per second of a whole "
         "step), against the gemm's one-core peak of %.1f GFLOP/s (a 512^3 product):\n\n", peak);
    emit("| step | MFLOP | GFLOP/s | of the peak |\n|---|---:|---:|---:|\n");
    emit("| GPT (above), batch %d | %.1f | %.2f | %.0f%% |\n", GPT_B, flops / 1e6, flops / step1 / 1e9,
         100 * flops / step1 / 1e9 / peak);
    if (tgf > 0)
        emit("| translator (translate train's model), %d full pairs of %d + %d tokens, SGD | %.1f | %.2f | %.0f%% |\n",
             BATCH, MAX_LEN, MAX_LEN, tflops / 1e6, tgf, 100 * tgf / peak);

    emit("\nGreedy generation from a one-token prompt, one thread, tokens per second.  attograd: ag_gpt_sample "
         "with its key/value cache (past the context of %d the cropped window is recomputed, as without it) and "
         "with no_cache = 1.  PyTorch: nanoGPT's generate loop under no_grad (the whole cropped window per "
         "token, no cache), and the same loop with a key/value cache kept as attograd's (tests/reference/gpt.py "
         "generate_cached, the same tokens).\n\n", GPT_T);
    emit("| new tokens | attograd, cache | attograd, no cache | PyTorch generate | speed-up (cache) | target | "
         "PyTorch, cached | speed-up against it |\n");
    emit("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    const int lens[2] = {GPT_T - 1, 200};
    for (int i = 0; i < 2; i++) {
        double torch = r.ref[0].gen[i], cached = r.ref[0].gen_cached[i];
        char sp[32], spc[32];
        ratio_cell(sp, sizeof sp, torch > 0 ? r.gen[i] / torch : 0);
        ratio_cell(spc, sizeof spc, cached > 0 ? r.gen[i] / cached : 0);
        emit("| %d%s | %.0f | %.0f | %.0f | %s | 5x | %.0f | %s |\n", lens[i],
             i == 0 ? " (up to the context)" : " (sliding)", r.gen[i], r.gen_no[i], torch, sp, cached, spc);
    }
    ag_gpt_free(&m);
    ag_store_free(s);
#endif
}
