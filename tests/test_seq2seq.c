/* tests/test_seq2seq.c: the translator's loss runs its position-wise layers
 * on the real tokens only, packed [n, C] (src/nn/seq2seq.c).  It must give the
 * loss and the gradients of the padded layout, where every position is
 * computed and the cross-entropy ignores the <pad> targets; and it must
 * pass finite differences on its own. */
#include "common.h"

#include "nn/nn_internal.h"

enum { B = 3, S = 5, T = 4, V = 9 };

typedef struct tiny {
    ag_store *s;
    ag_seq2seq m;
    int src[B * S], src_valid[B], tgt_in[B * T], tgt_out[B * T];
} tiny;

/* cure: 0 the default model; 1 pre-norm and QK-norm (hidden 6: D = 3) */
static void tiny_make_cured(tiny *t, uint64_t seed, double dropout, int cure)
{
    t->s = ag_store_new();
    ag_seq2seq_config cfg = {.src_vocab = V, .tgt_vocab = V, .hidden = cure ? 6 : 4, .heads = 2, .ffn = 6,
                             .layers = 2, .max_len = 6, .dropout = dropout, .pre_norm = cure, .qk_norm = cure};
    cr_assert_eq(ag_seq2seq_init(&t->m, t->s, &cfg, seed), AG_OK, "%s", ag_store_error(t->s));
    /* layer norms start at gain 1, bias 0, biases at 0: move them all */
    for (int i = 0; i < ag_store_count(t->s); i++) {
        ag_tensor *p = ag_store_at(t->s, i);
        if (strstr(p->name, "norm")) ag_init_uniform(p, 0.5, 1.5, seed + 3 + (uint64_t)i);
        if (strstr(p->name, "bias")) ag_init_uniform(p, -0.3, 0.3, seed + 50 + (uint64_t)i);
    }
    /* sources of 5 (full), 2 and 1 tokens (<eos> = 2 last); targets of 4
     * (no padding), 2 and 3 tokens: the padded positions hold garbage ids,
     * which must not matter */
    static const int src[B * S] = {4, 5, 6, 7, 2, /**/ 8, 2, 7, 7, 7, /**/ 2, 5, 5, 5, 5};
    static const int valid[B] = {5, 2, 1};
    static const int tin[B * T] = {1, 4, 5, 6, /**/ 1, 7, 3, 3, /**/ 1, 8, 4, 6};
    static const int tout[B * T] = {4, 5, 6, 2, /**/ 7, 2, 0, 0, /**/ 8, 4, 2, 0};
    memcpy(t->src, src, sizeof src), memcpy(t->src_valid, valid, sizeof valid);
    memcpy(t->tgt_in, tin, sizeof tin), memcpy(t->tgt_out, tout, sizeof tout);
}

static void tiny_make_p(tiny *t, uint64_t seed, double dropout) { tiny_make_cured(t, seed, dropout, 0); }

static void tiny_make(tiny *t, uint64_t seed) { tiny_make_p(t, seed, 0); }

static void tiny_free(tiny *t)
{
    ag_seq2seq_free(&t->m);
    ag_store_free(t->s);
}

static ag_tensor *packed_loss(ag_graph *g, void *p)
{
    tiny *t = p;
    return ag_seq2seq_loss(g, &t->m, t->src, t->src_valid, t->tgt_in, t->tgt_out, B, S, T);
}

/* every position computed: logits [B, T, V], <pad> targets ignored */
static ag_tensor *padded_loss(ag_graph *g, void *p)
{
    tiny *t = p;
    ag_tensor *mask = NULL;
    ag_tensor *enc = ag_seq2seq_encode(g, &t->m, t->src, t->src_valid, B, S, &mask);
    ag_tensor *logits = ag_seq2seq_decode(g, &t->m, enc, mask, t->tgt_in, B, T);
    return ag_cross_entropy(g, logits, t->tgt_out, 0, 0.0);
}

/* the loss and every parameter's gradient after one backward */
static double loss_and_grads(tiny *t, ag_build_fn build, double *grads, size_t cap)
{
    ag_graph *g = ag_graph_new();
    ag_store_zero_grad(t->s);
    ag_tensor *loss = build(g, t);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    double l = (double)loss->data[0];
    size_t k = 0;
    for (int i = 0; i < ag_store_count(t->s); i++) {
        ag_tensor *p = ag_store_at(t->s, i);
        for (size_t j = 0; j < p->size; j++) {
            cr_assert_lt(k, cap);
            grads[k++] = (double)p->grad[j];
        }
    }
    ag_graph_free(g);
    return l;
}

/* got equals want but for the order of sums: within rounding of the
 * largest gradient, and of each element (f32: a few ulps of terms near 1,
 * over sums of up to 12 rows) */
static void expect_grads_close(const double *got, const double *want, size_t n, const char *what)
{
    double big = 0;
    for (size_t i = 0; i < n; i++) big = fmax(big, fabs(want[i]));
    cr_assert_gt(big, 1e-3, "%s: the gradients are not all zero", what);
    for (size_t i = 0; i < n; i++)
        cr_assert(fabs(got[i] - want[i]) <= TOL(1e-13, 1e-6) * big + TOL(1e-11, 1e-4) * fabs(want[i]),
                  "%s: gradient element %zu: %.10g, want %.10g", what, i, got[i], want[i]);
}

Test(seq2seq, packed_rows_give_the_padded_loss_and_gradients)
{
    for (int cure = 0; cure <= 1; cure++) { /* the default model; pre-norm + QK-norm */
        tiny t;
        tiny_make_cured(&t, 5, 0, cure);
        size_t n = ag_store_numel(t.s);
        double *packed = calloc(n, sizeof *packed), *padded = calloc(n, sizeof *padded);
        double lp = loss_and_grads(&t, packed_loss, packed, n);
        double ld = loss_and_grads(&t, padded_loss, padded, n);
        /* the same sums in another order: rounding apart (f32: a few ulps of
         * terms near 1, over sums of up to 12 rows) */
        cr_assert(fabs(lp - ld) <= TOL(1e-13, 1e-6) * fabs(ld), "loss %.17g packed, %.17g padded", lp, ld);
        cr_assert_gt(lp, 0.5, "a real loss, not an empty one: %g", lp);
        expect_grads_close(packed, padded, n, cure ? "pre-norm, QK-norm: packed vs padded" : "packed vs padded");
        free(packed), free(padded);
        tiny_free(&t);
    }
}

Test(seq2seq, garbage_in_the_padding_changes_nothing)
{
    tiny t;
    tiny_make(&t, 6);
    ag_graph *g = ag_graph_new();
    double a = (double)packed_loss(g, &t)->data[0];
    ag_graph_reset(g);
    t.src[S + 3] = 1, t.tgt_in[T + 3] = 8; /* padded positions of sentence 1 */
    double b = (double)packed_loss(g, &t)->data[0];
    cr_assert_eq(a, b, "%.17g vs %.17g", a, b);
    ag_graph_free(g);
    tiny_free(&t);
}

Test(seq2seq, rows_of_a_padded_batch)
{
    ag_graph *g = ag_graph_new();
    const int len[3] = {2, 0, 7}; /* 7 > T: all 3 positions */
    ag__rows *r = ag__rows_new(g, len, 3, 3);
    cr_assert_not_null(r);
    cr_assert_eq(r->n, 5);
    const int want[5] = {0, 1, 6, 7, 8};
    for (int i = 0; i < 5; i++) cr_assert_eq(r->at[i], want[i], "at[%d]", i);
    /* pack then unpack: the real rows back, zeros at the padding */
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(3, 3, 2));
    for (int i = 0; i < 18; i++) x->data[i] = (ag_real)(i + 1);
    ag_tensor *p = ag__pack(g, x, r);
    expect_shape(p, 5, 2);
    expect_close(p->data, ((double[]){1, 2, 3, 4, 13, 14, 15, 16, 17, 18}), 10, 0, 0, "packed");
    ag_tensor *u = ag__unpack(g, p, r);
    expect_shape(u, 3, 3, 2);
    expect_close(u->data, ((double[]){1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 13, 14, 15, 16, 17, 18}), 18, 0, 0,
                 "unpacked");
    cr_assert_null(ag__rows_new(g, NULL, 3, 3));
    cr_assert_str_eq(ag_graph_error(g), "rows: lengths NULL for B 3, T 3");
    ag_graph_free(g);
}

Test(seq2seq, bad_batches_are_errors)
{
    tiny t;
    tiny_make(&t, 7);
    ag_graph *g = ag_graph_new();
    cr_assert_null(ag_seq2seq_loss(g, &t.m, t.src, NULL, t.tgt_in, t.tgt_out, B, S, T));
    cr_assert_str_eq(ag_graph_error(g), "seq2seq_loss: a batch of B 3, S 5, T 4 with a NULL array");
    ag_graph_reset(g);
    int tin[B * 7] = {0}, tout[B * 7] = {0}; /* targets of 7 tokens: one more than the model's positions */
    cr_assert_null(ag_seq2seq_loss(g, &t.m, t.src, t.src_valid, tin, tout, B, S, 7));
    cr_assert_str_eq(ag_graph_error(g), "seq2seq: sequence of 7 tokens, the model has positions for 6");
    ag_graph_free(g);
    tiny_free(&t);
}

/* pre_norm and qk_norm add parameters and change none of the others */
Test(seq2seq, a_zero_config_makes_the_model_of_before)
{
    ag_seq2seq_config cfg = {.src_vocab = 9, .tgt_vocab = 9, .hidden = 4, .heads = 2, .ffn = 6, .layers = 2,
                             .max_len = 6, .dropout = 0};
    ag_store *plain = ag_store_new(), *both = ag_store_new();
    ag_seq2seq a, b;
    cr_assert_eq(ag_seq2seq_init(&a, plain, &cfg, 4), AG_OK);
    ag_seq2seq_config on = cfg;
    on.pre_norm = on.qk_norm = 1;
    cr_assert_eq(ag_seq2seq_init(&b, both, &on, 4), AG_OK, "%s", ag_store_error(both));
    /* the options add 2 final norms and 2 norms in each of 3 L attentions,
     * each a weight and a bias; the shared parameters draw the same values */
    cr_assert_eq(ag_store_count(both), ag_store_count(plain) + 2 * 2 + 3 * cfg.layers * 2 * 2);
    for (int i = 0; i < ag_store_count(plain); i++) {
        ag_tensor *p = ag_store_at(plain, i), *q = ag_store_find(both, p->name);
        cr_assert_not_null(q, "%s is missing with the options on", p->name);
        cr_assert_eq(memcmp(p->data, q->data, p->size * sizeof(ag_real)), 0, "%s drawn differently", p->name);
    }
    const char *extra[] = {"encoder.norm.weight", "decoder.norm.bias", "encoder.blocks.1.attention.q_norm.weight",
                           "decoder.blocks.0.cross_attention.k_norm.bias", "decoder.blocks.1.self_attention.k_norm.weight"};
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) {
        cr_assert_not_null(ag_store_find(both, extra[i]), "%s is missing", extra[i]);
        cr_assert_null(ag_store_find(plain, extra[i]), "%s is in the default model", extra[i]);
    }
    ag_seq2seq_free(&a), ag_seq2seq_free(&b);
    on.qk_norm = 2;
    cr_assert_eq(ag_seq2seq_init(&b, both, &on, 4), AG_ERR_ARG);
    cr_assert(strstr(ag_store_error(both), "seq2seq: pre_norm = 1, qk_norm = 2: each must be 0 or 1"), "%s",
              ag_store_error(both));
    ag_store_free(plain), ag_store_free(both);
}

#ifdef AG_DOUBLE
static void gradcheck_every_parameter(int cure)
{
    tiny t;
    tiny_make_cured(&t, 8, 0, cure);
    int n = ag_store_count(t.s);
    ag_tensor **in = calloc((size_t)n, sizeof *in);
    ag_gradcheck_result *r = calloc((size_t)n, sizeof *r);
    for (int i = 0; i < n; i++) in[i] = ag_store_at(t.s, i);
    ag_graph *g = ag_graph_new();
    ag_status st = ag_gradcheck(g, packed_loss, &t, in, n, NULL, r);
    cr_assert_eq(st, AG_OK, "%s", ag_graph_error(g));
    for (int i = 0; i < n; i++)
        cr_expect_eq(r[i].failed, 0, "%s: %zu elements fail (max abs %.3g, rel %.3g)", r[i].input->name,
                     r[i].failed, r[i].max_abs_err, r[i].max_rel_err);
    ag_graph_free(g);
    free(in), free(r);
    tiny_free(&t);
}

Test(seq2seq, packed_loss_gradcheck_every_parameter) { gradcheck_every_parameter(0); }

/* with final LayerNorms and every attention's q_norm and k_norm */
Test(seq2seq, pre_norm_qk_norm_gradcheck_every_parameter) { gradcheck_every_parameter(1); }
#endif

/* ---- data-parallel steps (src/core/team.c) ---------------------------- */

/* every parameter's gradient, in store order */
static void grads_of(const ag_store *s, double *grads)
{
    size_t k = 0;
    for (int i = 0; i < ag_store_count(s); i++)
        for (size_t j = 0; j < ag_store_at(s, i)->size; j++) grads[k++] = (double)ag_store_at(s, i)->grad[j];
}

/* one team step of n workers on t's batch, from zero gradients */
static double team_loss_and_grads(tiny *t, int n, uint64_t seed, double *grads)
{
    char err[256];
    ag_seq2seq_team *team = ag_seq2seq_team_new(&t->m, t->s, n, err, sizeof err);
    cr_assert_not_null(team, "%s", err);
    cr_assert_eq(ag_seq2seq_team_size(team), n);
    ag_graph *g = ag_graph_new();
    ag_graph_seed(g, seed);
    ag_store_zero_grad(t->s);
    double loss = 0;
    cr_assert_eq(ag_seq2seq_team_step(team, g, t->src, t->src_valid, t->tgt_in, t->tgt_out, B, S, T, &loss), AG_OK,
                 "%s", ag_graph_error(g));
    grads_of(t->s, grads);
    ag_graph_free(g);
    ag_seq2seq_team_free(team);
    return loss;
}

Test(seq2seq, a_team_gives_the_batch_loss_and_gradients)
{
    tiny t;
    tiny_make(&t, 9);
    size_t n = ag_store_numel(t.s);
    double *one = calloc(n, sizeof *one), *team = calloc(n, sizeof *team);
    double l1 = loss_and_grads(&t, packed_loss, one, n);
    /* 2 workers: sentences {0}, {1, 2}; 3 workers: one sentence each.  The
     * parts' means weighted by their tokens (4, 2 + 3) are the batch's mean;
     * only the order of the sums differs */
    for (int workers = 2; workers <= 4; workers++) {
        double lt = team_loss_and_grads(&t, workers, 1, team);
        cr_assert(fabs(lt - l1) <= TOL(1e-13, 1e-6) * fabs(l1), "%d workers: loss %.17g, one graph %.17g", workers,
                  lt, l1);
        char what[32];
        snprintf(what, sizeof what, "%d workers", workers);
        expect_grads_close(team, one, n, what);
    }
    free(one), free(team);
    tiny_free(&t);
}

Test(seq2seq, a_team_of_one_is_the_plain_step_bit_for_bit)
{
    tiny t;
    tiny_make(&t, 10);
    size_t n = ag_store_numel(t.s);
    double *one = calloc(n, sizeof *one), *team = calloc(n, sizeof *team);
    double l1 = loss_and_grads(&t, packed_loss, one, n);
    double lt = team_loss_and_grads(&t, 1, 1, team);
    cr_assert_eq(lt, l1);
    cr_assert_eq(memcmp(one, team, n * sizeof *one), 0, "the same bits");
    free(one), free(team);
    tiny_free(&t);
}

Test(seq2seq, a_team_adds_into_the_gradients_and_resets_its_own)
{
    /* two steps without zeroing: twice one step's gradients (a replica that
     * kept its gradient would give three times worker 1's part) */
    tiny t;
    tiny_make(&t, 11);
    size_t n = ag_store_numel(t.s);
    double *once = calloc(n, sizeof *once), *twice = calloc(n, sizeof *twice);
    team_loss_and_grads(&t, 2, 1, once);
    char err[256];
    ag_seq2seq_team *team = ag_seq2seq_team_new(&t.m, t.s, 2, err, sizeof err);
    cr_assert_not_null(team, "%s", err);
    ag_graph *g = ag_graph_new();
    ag_store_zero_grad(t.s);
    double loss;
    for (int step = 0; step < 2; step++) {
        ag_graph_reset(g);
        cr_assert_eq(ag_seq2seq_team_step(team, g, t.src, t.src_valid, t.tgt_in, t.tgt_out, B, S, T, &loss), AG_OK,
                     "%s", ag_graph_error(g));
    }
    grads_of(t.s, twice);
    for (size_t i = 0; i < n; i++)
        cr_assert(fabs(twice[i] - 2 * once[i]) <= TOL(1e-14, 1e-6) * (1 + fabs(once[i])),
                  "gradient element %zu: %.10g after two steps, %.10g after one", i, twice[i], once[i]);
    ag_graph_free(g);
    ag_seq2seq_team_free(team);
    free(once), free(twice);
    tiny_free(&t);
}

/* part k of ag_seq2seq_cut's parts, as process k of a distributed step
 * runs it: from zero gradients, on g seeded as ag_team_step seeds worker k
 * (part 0: g's stream after the other parts' seeds), w_k times its loss */
static double cut_part(tiny *t, const int *lo, const double *w, int k, int n, double *grads)
{
    ag_graph *g = ag_graph_new();
    ag_graph_seed(g, 1);
    ag_rng r;
    memcpy(r.s, ag_graph_rng(g), sizeof r.s);
    for (int j = 1; j < n; j++) {
        uint64_t seed = ag_rng_next(&r);
        if (j == k) ag_graph_seed(g, seed);
    }
    if (k == 0) memcpy(ag_graph_rng(g), r.s, sizeof r.s);
    ag_store_zero_grad(t->s);
    int b0 = lo[k], nb = lo[k + 1] - lo[k];
    ag_tensor *l = ag_seq2seq_loss(g, &t->m, t->src + b0 * S, t->src_valid + b0, t->tgt_in + b0 * T,
                                   t->tgt_out + b0 * T, nb, S, T);
    cr_assert_eq(ag_backward(g, ag_scale(g, l, w[k])), AG_OK, "%s", ag_graph_error(g));
    double loss = (double)l->data[0];
    grads_of(t->s, grads);
    ag_graph_free(g);
    return loss;
}

Test(seq2seq, the_cut_parts_summed_in_order_are_the_team_step_bit_for_bit)
{
    /* with dropout, so that each part's random stream matters */
    tiny t;
    tiny_make_p(&t, 12, 0.3);
    size_t n = ag_store_numel(t.s);
    double *team = calloc(n, sizeof *team), *part = calloc(n, sizeof *part), *sum = calloc(n, sizeof *sum);
    for (int workers = 2; workers <= 3; workers++) {
        double lt = team_loss_and_grads(&t, workers, 1, team);
        int lo[4];
        double w[3];
        int np = ag_seq2seq_cut(&t.m, t.src_valid, t.tgt_out, B, S, T, workers, lo, w);
        cr_assert_eq(np, workers);
        cr_assert(lo[0] == 0 && lo[np] == B && w[0] > 0 && w[np - 1] > 0);
        double loss = 0;
        for (int k = 0; k < np; k++) {
            double lk = cut_part(&t, lo, w, k, np, part);
            loss += w[k] * lk;
            /* in ag_real, as the team adds worker k's gradients into the model's */
            for (size_t e = 0; e < n; e++) sum[e] = k ? (double)(ag_real)((ag_real)sum[e] + (ag_real)part[e]) : part[e];
        }
        cr_assert_eq(loss, lt, "%d parts: loss %.17g, team %.17g", np, loss, lt);
        cr_assert_eq(memcmp(sum, team, n * sizeof *sum), 0, "%d parts: the team's bits", np);
    }
    /* a bad argument: no parts */
    int lo[2];
    double w[1];
    cr_assert_eq(ag_seq2seq_cut(&t.m, t.src_valid, t.tgt_out, B, S, T, 0, lo, w), 0);
    cr_assert_eq(ag_seq2seq_cut(NULL, t.src_valid, t.tgt_out, B, S, T, 1, lo, w), 0);
    cr_assert_eq(ag_seq2seq_cut(&t.m, t.src_valid, t.tgt_out, B, S, T, 1, lo, w), 1);
    cr_assert(lo[0] == 0 && lo[1] == B && w[0] == 1);
    free(team), free(part), free(sum);
    tiny_free(&t);
}

Test(seq2seq, a_team_with_dropout_repeats_its_numbers)
{
    /* the same seed: the same masks in every worker, whatever the threads'
     * timing; another seed: other masks */
    tiny t;
    tiny_make_p(&t, 12, 0.3);
    size_t n = ag_store_numel(t.s);
    double *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b), *c = calloc(n, sizeof *c);
    for (int workers = 2; workers <= 3; workers++) {
        double la = team_loss_and_grads(&t, workers, 7, a);
        double lb = team_loss_and_grads(&t, workers, 7, b);
        double lc = team_loss_and_grads(&t, workers, 8, c);
        cr_assert_eq(la, lb, "%d workers, seed 7 twice: %.17g, %.17g", workers, la, lb);
        cr_assert_eq(memcmp(a, b, n * sizeof *a), 0, "%d workers, seed 7 twice: the same gradients", workers);
        cr_assert_neq(la, lc, "seeds 7 and 8 drop other units");
    }
    free(a), free(b), free(c);
    tiny_free(&t);
}

Test(seq2seq, a_part_of_padding_only_is_skipped)
{
    /* sentence 1's target is all <pad>: with 3 workers, worker 1 has no
     * token; the loss is the other two's, as on one graph */
    tiny t;
    tiny_make(&t, 13);
    for (int i = 0; i < T; i++) t.tgt_out[T + i] = 0;
    size_t n = ag_store_numel(t.s);
    double *one = calloc(n, sizeof *one), *team = calloc(n, sizeof *team);
    double l1 = loss_and_grads(&t, packed_loss, one, n);
    double lt = team_loss_and_grads(&t, 3, 1, team);
    cr_assert(fabs(lt - l1) <= TOL(1e-13, 1e-6) * fabs(l1), "loss %.17g, one graph %.17g", lt, l1);
    expect_grads_close(team, one, n, "a part of padding only");
    free(one), free(team);
    tiny_free(&t);
}

Test(seq2seq, team_errors_name_the_problem)
{
    tiny t;
    tiny_make(&t, 14);
    char err[256];
    cr_assert_null(ag_seq2seq_team_new(&t.m, t.s, 0, err, sizeof err));
    cr_assert_str_eq(err, "team: the number of workers must be 1..256");
    cr_assert_null(ag_seq2seq_team_new(NULL, t.s, 2, err, sizeof err));
    cr_assert_str_eq(err, "team: the model is NULL");
    /* a store without the model's parameters */
    ag_store *other = ag_store_new();
    cr_assert_null(ag_seq2seq_team_new(&t.m, other, 2, err, sizeof err));
    cr_assert_str_eq(err, "team: borrow: 'encoder.embedding.weight' is not in the model's store");
    ag_store_free(other);

    ag_seq2seq_team *team = ag_seq2seq_team_new(&t.m, t.s, 2, err, sizeof err);
    cr_assert_not_null(team, "%s", err);
    ag_graph *g = ag_graph_new();
    double loss = 0;
    cr_assert_eq(ag_seq2seq_team_step(team, g, t.src, t.src_valid, t.tgt_in, t.tgt_out, B, S, T, NULL), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "team_step: loss is NULL");
    /* a bad id in sentence 2, which worker 1 takes: its message, named */
    ag_graph_reset(g);
    t.src[2 * S] = V + 3;
    cr_assert_neq(ag_seq2seq_team_step(team, g, t.src, t.src_valid, t.tgt_in, t.tgt_out, B, S, T, &loss), AG_OK);
    cr_assert(strstr(ag_graph_error(g), "worker 1 of 2: sentences 1..2 of the batch: ") == ag_graph_error(g), "%s",
              ag_graph_error(g));
    cr_assert(isnan(loss));
    /* too long for the model: seq2seq_loss's message */
    ag_graph_reset(g);
    t.src[2 * S] = 2;
    int tin[B * 7] = {0}, tout[B * 7] = {4, 2};
    cr_assert_eq(ag_seq2seq_team_step(team, g, t.src, t.src_valid, tin, tout, B, S, 7, &loss), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_graph_error(g), "seq2seq: sequence of 7 tokens, the model has positions for 6");
    /* after the failures, a good step gives the plain step's loss: nothing left behind */
    size_t n = ag_store_numel(t.s);
    double *one = calloc(n, sizeof *one), *two = calloc(n, sizeof *two);
    double l1 = loss_and_grads(&t, packed_loss, one, n);
    ag_store_zero_grad(t.s);
    ag_graph_reset(g);
    cr_assert_eq(ag_seq2seq_team_step(team, g, t.src, t.src_valid, t.tgt_in, t.tgt_out, B, S, T, &loss), AG_OK,
                 "%s", ag_graph_error(g));
    grads_of(t.s, two);
    cr_assert(fabs(loss - l1) <= TOL(1e-13, 1e-6) * fabs(l1));
    expect_grads_close(two, one, n, "after the failures");
    free(one), free(two);
    ag_graph_free(g);
    ag_seq2seq_team_free(team);
    tiny_free(&t);
}
