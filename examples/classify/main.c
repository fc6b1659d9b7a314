/* classify: which language is this sentence in, English or French?  An
 * encoder-only Transformer (model.c) trained on the pairs file, scored by
 * its accuracy on the held-out sentences.
 *
 *   classify --data FILE [--steps 400] [--batch 32] [--max-len 32] [--hidden 64]
 *            [--heads 4] [--ffn 128] [--layers 2] [--lr 1e-3] [--seed 0] [--seeds 1]
 *            [--quiet]
 *
 * With --seeds N it trains N models (seeds seed .. seed + N - 1) and
 * prints each one's accuracy and their mean.  Adam, gradient clipping at
 * 1, batches drawn at random from the training sentences; one thread.
 * Exit status: 0 ok, 1 a file or the data is bad, 2 bad usage. */
#include "classify.h"
#include "../common/model_check.h"
#include "../common/whole_number.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *prog = "classify";

typedef struct opts {
    const char *data;
    int steps, batch, seeds, quiet;
    double lr;
    long seed;
    classifier_config model;
    model_check_opts check; /* gradcheck's --directions, --walk, --break, --by */
} opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: %s --data FILE [--steps 400] [--batch 32] [--max-len 32] [--hidden 64] [--heads 4]\n"
               "                [--ffn 128] [--layers 2] [--lr 1e-3] [--seed 0] [--seeds 1] [--quiet]\n"
               "       %s64 gradcheck --data FILE [the model flags, --batch, --seed] [--directions 4] [--walk]\n"
               "                [--break OP [--by 1.01]]\n",
            prog, prog);
}

static int whole(const char *flag, const char *s, long lo, long hi, long *out)
{
    return whole_number(prog, flag, s, lo, hi, out);
}

static int parse(int argc, char **argv, int first, opts *o)
{
    *o = (opts){.steps = 400, .batch = 32, .seeds = 1, .lr = 1e-3,
                .model = {.max_len = 32, .hidden = 64, .heads = 4, .ffn = 128, .layers = 2}, .check = {.by = 1.01}};
    long directions = 0;
    struct { const char *flag; int *to; long lo, hi; } ints[] = {
        {"--steps", &o->steps, 1, 1000000},      {"--batch", &o->batch, 1, 4096},
        {"--max-len", &o->model.max_len, 1, 1024}, {"--hidden", &o->model.hidden, 1, 4096},
        {"--heads", &o->model.heads, 1, 256},    {"--ffn", &o->model.ffn, 1, 65536},
        {"--layers", &o->model.layers, 0, 64},   {"--seeds", &o->seeds, 1, 100},
    };
    for (int i = first; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--quiet")) { o->quiet = 1; continue; }
        if (!strcmp(f, "--walk")) { o->check.walk = 1; continue; }
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) { usage(stdout); exit(0); }
        if (i + 1 >= argc) { fprintf(stderr, "%s: %s needs a value\n", prog, f); usage(stderr); return 2; }
        const char *v = argv[++i];
        int known = 0, rc = 0;
        long x;
        for (size_t k = 0; k < sizeof ints / sizeof ints[0] && !known; k++)
            if (!strcmp(f, ints[k].flag)) {
                known = 1;
                if (!(rc = whole(f, v, ints[k].lo, ints[k].hi, &x))) *ints[k].to = (int)x;
            }
        if (!known && !strcmp(f, "--data")) known = 1, o->data = v;
        if (!known && !strcmp(f, "--seed")) known = 1, rc = whole(f, v, 0, 2147483647L, &o->seed);
        if (!known && !strcmp(f, "--break")) known = 1, o->check.break_op = v;
        if (!known && !strcmp(f, "--directions")) known = 1, rc = whole(f, v, 1, 1000, &directions);
        if (!known && !strcmp(f, "--by")) {
            char *end;
            known = 1, errno = 0, o->check.by = strtod(v, &end);
            if (!*v || *end || errno || !isfinite(o->check.by)) {
                fprintf(stderr, "%s: --by needs a number, got '%s'\n", prog, v);
                rc = 2;
            }
        }
        if (!known && !strcmp(f, "--lr")) {
            char *end;
            known = 1, errno = 0, o->lr = strtod(v, &end);
            if (!*v || *end || errno || !(o->lr > 0 && o->lr <= 10)) {
                fprintf(stderr, "%s: --lr needs a number in (0, 10], got '%s'\n", prog, v);
                rc = 2;
            }
        }
        if (!known) { fprintf(stderr, "%s: unknown flag '%s'\n", prog, f); usage(stderr); return 2; }
        if (rc) return rc;
    }
    o->check.directions = (int)directions;
    o->check.seed = (uint64_t)o->seed + 1;
    if (!o->data) { fprintf(stderr, "%s: --data FILE is required\n", prog); usage(stderr); return 2; }
    if (o->model.hidden % o->model.heads) {
        fprintf(stderr, "%s: --hidden %d is not a multiple of --heads %d\n", prog, o->model.hidden, o->model.heads);
        return 2;
    }
    return 0;
}

/* The share of the held-out sentences whose largest logit is their label. */
static ag_status accuracy(ag_graph *g, const classifier *m, const corpus *d, minibatch *b, double *acc)
{
    int right = 0;
    ag_graph_set_training(g, 0);
    ag_graph_set_grad(g, 0);
    for (int at = 0; at < d->n_held; at += b->B) {
        int n = d->n_held - at < b->B ? d->n_held - at : b->B;
        const sentence *rows[n];
        for (int i = 0; i < n; i++) rows[i] = &d->held[at + i];
        minibatch_fill(b, rows, n);
        ag_tensor *guess = ag_argmax(g, classifier_forward(g, m, b), -1, 0); /* [n]: the larger logit */
        if (!guess) return ag_graph_status(g);
        for (int i = 0; i < n; i++) right += (int)guess->data[i] == b->labels[i];
        ag_graph_reset(g);
    }
    ag_graph_set_grad(g, 1);
    ag_graph_set_training(g, 1);
    *acc = (double)right / d->n_held;
    return AG_OK;
}

/* One Adam step on a random batch; its loss into *loss. */
static ag_status train_step(ag_graph *g, const classifier *m, ag_store *s, ag_optim *opt, const corpus *d,
                            minibatch *b, ag_rng *rng, double *loss)
{
    const sentence *rows[b->B > 0 ? b->B : 1];
    int B = b->B;
    for (int i = 0; i < B; i++) rows[i] = &d->train[ag_rng_next(rng) % (uint64_t)d->n_train];
    minibatch_fill(b, rows, B);
    ag_tensor *l = ag_cross_entropy(g, classifier_forward(g, m, b), b->labels, -1, 0);
    if (!l || ag_backward(g, l) != AG_OK) return ag_graph_status(g);
    *loss = l->data[0];
    double norm;
    ag_status st = ag_clip_grad_norm(s, 1.0, &norm);
    if (st == AG_OK) st = ag_optim_step(opt);
    ag_store_zero_grad(s);
    ag_graph_reset(g);
    return st;
}

/* Train one model with this seed; its held-out accuracy into *acc. */
static int train_one(const opts *o, const corpus *d, uint64_t seed, double *acc)
{
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    classifier m = {0};
    minibatch b = {0};
    ag_optim *opt = NULL;
    int rc = 1;
    ag_rng rng;
    ag_rng_seed(&rng, seed ^ 0x5eedc1a55ULL);
    if (!s || !g || minibatch_alloc(&b, o->batch, o->model.max_len)) { fprintf(stderr, "%s: out of memory\n", prog); goto done; }
    if (classifier_init(&m, s, &o->model, seed) != AG_OK || !(opt = ag_adam_new(s, o->lr, 0.9, 0.999, 1e-8, 0, 0))) {
        fprintf(stderr, "%s: %s\n", prog, ag_store_error(s));
        goto done;
    }
    ag_graph_seed(g, seed);
    double loss = 0;
    for (int step = 1; step <= o->steps; step++) {
        if (train_step(g, &m, s, opt, d, &b, &rng, &loss) != AG_OK) {
            fprintf(stderr, "%s: step %d: %s%s\n", prog, step, ag_graph_error(g), ag_optim_error(opt));
            goto done;
        }
        if (!o->quiet && (step % 100 == 0 || step == o->steps)) printf("seed %llu step %d loss %.4f\n", (unsigned long long)seed, step, loss);
    }
    if (accuracy(g, &m, d, &b, acc) != AG_OK) { fprintf(stderr, "%s: %s\n", prog, ag_graph_error(g)); goto done; }
    rc = 0;
done:
    ag_optim_free(opt);
    minibatch_free(&b);
    classifier_free(&m);
    ag_graph_free(g);
    ag_store_free(s);
    return rc;
}

int main(int argc, char **argv)
{
    opts o;
    int check = argc > 1 && !strcmp(argv[1], "gradcheck");
    int rc = parse(argc, argv, 1 + check, &o);
    if (rc) return rc;
    if (check) return classify_gradcheck(o.data, &o.model, o.batch, (uint64_t)o.seed, &o.check);
    corpus d;
    if (corpus_load(&d, o.data, o.model.max_len)) return 1;
    printf("%d training and %d held-out sentences (%d cut to %d bytes)\n", d.n_train, d.n_held, d.truncated,
           o.model.max_len);
    double sum = 0;
    for (int k = 0; k < o.seeds && !rc; k++) {
        double acc = 0;
        rc = train_one(&o, &d, (uint64_t)o.seed + (uint64_t)k, &acc);
        if (!rc) printf("seed %ld: held-out accuracy %.2f%%\n", o.seed + k, 100 * acc);
        sum += acc;
    }
    if (!rc && o.seeds > 1) printf("mean of %d seeds: %.2f%%\n", o.seeds, 100 * sum / o.seeds);
    corpus_free(&d);
    return rc;
}
