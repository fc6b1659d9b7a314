/* tests/test_parity_translator.c: one training step of the toy translator
 * against PyTorch.
 *
 * tests/reference/tiny_model.safetensors is a checkpoint that
 * `translate train` wrote (1 epoch on tests/reference/tiny.tsv, hidden 16,
 * 2 heads, ffn 32, 1 layer, post-norm).  tests/reference/translator.py step rebuilt the
 * same model in PyTorch, loaded that checkpoint and, with dropout off, on a
 * fixed batch of 8 pairs, computed the loss, every gradient, the gradient
 * norm, and the parameters after one SGD step (lr 0.1, momentum 0.9) and,
 * separately, after one Adam step (lr 1e-3, betas 0.9/0.98, eps 1e-9), both
 * after clipping the norm to 1.0.  It did so in float32 ("loss", "grad.<p>",
 * "sgd.<p>", "adam.<p>") and in float64 ("loss64", "grad64.<p>", ...), from
 * the same float32 weights.  The float build compares with the float32
 * results, the double build with the float64 ones, so each build is held
 * to its own precision: together the checks cover the forward pass, every
 * gradient, the clipping and both optimizers.
 *
 * The batch is stored too (batch.src, batch.src_valid, batch.tgt_in,
 * batch.tgt_out); one test rebuilds it from tiny.tsv with the C data
 * pipeline, so preprocessing, vocabulary and encoding are checked as well.
 *
 * The same again for a model with both cures of a saturated softmax,
 * pre-norm and QK-norm (tiny_cured_model.safetensors, `translate train ...
 * --pre-norm --qk-norm`, and its fixture translator_step_cured.safetensors).
 *
 * Regenerate (see tests/reference/README.md):
 *   /usr/bin/python3 tests/reference/translator.py step \
 *       --model tests/reference/tiny_model.safetensors --data tests/reference/tiny.tsv \
 *       --out tests/reference/translator_step.safetensors */
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

#define MODEL "tests/reference/tiny_model.safetensors"
#define DATA "tests/reference/tiny.tsv"
#define FIXTURE "tests/reference/translator_step.safetensors"
#define CURED_MODEL "tests/reference/tiny_cured_model.safetensors"
#define CURED_FIXTURE "tests/reference/translator_step_cured.safetensors"

/* SUFFIX (each build's reference) and the tolerances LOSS_REL, P_ABS,
 * P_REL, G_ABS, G_REL: tests/fixture.h, shared with tests/test_gpt.c. */

#define BATCH 8      /* rows k * n / 8 of tiny.tsv, k < 8 */
#define SGD_LR 0.1
#define SGD_MOMENTUM 0.9
#define ADAM_LR 1e-3
#define CLIP 1.0

/* ---- the fixture and the checkpoint ------------------------------------------ */

static double load_scalar(const ag_safetensors *f, const char *name)
{
    size_t n;
    double *v = load_ref(f, name, &n);
    cr_assert_eq(n, 1, "%s has %zu values", name, n);
    double x = v[0];
    free(v);
    return x;
}

/* The translator's model, its config and vocabularies from the checkpoint's
 * metadata, its weights from the checkpoint (as examples/translate/checkpoint.c's
 * load_model). */
typedef struct tiny {
    const char *path;
    ag_safetensors *ckpt;
    ag_vocab *sv, *tv;
    ag_store *store;
    ag_seq2seq net;
} tiny;

static int meta_int(const ag_safetensors *f, const char *key)
{
    const char *v = ag_safetensors_meta(f, key);
    cr_assert_not_null(v, "a checkpoint without metadata '%s'", key);
    return atoi(v);
}

/* An optional 0/1 metadata field: absent is 0. */
static int meta_flag(const ag_safetensors *f, const char *key)
{
    const char *v = ag_safetensors_meta(f, key);
    return v ? meta_int(f, key) : 0;
}

static void tiny_load_from(tiny *m, const char *path)
{
    char err[256] = "";
    memset(m, 0, sizeof *m);
    m->path = path;
    m->ckpt = open_fixture(path);
    const char *fmt = ag_safetensors_meta(m->ckpt, "format");
    cr_assert(fmt && !strcmp(fmt, "attograd-translator-1"), "%s: format %s", path, fmt ? fmt : "missing");
    const char *vs = ag_safetensors_meta(m->ckpt, "src_vocab"), *vt = ag_safetensors_meta(m->ckpt, "tgt_vocab");
    cr_assert(vs && vt, "%s: no vocabularies", path);
    cr_assert_eq(ag_vocab_parse(vs, strlen(vs), &m->sv, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_vocab_parse(vt, strlen(vt), &m->tv, err, sizeof err), AG_OK, "%s", err);
    const char *dr = ag_safetensors_meta(m->ckpt, "dropout");
    cr_assert_not_null(dr);
    ag_seq2seq_config cfg = {ag_vocab_size(m->sv), ag_vocab_size(m->tv), meta_int(m->ckpt, "hidden"),
                             meta_int(m->ckpt, "heads"), meta_int(m->ckpt, "ffn"), meta_int(m->ckpt, "layers"),
                             meta_int(m->ckpt, "max_len"), strtod(dr, NULL), AG_SEQ2SEQ_INIT_SCALED,
                             meta_flag(m->ckpt, "pre_norm"), meta_flag(m->ckpt, "qk_norm")};
    cr_assert_gt(cfg.dropout, 0, "the checkpoint should have dropout, which eval mode turns off");
    m->store = ag_store_new();
    cr_assert_not_null(m->store);
    cr_assert_eq(ag_seq2seq_init(&m->net, m->store, &cfg, 0), AG_OK, "%s", ag_store_error(m->store));
    cr_assert_eq(ag_store_load(m->store, m->ckpt, err, sizeof err), AG_OK, "%s", err);
}

static void tiny_load(tiny *m) { tiny_load_from(m, MODEL); }

static void tiny_free(tiny *m)
{
    ag_seq2seq_free(&m->net);
    ag_store_free(m->store);
    ag_vocab_free(m->sv);
    ag_vocab_free(m->tv);
    ag_safetensors_free(m->ckpt);
}

/* The fixture's batch: B rows of S source ids and T target ids. */
typedef struct batch {
    int B, S, T;
    int src[BATCH * 16], src_valid[BATCH], tgt_in[BATCH * 16], tgt_out[BATCH * 16];
} batch;

/* Stored ints of shape [rows, cols], or [rows] when cols is 0. */
static void load_rows(const ag_safetensors *f, const char *name, int *dst, int rows, int cols)
{
    int i = stored(f, name);
    cr_assert_eq(ag_safetensors_ndim(f, i), cols ? 2 : 1, "%s: axes", name);
    cr_assert_eq(ag_safetensors_shape(f, i)[0], rows, "%s: rows", name);
    if (cols) cr_assert_eq(ag_safetensors_shape(f, i)[1], cols, "%s: columns", name);
    load_ints(f, name, dst, (size_t)rows * (size_t)(cols ? cols : 1));
}

static void batch_load(const ag_safetensors *f, batch *b)
{
    int i = stored(f, "batch.src"), j = stored(f, "batch.tgt_out");
    b->B = (int)ag_safetensors_shape(f, i)[0];
    b->S = (int)ag_safetensors_shape(f, i)[1];
    b->T = (int)ag_safetensors_shape(f, j)[1];
    cr_assert(b->B == BATCH && b->S >= 1 && b->S <= 16 && b->T >= 1 && b->T <= 16, "batch [%d, %d] / [%d, %d]",
              b->B, b->S, b->B, b->T);
    load_rows(f, "batch.src", b->src, b->B, b->S);
    load_rows(f, "batch.src_valid", b->src_valid, b->B, 0);
    load_rows(f, "batch.tgt_in", b->tgt_in, b->B, b->T);
    load_rows(f, "batch.tgt_out", b->tgt_out, b->B, b->T);
}

/* The loss of the fixture's batch in eval mode (dropout off) on a new graph
 * (the caller frees it), then its gradients; the loss against the
 * fixture's "loss" (float build) or "loss64" (double build). */
static ag_graph *loss_and_backward(tiny *m, const ag_safetensors *f)
{
    batch b;
    batch_load(f, &b);
    ag_graph *g = ag_graph_new();
    cr_assert_not_null(g);
    ag_graph_set_training(g, 0);
    ag_tensor *loss = ag_seq2seq_loss(g, &m->net, b.src, b.src_valid, b.tgt_in, b.tgt_out, b.B, b.S, b.T);
    cr_assert_not_null(loss, "%s", ag_graph_error(g));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    double got = (double)loss->data[0], want = load_scalar(f, "loss" SUFFIX);
    cr_assert(fabs(got - want) <= LOSS_REL * fabs(want), "loss %.10g, want %.10g", got, want);
    return g;
}

/* The fixture holds exactly one "<prefix>.<p>" per parameter of the store. */
static void expect_count(const ag_safetensors *f, const ag_store *s, const char *prefix)
{
    int k = count_stored(f, prefix);
    cr_assert_eq(k, ag_store_count(s), "the fixture has %d %s.* tensors, the model %d parameters", k, prefix,
                 ag_store_count(s));
}

/* From the checkpoint's weights: the loss, clipping to norm 1, then one step
 * of `kind` ("sgd" or "adam"); every parameter against "<kind>.<p>" (float
 * build) or "<kind>64.<p>" (double build). */
static void check_step(const char *kind, const char *model, const char *fixture)
{
    tiny m;
    tiny_load_from(&m, model);
    ag_safetensors *f = open_fixture(fixture);
    ag_graph *g = loss_and_backward(&m, f);
    double norm;
    cr_assert_eq(ag_clip_grad_norm(m.store, CLIP, &norm), AG_OK, "%s", ag_store_error(m.store));
    cr_assert_gt(norm, CLIP, "the batch's gradient norm %g should exceed %g, so that clipping is tested", norm,
                 CLIP);
    ag_optim *opt = !strcmp(kind, "sgd") ? ag_sgd_new(m.store, SGD_LR, SGD_MOMENTUM, 0, 0)
                                         : ag_adam_new(m.store, ADAM_LR, 0.9, 0.98, 1e-9, 0, 0);
    cr_assert_not_null(opt, "%s", ag_store_error(m.store));
    /* the step moves each parameter from its checkpoint value */
    size_t total = ag_store_numel(m.store);
    ag_real *before = malloc(total * sizeof *before);
    cr_assert_not_null(before);
    for (int i = 0, at = 0; i < ag_store_count(m.store); at += (int)ag_store_at(m.store, i)->size, i++)
        memcpy(before + at, ag_store_at(m.store, i)->data, ag_store_at(m.store, i)->size * sizeof(ag_real));
    cr_assert_eq(ag_optim_step(opt), AG_OK, "%s", ag_optim_error(opt));

    expect_count(f, m.store, kind);
    char name[160];
    size_t at = 0;
    int moved = 0;
    for (int i = 0; i < ag_store_count(m.store); at += ag_store_at(m.store, i)->size, i++) {
        ag_tensor *p = ag_store_at(m.store, i);
        for (size_t k = 0; k < p->size; k++) moved += p->data[k] != before[at + k];
        snprintf(name, sizeof name, "%s" SUFFIX ".%s", kind, p->name);
#ifndef AG_DOUBLE
        /* The key bias (with QK-norm: k_norm's bias, added after the
         * norm) shifts every score of a query by the same amount,
         * which the softmax ignores: its gradient is exactly 0 in exact
         * arithmetic (sum_s dscores[t, s] = 0 for every query t).  In float
         * it is rounding noise, ~1e-9, as large as Adam's eps, so Adam's
         * first step, lr * g / (|g| + eps), moves it by an amount set by the
         * noise's sign, anywhere in [-lr, lr], in PyTorch as here.  So check
         * what does hold: the gradient is noise and the move is at most lr.
         * (The double build, where the noise is ~1e-18, compares it with
         * the rest.) */
        if (!strcmp(kind, "adam") && strstr(p->name, m.net.cfg.qk_norm ? ".k_norm.bias" : ".w_k.bias")) {
            for (size_t k = 0; k < p->size; k++) {
                cr_assert_leq(fabs((double)p->grad[k]), 1e-6, "%s: gradient %g is not rounding noise", p->name,
                              (double)p->grad[k]);
                cr_assert_leq(fabs((double)p->data[k] - (double)before[at + k]), ADAM_LR * (1 + 1e-6),
                              "%s[%zu] moved more than lr", p->name, k);
            }
            continue;
        }
#endif
        expect_ref(f, name, p, p->data, P_ABS, P_REL);
    }
    cr_assert_gt(moved, (int)(total / 10), "only %d of %zu parameters moved", moved, total);
    free(before);
    ag_optim_free(opt);
    ag_graph_free(g);
    ag_safetensors_free(f);
    tiny_free(&m);
}

/* ---- the tests ------------------------------------------------------------------ */

/* The batch in the fixture is what the C pipeline makes of tiny.tsv: the
 * same preprocessing, tokens, vocabularies (equal to the checkpoint's) and
 * encoding as translator.py. */
Test(parity_translator, batch_from_the_c_pipeline)
{
    char err[256] = "";
    tiny m;
    tiny_load(&m);
    ag_safetensors *f = open_fixture(FIXTURE);
    batch want;
    batch_load(f, &want);
    ag_pairs *p = NULL;
    cr_assert_eq(ag_pairs_load(DATA, &p, err, sizeof err), AG_OK, "%s", err);
    ag_vocab *v[2];
    int min_freq = meta_int(m.ckpt, "min_freq");
    for (int side = 0; side < 2; side++) {
        cr_assert_eq(ag_vocab_from_pairs(p, side, min_freq, &v[side], err, sizeof err), AG_OK, "%s", err);
        const char *stored_vocab = ag_safetensors_meta(m.ckpt, side == AG_SOURCE ? "src_vocab" : "tgt_vocab");
        size_t n = ag_vocab_serialize(v[side], NULL, 0) + 1;
        char *s = malloc(n);
        cr_assert_not_null(s);
        ag_vocab_serialize(v[side], s, n);
        cr_assert_str_eq(s, stored_vocab, "the %s vocabulary of %s is not the checkpoint's",
                         side == AG_SOURCE ? "source" : "target", DATA);
        free(s);
    }
    int L = meta_int(m.ckpt, "max_len"), S = 1, T = 1;
    int src[BATCH][16], sval[BATCH], tgt[BATCH][16], tval[BATCH], tin[BATCH][16];
    cr_assert_leq(L, 16);
    for (int k = 0; k < BATCH; k++) {
        const ag_pair *pr = &p->pairs[k * p->n / BATCH];
        ag_encode(v[AG_SOURCE], pr->src, pr->src_len, L, src[k], &sval[k]);
        ag_encode(v[AG_TARGET], pr->tgt, pr->tgt_len, L, tgt[k], &tval[k]);
        ag_decoder_input(tgt[k], L, tin[k]);
        S = sval[k] > S ? sval[k] : S;
        T = tval[k] > T ? tval[k] : T;
    }
    cr_assert_eq(S, want.S, "longest source %d, fixture %d", S, want.S);
    cr_assert_eq(T, want.T, "longest target %d, fixture %d", T, want.T);
    for (int k = 0; k < BATCH; k++) {
        cr_assert_eq(sval[k], want.src_valid[k], "row %d: source length", k);
        for (int s = 0; s < S; s++) cr_assert_eq(src[k][s], want.src[k * S + s], "row %d: src[%d]", k, s);
        for (int t = 0; t < T; t++) {
            cr_assert_eq(tgt[k][t], want.tgt_out[k * T + t], "row %d: tgt_out[%d]", k, t);
            cr_assert_eq(tin[k][t], want.tgt_in[k * T + t], "row %d: tgt_in[%d]", k, t);
        }
    }
    /* the batch is worth testing: padding on both sides */
    int padded_src = 0, padded_tgt = 0;
    for (int k = 0; k < BATCH; k++) padded_src += sval[k] < S, padded_tgt += tval[k] < T;
    cr_assert(padded_src > 0 && padded_tgt > 0, "no padded row in the batch");
    ag_vocab_free(v[0]);
    ag_vocab_free(v[1]);
    ag_pairs_free(p);
    ag_safetensors_free(f);
    tiny_free(&m);
}

/* The loss, every gradient and the gradient norm, before any step. */
static void check_gradients(const char *model, const char *fixture)
{
    tiny m;
    tiny_load_from(&m, model);
    ag_safetensors *f = open_fixture(fixture);
    ag_graph *g = loss_and_backward(&m, f);
    expect_count(f, m.store, "grad" SUFFIX);
    char name[160];
    for (int i = 0; i < ag_store_count(m.store); i++) {
        ag_tensor *p = ag_store_at(m.store, i);
        snprintf(name, sizeof name, "grad" SUFFIX ".%s", p->name);
        expect_ref(f, name, p, p->grad, G_ABS, G_REL);
    }
    double norm, want_norm = load_scalar(f, "norm" SUFFIX);
    cr_assert_eq(ag_clip_grad_norm(m.store, CLIP, &norm), AG_OK);
    cr_assert(fabs(norm - want_norm) <= LOSS_REL * want_norm, "norm %.10g, want %.10g", norm, want_norm);
    ag_graph_free(g);
    ag_safetensors_free(f);
    tiny_free(&m);
}

Test(parity_translator, loss_and_gradients) { check_gradients(MODEL, FIXTURE); }
Test(parity_translator, sgd_step) { check_step("sgd", MODEL, FIXTURE); }
Test(parity_translator, adam_step) { check_step("adam", MODEL, FIXTURE); }

/* pre-norm with final LayerNorms, QK-norm in every attention */
Test(parity_translator, pre_norm_qk_norm_loss_and_gradients)
{
    tiny m;
    tiny_load_from(&m, CURED_MODEL);
    cr_assert(m.net.cfg.pre_norm && m.net.cfg.qk_norm, "%s: not a pre-norm, QK-norm model", CURED_MODEL);
    cr_assert_not_null(ag_store_find(m.store, "decoder.blocks.0.cross_attention.k_norm.weight"));
    tiny_free(&m);
    check_gradients(CURED_MODEL, CURED_FIXTURE);
}
Test(parity_translator, pre_norm_qk_norm_sgd_step) { check_step("sgd", CURED_MODEL, CURED_FIXTURE); }
Test(parity_translator, pre_norm_qk_norm_adam_step) { check_step("adam", CURED_MODEL, CURED_FIXTURE); }
