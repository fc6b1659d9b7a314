/* checkpoint.c: the gpt example's model file, a safetensors checkpoint:
 *
 *   tensors       every parameter under the PyTorch twin's state_dict
 *                 names ("blocks.0.attention.w_q.weight", ...), and after
 *                 training Adam's moments ("optimizer.m.<name>",
 *                 "optimizer.v.<name>")
 *   __metadata__  format, vocab (the bytes in id order), the config, and
 *                 after training step, data_rng and graph_rng
 *
 * so that tests/reference/gpt.py loads the weights as they are and --resume
 * continues a run exactly where it stopped. */
#include "gpt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int model_build(model *m, uint64_t seed)
{
    m->store = ag_store_new();
    if (!m->store) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    if (ag_gpt_init(&m->net, m->store, &m->cfg, seed) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, ag_store_error(m->store));
        return 1;
    }
    m->has_net = 1;
    return 0;
}

void model_free(model *m)
{
    if (m->has_net) ag_gpt_free(&m->net);
    ag_store_free(m->store);
    memset(m, 0, sizeof *m);
}

static const char *activation_name(ag_activation a)
{
    return a == AG_ACT_GELU_TANH ? "gelu_tanh" : a == AG_ACT_RELU ? "relu" : "gelu";
}

/* "<16 hex digits> x 4" */
static void rng_format(const uint64_t s[4], char *buf, size_t len)
{
    snprintf(buf, len, "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, s[0], s[1], s[2], s[3]);
}

static int rng_parse(const char *text, uint64_t s[4])
{
    if (!text || strlen(text) != 64) return 1;
    for (int i = 0; i < 4; i++) {
        s[i] = 0;
        for (int k = 0; k < 16; k++) {
            char c = text[16 * i + k];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0) return 1;
            s[i] = s[i] << 4 | (uint64_t)d;
        }
    }
    return 0;
}

/* The metadata pairs: config and vocabulary, then the training state. */
static ag_status add_meta(ag_st_writer *w, const model *m, const train_state *ts)
{
    char vocab_text[1100], buf[80];
    vocab_format(&m->voc, vocab_text, sizeof vocab_text);
    const ag_gpt_config *c = &m->cfg;
    const struct {
        const char *key;
        int value;
    } ints[] = {{"context", c->context}, {"hidden", c->hidden}, {"heads", c->heads},
                {"ffn", c->ffn},         {"layers", c->layers}, {"untied", c->untied}};
    ag_status st = ag_st_add_meta(w, "format", GPT_FORMAT);
    if (st == AG_OK) st = ag_st_add_meta(w, "vocab", vocab_text);
    if (st == AG_OK) st = ag_st_add_meta(w, "activation", activation_name(c->activation));
    for (size_t i = 0; st == AG_OK && i < sizeof ints / sizeof ints[0]; i++) {
        snprintf(buf, sizeof buf, "%d", ints[i].value);
        st = ag_st_add_meta(w, ints[i].key, buf);
    }
    snprintf(buf, sizeof buf, "%.17g", c->dropout);
    if (st == AG_OK) st = ag_st_add_meta(w, "dropout", buf);
    if (!ts || st != AG_OK) return st;
    snprintf(buf, sizeof buf, "%" PRId64, ts->step);
    st = ag_st_add_meta(w, "step", buf);
    rng_format(ts->data_rng.s, buf, sizeof buf);
    if (st == AG_OK) st = ag_st_add_meta(w, "data_rng", buf);
    rng_format(ts->graph_rng, buf, sizeof buf);
    if (st == AG_OK) st = ag_st_add_meta(w, "graph_rng", buf);
    return st;
}

int model_save(const model *m, ag_optim *opt, const train_state *ts, const char *path)
{
    ag_st_writer *w = ag_st_writer_new();
    ag_status st = w ? AG_OK : AG_ERR_NOMEM;
    const char *dtype = sizeof(ag_real) == 8 ? "F64" : "F32";
    for (int i = 0; st == AG_OK && i < ag_store_count(m->store); i++) {
        ag_tensor *t = ag_store_at(m->store, i);
        st = ag_st_add(w, t->name, dtype, t->ndim, t->shape, t->data);
    }
    for (int which = 0; opt && which < 2; which++)
        for (int i = 0; st == AG_OK && i < ag_store_count(m->store); i++) {
            ag_tensor *t = ag_store_at(m->store, i);
            ag_real *s = ag_optim_state(opt, i, which, NULL);
            char name[160];
            snprintf(name, sizeof name, "optimizer.%s.%s", which ? "v" : "m", t->name);
            if (s) st = ag_st_add(w, name, dtype, t->ndim, t->shape, s);
        }
    if (st == AG_OK) st = add_meta(w, m, opt ? ts : NULL);
    char err[512] = "";
    if (st == AG_OK) st = ag_st_save(w, path, err, sizeof err);
    else snprintf(err, sizeof err, "%s: cannot assemble the checkpoint: %s", path, ag_status_name(st));
    ag_st_writer_free(w);
    if (st != AG_OK) fprintf(stderr, "%s: %s\n", prog, err);
    return st != AG_OK;
}

/* A whole number in [lo, hi] from the metadata. */
static int meta_number(const ag_st *f, const char *key, long lo, long hi, int *out, const char *path)
{
    const char *v = ag_st_meta(f, key);
    char *end = NULL;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (v && *v && !*end && !errno && x >= lo && x <= hi) {
        *out = (int)x;
        return 0;
    }
    fprintf(stderr, "%s: %s: metadata '%s' is %s%s%s, want a whole number from %ld to %ld\n", prog, path, key,
            v ? "'" : "missing", v ? v : "", v ? "'" : "", lo, hi);
    return 1;
}

/* Config and vocabulary from the metadata, in the flags' ranges (a hostile
 * file cannot ask for a model that takes hours to build). */
static int read_config(const ag_st *f, model *m, const char *path)
{
    ag_gpt_config *c = &m->cfg;
    if (meta_number(f, "context", 1, 4096, &c->context, path) || meta_number(f, "hidden", 1, 4096, &c->hidden, path) ||
        meta_number(f, "heads", 1, 256, &c->heads, path) || meta_number(f, "ffn", 1, 16384, &c->ffn, path) ||
        meta_number(f, "layers", 1, 64, &c->layers, path) || meta_number(f, "untied", 0, 1, &c->untied, path))
        return 1;
    const char *act = ag_st_meta(f, "activation"), *dr = ag_st_meta(f, "dropout");
    if (act && !strcmp(act, "gelu")) c->activation = AG_ACT_GELU;
    else if (act && !strcmp(act, "gelu_tanh")) c->activation = AG_ACT_GELU_TANH;
    else if (act && !strcmp(act, "relu")) c->activation = AG_ACT_RELU;
    else {
        fprintf(stderr, "%s: %s: metadata 'activation' is %s, want gelu, gelu_tanh or relu\n", prog, path,
                act ? act : "missing");
        return 1;
    }
    char *end = NULL;
    c->dropout = dr ? strtod(dr, &end) : -1;
    if (!dr || *end || !(c->dropout >= 0 && c->dropout < 1)) {
        fprintf(stderr, "%s: %s: metadata 'dropout' is %s, want a number in [0, 1)\n", prog, path, dr ? dr : "missing");
        return 1;
    }
    if (vocab_parse(&m->voc, ag_st_meta(f, "vocab"))) {
        fprintf(stderr, "%s: %s: metadata 'vocab' is missing or not increasing byte values 0..255\n", prog, path);
        return 1;
    }
    c->vocab = m->voc.V;
    return 0;
}

int model_load(model *m, const char *path, ag_st **keep)
{
    char err[512];
    ag_st *f = NULL;
    memset(m, 0, sizeof *m);
    if (ag_st_load(path, &f, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    const char *fmt = ag_st_meta(f, "format");
    if (!fmt || strcmp(fmt, GPT_FORMAT)) {
        fprintf(stderr, "%s: %s: not a gpt model (metadata 'format' is %s, want '%s')\n", prog, path,
                fmt ? fmt : "missing", GPT_FORMAT);
        goto fail;
    }
    if (read_config(f, m, path) || model_build(m, 0)) goto fail;
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

int model_load_state(ag_st *f, const model *m, ag_optim *opt, train_state *ts, const char *path)
{
    const char *step = ag_st_meta(f, "step");
    char *end = NULL, err[512];
    ts->step = step ? strtoll(step, &end, 10) : -1;
    if (!step || *end || ts->step < 0 || rng_parse(ag_st_meta(f, "data_rng"), ts->data_rng.s) ||
        rng_parse(ag_st_meta(f, "graph_rng"), ts->graph_rng)) {
        fprintf(stderr, "%s: %s: no training state to resume from (step, data_rng, graph_rng)\n", prog, path);
        return 1;
    }
    for (int which = 0; which < 2; which++)
        for (int i = 0; i < ag_store_count(m->store); i++) {
            ag_tensor *t = ag_store_at(m->store, i);
            size_t n;
            ag_real *s = ag_optim_state(opt, i, which, &n);
            char name[160];
            snprintf(name, sizeof name, "optimizer.%s.%s", which ? "v" : "m", t->name);
            if (s && ag_st_read(f, name, s, n, err, sizeof err) != AG_OK) {
                fprintf(stderr, "%s: %s: %s\n", prog, path, err);
                return 1;
            }
        }
    ag_optim_set_steps(opt, ts->step);
    return 0;
}
