/* tests/bench/classifier.h: section 6 of `make bench` (included by bench.c
 * once, after its functions emit, now and ratio_cell): the encoder-only
 * classifier of examples/classify/ against its PyTorch twin
 * (tests/reference/classifier.py bench), measured in the same run.
 *
 * A training step (forward, backward, clip 1, Adam 1e-3) of the example's
 * default model (byte embedding, class token, learned positions, 2 pre-norm
 * blocks of width 64, 4 heads, GELU MLP 128, batch 32) on batches of
 * training sentences, 64 batches drawn once and cycled; one thread.  Both
 * sides report their best single step. */
#include "../../examples/classify/classify.h"

const char *prog = "bench";

enum { CL_BATCHES = 64 };

typedef struct cl_bench {
    corpus d;
    ag_store *s;
    ag_graph *g;
    ag_optim *opt;
    classifier m;
    minibatch b[CL_BATCHES];
} cl_bench;

static void cl_free(cl_bench *c)
{
    for (int i = 0; i < CL_BATCHES; i++) minibatch_free(&c->b[i]);
    ag_optim_free(c->opt);
    classifier_free(&c->m);
    ag_graph_free(c->g);
    ag_store_free(c->s);
    corpus_free(&c->d);
}

static int cl_make(cl_bench *c, const char *data_path)
{
    const classifier_config cfg = {.max_len = 32, .hidden = 64, .heads = 4, .ffn = 128, .layers = 2};
    memset(c, 0, sizeof *c);
    if (corpus_load(&c->d, data_path, cfg.max_len)) return 1;
    c->s = ag_store_new(), c->g = ag_graph_new();
    if (!c->s || !c->g || classifier_init(&c->m, c->s, &cfg, 0) != AG_OK ||
        !(c->opt = ag_adam_new(c->s, 1e-3, 0.9, 0.999, 1e-8, 0, 0)))
        return 1;
    ag_rng r;
    ag_rng_seed(&r, 0);
    for (int i = 0; i < CL_BATCHES; i++) {
        const sentence *rows[32];
        for (int k = 0; k < 32; k++) rows[k] = &c->d.train[ag_rng_next(&r) % (uint64_t)c->d.n_train];
        if (minibatch_alloc(&c->b[i], 32, cfg.max_len)) return 1;
        minibatch_fill(&c->b[i], rows, 32);
    }
    return 0;
}

static int cl_step(cl_bench *c, int i)
{
    const minibatch *b = &c->b[i % CL_BATCHES];
    ag_tensor *l = ag_cross_entropy(c->g, classifier_forward(c->g, &c->m, b), b->labels, -1, 0);
    double norm;
    int bad = !l || ag_backward(c->g, l) != AG_OK || ag_clip_grad_norm(c->s, 1.0, &norm) != AG_OK ||
              ag_optim_step(c->opt) != AG_OK;
    ag_store_zero_grad(c->s);
    ag_graph_reset(c->g);
    return bad;
}

static double torch_classifier_ms(const char *python, double budget)
{
    char cmd[1024], line[512] = "";
    snprintf(cmd, sizeof cmd,
             "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 %s tests/reference/classifier.py bench "
             "--threads 1 --seconds %g",
             python, 5 * budget);
    FILE *f = popen(cmd, "r");
    if (!f) return 0;
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    pclose(f);
    const char *p = strstr(line, "\"step_ms\":");
    return p ? strtod(p + 10, NULL) : 0;
}

static void bench_classifier(const char *python, int have_torch, double budget, const char *data_path)
{
#ifdef AG_DOUBLE
    (void)python, (void)have_torch, (void)budget, (void)data_path;
    emit("\n### 6. Classifier: float builds only\n");
#else
    int have_ref = have_torch && access("tests/reference/classifier.py", R_OK) == 0;
    emit("\n### 6. Classifier (examples/classify): training step, one thread\n\n");
    emit("Byte embedding, class token, learned positions, 2 pre-norm blocks (width 64, 4 heads, GELU MLP 128), "
         "batch 32 of training sentences (64 batches drawn once, cycled); Adam lr 1e-3, clip 1.  Each side's "
         "best single step.  PyTorch: %s.\n\n",
         have_ref ? "tests/reference/classifier.py bench, the same model and step, in the same run"
                  : "not available, attograd alone");
    cl_bench c;
    if (cl_make(&c, data_path)) {
        emit("(the model or the data could not be made: skipped)\n");
        cl_free(&c);
        return;
    }
    double torch = have_ref ? torch_classifier_ms(python, budget) : 0, best = INFINITY, t_end = now() + 5 * budget;
    for (int i = 0; i < 5; i++) cl_step(&c, i); /* warm up */
    for (int i = 0; now() < t_end || i < 10; i++) {
        double t0 = now();
        if (cl_step(&c, i)) {
            emit("(a step failed: %s)\n", ag_graph_error(c.g));
            break;
        }
        if (now() - t0 < best) best = now() - t0;
    }
    char r[32];
    ratio_cell(r, sizeof r, torch > 0 ? torch / (1e3 * best) : 0);
    emit("| attograd ms/step | PyTorch ms/step | speed-up |\n|---:|---:|---:|\n");
    emit("| %.2f | %.2f | %s |\n", 1e3 * best, torch, r);
    cl_free(&c);
#endif
}
