/* examples/translate/train.c: translate train, as a list of named steps.
 *
 *   check_flags        the flags that only make sense together
 *   load_data          the training (and held-out) sentence pairs
 *   new_model          vocabularies and a model from the flags, or
 *   resume_model       both from --resume, with its training state
 *   make_batches       the pairs as ids, a batch, the graph, the workers
 *   make_optimizer     SGD or Adam (restored on --resume)
 *   plan_schedule      steps per epoch, warmup, where this run stops
 *   save_start         --save-init: the checkpoint before step 1; --trace's file
 *   for each epoch:    train_epoch: shuffle; per batch train_step, log;
 *                      end_epoch: the epoch's loss, held-out loss, log
 *   save_checkpoint    crash-safely to --out
 *   report             the scores on the training and the held-out data,
 *                      the json (the plots and the page: curves.c)
 *
 * With --json or --entropy-plot, each attention layer's entropy and largest
 * score on a probe batch (probe.c) is measured before the first epoch and
 * after each one.  With --trace, each step writes a line: its number, epoch,
 * rate, loss, gradient norm (before clipping), target tokens and the pairs
 * of its batch (their indices among the data file's usable pairs), so that
 * another program can take the same steps from the --save-init checkpoint
 * (tests/reference/translator.py lockstep).
 *
 * Under mpirun (translate-mpi, built by make MPI=1) each process runs one
 * part of every batch, cut as --threads N cuts it for N processes, with the
 * same bits (examples/common/dist.h); process 0 alone prints and writes.
 *
 * Invariant: the file at --out, when written, holds everything the run's
 * continuation depends on (weights, moments, step count, the two random
 * streams, the position in the epoch), so --resume from it reproduces the
 * uninterrupted run bit for bit.  SIGINT and SIGTERM only set a flag; the
 * loop checks it after each step, saves there and exits 128 + signal. */
#define _XOPEN_SOURCE 700 /* SA_RESTART, SA_RESETHAND */
#include "translate.h"
#include "../common/dist.h"
#include "../common/report_file.h"
#include "../common/explorer_json.h"
#include "seq2seq_data.h" /* dataset, batch: id arrays */
#include "../common/stop_signal.h" /* stop_signal, catch_stop_signals */

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct trainer {
    const opts *o;
    ag_pairs *train, *test;  /* the data files */
    model m;
    ag_safetensors *resume;           /* the checkpoint, open until the optimizer is restored */
    train_state ts;          /* where the run is: saved with the model */
    const char *optimizer;   /* "sgd" or "adam" */
    dataset d, dt;           /* training and held-out pairs as ids */
    batch b;                 /* room for o->batch pairs */
    int *order;              /* this epoch's shuffle of d */
    ag_graph *g;
    ag_seq2seq_team *team;   /* one process: --threads workers; under mpirun: one */
    ag_optim *opt;
    double lr;               /* the schedule's peak */
    int64_t warmup, total_steps;
    int nbatches, stop_epoch, tty;
    double *curve, *test_curve; /* loss per epoch, for --plot */
    layer_stats *probe;      /* (epochs + 1) x 3 x probe_layers, row e after epoch e */
    int *probed;             /* probed[e]: row e was measured */
    double t_start, last_loss;
    FILE *trace;             /* --trace, or NULL */
} trainer;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- setting up ------------------------------------------------------------ */

static int check_flags(const opts *o)
{
    if (!o->data || !o->out) return bad("train needs --data FILE and --out MODEL%s%s", "", "");
    if (o->hidden % o->heads) {
        fprintf(stderr, "%s: --hidden %d is not divisible by --heads %d\n", prog, o->hidden, o->heads);
        usage(stderr);
        return 2;
    }
    return 0;
}

static int load_data(trainer *t)
{
    return load_pairs(t->o->data, &t->train) || (t->o->test && load_pairs(t->o->test, &t->test));
}

static int new_model(trainer *t)
{
    const opts *o = t->o;
    model *m = &t->m;
    char err[512];
    if (ag_vocab_from_pairs(t->train, AG_SOURCE, o->min_freq, &m->sv, err, sizeof err) != AG_OK ||
        ag_vocab_from_pairs(t->train, AG_TARGET, o->min_freq, &m->tv, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    m->cfg = (ag_seq2seq_config){ag_vocab_size(m->sv), ag_vocab_size(m->tv), o->hidden, o->heads, o->ffn,
                                 o->layers, o->max_len, o->dropout, o->init, o->pre_norm, o->qk_norm};
    if (model_build(m, o->seed, "the flags")) return 1;
    t->ts.min_freq = o->min_freq;
    t->optimizer = o->optimizer;
    ag_rng_seed(&t->ts.data_rng, o->seed ^ 0xda7aull);
    ag_rng r;
    ag_rng_seed(&r, o->seed ^ 0xd0ull);
    memcpy(t->ts.graph_rng, r.s, sizeof t->ts.graph_rng);
    return 0;
}

/* Each flag given that differs from the model's value, named with both
 * values.  Returns 2 when there is one. */
static int check_conflicts(const trainer *t)
{
    const opts *o = t->o;
    const ag_seq2seq_config *c = &t->m.cfg;
    const struct {
        unsigned bit;
        const char *flag, *key;
        double given, saved;
    } flags[] = {
        {GIVEN_HIDDEN, "--hidden", "hidden", o->hidden, c->hidden},
        {GIVEN_HEADS, "--heads", "heads", o->heads, c->heads},
        {GIVEN_FFN, "--ffn", "ffn", o->ffn, c->ffn},
        {GIVEN_LAYERS, "--layers", "layers", o->layers, c->layers},
        {GIVEN_MAX_LEN, "--max-len", "max_len", o->max_len, c->max_len},
        {GIVEN_DROPOUT, "--dropout", "dropout", o->dropout, c->dropout},
        {GIVEN_MIN_FREQ, "--min-freq", "min_freq", o->min_freq, t->ts.min_freq},
        {GIVEN_QK_NORM, "--qk-norm", "qk_norm", o->qk_norm, c->qk_norm},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if ((o->given & flags[i].bit) && flags[i].given != flags[i].saved)
            fprintf(stderr, "%s: %s %g conflicts with --resume %s, saved with %s %g\n", prog, flags[i].flag,
                    flags[i].given, o->resume, flags[i].key, flags[i].saved),
                n++;
    /* --pre-norm and --post-norm are one setting: the message names the flag given */
    if ((o->given & GIVEN_PRE_NORM) && o->pre_norm != c->pre_norm)
        fprintf(stderr, "%s: %s conflicts with --resume %s, saved with pre_norm %d (%s blocks)\n", prog,
                o->pre_norm ? "--pre-norm" : "--post-norm", o->resume, c->pre_norm,
                c->pre_norm ? "pre-norm" : "post-norm"),
            n++;
    if ((o->given & GIVEN_INIT) && o->init != c->init)
        fprintf(stderr, "%s: --init %s conflicts with --resume %s, saved with init %s\n", prog, init_names[o->init],
                o->resume, init_names[c->init]),
            n++;
    if ((o->given & GIVEN_OPTIMIZER) && strcmp(o->optimizer, t->ts.optimizer))
        fprintf(stderr, "%s: --optimizer %s conflicts with --resume %s, saved with optimizer %s\n", prog,
                o->optimizer, o->resume, t->ts.optimizer),
            n++;
    if (!n) return 0;
    fprintf(stderr, "%s: leave %s out to continue the model as it was saved\n", prog, n > 1 ? "them" : "it");
    return 2;
}

static int resume_model(trainer *t)
{
    const char *path = t->o->resume;
    if (load_model(&t->m, path, &t->resume) || load_train_state(t->resume, path, &t->ts)) return 1;
    int rc = check_conflicts(t);
    if (rc) return rc;
    if (t->ts.pairs_done >= t->train->n) {
        fprintf(stderr, "%s: %s stopped after pair %d of its epoch, but %s has %d pairs: not the data it was trained on\n",
                prog, path, t->ts.pairs_done, t->o->data, t->train->n);
        return 1;
    }
    t->optimizer = t->ts.optimizer;
    return 0;
}

static int make_batches(trainer *t)
{
    model *m = &t->m;
    int L = m->cfg.max_len, B = t->o->batch;
    char err[512];
    const ag_pairs *failed = dataset_make(&t->d, t->train, m->sv, m->tv, L)                    ? t->train
                             : t->test && dataset_make(&t->dt, t->test, m->sv, m->tv, L) ? t->test
                                                                                          : NULL;
    if (failed) {
        fprintf(stderr, "%s: out of memory for %d pairs\n", prog, failed->n);
        return 1;
    }
    batch *b = &t->b;
    b->src = malloc((size_t)B * L * sizeof(int)), b->tgt_in = malloc((size_t)B * L * sizeof(int));
    b->tgt_out = malloc((size_t)B * L * sizeof(int)), b->src_valid = malloc((size_t)B * sizeof(int));
    t->order = malloc((size_t)t->d.n * sizeof(int));
    ag_set_threads(t->o->threads);
    t->g = ag_graph_new();
    if (!b->src || !b->tgt_in || !b->tgt_out || !b->src_valid || !t->order || !t->g) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    memcpy(ag_graph_rng(t->g), t->ts.graph_rng, sizeof t->ts.graph_rng);
    /* --threads N: each batch's sentences split among N workers, a thread
     * each (src/core/team.c); N = 1 is the plain loss and backward */
    if (dist_size() > 256) {
        fprintf(stderr, "%s: %d processes: at most 256 parts a batch\n", prog, dist_size());
        return 1;
    }
    t->team = ag_seq2seq_team_new(&m->net, m->store, dist_size() > 1 ? 1 : t->o->threads, err, sizeof err);
    if (!t->team) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    return 0;
}

static int make_optimizer(trainer *t)
{
    const opts *o = t->o;
    int adam = !strcmp(t->optimizer, "adam");
    /* The defaults: SGD with Nesterov momentum 0.9, lr 0.3 warmed up over 400
     * steps then decayed to 0 along a cosine (measured on the shipped data:
     * it memorises faster than a constant 0.1 and stays stable); Adam 1e-3. */
    t->lr = o->lr > 0 ? o->lr : adam ? 1e-3 : 0.3;
    double momentum = o->momentum >= 0 ? o->momentum : 0.9;
    t->opt = adam ? ag_adam_new(t->m.store, t->lr, 0.9, 0.98, 1e-9, o->weight_decay, 0)
                  : ag_sgd_new(t->m.store, t->lr, momentum, o->weight_decay, o->nesterov && momentum > 0);
    if (!t->opt) {
        fprintf(stderr, "%s: optimizer: %s\n", prog, ag_store_error(t->m.store));
        return 1;
    }
    if (t->resume) {
        if (optimizer_load(t->opt, &t->m, t->resume, o->resume, t->ts.optimizer_steps)) return 1;
        ag_safetensors_free(t->resume);
        t->resume = NULL;
    }
    if (!o->quiet)
        printf("train: %d pairs (%d skipped), vocab %d source / %d target, %zu parameters, %s lr %g\n", t->d.n,
               t->train->n_skipped, t->m.cfg.src_vocab, t->m.cfg.tgt_vocab, ag_store_numel(t->m.store),
               ag_optim_kind(t->opt), t->lr);
    return 0;
}

/* The attention statistics after epoch e (0: before training). */
static int probe(trainer *t, int e)
{
    int n = 3 * probe_layers(&t->m);
    if (e > t->o->epochs) return 0;
    if (probe_attention(&t->m, t->g, &t->d, &t->b, t->o->batch, t->probe + (size_t)e * n)) return 1;
    t->probed[e] = 1;
    return 0;
}

static int plan_schedule(trainer *t)
{
    const opts *o = t->o;
    t->curve = calloc((size_t)o->epochs, sizeof(double));
    t->test_curve = calloc((size_t)o->epochs, sizeof(double));
    if (!t->curve || !t->test_curve) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    for (int e = 0; e < o->epochs; e++) t->curve[e] = t->test_curve[e] = NAN;
    if (o->json || o->entropy_plot || o->html) {
        t->probe = calloc((size_t)(o->epochs + 1) * 3 * probe_layers(&t->m), sizeof *t->probe);
        t->probed = calloc((size_t)o->epochs + 1, sizeof *t->probed);
        if (!t->probe || !t->probed) {
            fprintf(stderr, "%s: out of memory\n", prog);
            return 1;
        }
        if (!t->ts.pairs_done && probe(t, t->ts.epoch)) return 1;
    }
    t->tty = isatty(STDOUT_FILENO) && !o->quiet;
    t->nbatches = (t->d.n + o->batch - 1) / o->batch;
    /* A warmup longer than the run (a short run on a small file) is cut to a
     * tenth of the run, so that the schedule still decays; noam needs >= 1. */
    t->total_steps = (int64_t)o->epochs * t->nbatches, t->warmup = o->warmup;
    if (t->warmup >= t->total_steps) t->warmup = t->total_steps / 10;
    if (t->warmup < 1 && !strcmp(o->schedule, "noam")) t->warmup = 1;
    t->t_start = now(), t->last_loss = NAN;
    /* --epochs is the plan (the schedule decays over it); --stop-after ends
     * this run early, and --resume carries on with the same plan */
    t->stop_epoch = o->stop_after > 0 && o->stop_after < o->epochs ? o->stop_after : o->epochs;
    return 0;
}

/* --save-init: the checkpoint of the run before its first step (the
 * weights as drawn, the optimizer's zero state, both random streams), which
 * --resume continues as this run; --trace: its file, and the columns. */
static int save_start(trainer *t)
{
    const opts *o = t->o;
    if (o->save_init) {
        memcpy(t->ts.graph_rng, ag_graph_rng(t->g), sizeof t->ts.graph_rng);
        if (save_model(&t->m, t->opt, &t->ts, o->save_init)) return 1;
    }
    if (!o->trace) return 0;
    t->trace = fopen(o->trace, "w");
    if (!t->trace) {
        fprintf(stderr, "%s: %s: %s\n", prog, o->trace, strerror(errno));
        return 1;
    }
    fprintf(t->trace, "step\tepoch\tlr\tloss\tnorm\ttokens\tpairs\n");
    return 0;
}

/* The trace file closed; 1 (with a message) when a write failed. */
static int close_trace(trainer *t)
{
    if (!t->trace) return 0;
    int bad = ferror(t->trace);
    bad |= fclose(t->trace) != 0;
    t->trace = NULL;
    if (bad) fprintf(stderr, "%s: %s: cannot write the trace\n", prog, t->o->trace);
    return bad;
}

/* ---- an epoch ------------------------------------------------------------- */

/* Mean loss per target token over a dataset, dropout off. */
static double dataset_loss(const model *m, ag_graph *g, const dataset *d, batch *b, int B)
{
    int training = ag_graph_training(g);
    ag_graph_set_training(g, 0);
    double sum = 0;
    long tokens = 0;
    int *idx = malloc((size_t)B * sizeof(int));
    if (!idx) return NAN;
    for (int at = 0; at < d->n; at += B) {
        int nb = d->n - at < B ? d->n - at : B;
        for (int i = 0; i < nb; i++) idx[i] = at + i;
        batch_fill(b, d, idx, nb);
        ag_graph_reset(g);
        ag_tensor *loss =
            ag_seq2seq_loss(g, &m->net, b->src, b->src_valid, b->tgt_in, b->tgt_out, b->B, b->S, b->T);
        if (!loss) break;
        sum += (double)loss->data[0] * b->tokens;
        tokens += b->tokens;
    }
    free(idx);
    ag_graph_set_training(g, training);
    return tokens ? sum / tokens : NAN;
}

/* Fisher-Yates shuffle of 0..n-1 from r. */
static void shuffle(int *order, int n, ag_rng *r)
{
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(ag_rng_next(r) % (uint64_t)(i + 1));
        int tmp = order[i];
        order[i] = order[j], order[j] = tmp;
    }
}

/* Under mpirun: the batch cut as the team cuts it, part k sentences
 * [lo[k], lo[k + 1]) of weight w[k]; this process runs its own part. */
typedef struct batch_cut {
    const model *m;
    const batch *b;
    int lo[257];
    double w[256];
} batch_cut;

static ag_tensor *cut_part_loss(void *ctx, ag_graph *g, ag_store *s, int k, int nparts, double *weight)
{
    (void)s, (void)nparts;
    const batch_cut *c = ctx;
    const batch *b = c->b;
    int b0 = c->lo[k], S = b->S, T = b->T;
    *weight = c->w[k];
    if (c->w[k] == 0) return NULL; /* only padding: skipped */
    return ag_seq2seq_loss(g, &c->m->net, b->src + (size_t)b0 * S, b->src_valid + b0, b->tgt_in + (size_t)b0 * T,
                           b->tgt_out + (size_t)b0 * T, c->lo[k + 1] - b0, S, T);
}

/* The batch's loss and gradient: on the team, or across the processes. */
static ag_status batch_step(trainer *t, double *loss)
{
    const batch *b = &t->b;
    if (dist_size() == 1)
        return ag_seq2seq_team_step(t->team, t->g, b->src, b->src_valid, b->tgt_in, b->tgt_out, b->B, b->S, b->T,
                                    loss);
    batch_cut c = {.m = &t->m, .b = b};
    int n = ag_seq2seq_cut(&t->m.net, b->src_valid, b->tgt_out, b->B, b->S, b->T, dist_size(), c.lo, c.w);
    if (n < 1) return ag_graph_fail(t->g, AG_ERR_ARG, "a batch of %d pairs", b->B);
    return dist_team_step(t->g, t->m.store, n, cut_part_loss, &c, loss);
}

/* The --trace line of the step just taken: every number to the bit (%.17g). */
static void trace_step(const trainer *t, const int *idx, int nb, double loss, double norm)
{
    fprintf(t->trace, "%" PRId64 "\t%d\t%.17g\t%.17g\t%.17g\t%d\t", ag_optim_steps(t->opt), t->ts.epoch + 1,
            ag_optim_lr(t->opt), loss, norm, t->b.tokens);
    for (int i = 0; i < nb; i++) fprintf(t->trace, "%s%d", i ? "," : "", idx[i]);
    fputc('\n', t->trace);
}

/* One step on the nb pairs idx[0..nb): loss and gradient, clip, update. */
static int train_step(trainer *t, const int *idx, int nb, int k)
{
    const opts *o = t->o;
    batch *b = &t->b;
    batch_fill(b, &t->d, idx, nb);
    ag_graph_reset(t->g);
    double loss, norm;
    if (batch_step(t, &loss) != AG_OK) {
        fprintf(stderr, "%s: step failed: %s\n", prog, ag_graph_error(t->g));
        return 1;
    }
    if (strcmp(o->schedule, "constant") || t->warmup > 0)
        ag_optim_set_lr(t->opt, ag_lr_schedule(t->lr, ag_optim_steps(t->opt) + 1, t->warmup, t->total_steps,
                                               o->schedule));
    /* clip, update and zero the gradients in one pass over the parameters */
    ag_status st = ag_optim_step_clip_zero(t->opt, o->clip, &norm);
    if (st == AG_ERR_NUMERIC) {
        fprintf(stderr, "%s: epoch %d batch %d: gradient norm is %g; stopping before the model is spoiled (try a "
                "smaller --lr)\n", prog, t->ts.epoch + 1, k + 1, norm);
        return 1;
    }
    if (st != AG_OK) {
        fprintf(stderr, "%s: optimizer: %s\n", prog, ag_optim_error(t->opt));
        return 1;
    }
    t->ts.loss_sum += loss * b->tokens;
    t->ts.tokens += b->tokens;
    if (t->trace) trace_step(t, idx, nb, loss, norm);
    if (dist_size() > 1) stop_signal = dist_max(stop_signal); /* all stop after the same step */
    return 0;
}

/* The progress line on a terminal, rewritten after each batch. */
static void log_progress(const trainer *t, int k, double t0, int64_t tokens)
{
    double el = now() - t->t_start, rate = tokens / (now() - t0);
    double done_frac = ((double)(t->ts.epoch) + (k + 1.0) / t->nbatches) / t->o->epochs;
    printf("\repoch %d/%d  batch %d/%d  loss %.4f  %.0f tok/s  %.0fs elapsed  ETA %.0fs   ", t->ts.epoch + 1,
           t->o->epochs, k + 1, t->nbatches, t->ts.loss_sum / t->ts.tokens, rate, el, el / done_frac * (1 - done_frac));
    fflush(stdout);
}

/* The epoch's loss (refused when not finite), the held-out loss, the log
 * line; the state moves to the start of the next epoch (shuffled from r). */
static int end_epoch(trainer *t, const ag_rng *r, double t0, int64_t tokens)
{
    train_state *ts = &t->ts;
    t->last_loss = ts->loss_sum / ts->tokens;
    if (!isfinite(t->last_loss)) {
        fprintf(stderr, "%s: epoch %d: loss is %g; not saving\n", prog, ts->epoch + 1, t->last_loss);
        return 1;
    }
    double dt = now() - t0;
    t->curve[ts->epoch] = t->last_loss;
    if (t->test && dist_rank() == 0) t->test_curve[ts->epoch] = dataset_loss(&t->m, t->g, &t->dt, &t->b, t->o->batch);
    if (t->probe && probe(t, ts->epoch + 1)) return 1;
    if (!t->o->quiet) {
        printf("%sepoch %d/%d  loss %.4f", t->tty ? "\r" : "", ts->epoch + 1, t->o->epochs, t->last_loss);
        if (t->test) printf("  held-out %.4f", t->test_curve[ts->epoch]);
        printf("  %.0f tok/s  %.1fs\n", tokens / dt, dt);
        fflush(stdout);
    }
    ts->epoch++, ts->pairs_done = 0, ts->loss_sum = 0, ts->tokens = 0;
    ts->data_rng = *r;
    return 0;
}

/* The epoch's batches from where the state says, in this epoch's shuffle;
 * returns early (0, state inside the epoch) when a signal asked to stop. */
static int train_epoch(trainer *t)
{
    int B = t->o->batch, n = t->d.n;
    ag_rng r = t->ts.data_rng;
    shuffle(t->order, n, &r);
    double t0 = now();
    int64_t tokens0 = t->ts.tokens;
    for (int at = t->ts.pairs_done; at < n;) {
        int nb = n - at < B ? n - at : B, k = at / B;
        if (train_step(t, t->order + at, nb, k)) return 1;
        t->ts.pairs_done = at += nb;
        if (t->tty) log_progress(t, k, t0, t->ts.tokens - tokens0);
        if (stop_signal && at < n) return 0;
    }
    return end_epoch(t, &r, t0, t->ts.tokens - tokens0);
}

/* ---- the end ---------------------------------------------------------------- */

static int save_checkpoint(trainer *t)
{
    if (dist_rank() > 0) return 0; /* process 0 writes it */
    memcpy(t->ts.graph_rng, ag_graph_rng(t->g), sizeof t->ts.graph_rng);
    return save_model(&t->m, t->opt, &t->ts, t->o->out);
}

/* After a signal: the checkpoint, and the exit status that names the signal. */
static int save_interrupted(trainer *t)
{
    int sig = stop_signal;
    if (save_checkpoint(t)) return 1;
    if (dist_rank() > 0) return 128 + sig; /* process 0 says where it stopped */
    if (t->ts.pairs_done)
        fprintf(stderr, "%s: %s: stopped in epoch %d after %d of %d pairs; saved %s (continue with --resume %s)\n",
                prog, sig == SIGINT ? "SIGINT" : "SIGTERM", t->ts.epoch + 1, t->ts.pairs_done, t->d.n, t->o->out,
                t->o->out);
    else
        fprintf(stderr, "%s: %s: stopped after epoch %d; saved %s (continue with --resume %s)\n", prog,
                sig == SIGINT ? "SIGINT" : "SIGTERM", t->ts.epoch, t->o->out, t->o->out);
    return 128 + sig;
}

static void json_metrics(FILE *f, const char *prefix, const metrics *r)
{
    fprintf(f, ", \"%ssources\": %d, \"%sexact_match\": %.6f, \"%sbleu\": %.6f, \"%sceiling\": %.6f", prefix,
            r->sources, prefix, r->exact, prefix, r->bleu, prefix, r->ceiling);
}

/* What the plots and the page read of the run (curves.c). */
static train_curves curves_of(const trainer *t)
{
    return (train_curves){t->o, &t->m, t->test != NULL, t->curve, t->test_curve, t->probe, t->probed};
}

/* The scores on the training data and the held-out data (with --test), the
 * json and the page, after the model is saved. */
static int report(trainer *t)
{
    const opts *o = t->o;
    if (dist_rank() > 0) return 0; /* process 0 reports */
    metrics tr = {0}, te = {0};
    double test_loss = NAN;
    train_curves c = curves_of(t);
    if (o->entropy_plot && write_entropy_plot(&c)) return 1;
    if (t->test) {
        /* the training data first: its score is memorisation, the held-out
         * one is what the model learnt */
        if (evaluate(&t->m, t->g, t->train, &tr)) return 1;
        printf("training data: sources %d  exact match %.3f  BLEU %.3f  ceiling %.3f\n", tr.sources, tr.exact,
               tr.bleu, tr.ceiling);
        test_loss = dataset_loss(&t->m, t->g, &t->dt, &t->b, o->batch);
        if (evaluate(&t->m, t->g, t->test, &te)) return 1;
        printf("held-out:      sources %d  exact match %.3f  BLEU %.3f  ceiling %.3f  loss %.4f\n", te.sources,
               te.exact, te.bleu, te.ceiling, test_loss);
    }
    if (o->html && write_training_page(&c, &tr, &te, test_loss)) return 1;
    if (!o->json) return 0;
    report_file out;
    FILE *json = report_open(&out, prog, o->json);
    if (json) {
        fprintf(json, "{\"epochs\": %d, \"loss\": %.6f, \"seconds\": %.2f, \"init\": \"%s\"", t->ts.epoch,
                t->last_loss, now() - t->t_start, init_names[t->m.cfg.init]);
        fprintf(json, ", \"pre_norm\": %d, \"qk_norm\": %d", t->m.cfg.pre_norm, t->m.cfg.qk_norm);
        if (t->test) {
            fprintf(json, ", \"test_loss\": %.6f", test_loss);
            json_metrics(json, "", &te);
            json_metrics(json, "train_", &tr);
        }
        json_probe(json, &c);
        fprintf(json, "}\n");
        return report_close(&out, prog);
    }
    return 1;
}

static void trainer_free(trainer *t)
{
    ag_safetensors_free(t->resume);
    ag_optim_free(t->opt);
    ag_seq2seq_team_free(t->team);
    ag_graph_free(t->g);
    free(t->order), free(t->b.src), free(t->b.tgt_in), free(t->b.tgt_out), free(t->b.src_valid);
    free(t->curve), free(t->test_curve), free(t->probe), free(t->probed);
    dataset_free(&t->d), dataset_free(&t->dt);
    model_free(&t->m);
    ag_pairs_free(t->train), ag_pairs_free(t->test);
}

int cmd_train(const opts *given)
{
    opts mine = *given; /* under mpirun, process 0 alone prints and writes files */
    if (dist_rank() > 0) mine.quiet = 1, mine.plot = mine.json = mine.entropy_plot = mine.save_init = mine.trace = NULL;
    const opts *o = &mine;
    trainer t = {.o = o};
    int rc = check_flags(o);
    if (!rc) rc = load_data(&t);
    if (!rc) rc = o->resume ? resume_model(&t) : new_model(&t);
    if (!rc) rc = make_batches(&t);
    if (!rc) rc = make_optimizer(&t);
    if (!rc) rc = plan_schedule(&t);
    if (!rc) rc = save_start(&t);
    if (!rc) catch_stop_signals();
    while (!rc && !stop_signal && t.ts.epoch < t.stop_epoch) rc = train_epoch(&t);
    if (close_trace(&t) && !rc) rc = 1;
    if (!rc && stop_signal) rc = save_interrupted(&t);
    else if (!rc) {
        if (o->plot) {
            train_curves c = curves_of(&t);
            rc = write_loss_plot(&c);
        }
        if (!rc) rc = save_checkpoint(&t);
        if (!rc && !o->quiet) printf("saved %s (%.1fs)\n", o->out, now() - t.t_start);
        if (!rc) rc = stop_signal ? 128 + stop_signal : report(&t);
    }
    trainer_free(&t);
    return rc;
}
