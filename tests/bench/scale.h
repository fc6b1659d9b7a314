/* tests/bench/scale.h: the scale section of `make bench` (`build/bench
 * --only scale`, or `make bench-scale`; included by bench.c once, after
 * its functions emit, now, best_time, ratio_cell, gemm_peak): the GPT's
 * training step (ag_gpt through the public API: forward, backward, clip 1,
 * Adam) from the toy up to GPT-2 small's body, against the PyTorch twin
 * (tests/reference/gpt.py bench, the same model and step) in the same run.
 *
 *   S   examples/gpt's model: C 64, L 2, H 4, F 256, T 32, B 32, V 64
 *   M   C 256, L 4, H 8, F 1024, T 128, B 16, V 65
 *   XL  GPT-2 small's body: C 768, L 12, H 12, F 3072, T 128, B 4, V 65
 *
 * Random ids; at N threads attograd splits the batch among N workers
 * (ag_team_step), PyTorch splits each op.  `--loop plain` runs instead
 * the loop a PyTorch user writes (ag_store_zero_grad, ag_gpt_loss,
 * ag_backward, ag_clip_grad_norm, ag_optim_step; one graph, each op on
 * the threads) where the default is the fused end of step
 * (ag_optim_step_clip_zero).  Each size runs in a process of
 * its own, so that its peak resident memory (getrusage's ru_maxrss, of
 * the whole process: weights, Adam's moments, the arena) is its own. */

typedef struct scale_size {
    const char *name;
    int V, T, C, L, H, F, B;
} scale_size;

static const scale_size scale_sizes[] = {
    {"S", 64, 32, 64, 2, 4, 256, 32},
    {"M", 65, 128, 256, 4, 8, 1024, 16},
    {"XL", 65, 128, 768, 12, 12, 3072, 4},
};
enum { SCALE_PARTS = 8 };
static int scale_plain; /* --loop plain: the loop a PyTorch user writes */

typedef struct scale_run {
    scale_size z;
    ag_gpt_config cfg;
    ag_store *store;
    ag_gpt net[SCALE_PARTS];
    ag_graph *g;
    ag_optim *opt;
    ag_team *team;
    int parts, *ids, *targets;
} scale_run;

/* The matrix products' flops of one training step: per layer the q, k, v
 * and output projections (4 B T C^2 multiply-adds), Q K^T and P V
 * (2 B T^2 C), the MLP (2 B T C F); the tied output layer (B T C V); a
 * multiply-add is 2 flops and the backward twice the forward. */
static double scale_flops(const scale_size *z)
{
    double B = z->B, T = z->T, C = z->C, F = z->F, V = z->V;
    double layer = 4 * B * T * C * C + 2 * B * T * T * C + 2 * B * T * C * F;
    return 3 * 2 * (z->L * layer + B * T * C * V);
}

static ag_status scale_replica(void *ctx, int k, ag_store *s)
{
    scale_run *r = ctx;
    return ag_gpt_init(&r->net[k], s, &r->cfg, 0);
}

static ag_tensor *scale_part(void *ctx, ag_graph *g, ag_store *s, int k, int n, double *weight)
{
    (void)s;
    scale_run *r = ctx;
    int B = r->z.B, r0 = B * k / n, nr = B * (k + 1) / n - r0;
    *weight = (double)nr / B;
    size_t at = (size_t)r0 * (size_t)r->z.T;
    return ag_gpt_loss(g, &r->net[k], r->ids + at, r->targets + at, nr, r->z.T);
}

/* The plain loop: zero the gradients, forward, backward, clip, Adam. */
static ag_status plain_step(scale_run *r)
{
    double norm;
    ag_store_zero_grad(r->store);
    ag_tensor *loss = ag_gpt_loss(r->g, &r->net[0], r->ids, r->targets, r->z.B, r->z.T);
    if (!loss || ag_backward(r->g, loss) != AG_OK) return AG_ERR_STATE;
    if (ag_clip_grad_norm(r->store, 1.0, &norm) != AG_OK) return AG_ERR_NUMERIC;
    return ag_optim_step(r->opt);
}

static void scale_step(void *p)
{
    scale_run *r = p;
    double loss, norm;
    ag_graph_reset(r->g);
    if (scale_plain ? plain_step(r) != AG_OK
                    : ag_team_step(r->team, r->g, r->parts, scale_part, r, &loss) != AG_OK ||
                          ag_optim_step_clip_zero(r->opt, 1.0, &norm) != AG_OK) {
        fprintf(stderr, "bench: scale step failed: %s %s\n", ag_graph_error(r->g), ag_optim_error(r->opt));
        exit(1);
    }
}

/* Bytes one training forward takes of the arena: the values and the state
 * the backward reads (intermediates' gradients, not kept, come and go). */
static double scale_forward_bytes(scale_run *r)
{
    ag_graph_reset(r->g);
    size_t before = ag_graph_arena_used(r->g);
    if (!ag_gpt_loss(r->g, &r->net[0], r->ids, r->targets, r->z.B, r->z.T)) return 0;
    return (double)(ag_graph_arena_used(r->g) - before);
}

/* In this (child) process: seconds per step at `threads`, and at one
 * thread the bytes of one forward (*act).  0 on failure. */
static double scale_time(const scale_size *z, int threads, double budget, double *act)
{
    static scale_run r; /* the child's: never freed, the process ends */
    char err[256] = "";
    r.z = *z;
    r.cfg = (ag_gpt_config){.vocab = z->V, .context = z->T, .hidden = z->C, .heads = z->H, .ffn = z->F,
                            .layers = z->L, .activation = AG_ACT_GELU};
    r.parts = scale_plain ? 1 : threads < SCALE_PARTS ? threads : SCALE_PARTS;
    r.store = ag_store_new(), r.g = ag_graph_new(); /* intermediates' gradients not kept: the default */
    r.ids = malloc((size_t)z->B * (size_t)z->T * sizeof *r.ids);
    r.targets = malloc((size_t)z->B * (size_t)z->T * sizeof *r.targets);
    if (!r.store || !r.g || !r.ids || !r.targets || ag_gpt_init(&r.net[0], r.store, &r.cfg, 0) != AG_OK ||
        !(r.opt = ag_adam_new(r.store, 1e-3, 0.9, 0.999, 1e-8, 0, 0)) ||
        !(r.team = ag_team_new(r.store, r.parts, scale_replica, &r, err, sizeof err))) {
        fprintf(stderr, "bench: scale %s: the model could not be made %s\n", z->name, err);
        return 0;
    }
    ag_rng rng;
    ag_rng_seed(&rng, 0x5ca1e);
    for (int i = 0; i < z->B * z->T; i++)
        r.ids[i] = (int)(ag_rng_next(&rng) % (uint64_t)z->V), r.targets[i] = (int)(ag_rng_next(&rng) % (uint64_t)z->V);
    ag_set_threads(threads);
    double secs = best_time(scale_step, &r, budget);
    if (threads == 1) *act = scale_forward_bytes(&r); /* (more workers: another arena each) */
    return secs;
}

typedef struct scale_result {
    double ms, rss_mb; /* 0: did not run */
    double act_bytes;  /* attograd: one forward's arena; PyTorch: its saved tensors */
    bool oom;          /* PyTorch: it ran out of memory */
} scale_result;

/* attograd's step of size z at `threads`, in a child process. */
static scale_result scale_attograd(const scale_size *z, int threads, double budget)
{
    scale_result res = {0};
    int fd[2];
    if (pipe(fd)) return res;
    fflush(stdout);
    if (out_file) fflush(out_file);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        double v[2] = {0, 0};
        v[0] = scale_time(z, threads, budget, &v[1]);
        ssize_t w = write(fd[1], v, sizeof v);
        _exit(w == (ssize_t)sizeof v && v[0] > 0 ? 0 : 1);
    }
    close(fd[1]);
    double v[2] = {0, 0};
    struct rusage ru;
    int st = 0;
    if (pid > 0 && read(fd[0], v, sizeof v) == (ssize_t)sizeof v && wait4(pid, &st, 0, &ru) == pid &&
        WIFEXITED(st) && WEXITSTATUS(st) == 0)
        res.ms = 1e3 * v[0], res.rss_mb = (double)ru.ru_maxrss / 1024, res.act_bytes = v[1];
    close(fd[0]);
    return res;
}

/* The PyTorch twin's step of size z.  Its address space is capped at three
 * quarters of the machine's memory (ulimit -v), so that a size it cannot
 * hold fails with an allocation error, reported as out of memory
 * (res.oom), instead of swapping.  flags: more of gpt.py bench's ("" or
 * "--autocast"). */
static scale_result scale_torch(const char *python, const scale_size *z, int threads, double budget, const char *flags)
{
    scale_result res = {0};
    char cmd[1200], line[1024] = "", out[1024] = "";
    long long kb = (long long)sysconf(_SC_PHYS_PAGES) * (sysconf(_SC_PAGE_SIZE) / 1024) / 4 * 3;
    snprintf(cmd, sizeof cmd,
             "ulimit -v %lld 2>/dev/null; OMP_NUM_THREADS=%d OPENBLAS_NUM_THREADS=%d MKL_NUM_THREADS=%d %s "
             "tests/reference/gpt.py bench --threads %d --seconds %g --new '' --vocab %d --batch %d --context %d "
             "--hidden %d --heads %d --ffn %d --layers %d %s 2>&1",
             kb > 0 ? kb : 0, threads, threads, threads, python, threads, budget, z->V, z->B, z->T, z->C, z->H,
             z->F, z->L, flags);
    FILE *f = popen(cmd, "r");
    if (!f) return res;
    while (fgets(line, sizeof line, f)) { /* the JSON line, or a traceback */
        if (line[0] == '{') snprintf(out, sizeof out, "%s", line);
        if (strstr(line, "can't allocate memory") || strstr(line, "out of memory") || strstr(line, "MemoryError"))
            res.oom = true;
    }
    int st = pclose(f);
    if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 128 + 9) res.oom = true; /* killed: the kernel's OOM killer */
    snprintf(line, sizeof line, "%s", out);
    const char *p;
    if ((p = strstr(line, "\"step_ms\":"))) res.ms = strtod(p + 10, NULL);
    if ((p = strstr(line, "\"peak_rss_mb\":"))) res.rss_mb = strtod(p + 14, NULL);
    if ((p = strstr(line, "\"saved_bytes\":"))) res.act_bytes = strtod(p + 14, NULL);
    return res;
}

/* The step's end, for the sections' headers. */
static const char *scale_loop_text(void)
{
    return scale_plain ? "the plain loop: ag_clip_grad_norm 1, then ag_optim_step (Adam 1e-3), the gradients zeroed "
                         "before the step"
                       : "clip 1 and Adam 1e-3 in one pass with the zeroing: ag_optim_step_clip_zero";
}

/* Parameters of the GPT of size z (tied head). */
static double scale_params(const scale_size *z)
{
    return (double)z->V * z->C + (double)z->T * z->C + 2.0 * z->C +
           z->L * (4.0 * z->C * z->C + 4 * z->C + 2.0 * z->C * z->F + z->F + z->C + 4.0 * z->C);
}

/* One row of the memory table, from a one-thread run of each. */
static void scale_memory_row(const scale_size *z, scale_result ag, scale_result torch)
{
    double per = (double)z->B * z->T * z->L * 1024; /* KB per token per layer */
    char r1[32], r2[32];
    ratio_cell(r1, sizeof r1, ag.act_bytes > 0 && torch.act_bytes > 0 ? ag.act_bytes / torch.act_bytes : 0);
    ratio_cell(r2, sizeof r2, ag.rss_mb > 0 && torch.rss_mb > 0 ? ag.rss_mb / torch.rss_mb : 0);
    emit("| %s | %.1f | %.1f | %s | %.0f | %.0f | %s |\n", z->name, ag.act_bytes / per, torch.act_bytes / per, r1,
         ag.rss_mb, torch.rss_mb, r2);
}

static void bench_scale(const int *threads, int nthreads, const char *python, int have_torch, double budget)
{
#ifdef AG_DOUBLE
    (void)threads, (void)nthreads, (void)python, (void)have_torch, (void)budget;
    emit("\n### Scale: float builds only\n");
#else
    int have_ref = have_torch && access("tests/reference/gpt.py", R_OK) == 0;
    double peak = gemm_peak(budget);
    enum { NSIZES = sizeof scale_sizes / sizeof scale_sizes[0] };
    scale_result one[NSIZES][2] = {{{0}}}; /* [size][attograd, PyTorch] at one thread */
    emit("\n### Scale: the GPT's training step from the toy to GPT-2 small's body\n\n");
    emit("ag_gpt through the public API (random ids, forward, backward, %s) "
         "against %s.  GFLOP/s: the matrix products' flops (multiply-add = 2, backward = 2 x forward) per second of "
         "a whole step, against the gemm's one-core peak measured in this run (%.1f GFLOP/s, a 512^3 product).  "
         "Peak RSS: the whole process's.\n\n",
         scale_loop_text(),
         have_ref ? "the PyTorch twin (tests/reference/gpt.py bench, the same model and step, in the same run)"
                  : "nothing (PyTorch is not available)",
         peak);
    emit("| size | params | threads | attograd ms | PyTorch ms | speed-up | attograd GFLOP/s (of peak) | "
         "attograd peak RSS MB | PyTorch peak RSS MB |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < NSIZES; i++) {
        const scale_size *z = &scale_sizes[i];
        double secs = budget * (z->C >= 512 ? 4 : 1);
        for (int t = 0; t < nthreads && t < 8; t++) {
            scale_result torch = have_ref ? scale_torch(python, z, threads[t], secs, "") : (scale_result){0};
            scale_result ag = scale_attograd(z, threads[t], secs);
            if (threads[t] == 1) one[i][0] = ag, one[i][1] = torch;
            char r[32];
            ratio_cell(r, sizeof r, torch.ms > 0 && ag.ms > 0 ? torch.ms / ag.ms : 0);
            double gf = ag.ms > 0 ? scale_flops(z) / (ag.ms / 1e3) / 1e9 : 0;
            emit("| %s | %.1f M | %d | %.1f | %.1f | %s | %.1f (%.0f%%) | %.0f | %.0f |\n", z->name,
                 scale_params(z) / 1e6, threads[t], ag.ms, torch.ms, r, gf, 100 * gf / peak, ag.rss_mb, torch.rss_mb);
        }
    }
    emit("\nMemory, one thread.  Activations: the bytes one training forward keeps for the backward, per token "
         "per layer (the embedding and the head included): attograd's arena after ag_gpt_loss, PyTorch's saved "
         "tensors (each storage once, the parameters aside; torch.autograd.graph.saved_tensors_hooks).\n\n");
    emit("| size | attograd KB/token/layer | PyTorch KB/token/layer | ratio | attograd peak RSS MB | "
         "PyTorch peak RSS MB | ratio |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 1; i < NSIZES; i++)
        if (one[i][0].ms > 0) scale_memory_row(&scale_sizes[i], one[i][0], one[i][1]);
    emit("\nLong contexts: `make bench-long`.\n");
#endif
}
