/* tests/bench/kv_decode.c: a decoder a user writes from the public calls
 * (layer norm, linear layers, ag_scaled_dot_product_attention and an
 * ag_kv_cache) against ag_gpt's own cached sampling, on the same weights.
 *
 * Both decode greedily from the same prompt, one token per step after
 * the prompt; the user's loop reads the ag_gpt's parameters through its
 * public fields.  Prints whether the tokens agree, the seconds per run
 * of each (the minimum over rounds that alternate the two: the machine
 * may be busy) and their ratio, user / ag_gpt.
 *
 *   kv_decode [--rounds N] [--new N] [--smoke]   (make bench-kv) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef CLOCK_PROCESS_CPUTIME_ID
#define CLOCK_PROCESS_CPUTIME_ID CLOCK_MONOTONIC
#endif

#include "attograd.h"

/* seconds on the wall clock, and of this process's CPU time (one thread:
 * the time it ran, not the time it waited for a busy machine's core) */
static double now(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* one pre-norm block on x [1, T, C] at positions pos ..:
 *   x = x + W_o sdpa(W_q h, cache ++ W_k h, cache ++ W_v h), h = norm1(x)
 *   x = x + ffn(norm2(x)) */
static ag_tensor *user_block(ag_graph *g, const ag_decoder_only_block *b, ag_kv_cache *cache, int l, ag_tensor *x,
                             int H)
{
    const ag_mha_layer *m = &b->attention;
    int T = x->shape[1], C = m->C, D = C / H;
    ag_tensor *h = ag_layer_norm_layer_forward(g, &b->norm1, x);
    ag_tensor *q = ag_reshape(g, ag_linear_layer_forward(g, &m->w_q, h), AG_SHAPE(1, T, H, D));
    ag_tensor *k = ag_reshape(g, ag_linear_layer_forward(g, &m->w_k, h), AG_SHAPE(1, T, H, D));
    ag_tensor *v = ag_reshape(g, ag_linear_layer_forward(g, &m->w_v, h), AG_SHAPE(1, T, H, D));
    if (ag_kv_cache_append(g, cache, l, k, v, &k, &v) != AG_OK) return NULL;
    ag_sdpa_config cfg = {.causal = AG_CAUSAL_BOTTOM_RIGHT, .heads_layout = 1};
    ag_tensor *a = ag_scaled_dot_product_attention(g, q, k, v, &cfg);
    x = ag_add(g, x, ag_linear_layer_forward(g, &m->w_o, ag_reshape(g, a, AG_SHAPE(1, T, C))));
    return ag_add(g, x, ag_ffn_layer_forward(g, &b->ffn, ag_layer_norm_layer_forward(g, &b->norm2, x)));
}

/* ids [T] at positions pos .. -> the last position's logits [1, 1, V] */
static ag_tensor *user_step(ag_graph *g, const ag_gpt *m, ag_kv_cache *cache, const int *ids, int T)
{
    int pos = ag_kv_cache_len(cache);
    ag_tensor *x = ag_embedding(g, m->embedding.tokens, ids, AG_SHAPE(1, T));
    x = ag_add(g, x, ag_slice(g, m->embedding.positions, 0, pos, T));
    for (int l = 0; l < m->cfg.layers && x; l++) x = user_block(g, &m->blocks[l], cache, l, x, m->cfg.heads);
    if (!x) return NULL;
    x = ag_layer_norm_layer_forward(g, &m->norm, ag_slice(g, x, 1, T - 1, 1));
    return m->cfg.untied ? ag_linear_layer_forward(g, &m->head, x) : ag_embedding_layer_logits(g, &m->embedding, x);
}

static int argmax(const ag_real *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* greedy decoding with the user's loop: out [n_prompt + n_new] */
static ag_status user_sample(ag_graph *g, const ag_gpt *m, ag_kv_cache *cache, const int *prompt, int n_prompt,
                             int n_new, int *out)
{
    ag_graph_set_training(g, 0);
    ag_graph_set_grad(g, 0);
    ag_kv_cache_clear(cache);
    memcpy(out, prompt, (size_t)n_prompt * sizeof *out);
    for (int len = n_prompt; len < n_prompt + n_new; len++) {
        ag_graph_reset(g);
        int first = ag_kv_cache_len(cache);
        ag_tensor *logits = user_step(g, m, cache, out + first, len - first);
        if (!logits) return ag_graph_status(g);
        out[len] = argmax(logits->data, m->cfg.vocab);
    }
    return AG_OK;
}

int main(int argc, char **argv)
{
    int rounds = 5, n_new = 480, smoke = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--new") && i + 1 < argc) n_new = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--smoke")) smoke = 1;
        else {
            fprintf(stderr, "usage: kv_decode [--rounds N] [--new N] [--smoke]\n");
            return 2;
        }
    }
    ag_gpt_config cfg = {.vocab = 512, .context = 512, .hidden = 256, .heads = 4, .ffn = 1024, .layers = 4,
                         .activation = AG_ACT_GELU};
    if (smoke) cfg.context = 64, cfg.hidden = 32, cfg.ffn = 64, cfg.layers = 2, n_new = 40, rounds = 2;
    if (rounds < 1 || n_new < 1 || n_new + 16 > cfg.context) {
        fprintf(stderr, "kv_decode: --rounds >= 1 and --new in 1 .. %d\n", cfg.context - 16);
        return 2;
    }
    ag_store *s = ag_store_new();
    ag_gpt m;
    if (ag_gpt_init(&m, s, &cfg, 1) != AG_OK) {
        fprintf(stderr, "kv_decode: %s\n", ag_store_error(s));
        return 1;
    }
    int prompt[16], n = 16 + n_new;
    for (int i = 0; i < 16; i++) prompt[i] = (37 * i + 5) % cfg.vocab;
    int *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    ag_graph *g = ag_graph_new();
    ag_kv_cache *cache = ag_kv_cache_new(cfg.layers, 1, cfg.context, cfg.heads, cfg.hidden / cfg.heads);
    if (!a || !b || !g || !cache) {
        fprintf(stderr, "kv_decode: out of memory\n");
        return 1;
    }
    /* [clock][0: ag_gpt, 1: user]: the minimum over the rounds */
    double best[2][2] = {{1e30, 1e30}, {1e30, 1e30}};
    const clockid_t clocks[2] = {CLOCK_MONOTONIC, CLOCK_PROCESS_CPUTIME_ID};
    ag_sample_opts greedy = {0};
    for (int r = 0; r < rounds; r++) {
        double t[3][2];
        for (int c = 0; c < 2; c++) t[0][c] = now(clocks[c]);
        if (ag_gpt_sample(g, &m, prompt, 16, n_new, &greedy, a) != AG_OK) break;
        for (int c = 0; c < 2; c++) t[1][c] = now(clocks[c]);
        if (user_sample(g, &m, cache, prompt, 16, n_new, b) != AG_OK) break;
        for (int c = 0; c < 2; c++) t[2][c] = now(clocks[c]);
        for (int c = 0; c < 2; c++)
            for (int k = 0; k < 2; k++)
                if (t[k + 1][c] - t[k][c] < best[c][k]) best[c][k] = t[k + 1][c] - t[k][c];
    }
    if (ag_graph_status(g) != AG_OK) {
        fprintf(stderr, "kv_decode: %s\n", ag_graph_error(g));
        return 1;
    }
    int same = !memcmp(a, b, (size_t)n * sizeof *a);
    printf("GPT V %d C %d H %d L %d, prompt 16, %d new tokens greedy, %d threads, min of %d alternating rounds\n",
           cfg.vocab, cfg.hidden, cfg.heads, cfg.layers, n_new, ag_get_threads(), rounds);
    printf("same tokens: %s\n", same ? "yes" : "NO");
    for (int c = 0; c < 2; c++)
        printf("%s: ag_gpt_sample %.4f s, user decoder %.4f s, ratio user / ag_gpt %.3f\n",
               c ? "CPU time " : "wall time", best[c][0], best[c][1], best[c][1] / best[c][0]);
    ag_kv_cache_free(cache);
    ag_graph_free(g);
    ag_gpt_free(&m);
    ag_store_free(s);
    free(a), free(b);
    return same ? 0 : 1;
}
