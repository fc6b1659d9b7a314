/* precision_tour: the numbers of docs/precision.md, printed by a program
 * (the docs test quotes them from here).
 *
 * bf16 against fp32 and fp16: their largest and smallest normal numbers
 * and their steps at 1; ag_bf16_round on a few values (a tie to even each
 * way, 0.1, the largest float that rounds to inf); the rounding error of a
 * GPT's initial weights in bf16; and why the master weights stay fp32: one
 * Adam step (lr 1e-3) of examples/gpt's default model on a random batch,
 * the share of its updates that a weight stored in bf16 would lose (w + dw
 * rounds back to w) against one stored in fp32.  Each line is
 * "name: value". */
#include "attograd.h"

#include <float.h>
#include <stdbool.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
static unsigned bf16_bits(float x)
{
    uint32_t u;
    x = ag_bf16_round(x);
    memcpy(&u, &x, sizeof u);
    return u >> 16;
}

static void formats(void)
{
    printf("fp32.max: %.8g\nbf16.max: %.8g\nfp16.max: %.8g\n", FLT_MAX, from_bits(0x7f7f0000u), 65504.0);
    printf("fp32.min_normal: %.8g\nbf16.min_normal: %.8g\nfp16.min_normal: %.8g\n", FLT_MIN, from_bits(0x00800000u),
           ldexp(1, -14));
    printf("fp32.ulp1: %.8g\nbf16.ulp1: %.8g\nfp16.ulp1: %.8g\n", ldexp(1, -23), ldexp(1, -7), ldexp(1, -10));
    const float x[] = {0.1f, 1.00390625f, 1.01171875f, 3.14159265f, from_bits(0x7f7f8000u)};
    const char *name[] = {"tenth", "tie_even", "tie_up", "pi", "top"};
    for (int i = 0; i < 5; i++)
        printf("round.%s: %.9g -> %.9g (0x%04x)\n", name[i], x[i], ag_bf16_round(x[i]), bf16_bits(x[i]));
}

int main(void)
{
    formats();
    ag_gpt_config cfg = {.vocab = 64, .context = 32, .hidden = 64, .heads = 4, .ffn = 256, .layers = 2,
                         .activation = AG_ACT_GELU};
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    ag_gpt m;
    if (!s || !g || ag_gpt_init(&m, s, &cfg, 0) != AG_OK) return 1;
    /* the initial weights' rounding error in bf16, relative, over nonzero weights */
    double worst = 0, sum = 0;
    size_t n = 0;
    for (int i = 0; i < ag_store_count(s); i++) {
        ag_tensor *p = ag_store_at(s, i);
        for (size_t j = 0; j < p->size; j++)
            if (p->data[j] != 0) {
                double e = fabs((double)ag_bf16_round(p->data[j]) - p->data[j]) / fabs(p->data[j]);
                worst = e > worst ? e : worst, sum += e, n++;
            }
    }
    printf("weights.count: %zu\nweights.rel_err_mean: %.2e\nweights.rel_err_max: %.2e\n", n, sum / n, worst);
    /* one Adam step, fp32 products; keep the weights before it */
    size_t total = ag_store_numel(s), at = 0;
    float *before = malloc(total * sizeof *before);
    for (int i = 0; i < ag_store_count(s); i++) {
        ag_tensor *p = ag_store_at(s, i);
        memcpy(before + at, p->data, p->size * sizeof *before), at += p->size;
    }
    int ids[32 * 32], targets[32 * 32];
    ag_rng r;
    ag_rng_seed(&r, 7);
    for (int i = 0; i < 32 * 32; i++) ids[i] = (int)(ag_rng_next(&r) % 64), targets[i] = (int)(ag_rng_next(&r) % 64);
    ag_optim *o = ag_adam_new(s, 1e-3, 0.9, 0.999, 1e-8, 0, 0);
    if (!o || ag_backward(g, ag_gpt_loss(g, &m, ids, targets, 32, 32)) != AG_OK || ag_optim_step(o) != AG_OK) return 1;
    size_t lost16 = 0, lost32 = 0, moved = 0, gains = 0, gains_lost = 0; /* gains: layer norms' weights, near 1 */
    at = 0;
    for (int i = 0; i < ag_store_count(s); i++) {
        ag_tensor *p = ag_store_at(s, i);
        for (size_t j = 0; j < p->size; j++, at++) {
            float w = before[at], dw = p->data[j] - w; /* the step's update, as fp32 kept it */
            if (dw == 0) continue;
            moved++;
            bool lost = ag_bf16_round(ag_bf16_round(w) + dw) == ag_bf16_round(w); /* a bf16 weight */
            lost16 += lost, lost32 += w + dw == w;
            if (strstr(p->name, "norm") && strstr(p->name, "weight")) gains++, gains_lost += lost;
        }
    }
    printf("step.updates: %zu\nstep.lost_bf16: %.1f%%\nstep.lost_fp32: %.1f%%\n", moved, 100.0 * lost16 / moved,
           100.0 * lost32 / moved);
    printf("step.gains: %zu\nstep.gains_lost_bf16: %.1f%%\n", gains, 100.0 * gains_lost / gains);
    free(before);
    ag_optim_free(o);
    ag_gpt_free(&m);
    ag_graph_free(g);
    ag_store_free(s);
    return 0;
}
