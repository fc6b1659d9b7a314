/* examples/translate/checkpoint.c: the translator's model file.
 *
 * A safetensors file: the parameters under their names (attograd_nn.h), and
 * in __metadata__ "format" = FORMAT, the config, both vocabularies and, when
 * train wrote it, the training state that --resume needs (the optimizer's
 * moments are tensors "optimizer.m.<name>" / "optimizer.v.<name>").
 *
 * Every metadata field is read by one parser from one table (its kind and
 * range), and written from the same table, so reading and writing cannot
 * drift apart.  Invariant of load_model: nothing is built before the config
 * has been checked against the file's tensors, every parameter the config
 * implies present with the shape it implies, so the memory a model takes is
 * bounded by the size of the file that describes it. */
#include "translate.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- building ------------------------------------------------------------- */

void model_free(model *m)
{
    if (m->has_net) ag_seq2seq_free(&m->net);
    ag_store_free(m->store);
    ag_vocab_free(m->sv);
    ag_vocab_free(m->tv);
    memset(m, 0, sizeof *m);
}

int model_build(model *m, uint64_t seed, const char *from)
{
    m->store = ag_store_new();
    if (!m->store) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    ag_status st = ag_seq2seq_init(&m->net, m->store, &m->cfg, seed);
    if (st != AG_OK) {
        /* the store's reason names the parameter and says "out of memory"
         * when that is what failed (the status is then only AG_ERR_ARG) */
        const char *why = ag_store_error(m->store);
        fprintf(stderr, "%s: %s: cannot build the model: %s\n", prog, from, *why ? why : ag_status_name(st));
        return 1;
    }
    m->has_net = 1;
    return 0;
}

/* ---- the metadata table --------------------------------------------------- */

/* M_WORD: a const char * from words; M_CHOICE: an int, the index in words */
typedef enum { M_INT, M_INT64, M_REAL, M_WORD, M_CHOICE, M_RNG, M_VOCAB } meta_kind;

static const char *const optimizers[] = {"sgd", "adam", NULL};

typedef struct meta_field {
    const char *key;
    meta_kind kind;
    double lo, hi;             /* M_INT, M_INT64, M_REAL: the range */
    int hi_open;               /* M_REAL: hi excluded */
    int optional;              /* absent: 0 (written only when not 0) */
    size_t at;                 /* offset of the value in its struct */
    const char *const *words;  /* M_WORD, M_CHOICE: the values allowed */
} meta_field;

#define TWO53 9007199254740992.0 /* counts up to here are exact in a double and cannot overflow an add */

/* The config, into a model: read in this order (the vocabularies last). */
static const meta_field config_fields[] = {
    {"hidden", M_INT, 1, HIDDEN_MAX, .at = offsetof(model, cfg.hidden)},
    {"heads", M_INT, 1, HEADS_MAX, .at = offsetof(model, cfg.heads)},
    {"ffn", M_INT, 1, FFN_MAX, .at = offsetof(model, cfg.ffn)},
    {"layers", M_INT, 1, LAYERS_MAX, .at = offsetof(model, cfg.layers)},
    {"max_len", M_INT, MAX_LEN_MIN, MAX_LEN_MAX, .at = offsetof(model, cfg.max_len)},
    {"dropout", M_REAL, 0, 1, .hi_open = 1, .at = offsetof(model, cfg.dropout)},
    /* absent (files written before it existed, and "scaled"): scaled */
    {"init", M_CHOICE, .optional = 1, .at = offsetof(model, cfg.init), .words = init_names},
    /* absent (files written before them, post-norm, no QK-norm): 0; train's
     * default model is pre-norm, so its files have "pre_norm": "1" */
    {"pre_norm", M_INT, 0, 1, .optional = 1, .at = offsetof(model, cfg.pre_norm)},
    {"qk_norm", M_INT, 0, 1, .optional = 1, .at = offsetof(model, cfg.qk_norm)},
    {"src_vocab", M_VOCAB, .at = offsetof(model, sv)},
    {"tgt_vocab", M_VOCAB, .at = offsetof(model, tv)},
};

/* The training state, into a train_state. */
static const meta_field state_fields[] = {
    {"epoch", M_INT, 0, EPOCHS_MAX, .at = offsetof(train_state, epoch)},
    {"min_freq", M_INT, 1, MIN_FREQ_MAX, .at = offsetof(train_state, min_freq)},
    {"optimizer", M_WORD, .at = offsetof(train_state, optimizer), .words = optimizers},
    {"optimizer_steps", M_INT64, 0, TWO53, .at = offsetof(train_state, optimizer_steps)},
    {"data_rng", M_RNG, .at = offsetof(train_state, data_rng.s)},
    {"graph_rng", M_RNG, .at = offsetof(train_state, graph_rng)},
    {"epoch_pairs", M_INT, 0, 2147483647.0, .optional = 1, .at = offsetof(train_state, pairs_done)},
    {"epoch_loss_sum", M_REAL, 0, 1e300, .optional = 1, .at = offsetof(train_state, loss_sum)},
    {"epoch_tokens", M_INT64, 0, TWO53, .optional = 1, .at = offsetof(train_state, tokens)},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* A whole number in [lo, hi] written as digits (an optional '-'): no
 * spaces, no '+', no junk after it. */
static int whole(const char *v, double lo, double hi, long long *out)
{
    const char *d = v[0] == '-' ? v + 1 : v;
    if (*d < '0' || *d > '9') return 1;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*end || errno || (double)x < lo || (double)x > hi) return 1;
    *out = x;
    return 0;
}

/* 64 hex digits -> 4 words. */
static int rng_words(const char *v, uint64_t out[4])
{
    if (strlen(v) != 64 || strspn(v, "0123456789abcdefABCDEF") != 64) return 1;
    for (int i = 0; i < 4; i++) {
        char part[17];
        memcpy(part, v + 16 * i, 16);
        part[16] = 0;
        out[i] = strtoull(part, NULL, 16);
    }
    return 0;
}

/* What a field wants, for messages. */
static void describe(const meta_field *fl, char *buf, size_t len)
{
    switch (fl->kind) {
    case M_INT:
    case M_INT64: snprintf(buf, len, "a whole number from %.0f to %.0f", fl->lo, fl->hi); break;
    case M_REAL: snprintf(buf, len, "a number in [%g, %g%s", fl->lo, fl->hi, fl->hi_open ? ")" : "]"); break;
    case M_WORD:
    case M_CHOICE:
        snprintf(buf, len, "one of:");
        for (int i = 0; fl->words[i]; i++)
            snprintf(buf + strlen(buf), len - strlen(buf), " %s", fl->words[i]);
        break;
    case M_RNG: snprintf(buf, len, "64 hex digits"); break;
    case M_VOCAB: snprintf(buf, len, "a vocabulary"); break;
    }
}

/* Field fl of f into base + fl->at.  0, or 1 with a message naming the key,
 * what it holds and what it should. */
static int read_field(const ag_safetensors *f, const char *path, const meta_field *fl, char *base)
{
    const char *v = ag_safetensors_meta(f, fl->key);
    void *dst = base + fl->at;
    if (!v && fl->optional) return 0;
    int bad = !v;
    long long x = 0;
    double r = 0;
    char *end, err[512];
    switch (bad ? -1 : (int)fl->kind) {
    case M_INT:
        if (!(bad = whole(v, fl->lo, fl->hi, &x))) *(int *)dst = (int)x;
        break;
    case M_INT64:
        if (!(bad = whole(v, fl->lo, fl->hi, &x))) *(int64_t *)dst = x;
        break;
    case M_REAL:
        errno = 0;
        r = strtod(v, &end);
        bad = !*v || *end || errno || !isfinite(r) || r < fl->lo || r > fl->hi || (fl->hi_open && r >= fl->hi);
        if (!bad) *(double *)dst = r;
        break;
    case M_WORD:
        bad = 1;
        for (int i = 0; bad && fl->words[i]; i++)
            if (!strcmp(v, fl->words[i])) *(const char **)dst = fl->words[i], bad = 0;
        break;
    case M_CHOICE:
        bad = 1;
        for (int i = 0; bad && fl->words[i]; i++)
            if (!strcmp(v, fl->words[i])) *(int *)dst = i, bad = 0;
        break;
    case M_RNG: bad = rng_words(v, (uint64_t *)dst); break;
    case M_VOCAB:
        if (ag_vocab_parse(v, strlen(v), (ag_vocab **)dst, err, sizeof err) != AG_OK) {
            fprintf(stderr, "%s: %s: bad vocabulary in metadata '%s': %s\n", prog, path, fl->key, err);
            return 1;
        }
        break;
    }
    if (!bad) return 0;
    char want[128];
    describe(fl, want, sizeof want);
    if (!v) fprintf(stderr, "%s: %s: metadata '%s' is missing, want %s\n", prog, path, fl->key, want);
    else fprintf(stderr, "%s: %s: metadata '%s' is '%.80s%s', want %s\n", prog, path, fl->key, v,
                 strlen(v) > 80 ? "..." : "", want);
    return 1;
}

static int read_fields(const ag_safetensors *f, const char *path, const meta_field *t, size_t n, void *base)
{
    for (size_t i = 0; i < n; i++)
        if (read_field(f, path, &t[i], base)) return 1;
    return 0;
}

/* Field fl of base + fl->at as a metadata pair; optional fields that are 0
 * are left out.  Returns the writer's status. */
static ag_status write_field(ag_safetensors_writer *w, const meta_field *fl, const char *base)
{
    const void *src = base + fl->at;
    char buf[80];
    const char *v = buf;
    switch (fl->kind) {
    case M_INT:
        if (fl->optional && !*(const int *)src) return AG_OK;
        snprintf(buf, sizeof buf, "%d", *(const int *)src);
        break;
    case M_INT64:
        if (fl->optional && !*(const int64_t *)src) return AG_OK;
        snprintf(buf, sizeof buf, "%" PRId64, *(const int64_t *)src);
        break;
    case M_REAL:
        if (fl->optional && *(const double *)src == 0) return AG_OK;
        snprintf(buf, sizeof buf, "%.17g", *(const double *)src);
        break;
    case M_WORD: v = *(const char *const *)src; break;
    case M_CHOICE:
        if (fl->optional && !*(const int *)src) return AG_OK;
        v = fl->words[*(const int *)src];
        break;
    case M_RNG: {
        const uint64_t *s = src;
        snprintf(buf, sizeof buf, "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, s[0], s[1], s[2], s[3]);
        break;
    }
    case M_VOCAB: {
        const ag_vocab *voc = *(ag_vocab *const *)src;
        size_t n = ag_vocab_serialize(voc, NULL, 0) + 1;
        char *s = malloc(n);
        if (!s) return AG_ERR_NOMEM;
        ag_vocab_serialize(voc, s, n);
        ag_status st = ag_safetensors_add_meta(w, fl->key, s);
        free(s);
        return st;
    }
    }
    return ag_safetensors_add_meta(w, fl->key, v);
}

/* ---- the config against the tensors ----------------------------------------- */

/* The parameters ag_seq2seq_init makes for a config, walked by name and
 * shape [d0] or [d0, d1] (attograd_nn.h names them): each must be in the
 * file with that shape. */
typedef struct expect {
    const ag_safetensors *f;
    const char *path;
    const ag_seq2seq_config *cfg;
    int bad, count; /* first mismatch seen; parameters walked */
    size_t numel;
} expect;

static void want(expect *e, const char *name, int d0, int d1)
{
    e->count++;
    e->numel += (size_t)d0 * (size_t)(d1 ? d1 : 1);
    if (e->bad) return;
    const ag_seq2seq_config *c = e->cfg;
    int i = ag_safetensors_find(e->f, name), nd = d1 ? 2 : 1;
    if (i < 0) {
        fprintf(stderr, "%s: %s: tensor '%s': not in the file (metadata: layers %d)\n", prog, e->path, name,
                c->layers);
        e->bad = 1;
        return;
    }
    const int64_t *s = ag_safetensors_shape(e->f, i);
    if (ag_safetensors_ndim(e->f, i) == nd && s[0] == d0 && (nd == 1 || s[1] == d1)) return;
    char got[160] = "[", need[64];
    for (int k = 0; k < ag_safetensors_ndim(e->f, i) && strlen(got) < 120; k++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%" PRId64, k ? ", " : "", s[k]);
    if (nd == 1) snprintf(need, sizeof need, "[%d]", d0);
    else snprintf(need, sizeof need, "[%d, %d]", d0, d1);
    fprintf(stderr, "%s: %s: tensor '%s' is %s], but the metadata (vocabularies %d and %d tokens, hidden %d, ffn %d) "
            "makes it %s\n", prog, e->path, name, got, c->src_vocab, c->tgt_vocab, c->hidden, c->ffn, need);
    e->bad = 1;
}

static void want_linear(expect *e, const char *prefix, const char *name, int out, int in)
{
    char w[160], b[160];
    snprintf(w, sizeof w, "%s.%s.weight", prefix, name);
    snprintf(b, sizeof b, "%s.%s.bias", prefix, name);
    want(e, w, out, in);
    want(e, b, out, 0);
}

/* A LayerNorm of width C: "<prefix>.<name>.weight" and ".bias" */
static void want_norm_of(expect *e, const char *prefix, const char *name, int C)
{
    char w[160], b[160];
    snprintf(w, sizeof w, "%s.%s.weight", prefix, name);
    snprintf(b, sizeof b, "%s.%s.bias", prefix, name);
    want(e, w, C, 0);
    want(e, b, C, 0);
}

static void want_norm(expect *e, const char *prefix, const char *name)
{
    want_norm_of(e, prefix, name, e->cfg->hidden);
}

static void want_attention(expect *e, const char *prefix, const char *name)
{
    static const char *const proj[4] = {"w_q", "w_k", "w_v", "w_o"};
    char p[160];
    snprintf(p, sizeof p, "%s.%s", prefix, name);
    for (int k = 0; k < 4; k++) want_linear(e, p, proj[k], e->cfg->hidden, e->cfg->hidden);
    if (e->cfg->qk_norm) {
        want_norm_of(e, p, "q_norm", e->cfg->hidden / e->cfg->heads);
        want_norm_of(e, p, "k_norm", e->cfg->hidden / e->cfg->heads);
    }
}

static void want_ffn(expect *e, const char *prefix)
{
    char p[160];
    snprintf(p, sizeof p, "%s.ffn", prefix);
    want_linear(e, p, "dense1", e->cfg->ffn, e->cfg->hidden);
    want_linear(e, p, "dense2", e->cfg->hidden, e->cfg->ffn);
}

/* Walk every parameter of cfg in ag_seq2seq_init's order. */
static void want_model(expect *e)
{
    const ag_seq2seq_config *c = e->cfg;
    char p[64];
    want(e, "encoder.embedding.weight", c->src_vocab, c->hidden);
    want(e, "decoder.embedding.weight", c->tgt_vocab, c->hidden);
    for (int i = 0; i < c->layers; i++) {
        snprintf(p, sizeof p, "encoder.blocks.%d", i);
        want_attention(e, p, "attention");
        want_norm(e, p, "norm1");
        want_ffn(e, p);
        want_norm(e, p, "norm2");
    }
    if (c->pre_norm) want_norm(e, "encoder", "norm");
    for (int i = 0; i < c->layers; i++) {
        snprintf(p, sizeof p, "decoder.blocks.%d", i);
        want_attention(e, p, "self_attention");
        want_norm(e, p, "norm1");
        want_attention(e, p, "cross_attention");
        want_norm(e, p, "norm2");
        want_ffn(e, p);
        want_norm(e, p, "norm3");
    }
    if (c->pre_norm) want_norm(e, "decoder", "norm");
    want_linear(e, "decoder", "dense", c->tgt_vocab, c->hidden);
}

/* ---- loading -------------------------------------------------------------- */

static int check_format(const ag_safetensors *f, const char *path)
{
    const char *fmt = ag_safetensors_meta(f, "format");
    if (fmt && !strcmp(fmt, FORMAT)) return 0;
    fprintf(stderr, "%s: %s: not a translator model (metadata 'format' is %s%.60s%s, want '%s')\n", prog, path,
            fmt ? "'" : "missing", fmt ? fmt : "", fmt ? "'" : "", FORMAT);
    return 1;
}

/* The config from the metadata, checked against the tensors. */
static int read_config(model *m, const ag_safetensors *f, const char *path, expect *e)
{
    if (read_fields(f, path, config_fields, COUNT(config_fields), m)) return 1;
    if (m->cfg.hidden % m->cfg.heads) {
        fprintf(stderr, "%s: %s: metadata hidden %d is not divisible by heads %d\n", prog, path, m->cfg.hidden,
                m->cfg.heads);
        return 1;
    }
    m->cfg.src_vocab = ag_vocab_size(m->sv);
    m->cfg.tgt_vocab = ag_vocab_size(m->tv);
    *e = (expect){.f = f, .path = path, .cfg = &m->cfg};
    want_model(e);
    return e->bad;
}

int load_model(model *m, const char *path, ag_safetensors **keep)
{
    char err[512];
    ag_safetensors *f = NULL;
    expect e;
    memset(m, 0, sizeof *m);
    if (ag_safetensors_load(path, &f, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    if (check_format(f, path) || read_config(m, f, path, &e) || model_build(m, 0, path)) goto fail;
    if (ag_store_count(m->store) != e.count || ag_store_numel(m->store) != e.numel) {
        fprintf(stderr, "%s: internal error: the model has %d parameters (%zu values), the loader checked %d (%zu)\n",
                prog, ag_store_count(m->store), ag_store_numel(m->store), e.count, e.numel);
        goto fail;
    }
    if (ag_store_load(m->store, f, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, err);
        goto fail;
    }
    if (keep) *keep = f;
    else ag_safetensors_free(f);
    return 0;
fail:
    ag_safetensors_free(f);
    model_free(m);
    return 1;
}

int load_train_state(const ag_safetensors *f, const char *path, train_state *ts)
{
    memset(ts, 0, sizeof *ts);
    if (!ag_safetensors_meta(f, "epoch") && !ag_safetensors_meta(f, "data_rng") && !ag_safetensors_meta(f, "graph_rng")) {
        fprintf(stderr, "%s: %s: no training state to resume from (saved without it?)\n", prog, path);
        return 1;
    }
    return read_fields(f, path, state_fields, COUNT(state_fields), ts);
}

/* "optimizer.m.<param>" (which 0) or "optimizer.v.<param>" (which 1). */
static void state_name(char *buf, size_t len, int which, const ag_tensor *t)
{
    snprintf(buf, len, "optimizer.%s.%s", which ? "v" : "m", t->name);
}

int optimizer_load(ag_optim *opt, const model *m, const ag_safetensors *f, const char *path, int64_t steps)
{
    char err[512], name[160];
    ag_optim_set_steps(opt, steps);
    for (int i = 0; i < ag_store_count(m->store); i++) {
        for (int which = 0; which < 2; which++) {
            size_t cnt;
            ag_real *s = ag_optim_state(opt, i, which, &cnt);
            if (!s) continue;
            state_name(name, sizeof name, which, ag_store_at(m->store, i));
            if (ag_safetensors_read(f, name, s, cnt, err, sizeof err) != AG_OK) {
                fprintf(stderr, "%s: %s: %s\n", prog, path, err);
                return 1;
            }
        }
    }
    return 0;
}

/* ---- saving ---------------------------------------------------------------- */

static ag_status add_optimizer_state(ag_safetensors_writer *w, const model *m, ag_optim *opt, const char *dtype)
{
    char name[160];
    ag_status st = AG_OK;
    for (int i = 0; st == AG_OK && i < ag_store_count(m->store); i++) {
        ag_tensor *t = ag_store_at(m->store, i);
        for (int which = 0; which < 2 && st == AG_OK; which++) {
            size_t cnt;
            ag_real *s = ag_optim_state(opt, i, which, &cnt);
            if (!s) continue;
            state_name(name, sizeof name, which, t);
            st = ag_safetensors_add(w, name, dtype, t->ndim, t->shape, s);
        }
    }
    return st;
}

/* The file's contents: the parameters, "format", the vocabularies, the
 * config, then (opt and ts) the training state and the moments. */
static ag_status fill_writer(ag_safetensors_writer *w, const model *m, ag_optim *opt, const train_state *ts)
{
    const char *dtype = sizeof(ag_real) == 8 ? "F64" : "F32";
    ag_status st = AG_OK;
    for (int i = 0; st == AG_OK && i < ag_store_count(m->store); i++) {
        ag_tensor *t = ag_store_at(m->store, i);
        st = ag_safetensors_add(w, t->name, dtype, t->ndim, t->shape, t->data);
    }
    if (st == AG_OK) st = ag_safetensors_add_meta(w, "format", FORMAT);
    /* the vocabularies first, then the rest of the config in table order */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; st == AG_OK && i < COUNT(config_fields); i++)
            if ((config_fields[i].kind == M_VOCAB) == !pass) st = write_field(w, &config_fields[i], (const char *)m);
    if (!opt || !ts) return st;
    train_state s = *ts;
    s.optimizer = ag_optim_kind(opt);
    s.optimizer_steps = ag_optim_steps(opt);
    for (size_t i = 0; st == AG_OK && i < COUNT(state_fields); i++)
        st = write_field(w, &state_fields[i], (const char *)&s);
    if (st == AG_OK) st = add_optimizer_state(w, m, opt, dtype);
    return st;
}

int save_model(const model *m, ag_optim *opt, const train_state *ts, const char *path)
{
    char err[512];
    ag_safetensors_writer *w = ag_safetensors_writer_new();
    ag_status st = w ? fill_writer(w, m, opt, ts) : AG_ERR_NOMEM;
    int rc = 1;
    if (st != AG_OK) fprintf(stderr, "%s: %s: cannot save: %s\n", prog, path, ag_status_name(st));
    else if (ag_safetensors_save(w, path, err, sizeof err) != AG_OK) fprintf(stderr, "%s: %s\n", prog, err);
    else rc = 0;
    ag_safetensors_writer_free(w);
    return rc;
}
