/* tests/test_seq2seq_init.c: the translator's two initialisations
 * (ag_seq2seq_config.init, attograd_nn.h) draw what they say.
 *
 *   scaled: embeddings N(0, 1/C); linear weights Xavier-uniform; biases 0
 *   d2l:    embeddings N(0, 1); linear weights Xavier-uniform; FFN and
 *           output biases U(-1/sqrt(in), 1/sqrt(in)); attention biases 0
 *   both:   LayerNorm gain 1, bias 0
 *
 * A sample's std is checked within 4 standard errors (std / sqrt(2n)) of
 * the one asked for; the draws are seeded, so the test is deterministic. */
#include "common.h"

#include <math.h>

enum { V = 300, C = 64, H = 4, F = 128, N = 2 };

static ag_seq2seq_config config(int init)
{
    return (ag_seq2seq_config){.src_vocab = V, .tgt_vocab = V + 7, .hidden = C, .heads = H, .ffn = F,
                               .layers = N, .max_len = 10, .dropout = 0.1, .init = init};
}

static void sample(const ag_tensor *t, double *mean, double *sd, double *absmax)
{
    double s = 0, ss = 0, m = 0;
    for (size_t i = 0; i < t->size; i++) {
        double x = t->data[i];
        s += x;
        if (fabs(x) > m) m = fabs(x);
    }
    *mean = s / t->size;
    for (size_t i = 0; i < t->size; i++) ss += (t->data[i] - *mean) * (t->data[i] - *mean);
    *sd = sqrt(ss / (t->size - 1));
    *absmax = m;
}

/* N(0, sd): mean within 4 sd / sqrt(n), sample std within 4 sd / sqrt(2n) */
static void expect_normal(const ag_tensor *t, double want_sd)
{
    double mean, sd, m;
    sample(t, &mean, &sd, &m);
    double n = (double)t->size;
    cr_expect_leq(fabs(mean), 4 * want_sd / sqrt(n), "%s: mean %g", t->name, mean);
    cr_expect_leq(fabs(sd - want_sd), 4 * want_sd / sqrt(2 * n), "%s: std %g, want %g", t->name, sd, want_sd);
}

/* U(-k, k): every value inside, the std k / sqrt(3) within 4 standard
 * errors (a uniform's std of the sample std is about 0.26 k / sqrt(n)) */
static void expect_uniform(const ag_tensor *t, double k)
{
    double mean, sd, m;
    sample(t, &mean, &sd, &m);
    double n = (double)t->size;
    cr_expect_leq(m, k * (1 + 1e-6), "%s: |x| up to %g, bound %g", t->name, m, k);
    cr_expect_leq(fabs(sd - k / sqrt(3)), 4 * 0.26 * k / sqrt(n), "%s: std %g, want %g", t->name, sd, k / sqrt(3));
}

static void expect_const(const ag_tensor *t, double v)
{
    size_t i = 0;
    while (i < t->size && t->data[i] == v) i++;
    cr_expect_eq(i, t->size, "%s[%zu] = %g, want %g", t->name, i, i < t->size ? (double)t->data[i] : v, v);
}

/* Every parameter of a model built with init against its distribution. */
static void check_model(int init)
{
    ag_store *s = ag_store_new();
    ag_seq2seq m;
    ag_seq2seq_config cfg = config(init);
    cr_assert_eq(ag_seq2seq_init(&m, s, &cfg, 7), AG_OK, "%s", ag_store_error(s));
    int d2l = init == AG_SEQ2SEQ_INIT_D2L, checked = 0;
    for (int i = 0; i < ag_store_count(s); i++, checked++) {
        const ag_tensor *p = ag_store_at(s, i);
        const char *name = p->name;
        int in = p->ndim == 2 ? p->shape[1] : 0;
        if (strstr(name, "embedding")) expect_normal(p, d2l ? 1 : 1 / sqrt((double)C));
        else if (strstr(name, "norm")) expect_const(p, strstr(name, ".weight") ? 1 : 0);
        else if (strstr(name, ".weight")) expect_uniform(p, sqrt(6.0 / (in + p->shape[0])));
        else if (d2l && (strstr(name, "ffn.dense1") || strstr(name, "ffn.dense2") || !strcmp(name, "decoder.dense.bias"))) {
            /* the bias of a layer whose input has `in` features */
            const ag_tensor *w = NULL;
            char wname[128];
            snprintf(wname, sizeof wname, "%.*s.weight", (int)(strlen(name) - 5), name);
            w = ag_store_find(s, wname);
            cr_assert(w, "no %s", wname);
            expect_uniform(p, 1 / sqrt((double)w->shape[1]));
        } else expect_const(p, 0); /* the attention projections' biases; every bias when scaled */
    }
    cr_expect_eq(checked, ag_store_count(s));
    ag_seq2seq_free(&m);
    ag_store_free(s);
}

Test(seq2seq_init, scaled_draws_its_distributions)
{
    check_model(AG_SEQ2SEQ_INIT_SCALED);
}

Test(seq2seq_init, d2l_draws_its_distributions)
{
    check_model(AG_SEQ2SEQ_INIT_D2L);
}

/* A config without .init is the scaled one, bit for bit. */
Test(seq2seq_init, leaving_init_out_is_scaled)
{
    ag_store *a = ag_store_new(), *b = ag_store_new();
    ag_seq2seq ma, mb;
    ag_seq2seq_config ca = config(AG_SEQ2SEQ_INIT_SCALED);
    ag_seq2seq_config cb = {.src_vocab = V, .tgt_vocab = V + 7, .hidden = C, .heads = H, .ffn = F, .layers = N,
                            .max_len = 10, .dropout = 0.1}; /* as written before .init existed */
    cr_assert_eq(ag_seq2seq_init(&ma, a, &ca, 3), AG_OK);
    cr_assert_eq(ag_seq2seq_init(&mb, b, &cb, 3), AG_OK);
    for (int i = 0; i < ag_store_count(a); i++) {
        const ag_tensor *x = ag_store_at(a, i), *y = ag_store_at(b, i);
        cr_assert_eq(memcmp(x->data, y->data, x->size * sizeof(ag_real)), 0, "%s differs", x->name);
    }
    ag_seq2seq_free(&ma), ag_seq2seq_free(&mb);
    ag_store_free(a), ag_store_free(b);
}

/* The same seed draws the same numbers in both: d2l's embeddings are the
 * scaled ones times sqrt(C), and the weights are equal. */
Test(seq2seq_init, the_two_differ_only_in_scale_and_biases)
{
    ag_store *a = ag_store_new(), *b = ag_store_new();
    ag_seq2seq ma, mb;
    ag_seq2seq_config ca = config(AG_SEQ2SEQ_INIT_SCALED), cb = config(AG_SEQ2SEQ_INIT_D2L);
    cr_assert_eq(ag_seq2seq_init(&ma, a, &ca, 5), AG_OK);
    cr_assert_eq(ag_seq2seq_init(&mb, b, &cb, 5), AG_OK);
    const ag_tensor *x = ma.src_embedding, *y = mb.src_embedding;
    for (size_t i = 0; i < x->size; i++)
        cr_assert_float_eq(y->data[i], x->data[i] * sqrt((double)C), 1e-5 * (1 + fabs(y->data[i])), "[%zu]", i);
    const ag_tensor *wa = ag_store_find(a, "encoder.blocks.0.ffn.dense1.weight");
    const ag_tensor *wb = ag_store_find(b, "encoder.blocks.0.ffn.dense1.weight");
    cr_assert_eq(memcmp(wa->data, wb->data, wa->size * sizeof(ag_real)), 0);
    ag_seq2seq_free(&ma), ag_seq2seq_free(&mb);
    ag_store_free(a), ag_store_free(b);
}

Test(seq2seq_init, an_unknown_init_is_refused)
{
    ag_store *s = ag_store_new();
    ag_seq2seq m;
    ag_seq2seq_config cfg = config(2);
    cr_expect_eq(ag_seq2seq_init(&m, s, &cfg, 1), AG_ERR_ARG);
    cr_expect(strstr(ag_store_error(s), "init = 2 is not AG_SEQ2SEQ_INIT_SCALED (0) or AG_SEQ2SEQ_INIT_D2L (1)"),
              "store error: %s", ag_store_error(s));
    cfg.init = -1;
    cr_expect_eq(ag_seq2seq_init(&m, s, &cfg, 1), AG_ERR_ARG);
    ag_store_free(s);
}
