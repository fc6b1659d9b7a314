/* attograd_nn.h: layers built from the primitive ops: linear, layer norm,
 * attention, masks, multi-head attention, Add&Norm, feed-forward, token and
 * position embeddings, the Transformer blocks (encoder, decoder,
 * decoder-only; post-norm or pre-norm), the encoder-decoder translator and
 * a decoder-only GPT with its sampler.  Included by attograd.h.
 *
 * Nothing here has a backward of its own: every layer is a composition of
 * ops from the op table, and autodiff derives its gradient from theirs.
 * Two of those ops exist for attention's speed only, with backward
 * functions written by hand: masked_softmax (scale, mask and softmax in
 * one pass) and matmul's per-head form (reading the heads in place); the
 * textbook path below builds the same functions from public ops alone.
 *
 * Parameter names mirror a PyTorch state_dict of the same architecture
 * ("encoder.blocks.0.attention.w_q.weight"), so checkpoints move between the
 * two.  Every initializer is seeded by (seed, parameter name), so a
 * parameter's initial value does not depend on the order layers are made.
 *
 * The mask convention, used everywhere: a mask is a tensor of 0s and 1s that
 * broadcasts to the scores [B, H, T, S]; 1 means "query t may attend to key
 * s", 0 means "may not".  Masked scores are filled with `fill` before the
 * softmax: -INFINITY (AG_MASK_NEG_INF) makes a row with no allowed key give
 * zero weights; -1e9 (the PyTorch tutorial's) or -1e6 (d2l's) reproduce
 * those tutorials exactly, whatever the row. */
#ifndef ATTOGRAD_NN_H
#define ATTOGRAD_NN_H

#include "attograd_core.h"

#ifdef __cplusplus
extern "C" {
#endif

#include <math.h>

#define AG_MASK_NEG_INF (-INFINITY)

/* ---- initializers ---------------------------------------------------------- */

/* A seed for parameter `name` under a run seed (FNV-1a of the name, mixed). */
uint64_t ag_param_seed(uint64_t seed, const char *name);
/* U(-a, a), a = sqrt(6 / (fan_in + fan_out)), for a [fan_out, fan_in] weight. */
void ag_init_xavier_uniform(ag_tensor *w, uint64_t seed);

/* ---- linear ---------------------------------------------------------------- */

/* y = x W^T + b.  W [out, in] and b [out], as PyTorch's nn.Linear, which also
 * gives the default init: U(-1/sqrt(in), 1/sqrt(in)) for W and b. */
typedef struct ag_linear {
    ag_tensor *weight; /* [out, in] */
    ag_tensor *bias;   /* [out], or NULL */
    int in, out;
} ag_linear;

/* Makes "<prefix>.weight" (and "<prefix>.bias" when bias) in s. */
ag_status ag_linear_init(ag_linear *l, ag_store *s, const char *prefix, int in, int out, int bias,
                         uint64_t seed);
/* x [..., in] -> [..., out]. */
ag_tensor *ag_linear_forward(ag_graph *g, const ag_linear *l, ag_tensor *x);

/* ---- layer norm -------------------------------------------------------------- */

/* PyTorch's nn.LayerNorm(C): the op ag_layer_norm with its parameters
 * "<prefix>.weight" and "<prefix>.bias". */
typedef struct ag_layernorm {
    ag_tensor *weight, *bias; /* [C]: gain 1, bias 0 at init */
    double eps;               /* 1e-5 */
} ag_layernorm;
ag_status ag_layernorm_init(ag_layernorm *n, ag_store *s, const char *prefix, int C);
/* x [..., C] -> [..., C]. */
ag_tensor *ag_layernorm_forward(ag_graph *g, const ag_layernorm *n, ag_tensor *x);

/* Deprecated names of the above (kept until 1.0). */
typedef ag_layernorm ag_norm;
ag_status ag_norm_init(ag_norm *n, ag_store *s, const char *prefix, int C);
ag_tensor *ag_norm_forward(ag_graph *g, const ag_norm *n, ag_tensor *x);

/* ---- masks ------------------------------------------------------------------- */

/* [T, S]: 1 where key s <= query t (a decoder sees its past and itself). */
ag_tensor *ag_causal_mask(ag_graph *g, int T, int S);
/* From valid lengths (d2l's valid_lens): key s is allowed when
 * s < valid_lens[b] ([B] form: mask [B, 1, 1, S]) or s < valid_lens[b * T + t]
 * ([B, T] form, per_query = 1: mask [B, 1, T, S]). */
ag_tensor *ag_padding_mask(ag_graph *g, const int *valid_lens, int B, int per_query, int T, int S);

/* ---- attention --------------------------------------------------------------- */

/* Scaled dot-product attention:
 *   scores = Q K^T / sqrt(D)            [B, H, T, S]   matmul_bt
 *   scores = fill where mask == 0       (mask broadcasts to scores; NULL: none)
 *   P      = softmax(scores)            each row a distribution over keys
 *                                       (these two and the scale: one op,
 *                                       ops/masked_softmax.c)
 *   P      = dropout(P, p_drop)         (training only; d2l does this)
 *   out    = P V                        [B, H, T, D]
 * q [..., T, D], k [..., S, D], v [..., S, Dv].  *weights (if not NULL)
 * receives P (after dropout) so it can be looked at. */
ag_tensor *ag_attention(ag_graph *g, ag_tensor *q, ag_tensor *k, ag_tensor *v, ag_tensor *mask,
                        double fill, double p_drop, ag_tensor **weights);

/* Multi-head attention: H heads of width D = C / H.
 *   Q = x_q W_q^T (+b), K = x_kv W_k^T, V = x_kv W_v^T     [B, T|S, C]
 *   split heads: [B, T, C] -> [B, T, H, D]                  (reshape, a view)
 *   O = attention(Q, K, V) per head                         [B, T, H, D]
 *   concat heads: [B, T, H, D] -> [B, T, C]                 (reshape, a view)
 *   out = O W_o^T (+b)                                      [B, T, C]
 * No permute: the per-head products read head h of each sentence in place,
 * as the [B, H, T, D] that permute {0, 2, 1, 3} would copy out, and write
 * O with the heads side by side (ag_mha_forward_textbook does the permutes).
 * Self-attention: x_kv == x_q.  Cross-attention: x_q from the decoder
 * [B, T, C], x_kv from the encoder [B, S, C]. */
typedef struct ag_mha {
    ag_linear w_q, w_k, w_v, w_o;
    int C, H;
    double dropout; /* on the attention weights */
    int causal;     /* 1: query t attends to keys s <= t only (the mask is
                       made inside, and combined with any mask given) */
    int textbook;   /* 1: the textbook path (ag_mha_forward_textbook) */
    int qk_norm;    /* 1: q_norm and k_norm (ag_mha_add_qk_norm) apply */
    ag_layernorm q_norm, k_norm; /* [D] each: LayerNorm of every head's q, k */
} ag_mha;
/* Makes "<prefix>.w_q.weight" ... "<prefix>.w_o.bias", not causal; set
 * m->causal afterwards for a causal self-attention.  A bad argument
 * (AG_ERR_ARG) or C % H != 0 (AG_ERR_SHAPE) leaves a message in
 * ag_store_error(s). */
ag_status ag_mha_init(ag_mha *m, ag_store *s, const char *prefix, int C, int H, int bias,
                      double dropout, uint64_t seed);
ag_tensor *ag_mha_forward(ag_graph *g, const ag_mha *m, ag_tensor *x_q, ag_tensor *x_kv, ag_tensor *mask,
                  double fill, ag_tensor **weights);
/* QK-norm (ViT-22B, OLMo-2): each head's query and key, width D, go through
 * a LayerNorm before the dot product,
 *   scores = LN_q(q_h) LN_k(k_h)^T / sqrt(D),
 * so a score is bounded by the norms' gains, not by how large W_q, W_k and
 * the inputs grow.  Makes "<prefix>.q_norm.weight", "<prefix>.q_norm.bias",
 * "<prefix>.k_norm.*" (each [D], gain 1, bias 0) and sets m->qk_norm. */
ag_status ag_mha_add_qk_norm(ag_mha *m, ag_store *s, const char *prefix);

/* ---- the textbook path ---------------------------------------------------- */

/* The same functions as ag_attention and ag_mha_forward (same arguments,
 * values and gradients), built literally as the tutorials write them, one
 * public op per step, so that a graph picture shows every step:
 *   kt = transpose(k, -1, -2); scores = scale(matmul(q, kt), 1/sqrt(D));
 *   scores = masked_fill(scores, mask, fill); P = softmax(scores); out = P V
 * and for multi-head attention, heads split by reshape [B, T, H, D] plus
 * permute {0, 2, 1, 3}, joined by permute {0, 2, 1, 3} plus reshape.  The
 * fast path fuses the scale, mask and softmax into one op with a hand-written
 * backward (ops/masked_softmax.c) and reads the heads in place
 * (ag__matmul_heads): fewer passes over the scores and no copies.  An
 * ag_mha with .textbook = 1 takes this path wherever it is used (the
 * Transformer blocks too). */
ag_tensor *ag_attention_textbook(ag_graph *g, ag_tensor *q, ag_tensor *k, ag_tensor *v, ag_tensor *mask,
                                 double fill, double p_drop, ag_tensor **weights);
ag_tensor *ag_mha_forward_textbook(ag_graph *g, const ag_mha *m, ag_tensor *x_q, ag_tensor *x_kv,
                                   ag_tensor *mask, double fill, ag_tensor **weights);

/* ---- Add&Norm, feed-forward, positions ----------------------------------- */

/* Post-norm residual: layer_norm(x + dropout(y)). */
ag_tensor *ag_add_norm(ag_graph *g, const ag_layernorm *n, ag_tensor *x, ag_tensor *y, double p_drop);

/* The feed-forward layer's activation. */
typedef enum ag_activation {
    AG_ACT_RELU = 0,  /* max(x, 0): the original Transformer's */
    AG_ACT_GELU,      /* x Phi(x), erf form: nn.GELU() */
    AG_ACT_GELU_TANH  /* GPT-2's tanh form: nn.GELU(approximate="tanh") */
} ag_activation;

/* Position-wise feed-forward: dense2(act(dense1(x))), C -> F -> C. */
typedef struct ag_ffn {
    ag_linear dense1, dense2;
    ag_activation activation; /* relu unless made by ag_ffn_init_ex */
} ag_ffn;
ag_status ag_ffn_init(ag_ffn *f, ag_store *s, const char *prefix, int C, int F, uint64_t seed);
ag_status ag_ffn_init_ex(ag_ffn *f, ag_store *s, const char *prefix, int C, int F, ag_activation act,
                         uint64_t seed);
ag_tensor *ag_ffn_forward(ag_graph *g, const ag_ffn *f, ag_tensor *x);

/* Sinusoidal positions [T, C] (a leaf, no gradient):
 *   P[t, 2i] = sin(t / 10000^(2i / C)),  P[t, 2i+1] = cos(t / 10000^(2i / C)). */
ag_tensor *ag_positional_encoding(ag_graph *g, int T, int C);

/* ---- token and position embeddings ------------------------------------------- */

/* How positions enter the embedding. */
typedef enum ag_positions {
    AG_POS_LEARNED = 0, /* a learned table [max_len, C] (GPT-2's wpe) */
    AG_POS_SINUSOIDAL,  /* ag_positional_encoding, no parameters */
    AG_POS_NONE         /* tokens only */
} ag_positions;

/* x[b, t] = tokens[ids[b, t]] + positions[t]:  ids [B, T] -> [B, T, C].
 * Parameters "<prefix>.tokens.weight" [V, C] and, when learned,
 * "<prefix>.positions.weight" [max_len, C]; both N(0, 1) at init, as
 * nn.Embedding.  The token table can also be the output layer (weight
 * tying, as GPT-2): ag_embedding_layer_logits. */
typedef struct ag_embedding_layer {
    ag_tensor *tokens;    /* [V, C] */
    ag_tensor *positions; /* [max_len, C], or NULL unless AG_POS_LEARNED */
    int V, C, max_len;
    ag_positions kind;
} ag_embedding_layer;
/* max_len bounds T for learned positions (ignored otherwise). */
ag_status ag_embedding_layer_init(ag_embedding_layer *e, ag_store *s, const char *prefix, int V, int C,
                                  int max_len, ag_positions kind, uint64_t seed);
/* ids [B, T] (B * T ints, each in [0, V)) -> [B, T, C].  T > max_len with
 * learned positions is an error on g. */
ag_tensor *ag_embedding_layer_forward(ag_graph *g, const ag_embedding_layer *e, const int *ids, int B, int T);
/* The tied output layer: logits = x tokens^T, x [..., C] -> [..., V]. */
ag_tensor *ag_embedding_layer_logits(ag_graph *g, const ag_embedding_layer *e, ag_tensor *x);

/* ---- positions and a class token for inputs that are not token ids ------------ */

/* A learned table of positions added to any x [..., T, C] (patches,
 * features): y = x + P[:T], broadcast over the leading axes.  P [max_T, C]
 * is "<prefix>.weight", nn.Embedding's name and layout (GPT-2's
 * "wpe.weight"), initialised N(0, 0.02) as GPT-2's wpe (ViT's pos_embed is
 * trunc_normal(std 0.02): the same scale). */
typedef struct ag_learned_positions {
    ag_tensor *weight; /* [max_T, C] */
    int max_T, C;
} ag_learned_positions;
/* Makes "<prefix>.weight" in s; a bad argument is AG_ERR_ARG with the
 * message in ag_store_error(s). */
ag_status ag_learned_positions_init(ag_learned_positions *p, ag_store *s, const char *prefix, int max_T, int C,
                                    uint64_t seed);
/* x [..., T, C], 1 <= T <= max_T -> x + P[:T]; another shape is an error
 * on g naming the layer and x's shape. */
ag_tensor *ag_learned_positions_forward(ag_graph *g, const ag_learned_positions *p, ag_tensor *x);

/* ViT's class token in front of a sequence: tok [C], [1, C] or [1, 1, C]
 * (a parameter, usually), x [B, N, C] -> [B, N + 1, C] =
 * concat(expand(tok, [B, 1, C]), x) along axis 1 (PyTorch's
 * torch.cat([tok.expand(B, -1, -1), x], dim=1)).  tok's gradient sums over
 * the batch.  A token that is not C values is an error on g. */
ag_tensor *ag_prepend_token(ag_graph *g, ag_tensor *tok, ag_tensor *x);

/* ---- Transformer blocks ----------------------------------------------------- */

/* Options of a block; all zeros (or a NULL pointer) is the original
 * Transformer's block, as ag_encoder_block_init and ag_decoder_block_init
 * make it. */
typedef struct ag_block_config {
    /* Where the layer norms sit around each sublayer f (attention, FFN):
     *   0, post-norm:  x = norm(x + dropout(f(x)))   (Vaswani et al.)
     *   1, pre-norm:   x = x + dropout(f(norm(x)))   (GPT-2; PyTorch's
     *                  norm_first=True): the residual path is never
     *                  normalised, so deep stacks train without warmup;
     *                  a final layer norm after the last block is the
     *                  model's (ag_gpt has one). */
    int pre_norm;
    ag_activation activation; /* the FFN's: relu (0), gelu, gelu_tanh */
    /* The self-attention is causal: query t sees keys s <= t, with no mask
     * from the caller (ag_mha.causal).  Any mask given is applied too. */
    int causal;
    int qk_norm; /* 1: every attention of the block has QK-norm (ag_mha_add_qk_norm) */
} ag_block_config;

/* Encoder block (post-norm): x = addnorm1(x, self_attention(x, x, src_mask));
 *                            x = addnorm2(x, ffn(x)).
 * With cfg.causal it is the decoder-only (GPT) block. */
typedef struct ag_encoder_block {
    ag_mha attention;
    ag_layernorm norm1, norm2;
    ag_ffn ffn;
    double dropout;
    ag_block_config cfg;
} ag_encoder_block;

/* Decoder block (post-norm): x = addnorm1(x, self_attention(x, x, causal mask));
 *                            x = addnorm2(x, cross_attention(x, enc, src_mask));
 *                            x = addnorm3(x, ffn(x)).
 * Pre-norm: norm1, norm2, norm3 move to the sublayers' inputs (the
 * encoder's output enc is used as it is, as nn.TransformerDecoderLayer). */
typedef struct ag_decoder_block {
    ag_mha self_attention, cross_attention;
    ag_layernorm norm1, norm2, norm3;
    ag_ffn ffn;
    double dropout;
    ag_block_config cfg;
} ag_decoder_block;

/* The decoder-only block: causal self-attention and an FFN, nothing from an
 * encoder; an encoder block made with cfg.causal = 1. */
typedef ag_encoder_block ag_decoder_only_block;

/* Parameters under "<prefix>.attention.*", "<prefix>.norm1.*", "<prefix>.ffn.dense1.*",
 * ... ("<prefix>.self_attention.*", "<prefix>.cross_attention.*" for the decoder).
 * Linear weights Xavier-uniform with zero biases (the translator's init). */
ag_status ag_encoder_block_init(ag_encoder_block *b, ag_store *s, const char *prefix, int C, int H,
                                int F, double dropout, uint64_t seed);
ag_status ag_decoder_block_init(ag_decoder_block *b, ag_store *s, const char *prefix, int C, int H,
                                int F, double dropout, uint64_t seed);
/* The same with options (cfg NULL: all zeros).  Same parameter names. */
ag_status ag_encoder_block_init_ex(ag_encoder_block *b, ag_store *s, const char *prefix, int C, int H, int F,
                                   double dropout, const ag_block_config *cfg, uint64_t seed);
ag_status ag_decoder_block_init_ex(ag_decoder_block *b, ag_store *s, const char *prefix, int C, int H, int F,
                                   double dropout, const ag_block_config *cfg, uint64_t seed);
/* An encoder block with cfg (NULL: zeros) and causal forced on. */
ag_status ag_decoder_only_block_init(ag_decoder_only_block *b, ag_store *s, const char *prefix, int C, int H,
                                     int F, double dropout, const ag_block_config *cfg, uint64_t seed);
/* x [B, S, C]; src_mask broadcastable to [B, H, S, S] or NULL; *weights gets
 * the attention weights [B, H, S, S] when not NULL. */
ag_tensor *ag_encoder_block_forward(ag_graph *g, const ag_encoder_block *b, ag_tensor *x, ag_tensor *src_mask,
                            ag_tensor **weights);
/* x [B, T, C], enc [B, S, C]; self_mask (usually the causal mask [T, T]) and
 * src_mask (padding of the source, [B, 1, 1, S]) may be NULL.  self_w and
 * cross_w receive the two attention weight tensors when not NULL. */
ag_tensor *ag_decoder_block_forward(ag_graph *g, const ag_decoder_block *b, ag_tensor *x, ag_tensor *enc,
                            ag_tensor *self_mask, ag_tensor *src_mask, ag_tensor **self_w,
                            ag_tensor **cross_w);
/* x [B, T, C] -> [B, T, C], causal; *weights gets [B, H, T, T] when not
 * NULL. */
ag_tensor *ag_decoder_only_block_forward(ag_graph *g, const ag_decoder_only_block *b, ag_tensor *x,
                                         ag_tensor **weights);


/* ---- the encoder-decoder Transformer (the translator's model) ----------- */

/* The initial weights ag_seq2seq_init draws (LayerNorm gains 1, biases 0 in
 * both):
 *   AG_SEQ2SEQ_INIT_SCALED  embeddings N(0, 1/C), so that E * sqrt(C) has
 *                           unit variance like the positions; linear weights
 *                           Xavier-uniform; linear biases 0.
 *   AG_SEQ2SEQ_INIT_D2L     what d2l.ai's train_seq2seq gives its Transformer:
 *                           embeddings N(0, 1) (nn.Embedding's default), so
 *                           E * sqrt(C) has variance C; linear weights
 *                           Xavier-uniform; the FFN's and the output layer's
 *                           biases U(-1/sqrt(in), 1/sqrt(in)) (nn.Linear's
 *                           default, which d2l keeps); the attention
 *                           projections' biases 0 (d2l's have none). */
enum { AG_SEQ2SEQ_INIT_SCALED = 0, AG_SEQ2SEQ_INIT_D2L = 1 };

typedef struct ag_seq2seq_config {
    int src_vocab, tgt_vocab; /* V of each side */
    int hidden;               /* C, 64 */
    int heads;                /* H, 4 */
    int ffn;                  /* F, 128 */
    int layers;               /* N encoder and N decoder blocks, 2 */
    int max_len;              /* longest sequence (positions), 10 */
    double dropout;           /* 0.1 */
    int init;                 /* AG_SEQ2SEQ_INIT_*; 0 (scaled) when left out */
    int pre_norm;             /* 1: pre-norm blocks and a final LayerNorm per stack */
    int qk_norm;              /* 1: QK-norm in every attention (ag_mha_add_qk_norm) */
} ag_seq2seq_config;

/* Parameters: "encoder.embedding.weight" [Vs, C], "encoder.blocks.<i>.*",
 * "decoder.embedding.weight" [Vt, C], "decoder.blocks.<i>.*",
 * "decoder.dense.weight" [Vt, C], "decoder.dense.bias" [Vt].  With pre_norm
 * also "encoder.norm.*" and "decoder.norm.*" [C], the LayerNorms after the
 * last block of each stack (nn.Transformer with norm_first=True); with
 * qk_norm every attention's "<prefix>.q_norm.*" and "<prefix>.k_norm.*". */
typedef struct ag_seq2seq {
    ag_seq2seq_config cfg;
    ag_tensor *src_embedding, *tgt_embedding;
    ag_encoder_block *enc; /* cfg.layers of each, owned */
    ag_decoder_block *dec;
    ag_linear dense;
    ag_layernorm enc_norm, dec_norm; /* cfg.pre_norm only: after each stack */
} ag_seq2seq;

/* Make every parameter in s, drawn as cfg->init says (AG_SEQ2SEQ_INIT_*),
 * seeded.  Errors (a bad config value, an unknown init among them) name the
 * problem in ag_store_error(s). */
ag_status ag_seq2seq_init(ag_seq2seq *m, ag_store *s, const ag_seq2seq_config *cfg, uint64_t seed);
void ag_seq2seq_free(ag_seq2seq *m);

/* Encoder: src ids [B, S] (padded), src_valid [B] -> [B, S, C].
 *   x = dropout(embed(src) * sqrt(C) + P[:S]);  x = block_i(x, padding mask)
 * *src_mask (if not NULL) receives the key-padding mask [B, 1, 1, S]. */
ag_tensor *ag_seq2seq_encode(ag_graph *g, const ag_seq2seq *m, const int *src, const int *src_valid, int B,
                             int S, ag_tensor **src_mask);
/* Decoder: tgt_in ids [B, T] (<bos> + target shifted) over enc [B, S, C]
 * -> logits [B, T, Vt].  Causal self-attention, cross-attention with
 * src_mask. */
ag_tensor *ag_seq2seq_decode(ag_graph *g, const ag_seq2seq *m, ag_tensor *enc, ag_tensor *src_mask,
                             const int *tgt_in, int B, int T);
/* The attention weights of one forward pass, for pictures: per layer, the
 * encoder's self-attention [B, H, S, S], the decoder's causal
 * self-attention [B, H, T, T] and its cross-attention [B, H, T, S]. */
#define AG_SEQ2SEQ_MAX_LAYERS 16
typedef struct ag_seq2seq_weights {
    int layers;
    ag_tensor *enc_self[AG_SEQ2SEQ_MAX_LAYERS];
    ag_tensor *dec_self[AG_SEQ2SEQ_MAX_LAYERS];
    ag_tensor *dec_cross[AG_SEQ2SEQ_MAX_LAYERS];
} ag_seq2seq_weights;
/* Encode src and decode tgt_in [B, T] once (eval mode), filling w with every
 * layer's attention weights (the first AG_SEQ2SEQ_MAX_LAYERS layers).
 * Returns the logits [B, T, Vt]. */
ag_tensor *ag_seq2seq_trace(ag_graph *g, const ag_seq2seq *m, const int *src, const int *src_valid, int B, int S,
                            const int *tgt_in, int T, ag_seq2seq_weights *w);
/* Mean cross-entropy over the target tokens that are not <pad> (id 0).
 * Computed on the real tokens only: a source's first src_valid[b]
 * positions, a target's positions up to its last non-<pad> token; every
 * position-wise layer skips the padding (attention alone sees the padded
 * layout).  The same value as the padded computation. */
ag_tensor *ag_seq2seq_loss(ag_graph *g, const ag_seq2seq *m, const int *src, const int *src_valid,
                           const int *tgt_in, const int *tgt_out, int B, int S, int T);
/* ---- data-parallel training: the translator's batch on several threads -- */

/* An ag_team (attograd.h) for the translator: n workers, replicas of m made
 * by ag_seq2seq_init.  NULL on a bad argument or no memory, with the
 * reason in err (errlen bytes). */
typedef struct ag_seq2seq_team ag_seq2seq_team;
ag_seq2seq_team *ag_seq2seq_team_new(const ag_seq2seq *m, ag_store *s, int n, char *err, size_t errlen);
void ag_seq2seq_team_free(ag_seq2seq_team *t);
int ag_seq2seq_team_size(const ag_seq2seq_team *t);

/* The batch's loss, as ag_seq2seq_loss gives it (the mean cross-entropy of
 * its target tokens), into *loss, and its gradient added into the
 * parameters' gradients, as ag_backward would (ag_team_step).  The batch is
 * cut into min(n, B) runs of consecutive sentences of about equal work
 * (a source token counts 1, a target token 2); each part weighs its share of the target
 * tokens.  With n = 1 it is ag_seq2seq_loss and ag_backward on g, bit for
 * bit.  Returns g's status; on failure ag_graph_error(g) names the problem
 * (and the worker and its sentences). */
ag_status ag_seq2seq_team_step(ag_seq2seq_team *t, ag_graph *g, const int *src, const int *src_valid,
                               const int *tgt_in, const int *tgt_out, int B, int S, int T, double *loss);

/* Greedy decoding of B sentences at once, in no-grad mode: the encoder
 * runs once (the cross-attentions' keys and values too); each step decodes
 * only the newest position, its self-attention reading the earlier
 * positions' keys and values from a key/value cache (the tokens of
 * decoding the whole prefix at every step).  Allocates per call, never per
 * step.  out [B, max_len] gets the ids up to (not including) <eos>,
 * out_len [B] their counts.  Uses (and resets) g; returns the graph's
 * status. */
ag_status ag_seq2seq_greedy(ag_graph *g, const ag_seq2seq *m, const int *src, const int *src_valid, int B,
                            int S, int bos, int eos, int max_len, int *out, int *out_len);

/* ---- a decoder-only Transformer (GPT) --------------------------------------- */

typedef struct ag_gpt_config {
    int vocab;      /* V */
    int context;    /* T at most: the learned positions, 32 */
    int hidden;     /* C, 64 */
    int heads;      /* H, 4 */
    int ffn;        /* F, 256 */
    int layers;     /* L blocks, 2 */
    double dropout; /* after the embedding and in every block, 0 */
    ag_activation activation; /* AG_ACT_GELU (erf) or AG_ACT_GELU_TANH; relu works too */
    int untied;     /* 0: the output layer is the token table (GPT-2's tying);
                       1: a separate "head.weight" [V, C] */
} ag_gpt_config;

/* logits = head(norm(block_L(... block_1(embed(ids))))), pre-norm causal
 * blocks (ag_decoder_only_block).  Parameters, as the PyTorch twin's
 * state_dict (tests/reference/gpt.py):
 *   "embedding.tokens.weight" [V, C], "embedding.positions.weight" [T, C],
 *   "blocks.<i>.attention.w_{q,k,v,o}.{weight,bias}", "blocks.<i>.norm1.*",
 *   "blocks.<i>.ffn.dense{1,2}.{weight,bias}", "blocks.<i>.norm2.*",
 *   "norm.weight", "norm.bias", and "head.weight" [V, C] when untied. */
typedef struct ag_gpt {
    ag_gpt_config cfg;
    ag_embedding_layer embedding;
    ag_decoder_only_block *blocks; /* cfg.layers, owned */
    ag_layernorm norm;             /* the final layer norm */
    ag_linear head;                /* unused (weight NULL) when tied */
} ag_gpt;

/* Make every parameter in s, initialised as GPT-2 (seeded): embeddings and
 * linear weights N(0, 0.02), the residual projections (w_o, dense2)
 * N(0, 0.02 / sqrt(2 L)), biases 0, layer norms gain 1 and bias 0.  A bad
 * config value is AG_ERR_ARG with the message in ag_store_error(s). */
ag_status ag_gpt_init(ag_gpt *m, ag_store *s, const ag_gpt_config *cfg, uint64_t seed);
void ag_gpt_free(ag_gpt *m);
/* ids [B, T] (T <= context) -> logits [B, T, V]. */
ag_tensor *ag_gpt_forward(ag_graph *g, const ag_gpt *m, const int *ids, int B, int T);
/* Mean cross-entropy of the logits of ids [B, T] against targets [B, T]
 * (each position predicts the next character: targets[t] = ids[t + 1]). */
ag_tensor *ag_gpt_loss(ag_graph *g, const ag_gpt *m, const int *ids, const int *targets, int B, int T);

/* ---- sampling ---------------------------------------------------------------- */

/* How the next token is drawn from a row of logits. */
typedef struct ag_sample_opts {
    double temperature; /* p ~ exp(logit / temperature); 0: greedy (argmax) */
    int top_k;          /* draw among the top_k largest logits only; 0: all */
    uint64_t seed;      /* the same seed gives the same tokens */
    int no_cache;       /* 1: recompute the whole window for every token
                           (no key/value cache); the same tokens, slower */
} ag_sample_opts;

/* One draw from logits [V]: among the logits >= the top_k-th largest (all
 * when top_k is 0 or >= V), token v with probability proportional to
 * exp(logit_v / temperature), from rng; temperature 0 is the argmax (the
 * lowest id on a tie).  Non-finite logits are never drawn.  work holds V
 * doubles (scratch).  Returns the id, or -1 when no logit is finite (or an
 * argument is NULL or V < 1). */
int ag_sample_logits(const ag_real *logits, int V, double temperature, int top_k, ag_rng *rng, double *work);

/* Continue prompt (n_prompt >= 1 ids) by n_new tokens into out (n_prompt +
 * n_new ids: the prompt, then the new ones).  Each token's logits are
 * those of the model on the last `context` ids, in eval and no-grad mode,
 * computed with a key/value cache: the prompt's window once, then one row
 * per token; once the sequence outgrows the context, the cropped window is
 * recomputed for each token.  The token is drawn from the last position's
 * logits.  Allocates per call, never per token.  Uses (and resets) g;
 * returns its status (an error names the problem, e.g. an id out of range). */
ag_status ag_gpt_sample(ag_graph *g, const ag_gpt *m, const int *prompt, int n_prompt, int n_new,
                        const ag_sample_opts *opts, int *out);

/* ---- incremental decoding: the key/value cache ------------------------------- */

/* The keys and values that every block's attention computed for the
 * positions seen so far (context rows per block, zero at first), so that
 * the next token's forward computes only its own row:
 *
 *   ag_gpt_cache *c = ag_gpt_cache_new(&m);
 *   logits = ag_gpt_forward_cached(g, &m, c, prompt, n);  [1, n, V]
 *   logits = ag_gpt_forward_cached(g, &m, c, &next, 1);   [1, 1, V]: position n
 *
 * Each call's logits equal those of ag_gpt_forward on the whole prefix (to
 * rounding).  The learned positions end at the context: a sequence longer
 * than that is cropped to its newest `context` ids and recomputed from an
 * emptied cache (ag_gpt_sample does this, as nanoGPT's generate crops). */
typedef struct ag_gpt_cache ag_gpt_cache;
/* NULL when out of memory or m is not made. */
ag_gpt_cache *ag_gpt_cache_new(const ag_gpt *m);
void ag_gpt_cache_free(ag_gpt_cache *c);
void ag_gpt_cache_clear(ag_gpt_cache *c); /* forget every position */
int ag_gpt_cache_len(const ag_gpt_cache *c); /* positions held */
/* ids [T] at positions len .. len + T - 1 -> logits [1, T, V]; the cache
 * then holds len + T positions.  len + T > context is AG_ERR_SHAPE on g
 * (the cache is unchanged).  Eval mode: a model with dropout on a graph in
 * training mode is AG_ERR_STATE.  Best in no-grad mode (ag_graph_set_grad). */
ag_tensor *ag_gpt_forward_cached(ag_graph *g, const ag_gpt *m, ag_gpt_cache *c, const int *ids, int T);

#ifdef __cplusplus
}
#endif
#endif
