/* examples/translate/cli.c: translate's command line: flags, usage, and
 * main, which parses them and hands them to a command.
 *
 *   translate split --data FILE --train TRAIN --test HELD_OUT [--every 10]
 *   translate train --data FILE --out MODEL [--test FILE] [options]
 *   translate eval  --model MODEL --data FILE [--json FILE]
 *   translate run   --model MODEL [SENTENCE ...]     (stdin lines when none)
 *
 * Invariant: a bad flag or value is exit 2 with a message and the usage,
 * before any work starts; the options a command sees are in range.
 *
 * Exit status: 0 ok, 1 a file or the data is bad, 2 bad usage (a flag that
 * conflicts with the model given to --resume too), 130 / 143 training
 * stopped by SIGINT / SIGTERM after saving a checkpoint to --out. */
#include "translate.h"
#include "../common/dist.h"

#include "../common/input_path.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *prog = "translate";

const char *const init_names[] = {[AG_SEQ2SEQ_INIT_SCALED] = "scaled", [AG_SEQ2SEQ_INIT_D2L] = "d2l", NULL};

void usage(FILE *f)
{
    fprintf(f,
            "usage: %s split --data FILE --train TRAIN --test HELD_OUT [--every 10]\n"
            "       %s train --data FILE --out MODEL [--test FILE] [--epochs N] [--batch 64]\n"
            "                [--optimizer sgd|adam] [--lr X] [--momentum X] [--[no-]nesterov] [--weight-decay X] [--clip X]\n"
            "                [--schedule constant|linear|cosine|noam] [--warmup STEPS]\n"
            "                [--hidden 64] [--heads 4] [--ffn 128] [--layers 2] [--dropout 0.1] [--pre-norm|--post-norm]\n"
            "                [--qk-norm] [--init scaled|d2l] [--max-len 10] [--min-freq 2] [--seed 0] [--threads N] [--resume MODEL]\n"
            "                [--json FILE] [--plot LOSS.svg] [--entropy-plot ENTROPY.svg] [--html PAGE.html] [--stop-after N] [--quiet]\n"
            "                [--save-init MODEL0] [--trace STEPS.tsv] [--precision fp32|bf16]\n"
            "       %s eval --model MODEL --data FILE [--json FILE] [--threads N]\n"
            "       %s run --model MODEL [--attention DIR] [--html PAGE.html] [--json FILE] [--live PAGE.html [--wasm FILE]]\n"
            "                [--head-off encoder|decoder|cross:LAYER:HEAD]... [--threads N] [SENTENCE ...]\n"
            "       %s64 gradcheck --data FILE [train's model flags, --batch, --seed] [--directions 4] [--walk]\n"
            "                [--break OP [--by 1.01]]\n"
            "\n"
            "split: the k-th distinct source (k from 0, in order of first appearance) goes with all its\n"
            "  pairs to HELD_OUT when k %% every == every - 1, the other lines to TRAIN, verbatim.\n"
            "train: with --test, prints exact match and BLEU on the training data and on the --test data.\n"
            "  --init scaled: embeddings N(0, 1/C); d2l: d2l.ai's, embeddings N(0, 1) (attograd_nn.h).\n"
            "  --pre-norm, the default: pre-norm blocks and a final LayerNorm per stack; --post-norm: the\n"
            "  post-norm blocks of \"Attention Is All You Need\" (the default up to 0.2.0); --qk-norm: a\n"
            "  LayerNorm of each head's queries and keys before their dot product (attograd_nn.h).\n"
            "  --resume takes the architecture, --min-freq and --optimizer from the model; giving\n"
            "  one of them with another value is exit 2.  SIGINT or SIGTERM (Ctrl-C) ends the current\n"
            "  step, saves a checkpoint to --out that --resume continues bit for bit, and exits 130 or\n"
            "  143; a second signal stops at once (--out then holds the last complete file).\n"
            "  --save-init writes the run as it stands before step 1 (--resume MODEL0 starts it again);\n"
            "  --trace writes a line per step: its loss, gradient norm, rate and the pairs of its batch.\n"
            "  --threads N splits each batch among N workers; under mpirun (translate-mpi, make MPI=1)\n"
            "  the processes split it instead, with the same numbers as --threads N.\n"
            "run: with no SENTENCE, translates each line of stdin (any length) to one line of output.\n"
            "  A line the data reader would refuse (a NUL byte, invalid UTF-8) gets a warning naming\n"
            "  its line and an empty output line; exit 1 if no line was good.  A line of more than\n"
            "  %d bytes is cut to the words of its first %d, with a warning naming it.  --json FILE: the\n"
            "  explorer's data of --html alone (\"-\": stdout, instead of the translations); --live PAGE.html:\n"
            "  the page that translates what is typed in it (build/wasm/translate.wasm, make wasm).\n"
            "  --head-off cross:1:0 switches head 0 of layer 1's cross-attention off (its output times 0).\n"
            "Inputs (--data, --test of train, --model, --resume) may be pipes, as <(zcat data.tsv.gz),\n"
            "  or - for stdin (one of them): read to the end, checked as a file.  AG_INPUT_LIMIT=BYTES\n"
            "  bounds every input (4 GiB).\n",
            prog, prog, prog, prog, prog, AG_PAIRS_MAX_LINE, AG_PAIRS_MAX_LINE);
}

int bad(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "%s: ", prog);
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n");
    usage(stderr);
    return 2;
}

/* Whole number in [lo, hi]. */
static int parse_int(const char *flag, const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "%s: %s needs a whole number from %ld to %ld, got '%s'\n", prog, flag, lo, hi, s);
        usage(stderr);
        return 2;
    }
    *out = (int)v;
    return 0;
}

/* Finite real in [lo, hi] (hi_open: < hi). */
static int parse_real(const char *flag, const char *s, double lo, double hi, int hi_open, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || v < lo || v > hi || (hi_open && v >= hi)) {
        fprintf(stderr, "%s: %s needs a number in [%g, %g%s, got '%s'\n", prog, flag, lo, hi, hi_open ? ")" : "]",
                s);
        usage(stderr);
        return 2;
    }
    *out = v;
    return 0;
}

/* The flags --resume checks against the model, by name. */
static unsigned given_bit(const char *flag)
{
    static const struct {
        const char *flag;
        unsigned bit;
    } bits[] = {{"--hidden", GIVEN_HIDDEN},   {"--heads", GIVEN_HEADS},     {"--ffn", GIVEN_FFN},
                {"--layers", GIVEN_LAYERS},   {"--max-len", GIVEN_MAX_LEN}, {"--dropout", GIVEN_DROPOUT},
                {"--min-freq", GIVEN_MIN_FREQ}, {"--optimizer", GIVEN_OPTIMIZER}, {"--init", GIVEN_INIT}};
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
        if (!strcmp(flag, bits[i].flag)) return bits[i].bit;
    return 0;
}

/* One flag f with value v into o.  Returns 0 or the exit status. */
static int parse_flag(const char *f, const char *v, opts *o)
{
    int tmp, rc = 0;
    if (!strcmp(f, "--data")) o->data = input_path(v, &o->stdin_uses);
    else if (!strcmp(f, "--test")) o->test = input_path(v, &o->stdin_uses);
    else if (!strcmp(f, "--out")) o->out = v;
    else if (!strcmp(f, "--model")) o->model = input_path(v, &o->stdin_uses);
    else if (!strcmp(f, "--resume")) o->resume = input_path(v, &o->stdin_uses);
    else if (!strcmp(f, "--json")) o->json = v;
    else if (!strcmp(f, "--plot")) o->plot = v;
    else if (!strcmp(f, "--entropy-plot")) o->entropy_plot = v;
    else if (!strcmp(f, "--attention")) o->attention = v;
    else if (!strcmp(f, "--html")) o->html = v;
    else if (!strcmp(f, "--save-init")) o->save_init = v;
    else if (!strcmp(f, "--trace")) o->trace = v;
    else if (!strcmp(f, "--live")) o->live = v;
    else if (!strcmp(f, "--head-off")) {
        if (o->heads_off == HEADS_OFF_MAX) return bad("--head-off: at most %s heads%s", "64", "");
        o->head_off[o->heads_off++] = v;
    }
    else if (!strcmp(f, "--wasm")) o->wasm = v;
    else if (!strcmp(f, "--break")) o->break_op = v;
    else if (!strcmp(f, "--by")) rc = parse_real(f, v, -1e6, 1e6, 1, &o->by);
    else if (!strcmp(f, "--directions")) rc = parse_int(f, v, 1, 1000, &o->directions);
    else if (!strcmp(f, "--train")) o->train_out = v;
    else if (!strcmp(f, "--every")) rc = parse_int(f, v, 2, INT_MAX, &o->every);
    else if (!strcmp(f, "--epochs")) rc = parse_int(f, v, 1, EPOCHS_MAX, &o->epochs);
    else if (!strcmp(f, "--stop-after")) rc = parse_int(f, v, 1, EPOCHS_MAX, &o->stop_after);
    else if (!strcmp(f, "--batch")) rc = parse_int(f, v, 1, 65536, &o->batch);
    else if (!strcmp(f, "--hidden")) rc = parse_int(f, v, 1, HIDDEN_MAX, &o->hidden);
    else if (!strcmp(f, "--heads")) rc = parse_int(f, v, 1, HEADS_MAX, &o->heads);
    else if (!strcmp(f, "--ffn")) rc = parse_int(f, v, 1, FFN_MAX, &o->ffn);
    else if (!strcmp(f, "--layers")) rc = parse_int(f, v, 1, LAYERS_MAX, &o->layers);
    else if (!strcmp(f, "--max-len")) rc = parse_int(f, v, MAX_LEN_MIN, MAX_LEN_MAX, &o->max_len);
    else if (!strcmp(f, "--min-freq")) rc = parse_int(f, v, 1, MIN_FREQ_MAX, &o->min_freq);
    else if (!strcmp(f, "--threads")) rc = parse_int(f, v, 1, 256, &o->threads);
    else if (!strcmp(f, "--precision")) { /* the products' (docs/precision.md): the process default */
        ag_precision p;
        if (ag_precision_parse(v, &p)) return bad("--precision must be fp32 or bf16, got '%s'%s", v, "");
        ag_set_precision(p);
    }
    else if (!strcmp(f, "--seed")) {
        rc = parse_int(f, v, 0, INT_MAX, &tmp);
        o->seed = (uint64_t)tmp;
    } else if (!strcmp(f, "--lr")) rc = parse_real(f, v, 1e-12, 100, 0, &o->lr);
    else if (!strcmp(f, "--momentum")) rc = parse_real(f, v, 0, 1, 1, &o->momentum);
    else if (!strcmp(f, "--weight-decay")) rc = parse_real(f, v, 0, 1, 0, &o->weight_decay);
    else if (!strcmp(f, "--clip")) rc = parse_real(f, v, 0, 1e6, 0, &o->clip);
    else if (!strcmp(f, "--dropout")) rc = parse_real(f, v, 0, 1, 1, &o->dropout);
    else if (!strcmp(f, "--warmup")) rc = parse_int(f, v, 0, INT_MAX, &o->warmup);
    else if (!strcmp(f, "--schedule")) {
        if (strcmp(v, "constant") && strcmp(v, "linear") && strcmp(v, "cosine") && strcmp(v, "noam"))
            return bad("--schedule must be constant, linear, cosine or noam, got '%s'%s", v, "");
        o->schedule = v;
    } else if (!strcmp(f, "--init")) {
        o->init = -1;
        for (int i = 0; init_names[i]; i++)
            if (!strcmp(v, init_names[i])) o->init = i;
        if (o->init < 0) return bad("--init must be scaled or d2l, got '%s'%s", v, "");
    } else if (!strcmp(f, "--optimizer")) {
        if (strcmp(v, "sgd") && strcmp(v, "adam")) return bad("--optimizer must be sgd or adam, got '%s'%s", v, "");
        o->optimizer = v;
    } else return bad("unknown flag '%s'%s", f, "");
    o->given |= given_bit(f);
    return rc;
}

/* Parse argv[first..]; positional arguments (run's sentences) are collected
 * in pos.  Returns 0, -1 for --help, or the exit status. */
static int parse(int argc, char **argv, int first, opts *o, char **pos, int *npos)
{
    *o = (opts){.epochs = 50, .batch = 64, .hidden = 64, .heads = 4, .ffn = 128, .layers = 2, .max_len = 10,
                .min_freq = 2, .threads = 1, .lr = -1, .momentum = -1, .clip = 1.0, .dropout = 0.1,
                .optimizer = "sgd", .schedule = "cosine", .warmup = 400, .nesterov = 1,
                .init = AG_SEQ2SEQ_INIT_SCALED, .pre_norm = 1, .every = 10, .by = 1.01};
    *npos = 0;
    for (int i = first; i < argc; i++) {
        const char *f = argv[i];
        if (f[0] != '-' || !f[1]) {
            pos[(*npos)++] = argv[i];
            continue;
        }
        if (!strcmp(f, "--quiet") || !strcmp(f, "--walk")) {
            *(f[2] == 'q' ? &o->quiet : &o->walk) = 1;
            continue;
        }
        if (!strcmp(f, "--pre-norm") || !strcmp(f, "--post-norm")) {
            int pre = f[3] == 'r';
            if ((o->given & GIVEN_PRE_NORM) && o->pre_norm != pre)
                return bad("--pre-norm and --post-norm: give one of them%s%s", "", "");
            o->pre_norm = pre;
            o->given |= GIVEN_PRE_NORM;
            continue;
        }
        if (!strcmp(f, "--qk-norm")) {
            o->qk_norm = 1;
            o->given |= GIVEN_QK_NORM;
            continue;
        }
        if (!strcmp(f, "--nesterov") || !strcmp(f, "--no-nesterov")) {
            o->nesterov = f[2] == 'n' && f[3] == 'e';
            continue;
        }
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            usage(stdout);
            return -1;
        }
        if (i + 1 >= argc) return bad("%s needs a value%s", f, "");
        int rc = parse_flag(f, argv[++i], o);
        if (rc) return rc;
    }
    if (o->stdin_uses > 1) return bad("only one input can be '-': stdin is read once%s%s", "", "");
    return 0;
}

/* The reader's warnings about the pairs of path. */
static void warn_skipped(const char *path, const ag_pairs *p)
{
    for (int i = 0; i < p->n_warnings_kept; i++) fprintf(stderr, "%s: warning: %s\n", prog, p->warnings[i]);
    if (p->n_skipped > p->n_warnings_kept)
        fprintf(stderr, "%s: warning: %s: %d more lines skipped\n", prog, path,
                p->n_skipped - p->n_warnings_kept);
}

int load_pairs(const char *path, ag_pairs **p)
{
    char err[512];
    if (ag_pairs_load(path, p, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    warn_skipped(path, *p);
    return 0;
}

int parse_pairs(const char *buf, size_t len, const char *path, ag_pairs **p)
{
    char err[512];
    if (ag_pairs_parse(buf, len, path, p, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    warn_skipped(path, *p);
    return 0;
}

static int run_command(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    opts o;
    char **pos = malloc((size_t)argc * sizeof *pos);
    int npos = 0, rc;
    if (!pos) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    rc = parse(argc, argv, 2, &o, pos, &npos);
    o.argv0 = argv[0];
    if (rc) rc = rc < 0 ? 0 : rc;
    else if (strcmp(cmd, "run") && npos > 0) rc = bad("unexpected argument '%s' for %s", pos[0], cmd);
    else if (!strcmp(cmd, "split")) rc = cmd_split(&o);
    else if (!strcmp(cmd, "train")) rc = cmd_train(&o);
    else if (!strcmp(cmd, "eval")) rc = cmd_eval(&o);
    else if (!strcmp(cmd, "run")) rc = cmd_run(&o, pos, npos);
    else if (!strcmp(cmd, "gradcheck")) rc = cmd_gradcheck(&o);
    else rc = bad("unknown command '%s'%s", cmd, "");
    free(pos);
    return rc;
}

int main(int argc, char **argv)
{
    if (dist_init(&argc, &argv)) return 1;
    int rc = run_command(argc, argv);
    dist_finalize();
    return rc;
}
