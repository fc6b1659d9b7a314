/* tests/test_nn_args.c: every public function of attograd_nn.h given a NULL
 * layer or model: a sticky AG_ERR_ARG that names the function and the
 * argument (on the graph for the forwards, on the store for the _init
 * functions), never a crash. */
#include <string.h>

#include "common.h"

static ag_graph *g;
static ag_tensor *x;

static void setup(void)
{
    g = ag_graph_new();
    x = ag_tensor_new(g, AG_SHAPE(1, 2, 4));
}

static void teardown(void) { ag_graph_free(g); }

TestSuite(nn_args, .init = setup, .fini = teardown);

/* The call returned NULL (or failed) and g holds `want`. */
static void expect_graph_error(const void *got, const char *want)
{
    cr_assert_null(got);
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG, "%s", ag_graph_error(g));
    cr_assert_str_eq(ag_graph_error(g), want);
}

Test(nn_args, linear_forward) { expect_graph_error(ag_linear_layer_forward(g, NULL, x), "linear_forward: layer is NULL"); }
Test(nn_args, layernorm_forward) { expect_graph_error(ag_layer_norm_layer_forward(g, NULL, x), "layernorm_forward: layer is NULL"); }
Test(nn_args, deprecated_norm_forward) { expect_graph_error(ag_layer_norm_layer_forward(g, NULL, x), "layernorm_forward: layer is NULL"); }
Test(nn_args, add_norm) { expect_graph_error(ag_add_norm(g, NULL, x, x, 0), "add_norm: layer is NULL"); }
Test(nn_args, ffn_forward) { expect_graph_error(ag_ffn_layer_forward(g, NULL, x), "ffn_forward: layer is NULL"); }

Test(nn_args, mha_forward)
{
    ag_tensor *w = x;
    expect_graph_error(ag_mha_layer_forward(g, NULL, x, x, NULL, 0, &w), "mha_forward: layer is NULL");
    cr_assert_null(w);
}

Test(nn_args, encoder_block_forward)
{
    expect_graph_error(ag_encoder_block_forward(g, NULL, x, NULL, NULL), "encoder_block_forward: block is NULL");
}

Test(nn_args, decoder_block_forward)
{
    ag_tensor *sw = x, *cw = x;
    expect_graph_error(ag_decoder_block_forward(g, NULL, x, x, NULL, NULL, &sw, &cw),
                       "decoder_block_forward: block is NULL");
    cr_assert_null(sw);
    cr_assert_null(cw);
}

static const int SRC[2] = {4, 5}, VALID[1] = {2};

Test(nn_args, seq2seq_encode)
{
    expect_graph_error(ag_seq2seq_encode(g, NULL, SRC, VALID, 1, 2, NULL), "seq2seq_encode: model is NULL");
}

Test(nn_args, seq2seq_decode)
{
    expect_graph_error(ag_seq2seq_decode(g, NULL, x, NULL, SRC, 1, 2), "seq2seq_decode: model is NULL");
}

Test(nn_args, seq2seq_trace)
{
    ag_seq2seq_weights w;
    expect_graph_error(ag_seq2seq_trace(g, NULL, SRC, VALID, 1, 2, SRC, 2, &w), "seq2seq_trace: model is NULL");
}

Test(nn_args, seq2seq_loss)
{
    expect_graph_error(ag_seq2seq_loss(g, NULL, SRC, VALID, SRC, SRC, 1, 2, 2), "seq2seq_loss: model is NULL");
}

Test(nn_args, seq2seq_greedy)
{
    int out[4], len[1];
    cr_assert_eq(ag_seq2seq_greedy(g, NULL, SRC, VALID, 1, 2, 1, 2, 4, out, len), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "seq2seq_greedy: model is NULL");
    cr_assert_eq(ag_seq2seq_greedy(NULL, NULL, SRC, VALID, 1, 2, 1, 2, 4, out, len), AG_ERR_ARG);
}

Test(nn_args, seq2seq_teams)
{
    char err[64];
    cr_assert_null(ag_seq2seq_team_new(NULL, NULL, 2, err, sizeof err));
    cr_assert_str_eq(err, "team: the model is NULL");
    cr_assert_eq(ag_seq2seq_team_step(NULL, g, SRC, VALID, SRC, SRC, 1, 2, 2, NULL), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "seq2seq_team_step: the team is NULL");
    cr_assert_eq(ag_seq2seq_team_size(NULL), 0);
    ag_seq2seq_team_free(NULL);
    ag_seq2seq_free(NULL);
}

/* The first error sticks: a NULL layer after another error changes nothing. */
Test(nn_args, the_first_error_sticks)
{
    ag_graph_fail(g, AG_ERR_SHAPE, "first");
    cr_assert_null(ag_linear_layer_forward(g, NULL, x));
    cr_assert_str_eq(ag_graph_error(g), "first");
}

/* ---- _init functions: the error is on the store ------------------------- */

/* status st, and the store's error is want */
static void expect_store_error(ag_store *s, ag_status got, ag_status st, const char *want)
{
    cr_assert_eq(got, st);
    cr_assert_str_eq(ag_store_error(s), want);
    cr_assert_eq(ag_store_count(s), 0, "a failed init adds no parameter");
}

Test(nn_args, init_functions_name_the_null_argument_on_the_store)
{
    ag_store *s = ag_store_new();
    ag_seq2seq_config cfg = {8, 8, 8, 2, 16, 1, 4, 0, AG_SEQ2SEQ_INIT_SCALED, 0, 0};
    expect_store_error(s, ag_linear_layer_init(NULL, s, "l", 2, 3, 1, 1), AG_ERR_ARG, "linear_init: layer is NULL");
    expect_store_error(s, ag_layer_norm_layer_init(NULL, s, "n", 4), AG_ERR_ARG, "layernorm_init: layer is NULL");
    expect_store_error(s, ag_mha_layer_init(NULL, s, "m", 4, 2, 1, 0, 1), AG_ERR_ARG, "mha_init: layer is NULL");
    expect_store_error(s, ag_ffn_layer_init(NULL, s, "f", 4, 8, 1), AG_ERR_ARG, "ffn_init: layer is NULL");
    expect_store_error(s, ag_encoder_block_init(NULL, s, "e", 4, 2, 8, 0, 1), AG_ERR_ARG,
                       "encoder_block_init: block is NULL");
    expect_store_error(s, ag_decoder_block_init(NULL, s, "d", 4, 2, 8, 0, 1), AG_ERR_ARG,
                       "decoder_block_init: block is NULL");
    expect_store_error(s, ag_seq2seq_init(NULL, s, &cfg, 1), AG_ERR_ARG, "seq2seq_init: model is NULL");
    ag_linear_layer l;
    ag_ffn_layer f;
    ag_seq2seq m;
    expect_store_error(s, ag_linear_layer_init(&l, s, NULL, 2, 3, 1, 1), AG_ERR_ARG, "linear_init: prefix is NULL");
    expect_store_error(s, ag_ffn_layer_init(&f, s, NULL, 4, 8, 1), AG_ERR_ARG, "ffn_init: prefix is NULL");
    expect_store_error(s, ag_seq2seq_init(&m, s, NULL, 1), AG_ERR_ARG, "seq2seq_init: config is NULL");
    /* no store: only the status */
    cr_assert_eq(ag_linear_layer_init(NULL, NULL, "l", 2, 3, 1, 1), AG_ERR_ARG);
    cr_assert_eq(ag_linear_layer_init(&l, NULL, "l", 2, 3, 1, 1), AG_ERR_ARG);
    ag_store_free(s);
}

Test(nn_args, init_functions_say_what_is_wrong_with_a_size)
{
    ag_store *s = ag_store_new();
    ag_mha_layer m;
    expect_store_error(s, ag_mha_layer_init(&m, s, "m", 6, 4, 1, 0, 1), AG_ERR_SHAPE,
                       "mha 'm': width C = 6 is not a multiple of the heads H = 4");
    ag_linear_layer l;
    expect_store_error(s, ag_linear_layer_init(&l, s, "l", 0, 3, 1, 1), AG_ERR_ARG,
                       "linear 'l': bad size (in 0, out 3: both must be >= 1)");
    ag_seq2seq q;
    ag_seq2seq_config cfg = {8, 8, 6, 4, 16, 1, 4, 0, AG_SEQ2SEQ_INIT_SCALED, 0, 0};
    expect_store_error(s, ag_seq2seq_init(&q, s, &cfg, 1), AG_ERR_SHAPE,
                       "seq2seq: hidden = 6 is not a multiple of heads = 4");
    ag_store_free(s);
}

/* ---- the GPT's layers: the same rule ------------------------------------- */

static const int ids[4] = {0, 1, 2, 3};

Test(nn_args, embedding_layer_forward)
{
    expect_graph_error(ag_embedding_layer_forward(g, NULL, ids, 1, 4), "embedding_layer_forward: layer is NULL");
}
Test(nn_args, embedding_layer_logits)
{
    expect_graph_error(ag_embedding_layer_logits(g, NULL, x), "embedding_layer_logits: layer is NULL");
}
Test(nn_args, decoder_only_block_forward)
{
    ag_tensor *w = x; /* set to NULL on failure */
    expect_graph_error(ag_decoder_only_block_forward(g, NULL, x, &w), "decoder_only_block_forward: block is NULL");
    cr_assert_null(w);
}
Test(nn_args, gpt_forward) { expect_graph_error(ag_gpt_forward(g, NULL, ids, 1, 4), "gpt: the model is NULL"); }
Test(nn_args, gpt_loss) { expect_graph_error(ag_gpt_loss(g, NULL, ids, ids, 1, 4), "gpt: the model is NULL"); }
Test(nn_args, gpt_sample)
{
    int out[6];
    ag_sample_opts o = {0};
    cr_assert_eq(ag_gpt_sample(g, NULL, ids, 1, 2, &o, out), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "gpt_sample: no model");
}

Test(nn_args, gpt_init_functions_name_the_null_argument_on_the_store)
{
    ag_store *s = ag_store_new();
    expect_store_error(s, ag_embedding_layer_init(NULL, s, "e", 4, 4, 4, AG_POS_LEARNED, 1), AG_ERR_ARG,
                       "embedding_layer_init: layer is NULL");
    expect_store_error(s, ag_decoder_only_block_init(NULL, s, "b", 4, 2, 8, 0, NULL, 1), AG_ERR_ARG,
                       "decoder_only_block_init: block is NULL");
    expect_store_error(s, ag_gpt_init(NULL, s, NULL, 1), AG_ERR_ARG, "gpt_init: model is NULL");
    ag_gpt_free(NULL); /* harmless */
    ag_store_free(s);
}
