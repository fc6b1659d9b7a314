/* tests/test_parity_options.c: the block options, the embedding layer and
 * cross-entropy's reductions against PyTorch's own modules.
 *
 * tests/reference/make_block_fixtures.py ran nn.TransformerEncoderLayer
 * (pre-norm with GELU; post-norm with the tanh GELU; pre-norm under a causal
 * mask: the decoder-only block), nn.TransformerDecoderLayer (pre-norm),
 * token and position embeddings with the output layer tied to the token
 * table, and F.cross_entropy with reduction mean, sum and none, in float64,
 * and stored inputs, parameters (under attograd's names), outputs and the
 * gradients of L = sum(out * w).  Tolerances as the other parity tests:
 * 1e-9 relative in double, 1e-4 in float. */
#include "fixture.h"

#define OPTIONS_FIXTURE "tests/reference/options.safetensors"
#define ABS TOL(1e-12, 1e-5)
#define REL TOL(1e-9, 1e-4)

enum { B = 2, T = 5, C = 8, H = 2, F = 16 };

typedef struct parity {
    ag_safetensors *f;
    ag_store *s;
    ag_graph *g;
} parity;

static parity parity_open(void)
{
    parity p = {open_fixture(OPTIONS_FIXTURE), ag_store_new(), ag_graph_new()};
    cr_assert(p.s && p.g);
    ag_graph_set_training(p.g, 0);
    return p;
}

static void parity_close(parity *p)
{
    ag_graph_free(p->g);
    ag_store_free(p->s);
    ag_safetensors_free(p->f);
}

/* Every parameter of the store from the fixture, by name. */
static void load_store(parity *p)
{
    for (int i = 0; i < ag_store_count(p->s); i++) {
        ag_tensor *t = ag_store_at(p->s, i);
        char err[256] = "";
        cr_assert_eq(ag_safetensors_read_tensor(p->f, t->name, t, err, sizeof err), AG_OK, "%s", err);
    }
}

/* L = sum(out * <case>.w), backward, then out and every gradient: the
 * inputs' and each parameter's, and no gradient of <case> that the test
 * did not compare. */
static void expect_case(parity *p, const char *c, ag_tensor *out, ag_tensor *const *inputs, int n_inputs)
{
    char name[128];
    snprintf(name, sizeof name, "%s.w", c);
    backward_weighted(p->g, out, load_leaf(p->g, p->f, name, 0));
    snprintf(name, sizeof name, "%s.out", c);
    expect_f64(p->f, name, out, out->data, ABS, REL);
    for (int i = 0; i < n_inputs; i++) {
        snprintf(name, sizeof name, "grad.%s", inputs[i]->name);
        expect_f64(p->f, name, inputs[i], inputs[i]->grad, ABS, REL);
    }
    for (int i = 0; i < ag_store_count(p->s); i++) {
        ag_tensor *t = ag_store_at(p->s, i);
        snprintf(name, sizeof name, "grad.%s", t->name);
        expect_f64(p->f, name, t, t->grad, ABS, REL);
    }
    snprintf(name, sizeof name, "grad.%s", c);
    cr_assert_eq(count_stored(p->f, name), n_inputs + ag_store_count(p->s), "gradients under %s.*", name);
}

Test(parity_options, pre_norm_gelu_encoder_block_with_key_padding)
{
    parity p = parity_open();
    ag_encoder_block b;
    ag_block_config cfg = {.pre_norm = 1, .activation = AG_ACT_GELU};
    cr_assert_eq(ag_encoder_block_init_ex(&b, p.s, "pre_gelu", C, H, F, 0, &cfg, 1), AG_OK, "%s", ag_store_error(p.s));
    load_store(&p);
    int valid[B];
    load_ints(p.f, "pre_gelu.valid_lens", valid, B);
    ag_tensor *x = load_leaf(p.g, p.f, "pre_gelu.x", 1);
    ag_tensor *y = ag_encoder_block_forward(p.g, &b, x, ag_padding_mask(p.g, valid, B, 0, T, T), NULL);
    expect_case(&p, "pre_gelu", y, &x, 1);
    parity_close(&p);
}

Test(parity_options, post_norm_tanh_gelu_encoder_block)
{
    parity p = parity_open();
    ag_encoder_block b;
    ag_block_config cfg = {.activation = AG_ACT_GELU_TANH};
    cr_assert_eq(ag_encoder_block_init_ex(&b, p.s, "post_tanh", C, H, F, 0, &cfg, 1), AG_OK);
    load_store(&p);
    ag_tensor *x = load_leaf(p.g, p.f, "post_tanh.x", 1);
    expect_case(&p, "post_tanh", ag_encoder_block_forward(p.g, &b, x, NULL, NULL), &x, 1);
    parity_close(&p);
}

Test(parity_options, decoder_only_block_is_causal_without_a_mask)
{
    parity p = parity_open();
    ag_decoder_only_block b;
    ag_block_config cfg = {.pre_norm = 1, .activation = AG_ACT_GELU};
    cr_assert_eq(ag_decoder_only_block_init(&b, p.s, "causal", C, H, F, 0, &cfg, 1), AG_OK);
    cr_assert_eq(b.attention.causal, 1);
    load_store(&p);
    ag_tensor *x = load_leaf(p.g, p.f, "causal.x", 1);
    ag_tensor *w = NULL;
    ag_tensor *y = ag_decoder_only_block_forward(p.g, &b, x, &w);
    expect_case(&p, "causal", y, &x, 1);
    /* no weight on a key after its query */
    for (int i = 0; i < B * H; i++)
        for (int t = 0; t < T; t++)
            for (int s = t + 1; s < T; s++) cr_assert_eq(w->data[((size_t)i * T + t) * T + s], 0);
    parity_close(&p);
}

Test(parity_options, pre_norm_decoder_block_causal_flag_and_padded_memory)
{
    parity p = parity_open();
    ag_decoder_block b;
    ag_block_config cfg = {.pre_norm = 1, .causal = 1};
    cr_assert_eq(ag_decoder_block_init_ex(&b, p.s, "dec_pre", C, H, F, 0, &cfg, 1), AG_OK);
    load_store(&p);
    int valid[B];
    load_ints(p.f, "dec_pre.valid_lens", valid, B);
    ag_tensor *in[2] = {load_leaf(p.g, p.f, "dec_pre.x", 1), load_leaf(p.g, p.f, "dec_pre.enc", 1)};
    ag_tensor *src_mask = ag_padding_mask(p.g, valid, B, 0, T, 6);
    ag_tensor *y = ag_decoder_block_forward(p.g, &b, in[0], in[1], NULL, src_mask, NULL, NULL);
    expect_case(&p, "dec_pre", y, in, 2);
    parity_close(&p);
}

Test(parity_options, embedding_with_learned_positions_and_tied_output)
{
    parity p = parity_open();
    ag_embedding_layer e;
    cr_assert_eq(ag_embedding_layer_init(&e, p.s, "emb_tied", 7, C, 6, AG_POS_LEARNED, 1), AG_OK);
    load_store(&p);
    int ids[B * T];
    load_ints(p.f, "emb_tied.ids", ids, B * T);
    ag_tensor *x = ag_embedding_layer_forward(p.g, &e, ids, B, T);
    cr_assert_not_null(x, "%s", ag_graph_error(p.g));
    expect_f64(p.f, "emb_tied.x", x, x->data, ABS, REL);
    /* the token table gets both gradients: as the embedding and as the output layer */
    expect_case(&p, "emb_tied", ag_embedding_layer_logits(p.g, &e, x), NULL, 0);
    parity_close(&p);
}

Test(parity_options, embedding_with_sinusoidal_positions)
{
    parity p = parity_open();
    ag_embedding_layer e;
    cr_assert_eq(ag_embedding_layer_init(&e, p.s, "emb_sin", 7, C, 0, AG_POS_SINUSOIDAL, 1), AG_OK);
    cr_assert_null(e.positions);
    load_store(&p);
    int ids[B * T];
    load_ints(p.f, "emb_sin.ids", ids, B * T);
    expect_case(&p, "emb_sin", ag_embedding_layer_forward(p.g, &e, ids, B, T), NULL, 0);
    parity_close(&p);
}

/* F.cross_entropy(ignore_index=0, label_smoothing=0.1, reduction=...) */
static void check_reduction(const char *c, ag_reduction reduction)
{
    parity p = parity_open();
    char name[128];
    int targets[6];
    snprintf(name, sizeof name, "%s.targets", c);
    load_ints(p.f, name, targets, 6);
    snprintf(name, sizeof name, "%s.logits", c);
    ag_tensor *logits = load_leaf(p.g, p.f, name, 1);
    ag_tensor *out = ag_cross_entropy_ex(p.g, logits, targets, 0, 0.1, reduction);
    cr_assert_not_null(out, "%s", ag_graph_error(p.g));
    if (reduction == AG_REDUCTION_NONE) {
        expect_shape(out, 2, 3);
        expect_case(&p, c, out, &logits, 1);
    } else {
        cr_assert_eq(out->ndim, 0);
        cr_assert_eq(ag_backward(p.g, out), AG_OK, "%s", ag_graph_error(p.g));
        snprintf(name, sizeof name, "%s.out", c);
        expect_f64(p.f, name, out, out->data, ABS, REL);
        snprintf(name, sizeof name, "grad.%s", logits->name);
        expect_f64(p.f, name, logits, logits->grad, ABS, REL);
    }
    parity_close(&p);
}

Test(parity_options, cross_entropy_mean) { check_reduction("ce_mean", AG_REDUCTION_MEAN); }
Test(parity_options, cross_entropy_sum) { check_reduction("ce_sum", AG_REDUCTION_SUM); }
Test(parity_options, cross_entropy_none_per_token) { check_reduction("ce_none", AG_REDUCTION_NONE); }
