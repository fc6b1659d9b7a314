/* train.c: `gpt train`, a character-level GPT on a text file, as a list of
 * named steps:
 *
 *   check_flags       the flags that only make sense together
 *   load_text         the corpus
 *   new_model         vocabulary and model from the flags, or
 *   resume_model      both from --resume (the text must have its characters)
 *   make_optimizer    Adam; on --resume its moments and the run's state
 *   make_batches      the text as ids, room for a batch, the graph
 *   for each step:    train_step: a batch, loss, backward, clip, Adam;
 *                     evaluate: every --eval-every steps and after the last
 *   save_and_report   the checkpoint, crash-safely to --out; plot and JSON
 *
 * Each step reads B windows of `context` characters at offsets drawn from a
 * seeded stream over the first nine tenths of the text (each position's
 * target is the next character), and takes one Adam step on their mean
 * cross-entropy, after clipping the gradient norm.  The held-out tenth is
 * scored by eval.c.
 *
 * Invariant: the file at --out, when written, holds everything the run's
 * continuation depends on (weights, Adam's moments, the step count, both
 * random streams, the loss of the interval being logged), so --resume from
 * it reproduces the uninterrupted run bit for bit.  SIGINT and SIGTERM only
 * set a flag (examples/common/stop_signal.h); the loop checks it after each
 * step, saves there and exits 128 + signal. */
#define _XOPEN_SOURCE 700 /* SA_RESTART, SA_RESETHAND */
#include "gpt.h"
#include "../common/dist.h"
#include "../common/report_file.h"
#include "../common/explorer_json.h"
#include "../common/stop_signal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* B windows x [B, T] and their next characters y [B, T] from ids[0..n). */
static void next_batch(ag_rng *r, const int *ids, size_t n, int B, int T, int *x, int *y)
{
    for (int b = 0; b < B; b++) {
        size_t at = (size_t)(ag_rng_next(r) % (uint64_t)(n - (size_t)T));
        memcpy(x + (size_t)b * T, ids + at, (size_t)T * sizeof *x);
        memcpy(y + (size_t)b * T, ids + at + 1, (size_t)T * sizeof *y);
    }
}

/* The curve of the training loss (mean over each interval) and of the
 * held-out loss, one point per evaluation; with --html, each layer's
 * attention entropy too (layers values a point). */
typedef struct history {
    int n, cap, layers;
    int64_t *step;
    double *loss, *val_loss, *entropy;
} history;

static int history_add(history *h, int64_t step, double loss, double val_loss, const double *entropy)
{
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 64;
        int64_t *s = realloc(h->step, (size_t)cap * sizeof *s);
        if (s) h->step = s;
        double *l = realloc(h->loss, (size_t)cap * sizeof *l);
        if (l) h->loss = l;
        double *v = realloc(h->val_loss, (size_t)cap * sizeof *v);
        if (v) h->val_loss = v;
        double *e = h->layers ? realloc(h->entropy, (size_t)cap * h->layers * sizeof *e) : NULL;
        if (e) h->entropy = e;
        if (!s || !l || !v || (h->layers && !e)) return 1;
        h->cap = cap;
    }
    h->step[h->n] = step, h->loss[h->n] = loss, h->val_loss[h->n] = val_loss;
    if (h->layers) memcpy(h->entropy + (size_t)h->n * h->layers, entropy, (size_t)h->layers * sizeof *entropy);
    h->n++;
    return 0;
}

static void history_free(history *h)
{
    free(h->step), free(h->loss), free(h->val_loss), free(h->entropy);
}

typedef struct trainer {
    const opts *o;
    unsigned char *text;    /* the corpus, n bytes */
    size_t n, split;        /* ids[0..split) for training, ids[split..n) held out */
    int *ids;               /* the text as the model's ids */
    model m;
    ag_safetensors *resume; /* the checkpoint, open until the optimizer is restored */
    train_state ts;         /* where the run is: saved with the model */
    ag_optim *opt;
    int *x, *y;             /* a batch: B windows [B, T] and their next characters */
    ag_graph *g;
    parts parts;            /* the batch's parts: --parts N threads, or mpirun's processes */
    history h;              /* for --plot and --json */
    int64_t first;          /* ts.step when this run began */
    double t_start, step_seconds; /* step_seconds: the steps alone, no evaluation */
} trainer;

/* ---- setting up ------------------------------------------------------------ */

static int check_flags(const opts *o)
{
    if (!o->data || !o->out) {
        fprintf(stderr, "%s: train needs --data FILE and --out MODEL\n", prog);
        usage(stderr);
        return 2;
    }
    if (o->hidden % o->heads) {
        fprintf(stderr, "%s: --hidden %d is not a multiple of --heads %d\n", prog, o->hidden, o->heads);
        usage(stderr);
        return 2;
    }
    return 0;
}

static int load_text(trainer *t)
{
    return text_load(t->o->data, &t->text, &t->n);
}

static int new_model(trainer *t)
{
    const opts *o = t->o;
    model *m = &t->m;
    vocab_from_text(&m->voc, t->text, t->n);
    ag_activation act = !strcmp(o->activation, "gelu_tanh") ? AG_ACT_GELU_TANH
                        : !strcmp(o->activation, "relu")    ? AG_ACT_RELU
                                                            : AG_ACT_GELU;
    m->cfg = (ag_gpt_config){.vocab = m->voc.V, .context = o->context, .hidden = o->hidden, .heads = o->heads,
                             .ffn = o->ffn, .layers = o->layers, .dropout = o->dropout, .activation = act,
                             .untied = o->untied};
    if (model_build(m, o->seed)) return 1;
    ag_rng_seed(&t->ts.data_rng, o->seed ^ 0xda7aull);
    ag_rng r;
    ag_rng_seed(&r, o->seed ^ 0xd0ull);
    memcpy(t->ts.graph_rng, r.s, sizeof t->ts.graph_rng);
    return 0;
}

static int resume_model(trainer *t)
{
    const opts *o = t->o;
    if (model_load(&t->m, o->resume, &t->resume)) return 1;
    vocab v;
    vocab_from_text(&v, t->text, t->n);
    if (v.V != t->m.voc.V || memcmp(v.chars, t->m.voc.chars, (size_t)v.V)) {
        fprintf(stderr, "%s: %s has other characters (%d) than the model %s was trained on (%d)\n", prog, o->data,
                v.V, o->resume, t->m.voc.V);
        return 1;
    }
    return 0;
}

static int make_optimizer(trainer *t)
{
    t->opt = ag_adam_new(t->m.store, t->o->lr, 0.9, 0.999, 1e-8, 0, 0);
    if (!t->opt) {
        fprintf(stderr, "%s: optimizer: %s\n", prog, ag_store_error(t->m.store));
        return 1;
    }
    if (!t->resume) return 0;
    int rc = model_load_state(t->resume, &t->m, t->opt, &t->ts, t->o->resume);
    ag_safetensors_free(t->resume);
    t->resume = NULL;
    return rc;
}

static int make_batches(trainer *t)
{
    const opts *o = t->o;
    int B = o->batch, T = t->m.cfg.context;
    t->split = held_out_start(t->n, T);
    if (t->split < (size_t)T + 1) {
        fprintf(stderr, "%s: %s: %zu characters for training, need more than the context (%d)\n", prog, o->data,
                t->split, T);
        return 1;
    }
    t->ids = malloc(t->n * sizeof *t->ids);
    t->x = malloc((size_t)B * T * sizeof *t->x);
    t->y = malloc((size_t)B * T * sizeof *t->y);
    t->g = ag_graph_new();
    if (!t->ids || !t->x || !t->y || !t->g) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    if (text_encode(&t->m.voc, t->text, t->n, t->ids, o->data)) return 1;
    memcpy(ag_graph_rng(t->g), t->ts.graph_rng, sizeof t->ts.graph_rng);
    int rc = parts_new(&t->parts, &t->m, o->parts);
    if (rc) return rc;
    if (!o->quiet)
        printf("%zu characters (%d distinct), %zu for training; %zu parameters; steps %lld..%d\n", t->n, t->m.voc.V,
               t->split, ag_store_numel(t->m.store), (long long)t->ts.step + 1, o->steps);
    t->first = t->ts.step;
    t->t_start = now();
    return 0;
}

/* ---- a step ------------------------------------------------------------------ */

/* One step on the next batch: loss, backward, clip, Adam, zero the
 * gradients; the loss joins the interval's. */
static int train_step(trainer *t)
{
    model *m = &t->m;
    int B = t->o->batch, T = m->cfg.context;
    next_batch(&t->ts.data_rng, t->ids, t->split, B, T, t->x, t->y);
    double t0 = now();
    ag_graph_reset(t->g);
    double loss;
    if (parts_step(&t->parts, t->g, t->x, t->y, B, T, &loss) != AG_OK) {
        fprintf(stderr, "%s: step %lld: %s\n", prog, (long long)t->ts.step + 1, ag_graph_error(t->g));
        return 1;
    }
    /* clip, update and zero the gradients in one pass over the parameters */
    if (ag_optim_step_clip_zero(t->opt, t->o->clip, NULL) != AG_OK) {
        fprintf(stderr, "%s: step %lld: %s\n", prog, (long long)t->ts.step + 1, ag_optim_error(t->opt));
        return 1;
    }
    t->step_seconds += now() - t0;
    t->ts.step++;
    t->ts.loss_sum += loss, t->ts.loss_steps++;
    if (dist_size() > 1) stop_signal = dist_max(stop_signal); /* all stop after the same step */
    return 0;
}

/* Every --eval-every steps and after the last: the held-out loss, the log
 * line, a point of the curve; the interval starts again. */
static int evaluate(trainer *t)
{
    const opts *o = t->o;
    train_state *ts = &t->ts;
    if (ts->step % o->eval_every && ts->step < o->steps) return 0;
    if (dist_rank() > 0) { /* process 0 scores, logs and plots */
        ts->loss_sum = 0, ts->loss_steps = 0;
        return 0;
    }
    double val, loss = ts->loss_sum / ts->loss_steps;
    size_t count;
    if (dataset_loss(&t->m, t->g, t->ids + t->split, t->n - t->split, o->batch, &val, &count) != AG_OK) {
        fprintf(stderr, "%s: held-out loss: %s\n", prog, ag_graph_error(t->g));
        return 1;
    }
    /* the attention's entropy on the held-out text's first window (--html) */
    double ent[64] = {0};
    size_t held = t->n - t->split;
    int T = held < (size_t)t->m.cfg.context ? (int)held : t->m.cfg.context;
    t->h.layers = o->html ? t->m.cfg.layers : 0;
    if (t->h.layers && attention_entropy(&t->m, t->ids + t->split, T, ent)) return 1;
    double ms = 1e3 * t->step_seconds / (double)(ts->step - t->first);
    if (!o->quiet)
        printf("step %5lld  loss %.4f  held-out %.4f (%.3f bits/char)  %.2f ms/step\n", (long long)ts->step, loss,
               val, val / log(2.0), ms);
    if (history_add(&t->h, ts->step, loss, val, ent)) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    ts->loss_sum = 0, ts->loss_steps = 0;
    return 0;
}

/* ---- the end ------------------------------------------------------------------- */

static int save_checkpoint(trainer *t)
{
    if (dist_rank() > 0) return 0; /* process 0 writes it */
    memcpy(t->ts.graph_rng, ag_graph_rng(t->g), sizeof t->ts.graph_rng);
    return model_save(&t->m, t->opt, &t->ts, t->o->out);
}

/* After a signal: the checkpoint, and the exit status that names the signal. */
static int save_interrupted(trainer *t)
{
    int sig = stop_signal;
    if (save_checkpoint(t)) return 1;
    if (dist_rank() == 0)
        fprintf(stderr, "%s: %s: stopped after step %lld; saved %s (continue with --resume %s)\n", prog,
                stop_signal_name(sig), (long long)t->ts.step, t->o->out, t->o->out);
    return 128 + sig;
}

static int write_plot(const opts *o, const history *h)
{
    const double *ys[2] = {h->loss, h->val_loss};
    const char *names[2] = {"training", "held-out"};
    int ns[2] = {h->n, h->n};
    char title[128], err[512];
    snprintf(title, sizeof title, "gpt loss (cross-entropy per character), a point every %d steps", o->eval_every);
    if (ag_svg_line_plot(o->plot, title, "evaluation", "loss", 2, names, ys, ns, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    if (!o->quiet) printf("wrote %s\n", o->plot);
    return 0;
}

static int write_json(const opts *o, const history *h, int64_t steps, double seconds, double ms_per_step)
{
    report_file out;
    FILE *f = report_open(&out, prog, o->json);
    if (!f) return 1;
    double loss = h->n ? h->loss[h->n - 1] : NAN, val = h->n ? h->val_loss[h->n - 1] : NAN;
    fprintf(f, "{\"steps\": %lld, \"loss\": %.6f, \"val_loss\": %.6f, \"val_bits_per_char\": %.6f, "
               "\"seconds\": %.3f, \"ms_per_step\": %.3f, \"history\": [",
            (long long)steps, loss, val, val / log(2.0), seconds, ms_per_step);
    for (int i = 0; i < h->n; i++)
        fprintf(f, "%s{\"step\": %lld, \"loss\": %.6f, \"val_loss\": %.6f}", i ? ", " : "", (long long)h->step[i],
                h->loss[i], h->val_loss[i]);
    fprintf(f, "]}\n");
    return report_close(&out, prog);
}

/* The explorer's training page (--html): the losses and each layer's
 * attention entropy against the step. */
static int write_page(const opts *o, const history *h)
{
    explorer_out x;
    FILE *f = explorer_open(&x, prog);
    if (!f) return 1;
    fprintf(f, "{\"kind\": \"training\", \"model\": \"gpt\", \"x_label\": \"step\", \"x\": [");
    for (int i = 0; i < h->n; i++) fprintf(f, "%s%lld", i ? ", " : "", (long long)h->step[i]);
    const char *loss = "\"group\": \"loss (cross-entropy per character)\"";
    fprintf(f, "], \"series\": [\n{\"name\": \"training loss\", %s, \"y\": ", loss);
    json_doubles(f, h->loss, h->n);
    fprintf(f, "},\n{\"name\": \"held-out loss\", %s, \"y\": ", loss);
    json_doubles(f, h->val_loss, h->n);
    for (int l = 0; l < h->layers; l++) {
        fprintf(f, "},\n{\"name\": \"layer %d\", \"group\": \"attention entropy per layer (nats, held-out window)\", ", l);
        fprintf(f, "\"y\": [");
        for (int i = 0; i < h->n; i++) fputs(i ? ", " : "", f), json_number(f, h->entropy[(size_t)i * h->layers + l]);
        fputc(']', f);
    }
    fprintf(f, "}], \"summary\": {\"held-out loss\": "), json_number(f, h->n ? h->val_loss[h->n - 1] : NAN);
    fprintf(f, ", \"held-out bits per character\": "), json_number(f, h->n ? h->val_loss[h->n - 1] / log(2.0) : NAN);
    fprintf(f, "}}\n");
    int rc = explorer_close(&x, prog, o->html, "attograd explorer: training the GPT");
    if (!rc && !o->quiet) printf("wrote %s\n", o->html);
    return rc;
}

/* The model, then the plot, the page and the JSON. */
static int save_and_report(trainer *t)
{
    const opts *o = t->o;
    double seconds = now() - t->t_start;
    if (save_checkpoint(t)) return 1;
    if (!o->quiet) printf("wrote %s\n", o->out);
    if (o->plot && write_plot(o, &t->h)) return 1;
    if (o->html && write_page(o, &t->h)) return 1;
    int64_t steps = t->ts.step - t->first;
    double ms = steps > 0 ? 1e3 * t->step_seconds / (double)steps : 0;
    return o->json && write_json(o, &t->h, t->ts.step, seconds, ms);
}

static void trainer_free(trainer *t)
{
    history_free(&t->h);
    ag_optim_free(t->opt);
    parts_free(&t->parts);
    ag_graph_free(t->g);
    ag_safetensors_free(t->resume);
    model_free(&t->m);
    ag_file_free((char *)t->text), free(t->ids), free(t->x), free(t->y);
}

int cmd_train(const opts *given)
{
    opts mine = *given; /* under mpirun, process 0 alone prints and writes files */
    if (dist_rank() > 0) mine.quiet = 1, mine.plot = mine.json = NULL;
    const opts *o = &mine;
    trainer t = {.o = o};
    int rc = check_flags(o);
    if (!rc) rc = load_text(&t);
    if (!rc) rc = o->resume ? resume_model(&t) : new_model(&t);
    if (!rc) rc = make_optimizer(&t);
    if (!rc) rc = make_batches(&t);
    if (!rc) catch_stop_signals();
    while (!rc && !stop_signal && t.ts.step < o->steps) rc = train_step(&t) || evaluate(&t);
    if (!rc) rc = stop_signal ? save_interrupted(&t) : save_and_report(&t);
    trainer_free(&t);
    return rc;
}
