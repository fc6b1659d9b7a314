/* tests/test_sampling.c: the sampler's filters (src/nn/sample.c):
 * temperature, top-k and top-p, the distributions before and after them
 * (ag_sample_dist), the inverse-CDF draw and the checks of the options.
 *
 *   - against PyTorch: tests/reference/sampling.txt (make_sampling_fixture.py,
 *     torch in float64 from float32 logits): random, masked (-inf), tied,
 *     huge and one-token logit rows under 17 (temperature, top_k, top_p)
 *     combinations; every probability within a relative 1e-12 of torch's
 *     and every filtered-out token exactly 0 on both sides, and the token
 *     drawn for fixed u's the same;
 *   - by hand: top-p's smallest set and its ties, top-k's ties, greedy,
 *     the draw's steps, top-p 1 drawing what ag_sample_logits draws, a
 *     message naming each bad value, and ag_gpt_sample's top_p (0: unset).
 *
 * Regenerate the fixture:  /usr/bin/python3 tests/reference/make_sampling_fixture.py */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "attograd.h"

#define REL 1e-12 /* torch sums and exponentiates in another order: ~1e-15 */

static void read_row(FILE *f, const char *tag, int V, double *x, int lineno)
{
    char word[16];
    cr_assert_eq(fscanf(f, "%15s", word), 1, "case at line %d: no %s line", lineno, tag);
    cr_assert_str_eq(word, tag, "case at line %d", lineno);
    for (int v = 0; v < V; v++) cr_assert_eq(fscanf(f, "%lf", &x[v]), 1, "%s %d of the case at line %d", tag, v, lineno);
}

static void near(const double *got, const double *want, int V, const char *what, const char *name)
{
    for (int v = 0; v < V; v++) {
        cr_assert((got[v] == 0) == (want[v] == 0), "%s %s[%d]: %.17g, torch %.17g (kept by one only)", name, what, v,
                  got[v], want[v]);
        cr_assert(fabs(got[v] - want[v]) <= REL * want[v], "%s %s[%d]: %.17g, torch %.17g", name, what, v, got[v],
                  want[v]);
    }
}

Test(sampling, distributions_and_draws_match_pytorch)
{
    FILE *f = fopen("tests/reference/sampling.txt", "r");
    cr_assert_not_null(f, "tests/reference/sampling.txt (run from the repository root)");
    char line[256], name[64];
    int cases = 0, draws = 0, line_no = 1, filtered = 0;
    cr_assert_not_null(fgets(line, sizeof line, f)); /* the header */
    ag_sampling s;
    int V;
    while (fscanf(f, " case %63s %d %lf %d %lf", name, &V, &s.temperature, &s.top_k, &s.top_p) == 5) {
        line_no++;
        double *x = malloc(4 * (size_t)V * sizeof *x), *before = x + V, *after = x + 2 * V, *want = x + 3 * V;
        ag_real *logits = malloc((size_t)V * sizeof *logits);
        cr_assert(x && logits);
        read_row(f, "logits", V, x, line_no);
        for (int v = 0; v < V; v++) logits[v] = (ag_real)x[v]; /* float32 values: exact in both builds */
        char err[128] = "";
        cr_assert_eq(ag_sample_dist(logits, V, &s, before, after, err, sizeof err), AG_OK, "%s: %s", name, err);
        read_row(f, "before", V, want, line_no), near(before, want, V, "before", name);
        read_row(f, "after", V, want, line_no), near(after, want, V, "after", name);
        for (int v = 0; v < V; v++) filtered += want[v] == 0 && before[v] > 0;
        int n;
        cr_assert_eq(fscanf(f, " draws %d", &n), 1, "%s: no draws line", name);
        for (int i = 0; i < n; i++) {
            double u;
            int token;
            cr_assert_eq(fscanf(f, "%lf %d", &u, &token), 2, "%s: draw %d", name, i);
            cr_assert_eq(ag_sample_draw(after, V, u), token, "%s: u = %.17g drew %d, torch %d", name, u,
                         ag_sample_draw(after, V, u), token);
            draws++;
        }
        line_no += 4, cases++;
        free(x), free(logits);
    }
    cr_assert(feof(f) || !ferror(f));
    fclose(f);
    cr_assert_geq(cases, 140, "read %d cases", cases);
    cr_assert_geq(draws, 500, "checked %d draws", draws);
    cr_assert_geq(filtered, 100, "only %d tokens filtered out: the filters were hardly tested", filtered);
}

/* ag_sample_dist of l[V] under (temperature, top_k, top_p): after, which must succeed */
static void dist(const ag_real *l, int V, double temperature, int top_k, double top_p, double *before, double *after)
{
    char err[128] = "";
    ag_sampling s = {temperature, top_k, top_p};
    cr_assert_eq(ag_sample_dist(l, V, &s, before, after, err, sizeof err), AG_OK, "%s", err);
}

/* The float build reads log 4 and log 2 rounded to float (a relative 3e-8):
 * p moves by ~1e-7; the double build's only by rounding. */
#define HAND (sizeof(ag_real) == 4 ? 1e-6 : 1e-15)

static void expect(const double *got, const double *want, int V, const char *what)
{
    for (int v = 0; v < V; v++)
        cr_assert(fabs(got[v] - want[v]) <= HAND, "%s: p[%d] = %.17g, want %.17g", what, v, got[v], want[v]);
}

Test(sampling, top_p_keeps_the_smallest_set_and_every_tie_of_its_last)
{
    double before[4], after[4];
    /* p = (1/2, 1/4, 1/8, 1/8) (to rounding) */
    const ag_real l[4] = {(ag_real)log(4.0), (ag_real)log(2.0), 0, 0};
    dist(l, 4, 1, 0, 0.4, before, after);
    expect(before, (double[]){0.5, 0.25, 0.125, 0.125}, 4, "before: softmax");
    expect(after, (double[]){1, 0, 0, 0}, 4, "top-p 0.4: 1/2 alone reaches 0.4");
    dist(l, 4, 1, 0, 0.7, before, after);
    expect(after, (double[]){2 / 3.0, 1 / 3.0, 0, 0}, 4, "top-p 0.7: 1/2 + 1/4 reach it, renormalised");
    dist(l, 4, 1, 0, 0.8, before, after);
    expect(after, before, 4, "top-p 0.8: above each 1/8 lies 3/4 < 0.8: both kept");
    dist(l, 4, 1, 0, 1, before, after);
    expect(after, before, 4, "top-p 1: all");
    /* three tied tokens: each has nothing strictly above it, so all three stay
     * (HF's sort would keep one of them, which one by the sort's order) */
    const ag_real tie[4] = {1, 1, 0, 1};
    dist(tie, 4, 1, 0, 0.3, before, after);
    expect(after, (double[]){1 / 3.0, 1 / 3.0, 0, 1 / 3.0}, 4, "top-p 0.3 on a three-way tie");
    /* after top-k 2 and temperature 1/2: p ~ (4^2, 2^2) = (0.8, 0.2): 0.75 keeps id 0 only */
    dist(l, 4, 0.5, 2, 0.75, before, after);
    expect(after, (double[]){1, 0, 0, 0}, 4, "temperature, top-k, then top-p");
    dist(l, 4, 0.5, 2, 0.85, before, after);
    expect(after, (double[]){0.8, 0.2, 0, 0}, 4, "0.85 > 0.8: both");
}

Test(sampling, top_k_ties_greedy_and_masked_tokens)
{
    double before[4], after[4];
    const ag_real l[4] = {1, 3, 3, 2};
    dist(l, 4, 1, 1, 1, before, after);
    expect(after, (double[]){0, 0.5, 0.5, 0}, 4, "top-k 1 keeps both tied 3s");
    dist(l, 4, 0, 0, 0.01, before, after);
    expect(after, (double[]){0, 1, 0, 0}, 4, "temperature 0: the first largest, whatever top-p");
    const ag_real masked[4] = {-INFINITY, NAN, 0, INFINITY};
    dist(masked, 4, 1, 0, 1, before, after);
    expect(before, (double[]){0, 0, 1, 0}, 4, "only the finite logit, before");
    expect(after, (double[]){0, 0, 1, 0}, 4, "only the finite logit, after");
    const ag_real none[2] = {-INFINITY, NAN};
    char err[128] = "";
    ag_sampling s = {1, 0, 1};
    cr_assert_eq(ag_sample_dist(none, 2, &s, before, after, err, sizeof err), AG_ERR_NUMERIC);
    cr_assert(strstr(err, "no logit is finite"), "%s", err);
}

Test(sampling, the_draw_is_the_inverse_cdf_in_id_order)
{
    const double w[4] = {0, 1, 0, 3}; /* unnormalised: total 4 */
    cr_assert_eq(ag_sample_draw(w, 4, 0), 1);
    cr_assert_eq(ag_sample_draw(w, 4, 0.2499), 1);
    cr_assert_eq(ag_sample_draw(w, 4, 0.25), 3, "u * total = 1 is not < 1: the next kept token");
    cr_assert_eq(ag_sample_draw(w, 4, 0.9999999), 3);
    cr_assert_eq(ag_sample_draw((double[]){0, 0}, 2, 0.5), -1, "nothing to draw");
}

Test(sampling, top_p_one_draws_what_ag_sample_logits_draws)
{
    enum { V = 37, N = 3000 };
    ag_real l[V];
    double w1[V], w2[2 * V];
    ag_rng a, b, init;
    ag_rng_seed(&init, 5), ag_rng_seed(&a, 9), ag_rng_seed(&b, 9);
    for (int i = 0; i < N; i++) {
        for (int v = 0; v < V; v++) l[v] = (ag_real)(6 * ag_rng_uniform(&init) - 3);
        if (i % 7 == 0) l[i % V] = -INFINITY;
        ag_sampling s = {i % 3 == 0 ? 0.6 : 1.4, i % 4 * 3, 1};
        int x = ag_sample_logits(l, V, s.temperature, s.top_k, &a, w1), y = ag_sample_next(l, V, &s, &b, w2);
        cr_assert_eq(x, y, "draw %d: %d against %d", i, x, y);
    }
    /* top-p 0.7 on (1/2, 1/4, 1/8, 1/8): ids 0 and 1 only, p(0) = 2/3;
     * 20000 draws, 3 standard deviations = 0.01 */
    const ag_real q[4] = {(ag_real)log(4.0), (ag_real)log(2.0), 0, 0};
    ag_sampling s = {1, 0, 0.7};
    int zeros = 0;
    for (int i = 0; i < 20000; i++) {
        int v = ag_sample_next(q, 4, &s, &a, w2);
        cr_assert(v == 0 || v == 1, "top-p 0.7 drew %d", v);
        zeros += v == 0;
    }
    cr_assert(fabs(zeros / 20000.0 - 2 / 3.0) < 0.01, "p(0) = %g, want 2/3", zeros / 20000.0);
}

Test(sampling, a_bad_option_is_named_with_its_value)
{
    const struct {
        ag_sampling s;
        const char *says;
    } bad[] = {
        {{-1, 0, 1}, "temperature -1"},   {{NAN, 0, 1}, "temperature nan"}, {{INFINITY, 0, 1}, "temperature inf"},
        {{1, -2, 1}, "top_k -2"},         {{1, 0, 0}, "top_p 0:"},          {{1, 0, 1.5}, "top_p 1.5"},
        {{1, 0, -0.1}, "top_p -0.1"},     {{1, 0, NAN}, "top_p nan"},
    };
    const ag_real l[2] = {0, 1};
    double before[2], after[2], work[4];
    ag_rng r;
    ag_rng_seed(&r, 1);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char err[128] = "";
        cr_assert_eq(ag_sampling_check(&bad[i].s, err, sizeof err), AG_ERR_ARG, "%s accepted", bad[i].says);
        cr_assert(strstr(err, bad[i].says), "message \"%s\" does not say \"%s\"", err, bad[i].says);
        err[0] = '\0';
        cr_assert_eq(ag_sample_dist(l, 2, &bad[i].s, before, after, err, sizeof err), AG_ERR_ARG);
        cr_assert(strstr(err, bad[i].says), "ag_sample_dist: \"%s\"", err);
        cr_assert_eq(ag_sample_next(l, 2, &bad[i].s, &r, work), -1);
    }
    char err[128] = "";
    cr_assert_eq(ag_sampling_check(NULL, err, sizeof err), AG_ERR_ARG);
    ag_sampling ok = {0, 0, 1};
    cr_assert_eq(ag_sampling_check(&ok, NULL, 0), AG_OK);
    cr_assert_eq(ag_sample_dist(l, 0, &ok, before, after, err, sizeof err), AG_ERR_ARG);
    cr_assert(strstr(err, "empty"), "%s", err);
}

/* ag_gpt_sample: top_p 0 (a zeroed struct) is no top-p; a bad one is named;
 * a top-p that keeps only the most probable token samples greedily. */
Test(sampling, gpt_sample_takes_top_p)
{
    ag_store *s = ag_store_new();
    ag_gpt m;
    ag_gpt_config cfg = {.vocab = 6, .context = 4, .hidden = 8, .heads = 2, .ffn = 8, .layers = 1};
    cr_assert_eq(ag_gpt_init(&m, s, &cfg, 5), AG_OK);
    for (int i = 0; i < ag_store_count(s); i++) ag_init_uniform(ag_store_at(s, i), -1, 1, 70 + (uint64_t)i);
    ag_graph *g = ag_graph_new();
    static const int prompt[2] = {3, 1};
    int a[22], b[22], greedy[22];
    ag_sample_opts o = {.temperature = 1.0, .seed = 11}, one = {.temperature = 1.0, .seed = 11, .top_p = 1};
    cr_assert_eq(ag_gpt_sample(g, &m, prompt, 2, 20, &o, a), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(ag_gpt_sample(g, &m, prompt, 2, 20, &one, b), AG_OK);
    cr_assert_arr_eq(a, b, sizeof a, "top_p 0 (unset) and 1 draw alike");
    const double bad[] = {1.5, -0.5, NAN};
    for (int i = 0; i < 3; i++) {
        ag_sample_opts x = {.temperature = 1.0, .top_p = bad[i]};
        cr_assert_eq(ag_gpt_sample(g, &m, prompt, 2, 3, &x, a), AG_ERR_ARG);
        cr_assert(strstr(ag_graph_error(g), "gpt_sample: top_p"), "%s", ag_graph_error(g));
    }
    ag_sample_opts tiny = {.temperature = 1.0, .seed = 4, .top_p = 1e-9}, zero = {.temperature = 0};
    cr_assert_eq(ag_gpt_sample(g, &m, prompt, 2, 20, &tiny, a), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(ag_gpt_sample(g, &m, prompt, 2, 20, &zero, greedy), AG_OK);
    cr_assert_arr_eq(a, greedy, sizeof a, "top-p 1e-9 keeps the most probable token only");
    ag_graph_free(g);
    ag_gpt_free(&m);
    ag_store_free(s);
}
