/* translate: train, evaluate and run a toy English->French Transformer.
 *
 *   translate train --data FILE --out MODEL [--test FILE] [options]
 *   translate eval  --model MODEL --data FILE [--json FILE]
 *   translate run   --model MODEL [SENTENCE ...]     (stdin lines when none)
 *
 * The model is ag_seq2seq (src/nn/seq2seq.c): an encoder-decoder Transformer
 * built from attograd's primitive ops and trained by backpropagation.
 * Checkpoints are safetensors files: the parameters under PyTorch-style
 * names, the config and both vocabularies in __metadata__, and (with
 * --save-state, or always when training) the optimizer moments and the
 * random streams, so --resume continues exactly where a run stopped.
 *
 * Exit status: 0 ok, 1 a file or the data is bad, 2 bad usage. */
#include "attograd.h"
#include "seq2seq_data.h" /* dataset, batch: id arrays */

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FORMAT "attograd-translator-1"

/* ---- options ------------------------------------------------------------ */

typedef struct opts {
    const char *data, *test, *out, *model, *resume, *json, *plot, *attention;
    int epochs, stop_after, batch, hidden, heads, ffn, layers, max_len, min_freq, threads, nesterov, warmup;
    double lr, momentum, clip, dropout, weight_decay;
    const char *optimizer, *schedule;
    uint64_t seed;
    int quiet;
} opts;

static const char *prog = "translate";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s train --data FILE --out MODEL [--test FILE] [--epochs N] [--batch 64]\n"
            "                [--optimizer sgd|adam] [--lr X] [--momentum X] [--[no-]nesterov] [--weight-decay X] [--clip X]\n"
            "                [--schedule constant|linear|cosine|noam] [--warmup STEPS]\n"
            "                [--hidden 64] [--heads 4] [--ffn 128] [--layers 2] [--dropout 0.1]\n"
            "                [--max-len 10] [--min-freq 2] [--seed 0] [--threads N] [--resume MODEL]\n"
            "                [--json FILE] [--plot LOSS.svg] [--stop-after N] [--quiet]\n"
            "       %s eval --model MODEL --data FILE [--json FILE] [--threads N]\n"
            "       %s run --model MODEL [--attention DIR] [--threads N] [SENTENCE ...]\n",
            prog, prog, prog);
}

static int bad(const char *fmt, const char *a, const char *b)
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
        char range[64];
        snprintf(range, sizeof range, "a whole number from %ld to %ld", lo, hi);
        fprintf(stderr, "%s: %s needs %s, got '%s'\n", prog, flag, range, s);
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

/* Parse argv[first..]; positional arguments (run's sentences) are collected
 * in pos.  Returns 0 or the exit status. */
static int parse(int argc, char **argv, int first, opts *o, char ***pos, int *npos)
{
    *o = (opts){.epochs = 50, .batch = 64, .hidden = 64, .heads = 4, .ffn = 128, .layers = 2, .max_len = 10,
                .min_freq = 2, .threads = 1, .lr = -1, .momentum = -1, .clip = 1.0, .dropout = 0.1,
                .optimizer = "sgd", .schedule = "cosine", .warmup = 400, .nesterov = 1};
    *npos = 0;
    for (int i = first; i < argc; i++) {
        const char *f = argv[i];
        if (f[0] != '-' || !f[1]) {
            (*pos)[(*npos)++] = argv[i];
            continue;
        }
        if (!strcmp(f, "--quiet")) {
            o->quiet = 1;
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
        const char *v = argv[++i];
        int rc = 0, tmp;
        if (!strcmp(f, "--data")) o->data = v;
        else if (!strcmp(f, "--test")) o->test = v;
        else if (!strcmp(f, "--out")) o->out = v;
        else if (!strcmp(f, "--model")) o->model = v;
        else if (!strcmp(f, "--resume")) o->resume = v;
        else if (!strcmp(f, "--json")) o->json = v;
        else if (!strcmp(f, "--plot")) o->plot = v;
        else if (!strcmp(f, "--attention")) o->attention = v;
        else if (!strcmp(f, "--epochs")) rc = parse_int(f, v, 1, 100000, &o->epochs);
        else if (!strcmp(f, "--stop-after")) rc = parse_int(f, v, 1, 100000, &o->stop_after);
        else if (!strcmp(f, "--batch")) rc = parse_int(f, v, 1, 65536, &o->batch);
        else if (!strcmp(f, "--hidden")) rc = parse_int(f, v, 1, 4096, &o->hidden);
        else if (!strcmp(f, "--heads")) rc = parse_int(f, v, 1, 256, &o->heads);
        else if (!strcmp(f, "--ffn")) rc = parse_int(f, v, 1, 16384, &o->ffn);
        else if (!strcmp(f, "--layers")) rc = parse_int(f, v, 1, 64, &o->layers);
        else if (!strcmp(f, "--max-len")) rc = parse_int(f, v, 2, 512, &o->max_len);
        else if (!strcmp(f, "--min-freq")) rc = parse_int(f, v, 1, 1000000, &o->min_freq);
        else if (!strcmp(f, "--threads")) rc = parse_int(f, v, 1, 256, &o->threads);
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
        } else if (!strcmp(f, "--optimizer")) {
            if (strcmp(v, "sgd") && strcmp(v, "adam")) return bad("--optimizer must be sgd or adam, got '%s'%s", v, "");
            o->optimizer = v;
        } else return bad("unknown flag '%s'%s", f, "");
        if (rc) return rc;
    }
    return 0;
}

/* ---- the model file ------------------------------------------------------- */

typedef struct model {
    ag_seq2seq_config cfg;
    ag_vocab *sv, *tv;
    ag_store *store;
    ag_seq2seq net;
    int has_net;
} model;

static void model_free(model *m)
{
    if (m->has_net) ag_seq2seq_free(&m->net);
    ag_store_free(m->store);
    ag_vocab_free(m->sv);
    ag_vocab_free(m->tv);
    memset(m, 0, sizeof *m);
}

static int model_build(model *m, uint64_t seed, const char *from)
{
    m->store = ag_store_new();
    if (!m->store) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    ag_status st = ag_seq2seq_init(&m->net, m->store, &m->cfg, seed);
    if (st != AG_OK) {
        const char *why = ag_store_error(m->store);
        fprintf(stderr, "%s: %s: cannot build the model (%s)%s%s\n", prog, from, ag_status_name(st), *why ? ": " : "",
                why);
        return 1;
    }
    m->has_net = 1;
    return 0;
}

/* Training state saved beside the weights. */
typedef struct train_state {
    int epoch;          /* epochs completed */
    ag_rng data_rng;    /* shuffling */
    uint64_t graph_rng[4];
} train_state;

/* A whole number in [lo, hi] from the model's metadata. */
static int meta_int(const ag_st *f, const char *key, long lo, long hi, int *out, const char *path)
{
    const char *v = ag_st_meta(f, key);
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "%s: %s: metadata '%s' is %s%s%s, want a whole number from %ld to %ld\n", prog, path, key,
                v ? "'" : "missing", v ? v : "", v ? "'" : "", lo, hi);
        return 1;
    }
    *out = (int)x;
    return 0;
}

static int save_model(const model *m, ag_optim *opt, const train_state *ts, const opts *o, const char *path)
{
    char err[512];
    ag_st_writer *w = ag_st_writer_new();
    int rc = 1;
    if (!w) goto done;
    const char *dtype = sizeof(ag_real) == 8 ? "F64" : "F32";
    for (int i = 0; i < ag_store_count(m->store); i++) {
        ag_tensor *t = ag_store_at(m->store, i);
        if (ag_st_add(w, t->name, dtype, t->ndim, t->shape, t->data) != AG_OK) goto done;
    }
    char buf[64];
    size_t n = ag_vocab_serialize(m->sv, NULL, 0) + 1, n2 = ag_vocab_serialize(m->tv, NULL, 0) + 1;
    char *vs = malloc(n), *vt = malloc(n2);
    if (!vs || !vt) {
        free(vs), free(vt);
        goto done;
    }
    ag_vocab_serialize(m->sv, vs, n);
    ag_vocab_serialize(m->tv, vt, n2);
    ag_status st = ag_st_add_meta(w, "format", FORMAT);
    if (st == AG_OK) st = ag_st_add_meta(w, "src_vocab", vs);
    if (st == AG_OK) st = ag_st_add_meta(w, "tgt_vocab", vt);
    free(vs), free(vt);
#define META_INT(key, val)                                                                                   \
    if (st == AG_OK) snprintf(buf, sizeof buf, "%d", (int)(val)), st = ag_st_add_meta(w, key, buf);
    META_INT("hidden", m->cfg.hidden)
    META_INT("heads", m->cfg.heads)
    META_INT("ffn", m->cfg.ffn)
    META_INT("layers", m->cfg.layers)
    META_INT("max_len", m->cfg.max_len)
    if (st == AG_OK) snprintf(buf, sizeof buf, "%.17g", m->cfg.dropout), st = ag_st_add_meta(w, "dropout", buf);
    if (opt && ts) {
        /* the state that --resume needs to continue bit for bit */
        META_INT("epoch", ts->epoch)
        META_INT("min_freq", o->min_freq)
        if (st == AG_OK) st = ag_st_add_meta(w, "optimizer", ag_optim_kind(opt));
        snprintf(buf, sizeof buf, "%lld", (long long)ag_optim_steps(opt));
        if (st == AG_OK) st = ag_st_add_meta(w, "optimizer_steps", buf);
        char rng[160];
        snprintf(rng, sizeof rng, "%016llx%016llx%016llx%016llx", (unsigned long long)ts->data_rng.s[0],
                 (unsigned long long)ts->data_rng.s[1], (unsigned long long)ts->data_rng.s[2],
                 (unsigned long long)ts->data_rng.s[3]);
        if (st == AG_OK) st = ag_st_add_meta(w, "data_rng", rng);
        snprintf(rng, sizeof rng, "%016llx%016llx%016llx%016llx", (unsigned long long)ts->graph_rng[0],
                 (unsigned long long)ts->graph_rng[1], (unsigned long long)ts->graph_rng[2],
                 (unsigned long long)ts->graph_rng[3]);
        if (st == AG_OK) st = ag_st_add_meta(w, "graph_rng", rng);
        for (int i = 0; st == AG_OK && i < ag_store_count(m->store); i++) {
            ag_tensor *t = ag_store_at(m->store, i);
            for (int which = 0; which < 2 && st == AG_OK; which++) {
                size_t cnt;
                ag_real *s = ag_optim_state(opt, i, which, &cnt);
                if (!s) continue;
                char name[128];
                snprintf(name, sizeof name, "optimizer.%s.%s", which ? "v" : "m", t->name);
                st = ag_st_add(w, name, dtype, t->ndim, t->shape, s);
            }
        }
    }
#undef META_INT
    if (st != AG_OK) goto done;
    if (ag_st_save(w, path, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        goto done;
    }
    rc = 0;
done:
    if (rc && !w) fprintf(stderr, "%s: out of memory saving %s\n", prog, path);
    ag_st_writer_free(w);
    return rc;
}

static int parse_rng(const char *s, uint64_t out[4])
{
    if (!s || strlen(s) != 64) return 1;
    for (int i = 0; i < 4; i++) {
        char part[17];
        memcpy(part, s + 16 * i, 16);
        part[16] = 0;
        char *end;
        out[i] = strtoull(part, &end, 16);
        if (*end) return 1;
    }
    return 0;
}

/* Load config, vocabularies and weights from path; *f stays open for the
 * caller to read training state from (NULL it to skip). */
static int load_model(model *m, const char *path, ag_st **keep)
{
    char err[512];
    ag_st *f = NULL;
    memset(m, 0, sizeof *m);
    if (ag_st_load(path, &f, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    const char *fmt = ag_st_meta(f, "format");
    if (!fmt || strcmp(fmt, FORMAT)) {
        fprintf(stderr, "%s: %s: not a translator model (metadata 'format' is %s%s%s, want '%s')\n", prog, path,
                fmt ? "'" : "missing", fmt ? fmt : "", fmt ? "'" : "", FORMAT);
        goto fail;
    }
    /* the same ranges as the flags: a hostile file cannot ask for a model
     * that takes hours to build */
    if (meta_int(f, "hidden", 1, 4096, &m->cfg.hidden, path) || meta_int(f, "heads", 1, 256, &m->cfg.heads, path) ||
        meta_int(f, "ffn", 1, 16384, &m->cfg.ffn, path) || meta_int(f, "layers", 1, 64, &m->cfg.layers, path) ||
        meta_int(f, "max_len", 2, 512, &m->cfg.max_len, path))
        goto fail;
    if (m->cfg.hidden % m->cfg.heads) {
        fprintf(stderr, "%s: %s: metadata hidden %d is not divisible by heads %d\n", prog, path, m->cfg.hidden,
                m->cfg.heads);
        goto fail;
    }
    const char *dr = ag_st_meta(f, "dropout");
    char *dr_end = NULL;
    m->cfg.dropout = dr ? strtod(dr, &dr_end) : 0;
    if (dr && (*dr_end || !(m->cfg.dropout >= 0 && m->cfg.dropout < 1))) {
        fprintf(stderr, "%s: %s: metadata 'dropout' is '%s', want a number in [0, 1)\n", prog, path, dr);
        goto fail;
    }
    const char *vs = ag_st_meta(f, "src_vocab"), *vt = ag_st_meta(f, "tgt_vocab");
    if (!vs || !vt) {
        fprintf(stderr, "%s: %s: the vocabularies are missing from the metadata\n", prog, path);
        goto fail;
    }
    if (ag_vocab_parse(vs, strlen(vs), &m->sv, err, sizeof err) != AG_OK ||
        ag_vocab_parse(vt, strlen(vt), &m->tv, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s: bad vocabulary: %s\n", prog, path, err);
        goto fail;
    }
    m->cfg.src_vocab = ag_vocab_size(m->sv);
    m->cfg.tgt_vocab = ag_vocab_size(m->tv);
    if (model_build(m, 0, path)) goto fail;
    if (ag_store_load(m->store, f, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, err);
        goto fail;
    }
    if (keep) *keep = f;
    else ag_st_free(f);
    return 0;
fail:
    ag_st_free(f);
    model_free(m);
    return 1;
}

/* ---- decoding and metrics -------------------------------------------------- */

/* Translate n token lists; out_tok[i] gets up to L token strings (pointers
 * into the vocabulary), out_len[i] their count. */
static int translate_batch(const model *m, ag_graph *g, const char *const *const *src, const int *src_len, int n,
                           const char ***out_tok, int *out_len)
{
    int L = m->cfg.max_len, chunk = 64;
    int *ids = malloc((size_t)chunk * L * sizeof(int)), *valid = malloc((size_t)chunk * sizeof(int));
    int *outs = malloc((size_t)chunk * L * sizeof(int)), *lens = malloc((size_t)chunk * sizeof(int));
    int rc = 1;
    if (!ids || !valid || !outs || !lens) goto done;
    for (int at = 0; at < n; at += chunk) {
        int B = n - at < chunk ? n - at : chunk, S = 1;
        for (int i = 0; i < B; i++) {
            ag_encode(m->sv, src[at + i], src_len[at + i], L, ids + (size_t)i * L, &valid[i]);
            if (valid[i] > S) S = valid[i];
        }
        /* trim the padding columns beyond the longest source */
        for (int i = 0; i < B; i++) memmove(ids + (size_t)i * S, ids + (size_t)i * L, (size_t)S * sizeof(int));
        ag_status st = ag_seq2seq_greedy(g, &m->net, ids, valid, B, S, AG_BOS, AG_EOS, L, outs, lens);
        if (st != AG_OK) {
            fprintf(stderr, "%s: decoding failed: %s\n", prog, ag_graph_error(g));
            goto done;
        }
        for (int i = 0; i < B; i++) {
            out_len[at + i] = lens[i];
            for (int t = 0; t < lens[i]; t++) out_tok[at + i][t] = ag_vocab_token(m->tv, outs[(size_t)i * L + t]);
        }
    }
    rc = 0;
done:
    free(ids), free(valid), free(outs), free(lens);
    return rc;
}

typedef struct metrics {
    int sources;
    double exact, bleu, ceiling;
} metrics;

static int evaluate(const model *m, ag_graph *g, const ag_pairs *p, metrics *r)
{
    char err[256];
    ag_groups *gr = NULL;
    if (ag_groups_build(p, NULL, 0, &gr, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    int n = gr->n, L = m->cfg.max_len, rc = 1;
    const char ***src = calloc((size_t)n, sizeof *src);
    int *slen = calloc((size_t)n, sizeof(int)), *olen = calloc((size_t)n, sizeof(int));
    const char ***out = malloc((size_t)n * sizeof *out);
    const char **pool = malloc((size_t)n * L * sizeof *pool);
    if (!src || !slen || !olen || !out || !pool) goto done;
    for (int i = 0; i < n; i++) {
        src[i] = (const char **)gr->groups[i].src;
        slen[i] = gr->groups[i].src_len;
        out[i] = pool + (size_t)i * L;
    }
    if (translate_batch(m, g, (const char *const *const *)src, slen, n, out, olen)) goto done;
    double exact = 0, bleu = 0, ceiling = 0;
    for (int i = 0; i < n; i++) {
        const ag_group *grp = &gr->groups[i];
        int hit = 0, reachable = 0;
        for (int k = 0; k < grp->nrefs; k++) {
            if (ag_tokens_equal(out[i], olen[i], grp->ref[k], grp->ref_len[k])) hit = 1;
            /* reachable: every token in the vocabulary and room for <eos> */
            int ok = grp->ref_len[k] + 1 <= L;
            for (int t = 0; ok && t < grp->ref_len[k]; t++) ok = ag_vocab_id(m->tv, grp->ref[k][t]) != AG_UNK;
            reachable |= ok;
        }
        exact += hit;
        ceiling += reachable;
        bleu += ag_bleu_best(out[i], olen[i], grp->ref, grp->ref_len, grp->nrefs, 2);
    }
    r->sources = n;
    r->exact = n ? exact / n : 0;
    r->bleu = n ? bleu / n : 0;
    r->ceiling = n ? ceiling / n : 0;
    rc = 0;
done:
    if (rc) fprintf(stderr, "%s: out of memory evaluating %d sources\n", prog, n);
    free(src), free(slen), free(olen), free(out), free(pool);
    ag_groups_free(gr);
    return rc;
}

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

static int load_pairs(const char *path, ag_pairs **p)
{
    char err[512];
    if (ag_pairs_load(path, p, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    for (int i = 0; i < (*p)->n_warnings_kept; i++) fprintf(stderr, "%s: warning: %s\n", prog, (*p)->warnings[i]);
    if ((*p)->n_skipped > (*p)->n_warnings_kept)
        fprintf(stderr, "%s: warning: %s: %d more lines skipped\n", prog, path,
                (*p)->n_skipped - (*p)->n_warnings_kept);
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- train ----------------------------------------------------------------- */

static int cmd_train(const opts *o)
{
    if (!o->data || !o->out) return bad("train needs --data FILE and --out MODEL%s%s", "", "");
    if (o->hidden % o->heads) {
        fprintf(stderr, "%s: --hidden %d is not divisible by --heads %d\n", prog, o->hidden, o->heads);
        usage(stderr);
        return 2;
    }
    ag_pairs *train = NULL, *test = NULL;
    model m = {0};
    dataset d = {0}, dt = {0};
    batch b = {0};
    ag_graph *g = NULL;
    ag_optim *opt = NULL;
    ag_seq2seq_team *team = NULL;
    ag_st *resume = NULL;
    int *order = NULL, rc = 1;
    train_state ts = {0};
    char err[512];
    FILE *json = NULL;

    if (load_pairs(o->data, &train) || (o->test && load_pairs(o->test, &test))) goto done;
    if (o->resume) {
        if (load_model(&m, o->resume, &resume)) goto done;
        if (meta_int(resume, "epoch", 0, 100000, &ts.epoch, o->resume) ||
            parse_rng(ag_st_meta(resume, "data_rng"), ts.data_rng.s) ||
            parse_rng(ag_st_meta(resume, "graph_rng"), ts.graph_rng)) {
            fprintf(stderr, "%s: %s: no training state to resume from (saved without it?)\n", prog, o->resume);
            goto done;
        }
    } else {
        if (ag_vocab_from_pairs(train, AG_SOURCE, o->min_freq, &m.sv, err, sizeof err) != AG_OK ||
            ag_vocab_from_pairs(train, AG_TARGET, o->min_freq, &m.tv, err, sizeof err) != AG_OK) {
            fprintf(stderr, "%s: %s\n", prog, err);
            goto done;
        }
        m.cfg = (ag_seq2seq_config){ag_vocab_size(m.sv), ag_vocab_size(m.tv), o->hidden, o->heads, o->ffn,
                                    o->layers, o->max_len, o->dropout};
        if (model_build(&m, o->seed, "the flags")) goto done;
        ag_rng_seed(&ts.data_rng, o->seed ^ 0xda7aull);
        ag_rng r;
        ag_rng_seed(&r, o->seed ^ 0xd0ull);
        memcpy(ts.graph_rng, r.s, sizeof ts.graph_rng);
    }
    int L = m.cfg.max_len;
    const ag_pairs *failed = dataset_make(&d, train, m.sv, m.tv, L)                 ? train
                             : test && dataset_make(&dt, test, m.sv, m.tv, L) ? test
                                                                              : NULL;
    if (failed) {
        fprintf(stderr, "%s: out of memory for %d pairs\n", prog, failed->n);
        goto done;
    }
    int B = o->batch;
    b.src = malloc((size_t)B * L * sizeof(int)), b.tgt_in = malloc((size_t)B * L * sizeof(int));
    b.tgt_out = malloc((size_t)B * L * sizeof(int)), b.src_valid = malloc((size_t)B * sizeof(int));
    order = malloc((size_t)d.n * sizeof(int));
    ag_set_threads(o->threads);
    g = ag_graph_new();
    if (!b.src || !b.tgt_in || !b.tgt_out || !b.src_valid || !order || !g) {
        fprintf(stderr, "%s: out of memory\n", prog);
        goto done;
    }
    memcpy(ag_graph_rng(g), ts.graph_rng, sizeof ts.graph_rng);
    /* --threads N: each batch's sentences split among N workers, a thread
     * each (src/core/team.c); N = 1 is the plain loss and backward */
    team = ag_seq2seq_team_new(&m.net, m.store, o->threads, err, sizeof err);
    if (!team) {
        fprintf(stderr, "%s: %s\n", prog, err);
        goto done;
    }
    int adam = !strcmp(o->optimizer, "adam");
    /* The defaults: SGD with Nesterov momentum 0.9, lr 0.3 warmed up over 400
     * steps then decayed to 0 along a cosine (measured on the shipped data:
     * it memorises faster than a constant 0.1 and stays stable); Adam 1e-3. */
    double lr = o->lr > 0 ? o->lr : adam ? 1e-3 : 0.3;
    double momentum = o->momentum >= 0 ? o->momentum : 0.9;
    opt = adam ? ag_adam_new(m.store, lr, 0.9, 0.98, 1e-9, o->weight_decay, 0)
               : ag_sgd_new(m.store, lr, momentum, o->weight_decay, o->nesterov && momentum > 0);
    if (!opt) {
        fprintf(stderr, "%s: optimizer: %s\n", prog, ag_optim_last_error());
        goto done;
    }
    if (resume) {
        const char *kind = ag_st_meta(resume, "optimizer");
        const char *steps = ag_st_meta(resume, "optimizer_steps");
        if (!kind || strcmp(kind, ag_optim_kind(opt))) {
            fprintf(stderr, "%s: %s was trained with optimizer '%s', not '%s'\n", prog, o->resume,
                    kind ? kind : "?", ag_optim_kind(opt));
            goto done;
        }
        ag_optim_set_steps(opt, steps ? strtoll(steps, NULL, 10) : 0);
        for (int i = 0; i < ag_store_count(m.store); i++) {
            ag_tensor *t = ag_store_at(m.store, i);
            for (int which = 0; which < 2; which++) {
                size_t cnt;
                ag_real *s = ag_optim_state(opt, i, which, &cnt);
                if (!s) continue;
                char name[128];
                snprintf(name, sizeof name, "optimizer.%s.%s", which ? "v" : "m", t->name);
                if (ag_st_read(resume, name, s, cnt, err, sizeof err) != AG_OK) {
                    fprintf(stderr, "%s: %s: %s\n", prog, o->resume, err);
                    goto done;
                }
            }
        }
        ag_st_free(resume);
        resume = NULL;
    }
    if (!o->quiet)
        printf("train: %d pairs (%d skipped), vocab %d source / %d target, %zu parameters, %s lr %g\n", d.n,
               train->n_skipped, m.cfg.src_vocab, m.cfg.tgt_vocab, ag_store_numel(m.store), ag_optim_kind(opt), lr);
    double *curve = calloc((size_t)o->epochs, sizeof(double)), *test_curve = calloc((size_t)o->epochs, sizeof(double));
    if (!curve || !test_curve) {
        free(curve), free(test_curve);
        fprintf(stderr, "%s: out of memory\n", prog);
        goto done;
    }
    for (int e = 0; e < o->epochs; e++) curve[e] = test_curve[e] = NAN;
    int tty = isatty(STDOUT_FILENO) && !o->quiet;
    int nbatches = (d.n + B - 1) / B;
    /* A warmup longer than the run (a short run on a small file) is cut to a
     * tenth of the run, so that the schedule still decays; noam needs >= 1. */
    int64_t total_steps = (int64_t)o->epochs * nbatches, warmup = o->warmup;
    if (warmup >= total_steps) warmup = total_steps / 10;
    if (warmup < 1 && !strcmp(o->schedule, "noam")) warmup = 1;
    double t_start = now(), last_loss = NAN;
    /* --epochs is the plan (the schedule decays over it); --stop-after ends
     * this run early, and --resume carries on with the same plan */
    int stop = o->stop_after > 0 && o->stop_after < o->epochs ? o->stop_after : o->epochs;
    for (; ts.epoch < stop; ts.epoch++) {
        /* Fisher-Yates shuffle from the saved stream */
        for (int i = 0; i < d.n; i++) order[i] = i;
        for (int i = d.n - 1; i > 0; i--) {
            int j = (int)(ag_rng_next(&ts.data_rng) % (uint64_t)(i + 1));
            int t = order[i];
            order[i] = order[j], order[j] = t;
        }
        double sum = 0, t0 = now();
        long tokens = 0;
        for (int k = 0; k < nbatches; k++) {
            int nb = d.n - k * B < B ? d.n - k * B : B;
            batch_fill(&b, &d, order + (size_t)k * B, nb);
            ag_graph_reset(g);
            double loss;
            if (ag_seq2seq_team_step(team, g, b.src, b.src_valid, b.tgt_in, b.tgt_out, b.B, b.S, b.T, &loss) != AG_OK) {
                fprintf(stderr, "%s: step failed: %s\n", prog, ag_graph_error(g));
                goto done;
            }
            double norm;
            if (ag_clip_grad_norm(m.store, o->clip, &norm) != AG_OK) {
                fprintf(stderr, "%s: epoch %d batch %d: gradient norm is %g; stopping before the model is "
                        "spoiled (try a smaller --lr)\n", prog, ts.epoch + 1, k + 1, norm);
                goto done;
            }
            if (strcmp(o->schedule, "constant") || warmup > 0)
                ag_optim_set_lr(opt, ag_lr_schedule(lr, ag_optim_steps(opt) + 1, warmup, total_steps, o->schedule));
            if (ag_optim_step(opt) != AG_OK) {
                fprintf(stderr, "%s: optimizer: %s\n", prog, ag_optim_last_error());
                goto done;
            }
            ag_store_zero_grad(m.store);
            sum += loss * b.tokens;
            tokens += b.tokens;
            if (tty) {
                double el = now() - t_start, rate = tokens / (now() - t0);
                double done_frac = ((double)(ts.epoch) + (k + 1.0) / nbatches) / o->epochs;
                printf("\repoch %d/%d  batch %d/%d  loss %.4f  %.0f tok/s  %.0fs elapsed  ETA %.0fs   ",
                       ts.epoch + 1, o->epochs, k + 1, nbatches, sum / tokens, rate, el,
                       el / done_frac * (1 - done_frac));
                fflush(stdout);
            }
        }
        last_loss = sum / tokens;
        if (!isfinite(last_loss)) {
            fprintf(stderr, "%s: epoch %d: loss is %g; not saving\n", prog, ts.epoch + 1, last_loss);
            goto done;
        }
        double dt_ = now() - t0;
        curve[ts.epoch] = last_loss;
        if (test) test_curve[ts.epoch] = dataset_loss(&m, g, &dt, &b, B);
        if (!o->quiet) {
            printf("%sepoch %d/%d  loss %.4f", tty ? "\r" : "", ts.epoch + 1, o->epochs, last_loss);
            if (test) printf("  held-out %.4f", test_curve[ts.epoch]);
            printf("  %.0f tok/s  %.1fs\n", tokens / dt_, dt_);
            fflush(stdout);
        }
    }
    if (o->plot) {
        const double *ys[2] = {curve, test_curve};
        const char *names[2] = {"training", "held-out"};
        int ns[2] = {o->epochs, o->epochs};
        if (ag_svg_line_plot(o->plot, "translator loss (cross-entropy per target token)", "epoch", "loss",
                             test ? 2 : 1, names, ys, ns, err, sizeof err) != AG_OK) {
            fprintf(stderr, "%s: %s\n", prog, err);
            free(curve), free(test_curve);
            goto done;
        }
        if (!o->quiet) printf("wrote %s\n", o->plot);
    }
    free(curve), free(test_curve);
    memcpy(ts.graph_rng, ag_graph_rng(g), sizeof ts.graph_rng);
    if (save_model(&m, opt, &ts, o, o->out)) goto done;
    if (!o->quiet) printf("saved %s (%.1fs)\n", o->out, now() - t_start);
    metrics te = {0};
    double test_loss = NAN;
    if (test) {
        test_loss = dataset_loss(&m, g, &dt, &b, B);
        if (evaluate(&m, g, test, &te)) goto done;
        printf("held-out: loss %.4f  sources %d  exact match %.3f  BLEU %.3f  ceiling %.3f\n", test_loss, te.sources,
               te.exact, te.bleu, te.ceiling);
    }
    if (o->json) {
        json = fopen(o->json, "w");
        if (!json) {
            fprintf(stderr, "%s: %s: %s\n", prog, o->json, strerror(errno));
            goto done;
        }
        fprintf(json, "{\"epochs\": %d, \"loss\": %.6f, \"seconds\": %.2f", ts.epoch, last_loss, now() - t_start);
        if (test)
            fprintf(json, ", \"test_loss\": %.6f, \"sources\": %d, \"exact_match\": %.6f, \"bleu\": %.6f, \"ceiling\": %.6f",
                    test_loss, te.sources, te.exact, te.bleu, te.ceiling);
        fprintf(json, "}\n");
    }
    rc = 0;
done:
    if (json && fclose(json) != 0 && rc == 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, o->json, strerror(errno));
        rc = 1;
    }
    ag_st_free(resume);
    ag_optim_free(opt);
    ag_seq2seq_team_free(team);
    ag_graph_free(g);
    free(order), free(b.src), free(b.tgt_in), free(b.tgt_out), free(b.src_valid);
    dataset_free(&d), dataset_free(&dt);
    model_free(&m);
    ag_pairs_free(train), ag_pairs_free(test);
    return rc;
}

/* ---- eval and run ------------------------------------------------------------ */

static int cmd_eval(const opts *o)
{
    if (!o->model || !o->data) return bad("eval needs --model MODEL and --data FILE%s%s", "", "");
    model m;
    ag_pairs *p = NULL;
    ag_graph *g = NULL;
    int rc = 1;
    ag_set_threads(o->threads);
    if (load_model(&m, o->model, NULL)) return 1;
    if (load_pairs(o->data, &p)) goto done;
    if (!(g = ag_graph_new())) goto done;
    metrics r;
    if (evaluate(&m, g, p, &r)) goto done;
    printf("sources %d  exact match %.3f  BLEU %.3f  ceiling %.3f (exact match / ceiling %.3f)\n", r.sources, r.exact,
           r.bleu, r.ceiling, r.ceiling > 0 ? r.exact / r.ceiling : 0);
    if (o->json) {
        FILE *f = fopen(o->json, "w");
        if (!f) {
            fprintf(stderr, "%s: %s: %s\n", prog, o->json, strerror(errno));
            goto done;
        }
        fprintf(f, "{\"sources\": %d, \"exact_match\": %.6f, \"bleu\": %.6f, \"ceiling\": %.6f}\n", r.sources, r.exact,
                r.bleu, r.ceiling);
        if (fclose(f) != 0) {
            fprintf(stderr, "%s: %s: %s\n", prog, o->json, strerror(errno));
            goto done;
        }
    }
    rc = 0;
done:
    ag_graph_free(g);
    ag_pairs_free(p);
    model_free(&m);
    return rc;
}

/* Heatmaps of every layer's attention for sentence i: dir/<i>-encoder-<l>.svg
 * (source x source), dir/<i>-decoder-<l>.svg (causal, target x target) and
 * dir/<i>-cross-<l>.svg (target x source). */
static int write_attention(const model *m, ag_graph *g, const char *dir, int index, const char *const *src, int ns,
                           const char *const *out, int no)
{
    int L = m->cfg.max_len, S, valid, T = no + 1 < L ? no + 1 : L, rc = 1;
    int ids[512], tin[512];
    char err[512], path[4096], title[256];
    if (L > 512) return 1;
    ag_encode(m->sv, src, ns, L, ids, &valid);
    S = valid;
    /* decoder input: <bos> + the output; labels: what each position reads */
    const char *src_lab[512], *tgt_lab[512];
    for (int s = 0; s < S; s++) src_lab[s] = s < ns ? src[s] : "<eos>";
    tin[0] = AG_BOS;
    tgt_lab[0] = "<bos>";
    for (int t = 1; t < T; t++) tin[t] = ag_vocab_id(m->tv, out[t - 1]), tgt_lab[t] = out[t - 1];
    ag_graph_reset(g);
    ag_seq2seq_weights w;
    ag_seq2seq_trace(g, &m->net, ids, &valid, 1, S, tin, T, &w);
    if (ag_graph_status(g) != AG_OK) {
        fprintf(stderr, "%s: attention: %s\n", prog, ag_graph_error(g));
        return 1;
    }
    for (int l = 0; l < w.layers; l++) {
        struct {
            const char *kind, *what;
            const ag_tensor *t;
            const char *const *rows, *const *cols;
        } maps[3] = {{"encoder", "encoder self-attention", w.enc_self[l], src_lab, src_lab},
                     {"decoder", "decoder causal self-attention", w.dec_self[l], tgt_lab, tgt_lab},
                     {"cross", "cross-attention (rows: target, columns: source)", w.dec_cross[l], tgt_lab, src_lab}};
        for (int k = 0; k < 3; k++) {
            snprintf(path, sizeof path, "%s/%d-%s-%d.svg", dir, index, maps[k].kind, l);
            snprintf(title, sizeof title, "layer %d %s", l, maps[k].what);
            if (ag_svg_attention(path, title, maps[k].t, 0, maps[k].rows, maps[k].cols, err, sizeof err) != AG_OK) {
                fprintf(stderr, "%s: %s\n", prog, err);
                goto done;
            }
        }
    }
    rc = 0;
done:
    return rc;
}

/* Translate one batch of raw sentences and print one line each. */
static int run_sentences(const model *m, ag_graph *g, char **lines, int n, const char *attention_dir, int first)
{
    int L = m->cfg.max_len, rc = 1;
    enum { MAXTOK = 256 };
    char **bufs = calloc((size_t)n, sizeof *bufs);
    const char ***toks = calloc((size_t)n, sizeof *toks);
    int *lens = calloc((size_t)n, sizeof(int)), *olen = calloc((size_t)n, sizeof(int));
    const char ***out = calloc((size_t)n, sizeof *out);
    if (!bufs || !toks || !lens || !olen || !out) goto done;
    for (int i = 0; i < n; i++) {
        size_t cap = 2 * strlen(lines[i]) + 2;
        bufs[i] = malloc(cap);
        toks[i] = malloc(MAXTOK * sizeof(char *));
        out[i] = malloc((size_t)L * sizeof(char *));
        if (!bufs[i] || !toks[i] || !out[i]) goto done;
        ag_text_preprocess(lines[i], bufs[i], cap);
        int k = ag_text_tokenize(bufs[i], (char **)toks[i], MAXTOK);
        lens[i] = k < 0 ? MAXTOK : k;
    }
    if (translate_batch(m, g, (const char *const *const *)toks, lens, n, out, olen)) goto done;
    for (int i = 0; i < n; i++) {
        for (int t = 0; t < olen[i]; t++) printf("%s%s", t ? " " : "", out[i][t]);
        printf("\n");
    }
    fflush(stdout);
    for (int i = 0; attention_dir && i < n; i++)
        if (write_attention(m, g, attention_dir, first + i, toks[i], lens[i], out[i], olen[i])) goto done;
    rc = 0;
done:
    for (int i = 0; bufs && i < n; i++) {
        free(bufs[i]);
        if (toks) free(toks[i]);
        if (out) free(out[i]);
    }
    free(bufs), free(toks), free(lens), free(olen), free(out);
    return rc;
}

static int cmd_run(const opts *o, char **sentences, int n)
{
    if (!o->model) return bad("run needs --model MODEL%s%s", "", "");
    model m;
    ag_set_threads(o->threads);
    if (o->attention && mkdir(o->attention, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: --attention %s: %s\n", prog, o->attention, strerror(errno));
        return 1;
    }
    if (load_model(&m, o->model, NULL)) return 1;
    ag_graph *g = ag_graph_new();
    int rc = 1;
    if (!g) goto done;
    if (n > 0) {
        rc = run_sentences(&m, g, sentences, n, o->attention, 0);
    } else {
        char line[4096];
        rc = 0;
        for (int k = 0; rc == 0 && fgets(line, sizeof line, stdin); k++) {
            line[strcspn(line, "\r\n")] = 0;
            char *one[1] = {line};
            rc = run_sentences(&m, g, one, 1, o->attention, k);
        }
    }
done:
    ag_graph_free(g);
    model_free(&m);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    opts o;
    char **pos = malloc((size_t)argc * sizeof *pos);
    int npos = 0, rc;
    if (!pos) return 1;
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        free(pos);
        return 0;
    }
    rc = parse(argc, argv, 2, &o, &pos, &npos);
    if (rc) {
        free(pos);
        return rc < 0 ? 0 : rc;
    }
    if (strcmp(cmd, "run") && npos > 0) {
        rc = bad("unexpected argument '%s' for %s", pos[0], cmd);
    } else if (!strcmp(cmd, "train")) rc = cmd_train(&o);
    else if (!strcmp(cmd, "eval")) rc = cmd_eval(&o);
    else if (!strcmp(cmd, "run")) rc = cmd_run(&o, pos, npos);
    else rc = bad("unknown command '%s'%s", cmd, "");
    free(pos);
    return rc;
}
