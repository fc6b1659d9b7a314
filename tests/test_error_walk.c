/* tests/test_error_walk.c: every public function that can fail on a bad
 * argument leaves its reason where docs/errors.md says: on the graph, the
 * store, the optimizer or the writer it acts on, or in the caller's err.
 *
 * The list is complete: walk_is_complete reads the public headers and
 * fails when a function returning ag_status or a pointer is in neither the
 * walk nor the list of those that cannot fail on an argument (lookups that
 * answer NULL for "not there", getters, constructors with no argument),
 * each with its reason.  The op table walks itself: ag_<op> for every op
 * <op> of the table is called through its op's gradient-check cases with
 * NULL inputs (every_op_fails_on_null_inputs), so that a new op whose
 * arguments are the graph and tensors needs no line here.  An op with any
 * other argument (an axis, a shape, eps) needs one, in two places: its
 * call with a bad argument (NUL(ag_<op>, ...)) and its entry in walks[]
 * (G(ag_<op>)); walk_is_complete fails, naming it, without them. */
#include "common.h"
#include "core/internal.h"

#include <ctype.h>
#include <string.h>

typedef enum place { ON_GRAPH, ON_STORE, ON_OPTIM, ON_WRITER, IN_ERR } place;

/* what a call is given: good objects, and tensors whose shapes do not fit */
typedef struct world {
    ag_graph *g;
    ag_store *s, *s2s_store, *gpt_store;
    ag_optim *o;
    ag_safetensors_writer *w;
    char err[512];
    ag_tensor *x23, *x4, *nan1; /* [2, 3], [4], [1] holding NaN */
    ag_tensor *p23;              /* a parameter [2, 3] */
    ag_linear_layer lin;         /* 3 -> 4 */
    ag_layer_norm_layer ln;      /* C = 3 */
    ag_mha_layer mha;            /* C = 4, H = 2 */
    ag_ffn_layer ffn;            /* 4 -> 8 -> 4 */
    ag_embedding_layer emb;      /* V = 5, C = 4, 3 learned positions */
    ag_encoder_block enc;
    ag_decoder_block dec;
    ag_seq2seq s2s;
    ag_gpt gpt;
} world;

static void make_world(world *W)
{
    memset(W, 0, sizeof *W);
    W->g = ag_graph_new(), W->s = ag_store_new(), W->w = ag_safetensors_writer_new();
    W->s2s_store = ag_store_new(), W->gpt_store = ag_store_new(); /* the models' names are their own */
    cr_assert(W->g && W->s && W->w && W->s2s_store && W->gpt_store);
    W->x23 = ag_tensor_new(W->g, AG_SHAPE(2, 3));
    W->x4 = ag_tensor_new(W->g, AG_SHAPE(4));
    W->nan1 = ag_tensor_from(W->g, AG_SHAPE(1), (ag_real[]){NAN});
    W->p23 = ag_param(W->s, "p23", AG_SHAPE(2, 3));
    ag_status st = ag_linear_layer_init(&W->lin, W->s, "lin", 3, 4, 1, 1);
    st |= ag_layer_norm_layer_init(&W->ln, W->s, "ln", 3);
    st |= ag_mha_layer_init(&W->mha, W->s, "mha", 4, 2, 1, 0, 1);
    st |= ag_ffn_layer_init(&W->ffn, W->s, "ffn", 4, 8, 1);
    st |= ag_embedding_layer_init(&W->emb, W->s, "emb", 5, 4, 3, AG_POS_LEARNED, 1);
    st |= ag_encoder_block_init(&W->enc, W->s, "enc", 4, 2, 8, 0, 1);
    st |= ag_decoder_block_init(&W->dec, W->s, "dec", 4, 2, 8, 0, 1);
    ag_seq2seq_config sc = {.src_vocab = 6, .tgt_vocab = 6, .hidden = 4, .heads = 2, .ffn = 8, .layers = 1,
                            .max_len = 5};
    st |= ag_seq2seq_init(&W->s2s, W->s2s_store, &sc, 1);
    ag_gpt_config gc = {.vocab = 5, .context = 4, .hidden = 4, .heads = 2, .ffn = 8, .layers = 1};
    st |= ag_gpt_init(&W->gpt, W->gpt_store, &gc, 1);
    cr_assert_eq(st, AG_OK, "%s", ag_store_error(W->s));
    W->o = ag_sgd_new(W->s, 0.1, 0, 0, 0);
    cr_assert(W->o && W->p23 && W->x23 && W->x4 && W->nan1);
}

static void free_world(world *W)
{
    ag_seq2seq_free(&W->s2s), ag_gpt_free(&W->gpt);
    ag_optim_free(W->o);
    ag_safetensors_writer_free(W->w);
    ag_graph_free(W->g);
    ag_store_free(W->s), ag_store_free(W->s2s_store), ag_store_free(W->gpt_store);
}

/* One bad call each: true when the call said it failed (a status other
 * than AG_OK, or NULL). */
#define NUL(f, call) static bool w_##f(world *W) { return (call) == NULL; }
#define BAD(f, call) static bool w_##f(world *W) { return (call) != AG_OK; }

static const int ids_bad[2] = {1, 9}; /* 9: out of range of every vocabulary here */
static const int shape_neg[1] = {-2};
static ag_tensor *no_build(ag_graph *g, void *ctx) { (void)g, (void)ctx; return NULL; }
static ag_status no_init(void *ctx, int worker, ag_store *r) { (void)ctx, (void)worker, (void)r; return AG_OK; }

/* core: tensors, the graph, the store, every op */
NUL(ag_tensor_new, ag_tensor_new(W->g, 1, shape_neg))
NUL(ag_tensor_from, ag_tensor_from(W->g, 1, shape_neg, NULL))
BAD(ag_backward, ag_backward(W->g, W->x23)) /* not a scalar */
BAD(ag_backward_from, ag_backward_from(W->g, W->x23, NULL))
BAD(ag_graph_check_finite, ag_graph_check_finite(W->g))
NUL(ag_param, ag_param(W->s, "p23", AG_SHAPE(2, 3))) /* a duplicate name */
NUL(ag_store_constant, ag_store_constant(W->s, "c", 1, shape_neg, NULL))
NUL(ag_add, ag_add(W->g, W->x23, W->x4))
NUL(ag_sub, ag_sub(W->g, W->x23, W->x4))
NUL(ag_mul, ag_mul(W->g, W->x23, W->x4))
NUL(ag_div, ag_div(W->g, W->x23, W->x4))
NUL(ag_scale, ag_scale(W->g, NULL, 2))
NUL(ag_shift, ag_shift(W->g, NULL, 2))
NUL(ag_neg, ag_neg(W->g, NULL))
NUL(ag_exp, ag_exp(W->g, NULL))
NUL(ag_log, ag_log(W->g, NULL))
NUL(ag_sqrt, ag_sqrt(W->g, NULL))
NUL(ag_tanh, ag_tanh(W->g, NULL))
NUL(ag_relu, ag_relu(W->g, NULL))
NUL(ag_gelu, ag_gelu(W->g, NULL))
NUL(ag_gelu_tanh, ag_gelu_tanh(W->g, NULL))
NUL(ag_matmul, ag_matmul(W->g, W->x23, W->x23))
NUL(ag_matmul_bt, ag_matmul_bt(W->g, W->x23, W->x4))
NUL(ag_reshape, ag_reshape(W->g, W->x23, AG_SHAPE(5)))
NUL(ag_permute, ag_permute(W->g, W->x23, (const int[]){0, 0}))
NUL(ag_transpose, ag_transpose(W->g, W->x23, 0, 5))
NUL(ag_concat, ag_concat(W->g, 2, (ag_tensor *const[]){W->x23, W->x4}, 0))
NUL(ag_slice, ag_slice(W->g, W->x23, 1, 2, 5))
NUL(ag_sum, ag_sum(W->g, W->x23, 5, 0))
NUL(ag_mean, ag_mean(W->g, W->x23, 5, 0))
NUL(ag_sum_all, ag_sum_all(W->g, NULL))
NUL(ag_mean_all, ag_mean_all(W->g, NULL))
NUL(ag_max, ag_max(W->g, W->x23, 5, 0))
NUL(ag_expand, ag_expand(W->g, W->x23, AG_SHAPE(4, 3)))
NUL(ag_repeat, ag_repeat(W->g, W->x23, 2, (const int[]){-2, 1}))
NUL(ag_argmax, ag_argmax(W->g, W->x23, 5, 0))
NUL(ag_topk, ag_topk(W->g, W->x23, 4, 1, 1, NULL))
NUL(ag_where, ag_where(W->g, W->x23, W->x23, W->x4))
NUL(ag_clamp, ag_clamp(W->g, W->x23, NAN, 1))
NUL(ag_softmax, ag_softmax(W->g, NULL))
NUL(ag_log_softmax, ag_log_softmax(W->g, NULL))
NUL(ag_masked_fill, ag_masked_fill(W->g, W->x23, W->x4, 0))
NUL(ag_layer_norm, ag_layer_norm(W->g, W->x23, W->x4, W->x4, 1e-5))
NUL(ag_embedding, ag_embedding(W->g, W->p23, ids_bad, AG_SHAPE(2)))
NUL(ag_index_add, ag_index_add(W->g, W->x23, NULL, 4))
NUL(ag_dropout, ag_dropout(W->g, W->x23, 1.5))
NUL(ag_cross_entropy, ag_cross_entropy(W->g, W->x23, NULL, -1, 0))
NUL(ag_cross_entropy_ex, ag_cross_entropy_ex(W->g, W->x23, (const int[]){0, 1}, -1, 0, (ag_reduction)99))
BAD(ag_gradcheck, ag_gradcheck(W->g, NULL, NULL, NULL, 0, NULL, NULL))
BAD(ag_gradcheck_store, ag_gradcheck_store(W->g, no_build, NULL, NULL, NULL, NULL))
BAD(ag_gradcheck_model, ag_gradcheck_model(W->g, no_build, NULL, NULL, 0, NULL, NULL))
BAD(ag_gradcheck_model_store, ag_gradcheck_model_store(W->g, no_build, NULL, NULL, NULL, NULL))
BAD(ag_gradcheck_nodes, ag_gradcheck_nodes(W->g, NULL, NULL, NULL, NULL, NULL))
BAD(ag_op_check, ag_op_check(-5, 0, 1, NULL, NULL, W->err, sizeof W->err))
NUL(ag_team_new, ag_team_new(W->s, 0, no_init, NULL, W->err, sizeof W->err))
BAD(ag_team_step, ag_team_step(NULL, W->g, 1, NULL, NULL, NULL))

/* io */
BAD(ag_safetensors_load, ag_safetensors_load("/nonexistent/m.safetensors", &(ag_safetensors *){0}, W->err,
                                             sizeof W->err))
BAD(ag_safetensors_parse, ag_safetensors_parse("short", 5, &(ag_safetensors *){0}, W->err, sizeof W->err))
BAD(ag_safetensors_read, ag_safetensors_read(NULL, "w", NULL, 0, W->err, sizeof W->err))
BAD(ag_safetensors_read_tensor, ag_safetensors_read_tensor(NULL, "w", W->x23, W->err, sizeof W->err))
BAD(ag_safetensors_read_int, ag_safetensors_read_int(NULL, "w", NULL, 0, W->err, sizeof W->err))
BAD(ag_safetensors_add, ag_safetensors_add(W->w, NULL, NULL, AG_SHAPE(1), NULL))
BAD(ag_safetensors_add_int, ag_safetensors_add_int(W->w, "i", 1, shape_neg, NULL))
BAD(ag_safetensors_add_meta, ag_safetensors_add_meta(W->w, NULL, "v"))
BAD(ag_safetensors_save, ag_safetensors_save(W->w, NULL, W->err, sizeof W->err))
BAD(ag_store_save, ag_store_save(W->s, NULL, NULL, 0, W->err, sizeof W->err))
BAD(ag_store_load, ag_store_load(W->s, NULL, W->err, sizeof W->err))
BAD(ag_file_read, ag_file_read(NULL, &(char *){0}, &(size_t){0}, W->err, sizeof W->err))
BAD(ag_file_write, ag_file_write(NULL, "x", 1, W->err, sizeof W->err))

/* nn: layers, blocks, models */
BAD(ag_linear_layer_init, ag_linear_layer_init(&(ag_linear_layer){0}, W->s, "l", 0, 4, 1, 1))
BAD(ag_linear_layer_init_ex, ag_linear_layer_init_ex(&(ag_linear_layer){0}, W->s, "l", 3, 4, 1,
                                                     &(ag_init_opts){.scheme = AG_INIT_NORMAL}, 1))
NUL(ag_linear_layer_forward, ag_linear_layer_forward(W->g, &W->lin, W->x4))
NUL(ag_linear_layer_forward_add, ag_linear_layer_forward_add(W->g, &W->lin, W->x23, W->x23))
BAD(ag_layer_norm_layer_init, ag_layer_norm_layer_init(&(ag_layer_norm_layer){0}, W->s, "n", 0))
NUL(ag_layer_norm_layer_forward, ag_layer_norm_layer_forward(W->g, &W->ln, W->x4))
BAD(ag_norm_init, ag_norm_init(&(ag_norm){0}, W->s, "n", 0))
NUL(ag_norm_forward, ag_norm_forward(W->g, &W->ln, W->x4))
NUL(ag_causal_mask, ag_causal_mask(W->g, -1, 2))
NUL(ag_padding_mask, ag_padding_mask(W->g, NULL, 2, 0, 1, 3))
NUL(ag_attention, ag_attention(W->g, W->x23, W->x4, W->x4, NULL, AG_MASK_NEG_INF, 0, NULL))
NUL(ag_scaled_dot_product_attention, ag_scaled_dot_product_attention(W->g, W->x23, W->x4, W->x4, NULL))
BAD(ag_mha_layer_init, ag_mha_layer_init(&(ag_mha_layer){0}, W->s, "m", 5, 2, 1, 0, 1))
NUL(ag_mha_layer_forward, ag_mha_layer_forward(W->g, &W->mha, W->x23, W->x23, NULL, AG_MASK_NEG_INF, NULL))
NUL(ag_attention_textbook, ag_attention_textbook(W->g, W->x23, W->x4, W->x4, NULL, AG_MASK_NEG_INF, 0, NULL))
NUL(ag_mha_layer_forward_textbook,
    ag_mha_layer_forward_textbook(W->g, &W->mha, W->x23, W->x23, NULL, AG_MASK_NEG_INF, NULL))
NUL(ag_add_norm, ag_add_norm(W->g, &W->ln, W->x23, W->x4, 0))
BAD(ag_ffn_layer_init, ag_ffn_layer_init(&(ag_ffn_layer){0}, W->s, "f", 4, 0, 1))
BAD(ag_ffn_layer_init_ex, ag_ffn_layer_init_ex(&(ag_ffn_layer){0}, W->s, "f", 4, 8, (ag_activation)9, 1))
NUL(ag_ffn_layer_forward, ag_ffn_layer_forward(W->g, &W->ffn, W->x23))
NUL(ag_ffn_layer_forward_add, ag_ffn_layer_forward_add(W->g, &W->ffn, W->x23, W->x23))
BAD(ag_mha_layer_add_qk_norm, ag_mha_layer_add_qk_norm(&(ag_mha_layer){0}, W->s, "m"))
BAD(ag_learned_positions_init,
    ag_learned_positions_init(&(ag_learned_positions){0}, W->s, "pos", 0, 4, 1))
NUL(ag_learned_positions_forward, ag_learned_positions_forward(W->g, &(ag_learned_positions){0}, W->x23))
NUL(ag_prepend_token, ag_prepend_token(W->g, W->x23, W->x4))
BAD(ag_attention_qk, ag_attention_qk(W->g, W->x23, NULL, NULL, NULL, NULL))
NUL(ag_positional_encoding, ag_positional_encoding(W->g, -1, 4))
BAD(ag_embedding_layer_init, ag_embedding_layer_init(&(ag_embedding_layer){0}, W->s, "e", 0, 4, 3,
                                                     AG_POS_LEARNED, 1))
BAD(ag_embedding_layer_init_ex, ag_embedding_layer_init_ex(&(ag_embedding_layer){0}, W->s, "e", 5, 4, 3,
                                                           AG_POS_LEARNED, &(ag_init_opts){.layers = -1}, 1))
NUL(ag_embedding_layer_forward, ag_embedding_layer_forward(W->g, &W->emb, NULL, 1, 2))
NUL(ag_embedding_layer_logits, ag_embedding_layer_logits(W->g, &W->emb, W->x23))
BAD(ag_encoder_block_init, ag_encoder_block_init(&(ag_encoder_block){0}, W->s, "b", 4, 3, 8, 0, 1))
BAD(ag_decoder_block_init, ag_decoder_block_init(&(ag_decoder_block){0}, W->s, "b", 4, 3, 8, 0, 1))
BAD(ag_encoder_block_init_ex, ag_encoder_block_init_ex(&(ag_encoder_block){0}, W->s, "b", 4, 2, 8, 0,
                                                       &(ag_block_config){.pre_norm = 2}, 1))
BAD(ag_decoder_block_init_ex, ag_decoder_block_init_ex(&(ag_decoder_block){0}, W->s, "b", 4, 2, 8, 0,
                                                       &(ag_block_config){.causal = 3}, 1))
BAD(ag_decoder_only_block_init, ag_decoder_only_block_init(&(ag_decoder_only_block){0}, W->s, "b", 4, 3, 8, 0,
                                                           NULL, 1))
NUL(ag_encoder_block_forward, ag_encoder_block_forward(W->g, &W->enc, W->x23, NULL, NULL))
NUL(ag_decoder_block_forward, ag_decoder_block_forward(W->g, &W->dec, W->x23, W->x23, NULL, NULL, NULL, NULL))
NUL(ag_decoder_only_block_forward, ag_decoder_only_block_forward(W->g, &W->enc, W->x23, NULL))
BAD(ag_seq2seq_init, ag_seq2seq_init(&(ag_seq2seq){0}, W->s, &(ag_seq2seq_config){0}, 1))
NUL(ag_seq2seq_encode, ag_seq2seq_encode(W->g, &W->s2s, NULL, NULL, 1, 2, NULL))
NUL(ag_seq2seq_decode, ag_seq2seq_decode(W->g, &W->s2s, W->x23, NULL, ids_bad, 1, 2))
NUL(ag_seq2seq_trace, ag_seq2seq_trace(W->g, &W->s2s, NULL, NULL, 1, 2, NULL, 2, NULL))
NUL(ag_seq2seq_loss, ag_seq2seq_loss(W->g, &W->s2s, NULL, NULL, NULL, NULL, 1, 2, 2))
NUL(ag_seq2seq_team_new, ag_seq2seq_team_new(&W->s2s, W->s2s_store, 0, W->err, sizeof W->err))
BAD(ag_seq2seq_team_step, ag_seq2seq_team_step(NULL, W->g, NULL, NULL, NULL, NULL, 1, 2, 2, NULL))
BAD(ag_seq2seq_greedy, ag_seq2seq_greedy(W->g, &W->s2s, NULL, NULL, 1, 2, 1, 2, 5, NULL, NULL))
BAD(ag_gpt_init, ag_gpt_init(&(ag_gpt){0}, W->s, &(ag_gpt_config){0}, 1))
NUL(ag_gpt_forward, ag_gpt_forward(W->g, &W->gpt, ids_bad, 1, 2))
NUL(ag_gpt_loss, ag_gpt_loss(W->g, &W->gpt, (const int[]){1, 2}, NULL, 1, 2))
BAD(ag_gpt_sample, ag_gpt_sample(W->g, &W->gpt, NULL, 1, 3, NULL, NULL))
NUL(ag_gpt_forward_cached, ag_gpt_forward_cached(W->g, &W->gpt, NULL, (const int[]){1}, 1))
BAD(ag_kv_cache_append, ag_kv_cache_append(W->g, NULL, 0, W->x23, W->x23, NULL, NULL))

/* optim */
NUL(ag_sgd_new, ag_sgd_new(W->s, -1, 0, 0, 0))
NUL(ag_adam_new, ag_adam_new(W->s, 1e-3, 1.5, 0.999, 1e-8, 0, 0))
static bool w_ag_optim_step(world *W)
{
    ag_optim_set_lr(W->o, NAN);
    return ag_optim_step(W->o) != AG_OK;
}
BAD(ag_clip_grad_norm, ag_clip_grad_norm(W->s, NAN, NULL))
BAD(ag_optim_step_clip_zero, ag_optim_step_clip_zero(W->o, NAN, NULL))
BAD(ag_lr_schedule_check, ag_lr_schedule_check(-1, 10, "cosine", W->err, sizeof W->err))
BAD(ag_sampling_check, ag_sampling_check(&(ag_sampling){.temperature = 1, .top_p = 1.5}, W->err, sizeof W->err))
BAD(ag_sample_dist, ag_sample_dist(NULL, 3, &(ag_sampling){.temperature = 1, .top_p = 1}, NULL, NULL, W->err,
                                   sizeof W->err))

/* text */
BAD(ag_pairs_load, ag_pairs_load(NULL, &(ag_pairs *){0}, W->err, sizeof W->err))
BAD(ag_pairs_parse, ag_pairs_parse(NULL, 5, "x", &(ag_pairs *){0}, W->err, sizeof W->err))
BAD(ag_groups_build, ag_groups_build(NULL, NULL, 0, &(ag_groups *){0}, W->err, sizeof W->err))
BAD(ag_vocab_build, ag_vocab_build(NULL, NULL, 1, 1, &(ag_vocab *){0}, W->err, sizeof W->err))
BAD(ag_vocab_from_pairs, ag_vocab_from_pairs(NULL, 0, 1, &(ag_vocab *){0}, W->err, sizeof W->err))
BAD(ag_vocab_parse, ag_vocab_parse(NULL, 5, &(ag_vocab *){0}, W->err, sizeof W->err))

/* viz */
BAD(ag_graph_write_dot, ag_graph_write_dot(W->g, NULL, 0, NULL, W->err, sizeof W->err))
BAD(ag_svg_heatmaps, ag_svg_heatmaps(NULL, NULL, W->err, sizeof W->err))
BAD(ag_svg_heatmap, ag_svg_heatmap(NULL, "t", NULL, 2, NULL, 2, NULL, W->err, sizeof W->err))
BAD(ag_svg_heatmap_grid, ag_svg_heatmap_grid(NULL, "t", 1, NULL, 2, 2, NULL, NULL, NULL, W->err, sizeof W->err))
BAD(ag_svg_attention, ag_svg_attention(NULL, "t", NULL, 0, NULL, NULL, W->err, sizeof W->err))
BAD(ag_svg_attention_masked, ag_svg_attention_masked(NULL, "t", NULL, 0, NULL, NULL, NULL, W->err, sizeof W->err))
BAD(ag_html_explorer, ag_html_explorer(NULL, "t", "{}", W->err, sizeof W->err))
BAD(ag_html_live, ag_html_live(NULL, "t", "{}", NULL, W->err, sizeof W->err))
BAD(ag_svg_line_plot, ag_svg_line_plot(NULL, "t", "x", "y", 0, NULL, NULL, NULL, W->err, sizeof W->err))

typedef struct walk {
    const char *name;
    place at;
    bool (*call)(world *);
} walk;

#define G(f) {#f, ON_GRAPH, w_##f}
#define S(f) {#f, ON_STORE, w_##f}
#define E(f) {#f, IN_ERR, w_##f}
static const walk walks[] = {
    G(ag_tensor_new), G(ag_tensor_from), G(ag_backward), G(ag_backward_from), G(ag_graph_check_finite),
    S(ag_param), S(ag_store_constant), G(ag_add), G(ag_sub), G(ag_mul), G(ag_div), G(ag_scale), G(ag_shift),
    G(ag_neg), G(ag_exp), G(ag_log), G(ag_sqrt), G(ag_tanh), G(ag_relu), G(ag_gelu), G(ag_gelu_tanh),
    G(ag_matmul), G(ag_matmul_bt), G(ag_reshape), G(ag_permute), G(ag_transpose), G(ag_concat), G(ag_slice),
    G(ag_sum), G(ag_mean), G(ag_sum_all), G(ag_mean_all), G(ag_max), G(ag_softmax), G(ag_log_softmax),
    G(ag_expand), G(ag_repeat), G(ag_argmax), G(ag_topk), G(ag_where), G(ag_clamp),
    G(ag_masked_fill), G(ag_layer_norm), G(ag_embedding), G(ag_index_add), G(ag_dropout), G(ag_cross_entropy),
    G(ag_cross_entropy_ex), G(ag_gradcheck), G(ag_gradcheck_store), G(ag_gradcheck_model),
    G(ag_gradcheck_model_store), G(ag_gradcheck_nodes), E(ag_op_check), E(ag_team_new),
    G(ag_team_step),
    E(ag_safetensors_load), E(ag_safetensors_parse), E(ag_safetensors_read), E(ag_safetensors_read_tensor),
    E(ag_safetensors_read_int), {"ag_safetensors_add", ON_WRITER, w_ag_safetensors_add},
    {"ag_safetensors_add_int", ON_WRITER, w_ag_safetensors_add_int},
    {"ag_safetensors_add_meta", ON_WRITER, w_ag_safetensors_add_meta}, E(ag_safetensors_save), E(ag_store_save),
    E(ag_store_load), E(ag_file_read), E(ag_file_write),
    S(ag_linear_layer_init), S(ag_linear_layer_init_ex), G(ag_linear_layer_forward), G(ag_linear_layer_forward_add), S(ag_layer_norm_layer_init),
    G(ag_layer_norm_layer_forward), S(ag_norm_init), G(ag_norm_forward), G(ag_causal_mask), G(ag_padding_mask),
    G(ag_attention), G(ag_scaled_dot_product_attention), S(ag_mha_layer_init), G(ag_mha_layer_forward), G(ag_attention_textbook),
    G(ag_mha_layer_forward_textbook), G(ag_add_norm), S(ag_ffn_layer_init), S(ag_ffn_layer_init_ex),
    G(ag_ffn_layer_forward), G(ag_ffn_layer_forward_add), S(ag_mha_layer_add_qk_norm), S(ag_learned_positions_init), G(ag_learned_positions_forward), G(ag_prepend_token),
    G(ag_attention_qk), G(ag_positional_encoding), S(ag_embedding_layer_init), S(ag_embedding_layer_init_ex),
    G(ag_embedding_layer_forward), G(ag_embedding_layer_logits), S(ag_encoder_block_init), S(ag_decoder_block_init),
    S(ag_encoder_block_init_ex), S(ag_decoder_block_init_ex), S(ag_decoder_only_block_init),
    G(ag_encoder_block_forward), G(ag_decoder_block_forward), G(ag_decoder_only_block_forward), S(ag_seq2seq_init),
    G(ag_seq2seq_encode), G(ag_seq2seq_decode), G(ag_seq2seq_trace), G(ag_seq2seq_loss), E(ag_seq2seq_team_new),
    G(ag_seq2seq_team_step), G(ag_seq2seq_greedy), S(ag_gpt_init), G(ag_gpt_forward), G(ag_gpt_loss),
    G(ag_gpt_sample), G(ag_gpt_forward_cached), G(ag_kv_cache_append),
    S(ag_sgd_new), S(ag_adam_new), {"ag_optim_step", ON_OPTIM, w_ag_optim_step}, S(ag_clip_grad_norm),
    {"ag_optim_step_clip_zero", ON_OPTIM, w_ag_optim_step_clip_zero},
    E(ag_lr_schedule_check), E(ag_sampling_check), E(ag_sample_dist),
    E(ag_pairs_load), E(ag_pairs_parse), E(ag_groups_build), E(ag_vocab_build), E(ag_vocab_from_pairs),
    E(ag_vocab_parse),
    E(ag_graph_write_dot), E(ag_svg_heatmaps), E(ag_svg_heatmap), E(ag_svg_heatmap_grid), E(ag_svg_attention),
    E(ag_svg_attention_masked), E(ag_svg_line_plot), E(ag_html_explorer), E(ag_html_live),
};
#define NWALKS (sizeof walks / sizeof walks[0])

/* Functions returning ag_status or a pointer that fail on no argument, and why. */
static const struct {
    const char *name, *why;
} exempt[] = {
    {"ag_status_name", "a string for any status"},
    {"ag_precision_name", "a string for any precision"},
    {"ag_op_name", "a lookup: NULL for no such op"},
    {"ag_op_case_label", "a lookup: NULL for no such case"},
    {"ag_set_name", "returns its tensor (NULL in, NULL out)"},
    {"ag_shape_str", "returns its buffer"},
    {"ag_shape_str_n", "returns its buffer"},
    {"ag_scalar", "no argument can be bad; out of memory is on the graph (test_oom.c)"},
    {"ag_graph_new", "takes no argument: NULL only when out of memory"},
    {"ag_store_new", "takes no argument: NULL only when out of memory"},
    {"ag_safetensors_writer_new", "takes no argument: NULL only when out of memory"},
    {"ag_graph_status", "a getter"},
    {"ag_graph_error", "a getter"},
    {"ag_store_error", "a getter"},
    {"ag_optim_error", "a getter"},
    {"ag_safetensors_writer_error", "a getter"},
    {"ag_optim_kind", "a getter"},
    {"ag_optim_last_error", "a getter (deprecated)"},
    {"ag_graph_fail", "records the caller's own error"},
    {"ag_graph_rng", "a getter: NULL for a NULL graph"},
    {"ag_graph_node", "a lookup: NULL past the tape"},
    {"ag_attention_path", "a lookup: NULL for a tensor no attention made"},
    {"ag_store_find", "a lookup: NULL for no such name"},
    {"ag_store_at", "a lookup: NULL past the end"},
    {"ag_team_store", "a lookup: NULL past the workers"},
    {"ag_optim_state", "a lookup: NULL past the state"},
    {"ag_safetensors_name", "a lookup: NULL past the tensors"},
    {"ag_safetensors_dtype", "a lookup: NULL past the tensors"},
    {"ag_safetensors_shape", "a lookup: NULL past the tensors"},
    {"ag_safetensors_bytes", "a lookup: NULL past the tensors"},
    {"ag_safetensors_meta", "a lookup: NULL for no such key"},
    {"ag_safetensors_meta_key", "a lookup: NULL past the keys"},
    {"ag_vocab_token", "a lookup: NULL for no such id"},
    {"ag_gpt_cache_new", "NULL for a model not made (documented; no object to hold a message)"},
    {"ag_kv_cache_new", "NULL for a size below 1 or too large (documented; no object to hold a message)"},
    {"ag_encode", "status only: NULL pointers or max_len < 1, as its header says; no object or err"},
};
#define NEXEMPT (sizeof exempt / sizeof exempt[0])

static const char *where(const world *W, place at)
{
    switch (at) {
    case ON_GRAPH: return ag_graph_status(W->g) != AG_OK ? ag_graph_error(W->g) : "";
    case ON_STORE: return ag_store_error(W->s);
    case ON_OPTIM: return ag_optim_error(W->o);
    case ON_WRITER: return ag_safetensors_writer_error(W->w);
    default: return W->err;
    }
}

Test(error_walk, every_failure_leaves_its_reason)
{
    static char bad[8192];
    size_t at = 0;
    for (size_t i = 0; i < NWALKS; i++) {
        world W;
        make_world(&W);
        bool failed = walks[i].call(&W);
        const char *msg = where(&W, walks[i].at);
        if (!failed || !msg || !msg[0])
            at += (size_t)snprintf(bad + at, sizeof bad - at, "%s: %s; ", walks[i].name,
                                   !failed ? "a bad argument did not fail" : "no message where docs/errors.md says");
        free_world(&W);
        if (at >= sizeof bad) at = sizeof bad - 1;
    }
    cr_assert_eq(at, 0, "%s", bad);
}

/* Every op of the table, through each of its cases with NULL for every
 * input: the case's build returns NULL and the graph says why. */
Test(error_walk, every_op_fails_on_null_inputs)
{
    for (int op = 1; op < AG_OP_COUNT; op++)
        for (int i = 0; i < ag_op_case_count(op); i++) {
            const ag_op_case *c = &ag_op_table[op]->cases[i];
            ag_graph *g = ag_graph_new();
            cr_assert_not_null(g);
            ag_tensor *const in[AG_MAX_SRC] = {0};
            ag_tensor *y = c->build(g, in);
            cr_assert_null(y, "op %s, case %s: NULL inputs gave a tensor", ag_op_name(op), c->label);
            cr_assert(ag_graph_status(g) != AG_OK && ag_graph_error(g)[0], "op %s, case %s: no message on the graph",
                      ag_op_name(op), c->label);
            ag_graph_free(g);
        }
}

/* Whether a parameter list, "(ag_graph *g, ag_tensor *x, double eps)",
 * holds the graph and tensors only: an op's NULL inputs are walked for it
 * (every_op_fails_on_null_inputs), but its other arguments, which can be
 * bad in their own ways (an axis, a shape, eps), only by a line in the
 * walk. */
static bool graph_and_tensors_only(const char *params)
{
    const char *p = params + (*params == '(');
    while (*p && *p != ')') {
        size_t n = strcspn(p, ",)");
        char one[128];
        snprintf(one, sizeof one, "%.*s", (int)n, p);
        char type[128] = "";
        size_t k = 0;
        for (const char *c = one; *c && k + 1 < sizeof type; c++)
            if (!isspace((unsigned char)*c)) type[k++] = *c;
        type[k] = 0;
        if (strncmp(type, "ag_graph*", 9) && strncmp(type, "ag_tensor*", 10)) return false;
        if (!strncmp(type, "ag_tensor*", 10) && (strchr(type + 10, '*') || !strncmp(type + 10, "const", 5)))
            return false; /* ag_tensor **, ag_tensor *const *: arrays of them */
        p += n + (p[n] == ',');
    }
    return true;
}

/* Walked: in the walk, exempt, or ag_<op> for an op of the table whose
 * arguments are the graph and tensors only (params: its parameter list). */
static bool listed(const char *name, const char *params)
{
    for (size_t i = 0; i < NWALKS; i++)
        if (!strcmp(walks[i].name, name)) return true;
    for (size_t i = 0; i < NEXEMPT; i++)
        if (!strcmp(exempt[i].name, name)) return true;
    return !strncmp(name, "ag_", 3) && ag_op_find(name + 3) > 0 && graph_and_tensors_only(params);
}

/* The names the headers declare, for the check that nothing listed is stale. */
static char declared[512][96];
static size_t ndeclared;
static bool is_declared(const char *name)
{
    for (size_t i = 0; i < ndeclared; i++)
        if (!strcmp(declared[i], name)) return true;
    return false;
}

/* The header's text with its comments blanked out. */
static char *without_comments(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s (run from the repository root)", path);
    static char buf[1 << 17];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    for (char *p = buf; (p = strstr(p, "/*"));) {
        char *end = strstr(p + 2, "*/");
        cr_assert_not_null(end);
        for (; p < end + 2; p++)
            if (*p != '\n') *p = ' ';
    }
    return buf;
}

/* Every declaration at the start of a line that returns ag_status or a
 * pointer: "ag_status ag_x(", "ag_tensor *ag_x(", "const char *ag_x(". */
static void check_header(const char *path)
{
    const char *text = without_comments(path);
    for (const char *line = text; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
        if (*line == ' ' || *line == '#' || *line == '\n' || !strncmp(line, "typedef", 7) || *line == '}' ||
            !strncmp(line, "static", 6)) /* compat's inline aliases: they call walked functions */
            continue;
        const char *paren = strchr(line, '('), *nl = strchr(line, '\n');
        if (!paren || (nl && paren > nl)) continue;
        const char *name = paren;
        while (name > line && (isalnum((unsigned char)name[-1]) || name[-1] == '_')) name--;
        if (strncmp(name, "ag_", 3) || name == line) continue;
        char ret[128];
        snprintf(ret, sizeof ret, "%.*s", (int)(name - line), line);
        if (!strchr(ret, '*') && strcmp(ret, "ag_status ")) continue;
        char fn[96];
        snprintf(fn, sizeof fn, "%.*s", (int)(paren - name), name);
        const char *close = strchr(paren, ')');
        char params[512];
        snprintf(params, sizeof params, "%.*s", close ? (int)(close - paren + 1) : 0, paren);
        if (ag_op_find(fn + 3) > 0 && !graph_and_tensors_only(params))
            cr_assert(listed(fn, params), "%s: %s%s: the op %s takes arguments other than tensors: give it a line "
                      "in the walk of tests/test_error_walk.c (NUL(...) and G(...), with a bad one)", path, fn,
                      params, fn + 3);
        cr_assert(listed(fn, params), "%s: %s returns %s but is neither walked, exempt nor an op of the table", path,
                  fn, ret);
        cr_assert_lt(ndeclared, sizeof declared / sizeof declared[0]);
        snprintf(declared[ndeclared++], sizeof declared[0], "%s", fn);
    }
}

/* The rule above, on the declarations it must tell apart. */
Test(error_walk, an_op_with_other_arguments_needs_a_walk_line)
{
    cr_assert(graph_and_tensors_only("(ag_graph *g, ag_tensor *x)"));
    cr_assert(graph_and_tensors_only("(ag_graph *g, ag_tensor *cond, ag_tensor *a,\n ag_tensor *b)"));
    cr_assert(!graph_and_tensors_only("(ag_graph *g, ag_tensor *x, ag_tensor *weight, double eps)"));
    cr_assert(!graph_and_tensors_only("(ag_graph *g, ag_tensor *x, int axis, int keepdim)"));
    cr_assert(!graph_and_tensors_only("(ag_graph *g, int n, ag_tensor *const *xs, int axis)"));
    cr_assert(!graph_and_tensors_only("(ag_graph *g, ag_tensor *x, int k, int axis, int largest, ag_tensor **indices)"));
    /* an op of the table with no line in the walk (masked_softmax, which
     * is not public) is listed with tensors only, not with an eps; one
     * with a line is listed either way */
    cr_assert(!listed("ag_masked_softmax", "(ag_graph *g, ag_tensor *x, double eps)"));
    cr_assert(listed("ag_masked_softmax", "(ag_graph *g, ag_tensor *x)"));
    cr_assert(listed("ag_layer_norm", "(ag_graph *g, ag_tensor *x, ag_tensor *gain, ag_tensor *bias, double eps)"));
}

Test(error_walk, walk_is_complete)
{
    const char *headers[] = {"include/attograd_core.h", "include/attograd_io.h", "include/attograd_nn.h",
                             "include/attograd_optim.h", "include/attograd_text.h", "include/attograd_viz.h",
                             "include/attograd_compat.h"};
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) check_header(headers[i]);
    /* every listed name is declared: nothing stale in either list */
    for (size_t i = 0; i < NWALKS; i++) cr_assert(is_declared(walks[i].name), "%s is walked but not declared", walks[i].name);
    for (size_t i = 0; i < NEXEMPT; i++)
        cr_assert(is_declared(exempt[i].name), "%s is exempt but not declared", exempt[i].name);
}
