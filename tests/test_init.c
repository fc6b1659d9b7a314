/* tests/test_init.c: the init schemes (ag_init_opts, attograd_nn.h;
 * docs/init.md's table) draw what they say.
 *
 * AG_INIT_TORCH is checked against the PyTorch twin itself: the GPT of
 * tests/reference/gpt.py made without its init_weights(), so each module
 * draws its own defaults; tests/reference/init_torch.txt holds the moments
 * of each of its parameters.  Ours must lie within the same bound
 * (nn.Linear: |w| <= 1/sqrt(in)) and have mean and variance within 6
 * standard errors of the difference of the two samples (a false alarm has
 * probability about 2e-9 per moment).  The draws are seeded, so the test is
 * deterministic. */
#include "common.h"

#include <math.h>
#include <string.h>

/* the twin's configuration (make_init_fixture.py's CONFIG) */
static ag_gpt_config twin_config(ag_init_scheme scheme)
{
    return (ag_gpt_config){.vocab = 96, .context = 64, .hidden = 128, .heads = 4, .ffn = 512, .layers = 2,
                           .activation = AG_ACT_GELU, .untied = 1, .init = {.scheme = scheme}};
}

typedef struct moments {
    double n, mean, var, m4, maxabs;
} moments;

static moments moments_of(const ag_tensor *t)
{
    moments m = {.n = (double)t->size};
    for (size_t i = 0; i < t->size; i++) {
        m.mean += t->data[i];
        if (fabs((double)t->data[i]) > m.maxabs) m.maxabs = fabs((double)t->data[i]);
    }
    m.mean /= m.n;
    for (size_t i = 0; i < t->size; i++) {
        double d = t->data[i] - m.mean;
        m.var += d * d, m.m4 += d * d * d * d;
    }
    m.var /= m.n, m.m4 /= m.n;
    return m;
}

/* nn.Linear's bound for a parameter of layer l: 1/sqrt(in) */
static double linear_bound(const ag_store *s, const char *name)
{
    char w[96];
    snprintf(w, sizeof w, "%.*s.weight", (int)(strrchr(name, '.') - name), name);
    const ag_tensor *t = ag_store_find(s, w);
    cr_assert_not_null(t, "%s: no weight %s", name, w);
    return 1 / sqrt((double)t->shape[1]);
}

/* the float build rounds a draw to float: a bound may be passed by an ulp */
#define BOUND_SLACK TOL(1e-12, 1e-6)

static void expect_like_twin(const ag_store *s, const char *name, moments want)
{
    const ag_tensor *t = ag_store_find(s, name);
    cr_assert_not_null(t, "the twin's %s is not in the model", name);
    moments got = moments_of(t);
    cr_assert_eq(got.n, want.n, "%s: %g values, the twin has %g", name, got.n, want.n);
    if (want.var == 0) { /* layer norms: exactly ones and zeros */
        for (size_t i = 0; i < t->size; i++)
            cr_assert_eq((double)t->data[i], want.mean, "%s[%zu] = %g, want %g", name, i, (double)t->data[i],
                         want.mean);
        return;
    }
    if (!strstr(name, "embedding")) { /* nn.Linear: U(-1/sqrt(in), 1/sqrt(in)), weights and biases */
        double b = linear_bound(s, name);
        cr_assert_leq(want.maxabs, b * (1 + 1e-12), "the twin's %s passes 1/sqrt(in) = %g", name, b);
        cr_assert_leq(got.maxabs, b * (1 + BOUND_SLACK), "%s: max |w| = %.9g > 1/sqrt(in) = %.9g", name,
                      got.maxabs, b);
        if (got.n >= 4096) cr_assert_geq(got.maxabs, 0.99 * b, "%s: max |w| = %g, far inside %g", name, got.maxabs, b);
    }
    double se_mean = sqrt(got.var / got.n + want.var / want.n);
    double se_var = sqrt((got.m4 - got.var * got.var) / got.n + (want.m4 - want.var * want.var) / want.n);
    cr_assert_leq(fabs(got.mean - want.mean), 6 * se_mean, "%s: mean %g, the twin's %g (6 se = %g)", name, got.mean,
                  want.mean, 6 * se_mean);
    cr_assert_leq(fabs(got.var - want.var), 6 * se_var, "%s: variance %g, the twin's %g (6 se = %g)", name, got.var,
                  want.var, 6 * se_var);
}

Test(init, torch_defaults_match_the_pytorch_twin)
{
    ag_store *s = ag_store_new();
    ag_gpt m;
    ag_gpt_config cfg = twin_config(AG_INIT_TORCH);
    cr_assert_eq(ag_gpt_init(&m, s, &cfg, 5), AG_OK, "%s", ag_store_error(s));
    FILE *f = fopen("tests/reference/init_torch.txt", "r");
    cr_assert_not_null(f, "tests/reference/init_torch.txt (run from the repository root)");
    char line[512], name[128];
    int checked = 0;
    while (fgets(line, sizeof line, f)) {
        moments w;
        if (line[0] == '#') continue;
        cr_assert_eq(sscanf(line, "%127s %lf %lf %lf %lf %lf", name, &w.n, &w.mean, &w.var, &w.m4, &w.maxabs), 6,
                     "bad fixture line: %s", line);
        expect_like_twin(s, name, w);
        checked++;
    }
    fclose(f);
    cr_assert_eq(checked, ag_store_count(s), "the twin has %d parameters, the model %d", checked, ag_store_count(s));
    ag_gpt_free(&m);
    ag_store_free(s);
}

/* N(0, sd) within 6 standard errors: mean sd / sqrt(n), variance sd^2 sqrt(2 / n) */
static void expect_normal(const ag_store *s, const char *name, double sd)
{
    const ag_tensor *t = ag_store_find(s, name);
    cr_assert_not_null(t, "%s", name);
    moments m = moments_of(t);
    cr_assert_leq(fabs(m.mean), 6 * sd / sqrt(m.n), "%s: mean %g for N(0, %g)", name, m.mean, sd);
    cr_assert_leq(fabs(m.var - sd * sd), 6 * sd * sd * sqrt(2 / m.n), "%s: variance %g, want %g", name, m.var, sd * sd);
}

static void expect_const(const ag_store *s, const char *name, double v)
{
    const ag_tensor *t = ag_store_find(s, name);
    cr_assert_not_null(t, "%s", name);
    for (size_t i = 0; i < t->size; i++) cr_assert_eq((double)t->data[i], v, "%s[%zu]", name, i);
}

static void expect_same_values(const ag_store *a, const ag_store *b)
{
    cr_assert_eq(ag_store_count(a), ag_store_count(b));
    for (int i = 0; i < ag_store_count(a); i++) {
        const ag_tensor *x = ag_store_at(a, i), *y = ag_store_find(b, x->name);
        cr_assert_not_null(y, "%s", x->name);
        cr_assert_eq(memcmp(x->data, y->data, x->size * sizeof *x->data), 0, "%s differs", x->name);
    }
}

enum { C = 128, H = 4, F = 512 };

Test(init, block_normal_gpt2_and_xavier)
{
    ag_store *s = ag_store_new();
    ag_encoder_block b;
    ag_block_config normal = {.init = {.scheme = AG_INIT_NORMAL, .std = 0.05}};
    ag_block_config gpt2 = {.pre_norm = 1, .init = {.scheme = AG_INIT_GPT2, .layers = 3}};
    cr_assert_eq(ag_encoder_block_init_ex(&b, s, "n", C, H, F, 0, &normal, 1), AG_OK, "%s", ag_store_error(s));
    cr_assert_eq(ag_encoder_block_init_ex(&b, s, "g", C, H, F, 0, &gpt2, 1), AG_OK, "%s", ag_store_error(s));
    const char *lin[] = {"attention.w_q", "attention.w_k", "attention.w_v", "attention.w_o", "ffn.dense1", "ffn.dense2"};
    char name[96];
    for (int i = 0; i < 6; i++) {
        int residual = i == 3 || i == 5;
        snprintf(name, sizeof name, "n.%s.weight", lin[i]), expect_normal(s, name, 0.05);
        snprintf(name, sizeof name, "n.%s.bias", lin[i]), expect_const(s, name, 0);
        snprintf(name, sizeof name, "g.%s.weight", lin[i]);
        expect_normal(s, name, residual ? 0.02 / sqrt(6.0) : 0.02);
        snprintf(name, sizeof name, "g.%s.bias", lin[i]), expect_const(s, name, 0);
    }
    expect_const(s, "n.norm1.weight", 1), expect_const(s, "n.norm2.bias", 0);
    ag_store_free(s);

    /* a zero config, NULL and AG_INIT_XAVIER: the same bits */
    ag_store *a = ag_store_new(), *z = ag_store_new(), *x = ag_store_new();
    ag_decoder_block d;
    ag_block_config zero = {0}, xavier = {.init = {.scheme = AG_INIT_XAVIER}};
    cr_assert_eq(ag_decoder_block_init(&d, a, "d", C, H, F, 0.1, 9), AG_OK);
    cr_assert_eq(ag_decoder_block_init_ex(&d, z, "d", C, H, F, 0.1, &zero, 9), AG_OK);
    cr_assert_eq(ag_decoder_block_init_ex(&d, x, "d", C, H, F, 0.1, &xavier, 9), AG_OK);
    expect_same_values(a, z), expect_same_values(a, x);
    ag_store_free(a), ag_store_free(z), ag_store_free(x);
}

Test(init, defaults_are_unchanged)
{
    /* ag_linear_layer_init is nn.Linear's draw, as AG_INIT_TORCH */
    ag_store *a = ag_store_new(), *b = ag_store_new();
    ag_linear_layer l;
    ag_init_opts torch = {.scheme = AG_INIT_TORCH};
    cr_assert_eq(ag_linear_layer_init(&l, a, "l", 300, 200, 1, 4), AG_OK);
    cr_assert_eq(ag_linear_layer_init_ex(&l, b, "l", 300, 200, 1, &torch, 4), AG_OK);
    expect_same_values(a, b);
    ag_store_free(a), ag_store_free(b);

    /* the GPT's default is GPT-2's with its own L */
    a = ag_store_new(), b = ag_store_new();
    ag_gpt m;
    ag_gpt_config dflt = twin_config(AG_INIT_DEFAULT), gpt2 = twin_config(AG_INIT_GPT2);
    gpt2.init.layers = 2;
    cr_assert_eq(ag_gpt_init(&m, a, &dflt, 3), AG_OK);
    ag_gpt_free(&m);
    cr_assert_eq(ag_gpt_init(&m, b, &gpt2, 3), AG_OK);
    ag_gpt_free(&m);
    expect_same_values(a, b);
    expect_normal(a, "embedding.tokens.weight", 0.02);
    expect_normal(a, "blocks.1.ffn.dense2.weight", 0.02 / 2);
    ag_store_free(a), ag_store_free(b);
}

Test(init, embedding_and_linear_options)
{
    ag_store *s = ag_store_new();
    ag_embedding_layer e;
    ag_linear_layer l;
    ag_init_opts normal = {.scheme = AG_INIT_NORMAL, .std = 0.1}, xavier = {.scheme = AG_INIT_XAVIER};
    cr_assert_eq(ag_embedding_layer_init_ex(&e, s, "e", 500, 64, 100, AG_POS_LEARNED, &normal, 2), AG_OK);
    expect_normal(s, "e.tokens.weight", 0.1), expect_normal(s, "e.positions.weight", 0.1);
    cr_assert_eq(ag_embedding_layer_init_ex(&e, s, "d", 500, 64, 100, AG_POS_LEARNED, NULL, 2), AG_OK);
    expect_normal(s, "d.tokens.weight", 1);
    cr_assert_eq(ag_linear_layer_init_ex(&l, s, "x", 400, 300, 1, &xavier, 2), AG_OK);
    moments m = moments_of(l.weight);
    double a = sqrt(6.0 / 700);
    cr_assert_leq(m.maxabs, a * (1 + BOUND_SLACK));
    cr_assert_leq(fabs(m.var - a * a / 3), 6 * sqrt((a * a * a * a / 5 - a * a * a * a / 9) / m.n));
    expect_const(s, "x.bias", 0);
    ag_store_free(s);
}

Test(init, bad_init_is_refused_with_a_message)
{
    ag_store *s = ag_store_new();
    ag_linear_layer l;
    ag_init_opts bad[] = {{.scheme = (ag_init_scheme)99}, {.scheme = AG_INIT_NORMAL}, {.std = -1}, {.layers = -2}};
    const char *says[] = {"scheme 99", "std > 0", "std = -1", "layers = -2"};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(ag_linear_layer_init_ex(&l, s, "l", 4, 4, 1, &bad[i], 1), AG_ERR_ARG);
        cr_assert(strstr(ag_store_error(s), says[i]) && strstr(ag_store_error(s), "linear 'l'"), "%s",
                  ag_store_error(s));
    }
    ag_gpt m;
    ag_gpt_config cfg = twin_config(AG_INIT_NORMAL);
    cr_assert_eq(ag_gpt_init(&m, s, &cfg, 1), AG_ERR_ARG);
    cr_assert(strstr(ag_store_error(s), "gpt: init"), "%s", ag_store_error(s));
    ag_encoder_block b;
    ag_block_config bc = {.init = {.scheme = (ag_init_scheme)-1}};
    cr_assert_eq(ag_encoder_block_init_ex(&b, s, "b", 8, 2, 16, 0, &bc, 1), AG_ERR_ARG);
    cr_assert(strstr(ag_store_error(s), "block 'b': init"), "%s", ag_store_error(s));
    ag_embedding_layer e;
    cr_assert_eq(ag_embedding_layer_init_ex(&e, s, "e", 5, 4, 3, AG_POS_NONE, &bad[1], 1), AG_ERR_ARG);
    cr_assert(strstr(ag_store_error(s), "embedding 'e': init"), "%s", ag_store_error(s));
    cr_assert_eq(ag_store_count(s), 0, "a refused init made parameters");
    ag_store_free(s);
}
