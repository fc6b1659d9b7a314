/* tests/test_losses.c: a short seeded training run gives the losses
 * committed from x86-64, on every machine, within a stated tolerance.
 *
 * The same seed gives the same bits on one machine with one build.  Across
 * machines the bits differ: the kernels differ (an FMA rounds once where
 * the baseline rounds twice), and libm's exp and log may differ in the
 * last place.  Such differences are of the order of the precision and grow
 * slowly over a few steps, so each step's loss must stay within
 * LOSS_RTOL (relative) of the value below: in float 1e-5 (a hundred
 * float roundings), in double 1e-11, thousands of times the largest
 * difference seen between x86-64 and arm64 (docs/building.md).
 *
 * The run: a causal language model of one block (embedding + positions,
 * self-attention with dropout, Add&Norm, feed-forward, Add&Norm, a linear
 * readout), next-token cross-entropy with label smoothing, gradient
 * clipping and AdamW, 16 steps on a fixed random batch of 4 x 12 tokens.
 * It runs at every instruction-set level the CPU has (x86-64's, or
 * arm64's NEON, and the portable baseline); docs/building.md says how the values were
 * made and how to make them again (AG_PRINT_LOSSES=1). */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "core/internal.h"

enum { V = 40, C = 32, H = 4, F = 64, B = 4, T = 12, STEPS = 16 };

/* Committed from x86-64 (gcc 12 -O2, AVX-512), float and double builds.
 * Under qemu-aarch64 (the baseline and NEON levels) the float losses
 * differ by at most 1.9e-7 and the double ones by 6.5e-16 (relative). */
#ifdef AG_DOUBLE
#define LOSS_RTOL 1e-11
static const double committed[STEPS] = {
    3.8472560837528955, 3.6905565073287012, 3.5715534326606018, 3.4669501887963126,
    3.3578523073021578, 3.2924739415665161, 3.2008249537101352, 3.1202550865773202,
    3.0402394103503121, 3.0078056667041451, 2.8830387527028698, 2.822642827517083,
    2.7516985309965647, 2.7009914603829341, 2.5673500789792825, 2.5226774558377074,
};
#else
#define LOSS_RTOL 1e-5
static const double committed[STEPS] = {
    3.8472561836242676, 3.690556526184082, 3.5715534687042236, 3.4669501781463623,
    3.3578522205352783, 3.2924740314483643, 3.2008249759674072, 3.1202549934387207,
    3.0402393341064453, 3.0078055858612061, 2.8830387592315674, 2.8226428031921387,
    2.7516984939575195, 2.7009913921356201, 2.5673501491546631, 2.5226774215698242,
};
#endif

typedef struct lm {
    ag_store *s;
    ag_tensor *embed;
    ag_mha_layer mha;
    ag_norm norm1, norm2;
    ag_ffn_layer ffn;
    ag_linear_layer out;
} lm;

static void lm_init(lm *m)
{
    m->s = ag_store_new();
    m->embed = ag_param(m->s, "embed", AG_SHAPE(V, C));
    ag_init_normal(m->embed, 0, 0.5, 1);
    cr_assert_eq(ag_mha_layer_init(&m->mha, m->s, "mha", C, H, 1, 0.1, 2), AG_OK);
    cr_assert_eq(ag_norm_init(&m->norm1, m->s, "norm1", C), AG_OK);
    cr_assert_eq(ag_ffn_layer_init(&m->ffn, m->s, "ffn", C, F, 3), AG_OK);
    cr_assert_eq(ag_norm_init(&m->norm2, m->s, "norm2", C), AG_OK);
    cr_assert_eq(ag_linear_layer_init(&m->out, m->s, "out", C, V, 1, 4), AG_OK);
}

/* The mean next-token loss of tokens [B, T + 1]. */
static ag_tensor *lm_loss(ag_graph *g, const lm *m, const int *tokens)
{
    int ids[B * T], targets[B * T];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) ids[b * T + t] = tokens[b * (T + 1) + t], targets[b * T + t] = tokens[b * (T + 1) + t + 1];
    ag_tensor *x = ag_add(g, ag_embedding(g, m->embed, ids, 2, (int[]){B, T}), ag_positional_encoding(g, T, C));
    ag_tensor *h = ag_add_norm(g, &m->norm1, x, ag_mha_layer_forward(g, &m->mha, x, x, ag_causal_mask(g, T, T), -1e9, NULL), 0.1);
    h = ag_add_norm(g, &m->norm2, h, ag_ffn_layer_forward(g, &m->ffn, h), 0.1);
    return ag_cross_entropy(g, ag_linear_layer_forward(g, &m->out, h), targets, -1, 0.1);
}

static void train(double *loss)
{
    lm m;
    lm_init(&m);
    int tokens[B * (T + 1)];
    ag_rng r;
    ag_rng_seed(&r, 5);
    for (int i = 0; i < B * (T + 1); i++) tokens[i] = (int)(ag_rng_next(&r) % V);
    ag_optim *o = ag_adam_new(m.s, 3e-3, 0.9, 0.98, 1e-9, 0.01, 1);
    cr_assert_not_null(o);
    ag_graph *g = ag_graph_new();
    for (int step = 0; step < STEPS; step++) {
        ag_graph_reset(g);
        ag_graph_seed(g, 100 + (uint64_t)step);
        ag_tensor *l = lm_loss(g, &m, tokens);
        cr_assert_eq(ag_backward(g, l), AG_OK, "%s", ag_graph_error(g));
        loss[step] = l->data[0];
        cr_assert_eq(ag_clip_grad_norm(m.s, 1.0, NULL), AG_OK);
        cr_assert_eq(ag_optim_step(o), AG_OK);
        ag_store_zero_grad(m.s);
    }
    ag_graph_free(g);
    ag_optim_free(o);
    ag_store_free(m.s);
}

Test(losses, a_seeded_run_gives_the_committed_losses_within_tolerance)
{
    static const char *const levels[] = {"baseline", "avx2", "avx512", "neon"};
    enum { NLEVELS = sizeof levels / sizeof levels[0] };
    double loss[NLEVELS][STEPS];
    bool has[NLEVELS], print = getenv("AG_PRINT_LOSSES") != NULL; /* each level's values (commit the best's) */
    for (int l = 0; l < NLEVELS; l++) {
        has[l] = strcmp(ag__isa_force(levels[l]), levels[l]) == 0; /* false: the CPU lacks it */
        if (has[l]) train(loss[l]);
        for (int s = 0; has[l] && print && s < STEPS; s++)
            printf("%s%s%.17g,%s", s ? "" : levels[l], s ? "" : ":\n", loss[l][s], s % 4 == 3 ? "\n" : " ");
    }
    ag__isa_force(NULL);
    for (int l = 0; l < NLEVELS; l++)
        for (int s = 0; has[l] && s < STEPS; s++)
            cr_assert(fabs(loss[l][s] - committed[s]) <= LOSS_RTOL * committed[s],
                      "%s: step %d: loss %.17g, committed %.17g (relative difference %.2g > %g)", levels[l], s,
                      loss[l][s], committed[s], fabs(loss[l][s] - committed[s]) / committed[s], LOSS_RTOL);
    cr_assert_lt(committed[STEPS - 1], committed[0], "the run learns: the loss falls");
}
