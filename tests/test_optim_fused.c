/* tests/test_optim_fused.c: ag_optim_step_clip_zero, a training step's end
 * in one pass, against the three calls it stands for: ag_clip_grad_norm,
 * ag_optim_step, ag_store_zero_grad.  The same bits for every optimizer,
 * clipping on and off, on every instruction set; a non-finite norm changes
 * nothing. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "core/internal.h"

/* Parameters of 1000, 37 and 5 values: whole vectors, tails, a short one. */
static const int SIZES[3] = {1000, 37, 5};

static ag_store *make_store(void)
{
    ag_store *s = ag_store_new();
    char name[8];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "p%d", i);
        ag_tensor *p = ag_param(s, name, 1, &SIZES[i]);
        cr_assert_not_null(p);
        for (int j = 0; j < SIZES[i]; j++) p->data[j] = (ag_real)(0.01 * ((j * 37 + i * 11) % 201 - 100));
    }
    return s;
}

/* Gradients of step k: a spread of signs and sizes, norm about 0.6 k. */
static void set_grads(ag_store *s, int k)
{
    for (int i = 0; i < 3; i++) {
        ag_tensor *p = ag_store_at(s, i);
        for (int j = 0; j < SIZES[i]; j++) p->grad[j] += (ag_real)(0.001 * k * ((j * 13 + k * 7 + i) % 61 - 30));
    }
}

static ag_optim *make_optim(ag_store *s, int kind)
{
    switch (kind) {
    case 0: return ag_sgd_new(s, 0.1, 0, 0, 0);
    case 1: return ag_sgd_new(s, 0.1, 0.9, 0, 0);
    case 2: return ag_sgd_new(s, 0.1, 0.9, 0.01, 1);
    case 3: return ag_adam_new(s, 1e-2, 0.9, 0.999, 1e-8, 0, 0);
    case 4: return ag_adam_new(s, 1e-2, 0.9, 0.999, 1e-8, 0.01, 0);
    default: return ag_adam_new(s, 1e-2, 0.9, 0.999, 1e-8, 0.01, 1);
    }
}
static const char *const KIND[] = {"sgd", "sgd momentum", "sgd nesterov wd", "adam", "adam wd", "adamw"};

/* Everything a step leaves: values, gradients, state, the norms' bits. */
typedef struct after {
    ag_real v[3][1000], g[3][1000], st[3][2][1000];
    double norm[3];
} after;

static void run(int kind, double max_norm, int fused, after *a)
{
    memset(a, 0, sizeof *a);
    ag_store *s = make_store();
    ag_optim *o = make_optim(s, kind);
    cr_assert_not_null(o);
    for (int k = 1; k <= 3; k++) {
        set_grads(s, k);
        if (fused) {
            cr_assert_eq(ag_optim_step_clip_zero(o, max_norm, &a->norm[k - 1]), AG_OK, "%s", ag_optim_error(o));
        } else {
            cr_assert_eq(ag_clip_grad_norm(s, max_norm, &a->norm[k - 1]), AG_OK);
            cr_assert_eq(ag_optim_step(o), AG_OK);
            ag_store_zero_grad(s);
        }
    }
    for (int i = 0; i < 3; i++) {
        ag_tensor *p = ag_store_at(s, i);
        memcpy(a->v[i], p->data, p->size * sizeof(ag_real));
        memcpy(a->g[i], p->grad, p->size * sizeof(ag_real));
        for (int w = 0; w < ag_optim_state_count(o); w++) {
            size_t n;
            const ag_real *st = ag_optim_state(o, i, w, &n);
            memcpy(a->st[i][w], st, n * sizeof(ag_real));
        }
    }
    cr_assert_eq(ag_optim_steps(o), 3);
    ag_optim_free(o);
    ag_store_free(s);
}

static void expect_same(int kind, double max_norm, const char *level)
{
    static after want, got;
    run(kind, max_norm, 0, &want);
    run(kind, max_norm, 1, &got);
    const unsigned char *a = (const unsigned char *)&want, *b = (const unsigned char *)&got;
    size_t at = 0;
    while (at < sizeof want && a[at] == b[at]) at++;
    cr_assert(at == sizeof want, "%s, max_norm %g, %s: the fused step differs at byte %zu of %zu", KIND[kind],
              max_norm, level, at, sizeof want);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < SIZES[i]; j++) cr_assert_eq(got.g[i][j], 0, "a gradient was not zeroed");
}

Test(optim_fused, gives_clip_step_and_zero_bit_for_bit)
{
    /* clipped in every step, clipped from step 2 on (norms about 0.6, 1.2,
     * 1.8), never, and clipping off */
    static const double max_norm[] = {0.25, 1.0, 1e9, 0};
    for (int kind = 0; kind < 6; kind++)
        for (int m = 0; m < 4; m++) expect_same(kind, max_norm[m], "default level");
}

Test(optim_fused, every_instruction_set_gives_the_same_bits)
{
    static const char *const levels[] = {"baseline", "avx2", "avx512"};
    for (int l = 0; l < 3; l++) {
        if (strcmp(ag__isa_force(levels[l]), levels[l]) != 0) continue;
        for (int kind = 3; kind < 6; kind++) expect_same(kind, 1.0, levels[l]);
    }
    ag__isa_force(NULL);
}

Test(optim_fused, a_non_finite_gradient_changes_nothing)
{
    ag_store *s = make_store();
    ag_optim *o = make_optim(s, 3);
    set_grads(s, 1);
    cr_assert_eq(ag_optim_step_clip_zero(o, 1.0, NULL), AG_OK);
    set_grads(s, 2);
    ag_store_at(s, 1)->grad[7] = (ag_real)NAN;
    static ag_real v[1000], g[1000], m[1000];
    ag_tensor *p0 = ag_store_at(s, 0);
    memcpy(v, p0->data, sizeof v), memcpy(g, p0->grad, sizeof g), memcpy(m, ag_optim_state(o, 0, 0, NULL), sizeof m);
    double norm = 0;
    cr_assert_eq(ag_optim_step_clip_zero(o, 1.0, &norm), AG_ERR_NUMERIC);
    cr_assert(isnan(norm));
    cr_assert(strstr(ag_optim_error(o), "'p1'"), "the error names the parameter: %s", ag_optim_error(o));
    cr_assert(memcmp(v, p0->data, sizeof v) == 0 && memcmp(g, p0->grad, sizeof g) == 0 &&
                  memcmp(m, ag_optim_state(o, 0, 0, NULL), sizeof m) == 0,
              "a failed step changed a value, a gradient or the state");
    cr_assert_eq(ag_optim_steps(o), 1);
    ag_optim_free(o);
    ag_store_free(s);
}

Test(optim_fused, refuses_bad_arguments_with_a_reason)
{
    double norm = 5;
    cr_assert_eq(ag_optim_step_clip_zero(NULL, 1.0, &norm), AG_ERR_ARG);
    cr_assert_eq(norm, 0);
    ag_store *s = make_store();
    ag_optim *o = make_optim(s, 5);
    cr_assert_eq(ag_optim_step_clip_zero(o, NAN, NULL), AG_ERR_ARG);
    cr_assert(strstr(ag_optim_error(o), "max_norm"), "%s", ag_optim_error(o));
    ag_optim_set_lr(o, -1);
    cr_assert_eq(ag_optim_step_clip_zero(o, 1.0, NULL), AG_ERR_ARG);
    cr_assert(strstr(ag_optim_error(o), "lr = -1"), "%s", ag_optim_error(o));
    ag_optim_set_lr(o, 1e-3);
    cr_assert_not_null(ag_param(s, "late", AG_SHAPE(2)));
    cr_assert_eq(ag_optim_step_clip_zero(o, 1.0, NULL), AG_ERR_STATE);
    cr_assert(strstr(ag_optim_error(o), "made for 3"), "%s", ag_optim_error(o));
    cr_assert_eq(ag_optim_steps(o), 0);
    ag_optim_free(o);
    ag_store_free(s);
}
