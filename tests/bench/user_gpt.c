/* tests/bench/user_gpt.c: a GPT written as a user writes one from the
 * public headers (an embedding with learned positions, pre-norm blocks of
 * layer norms, linear layers, ag_scaled_dot_product_attention and a GELU
 * MLP, a tied head, cross-entropy; no ag_gpt, no ag_mha_layer), trained
 * by the plain loop a PyTorch user writes (ag_store_zero_grad, forward,
 * ag_backward, ag_clip_grad_norm 1, ag_optim_step with Adam), against
 * ag_gpt with the same config and loop.
 *
 *   user_gpt [--rounds N]   GPT-2 small's body (C 768, L 12, H 12, F 3072,
 *                           V 65), B 1, one thread: at T 2048 the user's
 *                           GPT with dropout 0.1 on the attention weights
 *                           and without (and with the residual forms,
 *                           ag_linear_layer_forward_add and
 *                           ag_ffn_layer_forward_add), ag_gpt without and
 *                           with dropout 0.1; at T 8192 one step of each
 *                           model (the user's with the residual forms).  Each
 *                           configuration runs in a process of its own (its
 *                           peak RSS is its own), in turn, N rounds (1).
 *                           A markdown table on stdout (make bench-user-gpt).
 *   user_gpt --smoke        the same table on a toy GPT, in seconds
 *   user_gpt --check        the toy user GPT on ag_gpt's weights gives
 *                           ag_gpt's loss, every attention takes the
 *                           kernel that keeps no [T, S] matrix, dropout
 *                           acts, and training lowers the loss; exit 1 if not
 *   user_gpt --run user|gpt --T N [--dropout P] [--steps N] [--toy] [--ffn-layer]
 *                           one configuration, in this process */
#define _DEFAULT_SOURCE /* wait4 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "attograd.h"

/* ---- the model, as a user writes it -------------------------------------- */

typedef struct user_block {
    ag_layer_norm_layer norm1, norm2;
    ag_linear_layer w_q, w_k, w_v, w_o; /* attention's projections, C -> C */
    ag_linear_layer dense1, dense2;     /* the MLP, C -> F -> C */
} user_block;

typedef struct user_gpt {
    int V, T, C, H, F, L; /* vocabulary, context, width, heads, MLP width, blocks */
    double attn_dropout;  /* on the attention weights, in training mode */
    int ffn_layer;        /* 1: the MLP through ag_ffn_layer_forward_add (dense1 and
                             GELU in one op), on the same two linear layers */
    ag_embedding_layer embedding; /* tokens [V, C] (also the tied head), positions [T, C] */
    user_block *blocks;
    ag_layer_norm_layer norm; /* the final layer norm */
} user_gpt;

/* Parameters named as ag_gpt's (so that --check can copy its weights),
 * drawn N(0, 0.02) as GPT-2's. */
static ag_status user_block_init(user_block *b, ag_store *s, int i, int C, int F, uint64_t seed)
{
    const ag_init_opts gpt2 = {.scheme = AG_INIT_GPT2};
    char name[64];
    ag_status st = AG_OK;
#define NAMED(part) (snprintf(name, sizeof name, "blocks.%d.%s", i, part), name)
    st = st ? st : ag_layer_norm_layer_init(&b->norm1, s, NAMED("norm1"), C);
    st = st ? st : ag_linear_layer_init_ex(&b->w_q, s, NAMED("attention.w_q"), C, C, 1, &gpt2, seed);
    st = st ? st : ag_linear_layer_init_ex(&b->w_k, s, NAMED("attention.w_k"), C, C, 1, &gpt2, seed);
    st = st ? st : ag_linear_layer_init_ex(&b->w_v, s, NAMED("attention.w_v"), C, C, 1, &gpt2, seed);
    st = st ? st : ag_linear_layer_init_ex(&b->w_o, s, NAMED("attention.w_o"), C, C, 1, &gpt2, seed);
    st = st ? st : ag_layer_norm_layer_init(&b->norm2, s, NAMED("norm2"), C);
    st = st ? st : ag_linear_layer_init_ex(&b->dense1, s, NAMED("ffn.dense1"), C, F, 1, &gpt2, seed);
    st = st ? st : ag_linear_layer_init_ex(&b->dense2, s, NAMED("ffn.dense2"), F, C, 1, &gpt2, seed);
#undef NAMED
    return st;
}

static ag_status user_gpt_init(user_gpt *m, ag_store *s, uint64_t seed)
{
    const ag_init_opts gpt2 = {.scheme = AG_INIT_GPT2};
    ag_status st = ag_embedding_layer_init_ex(&m->embedding, s, "embedding", m->V, m->C, m->T, AG_POS_LEARNED,
                                              &gpt2, seed);
    if (st != AG_OK) return st;
    if (!(m->blocks = calloc((size_t)m->L, sizeof *m->blocks))) return AG_ERR_NOMEM;
    for (int i = 0; i < m->L && st == AG_OK; i++) st = user_block_init(&m->blocks[i], s, i, m->C, m->F, seed);
    return st ? st : ag_layer_norm_layer_init(&m->norm, s, "norm", m->C);
}

/* x [B, T, C] -> x + attention(norm1(x)) -> that + mlp(norm2(that)):
 *   q, k, v = h W^T + b as [B, T, H, D] (heads_layout 1: no permute)
 *   a = softmax(q k^T / sqrt(D), causal) v, dropout on the weights
 *   mlp(h) = dense2(gelu(dense1(h))), written out, or as an ag_ffn_layer
 *   with both residuals added by the last projections
 *   (ag_linear_layer_forward_add, ag_ffn_layer_forward_add) */
static ag_tensor *user_block_forward(ag_graph *g, const user_gpt *m, const user_block *b, ag_tensor *x, int B)
{
    int T = m->T, C = m->C, H = m->H, D = C / H;
    ag_tensor *h = ag_layer_norm_layer_forward(g, &b->norm1, x);
    ag_tensor *q = ag_reshape(g, ag_linear_layer_forward(g, &b->w_q, h), AG_SHAPE(B, T, H, D));
    ag_tensor *k = ag_reshape(g, ag_linear_layer_forward(g, &b->w_k, h), AG_SHAPE(B, T, H, D));
    ag_tensor *v = ag_reshape(g, ag_linear_layer_forward(g, &b->w_v, h), AG_SHAPE(B, T, H, D));
    ag_sdpa_config cfg = {.causal = AG_CAUSAL_TOP_LEFT, .heads_layout = 1, .dropout_p = m->attn_dropout};
    ag_tensor *a = ag_reshape(g, ag_scaled_dot_product_attention(g, q, k, v, &cfg), AG_SHAPE(B, T, C));
    if (m->ffn_layer) { /* the residuals added by the last projections */
        ag_ffn_layer mlp = {b->dense1, b->dense2, AG_ACT_GELU};
        x = ag_linear_layer_forward_add(g, &b->w_o, a, x);
        return ag_ffn_layer_forward_add(g, &mlp, ag_layer_norm_layer_forward(g, &b->norm2, x), x);
    }
    x = ag_add(g, x, ag_linear_layer_forward(g, &b->w_o, a));
    h = ag_layer_norm_layer_forward(g, &b->norm2, x);
    h = ag_gelu(g, ag_linear_layer_forward(g, &b->dense1, h));
    return ag_add(g, x, ag_linear_layer_forward(g, &b->dense2, h));
}

/* ids, targets [B, T] -> the mean cross-entropy of the next token */
static ag_tensor *user_gpt_loss(ag_graph *g, const user_gpt *m, const int *ids, const int *targets, int B)
{
    ag_tensor *x = ag_embedding_layer_forward(g, &m->embedding, ids, B, m->T); /* tokens + positions */
    for (int i = 0; i < m->L; i++) x = user_block_forward(g, m, &m->blocks[i], x, B);
    x = ag_layer_norm_layer_forward(g, &m->norm, x);
    return ag_cross_entropy(g, ag_embedding_layer_logits(g, &m->embedding, x), targets, -1, 0);
}

/* ---- one configuration's steps ------------------------------------------- */

enum { MAX_STEPS = 8 };

typedef struct run_cfg {
    int gpt;        /* 0: the user's GPT, 1: ag_gpt */
    int T, steps;   /* the first step warms up; the others are timed (a lone step is) */
    double dropout; /* user: on the attention weights; ag_gpt: its cfg.dropout */
    int toy;        /* C 64, L 2, H 4, F 256 in place of GPT-2 small's body */
    int ffn_layer;  /* user: the MLP as an ag_ffn_layer */
} run_cfg;

typedef struct run_out {
    int ok, timed;
    double cpu[MAX_STEPS], wall[MAX_STEPS]; /* seconds per timed step */
    double loss_first, loss_last;
    ag_attention_stats paths; /* the last step's */
} run_out;

static double now(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static user_gpt model_size(const run_cfg *c)
{
    user_gpt m = {.V = 65, .T = c->T, .C = 768, .H = 12, .F = 3072, .L = 12, .attn_dropout = c->dropout,
                  .ffn_layer = c->ffn_layer};
    if (c->toy) m.C = 64, m.H = 4, m.F = 256, m.L = 2;
    return m;
}

/* The plain loop's step; the loss, or NAN on failure. */
static double plain_step(ag_graph *g, ag_store *s, ag_optim *opt, const user_gpt *um, const ag_gpt *gm,
                         const int *ids, const int *targets)
{
    double norm;
    ag_graph_reset(g);
    ag_store_zero_grad(s);
    ag_tensor *loss = gm ? ag_gpt_loss(g, gm, ids, targets, 1, um->T) : user_gpt_loss(g, um, ids, targets, 1);
    if (!loss || ag_backward(g, loss) != AG_OK || ag_clip_grad_norm(s, 1.0, &norm) != AG_OK ||
        ag_optim_step(opt) != AG_OK)
        return NAN;
    return loss->data[0];
}

/* Makes the model of c in s (*um always: its sizes; *gm for ag_gpt). */
static ag_status make_model(const run_cfg *c, ag_store *s, user_gpt *um, ag_gpt *gm)
{
    *um = model_size(c);
    if (!c->gpt) return user_gpt_init(um, s, 1);
    ag_gpt_config cfg = {.vocab = um->V, .context = um->T, .hidden = um->C, .heads = um->H, .ffn = um->F,
                         .layers = um->L, .dropout = c->dropout, .activation = AG_ACT_GELU};
    return ag_gpt_init(gm, s, &cfg, 1);
}

static run_out run(const run_cfg *c)
{
    run_out out = {0};
    user_gpt um;
    ag_gpt gm;
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    ag_optim *opt = NULL;
    int *ids = malloc((size_t)c->T * sizeof *ids), *targets = malloc((size_t)c->T * sizeof *targets);
    if (!s || !g || !ids || !targets || make_model(c, s, &um, &gm) != AG_OK ||
        !(opt = ag_adam_new(s, 1e-3, 0.9, 0.999, 1e-8, 0, 0))) {
        fprintf(stderr, "user_gpt: the model could not be made: %s\n", s ? ag_store_error(s) : "no memory");
        return out;
    }
    ag_rng rng;
    ag_rng_seed(&rng, 0x9e7);
    for (int i = 0; i < c->T; i++)
        ids[i] = (int)(ag_rng_next(&rng) % (uint64_t)um.V), targets[i] = (int)(ag_rng_next(&rng) % (uint64_t)um.V);
    ag_set_threads(1);
    for (int i = 0; i < c->steps && i <= MAX_STEPS; i++) {
        double t0 = now(CLOCK_PROCESS_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
        double loss = plain_step(g, s, opt, &um, c->gpt ? &gm : NULL, ids, targets);
        if (isnan(loss)) {
            fprintf(stderr, "user_gpt: step %d failed: %s %s\n", i, ag_graph_error(g), ag_optim_error(opt));
            return out;
        }
        if (i == 0) out.loss_first = loss;
        out.loss_last = loss;
        if (i > 0 || c->steps == 1) {
            out.cpu[out.timed] = now(CLOCK_PROCESS_CPUTIME_ID) - t0;
            out.wall[out.timed++] = now(CLOCK_MONOTONIC) - w0;
        }
    }
    ag_graph_attention_stats(g, &out.paths);
    out.ok = 1;
    return out; /* the process ends: nothing freed */
}

/* c run in a child process: its result and its peak RSS in MB (2^20 B). */
static run_out run_child(const run_cfg *c, double *rss_mb)
{
    run_out out = {0};
    int fd[2];
    *rss_mb = 0;
    if (pipe(fd)) return out;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        run_out r = run(c);
        ssize_t w = write(fd[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r && r.ok ? 0 : 1);
    }
    close(fd[1]);
    struct rusage ru;
    int st = 0;
    if (pid > 0 && read(fd[0], &out, sizeof out) == (ssize_t)sizeof out && wait4(pid, &st, 0, &ru) == pid &&
        WIFEXITED(st) && WEXITSTATUS(st) == 0)
        *rss_mb = (double)ru.ru_maxrss / 1024;
    else out.ok = 0;
    close(fd[0]);
    return out;
}

/* ---- the table ------------------------------------------------------------ */

typedef struct row {
    const char *what;
    run_cfg cfg;
    double cpu[4 * MAX_STEPS], wall[4 * MAX_STEPS], rss_mb; /* every round's timed steps; the largest RSS */
    int n, failed;
    ag_attention_stats paths;
} row;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n < 1 ? 0 : n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

static void load_now(char *buf, size_t n)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double a = 0, b = 0, c = 0;
    if (!f || fscanf(f, "%lf %lf %lf", &a, &b, &c) != 3) snprintf(buf, n, "unknown");
    else snprintf(buf, n, "%.2f %.2f %.2f", a, b, c);
    if (f) fclose(f);
}

static void run_row(row *r)
{
    double rss;
    run_out o = run_child(&r->cfg, &rss);
    if (!o.ok) {
        r->failed = 1;
        return;
    }
    for (int i = 0; i < o.timed && r->n < 4 * MAX_STEPS; i++) r->cpu[r->n] = o.cpu[i], r->wall[r->n++] = o.wall[i];
    if (rss > r->rss_mb) r->rss_mb = rss;
    r->paths = o.paths;
    fprintf(stderr, "user_gpt: %s, T %d: step CPU %.2f s, wall %.2f s, peak RSS %.0f MB\n", r->what, r->cfg.T,
            o.cpu[0], o.wall[0], rss); /* as it goes: the table comes at the end */
}

static void print_row(row *r)
{
    if (r->failed) {
        printf("| %s | %d | failed | - | - | - |\n", r->what, r->cfg.T);
        return;
    }
    printf("| %s | %d | %.2f | %.2f | %.0f | flash %d, P kept %d, three nodes %d, textbook %d |\n", r->what,
           r->cfg.T, median(r->cpu, r->n), median(r->wall, r->n), r->rss_mb, r->paths.flash, r->paths.p_kept,
           r->paths.three_nodes, r->paths.textbook);
}

static void ratio(const char *what, double a, double b)
{
    if (a > 0 && b > 0) printf("- %s: %.3fx\n", what, a / b);
}

static int table(int smoke, int rounds)
{
    int T = smoke ? 320 : 2048, T_long = smoke ? 640 : 8192, steps = 3;
    row rows[] = {
        {.what = "user GPT, attention dropout 0.1", .cfg = {0, T, steps, 0.1, smoke, 0}},
        {.what = "user GPT, no dropout", .cfg = {0, T, steps, 0, smoke, 0}},
        {.what = "user GPT, residual forms, attention dropout 0.1", .cfg = {0, T, steps, 0.1, smoke, 1}},
        {.what = "ag_gpt, no dropout", .cfg = {1, T, steps, 0, smoke, 0}},
        {.what = "ag_gpt, dropout 0.1 (embedding, attention, residuals)", .cfg = {1, T, steps, 0.1, smoke, 0}},
        {.what = "user GPT, residual forms, no dropout", .cfg = {0, T_long, 1, 0, smoke, 1}},
        {.what = "ag_gpt, no dropout", .cfg = {1, T_long, 1, 0, smoke, 0}},
    };
    enum { NROWS = sizeof rows / sizeof rows[0] };
    char load0[64], load1[64];
    time_t t0 = time(NULL);
    load_now(load0, sizeof load0);
    /* the user's T 8192 step first (its figure matters most), ag_gpt's last */
    static const int order[NROWS] = {5, 0, 1, 3, 4, 2, 6};
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < NROWS; i++) run_row(&rows[order[i]]);
    load_now(load1, sizeof load1);
    char when[64];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M", gmtime(&t0));
    printf("### A user's GPT against ag_gpt%s\n\n", smoke ? " (--smoke: a toy, a check that it runs)" : "");
    printf("%s (C %d, L %d, H %d, F %d, V 65), causal, B 1, one thread; the plain loop (ag_store_zero_grad, "
           "ag_backward, ag_clip_grad_norm 1, ag_optim_step with Adam 1e-3); each configuration in a process of "
           "its own, %d round%s in turn from %s UTC, load average %s before and %s after.  Step: the median over "
           "the timed steps (the first of %d is a warm-up; the T %d rows time their one step), CPU and wall "
           "seconds.  Peak RSS: the whole process's, MB of 2^20 bytes.\n\n",
           smoke ? "A toy GPT" : "GPT-2 small's body", smoke ? 64 : 768, smoke ? 2 : 12, smoke ? 4 : 12,
           smoke ? 256 : 3072, rounds, rounds > 1 ? "s" : "", when, load0, load1, steps, T_long);
    printf("| model | T | step CPU s | step wall s | peak RSS MB | attention paths |\n"
           "|---|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < NROWS; i++) print_row(&rows[i]);
    printf("\n");
    ratio("user GPT's peak RSS with attention dropout / without", rows[0].rss_mb, rows[1].rss_mb);
    ratio("user GPT's peak RSS with attention dropout / ag_gpt's without", rows[0].rss_mb, rows[3].rss_mb);
    ratio("user GPT's step with attention dropout / ag_gpt's without (CPU)", median(rows[0].cpu, rows[0].n),
          median(rows[3].cpu, rows[3].n));
    ratio("user GPT's step without dropout / ag_gpt's without (CPU)", median(rows[1].cpu, rows[1].n),
          median(rows[3].cpu, rows[3].n));
    ratio("user GPT's peak RSS, residual forms, attention dropout / ag_gpt's without", rows[2].rss_mb,
          rows[3].rss_mb);
    ratio("user GPT's step, residual forms, attention dropout / ag_gpt's without (CPU)",
          median(rows[2].cpu, rows[2].n), median(rows[3].cpu, rows[3].n));
    for (int i = 5; i < NROWS; i++)
        if (!rows[i].failed)
            printf("- %s at T %d: peak RSS %.0f MB, %s 8 GB (8192 MB)\n", rows[i].what, T_long, rows[i].rss_mb,
                   rows[i].rss_mb < 8192 ? "under" : "NOT under");
    for (int i = 0; i < NROWS; i++)
        if (rows[i].failed) return 1;
    return 0;
}

/* ---- --check: the toy, in this process ------------------------------------ */

static int checks_failed;

static void expect(int ok, const char *what)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    checks_failed += !ok;
}

/* The user's loss on ag_gpt's weights (copied by name) against ag_gpt's
 * loss, and the attention paths of the user's graph, at T 320 (past the
 * 256 keys of the kernel's seam). */
static void check_same_model(void)
{
    run_cfg c = {.T = 320, .toy = 1};
    user_gpt um = model_size(&c), ud = um;
    ud.attn_dropout = 0.1;
    ag_gpt_config cfg = {.vocab = um.V, .context = um.T, .hidden = um.C, .heads = um.H, .ffn = um.F,
                         .layers = um.L, .activation = AG_ACT_GELU};
    ag_store *su = ag_store_new(), *sg = ag_store_new();
    ag_graph *g = ag_graph_new();
    ag_gpt gm;
    int ids[320], targets[320], copied = 0;
    for (int i = 0; i < um.T; i++) ids[i] = (7 * i + 3) % um.V, targets[i] = (5 * i + 1) % um.V;
    if (!su || !sg || !g || user_gpt_init(&um, su, 1) != AG_OK || ag_gpt_init(&gm, sg, &cfg, 2) != AG_OK) {
        expect(0, "the toy models are made");
        return;
    }
    ud.blocks = um.blocks, ud.embedding = um.embedding, ud.norm = um.norm;
    for (int i = 0; i < ag_store_count(su); i++) {
        ag_tensor *to = ag_store_at(su, i), *from = ag_store_find(sg, to->name);
        if (from && from->size == to->size) memcpy(to->data, from->data, to->size * sizeof *to->data), copied++;
    }
    expect(copied == ag_store_count(su) && copied == ag_store_count(sg), "every parameter has ag_gpt's name and size");
    double want = ag_gpt_loss(g, &gm, ids, targets, 1, um.T)->data[0];
    ag_graph_reset(g);
    ag_tensor *loss = user_gpt_loss(g, &um, ids, targets, 1);
    double got = loss ? loss->data[0] : NAN;
    char what[160];
    snprintf(what, sizeof what, "on ag_gpt's weights the user's loss %.7f is ag_gpt's %.7f (within 1e-5)", got,
             want);
    expect(fabs(got - want) <= 1e-5 * fabs(want), what);
    ag_attention_stats st;
    ag_graph_attention_stats(g, &st);
    expect(st.flash == um.L && st.flash + st.p_kept + st.plain + st.three_nodes + st.textbook == um.L,
           "no dropout: every attention takes the flash path");
    ag_graph_reset(g);
    um.ffn_layer = 1;
    loss = user_gpt_loss(g, &um, ids, targets, 1);
    um.ffn_layer = 0;
    snprintf(what, sizeof what, "the residual forms (the layers' _forward_add): loss %.7f (within 1e-5)",
             loss ? loss->data[0] : NAN);
    expect(loss && fabs(loss->data[0] - want) <= 1e-5 * fabs(want), what);
    ag_graph_reset(g);
    loss = user_gpt_loss(g, &ud, ids, targets, 1);
    double dropped = loss ? loss->data[0] : NAN;
    ag_graph_attention_stats(g, &st);
    expect(st.flash == um.L && st.three_nodes == 0, "attention dropout 0.1: every attention takes the flash path");
    expect(isfinite(dropped) && dropped != got, "attention dropout 0.1 changes the loss in training mode");
    expect(ag_backward(g, loss) == AG_OK, "the backward through the dropped attention runs");
}

static int check(void)
{
    check_same_model();
    run_out o = run(&(run_cfg){.T = 320, .steps = 6, .dropout = 0.1, .toy = 1});
    char what[160];
    snprintf(what, sizeof what, "6 plain steps with attention dropout lower the loss: %.4f -> %.4f", o.loss_first,
             o.loss_last);
    expect(o.ok && o.loss_last < o.loss_first, what);
    printf("%d failed\n", checks_failed);
    return checks_failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    int smoke = 0, rounds = 1, one = 0;
    run_cfg c = {.T = 2048, .steps = 4};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--smoke")) smoke = 1;
        else if (!strcmp(argv[i], "--check")) return check();
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--run") && i + 1 < argc) one = 1, c.gpt = !strcmp(argv[++i], "gpt");
        else if (!strcmp(argv[i], "--T") && i + 1 < argc) c.T = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dropout") && i + 1 < argc) c.dropout = atof(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) c.steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--toy")) c.toy = 1;
        else if (!strcmp(argv[i], "--ffn-layer")) c.ffn_layer = 1;
        else {
            fprintf(stderr, "usage: user_gpt [--smoke] [--rounds N] | --check | "
                            "--run user|gpt [--T N] [--dropout P] [--steps N] [--toy] [--ffn-layer]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > 4 || c.T < 1 || c.steps < 1 || c.steps > MAX_STEPS + 1) {
        fprintf(stderr, "user_gpt: --rounds 1 .. 4, --T >= 1, --steps 1 .. %d\n", MAX_STEPS + 1);
        return 2;
    }
    if (!one) return table(smoke, rounds);
    double rss;
    run_out o = run_child(&c, &rss);
    if (!o.ok) return 1;
    printf("%s T %d dropout %g: step CPU %.3f s, wall %.3f s (median of %d), peak RSS %.0f MB, loss %.4f -> %.4f\n",
           c.gpt ? "ag_gpt" : "user GPT", c.T, c.dropout, median(o.cpu, o.timed), median(o.wall, o.timed), o.timed, rss,
           o.loss_first, o.loss_last);
    return 0;
}
