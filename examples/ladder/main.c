/* ladder: a ladder of experiments, one idea per rung (ladder.h lists
 * them), and two tasks where attention must do something visible.
 *
 *   ladder [all | RUNG ...] [--data FILE] [--steps 2000] [--seed 0] [--svg PREFIX] [--quiet]
 *   ladder RUNG [...] [--input LINE] [--html PAGE] [--json FILE] [--live PAGE [--wasm FILE]] [--progress]
 *   ladder copy | reverse [--steps 1500] [--seed 0] [--svg PREFIX] [--quiet]
 *
 * Each rung trains on the English side of the pairs file, one thread, the
 * same steps and seed, and prints its held-out bits per character and the
 * seconds it took; --svg PREFIX draws each attention layer's weights on a
 * held-out line to PREFIX_rung<N>_layer<L>.svg (the tasks: PREFIX_layer<L>.svg).
 * --html, --json and --live (one rung, 3 to 8) write the explorer's page of
 * the rung reading LINE (explore.c); `--json -` prints the data alone.
 * --progress prints "step n of N loss x" (nats) on stderr after each step,
 * and with `--json -` the data of the model so far after each step (an
 * RS character after each).
 * With a page asked for, Ctrl-C (or the live page's stop button) ends the
 * training after the step in flight, and the page shows the model so far.
 * Exit status: 0 ok, 1 a file or the data is bad, 2 bad usage. */
#include "ladder.h"
#include "../common/whole_number.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *prog = "ladder";

typedef struct opts {
    const char *data, *svg, *task;
    int rungs[NRUNGS], nrungs;
    train_opts train;
    explore_opts page;
} opts;

static int usage(void)
{
    fprintf(stderr, "usage: %s [all | RUNG ...] [--data FILE] [--steps 2000] [--seed 0] [--svg PREFIX] [--quiet]\n"
                    "       [--precision fp32|bf16]\n"
                    "       %s RUNG [...] [--input LINE] [--html PAGE] [--json FILE] [--live PAGE [--wasm FILE]]\n"
                    "                     [--progress]\n"
                    "       %s copy | reverse [--steps 1500] [--seed 0] [--svg PREFIX] [--quiet]\n"
                    "rungs: 1 bigram, 2 positions, 3 one head, 4 heads, 5 feed-forward, 6 residual,\n"
                    "       7 post-norm, 8 pre-norm\n",
            prog, prog, prog);
    return 2;
}

static int whole(const char *what, const char *s, long lo, long hi, long *out)
{
    return whole_number(prog, what, s, lo, hi, out);
}

static int parse(int argc, char **argv, opts *o)
{
    long v;
    *o = (opts){.data = "examples/data/eng-fra.tsv", .train = {.steps = 0, .batch = 32, .lr = 1e-3},
                .page = {.argv0 = argv[0], .input = "I lost my keys."}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--quiet")) o->train.quiet = 1;
        else if (!strcmp(a, "--progress")) o->train.progress = 1;
        else if (!strcmp(a, "all")) for (int r = 1; r <= NRUNGS; r++) o->rungs[o->nrungs++] = r;
        else if (!strcmp(a, "copy") || !strcmp(a, "reverse")) o->task = a;
        else if (a[0] != '-') {
            if (whole("a rung", a, 1, NRUNGS, &v)) return usage();
            if (o->nrungs < NRUNGS) o->rungs[o->nrungs++] = (int)v;
        } else if (i + 1 >= argc) {
            fprintf(stderr, "%s: %s needs a value\n", prog, a);
            return usage();
        } else if (!strcmp(a, "--data")) o->data = argv[++i];
        else if (!strcmp(a, "--svg")) o->svg = argv[++i];
        else if (!strcmp(a, "--html")) o->page.html = argv[++i];
        else if (!strcmp(a, "--json")) o->page.json = argv[++i];
        else if (!strcmp(a, "--live")) o->page.live = argv[++i];
        else if (!strcmp(a, "--wasm")) o->page.wasm = argv[++i];
        else if (!strcmp(a, "--input")) o->page.input = argv[++i];
        else if (!strcmp(a, "--steps")) {
            if (whole(a, argv[++i], 1, 1000000, &v)) return 2;
            o->train.steps = (int)v;
        } else if (!strcmp(a, "--seed")) {
            if (whole(a, argv[++i], 0, 2147483647L, &v)) return 2;
            o->train.seed = (uint64_t)v;
        } else if (!strcmp(a, "--precision")) { /* the products' (docs/precision.md) */
            ag_precision p;
            if (ag_precision_parse(argv[++i], &p)) {
                fprintf(stderr, "%s: --precision must be fp32 or bf16, got '%s'\n", prog, argv[i]);
                return usage();
            }
            ag_set_precision(p);
        } else {
            fprintf(stderr, "%s: unknown flag '%s'\n", prog, a);
            return usage();
        }
    }
    if (o->task && o->nrungs) {
        fprintf(stderr, "%s: a task (%s) or rungs, not both\n", prog, o->task);
        return usage();
    }
    if (!o->task && !o->nrungs) return usage();
    if (!o->train.steps) o->train.steps = o->task ? 1500 : 2000;
    if ((o->page.html || o->page.json || o->page.live) && (o->task || o->nrungs != 1)) {
        fprintf(stderr, "%s: --html, --json and --live show one rung\n", prog);
        return usage();
    }
    if ((o->page.html || o->page.json || o->page.live) && o->rungs[0] < ONE_HEAD) {
        fprintf(stderr, "%s: rung %d has no attention to show (rungs %d to %d have)\n", prog, o->rungs[0], ONE_HEAD,
                NRUNGS);
        return 2;
    }
    if (o->page.json && !strcmp(o->page.json, "-")) o->train.quiet = 1; /* stdout is the data's */
    o->page.data = o->data, o->page.steps = o->train.steps, o->page.seed = o->train.seed;
    return 0;
}

static int to_stdout(const opts *o) { return o->page.json && !strcmp(o->page.json, "-"); }

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* --progress with --json -: the page's data of the model so far, then an
 * RS character (the texts of a sequence end with one, the last one aside),
 * so that the live page keeps the last one when its stop button ends the
 * run. */
typedef struct snapshot_ctx {
    const text *t;
    explore_opts page;
} snapshot_ctx;

static int snapshot(const ladder_model *m, int steps, void *ctx)
{
    snapshot_ctx *c = ctx;
    c->page.steps = steps;
    int rc = explore_rung(m, c->t, &c->page);
    fputc('\x1e', stdout);
    return rc || fflush(stdout) != 0;
}

/* Train rung r on t; print its row of the table (not when the data goes to
 * stdout); draw its attention; write its explorer page. */
static int run_rung(const opts *o, const text *t, int r)
{
    ladder_config cfg = {.rung = r, .V = t->V, .context = 32, .hidden = 64, .heads = 4, .ffn = 256, .layers = 2};
    ladder_model m;
    ag_store *s = ag_store_new();
    double t0 = seconds(), bits = 0;
    int rc = 1, pages = o->page.html || o->page.json || o->page.live;
    /* a page may be of a rung stopped early (Ctrl-C, the live page's stop): the steps it took */
    explore_opts page = o->page;
    train_opts to = o->train;
    if (pages) to.done = &page.steps;
    snapshot_ctx shots = {t, o->page};
    if (to.progress && to_stdout(o)) to.snapshot = snapshot, to.snapshot_ctx = &shots;
    if (!s || ladder_init(&m, s, &cfg, o->train.seed) != AG_OK)
        fprintf(stderr, "%s: %s\n", prog, s ? ag_store_error(s) : "out of memory");
    else if (train(&m, s, &to, text_loss, (void *)t) == AG_OK &&
             (to_stdout(o) || held_out_bits(&m, t, &bits) == AG_OK)) {
        if (!to_stdout(o)) printf("| %d | %-15s | %6.3f | %5.1f |\n", r, rung_idea[r], bits, seconds() - t0);
        fflush(stdout);
        if (page.steps < o->train.steps)
            fprintf(stderr, "%s: stopped after %d of %d steps: the page shows the model as trained so far\n", prog,
                    page.steps, o->train.steps);
        rc = pages ? explore_rung(&m, t, &page) : 0;
        if (!rc && o->svg && r >= ONE_HEAD) {
            const char *labels[32];
            static char chars[32][2];
            for (int i = 0; i < 32; i++) {
                chars[i][0] = (char)t->chars[t->ids[t->split + i]];
                labels[i] = chars[i][0] == '\n' ? "\\n" : chars[i];
            }
            char prefix[512];
            snprintf(prefix, sizeof prefix, "%s_rung%d", o->svg, r);
            rc = draw_attention(&m, t->ids + t->split, 32, labels, prefix);
        }
    }
    ladder_free(&m);
    ag_store_free(s);
    return rc;
}

int main(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    if (o.task) return run_task(o.task, &o.train, o.svg);
    text t;
    if (text_load(&t, o.data, 32)) return 1;
    if (!to_stdout(&o)) {
        printf("%zu characters (%d distinct), the last %zu held out; %d steps of %d windows of 32, one thread\n\n",
               t.n, t.V, t.n - t.split, o.train.steps, o.train.batch);
        printf("| rung | idea | held-out bits/char | seconds |\n|---:|---|---:|---:|\n");
    }
    for (int i = 0; i < o.nrungs && !rc; i++) rc = run_rung(&o, &t, o.rungs[i]);
    text_free(&t);
    return rc;
}
