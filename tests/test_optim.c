/* tests/test_optim.c: SGD, Adam, AdamW against PyTorch's numbers; clipping;
 * schedules; errors; state access; no allocation in a step.
 *
 * The parity fixtures are tests/reference/optim.txt, written by
 * tests/reference/make_optim_fixtures.py (torch.optim, float64); the tests
 * run from the repository root. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "core/internal.h"

#define FIXTURE_PATH "tests/reference/optim.txt"
#define NSTEPS 3

/* The parameters of the fixtures: p0 [2, 3] and p1 [4]. */
static const double P0[6] = {0.5, -1.25, 2.0, -0.75, 1.5, 3.0};
static const double P1[4] = {-2.0, 0.25, 1.0, -0.5};
static const size_t PSIZE[2] = {6, 4};

/* Must match CASES in make_optim_fixtures.py. */
typedef struct optim_case {
    const char *name;
    int adam; /* 0 SGD, 1 Adam, 2 AdamW */
    double lr, momentum, weight_decay;
    int nesterov;
} optim_case;
static const optim_case CASES[] = {
    {"sgd", 0, 0.02, 0, 0, 0},
    {"sgd_momentum", 0, 0.02, 0.9, 0, 0},
    {"sgd_nesterov", 0, 0.02, 0.9, 0.01, 1},
    {"adam", 1, 1e-2, 0, 0, 0},
    {"adam_wd", 1, 1e-2, 0, 0.01, 0},
    {"adamw", 2, 1e-2, 0, 0.01, 0},
};

/* want[step][param][i] for one case, read from the fixture file. */
typedef struct fixture {
    double want[NSTEPS + 1][2][6];
    int seen[NSTEPS + 1][2];
} fixture;

static void load_fixture(const char *case_name, fixture *fx)
{
    memset(fx, 0, sizeof *fx);
    FILE *f = fopen(FIXTURE_PATH, "r");
    cr_assert_not_null(f, "cannot open %s (run the tests from the repository root)", FIXTURE_PATH);
    char line[4096];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n') continue;
        char name[64], param[16];
        int step, used;
        cr_assert_eq(sscanf(line, "%63s %d %15s%n", name, &step, param, &used), 3,
                     "%s:%d: bad line", FIXTURE_PATH, lineno);
        if (strcmp(name, case_name) != 0) continue;
        int p = strcmp(param, "p0") == 0 ? 0 : strcmp(param, "p1") == 0 ? 1 : -1;
        cr_assert(p >= 0 && step >= 0 && step <= NSTEPS, "%s:%d: bad step %d or param %s",
                  FIXTURE_PATH, lineno, step, param);
        cr_assert_not(fx->seen[step][p], "%s:%d: duplicate line", FIXTURE_PATH, lineno);
        const char *s = line + used;
        for (size_t i = 0; i < PSIZE[p]; i++) {
            char *end;
            fx->want[step][p][i] = strtod(s, &end);
            cr_assert_neq(end, s, "%s:%d: value %zu missing", FIXTURE_PATH, lineno, i);
            s = end;
        }
        char *end;
        strtod(s, &end);
        cr_assert_eq(end, s, "%s:%d: more than %zu values", FIXTURE_PATH, lineno, PSIZE[p]);
        fx->seen[step][p] = 1;
    }
    fclose(f);
    for (int k = 0; k <= NSTEPS; k++)
        for (int p = 0; p < 2; p++)
            cr_assert(fx->seen[k][p], "%s: no line for case %s step %d p%d", FIXTURE_PATH, case_name, k, p);
}

static ag_optim *make_optim(ag_store *s, const optim_case *c)
{
    if (c->adam) return ag_adam_new(s, c->lr, 0.9, 0.999, 1e-8, c->weight_decay, c->adam == 2);
    return ag_sgd_new(s, c->lr, c->momentum, c->weight_decay, c->nesterov);
}

/* The fixtures' gradient rule: grad = 2 * p + 0.1 * step. */
static void set_grads(ag_store *s, int step)
{
    for (int i = 0; i < ag_store_count(s); i++) {
        ag_tensor *t = ag_store_at(s, i);
        for (size_t j = 0; j < t->size; j++) t->grad[j] = (ag_real)(2 * (double)t->data[j] + 0.1 * step);
    }
}

static ag_store *fixture_store(void)
{
    ag_store *s = ag_store_new();
    ag_tensor *p0 = ag_param(s, "p0", AG_SHAPE(2, 3));
    ag_tensor *p1 = ag_param(s, "p1", AG_SHAPE(4));
    cr_assert(p0 && p1);
    for (int i = 0; i < 6; i++) p0->data[i] = (ag_real)P0[i];
    for (int i = 0; i < 4; i++) p1->data[i] = (ag_real)P1[i];
    return s;
}

static void check_against_pytorch(const char *case_name)
{
    const optim_case *c = NULL;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        if (strcmp(CASES[i].name, case_name) == 0) c = &CASES[i];
    cr_assert_not_null(c);
    fixture fx;
    load_fixture(case_name, &fx);
    ag_store *s = fixture_store();
    /* step 0 is the starting point: the file and this test must agree */
    expect_close(ag_store_at(s, 0)->data, fx.want[0][0], 6, 0, 0, "p0 at step 0");
    expect_close(ag_store_at(s, 1)->data, fx.want[0][1], 4, 0, 0, "p1 at step 0");
    ag_optim *o = make_optim(s, c);
    cr_assert_not_null(o, "%s", ag_store_error(s));
    for (int k = 1; k <= NSTEPS; k++) {
        set_grads(s, k);
        cr_assert_eq(ag_optim_step(o), AG_OK, "%s", ag_optim_error(o));
        char what[64];
        for (int p = 0; p < 2; p++) {
            snprintf(what, sizeof what, "%s step %d p%d", case_name, k, p);
            expect_close(ag_store_at(s, p)->data, fx.want[k][p], PSIZE[p], 0, TOL(1e-12, 1e-5), what);
        }
    }
    cr_assert_eq(ag_optim_steps(o), NSTEPS);
    ag_optim_free(o);
    ag_store_free(s);
}

Test(optim, sgd_matches_pytorch) { check_against_pytorch("sgd"); }
Test(optim, sgd_momentum_matches_pytorch) { check_against_pytorch("sgd_momentum"); }
Test(optim, sgd_nesterov_weight_decay_matches_pytorch) { check_against_pytorch("sgd_nesterov"); }
Test(optim, adam_matches_pytorch) { check_against_pytorch("adam"); }
Test(optim, adam_weight_decay_matches_pytorch) { check_against_pytorch("adam_wd"); }
Test(optim, adamw_matches_pytorch) { check_against_pytorch("adamw"); }

Test(optim, adam_first_step_by_hand_puts_eps_outside_the_sqrt)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = ag_param(s, "w", AG_SHAPE(1));
    w->data[0] = 1;
    w->grad[0] = 0.5;
    /* t = 1: m = 0.1 * 0.5 = 0.05, v = 0.001 * 0.25 = 0.00025,
     * mhat = 0.5, vhat = 0.25, p = 1 - 0.1 * 0.5 / (sqrt(0.25) + 0.5) = 0.95.
     * (eps inside the sqrt would give 1 - 0.1 * 0.5 / sqrt(0.75) = 0.9423.) */
    ag_optim *o = ag_adam_new(s, 0.1, 0.9, 0.999, 0.5, 0, 0);
    cr_assert_not_null(o);
    cr_assert_eq(ag_optim_step(o), AG_OK);
    expect_close(w->data, ((double[]){0.95}), 1, 0, TOL(1e-14, 1e-6), "p");
    size_t n;
    expect_close(ag_optim_state(o, 0, 0, &n), ((double[]){0.05}), 1, 0, TOL(1e-14, 1e-6), "m");
    cr_assert_eq(n, 1);
    expect_close(ag_optim_state(o, 0, 1, &n), ((double[]){0.00025}), 1, 0, TOL(1e-14, 1e-6), "v");
    /* the grad is read, not zeroed */
    cr_assert_eq(w->grad[0], (ag_real)0.5);
    ag_optim_free(o);
    ag_store_free(s);
}

Test(optim, sgd_momentum_state_is_the_gradient_after_one_step)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = ag_param(s, "w", AG_SHAPE(2));
    w->data[0] = 1, w->data[1] = -2;
    w->grad[0] = 0.5, w->grad[1] = 0.25;
    ag_optim *o = ag_sgd_new(s, 0.1, 0.9, 0.5, 0);
    cr_assert_not_null(o);
    cr_assert_str_eq(ag_optim_kind(o), "sgd");
    cr_assert_eq(ag_optim_state_count(o), 1);
    cr_assert_eq(ag_optim_step(o), AG_OK);
    /* g = grad + 0.5 p = {1, -0.75}; buf = g; p -= 0.1 g */
    size_t n = 99;
    ag_real *buf = ag_optim_state(o, 0, 0, &n);
    cr_assert_not_null(buf);
    cr_assert_eq(n, 2);
    expect_close(buf, ((double[]){1, -0.75}), 2, 0, TOL(1e-15, 1e-7), "buf");
    expect_close(w->data, ((double[]){0.9, -1.925}), 2, 0, TOL(1e-15, 1e-7), "p");
    /* no second buffer, no parameter 1 */
    cr_assert_null(ag_optim_state(o, 0, 1, &n));
    cr_assert_eq(n, 0);
    cr_assert_null(ag_optim_state(o, 1, 0, &n));
    cr_assert_null(ag_optim_state(o, -1, 0, NULL));
    ag_optim_free(o);
    ag_store_free(s);
}

Test(optim, state_counts_and_kinds)
{
    ag_store *s = fixture_store();
    ag_optim *plain = ag_sgd_new(s, 0.1, 0, 0, 0);
    ag_optim *adam = ag_adam_new(s, 1e-3, 0.9, 0.999, 1e-8, 0, 0);
    ag_optim *adamw = ag_adam_new(s, 1e-3, 0.9, 0.999, 1e-8, 0.1, 1);
    cr_assert(plain && adam && adamw);
    cr_assert_str_eq(ag_optim_kind(plain), "sgd");
    cr_assert_str_eq(ag_optim_kind(adam), "adam");
    cr_assert_str_eq(ag_optim_kind(adamw), "adamw");
    cr_assert_eq(ag_optim_state_count(plain), 0);
    cr_assert_eq(ag_optim_state_count(adam), 2);
    size_t n = 99;
    cr_assert_null(ag_optim_state(plain, 0, 0, &n));
    cr_assert_eq(n, 0);
    cr_assert_not_null(ag_optim_state(adamw, 1, 1, &n));
    cr_assert_eq(n, 4);
    cr_assert_null(ag_optim_state(adamw, 2, 0, &n));
    cr_assert_null(ag_optim_state(adamw, 0, 2, &n));
    /* a fresh state is zero */
    ag_real *m = ag_optim_state(adam, 0, 0, &n);
    for (size_t i = 0; i < n; i++) cr_assert_eq(m[i], 0);
    cr_assert_float_eq(ag_optim_lr(adam), 1e-3, 1e-18);
    ag_optim_set_lr(adam, 5e-4);
    cr_assert_float_eq(ag_optim_lr(adam), 5e-4, 1e-18);
    ag_optim_free(plain);
    ag_optim_free(adam);
    ag_optim_free(adamw);
    ag_store_free(s);
}

Test(optim, restored_state_and_steps_continue_the_same_run)
{
    /* Run A: 3 Adam steps.  Run B: 2 steps, then its params, m, v and step
     * count are copied into a fresh optimizer over a fresh store (as a
     * checkpoint would), which takes step 3.  Both must agree exactly. */
    const optim_case c = {"adamw", 2, 1e-2, 0, 0.01, 0};
    ag_store *sa = fixture_store(), *sb = fixture_store(), *sc = fixture_store();
    ag_optim *a = make_optim(sa, &c), *b = make_optim(sb, &c), *r = make_optim(sc, &c);
    cr_assert(a && b && r);
    for (int k = 1; k <= 2; k++) {
        set_grads(sa, k);
        set_grads(sb, k);
        cr_assert_eq(ag_optim_step(a), AG_OK);
        cr_assert_eq(ag_optim_step(b), AG_OK);
    }
    for (int p = 0; p < 2; p++) {
        memcpy(ag_store_at(sc, p)->data, ag_store_at(sb, p)->data, PSIZE[p] * sizeof(ag_real));
        for (int w = 0; w < 2; w++) {
            size_t nb, nr;
            ag_real *from = ag_optim_state(b, p, w, &nb), *to = ag_optim_state(r, p, w, &nr);
            cr_assert(from && to && nb == nr && nb == PSIZE[p]);
            memcpy(to, from, nb * sizeof(ag_real));
        }
    }
    ag_optim_set_steps(r, ag_optim_steps(b));
    cr_assert_eq(ag_optim_steps(r), 2);
    set_grads(sa, 3);
    set_grads(sc, 3);
    cr_assert_eq(ag_optim_step(a), AG_OK);
    cr_assert_eq(ag_optim_step(r), AG_OK);
    for (int p = 0; p < 2; p++)
        cr_assert_eq(memcmp(ag_store_at(sa, p)->data, ag_store_at(sc, p)->data, PSIZE[p] * sizeof(ag_real)), 0,
                     "p%d differs after the restored step", p);
    /* a negative step count is refused */
    ag_optim_set_steps(r, -4);
    cr_assert_eq(ag_optim_steps(r), 3);
    cr_assert(strstr(ag_optim_error(r), "-4"), "%s", ag_optim_error(r));
    cr_assert_str_empty(ag_optim_error(a));
    ag_optim_free(a);
    ag_optim_free(b);
    ag_optim_free(r);
    ag_store_free(sa);
    ag_store_free(sb);
    ag_store_free(sc);
}

/* The constructor returns NULL and the store's message names the bad value;
 * so does the thread's deprecated copy. */
#define EXPECT_REJECTED(call, text)                                                               \
    do {                                                                                          \
        ag_optim *o_ = (call);                                                                    \
        cr_assert_null(o_, #call " should fail");                                                 \
        cr_assert(strstr(ag_store_error(s), (text)), #call ": message '%s' lacks '%s'",           \
                  ag_store_error(s), (text));                                                     \
        cr_assert_str_eq(ag_optim_last_error(), ag_store_error(s));                               \
    } while (0)

Test(optim, constructors_reject_bad_arguments)
{
    ag_store *s = fixture_store();
    cr_assert_null(ag_sgd_new(NULL, 0.1, 0, 0, 0));
    cr_assert(strstr(ag_optim_last_error(), "sgd: store is NULL"), "%s", ag_optim_last_error());
    cr_assert_null(ag_adam_new(NULL, 1e-3, 0.9, 0.999, 1e-8, 0, 0));
    cr_assert(strstr(ag_optim_last_error(), "adam: store is NULL"), "%s", ag_optim_last_error());
    EXPECT_REJECTED(ag_sgd_new(s, -0.1, 0, 0, 0), "lr = -0.1");
    EXPECT_REJECTED(ag_sgd_new(s, NAN, 0, 0, 0), "lr = nan");
    EXPECT_REJECTED(ag_sgd_new(s, 0.1, -0.5, 0, 0), "momentum = -0.5");
    EXPECT_REJECTED(ag_sgd_new(s, 0.1, 0.9, -1, 0), "weight_decay = -1");
    EXPECT_REJECTED(ag_sgd_new(s, 0.1, 0, 0, 1), "nesterov needs momentum");
    EXPECT_REJECTED(ag_adam_new(s, -1e-3, 0.9, 0.999, 1e-8, 0, 0), "lr = -0.001");
    EXPECT_REJECTED(ag_adam_new(s, 1e-3, 1.0, 0.999, 1e-8, 0, 0), "beta1 = 1 is outside [0, 1)");
    EXPECT_REJECTED(ag_adam_new(s, 1e-3, 0.9, -0.1, 1e-8, 0, 1), "beta2 = -0.1");
    EXPECT_REJECTED(ag_adam_new(s, 1e-3, 0.9, 0.999, -1e-8, 0, 1), "eps = -1e-08");
    EXPECT_REJECTED(ag_adam_new(s, 1e-3, 0.9, 0.999, 1e-8, -0.01, 1), "adamw: weight_decay = -0.01");
    ag_store_free(s);
}

Test(optim, step_fails_when_the_store_grew)
{
    ag_store *s = fixture_store();
    ag_optim *o = ag_adam_new(s, 1e-2, 0.9, 0.999, 1e-8, 0, 0);
    cr_assert_not_null(o);
    ag_tensor *late = ag_param(s, "late", AG_SHAPE(3));
    cr_assert_not_null(late);
    set_grads(s, 1);
    cr_assert_eq(ag_optim_step(o), AG_ERR_STATE);
    cr_assert(strstr(ag_optim_error(o), "3 parameters"), "%s", ag_optim_error(o));
    cr_assert(strstr(ag_optim_error(o), "made for 2"), "%s", ag_optim_error(o));
    cr_assert_eq(ag_optim_steps(o), 0);
    expect_close(ag_store_at(s, 0)->data, P0, 6, 0, 0, "p0 untouched");
    ag_optim_free(o);
    ag_store_free(s);
}

Test(optim, step_refuses_a_bad_learning_rate)
{
    ag_store *s = fixture_store();
    ag_optim *o = ag_sgd_new(s, 0.1, 0, 0, 0);
    cr_assert_not_null(o);
    set_grads(s, 1);
    ag_optim_set_lr(o, NAN);
    cr_assert_eq(ag_optim_step(o), AG_ERR_ARG);
    cr_assert(strstr(ag_optim_error(o), "sgd: lr = nan"), "%s", ag_optim_error(o));
    ag_optim_set_lr(o, -1);
    cr_assert_eq(ag_optim_step(o), AG_ERR_ARG);
    expect_close(ag_store_at(s, 0)->data, P0, 6, 0, 0, "p0 untouched");
    cr_assert_eq(ag_optim_steps(o), 0);
    cr_assert_eq(ag_optim_step(NULL), AG_ERR_ARG);
    ag_optim_free(o);
    ag_store_free(s);
}

Test(optim, a_step_allocates_nothing)
{
    ag_store *s = fixture_store();
    ag_optim *opts[3] = {ag_sgd_new(s, 0.1, 0.9, 0.01, 1), ag_adam_new(s, 1e-2, 0.9, 0.999, 1e-8, 0.01, 0),
                         ag_adam_new(s, 1e-2, 0.9, 0.999, 1e-8, 0.01, 1)};
    for (int i = 0; i < 3; i++) cr_assert_not_null(opts[i]);
    uint64_t before = ag_alloc_count();
    for (int k = 1; k <= 5; k++) {
        set_grads(s, k);
        double norm;
        cr_assert_eq(ag_clip_grad_norm(s, 1.0, &norm), AG_OK);
        for (int i = 0; i < 3; i++) {
            ag_optim_set_lr(opts[i], ag_lr_schedule(1e-2, k, 2, 10, "cosine"));
            cr_assert_eq(ag_optim_step(opts[i]), AG_OK, "%s", ag_optim_error(opts[i]));
        }
    }
    cr_assert_eq(ag_alloc_count(), before, "%llu allocations in 5 steps",
                 (unsigned long long)(ag_alloc_count() - before));
    for (int i = 0; i < 3; i++) ag_optim_free(opts[i]);
    ag_store_free(s);
}

Test(optim, an_empty_store_steps_harmlessly)
{
    ag_store *s = ag_store_new();
    ag_optim *o = ag_adam_new(s, 1e-3, 0.9, 0.999, 1e-8, 0, 1);
    cr_assert_not_null(o);
    cr_assert_eq(ag_optim_step(o), AG_OK);
    cr_assert_eq(ag_optim_steps(o), 1);
    cr_assert_null(ag_optim_state(o, 0, 0, NULL));
    double norm = -1;
    cr_assert_eq(ag_clip_grad_norm(s, 1.0, &norm), AG_OK);
    cr_assert_eq(norm, 0);
    ag_optim_free(o);
    ag_store_free(s);
}

/* ---- clipping ------------------------------------------------------------ */

/* a [2] with grad {3, 0} and b [1] with grad {4}: the norm is taken over
 * both parameters together. */
static ag_store *grad_3_4(void)
{
    ag_store *s = ag_store_new();
    ag_tensor *a = ag_param(s, "a", AG_SHAPE(2));
    ag_tensor *b = ag_param(s, "b", AG_SHAPE(1));
    cr_assert(a && b);
    a->grad[0] = 3, a->grad[1] = 0;
    b->grad[0] = 4;
    return s;
}

Test(optim, clip_scales_a_norm_5_gradient_to_1)
{
    ag_store *s = grad_3_4();
    double norm = 0;
    cr_assert_eq(ag_clip_grad_norm(s, 1.0, &norm), AG_OK);
    cr_assert_float_eq(norm, 5.0, 1e-12, "the norm before clipping is reported");
    /* coef = 1 / (5 + 1e-6) */
    expect_close(ag_store_at(s, 0)->grad, ((double[]){3 / 5.000001, 0}), 2, 0, TOL(1e-14, 1e-6), "da");
    expect_close(ag_store_at(s, 1)->grad, ((double[]){4 / 5.000001}), 1, 0, TOL(1e-14, 1e-6), "db");
    /* clipping again: the norm is now just under 1, nothing changes */
    ag_real before[3] = {ag_store_at(s, 0)->grad[0], ag_store_at(s, 0)->grad[1], ag_store_at(s, 1)->grad[0]};
    cr_assert_eq(ag_clip_grad_norm(s, 1.0, &norm), AG_OK);
    cr_assert_float_eq(norm, 5 / 5.000001, TOL(1e-12, 1e-6));
    cr_assert_lt(norm, 1.0);
    cr_assert_eq(memcmp(ag_store_at(s, 0)->grad, before, 2 * sizeof(ag_real)), 0, "da changed");
    cr_assert_eq(memcmp(ag_store_at(s, 1)->grad, before + 2, sizeof(ag_real)), 0, "db changed");
    ag_store_free(s);
}

/* The norm in its stated order, bit for bit, on every instruction set:
 * per parameter, 8 lane sums of squares (element j in lane
 * j mod 8), then the last n mod 8 squares plus the lanes in order; the
 * parameters' sums added in store order.  Sizes unlike and alike, so that
 * the sums run side by side over common lengths and alone past them, and
 * a last group that is not full. */
Test(optim, clip_norm_is_the_stated_sum_on_every_level)
{
    static const char *const levels[] = {"baseline", "avx2", "avx512"};
    static const int sizes[] = {100, 37, 1000, 8, 3, 1000, 513, 64, 1, 2000};
    enum { NP = sizeof sizes / sizeof sizes[0] };
    ag_store *s = ag_store_new();
    ag_rng r;
    ag_rng_seed(&r, 11);
    double want = 0;
    for (int i = 0; i < NP; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        ag_tensor *t = ag_param(s, name, AG_SHAPE(sizes[i]));
        cr_assert_not_null(t);
        double lane[8] = {0}, sum = 0;
        for (int j = 0; j < sizes[i]; j++) {
            t->grad[j] = (ag_real)(2 * ag_rng_uniform(&r) - 1);
            if (j < sizes[i] / 8 * 8) lane[j % 8] += (double)t->grad[j] * (double)t->grad[j];
            else sum += (double)t->grad[j] * (double)t->grad[j];
        }
        for (int l = 0; l < 8; l++) sum += lane[l];
        want += sum;
    }
    want = sqrt(want);
    for (int l = 0; l < 3; l++) {
        if (strcmp(ag__isa_force(levels[l]), levels[l]) != 0) continue; /* the CPU lacks it */
        double norm = 0;
        cr_assert_eq(ag_clip_grad_norm(s, 0, &norm), AG_OK);
        cr_assert(memcmp(&norm, &want, sizeof norm) == 0, "%s: norm %a, the sum gives %a", levels[l], norm, want);
    }
    ag__isa_force(NULL);
    ag_store_free(s);
}

Test(optim, clip_leaves_small_gradients_and_max_norm_0_alone)
{
    ag_store *s = grad_3_4();
    double norm = 0;
    cr_assert_eq(ag_clip_grad_norm(s, 10.0, &norm), AG_OK);
    cr_assert_float_eq(norm, 5.0, 1e-12);
    expect_close(ag_store_at(s, 0)->grad, ((double[]){3, 0}), 2, 0, 0, "da (max 10)");
    cr_assert_eq(ag_clip_grad_norm(s, 0, &norm), AG_OK);
    cr_assert_float_eq(norm, 5.0, 1e-12, "max_norm 0 still reports the norm");
    expect_close(ag_store_at(s, 1)->grad, ((double[]){4}), 1, 0, 0, "db (max 0)");
    cr_assert_eq(ag_clip_grad_norm(s, -1, NULL), AG_OK);
    expect_close(ag_store_at(s, 1)->grad, ((double[]){4}), 1, 0, 0, "db (max -1)");
    cr_assert_eq(ag_clip_grad_norm(NULL, 1, &norm), AG_ERR_ARG);
    ag_store_free(s);
}

Test(optim, clip_refuses_a_nan_or_inf_gradient_and_leaves_grads_alone)
{
    ag_store *s = grad_3_4();
    ag_tensor *b = ag_store_at(s, 1);
    b->grad[0] = (ag_real)NAN;
    double norm = 0;
    cr_assert_eq(ag_clip_grad_norm(s, 1.0, &norm), AG_ERR_NUMERIC);
    cr_assert(isnan(norm));
    cr_assert(strstr(ag_store_error(s), "'b'"), "%s", ag_store_error(s));
    expect_close(ag_store_at(s, 0)->grad, ((double[]){3, 0}), 2, 0, 0, "da untouched");
    cr_assert(isnan((double)b->grad[0]));
    b->grad[0] = (ag_real)INFINITY;
    cr_assert_eq(ag_clip_grad_norm(s, 1.0, &norm), AG_ERR_NUMERIC);
    cr_assert(isinf(norm));
    expect_close(ag_store_at(s, 0)->grad, ((double[]){3, 0}), 2, 0, 0, "da untouched (inf)");
    cr_assert(isinf((double)b->grad[0]));
    ag_store_free(s);
}

/* ---- every instruction set ------------------------------------------------
 *
 * The updates and the clipping run as loops compiled once per instruction
 * set (src/nn/optim.c).  Each value is updated on its own, and the norm's
 * partial sums are added up in one fixed order, so every level gives the
 * baseline's bits.  The sizes take the loops' every path: shorter than a
 * vector, whole vectors, vectors and a rest. */
static const char *const levels[] = {"baseline", "avx2", "avx512"};
static const int long_sizes[] = {1, 7, 32, 1000, 77};
enum { NLONG = sizeof long_sizes / sizeof long_sizes[0] };

/* A store of parameters of long_sizes, values in [-1, 1). */
static ag_store *long_store(void)
{
    ag_store *s = ag_store_new();
    ag_rng r;
    ag_rng_seed(&r, 11);
    for (int i = 0; i < NLONG; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        ag_tensor *t = ag_param(s, name, AG_SHAPE(long_sizes[i]));
        cr_assert_not_null(t);
        for (size_t j = 0; j < t->size; j++) t->data[j] = (ag_real)(2 * ag_rng_uniform(&r) - 1);
    }
    return s;
}

/* Gradients of step k: values in [-k, k), so that the norm is above 1. */
static void long_grads(ag_store *s, int k)
{
    ag_rng r;
    ag_rng_seed(&r, 100 + (uint64_t)k);
    for (int i = 0; i < ag_store_count(s); i++) {
        ag_tensor *t = ag_store_at(s, i);
        for (size_t j = 0; j < t->size; j++) t->grad[j] = (ag_real)(k * (2 * ag_rng_uniform(&r) - 1));
    }
}

Test(optim, clip_norm_of_long_gradients_is_the_plain_sum)
{
    for (int l = 0; l < 3; l++) {
        if (strcmp(ag__isa_force(levels[l]), levels[l]) != 0) continue; /* the CPU lacks it */
        ag_store *s = long_store();
        long_grads(s, 3);
        double sum = 0, norm = 0;
        for (int i = 0; i < ag_store_count(s); i++) {
            const ag_tensor *t = ag_store_at(s, i);
            for (size_t j = 0; j < t->size; j++) sum += (double)t->grad[j] * (double)t->grad[j];
        }
        ag_real g0 = ag_store_at(s, 3)->grad[500];
        cr_assert_eq(ag_clip_grad_norm(s, 1.0, &norm), AG_OK);
        /* squares of floats are exact in double: only the additions round */
        cr_assert(fabs(norm - sqrt(sum)) <= 1e-13 * sqrt(sum), "%s: norm %.17g, want %.17g", levels[l], norm,
                  sqrt(sum));
        ag_real want = (ag_real)((double)g0 * (1.0 / (norm + 1e-6)));
        cr_assert(fabs(ag_store_at(s, 3)->grad[500] - want) <= TOL(1e-15, 1e-7) * fabs(want),
                  "%s: a clipped gradient is %g, want %g", levels[l], (double)ag_store_at(s, 3)->grad[500],
                  (double)want);
        ag_store_free(s);
    }
    ag__isa_force(NULL);
}

/* Three clipped steps of optimizer `kind` (0 SGD, 1 Adam, 2 AdamW); out:
 * the parameters, then their state, then the three norms as ag_reals'
 * bits. */
static ag_real *long_steps(int kind, size_t *n)
{
    ag_store *s = long_store();
    ag_optim *o = kind == 0 ? ag_sgd_new(s, 0.1, 0.9, 0.01, 1) : ag_adam_new(s, 1e-2, 0.9, 0.999, 1e-8, 0.01, kind == 2);
    cr_assert_not_null(o);
    double norms[3];
    for (int k = 1; k <= 3; k++) {
        long_grads(s, k);
        cr_assert_eq(ag_clip_grad_norm(s, 1.0, &norms[k - 1]), AG_OK);
        cr_assert_eq(ag_optim_step(o), AG_OK, "%s", ag_optim_error(o));
    }
    size_t total = ag_store_numel(s), m = 0;
    int ns = ag_optim_state_count(o);
    *n = total * (1 + (size_t)ns) + (sizeof norms) / (sizeof(ag_real));
    ag_real *out = malloc(*n * sizeof *out);
    for (int i = 0; i < ag_store_count(s); i++) {
        const ag_tensor *t = ag_store_at(s, i);
        memcpy(out + m, t->data, t->size * sizeof *out), m += t->size;
        for (int w = 0; w < ns; w++) {
            size_t len;
            const ag_real *st = ag_optim_state(o, i, w, &len);
            memcpy(out + m, st, len * sizeof *out), m += len;
        }
    }
    memcpy(out + m, norms, sizeof norms);
    ag_optim_free(o);
    ag_store_free(s);
    return out;
}

Test(optim, every_level_gives_the_baselines_bits)
{
    static const char *const kinds[] = {"sgd", "adam", "adamw"};
    for (int kind = 0; kind < 3; kind++) {
        size_t n0, n;
        cr_assert_str_eq(ag__isa_force("baseline"), "baseline");
        ag_real *base = long_steps(kind, &n0);
        for (int l = 1; l < 3; l++) {
            if (strcmp(ag__isa_force(levels[l]), levels[l]) != 0) continue;
            ag_real *got = long_steps(kind, &n);
            cr_assert_eq(n, n0);
            for (size_t i = 0; i < n; i++)
                cr_assert(memcmp(&got[i], &base[i], sizeof *got) == 0, "%s %s: value %zu of %zu is %a, baseline %a",
                          levels[l], kinds[kind], i, n, (double)got[i], (double)base[i]);
            free(got);
        }
        free(base);
    }
    ag__isa_force(NULL);
}

/* ---- schedules ----------------------------------------------------------- */

Test(optim, schedule_constant_and_linear)
{
    /* constant, warmup 4: 1/4, 2/4, ... then flat */
    cr_assert_float_eq(ag_lr_schedule(0.1, 1, 4, 100, "constant"), 0.025, 1e-15);
    cr_assert_float_eq(ag_lr_schedule(0.1, 4, 4, 100, "constant"), 0.1, 1e-15);
    cr_assert_float_eq(ag_lr_schedule(0.1, 1000, 4, 100, "constant"), 0.1, 1e-15);
    cr_assert_float_eq(ag_lr_schedule(0.1, 1, 0, 0, "constant"), 0.1, 1e-15);
    /* linear, warmup 10, total 110: up to 1 at step 10, down to 0 at 110 */
    cr_assert_float_eq(ag_lr_schedule(1, 5, 10, 110, "linear"), 0.5, 1e-15);
    cr_assert_float_eq(ag_lr_schedule(1, 10, 10, 110, "linear"), 1.0, 1e-15);
    cr_assert_float_eq(ag_lr_schedule(1, 35, 10, 110, "linear"), 0.75, 1e-15);
    cr_assert_float_eq(ag_lr_schedule(1, 60, 10, 110, "linear"), 0.5, 1e-15);
    cr_assert_float_eq(ag_lr_schedule(1, 109, 10, 110, "linear"), 0.01, 1e-15);
    cr_assert_eq(ag_lr_schedule(1, 110, 10, 110, "linear"), 0.0);
    cr_assert_eq(ag_lr_schedule(1, 500, 10, 110, "linear"), 0.0);
    /* no warmup: starts just below base */
    cr_assert_float_eq(ag_lr_schedule(2, 1, 0, 4, "linear"), 1.5, 1e-15);
}

Test(optim, schedule_cosine_and_noam)
{
    /* cosine, warmup 10, total 110: progress 1/4 at step 35, 1/2 at step 60 */
    cr_assert_float_eq(ag_lr_schedule(1, 5, 10, 110, "cosine"), 0.5, 1e-15);
    cr_assert_float_eq(ag_lr_schedule(1, 10, 10, 110, "cosine"), 1.0, 1e-15);
    cr_assert_float_eq(ag_lr_schedule(1, 35, 10, 110, "cosine"), 0.5 + sqrt(2) / 4, 1e-15);
    cr_assert_float_eq(ag_lr_schedule(1, 60, 10, 110, "cosine"), 0.5, 1e-15);
    cr_assert_float_eq(ag_lr_schedule(1, 85, 10, 110, "cosine"), 0.5 - sqrt(2) / 4, 1e-15);
    cr_assert_eq(ag_lr_schedule(1, 110, 10, 110, "cosine"), 0.0);
    /* noam, warmup 4000: rises as step / 4000, peaks at 1, falls as
     * sqrt(4000 / step) */
    cr_assert_float_eq(ag_lr_schedule(1, 1, 4000, 0, "noam"), 1.0 / 4000, 1e-18);
    cr_assert_float_eq(ag_lr_schedule(1, 1000, 4000, 0, "noam"), 0.25, 1e-15);
    cr_assert_float_eq(ag_lr_schedule(1, 4000, 4000, 0, "noam"), 1.0, 1e-15);
    cr_assert_float_eq(ag_lr_schedule(1, 16000, 4000, 0, "noam"), 0.5, 1e-15);
    cr_assert_float_eq(ag_lr_schedule(6e-4, 64000, 4000, 0, "noam"), 1.5e-4, 1e-18);
}

Test(optim, schedule_check_names_the_bad_argument)
{
    char err[128];
    cr_assert_eq(ag_lr_schedule_check(10, 110, "cosine", err, sizeof err), AG_OK);
    cr_assert_eq(ag_lr_schedule_check(4000, 0, "noam", NULL, 0), AG_OK);
    cr_assert_eq(ag_lr_schedule_check(10, 110, "cosin", err, sizeof err), AG_ERR_ARG);
    cr_assert(strstr(err, "unknown kind 'cosin'"), "%s", err);
    cr_assert_eq(ag_lr_schedule_check(10, 10, "linear", err, sizeof err), AG_ERR_ARG);
    cr_assert(strstr(err, "total = 10 must exceed warmup = 10"), "%s", err);
    cr_assert_eq(ag_lr_schedule_check(0, 10, "noam", err, sizeof err), AG_ERR_ARG);
    cr_assert(strstr(err, "'noam': warmup = 0"), "%s", err);
    cr_assert_eq(ag_lr_schedule_check(-1, 10, "constant", err, sizeof err), AG_ERR_ARG);
    cr_assert_eq(ag_lr_schedule_check(1, 10, NULL, NULL, 0), AG_ERR_ARG);
    /* a message longer than the buffer is cut and still NUL-terminated */
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    cr_assert_eq(ag_lr_schedule_check(10, 110, "cosin", tiny, sizeof tiny), AG_ERR_ARG);
    cr_assert_str_eq(tiny, "lr_sche");
}

/* The deprecated ag_optim_last_error still reports a schedule's reason. */
Test(optim, schedule_errors_give_nan_and_a_message)
{
    cr_assert(isnan(ag_lr_schedule(1, 5, 10, 110, "cosin")));
    cr_assert(strstr(ag_optim_last_error(), "unknown kind 'cosin'"), "%s", ag_optim_last_error());
    cr_assert(isnan(ag_lr_schedule(1, 5, 10, 110, NULL)));
    cr_assert(isnan(ag_lr_schedule(1, 0, 10, 110, "linear")));
    cr_assert(strstr(ag_optim_last_error(), "step = 0"), "%s", ag_optim_last_error());
    cr_assert(isnan(ag_lr_schedule(1, 5, -1, 110, "constant")));
    cr_assert(isnan(ag_lr_schedule(1, 5, 10, 10, "linear")));
    cr_assert(strstr(ag_optim_last_error(), "total = 10"), "%s", ag_optim_last_error());
    cr_assert(isnan(ag_lr_schedule(1, 5, 0, 10, "noam")));
    cr_assert(strstr(ag_optim_last_error(), "noam"), "%s", ag_optim_last_error());
}

/* ---- errors belong to their object and their thread ---------------------- */

/* Each thread fails its own optimizer over its own store many times with a
 * message of its own: each optimizer's, store's and thread's reason must be
 * exactly its own (with one shared buffer they would mix). */
#define ERR_ROUNDS 2000
typedef struct err_job {
    ag_store *s;
    ag_optim *o;
    double lr; /* a bad lr, different per thread */
    int mixed; /* rounds whose message was another thread's */
} err_job;

static void *fail_repeatedly(void *arg)
{
    err_job *j = arg;
    char want[64];
    snprintf(want, sizeof want, "sgd: lr = %g must be finite and >= 0", j->lr);
    for (int r = 0; r < ERR_ROUNDS; r++) {
        ag_optim_set_lr(j->o, j->lr);
        if (ag_optim_step(j->o) != AG_ERR_ARG) j->mixed++;
        if (strcmp(ag_optim_error(j->o), want) != 0 || strcmp(ag_optim_last_error(), want) != 0) j->mixed++;
        if (ag_sgd_new(j->s, j->lr, 0, 0, 0) != NULL) j->mixed++;
        if (strstr(ag_store_error(j->s), want + 5) == NULL) j->mixed++; /* "lr = ..." */
    }
    return NULL;
}

Test(optim, errors_stay_with_their_optimizer_and_thread)
{
    err_job jobs[2] = {{.lr = -1}, {.lr = -2}};
    for (int k = 0; k < 2; k++) {
        jobs[k].s = fixture_store();
        jobs[k].o = ag_sgd_new(jobs[k].s, 0.1, 0, 0, 0);
        cr_assert_not_null(jobs[k].o);
        cr_assert_str_empty(ag_optim_error(jobs[k].o));
    }
    pthread_t th[2];
    for (int k = 0; k < 2; k++) cr_assert_eq(pthread_create(&th[k], NULL, fail_repeatedly, &jobs[k]), 0);
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(jobs[k].mixed, 0, "thread %d saw %d wrong messages", k, jobs[k].mixed);
        ag_optim_free(jobs[k].o);
        ag_store_free(jobs[k].s);
    }
    cr_assert_str_eq(ag_optim_error(NULL), "optimizer is NULL");
}
