/* bench.c: `make bench`.  Measures attograd against OpenBLAS and PyTorch in
 * the same run, on the same machine, with the same thread counts, and
 * prints a markdown table (also written to --out):
 *
 *   1. sgemm GFLOP/s: square sizes 64..1024 and the shapes attention uses,
 *      against OpenBLAS's cblas_sgemm (linked into this program only, when
 *      the Makefile finds libopenblas-dev);
 *   2. multi-head self-attention forward + backward (the PyTorch tutorial's
 *      block: q/k/v/o linear with bias, 1/sqrt(D), causal mask, softmax,
 *      P V, heads, LayerNorm(x + out)) against the same block in PyTorch
 *      (tests/bench/attention.py run by /usr/bin/python3);
 *   3. translator training (target tokens per second) at translate's
 *      default config, against tests/reference/translator.py train;
 *   and each at 1 and 2 threads.  PyTorch and OpenBLAS get the same thread
 *   count (torch.set_num_threads, OMP_NUM_THREADS, OPENBLAS_NUM_THREADS).
 *   4. single ops (exp, log, sqrt, tanh, gelu, gelu_tanh, relu, softmax,
 *      log_softmax, add, a broadcast bias, mul, sum over rows, layer_norm,
 *      cross_entropy), ns per element, forward and backward apart, at one
 *      thread, against the same ops in PyTorch (tests/bench/ops.py).
 *
 * Memory: this program replaces malloc (glibc's __libc_* underneath) to
 * count every allocation in the process and to track the live heap, so it
 * can show that a training step after the first calls malloc zero times,
 * and the peak heap of a step beside the bytes the step needs.
 *
 * Timings are the best of several rounds: on a shared machine the best is
 * the least disturbed. */
#define _GNU_SOURCE
#include "attograd.h"
#include "../../examples/translate/seq2seq_data.h" /* translate's dataset and batches */
#include "core/internal.h"
#include "kernels/amx.h"     /* ag__gemm_amx, ag__isa_bf16_kernel: the bf16 section, the machine line */
#include "kernels/kernels.h" /* AG__FLASH_KEYS, for the long-context section */

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef HAVE_OPENBLAS
#include <cblas.h>
#endif

/* src/kernels/gemm.c: the micro-kernel in use ("avx512", "avx2", "baseline"). */

/* ---- counting malloc -------------------------------------------------------- */

#ifdef __GLIBC__
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static unsigned long n_malloc; /* every allocation in the process */
static long live_bytes, peak_bytes;

static void took(void *p)
{
    if (!p) return;
    __atomic_add_fetch(&n_malloc, 1, __ATOMIC_RELAXED);
    long now = __atomic_add_fetch(&live_bytes, (long)malloc_usable_size(p), __ATOMIC_RELAXED);
    long peak = __atomic_load_n(&peak_bytes, __ATOMIC_RELAXED);
    while (now > peak && !__atomic_compare_exchange_n(&peak_bytes, &peak, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}
static void gave(void *p)
{
    if (p) __atomic_sub_fetch(&live_bytes, (long)malloc_usable_size(p), __ATOMIC_RELAXED);
}
void *malloc(size_t n)
{
    void *p = __libc_malloc(n);
    took(p);
    return p;
}
void *calloc(size_t n, size_t s)
{
    void *p = __libc_calloc(n, s);
    took(p);
    return p;
}
void *realloc(void *q, size_t n)
{
    gave(q);
    void *p = __libc_realloc(q, n);
    if (p) took(p);
    else if (q && n) took(q); /* failed: q still lives */
    return p;
}
void free(void *p)
{
    gave(p);
    __libc_free(p);
}
void *memalign(size_t a, size_t n)
{
    void *p = __libc_memalign(a, n);
    took(p);
    return p;
}
void *aligned_alloc(size_t a, size_t n) { return memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n)
{
    void *p = memalign(a, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
#define COUNTING_MALLOC 1
#else
static unsigned long n_malloc;
static long live_bytes, peak_bytes;
#endif

/* ---- the table ------------------------------------------------------------------ */

static FILE *out_file;

/* Print to stdout and to the output file. */
static void emit(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (out_file) {
        va_start(ap, fmt);
        vfprintf(out_file, fmt, ap);
        va_end(ap);
    }
    fflush(stdout);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds per call of fn(ctx): the best round of several, about `budget`
 * seconds in all. */
static double best_time(void (*fn)(void *), void *ctx, double budget)
{
    fn(ctx); /* warm up: caches, buffers, thread pools */
    double best = INFINITY, spent = 0;
    while (spent < budget || best == INFINITY) {
        double t0 = now(), dt;
        int n = 0;
        do {
            fn(ctx);
            n++;
            dt = now() - t0;
        } while (n < 2 || dt < budget / 5);
        if (dt / n < best) best = dt / n;
        spent += dt;
    }
    return best;
}

static void ratio_cell(char *buf, size_t len, double r)
{
    if (r > 0 && isfinite(r)) snprintf(buf, len, "%.2fx", r);
    else snprintf(buf, len, "-");
}

/* ---- 1. sgemm ---------------------------------------------------------------------- */

typedef struct gemm_case {
    int ta, tb, M, N, K;
    const char *what;
} gemm_case;

typedef struct gemm_ctx {
    const gemm_case *c;
    float *A, *B, *C;
} gemm_ctx;

#ifndef AG_DOUBLE
static void run_ag_gemm(void *p)
{
    gemm_ctx *x = p;
    const gemm_case *c = x->c;
    ag__gemm(c->ta, c->tb, c->M, c->N, c->K, x->A, c->ta ? c->M : c->K, x->B, c->tb ? c->K : c->N, 0, x->C, c->N);
}
#endif
#ifdef HAVE_OPENBLAS
static void run_blas_gemm(void *p)
{
    gemm_ctx *x = p;
    const gemm_case *c = x->c;
    cblas_sgemm(CblasRowMajor, c->ta ? CblasTrans : CblasNoTrans, c->tb ? CblasTrans : CblasNoTrans, c->M, c->N,
                c->K, 1, x->A, c->ta ? c->M : c->K, x->B, c->tb ? c->K : c->N, 0, x->C, c->N);
}
#endif

static void bench_gemm(const int *threads, int nthreads, double budget)
{
    static const gemm_case cases[] = {
        {0, 0, 64, 64, 64, "square"},
        {0, 0, 128, 128, 128, "square"},
        {0, 0, 256, 256, 256, "square"},
        {0, 0, 512, 512, 512, "square"},
        {0, 0, 1024, 1024, 1024, "square"},
        {0, 1, 2048, 256, 256, "x W^T, (16,128,256,8)"},
        {0, 1, 2048, 512, 512, "x W^T, (4,512,512,8)"},
        {1, 0, 512, 512, 2048, "dW = dy^T x, (4,512,512,8)"},
        {0, 1, 512, 512, 64, "Q K^T per head, (4,512,512,8)"},
        {0, 0, 512, 64, 512, "P V per head, (4,512,512,8)"},
        {0, 1, 128, 128, 32, "Q K^T per head, (16,128,256,8)"},
    };
    emit("\n### 1. sgemm, GFLOP/s (higher is better)\n\n");
#ifdef HAVE_OPENBLAS
    emit("OpenBLAS (%s), measured in the same run.\n\n", openblas_get_config());
#else
    emit("OpenBLAS is not linked in: attograd alone.  For the comparison: "
         "`sudo apt-get install libopenblas-dev`, then `make bench` again.\n\n");
#endif
#ifdef AG_DOUBLE
    (void)threads, (void)nthreads, (void)budget;
    emit("(built with -DAG_DOUBLE: sgemm skipped)\n");
    return;
#else
    emit("| M x N x K | op | threads | attograd | OpenBLAS | attograd / OpenBLAS |\n");
    emit("|---|---|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const gemm_case *c = &cases[i];
        size_t na = (size_t)c->M * c->K, nb = (size_t)c->K * c->N, nc = (size_t)c->M * c->N;
        gemm_ctx x = {c, malloc(na * sizeof(float)), malloc(nb * sizeof(float)), malloc(nc * sizeof(float))};
        if (!x.A || !x.B || !x.C) {
            fprintf(stderr, "bench: out of memory\n");
            exit(1);
        }
        ag_rng r;
        ag_rng_seed(&r, i);
        for (size_t j = 0; j < na; j++) x.A[j] = (float)ag_rng_uniform(&r) * 2 - 1;
        for (size_t j = 0; j < nb; j++) x.B[j] = (float)ag_rng_uniform(&r) * 2 - 1;
        double flops = 2.0 * c->M * c->N * c->K;
        for (int t = 0; t < nthreads; t++) {
            ag_set_threads(threads[t]);
            double ag = flops / best_time(run_ag_gemm, &x, budget) * 1e-9, blas = 0;
#ifdef HAVE_OPENBLAS
            openblas_set_num_threads(threads[t]);
            blas = flops / best_time(run_blas_gemm, &x, budget) * 1e-9;
#endif
            char rb[32], bb[32];
            ratio_cell(rb, sizeof rb, blas > 0 ? ag / blas : 0);
            if (blas > 0) snprintf(bb, sizeof bb, "%.1f", blas);
            else snprintf(bb, sizeof bb, "-");
            emit("| %d x %d x %d | %s%s%s | %d | %.1f | %s | %s |\n", c->M, c->N, c->K,
                 c->ta ? "A^T B" : c->tb ? "A B^T" : "A B", strcmp(c->what, "square") ? ": " : "",
                 strcmp(c->what, "square") ? c->what : "", threads[t], ag, bb, rb);
        }
        free(x.A), free(x.B), free(x.C);
    }
    ag_set_threads(1);
#endif
}

/* ---- 2. attention ---------------------------------------------------------------- */

typedef struct attn_block {
    ag_mha_layer mha;
    ag_layer_norm_layer norm;
} attn_block;

enum { MAX_PARTS = 8, SPLIT_MIN = 16384 };

typedef struct attn_ctx {
    int B, T, C, H;
    ag_store *store;
    ag_graph *g;
    attn_block w[MAX_PARTS]; /* w[k]: worker k's block (w[0]: the model's) */
    ag_team *team;
    int parts; /* the batch split among this many workers (1: not split) */
    ag_real *x;
} attn_ctx;

static ag_status attn_init(void *ctx, int k, ag_store *s)
{
    attn_ctx *a = ctx;
    ag_status st = ag_mha_layer_init(&a->w[k].mha, s, "attention", a->C, a->H, 1, 0, 1);
    return st != AG_OK ? st : ag_layer_norm_layer_init(&a->w[k].norm, s, "norm", a->C);
}

/* Part k of n (batch rows [k B / n, (k + 1) B / n)): y = LayerNorm(x +
 * MHA(x, x, x, causal)); loss = mean(y * y), weighing its share of B. */
static ag_tensor *attn_part(void *ctx, ag_graph *g, ag_store *s, int k, int n, double *weight)
{
    (void)s;
    attn_ctx *a = ctx;
    int b0 = a->B * k / n, nb = a->B * (k + 1) / n - b0;
    *weight = (double)nb / a->B;
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(nb, a->T, a->C), a->x + (size_t)b0 * a->T * a->C);
    ag_tensor *mask = ag_causal_mask(g, a->T, a->T);
    const attn_block *w = &a->w[k];
    ag_tensor *y = ag_layer_norm_layer_forward(g, &w->norm, ag_add(g, x, ag_mha_layer_forward(g, &w->mha, x, x, mask, -1e9, NULL)));
    return ag_mean_all(g, ag_mul(g, y, y));
}

/* One step: forward and backward of the whole batch (in parts), then zero
 * the gradients. */
static void attn_step(void *p)
{
    attn_ctx *a = p;
    ag_graph_reset(a->g);
    double loss;
    if (ag_team_step(a->team, a->g, a->parts, attn_part, a, &loss) != AG_OK) {
        fprintf(stderr, "bench: attention step failed: %s\n", ag_graph_error(a->g));
        exit(1);
    }
    ag_store_zero_grad(a->store);
}

/* Run the PyTorch side: one line "B T C H ms" per config into ms[]. */
static int torch_attention(const char *python, int threads, const int (*cfg)[4], int n, double budget, double *ms)
{
    char cmd[1024];
    int len = snprintf(cmd, sizeof cmd,
                       "OMP_NUM_THREADS=%d OPENBLAS_NUM_THREADS=%d MKL_NUM_THREADS=%d %s tests/bench/attention.py "
                       "--threads %d --causal --seconds %g",
                       threads, threads, threads, python, threads, budget);
    for (int i = 0; i < n; i++)
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %d,%d,%d,%d", cfg[i][0], cfg[i][1], cfg[i][2], cfg[i][3]);
    FILE *f = popen(cmd, "r");
    if (!f) return 0;
    int got = 0, B, T, C, H;
    double t;
    while (got < n && fscanf(f, "%d %d %d %d %lf", &B, &T, &C, &H, &t) == 5) ms[got++] = t;
    return pclose(f) == 0 && got == n;
}

static void bench_attention(const int *threads, int nthreads, const char *python, int have_torch, double budget)
{
    static const int cfg[][4] = {{2, 4, 64, 8}, {8, 32, 128, 8}, {16, 128, 256, 8}, {4, 512, 512, 8}};
    static const double target[] = {20, 5, 2, 1.5};
    enum { NCFG = sizeof cfg / sizeof cfg[0] };
    emit("\n### 2. Multi-head self-attention, forward + backward, ms per step (lower is better)\n\n");
    emit("LayerNorm(x + MHA(x, x, x)) with q/k/v/o linear layers with bias, causal mask, loss mean(y^2); "
         "x is [B, T, C], H heads.  At N threads attograd splits the batch among N workers (ag_team_step: "
         "\"batch parts\") when each part gets at least %d values of x; a smaller step runs whole, its ops "
         "on the threads.  PyTorch: the same block (tests/bench/attention.py)%s.\n\n", SPLIT_MIN,
         have_torch ? ", measured in the same run" : " is not available: attograd alone");
    emit("| (B, T, C, H) | threads | batch parts | attograd ms | PyTorch ms | speed-up | target |\n");
    emit("|---|---:|---:|---:|---:|---:|---:|\n");
    for (int t = 0; t < nthreads; t++) {
        double torch_ms[NCFG] = {0};
        int ok = have_torch && torch_attention(python, threads[t], cfg, NCFG, budget, torch_ms);
        if (have_torch && !ok) fprintf(stderr, "bench: tests/bench/attention.py failed; attograd alone\n");
        ag_set_threads(threads[t]);
        for (int i = 0; i < NCFG; i++) {
            attn_ctx a = {.B = cfg[i][0], .T = cfg[i][1], .C = cfg[i][2], .H = cfg[i][3]};
            size_t nx = (size_t)a.B * a.T * a.C;
            /* data parallel when there is enough work: parts of at least
             * SPLIT_MIN input values each (below, a fork and join costs more
             * than a part's work; the ops then use the threads themselves) */
            a.parts = threads[t] < MAX_PARTS ? threads[t] : MAX_PARTS;
            while (a.parts > 1 && (a.parts > a.B || nx / (size_t)a.parts < SPLIT_MIN)) a.parts--;
            a.store = ag_store_new();
            a.g = ag_graph_new();
            a.x = malloc(nx * sizeof(ag_real));
            char err[256];
            if (!a.store || !a.g || !a.x || attn_init(&a, 0, a.store) != AG_OK ||
                !(a.team = ag_team_new(a.store, a.parts, attn_init, &a, err, sizeof err))) {
                fprintf(stderr, "bench: cannot build the attention block%s%s\n", a.team ? "" : ": ", a.team ? "" : err);
                exit(1);
            }
            ag_rng r;
            ag_rng_seed(&r, 2);
            for (size_t j = 0; j < nx; j++) a.x[j] = (ag_real)(ag_rng_uniform(&r) * 2 - 1);
            double ms = best_time(attn_step, &a, budget) * 1e3;
            char sp[32], tm[32];
            ratio_cell(sp, sizeof sp, ok ? torch_ms[i] / ms : 0);
            if (ok) snprintf(tm, sizeof tm, "%.3f", torch_ms[i]);
            else snprintf(tm, sizeof tm, "-");
            emit("| (%d, %d, %d, %d) | %d | %d | %.3f | %s | %s | %gx |\n", a.B, a.T, a.C, a.H, threads[t], a.parts, ms,
                 tm, sp, target[i]);
            free(a.x);
            ag_team_free(a.team);
            ag_graph_free(a.g);
            ag_store_free(a.store);
        }
    }
    ag_set_threads(1);
}

/* ---- 3. translator training ----------------------------------------------------- */

/* translate train's defaults (examples/translate/cli.c). */
enum { BATCH = 64, HIDDEN = 64, HEADS = 4, FFN = 128, LAYERS = 2, MAX_LEN = 10, MIN_FREQ = 2 };
#define DROPOUT 0.1
#define LR 0.3 /* the cosine schedule's peak; the value does not change the speed */
#define MOMENTUM 0.9
#define CLIP 1.0

/* The shipped pairs as id arrays, with translate's vocabulary rules. */
static int load_data(const char *path, dataset *d, int *src_vocab, int *tgt_vocab)
{
    char err[512];
    ag_pairs *p = NULL;
    ag_vocab *sv = NULL, *tv = NULL;
    if (ag_pairs_load(path, &p, err, sizeof err) != AG_OK ||
        ag_vocab_from_pairs(p, AG_SOURCE, MIN_FREQ, &sv, err, sizeof err) != AG_OK ||
        ag_vocab_from_pairs(p, AG_TARGET, MIN_FREQ, &tv, err, sizeof err) != AG_OK) {
        fprintf(stderr, "bench: %s\n", err);
        ag_pairs_free(p);
        ag_vocab_free(sv);
        return 1;
    }
    int rc = dataset_make(d, p, sv, tv, MAX_LEN);
    if (rc) fprintf(stderr, "bench: out of memory for %d pairs\n", p->n);
    *src_vocab = ag_vocab_size(sv), *tgt_vocab = ag_vocab_size(tv);
    ag_vocab_free(sv), ag_vocab_free(tv), ag_pairs_free(p);
    return rc;
}

/* A batch with room for BATCH rows of MAX_LEN ids. */
typedef struct batch_room {
    batch b;
    int src[BATCH * MAX_LEN], src_valid[BATCH], tgt_in[BATCH * MAX_LEN], tgt_out[BATCH * MAX_LEN];
} batch_room;

static batch *batch_room_init(batch_room *r)
{
    r->b = (batch){.src = r->src, .src_valid = r->src_valid, .tgt_in = r->tgt_in, .tgt_out = r->tgt_out};
    return &r->b;
}

typedef struct train {
    ag_store *store;
    ag_seq2seq net;
    ag_graph *g;
    ag_optim *opt;
    ag_seq2seq_team *team; /* as translate train: one worker per thread */
} train;

static void train_step(train *t, const batch *b)
{
    ag_graph_reset(t->g);
    double loss, norm;
    if (ag_seq2seq_team_step(t->team, t->g, b->src, b->src_valid, b->tgt_in, b->tgt_out, b->B, b->S, b->T, &loss) !=
            AG_OK ||
        ag_clip_grad_norm(t->store, CLIP, &norm) != AG_OK ||
        ag_optim_step(t->opt) != AG_OK) {
        fprintf(stderr, "bench: training step failed: %s\n", ag_graph_error(t->g));
        exit(1);
    }
    ag_store_zero_grad(t->store);
}

typedef struct train_result {
    double tok_s, tok_s_first; /* the second epoch's (steady state) and the first's */
    unsigned long mallocs_fixed; /* over the fixed-shape steps after the first */
    int fixed_steps;
    unsigned long mallocs_epoch; /* over the epoch's steps after the first */
    int epoch_steps, steps_that_malloc;
    long peak_step;     /* peak live heap during the fixed-shape steps */
    size_t params;      /* parameter values */
    size_t arena_used;  /* activations and their gradients, largest step */
    size_t arena_bytes; /* the arena's blocks */
} train_result;

static int run_translator(const dataset *d, int src_vocab, int tgt_vocab, int threads, train_result *r)
{
    memset(r, 0, sizeof *r);
    ag_set_threads(threads);
    train t = {0};
    /* translate train's default model: pre-norm, no QK-norm */
    ag_seq2seq_config cfg = {src_vocab, tgt_vocab, HIDDEN, HEADS, FFN, LAYERS, MAX_LEN, DROPOUT,
                             AG_SEQ2SEQ_INIT_SCALED, 1, 0};
    t.store = ag_store_new();
    t.g = ag_graph_new();
    if (!t.store || !t.g || ag_seq2seq_init(&t.net, t.store, &cfg, 0) != AG_OK) return 1;
    t.opt = ag_sgd_new(t.store, LR, MOMENTUM, 0, 1);
    t.team = ag_seq2seq_team_new(&t.net, t.store, threads, NULL, 0);
    if (!t.opt || !t.team) return 1;
    ag_graph_seed(t.g, 1);
    int *order = malloc((size_t)d->n * sizeof(int));
    batch_room *room = malloc(sizeof *room);
    if (!order || !room) return 1;
    batch *b = batch_room_init(room);
    ag_rng rng;
    ag_rng_seed(&rng, 0xda7a);
    for (int i = 0; i < d->n; i++) order[i] = i;
    for (int i = d->n - 1; i > 0; i--) {
        int j = (int)(ag_rng_next(&rng) % (uint64_t)(i + 1)), tmp = order[i];
        order[i] = order[j], order[j] = tmp;
    }
    /* two epochs, each timed: the first pays for one-time costs (the arena
     * growing, its pages mapped); the second is the steady state.  The first
     * counts the steps that call malloc. */
    int nb = (d->n + BATCH - 1) / BATCH;
    for (int epoch = 0; epoch < 2; epoch++) {
        long tokens = 0;
        double t0 = now();
        for (int k = 0; k < nb; k++) {
            int n = d->n - k * BATCH < BATCH ? d->n - k * BATCH : BATCH;
            batch_fill(b, d, order + (size_t)k * BATCH, n);
            unsigned long m0 = n_malloc;
            train_step(&t, b);
            if (epoch == 0 && k > 0) {
                r->mallocs_epoch += n_malloc - m0;
                r->steps_that_malloc += n_malloc != m0;
                r->epoch_steps++;
            }
            if (ag_graph_arena_used(t.g) > r->arena_used) r->arena_used = ag_graph_arena_used(t.g);
            tokens += b->tokens;
        }
        if (epoch == 0) r->tok_s_first = tokens / (now() - t0);
        else r->tok_s = tokens / (now() - t0);
    }
    /* steps of one shape (the first batch again): the training loop's steady
     * state, where nothing may be allocated */
    batch_fill(b, d, order, BATCH);
    train_step(&t, b);
    unsigned long m0 = n_malloc;
    peak_bytes = live_bytes;
    for (r->fixed_steps = 0; r->fixed_steps < 10; r->fixed_steps++) train_step(&t, b);
    r->mallocs_fixed = n_malloc - m0;
    r->peak_step = peak_bytes;
    r->params = ag_store_numel(t.store);
    r->arena_bytes = ag_graph_arena_bytes(t.g);
    ag_optim_free(t.opt);
    ag_seq2seq_team_free(t.team);
    ag_seq2seq_free(&t.net);
    ag_graph_free(t.g);
    ag_store_free(t.store);
    free(order), free(room);
    ag_set_threads(1);
    return 0;
}

/* tests/reference/translator.py train for two epochs: the tokens per second
 * of the second (*first: of the first). */
static double torch_translator(const char *python, const char *data_path, int threads, double *first)
{
    *first = 0;
    char json[] = "/tmp/attograd-bench-XXXXXX";
    int fd = mkstemp(json);
    if (fd < 0) return 0;
    close(fd);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "OMP_NUM_THREADS=%d OPENBLAS_NUM_THREADS=%d MKL_NUM_THREADS=%d %s tests/reference/translator.py train "
             "--data %s --epochs 2 --threads %d --quiet --json %s",
             threads, threads, threads, python, data_path, threads, json);
    double tok_s = 0;
    if (system(cmd) == 0) {
        FILE *f = fopen(json, "r");
        char buf[4096];
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f) fclose(f);
        buf[n] = 0;
        /* "history": one entry per epoch, in order */
        const char *key = "\"tokens_per_s\":", *p = strstr(buf, key);
        if (p) *first = strtod(p + strlen(key), NULL), p = strstr(p + 1, key);
        if (p) tok_s = strtod(p + strlen(key), NULL);
    }
    remove(json);
    return tok_s;
}

static void bench_translator(const int *threads, int nthreads, const char *python, int have_torch,
                             const char *data_path)
{
    emit("\n### 3. Translator training, target tokens per second (higher is better)\n\n");
    dataset d = {0};
    int src_vocab = 0, tgt_vocab = 0;
    if (load_data(data_path, &d, &src_vocab, &tgt_vocab)) {
        emit("(%s could not be read: skipped)\n", data_path);
        return;
    }
    int have_ref = have_torch && access("tests/reference/translator.py", R_OK) == 0;
    emit("translate train's defaults (batch %d, hidden %d, %d heads, ffn %d, %d + %d layers, dropout %g, SGD lr %g "
         "Nesterov momentum %g, clip %g), two epochs of %s (%d pairs); the second epoch is the steady state, "
         "the first also pays one-time costs (in brackets).  At N threads attograd splits each batch's sentences "
         "among N workers, a thread each, as translate train --threads N does (src/core/team.c); PyTorch "
         "splits each op.  PyTorch: %s.\n\n",
         BATCH, HIDDEN, HEADS, FFN, LAYERS, LAYERS, DROPOUT, LR, MOMENTUM, CLIP, data_path, d.n,
         have_ref ? "tests/reference/translator.py train, two epochs, measured in the same run"
                  : "not available, attograd alone");
    emit("| threads | attograd tok/s (first epoch) | PyTorch tok/s (first epoch) | speed-up | target |\n");
    emit("|---:|---:|---:|---:|---:|\n");
    train_result res[8];
    for (int t = 0; t < nthreads && t < 8; t++) {
        if (run_translator(&d, src_vocab, tgt_vocab, threads[t], &res[t])) {
            emit("(the model could not be built: skipped)\n");
            break;
        }
        double ref_first = 0, ref = have_ref ? torch_translator(python, data_path, threads[t], &ref_first) : 0;
        char sp[32], rf[64];
        ratio_cell(sp, sizeof sp, ref > 0 ? res[t].tok_s / ref : 0);
        if (ref > 0) snprintf(rf, sizeof rf, "%.0f (%.0f)", ref, ref_first);
        else snprintf(rf, sizeof rf, "-");
        emit("| %d | %.0f (%.0f) | %s | %s | 10x |\n", threads[t], res[t].tok_s, res[t].tok_s_first, rf, sp);
    }
    emit("\nMemory of a training step (threads %d):\n\n", threads[0]);
    const train_result *r = &res[0];
    double mb = 1.0 / (1 << 20);
    size_t pbytes = r->params * sizeof(ag_real);
#ifdef COUNTING_MALLOC
    emit("| | |\n|---|---:|\n");
    emit("| malloc calls per step, same-shape steps after the first | %.1f (%lu in %d steps) |\n",
         (double)r->mallocs_fixed / r->fixed_steps, r->mallocs_fixed, r->fixed_steps);
    emit("| malloc calls in the epoch after its first step (batch shapes vary) | %lu, in %d of %d steps |\n",
         r->mallocs_epoch, r->steps_that_malloc, r->epoch_steps);
    emit("| peak heap of the process during a step | %.2f MiB |\n", r->peak_step * mb);
    for (int t = 1; t < nthreads && t < 8; t++)
        emit("| malloc calls per step at %d threads (%d workers), same-shape steps after the first | %.1f (%lu in %d "
             "steps) |\n", threads[t], threads[t], (double)res[t].mallocs_fixed / res[t].fixed_steps,
             res[t].mallocs_fixed, res[t].fixed_steps);
#else
    emit("| | |\n|---|---:|\n| malloc counting | needs glibc: skipped |\n");
#endif
    emit("| parameters + gradients + SGD momentum (%zu parameters) | %.2f MiB |\n", r->params, 3 * pbytes * mb);
    emit("| activations + their gradients, largest step (arena in use) | %.2f MiB |\n", r->arena_used * mb);
    emit("| the arena's blocks (kept across steps) | %.2f MiB |\n", r->arena_bytes * mb);
    dataset_free(&d);
}

/* ---- 4. single ops, ns per element ------------------------------------------------- */

/* softmax, log_softmax, add_bias, sum_rows, layer_norm and cross_entropy run
 * over rows of OP_ROW values (tests/bench/ops.py too). */
enum { OP_ROW = 128 };

typedef struct op_case {
    const char *name;
    int op;
    ag_tensor *(*fn)(ag_graph *g, ag_tensor *x);
    int rows; /* over rows of OP_ROW */
    double lo, hi;
} op_case;

/* The other operands of the ops that take more than x: constants (no
 * gradient) of x's shape (b), of a row's (gain, bias), and a target class
 * per row; made for each case in bench_ops. */
static struct {
    ag_tensor *b, *gain, *bias;
    int *targets;
} op_in;

static ag_tensor *op_relu(ag_graph *g, ag_tensor *x) { return ag_relu(g, x); }
static ag_tensor *op_softmax(ag_graph *g, ag_tensor *x) { return ag_softmax(g, x); }
static ag_tensor *op_add(ag_graph *g, ag_tensor *x) { return ag_add(g, x, op_in.b); }
static ag_tensor *op_add_bias(ag_graph *g, ag_tensor *x) { return ag_add(g, x, op_in.bias); }
static ag_tensor *op_mul(ag_graph *g, ag_tensor *x) { return ag_mul(g, x, op_in.b); }
static ag_tensor *op_sum_rows(ag_graph *g, ag_tensor *x) { return ag_sum(g, x, -1, 0); }
static ag_tensor *op_layer_norm(ag_graph *g, ag_tensor *x) { return ag_layer_norm(g, x, op_in.gain, op_in.bias, 1e-5); }
static ag_tensor *op_cross_entropy(ag_graph *g, ag_tensor *x) { return ag_cross_entropy(g, x, op_in.targets, -1, 0); }

typedef struct op_ctx {
    const op_case *c;
    ag_graph *g;
    ag_tensor *x, *y; /* x: a parameter, so it outlives the graph's resets */
    ag_real *dy;
    ag_real *x_grad; /* x's own gradient buffer, while x->grad is dy's */
    bool share;      /* x's gradient is dy's buffer (see op_backward) */
} op_ctx;

/* forward: y = op(x) on a fresh graph, as in a training step */
static void op_forward(void *p)
{
    op_ctx *o = p;
    ag_graph_reset(o->g);
    o->y = o->c->fn(o->g, o->x);
    if (!o->y) {
        fprintf(stderr, "bench: %s failed: %s\n", o->c->name, ag_graph_error(o->g));
        exit(1);
    }
}

/* backward: the op's own backward, given dy, into a gradient buffer that
 * backward has reserved and nothing has written yet, as an intermediate
 * tensor's is in a training step (softmax's input, an activation's): the
 * op stores dx there rather than adding to it.  PyTorch's
 * autograd.grad likewise returns a new dx.  Where dx = dy (add, for the
 * operand of y's shape), ag_backward gives x y's gradient buffer itself
 * (grad_passes_to_src0), as PyTorch passes dy on: so does this. */
static void op_backward(void *p)
{
    op_ctx *o = p;
    ag__impl(o->x)->unset = true;
    o->y->grad = o->dy;
    if (o->share) o->x->grad = o->dy;
    ag_op_table[o->c->op]->backward(o->g, o->y);
}

/* Run the PyTorch side: lines "name N fwd bwd" into fwd[], bwd[] by (op, size). */
static int torch_ops(const char *python, const op_case *cases, int ncases, const int *sizes, int nsizes,
                     double budget, double (*fwd)[2], double (*bwd)[2])
{
    char cmd[512];
    int len = snprintf(cmd, sizeof cmd,
                       "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 %s tests/bench/ops.py --threads 1 "
                       "--seconds %g",
                       python, budget);
    for (int i = 0; i < nsizes; i++) len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %d", sizes[i]);
    FILE *f = popen(cmd, "r");
    if (!f) return 0;
    char name[32];
    int n, got = 0;
    double tf, tb;
    while (fscanf(f, "%31s %d %lf %lf", name, &n, &tf, &tb) == 4)
        for (int c = 0; c < ncases; c++)
            for (int s = 0; s < nsizes; s++)
                if (!strcmp(name, cases[c].name) && n == sizes[s]) fwd[c][s] = tf, bwd[c][s] = tb, got++;
    return pclose(f) == 0 && got == ncases * nsizes;
}

/* op_in for x of n values (rows of OP_ROW): b uniform in [-1, 1), gain
 * near 1, bias small, targets uniform classes.  0 without memory. */
static int op_inputs(ag_store *st, int n, ag_rng *r)
{
    op_in.b = ag_store_constant(st, "b", 1, (int[]){n}, NULL);
    op_in.gain = ag_store_constant(st, "gain", 1, (int[]){OP_ROW}, NULL);
    op_in.bias = ag_store_constant(st, "bias", 1, (int[]){OP_ROW}, NULL);
    op_in.targets = malloc((size_t)(n / OP_ROW) * sizeof *op_in.targets);
    if (!op_in.b || !op_in.gain || !op_in.bias || !op_in.targets) return 0;
    for (int i = 0; i < n; i++) op_in.b->data[i] = (ag_real)(ag_rng_uniform(r) * 2 - 1);
    for (int i = 0; i < OP_ROW; i++) {
        op_in.gain->data[i] = (ag_real)(0.5 + ag_rng_uniform(r));
        op_in.bias->data[i] = (ag_real)(ag_rng_uniform(r) * 0.2 - 0.1);
    }
    for (int i = 0; i < n / OP_ROW; i++) op_in.targets[i] = (int)(ag_rng_next(r) % OP_ROW);
    return 1;
}

/* attograd's ns per element of case c at n values, forward and backward. */
static void ag_op_times(const op_case *c, int n, double budget, double *fwd, double *bwd)
{
    op_ctx o = {.c = c, .g = ag_graph_new()};
    ag_store *st = ag_store_new();
    o.x = st ? (c->rows ? ag_param(st, "x", AG_SHAPE(n / OP_ROW, OP_ROW)) : ag_param(st, "x", AG_SHAPE(n))) : NULL;
    o.dy = malloc((size_t)n * sizeof(ag_real));
    if (!o.g || !o.x || !o.dy) {
        fprintf(stderr, "bench: out of memory for %s\n", c->name);
        exit(1);
    }
    ag_rng r;
    ag_rng_seed(&r, 4);
    for (int i = 0; i < n; i++) {
        o.x->data[i] = (ag_real)(c->lo + (c->hi - c->lo) * ag_rng_uniform(&r));
        o.dy[i] = (ag_real)(ag_rng_uniform(&r) * 2 - 1);
    }
    if (!op_inputs(st, n, &r)) {
        fprintf(stderr, "bench: out of memory for %s\n", c->name);
        exit(1);
    }
    *fwd = best_time(op_forward, &o, budget) * 1e9 / n;
    o.x_grad = o.x->grad;
    o.share = ag_op_table[c->op]->grad_passes_to_src0 && o.y->size == o.x->size;
    *bwd = best_time(op_backward, &o, budget) * 1e9 / n;
    o.x->grad = o.x_grad; /* the store frees its own */
    free(o.dy);
    free(op_in.targets);
    ag_graph_free(o.g);
    ag_store_free(st);
}

/* The shorter of a time kept so far (0: none) and a new one. */
static double min_time(double kept, double t) { return kept == 0 || (t > 0 && t < kept) ? t : kept; }

enum { OP_ROUNDS = 2 }; /* each side's best over the rounds, alternating */

static void bench_ops(const char *python, int have_torch, double budget)
{
    static const op_case cases[] = {
        {"exp", AG_OP_EXP, ag_exp, 0, -4, 4},          {"log", AG_OP_LOG, ag_log, 0, 0.1, 4},
        {"sqrt", AG_OP_SQRT, ag_sqrt, 0, 0.1, 4},      {"tanh", AG_OP_TANH, ag_tanh, 0, -4, 4},
        {"gelu", AG_OP_GELU, ag_gelu, 0, -4, 4},       {"gelu_tanh", AG_OP_GELU_TANH, ag_gelu_tanh, 0, -4, 4},
        {"relu", AG_OP_RELU, op_relu, 0, -4, 4},
        {"softmax", AG_OP_SOFTMAX, op_softmax, 1, -4, 4}, {"log_softmax", AG_OP_LOG_SOFTMAX, ag_log_softmax, 1, -4, 4},
        {"add", AG_OP_ADD, op_add, 0, -4, 4},          {"add_bias", AG_OP_ADD, op_add_bias, 1, -4, 4},
        {"mul", AG_OP_MUL, op_mul, 0, -4, 4},          {"sum_rows", AG_OP_SUM, op_sum_rows, 1, -4, 4},
        {"layer_norm", AG_OP_LAYER_NORM, op_layer_norm, 1, -4, 4},
        {"cross_entropy", AG_OP_CROSS_ENTROPY, op_cross_entropy, 1, -4, 4},
    };
    static const int sizes[] = {1 << 16, 1 << 20};
    enum { NC = sizeof cases / sizeof cases[0], NS = sizeof sizes / sizeof sizes[0] };
    double tf[NC][NS] = {{0}}, tb[NC][NS] = {{0}}, af[NC][NS] = {{0}}, ab[NC][NS] = {{0}};
    int ok = have_torch;
    ag_set_threads(1);
    for (int round = 0; round < OP_ROUNDS; round++) {
        double rf[NC][NS] = {{0}}, rb[NC][NS] = {{0}};
        if (ok && !torch_ops(python, cases, NC, sizes, NS, budget / (2 * OP_ROUNDS), rf, rb)) {
            fprintf(stderr, "bench: tests/bench/ops.py failed; attograd alone\n");
            ok = 0;
        }
        for (int s = 0; s < NS; s++)
            for (int c = 0; c < NC; c++) {
                double f, b;
                ag_op_times(&cases[c], sizes[s], budget / (2 * OP_ROUNDS), &f, &b);
                af[c][s] = min_time(af[c][s], f), ab[c][s] = min_time(ab[c][s], b);
                tf[c][s] = min_time(tf[c][s], rf[c][s]), tb[c][s] = min_time(tb[c][s], rb[c][s]);
            }
    }
    emit("\n### 4. Single ops, one thread, ns per element (lower is better)\n\n");
    emit("Forward: y = op(x) recorded on a fresh graph; backward: the op's own backward given dy, writing "
         "x's gradient into a buffer reserved for it, as for an intermediate tensor in a training step; other "
         "operands are constants (no gradient).  softmax, log_softmax, add_bias (a bias broadcast over the "
         "rows), sum_rows, layer_norm and cross_entropy over rows of %d.  PyTorch: the same ops on float32 "
         "(tests/bench/ops.py: forward with x requiring grad, backward torch.autograd.grad(y, x, dy), a new dx; "
         "for sum_rows, whose dx PyTorch returns as a broadcast view of dy, made contiguous)%s.  %d rounds, "
         "each PyTorch then attograd; each figure is the best over the rounds.  Target: every speed-up at "
         "least 1x.\n\n",
         OP_ROW, have_torch ? ", measured in the same run" : " is not available: attograd alone", OP_ROUNDS);
    emit("| op | elements | attograd fwd | PyTorch fwd | speed-up | attograd bwd | PyTorch bwd | speed-up |\n");
    emit("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int s = 0; s < NS; s++)
        for (int c = 0; c < NC; c++) {
            char rf[32], rb[32], pf[32], pb[32];
            ratio_cell(rf, sizeof rf, ok ? tf[c][s] / af[c][s] : 0);
            ratio_cell(rb, sizeof rb, ok ? tb[c][s] / ab[c][s] : 0);
            snprintf(pf, sizeof pf, ok ? "%.3f" : "-", tf[c][s]);
            snprintf(pb, sizeof pb, ok ? "%.3f" : "-", tb[c][s]);
            emit("| %s | %d | %.3f | %s | %s | %.3f | %s | %s |\n", cases[c].name, sizes[s], af[c][s], pf, rf,
                 ab[c][s], pb, rb);
        }
}

/* ---- 5. the GPT ------------------------------------------------------------------- */

#include "gpt.h"
#include "classifier.h"
#include "scale.h"
#include "scale_bf16.h"
#include "long.h"
#include "loops.h"
#include "peak.h"
#include "bf16.h"

/* ---- main ------------------------------------------------------------------------- */

/* Run `call` in a child process (its output goes to the same stdout and
 * table file, flushed before it exits); failed = 1 if it did not exit 0.
 * The parent runs no OpenMP region, so each child starts with none. */
#define SECTION(failed, call)                                                                              \
    do {                                                                                                   \
        fflush(stdout);                                                                                    \
        if (out_file) fflush(out_file);                                                                    \
        pid_t pid_ = fork();                                                                               \
        if (pid_ == 0) {                                                                                   \
            call;                                                                                          \
            fflush(stdout);                                                                                \
            if (out_file) fflush(out_file);                                                                \
            _exit(0);                                                                                      \
        }                                                                                                  \
        int st_ = 0;                                                                                       \
        if (pid_ < 0 || waitpid(pid_, &st_, 0) != pid_ || !WIFEXITED(st_) || WEXITSTATUS(st_) != 0) {      \
            fprintf(stderr, "bench: %s failed\n", #call);                                                  \
            failed = 1;                                                                                    \
        }                                                                                                  \
    } while (0)

/* --isa NAME: attograd, PyTorch and OpenBLAS at one instruction-set level,
 * so that one machine reports the tables of the levels below its own.
 * attograd's level is forced here (every section is a fork of this
 * process); PyTorch's through the environment its runs inherit (ATen's
 * kernels, and oneDNN's, which ATEN_CPU_CAPABILITY does not reach);
 * OpenBLAS picks its kernels when it is loaded, before main, so its core
 * type comes from the command line (make bench ISA=..., bench.mk) and is
 * checked here. */
typedef struct isa_level {
    const char *name, *aten, *onednn, *openblas;
} isa_level;
static const isa_level isa_levels[] = {
    {"amx", "avx512", "AVX512_CORE_AMX", "SkylakeX"},         /* avx512, vdpbf16ps and AMX's tiles */
    {"avx512bf16", "avx512", "AVX512_CORE_BF16", "SkylakeX"}, /* avx512 and vdpbf16ps */
    {"avx512", "avx512", "AVX512_CORE", "SkylakeX"},
    {"avx2", "avx2", "AVX2", "Haswell"},
    {"baseline", "default", "SSE41", "Nehalem"}, /* 16-byte vectors, no FMA */
};
static const isa_level *isa_forced; /* NULL: every library at its best */

/* Force level `name`: false (with the reason) when it is not one or the
 * CPU lacks it. */
static bool force_isa(const char *name)
{
    for (size_t i = 0; i < sizeof isa_levels / sizeof isa_levels[0]; i++)
        if (!strcmp(name, isa_levels[i].name)) isa_forced = &isa_levels[i];
    if (!isa_forced) {
        fprintf(stderr, "bench: --isa %s: not a level (amx, avx512bf16, avx512, avx2 or baseline)\n", name);
        return false;
    }
    const char *got = ag__isa_force(name);
    if (strcmp(got, name)) {
        fprintf(stderr, "bench: --isa %s: this CPU lacks it (its best: %s)\n", name, ag__isa_force(NULL));
        return false;
    }
    setenv("ATEN_CPU_CAPABILITY", isa_forced->aten, 1);
    setenv("ONEDNN_MAX_CPU_ISA", isa_forced->onednn, 1);
    setenv("DNNL_MAX_CPU_ISA", isa_forced->onednn, 1);
    const char *core = getenv("OPENBLAS_CORETYPE");
    if (!core || strcmp(core, isa_forced->openblas))
        fprintf(stderr, "bench: OpenBLAS runs its own choice of kernels: for level %s run with OPENBLAS_CORETYPE=%s "
                        "(make bench BENCH_ISA=%s sets it)\n", name, isa_forced->openblas, name);
    return true;
}

static void machine(void)
{
    char model[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *p = strchr(line, ':');
            if (p) snprintf(model, sizeof model, "%s", p + 2);
            model[strcspn(model, "\n")] = 0;
            break;
        }
    if (f) fclose(f);
    const char *wait = getenv("OMP_WAIT_POLICY");
    /* (ag__gemm_kernel(NULL) would undo a forced level: it names the CPU's) */
    const char *level = isa_forced ? isa_forced->name : ag__gemm_kernel(NULL);
    const char *no_amx, *bf16 = ag__isa_bf16_kernel(&no_amx);
    emit("CPU: %s, %ld cores online; gemm micro-kernel: %s%s; bf16 products: %s%s%s%s; %s; OMP_WAIT_POLICY=%s.\n",
         model, sysconf(_SC_NPROCESSORS_ONLN), level, isa_forced ? " (forced)" : "", bf16, no_amx ? " (no AMX: " : "",
         no_amx ? no_amx : "", no_amx ? ")" : "", sizeof(ag_real) == 4 ? "float32" : "float64", wait ? wait : "(unset)");
#ifdef HAVE_OPENBLAS
    emit("OpenBLAS kernels: %s.\n", openblas_get_corename());
#endif
}

int main(int argc, char **argv)
{
    const char *out = NULL, *python = "/usr/bin/python3", *data_path = "examples/data/eng-fra.tsv";
    const char *only = NULL, *isa = NULL;
    int threads[8] = {1, 2}, nthreads = 2, smoke = 0;
    double budget = 0.4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--python") && i + 1 < argc) python = argv[++i];
        else if (!strcmp(argv[i], "--data") && i + 1 < argc) data_path = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--isa") && i + 1 < argc) isa = argv[++i];
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) budget = atof(argv[++i]);
        else if (!strcmp(argv[i], "--smoke")) smoke = 1;
        else if (!strcmp(argv[i], "--loop") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "plain") || !strcmp(argv[i + 1], "fused")))
            scale_plain = !strcmp(argv[++i], "plain");
        else if (!strcmp(argv[i], "--precision") && i + 1 < argc) { /* the products' in every section */
            ag_precision p;
            if (ag_precision_parse(argv[++i], &p)) {
                fprintf(stderr, "bench: --precision must be fp32 or bf16, got '%s'\n", argv[i]);
                return 2;
            }
            ag_set_precision(p);
        }
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            nthreads = 0;
            for (char *s = argv[++i]; *s && nthreads < 8;) {
                threads[nthreads++] = (int)strtol(s, &s, 10);
                if (*s == ',') s++;
                else break;
            }
        } else {
            fprintf(stderr,
                    "usage: bench [--threads 1,2] [--out FILE] [--only gemm|attention|translator|ops|gpt|classifier|scale|scale-bf16|long|loops|peak|bf16]\n"
                    "             [--seconds S] [--python /usr/bin/python3] [--data examples/data/eng-fra.tsv]\n"
                    "             [--isa avx512bf16|avx512|avx2|baseline] [--smoke: the long section on a toy model]\n"
                    "             [--precision fp32|bf16] [--loop plain|fused: the scale and long sections' step]\n");
            return 2;
        }
    }
    if (isa && !force_isa(isa)) return 2;
    if (out && !(out_file = fopen(out, "w"))) {
        fprintf(stderr, "bench: %s: %s\n", out, strerror(errno));
        return 1;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -c 'import torch' >/dev/null 2>&1", python);
    int have_torch = system(cmd) == 0;
    emit("## Benchmark\n\n");
    machine();
    if (have_torch) {
        /* and the BLAS its fp32 products call: Debian's torch takes whichever
         * libblas.so.3 the system's alternatives name, and the reference
         * BLAS there (no OpenBLAS installed) makes them 20x slower */
        snprintf(cmd, sizeof cmd,
                 "%s -c 'import torch, os; c = [l.split(\": \")[-1] for l in torch.__config__.show().splitlines() "
                 "if \"capability\" in l]; b = sorted({os.path.realpath(l.split()[-1]) for l in open(\"/proc/self/maps\") "
                 "if \"libblas\" in l.split()[-1]}); r = [x for x in b if \"/blas/\" in x]; "
                 "print(torch.__version__ + \", CPU capability \" + (c[0] if c else \"?\") + \", BLAS \" + "
                 "(\" \".join(b) or \"?\") + (\" (the reference BLAS: sudo apt-get install libopenblas0)\" if r else "
                 "\"\"))' 2>/dev/null",
                 python);
        FILE *f = popen(cmd, "r");
        char version[512] = "?";
        if (f && fgets(version, sizeof version, f)) version[strcspn(version, "\n")] = 0;
        if (f) pclose(f);
        emit("PyTorch %s (%s).\n", version, python);
    }
    if (!have_torch)
        emit("\nPyTorch is not available to %s: attograd alone.  For the comparison: "
             "`sudo apt-get install python3-torch`, then `make bench` again.\n",
             python);
    /* Each section in a process of its own, as a user's program would run
     * it: the heap and thread pools the others leave behind (megabytes of
     * freed matrices, OpenMP and OpenBLAS workers) would otherwise change
     * its numbers (the translator ran 20% slower after the other two). */
    int failed = 0;
    if (!only || !strcmp(only, "gemm")) {
        SECTION(failed, bench_gemm(threads, nthreads, budget));
    }
    if (!only || !strcmp(only, "attention")) {
        SECTION(failed, bench_attention(threads, nthreads, python, have_torch, budget));
    }
    if (!only || !strcmp(only, "translator")) {
        SECTION(failed, bench_translator(threads, nthreads, python, have_torch, data_path));
    }
    if (!only || !strcmp(only, "ops")) {
        SECTION(failed, bench_ops(python, have_torch, budget));
    }
    if (!only || !strcmp(only, "gpt")) {
        SECTION(failed, bench_gpt(threads, nthreads, python, have_torch, budget, data_path));
    }
    if (only && !strcmp(only, "scale")) { /* long: only when asked for */
        SECTION(failed, bench_scale(threads, nthreads, python, have_torch, budget));
    }
    if (only && !strcmp(only, "scale-bf16")) { /* long: only when asked for */
        SECTION(failed, bench_scale_bf16(threads, nthreads, python, have_torch, budget));
    }
    if (only && !strcmp(only, "long")) { /* longer still */
        SECTION(failed, bench_long(python, have_torch, budget, smoke));
    }
    if (only && !strcmp(only, "loops")) { /* minutes */
        SECTION(failed, bench_loops(python, have_torch, budget, smoke));
    }
    if (only && !strcmp(only, "peak")) { /* for docs/kernels.md (tests/bench/mca.sh): only when asked for */
        SECTION(failed, bench_peak(isa, budget));
    }
    if (!only || !strcmp(only, "bf16")) {
        SECTION(failed, bench_bf16(python, have_torch, budget));
    }
    if (!only || !strcmp(only, "classifier")) {
        SECTION(failed, bench_classifier(python, have_torch, budget, data_path));
    }
    if (out_file) {
        fclose(out_file);
        printf("\n(table written to %s)\n", out);
    }
    return failed;
}
