/* tests/test_kv_cache_public.c: the public key/value cache (ag_kv_cache)
 * under a decoder written from the public calls only: linear layers,
 * reshape and ag_scaled_dot_product_attention.
 *
 *   - decoding token by token (and in chunks) gives the logits of the
 *     full-sequence causal forward (1e-12 in double, 2e-5 in float: the
 *     step's products run on other shapes, so the sums may round in
 *     another order), for GQA (4 query heads over 2 and 1 key/value heads),
 *     B 1 and B 2, up to 300 positions (past the kernel's 256-key seam);
 *   - the views hold every sequence's rows in order after appends of
 *     several sizes (B > 1 moves rows);
 *   - hostile arguments get AG_ERR_* with a message, the cache unchanged;
 *     so does a k or v that needs a gradient on a graph that records them
 *     (the cache keeps copies, which pass no gradient). */
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define LOGIT_TOL TOL(1e-12, 2e-5)

enum { C = 16, H = 4, D = 4, V = 7, LAYERS = 2 };

/* x = x + attention(x) per layer, logits = head(x); queries H heads of
 * width D, keys and values Hkv heads. */
typedef struct decoder {
    ag_linear_layer q[LAYERS], k[LAYERS], v[LAYERS], o[LAYERS], head;
    int Hkv;
} decoder;

static void decoder_init(decoder *d, ag_store *s, int Hkv)
{
    char name[32];
    d->Hkv = Hkv;
    for (int l = 0; l < LAYERS; l++) {
        snprintf(name, sizeof name, "q%d", l), ag_linear_layer_init(&d->q[l], s, name, C, H * D, 1, 1 + l);
        snprintf(name, sizeof name, "k%d", l), ag_linear_layer_init(&d->k[l], s, name, C, Hkv * D, 1, 11 + l);
        snprintf(name, sizeof name, "v%d", l), ag_linear_layer_init(&d->v[l], s, name, C, Hkv * D, 1, 21 + l);
        snprintf(name, sizeof name, "o%d", l), ag_linear_layer_init(&d->o[l], s, name, H * D, C, 1, 31 + l);
    }
    cr_assert_eq(ag_linear_layer_init(&d->head, s, "head", C, V, 1, 41), AG_OK, "%s", ag_store_error(s));
    /* weights large enough that the attention is far from uniform */
    for (int i = 0; i < ag_store_count(s); i++) ag_init_normal(ag_store_at(s, i), 0, 0.3, 100 + (uint64_t)i);
}

/* x [B, T, C] at positions len .. len + T - 1 -> logits [B, T, V].  With
 * no cache T is the whole sequence (len 0, causal from the top left);
 * with one, the keys and values of the earlier positions come from it. */
static ag_tensor *decoder_forward(ag_graph *g, const decoder *d, ag_tensor *x, ag_kv_cache *cache)
{
    int B = x->shape[0], T = x->shape[1];
    for (int l = 0; l < LAYERS; l++) {
        ag_tensor *q = ag_reshape(g, ag_linear_layer_forward(g, &d->q[l], x), AG_SHAPE(B, T, H, D));
        ag_tensor *k = ag_reshape(g, ag_linear_layer_forward(g, &d->k[l], x), AG_SHAPE(B, T, d->Hkv, D));
        ag_tensor *v = ag_reshape(g, ag_linear_layer_forward(g, &d->v[l], x), AG_SHAPE(B, T, d->Hkv, D));
        ag_sdpa_config cfg = {.causal = AG_CAUSAL_TOP_LEFT, .heads_layout = 1};
        if (cache) {
            cr_assert_eq(ag_kv_cache_append(g, cache, l, k, v, &k, &v), AG_OK, "%s", ag_graph_error(g));
            cfg.causal = AG_CAUSAL_BOTTOM_RIGHT;
        }
        ag_tensor *a = ag_scaled_dot_product_attention(g, q, k, v, &cfg);
        x = ag_add(g, x, ag_linear_layer_forward(g, &d->o[l], ag_reshape(g, a, AG_SHAPE(B, T, H * D))));
    }
    ag_tensor *logits = ag_linear_layer_forward(g, &d->head, x);
    cr_assert_not_null(logits, "%s", ag_graph_error(g));
    return logits;
}

/* Decodes N positions of B sequences in chunks of chunk[i] rows (the
 * last repeated) and checks every chunk's logits against the full forward. */
static void check_decoding(int Hkv, int B, int N, const int *chunk, int nchunk)
{
    ag_store *s = ag_store_new();
    decoder d;
    decoder_init(&d, s, Hkv);
    ag_graph *full = ag_graph_new(), *g = ag_graph_new();
    ag_graph_set_grad(full, 0), ag_graph_set_grad(g, 0);
    ag_tensor *x = ag_tensor_new(full, AG_SHAPE(B, N, C));
    ag_init_normal(x, 0, 1, 7);
    ag_tensor *want = decoder_forward(full, &d, x, NULL);
    ag_kv_cache *cache = ag_kv_cache_new(LAYERS, B, N, Hkv, D);
    cr_assert_not_null(cache);
    ag_real *rows = malloc((size_t)B * N * C * sizeof *rows);
    double *ref = malloc((size_t)B * N * V * sizeof *ref);
    for (int pos = 0, i = 0; pos < N; i++) {
        int T = chunk[i < nchunk ? i : nchunk - 1];
        if (T > N - pos) T = N - pos;
        for (int b = 0; b < B; b++) {
            memcpy(rows + (size_t)b * T * C, x->data + ((size_t)b * N + pos) * C, (size_t)T * C * sizeof *rows);
            for (size_t j = 0; j < (size_t)T * V; j++) ref[b * T * V + j] = want->data[((size_t)b * N + pos) * V + j];
        }
        ag_graph_reset(g);
        ag_tensor *got = decoder_forward(g, &d, ag_tensor_from(g, AG_SHAPE(B, T, C), rows), cache);
        char what[80];
        snprintf(what, sizeof what, "Hkv %d B %d: logits of positions %d .. %d", Hkv, B, pos, pos + T - 1);
        expect_close(got->data, ref, (size_t)B * T * V, LOGIT_TOL, LOGIT_TOL, what);
        pos += T;
        cr_assert_eq(ag_kv_cache_len(cache), pos);
    }
    free(rows), free(ref);
    ag_kv_cache_free(cache);
    ag_graph_free(g), ag_graph_free(full);
    ag_store_free(s);
}

Test(kv_cache_public, gqa_token_by_token_matches_full_forward_b1)
{
    check_decoding(2, 1, 300, (int[]){1}, 1);
    check_decoding(1, 1, 300, (int[]){1}, 1);
}

Test(kv_cache_public, gqa_prompt_then_tokens_matches_full_forward_b2)
{
    check_decoding(2, 2, 300, (int[]){5, 1, 1, 3, 1}, 5);
    check_decoding(1, 2, 300, (int[]){250, 1, 10, 1}, 4); /* a prompt, then across 256 keys */
    check_decoding(4, 2, 40, (int[]){1}, 1);              /* multi-head, no grouping */
}

/* B 2: after appends of 2, 1 and 3 rows the views are [B, len, Hkv, D]
 * with every sequence's rows in order. */
Test(kv_cache_public, views_hold_each_sequence_in_order)
{
    enum { B = 2, HKV = 2, R = HKV * D };
    ag_kv_cache *c = ag_kv_cache_new(1, B, 8, HKV, D);
    ag_graph *g = ag_graph_new();
    ag_real sent[B][8 * R]; /* what each sequence's rows should be */
    int len = 0, sizes[] = {2, 1, 3};
    for (int i = 0; i < 3; i++) {
        int T = sizes[i];
        ag_tensor *k = ag_tensor_new(g, AG_SHAPE(B, T, HKV, D)), *v = ag_tensor_new(g, AG_SHAPE(B, T, HKV, D));
        for (int b = 0; b < B; b++)
            for (int j = 0; j < T * R; j++) {
                ag_real val = (ag_real)(1000 * b + (len * R + j));
                k->data[b * T * R + j] = val, v->data[b * T * R + j] = -val;
                sent[b][len * R + j] = val;
            }
        ag_tensor *ka, *va;
        cr_assert_eq(ag_kv_cache_append(g, c, 0, k, v, &ka, &va), AG_OK, "%s", ag_graph_error(g));
        len += T;
        expect_shape(ka, B, len, HKV, D);
        expect_shape(va, B, len, HKV, D);
        for (int b = 0; b < B; b++)
            for (int j = 0; j < len * R; j++) {
                cr_assert_eq(ka->data[b * len * R + j], sent[b][j], "key %d of sequence %d after %d rows", j, b, len);
                cr_assert_eq(va->data[b * len * R + j], -sent[b][j], "value %d of sequence %d", j, b);
            }
    }
    ag_kv_cache_clear(c);
    cr_assert_eq(ag_kv_cache_len(c), 0);
    ag_graph_free(g);
    ag_kv_cache_free(c);
}

/* one append that must fail with st and a message holding word, leaving
 * the cache's length at len and the outputs NULL */
static void expect_refused(ag_kv_cache *c, int layer, int kshape3, int vT, int T, ag_status st, const char *word,
                           int len)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *k = ag_tensor_new(g, AG_SHAPE(1, T, kshape3, 2)), *v = ag_tensor_new(g, AG_SHAPE(1, vT, 2, 2));
    ag_tensor *ka = k, *va = v;
    cr_assert_eq(ag_kv_cache_append(g, c, layer, k, v, &ka, &va), st, "status %d: %s", ag_graph_status(g),
                 ag_graph_error(g));
    cr_assert(strstr(ag_graph_error(g), word), "message %s, want %s in it", ag_graph_error(g), word);
    cr_assert(!ka && !va, "a refused append leaves no views");
    cr_assert_eq(ag_kv_cache_len(c), len);
    ag_graph_free(g);
}

Test(kv_cache_public, hostile_arguments_refused_with_a_message)
{
    cr_assert_null(ag_kv_cache_new(0, 1, 4, 2, 2));
    cr_assert_null(ag_kv_cache_new(1, 1, -4, 2, 2));
    cr_assert_null(ag_kv_cache_new(1 << 30, 1 << 30, 1 << 30, 1 << 30, 1 << 30), "sizes that overflow");
    ag_kv_cache *c = ag_kv_cache_new(2, 1, 4, 2, 2); /* 2 layers, B 1, S_max 4, Hkv 2, D 2 */
    expect_refused(c, 2, 2, 1, 1, AG_ERR_ARG, "layer 2", 0);
    expect_refused(c, -1, 2, 1, 1, AG_ERR_ARG, "layer -1", 0);
    expect_refused(c, 0, 3, 1, 1, AG_ERR_SHAPE, "[1, T, 2, 2]", 0);  /* Hkv 3 */
    expect_refused(c, 0, 2, 2, 1, AG_ERR_SHAPE, "[1, T, 2, 2]", 0);  /* k and v of other lengths */
    expect_refused(c, 0, 2, 5, 5, AG_ERR_SHAPE, "holds 4", 0);        /* more than S_max */
    ag_graph *g = ag_graph_new();
    ag_tensor *k = ag_tensor_new(g, AG_SHAPE(1, 3, 2, 2)), *ka, *va;
    cr_assert_eq(ag_kv_cache_append(g, c, 0, k, k, &ka, &va), AG_OK, "%s", ag_graph_error(g)); /* fits */
    expect_refused(c, 0, 2, 2, 2, AG_ERR_SHAPE, "clear", 3);          /* 3 + 2 > 4 */
    ag_graph_reset(g);
    k = ag_tensor_new(g, AG_SHAPE(1, 1, 2, 2));
    cr_assert_eq(ag_kv_cache_append(g, NULL, 0, k, k, &ka, &va), AG_ERR_ARG);
    cr_assert(strstr(ag_graph_error(g), "cache is NULL"), "message: %s", ag_graph_error(g));
    ag_graph_reset(g);
    k = ag_tensor_new(g, AG_SHAPE(1, 1, 2, 2));
    cr_assert_neq(ag_kv_cache_append(g, c, 0, k, NULL, &ka, &va), AG_OK);
    cr_assert(ka == NULL && va == NULL && ag_kv_cache_len(c) == 3);
    ag_graph_reset(g);
    k = ag_tensor_new(g, AG_SHAPE(1, 1, 4)); /* [B, T, Hkv * D] not reshaped */
    cr_assert_eq(ag_kv_cache_append(g, c, 0, k, k, &ka, &va), AG_ERR_SHAPE);
    ag_graph_reset(g);
    k = ag_tensor_new(g, AG_SHAPE(2, 1, 2, 2)); /* two sequences for a cache of one */
    cr_assert_eq(ag_kv_cache_append(g, c, 0, k, k, &ka, &va), AG_ERR_SHAPE);
    cr_assert(strstr(ag_graph_error(g), "[2, 1, 2, 2]"), "message: %s", ag_graph_error(g));
    ag_graph_reset(g);
    k = ag_tensor_new(g, AG_SHAPE(1, 1, 2, 2));
    ag_set_requires_grad(k, 1); /* a gradient the copies would drop */
    cr_assert_eq(ag_kv_cache_append(g, c, 0, k, ag_tensor_new(g, AG_SHAPE(1, 1, 2, 2)), &ka, &va), AG_ERR_STATE);
    cr_assert(strstr(ag_graph_error(g), "no-grad"), "message: %s", ag_graph_error(g));
    cr_assert_eq(ag_kv_cache_len(c), 3);
    ag_graph_reset(g);
    ag_graph_set_grad(g, 0); /* decoding: accepted */
    k = ag_tensor_new(g, AG_SHAPE(1, 1, 2, 2));
    ag_set_requires_grad(k, 1);
    cr_assert_eq(ag_kv_cache_append(g, c, 0, k, k, &ka, &va), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(ag_kv_cache_len(c), 4);
    ag_graph_free(g);
    ag_kv_cache_free(c);
}
