/* tests/test_parity_attention.c: attention layers and Transformer blocks
 * against PyTorch.
 *
 * tests/reference/make_fixtures.py built the same modules in PyTorch
 * (float64), stored their parameters under attograd's names, their inputs,
 * outputs, attention weights and the gradients of L = sum(out * w) for a fixed
 * random w (see tests/reference/README.md).  Each test makes the attograd
 * layer under the same prefix, overwrites its initial parameters with the
 * stored ones, runs it in eval mode and compares everything: outputs and
 * weights, the gradient of every input and of every parameter.  Tolerance:
 * 1e-9 relative in the double build, 1e-4 in the float build. */
#include "fixture.h"

#define ATTN_FIXTURE "tests/reference/attention.safetensors"
#define BLOCKS_FIXTURE "tests/reference/blocks.safetensors"
#define D2L_FIXTURE "tests/reference/d2l.safetensors"
#define ABS TOL(1e-12, 1e-5)
#define REL TOL(1e-9, 1e-4)

/* ---- reading the fixture ------------------------------------------------- */

/* Every parameter of s from the fixture, by its name (the layers' seeded
 * initial values are overwritten). */
static void load_params(const ag_safetensors *f, ag_store *s)
{
    cr_assert_gt(ag_store_count(s), 0);
    for (int i = 0; i < ag_store_count(s); i++) {
        ag_tensor *p = ag_store_at(s, i);
        char err[256] = "";
        cr_assert_eq(ag_safetensors_read_tensor(f, p->name, p, err, sizeof err), AG_OK, "%s", err);
    }
}

/* got (t's data or gradient) matches stored tensor `name`. */
static void expect_stored(const ag_safetensors *f, const char *name, const ag_tensor *t, const ag_real *got)
{
    expect_f64(f, name, t, got, ABS, REL);
}

/* An input leaf and its fixture name, for the gradient comparison. */
typedef struct named_input {
    const char *name;
    ag_tensor *t;
} named_input;

/* grad.<input> for each input and grad.<param> for each parameter of s;
 * every gradient the fixture stores under grad.<prefix>. must be one of
 * them (so a parameter PyTorch has and attograd lacks is caught). */
static void expect_grads(const ag_safetensors *f, const ag_store *s, const char *prefix,
                         const named_input *inputs, int n_inputs)
{
    char name[128];
    for (int i = 0; i < n_inputs; i++) {
        snprintf(name, sizeof name, "grad.%s", inputs[i].name);
        expect_stored(f, name, inputs[i].t, inputs[i].t->grad);
    }
    for (int i = 0; i < ag_store_count(s); i++) {
        ag_tensor *p = ag_store_at(s, i);
        snprintf(name, sizeof name, "grad.%s", p->name);
        expect_stored(f, name, p, p->grad);
    }
    snprintf(name, sizeof name, "grad.%s", prefix);
    int checked = count_stored(f, name);
    cr_assert_eq(checked, n_inputs + ag_store_count(s),
                 "the fixture has %d gradients under %s.*, the test compared %d", checked, name,
                 n_inputs + ag_store_count(s));
}

static ag_graph *eval_graph(void)
{
    ag_graph *g = ag_graph_new();
    cr_assert_not_null(g);
    ag_graph_set_training(g, 0);
    return g;
}

/* ---- (a) the tutorial's multi-head self-attention ---------------------------- */

/* out = LayerNorm(x + W_o(attention(x))), d_model 64, 8 heads, masked
 * scores -1e9 (the tutorial's), with the mask stored as <prefix>.mask or
 * none; on the fast path or the textbook one (ag_mha_layer.textbook). */
static void check_tutorial_mhsa(const char *prefix, int masked, int textbook)
{
    char name[64];
    ag_safetensors *f = open_fixture(ATTN_FIXTURE);
    ag_store *s = ag_store_new();
    ag_mha_layer m;
    ag_layer_norm_layer n;
    cr_assert_eq(ag_mha_layer_init(&m, s, prefix, 64, 8, 1, 0.0, 1), AG_OK, "%s", ag_store_error(s));
    m.textbook = textbook;
    snprintf(name, sizeof name, "%s.norm", prefix);
    cr_assert_eq(ag_layer_norm_layer_init(&n, s, name, 64), AG_OK, "%s", ag_store_error(s));
    load_params(f, s);

    ag_graph *g = eval_graph();
    snprintf(name, sizeof name, "%s.x", prefix);
    ag_tensor *x = load_leaf(g, f, name, 1);
    ag_tensor *mask = NULL;
    if (masked) {
        snprintf(name, sizeof name, "%s.mask", prefix);
        mask = load_leaf(g, f, name, 0); /* [2, 1, 4, 4] */
    }
    snprintf(name, sizeof name, "%s.w", prefix);
    ag_tensor *w = load_leaf(g, f, name, 0);
    ag_tensor *attn = NULL;
    ag_tensor *y = ag_add_norm(g, &n, x, ag_mha_layer_forward(g, &m, x, x, mask, -1e9, &attn), 0.0);
    backward_weighted(g, y, w);

    snprintf(name, sizeof name, "%s.out", prefix);
    expect_stored(f, name, y, y->data);
    snprintf(name, sizeof name, "%s.attn", prefix);
    expect_stored(f, name, attn, attn->data);
    snprintf(name, sizeof name, "%s.x", prefix);
    expect_grads(f, s, prefix, (named_input[]){{name, x}}, 1);
    ag_graph_free(g);
    ag_store_free(s);
    ag_safetensors_free(f);
}

Test(parity_attn, tutorial_mhsa_without_mask)
{
    check_tutorial_mhsa("mhsa", 0, 0);
}

Test(parity_attn, tutorial_mhsa_with_mask)
{
    check_tutorial_mhsa("mhsa_masked", 1, 0);
}

Test(parity_attn, tutorial_mhsa_textbook_path)
{
    check_tutorial_mhsa("mhsa", 0, 1);
    check_tutorial_mhsa("mhsa_masked", 1, 1);
}

/* ---- (b) causal self-attention ---------------------------------------------- */

Test(parity_attn, causal_self_attention)
{
    ag_safetensors *f = open_fixture(ATTN_FIXTURE);
    ag_store *s = ag_store_new();
    ag_mha_layer m;
    cr_assert_eq(ag_mha_layer_init(&m, s, "causal", 16, 4, 1, 0.0, 1), AG_OK, "%s", ag_store_error(s));
    load_params(f, s);

    ag_graph *g = eval_graph();
    ag_tensor *x = load_leaf(g, f, "causal.x", 1); /* [2, 5, 16] */
    ag_tensor *w = load_leaf(g, f, "causal.w", 0);
    ag_tensor *attn = NULL;
    ag_tensor *y = ag_mha_layer_forward(g, &m, x, x, ag_causal_mask(g, 5, 5), AG_MASK_NEG_INF, &attn);
    backward_weighted(g, y, w);

    expect_stored(f, "causal.out", y, y->data);
    expect_stored(f, "causal.attn", attn, attn->data);
    /* the future is invisible: every weight above the diagonal is exactly 0 */
    for (size_t i = 0; i < attn->size; i++) {
        int t = (int)(i / 5 % 5), k = (int)(i % 5);
        if (k > t) cr_assert_eq((double)attn->data[i], 0.0, "weight of key %d for query %d", k, t);
    }
    expect_grads(f, s, "causal", (named_input[]){{"causal.x", x}}, 1);
    ag_graph_free(g);
    ag_store_free(s);
    ag_safetensors_free(f);
}

/* ---- (c) key padding from valid lengths (d2l) ---------------------------------- */

/* d2l's MultiHeadAttention (with biases), C 12, H 3, x [3, 4, 12].  d2l
 * fills masked scores with -1e6; -inf must give the same result, since no
 * row is fully masked.  per_query: valid_lens is [B, T] instead of [B]. */
static void check_padding(const char *prefix, int per_query)
{
    enum { B = 3, T = 4, C = 12, H = 3 };
    const double fills[2] = {-1e6, AG_MASK_NEG_INF};
    char name[64];
    int valid_lens[B * T];
    ag_safetensors *f = open_fixture(ATTN_FIXTURE);
    ag_store *s = ag_store_new();
    ag_mha_layer m;
    cr_assert_eq(ag_mha_layer_init(&m, s, prefix, C, H, 1, 0.0, 1), AG_OK, "%s", ag_store_error(s));
    load_params(f, s);
    snprintf(name, sizeof name, "%s.valid_lens", prefix);
    load_ints(f, name, valid_lens, per_query ? B * T : B);

    ag_graph *g = eval_graph();
    for (int k = 0; k < 2; k++) {
        ag_graph_reset(g);
        ag_store_zero_grad(s);
        snprintf(name, sizeof name, "%s.x", prefix);
        ag_tensor *x = load_leaf(g, f, name, 1);
        snprintf(name, sizeof name, "%s.w", prefix);
        ag_tensor *w = load_leaf(g, f, name, 0);
        ag_tensor *mask = ag_padding_mask(g, valid_lens, B, per_query, T, T);
        ag_tensor *attn = NULL;
        ag_tensor *y = ag_mha_layer_forward(g, &m, x, x, mask, fills[k], &attn);
        backward_weighted(g, y, w);

        snprintf(name, sizeof name, "%s.out", prefix);
        expect_stored(f, name, y, y->data);
        snprintf(name, sizeof name, "%s.attn", prefix);
        expect_stored(f, name, attn, attn->data);
        snprintf(name, sizeof name, "%s.x", prefix);
        expect_grads(f, s, prefix, (named_input[]){{name, x}}, 1);
    }
    ag_graph_free(g);
    ag_store_free(s);
    ag_safetensors_free(f);
}

Test(parity_attn, key_padding_from_valid_lengths)
{
    check_padding("pad", 0); /* valid_lens [4, 1, 2]: one batch row sees one key */
}

Test(parity_attn, key_padding_from_valid_lengths_per_query)
{
    check_padding("pad2d", 1);
}

/* ---- (d) cross-attention ------------------------------------------------------ */

Test(parity_attn, cross_attention_with_key_padding)
{
    int valid_lens[2];
    ag_safetensors *f = open_fixture(ATTN_FIXTURE);
    ag_store *s = ag_store_new();
    ag_mha_layer m;
    cr_assert_eq(ag_mha_layer_init(&m, s, "cross", 16, 4, 1, 0.0, 1), AG_OK, "%s", ag_store_error(s));
    load_params(f, s);
    load_ints(f, "cross.valid_lens", valid_lens, 2);

    ag_graph *g = eval_graph();
    ag_tensor *x_q = load_leaf(g, f, "cross.x_q", 1);   /* [2, 3, 16] */
    ag_tensor *x_kv = load_leaf(g, f, "cross.x_kv", 1); /* [2, 5, 16] */
    ag_tensor *w = load_leaf(g, f, "cross.w", 0);
    ag_tensor *mask = ag_padding_mask(g, valid_lens, 2, 0, 3, 5); /* [2, 1, 1, 5] */
    ag_tensor *attn = NULL;
    ag_tensor *y = ag_mha_layer_forward(g, &m, x_q, x_kv, mask, AG_MASK_NEG_INF, &attn);
    expect_shape(y, 2, 3, 16);
    backward_weighted(g, y, w);

    expect_stored(f, "cross.out", y, y->data);
    expect_stored(f, "cross.attn", attn, attn->data); /* [2, 4, 3, 5] */
    expect_grads(f, s, "cross", (named_input[]){{"cross.x_q", x_q}, {"cross.x_kv", x_kv}}, 2);
    ag_graph_free(g);
    ag_store_free(s);
    ag_safetensors_free(f);
}

/* ---- (e), (f) one encoder block, one decoder block ------------------------------ */

Test(parity_attn, encoder_block)
{
    int valid_lens[2];
    ag_safetensors *f = open_fixture(BLOCKS_FIXTURE);
    ag_store *s = ag_store_new();
    ag_encoder_block b;
    cr_assert_eq(ag_encoder_block_init(&b, s, "enc", 8, 2, 16, 0.0, 1), AG_OK, "%s", ag_store_error(s));
    load_params(f, s);
    load_ints(f, "enc.valid_lens", valid_lens, 2);

    ag_graph *g = eval_graph();
    ag_tensor *x = load_leaf(g, f, "enc.x", 1); /* [2, 5, 8] */
    ag_tensor *w = load_leaf(g, f, "enc.w", 0);
    ag_tensor *attn = NULL;
    ag_tensor *y = ag_encoder_block_forward(g, &b, x, ag_padding_mask(g, valid_lens, 2, 0, 5, 5), &attn);
    backward_weighted(g, y, w);

    expect_stored(f, "enc.out", y, y->data);
    expect_stored(f, "enc.attn", attn, attn->data);
    expect_grads(f, s, "enc", (named_input[]){{"enc.x", x}}, 1);
    ag_graph_free(g);
    ag_store_free(s);
    ag_safetensors_free(f);
}

Test(parity_attn, decoder_block)
{
    int valid_lens[2];
    ag_safetensors *f = open_fixture(BLOCKS_FIXTURE);
    ag_store *s = ag_store_new();
    ag_decoder_block b;
    cr_assert_eq(ag_decoder_block_init(&b, s, "dec", 8, 2, 16, 0.0, 1), AG_OK, "%s", ag_store_error(s));
    load_params(f, s);
    load_ints(f, "dec.valid_lens", valid_lens, 2);

    ag_graph *g = eval_graph();
    ag_tensor *x = load_leaf(g, f, "dec.x", 1);     /* [2, 4, 8] */
    ag_tensor *enc = load_leaf(g, f, "dec.enc", 1); /* [2, 5, 8] */
    ag_tensor *w = load_leaf(g, f, "dec.w", 0);
    ag_tensor *self_w = NULL, *cross_w = NULL;
    ag_tensor *y = ag_decoder_block_forward(g, &b, x, enc, ag_causal_mask(g, 4, 4),
                                            ag_padding_mask(g, valid_lens, 2, 0, 4, 5), &self_w, &cross_w);
    backward_weighted(g, y, w);

    expect_stored(f, "dec.out", y, y->data);
    expect_stored(f, "dec.self_attn", self_w, self_w->data);
    expect_stored(f, "dec.cross_attn", cross_w, cross_w->data);
    expect_grads(f, s, "dec", (named_input[]){{"dec.x", x}, {"dec.enc", enc}}, 2);
    ag_graph_free(g);
    ag_store_free(s);
    ag_safetensors_free(f);
}

/* ---- 3. d2l's example ----------------------------------------------------------- */

/* MultiHeadAttention(num_hiddens 100, num_heads 5, dropout 0.5, bias=False) in
 * eval mode, valid_lens [3, 2], masked scores -1e6 as d2l's masked_softmax. */
static void d2l_module(ag_safetensors *f, ag_store *s, ag_mha_layer *m)
{
    cr_assert_eq(ag_mha_layer_init(m, s, "d2l", 100, 5, 0, 0.5, 1), AG_OK, "%s", ag_store_error(s));
    cr_assert_eq(ag_store_count(s), 4, "bias=False: four weights and nothing else");
    load_params(f, s);
}

Test(parity_attn, d2l_example_all_ones)
{
    int valid_lens[2];
    ag_safetensors *f = open_fixture(D2L_FIXTURE);
    ag_store *s = ag_store_new();
    ag_mha_layer m;
    d2l_module(f, s, &m);
    load_ints(f, "d2l.valid_lens", valid_lens, 2);

    ag_graph *g = eval_graph();
    ag_tensor *x_q = load_leaf(g, f, "d2l.ones.x_q", 0);   /* ones [2, 4, 100] */
    ag_tensor *x_kv = load_leaf(g, f, "d2l.ones.x_kv", 0); /* ones [2, 6, 100] */
    ag_tensor *mask = ag_padding_mask(g, valid_lens, 2, 0, 4, 6);
    ag_tensor *y = ag_mha_layer_forward(g, &m, x_q, x_kv, mask, -1e6, NULL);
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    expect_shape(y, 2, 4, 100);
    expect_stored(f, "d2l.ones.out", y, y->data);
    ag_graph_free(g);
    ag_store_free(s);
    ag_safetensors_free(f);
}

static void check_d2l_random(int textbook)
{
    int valid_lens[2];
    ag_safetensors *f = open_fixture(D2L_FIXTURE);
    ag_store *s = ag_store_new();
    ag_mha_layer m;
    d2l_module(f, s, &m);
    m.textbook = textbook;
    load_ints(f, "d2l.valid_lens", valid_lens, 2);

    ag_graph *g = eval_graph();
    ag_tensor *x_q = load_leaf(g, f, "d2l.rand.x_q", 1);   /* [2, 4, 100] */
    ag_tensor *x_kv = load_leaf(g, f, "d2l.rand.x_kv", 1); /* keys = values [2, 6, 100] */
    ag_tensor *w = load_leaf(g, f, "d2l.rand.w", 0);
    ag_tensor *attn = NULL;
    ag_tensor *y = ag_mha_layer_forward(g, &m, x_q, x_kv, ag_padding_mask(g, valid_lens, 2, 0, 4, 6), -1e6, &attn);
    backward_weighted(g, y, w);

    expect_stored(f, "d2l.rand.out", y, y->data);
    expect_stored(f, "d2l.rand.attn", attn, attn->data);
    expect_grads(f, s, "d2l", (named_input[]){{"d2l.rand.x_q", x_q}, {"d2l.rand.x_kv", x_kv}}, 2);
    ag_graph_free(g);
    ag_store_free(s);
    ag_safetensors_free(f);
}

Test(parity_attn, d2l_example_random_inputs)
{
    check_d2l_random(0);
}

Test(parity_attn, d2l_example_random_inputs_textbook_path)
{
    check_d2l_random(1);
}
