/* tests/test_infer.c: inference without a tape.
 *
 *   - no-grad mode (ag_graph_set_grad): the same forward values, less
 *     arena, nothing on the tape, backward refused with a message;
 *   - the GPT's key/value cache (ag_gpt_forward_cached, ag_gpt_sample):
 *     cached and uncached decoding give the same logits (1e-5 in float,
 *     1e-12 in double) and the same tokens, for several prompts, up to the
 *     context and past it (the window slides: recomputed, as documented);
 *   - sampling allocates per call, never per token. */
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define LOGIT_TOL TOL(1e-12, 1e-5)

/* A small GPT whose weights are large enough (N(0, 0.3)) that its logits
 * are far from uniform and greedy decoding is not decided by rounding. */
static void make_gpt(ag_gpt *m, ag_store *s, int context, int untied)
{
    ag_gpt_config cfg = {.vocab = 11, .context = context, .hidden = 16, .heads = 2, .ffn = 32, .layers = 2,
                         .activation = AG_ACT_GELU, .untied = untied};
    cr_assert_eq(ag_gpt_init(m, s, &cfg, 7), AG_OK, "%s", ag_store_error(s));
    for (int i = 0; i < ag_store_count(s); i++) ag_init_normal(ag_store_at(s, i), 0, 0.3, 100 + (uint64_t)i);
}

/* ---- no-grad mode ---------------------------------------------------------- */

Test(no_grad, same_values_less_arena_no_tape)
{
    ag_store *s = ag_store_new();
    ag_gpt m;
    make_gpt(&m, s, 8, 0);
    int ids[2 * 8], targets[2 * 8];
    for (int i = 0; i < 16; i++) ids[i] = (3 * i + 1) % 11, targets[i] = (5 * i + 2) % 11;
    ag_graph *g = ag_graph_new();
    ag_graph_set_training(g, 0);
    ag_tensor *logits = ag_gpt_forward(g, &m, ids, 2, 8);
    ag_tensor *loss = ag_cross_entropy(g, logits, targets, -1, 0);
    cr_assert_not_null(loss, "%s", ag_graph_error(g));
    size_t n = logits->size, with_grad = ag_graph_arena_used(g);
    double *want = malloc(n * sizeof *want), want_loss = loss->data[0];
    for (size_t i = 0; i < n; i++) want[i] = logits->data[i];
    cr_assert(ag_graph_node_count(g) > 0 && loss->requires_grad);

    ag_graph_reset(g);
    ag_graph_set_grad(g, 0);
    cr_assert_eq(ag_graph_grad(g), 0);
    logits = ag_gpt_forward(g, &m, ids, 2, 8);
    loss = ag_cross_entropy(g, logits, targets, -1, 0);
    cr_assert_not_null(loss, "%s", ag_graph_error(g));
    size_t without = ag_graph_arena_used(g);
    expect_close(logits->data, want, n, 0, 0, "no-grad logits");
    cr_assert_eq((double)loss->data[0], want_loss, "no-grad loss %g, want %g", (double)loss->data[0], want_loss);
    cr_assert_eq(ag_graph_node_count(g), 0, "no-grad mode put %d nodes on the tape", ag_graph_node_count(g));
    cr_assert_eq(loss->requires_grad, 0);
    cr_assert_lt(without, with_grad, "no-grad arena %zu bytes, with grad %zu", without, with_grad);
    cr_log_info("GPT forward + loss, B 2 T 8: arena %zu bytes with grad, %zu without", with_grad, without);

    cr_assert_eq(ag_backward(g, loss), AG_ERR_STATE);
    cr_assert(strstr(ag_graph_error(g), "no-grad"), "message: %s", ag_graph_error(g));
    ag_graph_set_grad(g, 1); /* back on: backward works again after a reset */
    ag_graph_reset(g);
    loss = ag_gpt_loss(g, &m, ids, targets, 2, 8);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    free(want);
    ag_graph_free(g);
    ag_gpt_free(&m);
    ag_store_free(s);
}

Test(no_grad, backward_from_refused)
{
    ag_graph *g = ag_graph_new();
    ag_graph_set_grad(g, 0);
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2), (ag_real[]){1, 2});
    ag_set_requires_grad(x, 1);
    ag_tensor *y = ag_mul(g, x, x);
    cr_assert_eq(y->data[1], 4);
    cr_assert_eq(ag_backward_from(g, y, (ag_real[]){1, 1}), AG_ERR_STATE);
    cr_assert(strstr(ag_graph_error(g), "backward_from"), "message: %s", ag_graph_error(g));
    ag_graph_free(g);
}

/* ---- the key/value cache ------------------------------------------------- */

/* The uncached logits that follow seq[0 .. len): the window of the newest
 * `context` ids through ag_gpt_forward, its last row, into want [V]. */
static void uncached_row(ag_graph *g, const ag_gpt *m, const int *seq, int len, double *want)
{
    int ctx = m->cfg.context, T = len < ctx ? len : ctx, V = m->cfg.vocab;
    ag_graph_reset(g);
    ag_tensor *l = ag_gpt_forward(g, m, seq + len - T, 1, T);
    cr_assert_not_null(l, "%s", ag_graph_error(g));
    for (int v = 0; v < V; v++) want[v] = l->data[(size_t)(T - 1) * V + v];
}

static int argmax(const double *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Greedy decoding of n_new tokens from prompt, the cache fed one id at a
 * time (the prompt at once), against the uncached forward at every step:
 * the logits agree, so do the tokens. */
static void check_cached_greedy(const ag_gpt *m, const int *prompt, int n_prompt, int n_new)
{
    int V = m->cfg.vocab, ctx = m->cfg.context;
    cr_assert_leq(n_prompt + n_new, ctx + 1, "within the context here");
    ag_graph *g = ag_graph_new(), *ref = ag_graph_new();
    ag_graph_set_training(g, 0), ag_graph_set_training(ref, 0);
    ag_graph_set_grad(g, 0);
    ag_gpt_cache *c = ag_gpt_cache_new(m);
    cr_assert_not_null(c);
    int seq[64];
    double want[64];
    memcpy(seq, prompt, (size_t)n_prompt * sizeof *seq);
    for (int len = n_prompt; len < n_prompt + n_new; len++) {
        ag_graph_reset(g);
        ag_tensor *l = len == n_prompt ? ag_gpt_forward_cached(g, m, c, seq, n_prompt)
                                       : ag_gpt_forward_cached(g, m, c, seq + len - 1, 1);
        cr_assert_not_null(l, "%s", ag_graph_error(g));
        cr_assert_eq(ag_gpt_cache_len(c), len);
        uncached_row(ref, m, seq, len, want);
        char what[64];
        snprintf(what, sizeof what, "cached logits after %d ids", len);
        expect_close(l->data + (size_t)(l->shape[1] - 1) * V, want, (size_t)V, LOGIT_TOL, 0, what);
        seq[len] = argmax(want, V);
    }
    (void)ctx;
    ag_gpt_cache_free(c);
    ag_graph_free(g);
    ag_graph_free(ref);
}

Test(kv_cache, logits_match_uncached_tied_and_untied)
{
    for (int untied = 0; untied <= 1; untied++) {
        ag_store *s = ag_store_new();
        ag_gpt m;
        make_gpt(&m, s, 12, untied);
        check_cached_greedy(&m, (int[]){4}, 1, 12);             /* one id, up to the context */
        check_cached_greedy(&m, (int[]){1, 9, 3}, 3, 9);        /* a prompt, up to the context */
        check_cached_greedy(&m, (int[]){2, 2, 7, 0, 5, 1}, 6, 4);
        check_cached_greedy(&m, (int[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0}, 12, 1); /* a full window */
        ag_gpt_free(&m);
        ag_store_free(s);
    }
}

/* ag_gpt_sample with and without the cache, past the context: the window
 * slides (recomputed) and the tokens stay the same, greedy and drawn. */
Test(kv_cache, sample_matches_uncached_past_the_context)
{
    ag_store *s = ag_store_new();
    ag_gpt m;
    make_gpt(&m, s, 8, 0);
    ag_graph *g = ag_graph_new();
    const int prompts[3][4] = {{3}, {1, 5}, {10, 0, 4, 2}}, lens[3] = {1, 2, 4};
    for (int p = 0; p < 3; p++)
        for (int k = 0; k < 2; k++) {
            ag_sample_opts on = {.temperature = k ? 0.8 : 0, .top_k = k ? 5 : 0, .seed = 42};
            ag_sample_opts off = on;
            off.no_cache = 1;
            int a[40], b[40], n = 40 - lens[p];
            cr_assert_eq(ag_gpt_sample(g, &m, prompts[p], lens[p], n, &on, a), AG_OK, "%s", ag_graph_error(g));
            cr_assert_eq(ag_gpt_sample(g, &m, prompts[p], lens[p], n, &off, b), AG_OK, "%s", ag_graph_error(g));
            for (int i = 0; i < 40; i++)
                cr_assert_eq(a[i], b[i], "prompt %d, %s: token %d is %d cached, %d uncached", p,
                             k ? "drawn" : "greedy", i, a[i], b[i]);
        }
    cr_assert_eq(ag_graph_grad(g), 1, "the sampler restores grad mode");
    ag_graph_free(g);
    ag_gpt_free(&m);
    ag_store_free(s);
}

/* Past the context the cache is refused with a message, and unchanged. */
Test(kv_cache, refuses_past_the_context)
{
    ag_store *s = ag_store_new();
    ag_gpt m;
    make_gpt(&m, s, 4, 0);
    ag_graph *g = ag_graph_new();
    ag_gpt_cache *c = ag_gpt_cache_new(&m);
    cr_assert_not_null(ag_gpt_forward_cached(g, &m, c, (int[]){1, 2, 3}, 3), "%s", ag_graph_error(g));
    ag_graph_reset(g);
    cr_assert_null(ag_gpt_forward_cached(g, &m, c, (int[]){1, 2}, 2));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert(strstr(ag_graph_error(g), "context"), "message: %s", ag_graph_error(g));
    cr_assert_eq(ag_gpt_cache_len(c), 3);
    ag_graph_reset(g);
    cr_assert_null(ag_gpt_forward_cached(g, &m, c, (int[]){11}, 1)); /* an id out of range */
    cr_assert_eq(ag_gpt_cache_len(c), 3);
    ag_gpt_cache_clear(c);
    cr_assert_eq(ag_gpt_cache_len(c), 0);
    /* dropout would make the cached rows differ from any uncached forward */
    m.cfg.dropout = 0.1;
    ag_graph_reset(g);
    ag_graph_set_training(g, 1);
    cr_assert_null(ag_gpt_forward_cached(g, &m, c, (int[]){1}, 1));
    cr_assert_eq(ag_graph_status(g), AG_ERR_STATE);
    cr_assert(strstr(ag_graph_error(g), "eval mode"), "message: %s", ag_graph_error(g));
    cr_assert_eq(ag_gpt_cache_len(c), 0);
    ag_gpt_cache_free(c);
    ag_graph_free(g);
    ag_gpt_free(&m);
    ag_store_free(s);
}

/* Sampling 2 tokens and sampling 60 (past the context of 16) make the same
 * number of allocations on a fresh graph: nothing per token after the
 * first.  A first call warms what the process makes once (the gemm's
 * packing buffers). */
Test(kv_cache, no_allocation_per_token)
{
    ag_store *s = ag_store_new();
    ag_gpt m;
    make_gpt(&m, s, 16, 0);
    ag_sample_opts o = {.temperature = 1, .seed = 3};
    int out[64];
    uint64_t count[2];
    const int n_new[2] = {2, 60};
    ag_graph *warm = ag_graph_new();
    cr_assert_eq(ag_gpt_sample(warm, &m, (int[]){1, 2, 3}, 3, 60, &o, out), AG_OK, "%s", ag_graph_error(warm));
    ag_graph_free(warm);
    for (int k = 0; k < 2; k++) {
        ag_graph *g = ag_graph_new();
        uint64_t before = ag_alloc_count();
        cr_assert_eq(ag_gpt_sample(g, &m, (int[]){1, 2, 3}, 3, n_new[k], &o, out), AG_OK, "%s", ag_graph_error(g));
        count[k] = ag_alloc_count() - before;
        ag_graph_free(g);
    }
    cr_assert_eq(count[1], count[0], "%llu allocations for 60 tokens, %llu for 2", (unsigned long long)count[1],
                 (unsigned long long)count[0]);
    ag_gpt_free(&m);
    ag_store_free(s);
}

/* ---- the translator's greedy decoding -------------------------------------- */

enum { S2S_B = 3, S2S_S = 5, S2S_L = 9, S2S_BOS = 1, S2S_EOS = 2 };

/* variant 0: post-norm; 1: pre-norm blocks without the final norms; 2:
 * the config's pre_norm (final norms too); 3: qk_norm; 4: both */
static void make_seq2seq(ag_seq2seq *m, ag_store *s, int variant)
{
    ag_seq2seq_config cfg = {.src_vocab = 10, .tgt_vocab = 9, .hidden = 16, .heads = 2, .ffn = 24, .layers = 2,
                             .max_len = S2S_L, .dropout = 0.1, .pre_norm = variant == 2 || variant == 4,
                             .qk_norm = variant >= 3};
    cr_assert_eq(ag_seq2seq_init(m, s, &cfg, 5), AG_OK, "%s", ag_store_error(s));
    for (int i = 0; i < ag_store_count(s); i++) ag_init_normal(ag_store_at(s, i), 0, 0.4, 200 + (uint64_t)i);
    if (variant == 1)
        for (int i = 0; i < cfg.layers; i++) m->enc[i].cfg.pre_norm = m->dec[i].cfg.pre_norm = 1;
}

/* Greedy decoding without a cache: the whole prefix through
 * ag_seq2seq_decode at every step, the argmax of its last row. */
static void greedy_uncached(const ag_seq2seq *m, const int *src, const int *valid, int *out, int *out_len)
{
    ag_graph *g = ag_graph_new();
    ag_graph_set_training(g, 0);
    ag_tensor *mask = NULL, *enc = ag_seq2seq_encode(g, m, src, valid, S2S_B, S2S_S, &mask);
    cr_assert_not_null(enc, "%s", ag_graph_error(g));
    int prefix[S2S_B][S2S_L] = {{0}}, done[S2S_B] = {0}, V = m->cfg.tgt_vocab;
    for (int b = 0; b < S2S_B; b++) prefix[b][0] = S2S_BOS, out_len[b] = 0;
    for (int t = 0; t < S2S_L; t++) {
        ag_tensor *logits = ag_seq2seq_decode(g, m, enc, mask, &prefix[0][0] /* [B, L], first t + 1 read */, S2S_B,
                                              S2S_L);
        cr_assert_not_null(logits, "%s", ag_graph_error(g));
        for (int b = 0; b < S2S_B; b++) {
            if (done[b]) continue;
            const ag_real *row = logits->data + ((size_t)b * S2S_L + t) * V;
            int best = 0;
            for (int v = 1; v < V; v++)
                if (row[v] > row[best]) best = v;
            if (best == S2S_EOS) {
                done[b] = 1;
                continue;
            }
            out[b * S2S_L + out_len[b]++] = best;
            if (t + 1 < S2S_L) prefix[b][t + 1] = best;
        }
    }
    ag_graph_free(g);
}

Test(kv_cache, seq2seq_greedy_matches_uncached_post_and_pre_norm)
{
    const int src[S2S_B * S2S_S] = {4, 5, 6, 7, 2, 9, 8, 2, 0, 0, 3, 2, 0, 0, 0}, valid[S2S_B] = {5, 3, 2};
    int decoded = 0;
    for (int pre = 0; pre <= 4; pre++) {
        ag_store *s = ag_store_new();
        ag_seq2seq m;
        make_seq2seq(&m, s, pre);
        int want[S2S_B * S2S_L] = {0}, want_len[S2S_B], got[S2S_B * S2S_L] = {0}, got_len[S2S_B];
        greedy_uncached(&m, src, valid, want, want_len);
        ag_graph *g = ag_graph_new();
        cr_assert_eq(ag_seq2seq_greedy(g, &m, src, valid, S2S_B, S2S_S, S2S_BOS, S2S_EOS, S2S_L, got, got_len), AG_OK,
                     "%s", ag_graph_error(g));
        cr_assert_eq(ag_graph_training(g), 1, "training mode restored");
        cr_assert_eq(ag_graph_grad(g), 1, "grad mode restored");
        for (int b = 0; b < S2S_B; b++) {
            cr_assert_eq(got_len[b], want_len[b], "variant %d: sentence %d: %d ids, want %d", pre, b, got_len[b],
                         want_len[b]);
            for (int i = 0; i < want_len[b]; i++)
                cr_assert_eq(got[b * S2S_L + i], want[b * S2S_L + i], "sentence %d id %d", b, i);
            decoded += want_len[b];
        }
        ag_graph_free(g);
        ag_seq2seq_free(&m);
        ag_store_free(s);
    }
    cr_assert_gt(decoded, 15, "the models decoded only %d ids: the test compares too little", decoded);
}

/* Greedy decoding of 2 steps and of 9 allocate alike: nothing per step. */
Test(kv_cache, seq2seq_greedy_no_allocation_per_step)
{
    const int src[S2S_B * S2S_S] = {4, 5, 6, 7, 2, 9, 8, 2, 0, 0, 3, 2, 0, 0, 0}, valid[S2S_B] = {5, 3, 2};
    ag_store *s = ag_store_new();
    ag_seq2seq m;
    make_seq2seq(&m, s, 0);
    int out[S2S_B * S2S_L], len[S2S_B];
    uint64_t count[3];
    const int steps[3] = {S2S_L, 2, S2S_L};
    for (int k = 0; k < 3; k++) { /* k = 0 warms the gemm's packing buffers */
        ag_graph *g = ag_graph_new();
        uint64_t before = ag_alloc_count();
        cr_assert_eq(ag_seq2seq_greedy(g, &m, src, valid, S2S_B, S2S_S, S2S_BOS, 999, steps[k], out, len), AG_OK,
                     "%s", ag_graph_error(g));
        count[k] = ag_alloc_count() - before;
        ag_graph_free(g);
    }
    cr_assert_eq(len[0], S2S_L, "no <eos> (999): every step ran");
    cr_assert_eq(count[2], count[1], "%llu allocations for %d steps, %llu for 2", (unsigned long long)count[2], S2S_L,
                 (unsigned long long)count[1]);
    ag_seq2seq_free(&m);
    ag_store_free(s);
}
