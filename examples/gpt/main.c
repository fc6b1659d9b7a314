/* gpt: a character-level GPT, trained, scored and sampled from the command
 * line.
 *
 *   gpt train  --data FILE --out MODEL [options]      (--resume MODEL continues)
 *   gpt eval   --model MODEL --data FILE [--all] [--json FILE]
 *   gpt sample --model MODEL [--prompt TEXT] [--length 200] [--temperature 1]
 *              [--top-k 0] [--top-p 1] [--seed 0] [--head-off self:LAYER:HEAD]... [--show-dist N]
 *   gpt64 gradcheck --data FILE [model flags] [--directions 4] [--walk] [--break OP [--by X]]
 *
 * The model is ag_gpt (src/nn/gpt.c): pre-LayerNorm decoder-only blocks,
 * learned positions, a GELU MLP, the output layer tied to the character
 * embedding; tests/reference/gpt.py is its PyTorch twin under the same
 * parameter names.  This file parses the flags; the work is in train.c,
 * eval.c and sample.c.
 *
 * Exit status: 0 ok, 1 a file or the data is bad, 2 bad usage, 130 / 143
 * training stopped by SIGINT / SIGTERM after saving a checkpoint to --out. */
#include "gpt.h"
#include "../common/dist.h"

#include "../common/input_path.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *prog = "gpt";

void usage(FILE *f)
{
    fprintf(f,
            "usage: %s train --data FILE --out MODEL [--steps 2000] [--batch 32] [--context 32]\n"
            "                [--hidden 64] [--heads 4] [--ffn 256] [--layers 2] [--activation gelu|gelu_tanh|relu]\n"
            "                [--untied] [--dropout 0] [--lr 1e-3] [--clip 1.0] [--seed 0] [--threads N] [--parts N]\n"
            "                [--precision fp32|bf16]\n"
            "                [--eval-every 100] [--resume MODEL] [--json FILE] [--plot LOSS.svg] [--html PAGE.html] [--quiet]\n"
            "       %s eval --model MODEL --data FILE [--all] [--batch 32] [--json FILE] [--threads N]\n"
            "       %s sample --model MODEL [--prompt TEXT] [--length 200] [--temperature 1.0] [--top-k 0] [--top-p 1]\n"
            "                [--seed 0] [--threads N] [--html PAGE.html] [--json FILE] [--live PAGE.html [--wasm FILE]]\n"
            "                [--head-off self:LAYER:HEAD]... [--show-dist N]\n"
            "       %s64 gradcheck --data FILE [train's model flags, --batch, --seed] [--directions 4] [--walk]\n"
            "                [--break OP [--by 1.01]]\n"
            "\n"
            "sample: --top-p P keeps the most probable characters that together hold at least P (after\n"
            "  --temperature and --top-k; every tie of the last kept); --show-dist N prints the N most probable\n"
            "  first characters, before and after those filters.\n"
            "sample: --head-off self:1:0 switches head 0 of layer 1's self-attention off (its output times 0),\n"
            "  at most %d times.\n"
            "train: --parts N splits each batch among N threads (data parallel); under mpirun (make MPI=1)\n"
            "  the processes are the parts, with the same numbers as --parts N.\n"
            "train: SIGINT or SIGTERM (Ctrl-C) ends the current step, saves a checkpoint to --out that\n"
            "  --resume continues bit for bit, and exits 130 or 143; a second signal stops at once.\n"
            "Inputs (--data, --model, --resume) may be pipes, as <(zcat text.gz), or - for stdin (one\n"
            "  of them): read to the end, checked as a file.  AG_INPUT_LIMIT=BYTES bounds every input.\n",
            prog, prog, prog, prog, HEADS_OFF_MAX);
}

static int bad_value(const char *flag, const char *want, const char *got)
{
    fprintf(stderr, "%s: %s needs %s, got '%s'\n", prog, flag, want, got);
    usage(stderr);
    return 2;
}

/* A whole number in [lo, hi]. */
static int whole(const char *flag, const char *s, long lo, long hi, int *out)
{
    char *end, want[80];
    errno = 0;
    long v = strtol(s, &end, 10);
    snprintf(want, sizeof want, "a whole number from %ld to %ld", lo, hi);
    if (!*s || *end || errno || v < lo || v > hi) return bad_value(flag, want, s);
    *out = (int)v;
    return 0;
}

/* A finite number in [lo, hi]. */
static int real(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end, want[80];
    errno = 0;
    double v = strtod(s, &end);
    snprintf(want, sizeof want, "a number in [%g, %g]", lo, hi);
    if (!*s || *end || errno || !isfinite(v) || v < lo || v > hi) return bad_value(flag, want, s);
    *out = v;
    return 0;
}

/* A probability p with 0 < p <= 1 (top-p: 0 would keep nothing). */
static int fraction(const char *flag, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !(v > 0 && v <= 1)) return bad_value(flag, "a number p with 0 < p <= 1", s);
    *out = v;
    return 0;
}

/* The value v of flag f into o.  Returns 0, or the exit status (2). */
static int parse_value(const char *f, const char *v, opts *o)
{
    int seed, rc = 0;
    if (!strcmp(f, "--data")) o->data = input_path(v, &o->stdin_uses);
    else if (!strcmp(f, "--out")) o->out = v;
    else if (!strcmp(f, "--model")) o->model = input_path(v, &o->stdin_uses);
    else if (!strcmp(f, "--resume")) o->resume = input_path(v, &o->stdin_uses);
    else if (!strcmp(f, "--json")) o->json = v;
    else if (!strcmp(f, "--plot")) o->plot = v;
    else if (!strcmp(f, "--html")) o->html = v;
    else if (!strcmp(f, "--live")) o->live = v;
    else if (!strcmp(f, "--wasm")) o->wasm = v;
    else if (!strcmp(f, "--prompt")) o->prompt = v;
    else if (!strcmp(f, "--break")) o->break_op = v;
    else if (!strcmp(f, "--directions")) rc = whole(f, v, 1, 1000, &o->directions);
    else if (!strcmp(f, "--by")) rc = real(f, v, -1e6, 1e6, &o->by);
    else if (!strcmp(f, "--head-off")) {
        if (o->heads_off == HEADS_OFF_MAX) {
            fprintf(stderr, "%s: --head-off: at most %d heads, got '%s' more\n", prog, HEADS_OFF_MAX, v);
            return 2;
        }
        o->head_off[o->heads_off++] = v;
    }
    else if (!strcmp(f, "--steps")) rc = whole(f, v, 1, 10000000, &o->steps);
    else if (!strcmp(f, "--batch")) rc = whole(f, v, 1, 65536, &o->batch);
    else if (!strcmp(f, "--context")) rc = whole(f, v, 1, 4096, &o->context);
    else if (!strcmp(f, "--hidden")) rc = whole(f, v, 1, 4096, &o->hidden);
    else if (!strcmp(f, "--heads")) rc = whole(f, v, 1, 256, &o->heads);
    else if (!strcmp(f, "--ffn")) rc = whole(f, v, 1, 16384, &o->ffn);
    else if (!strcmp(f, "--layers")) rc = whole(f, v, 1, 64, &o->layers);
    else if (!strcmp(f, "--eval-every")) rc = whole(f, v, 1, 10000000, &o->eval_every);
    else if (!strcmp(f, "--threads")) rc = whole(f, v, 1, 256, &o->threads);
    else if (!strcmp(f, "--parts")) rc = whole(f, v, 1, 256, &o->parts);
    else if (!strcmp(f, "--length")) rc = whole(f, v, 0, 1000000, &o->length);
    else if (!strcmp(f, "--top-k")) rc = whole(f, v, 0, 256, &o->top_k);
    else if (!strcmp(f, "--top-p")) rc = fraction(f, v, &o->top_p);
    else if (!strcmp(f, "--show-dist")) rc = whole(f, v, 1, 256, &o->show_dist);
    else if (!strcmp(f, "--seed")) {
        rc = whole(f, v, 0, INT_MAX, &seed);
        o->seed = (uint64_t)seed;
    } else if (!strcmp(f, "--lr")) rc = real(f, v, 1e-12, 10, &o->lr);
    else if (!strcmp(f, "--clip")) rc = real(f, v, 0, 1e6, &o->clip);
    else if (!strcmp(f, "--dropout")) rc = real(f, v, 0, 0.99, &o->dropout);
    else if (!strcmp(f, "--temperature")) rc = real(f, v, 0, 100, &o->temperature);
    else if (!strcmp(f, "--precision")) { /* the products' (docs/precision.md): the process default */
        ag_precision p;
        if (ag_precision_parse(v, &p)) return bad_value(f, "fp32 or bf16", v);
        ag_set_precision(p);
    } else if (!strcmp(f, "--activation")) {
        if (strcmp(v, "gelu") && strcmp(v, "gelu_tanh") && strcmp(v, "relu"))
            return bad_value(f, "gelu, gelu_tanh or relu", v);
        o->activation = v;
    } else {
        fprintf(stderr, "%s: unknown flag '%s'\n", prog, f);
        usage(stderr);
        return 2;
    }
    return rc;
}

/* Flags of argv[first..].  Returns 0, -1 for --help, or the exit status. */
static int parse(int argc, char **argv, int first, opts *o)
{
    *o = (opts){.steps = 2000, .batch = 32, .context = 32, .hidden = 64, .heads = 4, .ffn = 256, .layers = 2,
                .activation = "gelu", .eval_every = 100, .threads = 1, .parts = 1, .length = 200, .lr = 1e-3, .clip = 1.0,
                .temperature = 1.0, .top_p = 1, .by = 1.01};
    for (int i = first; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            usage(stdout);
            return -1;
        }
        int *flag = !strcmp(f, "--quiet") ? &o->quiet : !strcmp(f, "--untied") ? &o->untied
                                                     : !strcmp(f, "--all")      ? &o->all
                                                     : !strcmp(f, "--walk")     ? &o->walk
                                                                                : NULL;
        if (flag) {
            *flag = 1;
            continue;
        }
        if (strncmp(f, "--", 2)) {
            fprintf(stderr, "%s: unexpected argument '%s'\n", prog, f);
            usage(stderr);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s: %s needs a value\n", prog, f);
            usage(stderr);
            return 2;
        }
        int rc = parse_value(f, argv[++i], o);
        if (rc) return rc;
    }
    if (o->stdin_uses > 1) {
        fprintf(stderr, "%s: only one input can be '-': stdin is read once\n", prog);
        usage(stderr);
        return 2;
    }
    return 0;
}

static int run(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    opts o;
    int rc = parse(argc, argv, 2, &o);
    if (rc) return rc < 0 ? 0 : rc;
    o.argv0 = argv[0];
    ag_set_threads(o.threads);
    if (o.heads_off && strcmp(argv[1], "sample")) {
        fprintf(stderr, "%s: --head-off is a flag of sample only\n", prog);
        return 2;
    }
    if (!strcmp(argv[1], "train")) return cmd_train(&o);
    if (!strcmp(argv[1], "eval")) return cmd_eval(&o);
    if (!strcmp(argv[1], "sample")) return cmd_sample(&o);
    if (!strcmp(argv[1], "gradcheck")) return cmd_gradcheck(&o);
    fprintf(stderr, "%s: unknown command '%s' (train, eval, sample or gradcheck)\n", prog, argv[1]);
    usage(stderr);
    return 2;
}

int main(int argc, char **argv)
{
    if (dist_init(&argc, &argv)) return 1;
    int rc = run(argc, argv);
    dist_finalize();
    return rc;
}
