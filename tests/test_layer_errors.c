/* tests/test_layer_errors.c: an error inside a layer or block names the
 * layer by its parameter path, the innermost layer's only
 * ("blocks.0.norm1: layer_norm: ..."), and an error from before the layer
 * ran is left as it was (the graph's error is sticky). */
#include "common.h"

#include <string.h>

enum { C = 8, H = 2, F = 16 };

static void expect_starts(const char *err, const char *head)
{
    cr_assert(strncmp(err, head, strlen(head)) == 0, "error '%s' does not start with '%s'", err, head);
}

static ag_tensor *narrow_input(ag_graph *g) /* [2, 3, 6]: C is 8 */
{
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(2, 3, 6));
    cr_assert_not_null(x);
    return x;
}

Test(layer_errors, a_block_names_its_sublayer)
{
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    ag_encoder_block post, pre;
    ag_block_config pre_cfg = {.pre_norm = 1};
    cr_assert_eq(ag_encoder_block_init(&post, s, "blocks.0", C, H, F, 0, 1), AG_OK);
    cr_assert_eq(ag_encoder_block_init_ex(&pre, s, "blocks.1", C, H, F, 0, &pre_cfg, 1), AG_OK);
    /* pre-norm: the first thing the input meets is norm1 */
    cr_assert_null(ag_encoder_block_forward(g, &pre, narrow_input(g), NULL, NULL));
    expect_starts(ag_graph_error(g), "blocks.1.norm1: layer_norm: ");
    ag_graph_reset(g);
    /* post-norm: the attention's checks come first */
    cr_assert_null(ag_encoder_block_forward(g, &post, narrow_input(g), NULL, NULL));
    expect_starts(ag_graph_error(g), "blocks.0.attention: mha: ");
    ag_graph_reset(g);
    /* a layer alone */
    cr_assert_null(ag_linear_layer_forward(g, &post.ffn.dense1, narrow_input(g)));
    expect_starts(ag_graph_error(g), "blocks.0.ffn.dense1: linear: input [2, 3, 6]");
    ag_graph_reset(g);
    cr_assert_null(ag_ffn_layer_forward(g, &post.ffn, narrow_input(g)));
    expect_starts(ag_graph_error(g), "blocks.0.ffn.dense1: linear: ");
    ag_graph_reset(g);
    cr_assert_null(ag_layer_norm_layer_forward(g, &post.norm2, narrow_input(g)));
    expect_starts(ag_graph_error(g), "blocks.0.norm2: layer_norm: ");
    ag_graph_free(g);
    ag_store_free(s);
}

Test(layer_errors, an_earlier_error_is_left_alone)
{
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    ag_linear_layer l;
    cr_assert_eq(ag_linear_layer_init(&l, s, "head", C, 4, 1, 1), AG_OK);
    ag_tensor *x = narrow_input(g);
    ag_graph_fail(g, AG_ERR_ARG, "an earlier failure");
    cr_assert_null(ag_linear_layer_forward(g, &l, x));
    cr_assert_str_eq(ag_graph_error(g), "an earlier failure");
    ag_graph_free(g);
    ag_store_free(s);
}

Test(layer_errors, models_name_the_block)
{
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    ag_seq2seq m;
    ag_seq2seq_config cfg = {.src_vocab = 10, .tgt_vocab = 11, .hidden = C, .heads = H, .ffn = F, .layers = 2,
                             .max_len = 6};
    cr_assert_eq(ag_seq2seq_init(&m, s, &cfg, 1), AG_OK, "%s", ag_store_error(s));
    /* the encoder's output has the wrong width: the first decoder block's
     * cross-attention says so */
    const int tgt[3] = {1, 2, 3};
    cr_assert_null(ag_seq2seq_decode(g, &m, ag_tensor_new(g, AG_SHAPE(1, 4, 6)), NULL, tgt, 1, 3));
    expect_starts(ag_graph_error(g), "decoder.blocks.0.cross_attention: mha: ");
    ag_graph_reset(g);
    ag_seq2seq_free(&m);

    ag_gpt gpt;
    ag_gpt_config gc = {.vocab = 5, .context = 4, .hidden = C, .heads = H, .ffn = F, .layers = 1};
    cr_assert_eq(ag_gpt_init(&gpt, s, &gc, 1), AG_OK, "%s", ag_store_error(s));
    const int ids[2] = {1, 9};
    cr_assert_null(ag_gpt_forward(g, &gpt, ids, 1, 2));
    expect_starts(ag_graph_error(g), "embedding: embedding: id 9");
    ag_gpt_free(&gpt);
    ag_graph_free(g);
    ag_store_free(s);
}
