/* train.c: `gpt train`: a character-level GPT on a text file.
 *
 * Each step reads B windows of `context` characters at offsets drawn from a
 * seeded stream over the first nine tenths of the text (each position's
 * target is the next character), and takes one Adam step on their mean
 * cross-entropy, after clipping the gradient norm.  Every --eval-every
 * steps, and at the end, the held-out tenth is scored (eval.c).  The
 * checkpoint keeps Adam's moments and both random streams, so --resume
 * continues exactly where a run stopped. */
#include "gpt.h"

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

/* One step: loss, backward, clip, Adam, zero the gradients. */
static ag_status train_step(model *m, ag_graph *g, ag_optim *opt, const int *x, const int *y, int B, double clip,
                            double *loss)
{
    ag_graph_reset(g);
    ag_tensor *l = ag_gpt_loss(g, &m->net, x, y, B, m->cfg.context);
    ag_status st = ag_backward(g, l);
    if (st != AG_OK) return st;
    *loss = (double)l->data[0];
    if ((st = ag_clip_grad_norm(m->store, clip, NULL)) != AG_OK) return st;
    if ((st = ag_optim_step(opt)) != AG_OK) return st;
    ag_store_zero_grad(m->store);
    return AG_OK;
}

/* A new model from the flags, or the one --resume names (the text must
 * have the same characters). */
static int start(const opts *o, model *m, const unsigned char *text, size_t n, ag_st **resume, train_state *ts)
{
    if (o->resume) {
        if (model_load(m, o->resume, resume)) return 1;
        vocab v;
        vocab_from_text(&v, text, n);
        if (v.V != m->voc.V || memcmp(v.chars, m->voc.chars, (size_t)v.V)) {
            fprintf(stderr, "%s: %s has other characters (%d) than the model %s was trained on (%d)\n", prog,
                    o->data, v.V, o->resume, m->voc.V);
            return 1;
        }
        return 0;
    }
    vocab_from_text(&m->voc, text, n);
    ag_activation act = !strcmp(o->activation, "gelu_tanh") ? AG_ACT_GELU_TANH
                        : !strcmp(o->activation, "relu")    ? AG_ACT_RELU
                                                            : AG_ACT_GELU;
    m->cfg = (ag_gpt_config){.vocab = m->voc.V, .context = o->context, .hidden = o->hidden, .heads = o->heads,
                             .ffn = o->ffn, .layers = o->layers, .dropout = o->dropout, .activation = act,
                             .untied = o->untied};
    if (model_build(m, o->seed)) return 1;
    ag_rng_seed(&ts->data_rng, o->seed ^ 0xda7aull);
    ag_rng r;
    ag_rng_seed(&r, o->seed ^ 0xd0ull);
    memcpy(ts->graph_rng, r.s, sizeof ts->graph_rng);
    return 0;
}

/* The curve of the training loss (mean over each interval) and of the
 * held-out loss, one point per evaluation. */
typedef struct history {
    int n, cap;
    int64_t *step;
    double *loss, *val_loss;
} history;

static int history_add(history *h, int64_t step, double loss, double val_loss)
{
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 64;
        int64_t *s = realloc(h->step, (size_t)cap * sizeof *s);
        if (s) h->step = s;
        double *l = realloc(h->loss, (size_t)cap * sizeof *l);
        if (l) h->loss = l;
        double *v = realloc(h->val_loss, (size_t)cap * sizeof *v);
        if (v) h->val_loss = v;
        if (!s || !l || !v) return 1;
        h->cap = cap;
    }
    h->step[h->n] = step, h->loss[h->n] = loss, h->val_loss[h->n] = val_loss;
    h->n++;
    return 0;
}

static void history_free(history *h)
{
    free(h->step), free(h->loss), free(h->val_loss);
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
    FILE *f = fopen(o->json, "w");
    if (!f) {
        fprintf(stderr, "%s: %s: %s\n", prog, o->json, strerror(errno));
        return 1;
    }
    double loss = h->n ? h->loss[h->n - 1] : NAN, val = h->n ? h->val_loss[h->n - 1] : NAN;
    fprintf(f, "{\"steps\": %lld, \"loss\": %.6f, \"val_loss\": %.6f, \"val_bits_per_char\": %.6f, "
               "\"seconds\": %.3f, \"ms_per_step\": %.3f, \"history\": [",
            (long long)steps, loss, val, val / log(2.0), seconds, ms_per_step);
    for (int i = 0; i < h->n; i++)
        fprintf(f, "%s{\"step\": %lld, \"loss\": %.6f, \"val_loss\": %.6f}", i ? ", " : "", (long long)h->step[i],
                h->loss[i], h->val_loss[i]);
    fprintf(f, "]}\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, o->json, strerror(errno));
        return 1;
    }
    return 0;
}

int cmd_train(const opts *o)
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
    unsigned char *text = NULL;
    size_t n = 0;
    int *ids = NULL, *x = NULL, *y = NULL, rc = 1;
    model m = {0};
    ag_st *resume = NULL;
    ag_graph *g = NULL;
    ag_optim *opt = NULL;
    train_state ts = {0};
    history h = {0};

    if (text_load(o->data, &text, &n) || start(o, &m, text, n, &resume, &ts)) goto done;
    int B = o->batch, T = m.cfg.context;
    size_t split = held_out_start(n, T);
    if (split < (size_t)T + 1) {
        fprintf(stderr, "%s: %s: %zu characters for training, need more than the context (%d)\n", prog, o->data,
                split, T);
        goto done;
    }
    ids = malloc(n * sizeof *ids);
    x = malloc((size_t)B * T * sizeof *x);
    y = malloc((size_t)B * T * sizeof *y);
    g = ag_graph_new();
    opt = ag_adam_new(m.store, o->lr, 0.9, 0.999, 1e-8, 0, 0);
    if (!ids || !x || !y || !g || !opt) {
        fprintf(stderr, "%s: out of memory\n", prog);
        goto done;
    }
    if (text_encode(&m.voc, text, n, ids, o->data)) goto done;
    if (resume && model_load_state(resume, &m, opt, &ts, o->resume)) goto done;
    memcpy(ag_graph_rng(g), ts.graph_rng, sizeof ts.graph_rng);
    if (!o->quiet)
        printf("%zu characters (%d distinct), %zu for training; %zu parameters; steps %lld..%d\n", n, m.voc.V, split,
               ag_store_numel(m.store), (long long)ts.step + 1, o->steps);

    double t0 = now(), step_seconds = 0, interval_loss = 0; /* step_seconds: the steps alone, no evaluation */
    int in_interval = 0;
    int64_t first = ts.step;
    for (; ts.step < o->steps; ts.step++) {
        next_batch(&ts.data_rng, ids, split, B, T, x, y);
        double loss, t_step = now();
        ag_status st = train_step(&m, g, opt, x, y, B, o->clip, &loss);
        step_seconds += now() - t_step;
        if (st != AG_OK) {
            fprintf(stderr, "%s: step %lld: %s%s\n", prog, (long long)ts.step + 1,
                    ag_graph_status(g) != AG_OK ? ag_graph_error(g) : ag_optim_last_error(),
                    ag_graph_status(g) != AG_OK ? "" : " (optimizer)");
            goto done;
        }
        interval_loss += loss, in_interval++;
        if ((ts.step + 1) % o->eval_every && ts.step + 1 < o->steps) continue;
        double val;
        size_t count;
        if (dataset_loss(&m, g, ids + split, n - split, B, &val, &count) != AG_OK) {
            fprintf(stderr, "%s: held-out loss: %s\n", prog, ag_graph_error(g));
            goto done;
        }
        double ms = 1e3 * step_seconds / (double)(ts.step + 1 - first);
        if (!o->quiet)
            printf("step %5lld  loss %.4f  held-out %.4f (%.3f bits/char)  %.2f ms/step\n", (long long)ts.step + 1,
                   interval_loss / in_interval, val, val / log(2.0), ms);
        if (history_add(&h, ts.step + 1, interval_loss / in_interval, val)) {
            fprintf(stderr, "%s: out of memory\n", prog);
            goto done;
        }
        interval_loss = 0, in_interval = 0;
    }
    double seconds = now() - t0;
    memcpy(ts.graph_rng, ag_graph_rng(g), sizeof ts.graph_rng);
    if (model_save(&m, opt, &ts, o->out)) goto done;
    if (!o->quiet) printf("wrote %s\n", o->out);
    if (o->plot && write_plot(o, &h)) goto done;
    double ms = ts.step > first ? 1e3 * step_seconds / (double)(ts.step - first) : 0;
    if (o->json && write_json(o, &h, ts.step, seconds, ms)) goto done;
    rc = 0;
done:
    history_free(&h);
    ag_optim_free(opt);
    ag_graph_free(g);
    ag_st_free(resume);
    model_free(&m);
    free(text), free(ids), free(x), free(y);
    return rc;
}
