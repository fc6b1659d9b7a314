/* attograd_nn.h: layers and models built from the ops: linear, layer norm,
 * masks, attention, Add&Norm, feed-forward, embeddings, Transformer blocks
 * (post- or pre-norm), the encoder-decoder translator and a GPT.  Parameter
 * names are a PyTorch state_dict's; inits are seeded by (seed, name).
 * Gradients come from the ops', hand-written for the fused ones: linear (and
 * linear_add, a residual added); multi-head attention with no dropout and no
 * weights asked is one `attention` node, otherwise (and in ag_attention)
 * matmuls (matmul's backward) around `masked_softmax`.  The _textbook
 * functions use public ops and linear only (docs/design.md).
 * A mask is 0/1, broadcast to the scores [B, H, T, S]; 1: query t may see
 * key s; masked scores get `fill` before the softmax. */
#ifndef ATTOGRAD_NN_H
#define ATTOGRAD_NN_H

#include "attograd_core.h"

#ifdef __cplusplus
extern "C" {
#endif

#include <math.h>

#define AG_MASK_NEG_INF (-INFINITY)

/* ---- initializers ---------------------------------------------------------- */

/* The seed of parameter `name` under a run seed. */
uint64_t ag_param_seed(uint64_t seed, const char *name);
/* U(-a, a), a = sqrt(6 / (fan_in + fan_out)), for a [fan_out, fan_in] weight. */
void ag_init_xavier_uniform(ag_tensor *w, uint64_t seed);

/* Which initial values a layer, block or model draws (docs/init.md has the
 * table of every layer under every scheme).  Layer norms are always gain 1,
 * bias 0. */
typedef enum ag_init_scheme {
    AG_INIT_DEFAULT = 0, /* the layer's own default, as before options existed */
    AG_INIT_TORCH,       /* PyTorch's module defaults: every linear as
                            nn.Linear, U(-1/sqrt(in), 1/sqrt(in)) weights and
                            biases; embeddings N(0, 1) as nn.Embedding */
    AG_INIT_NORMAL,      /* weights and embeddings N(0, std), biases 0 */
    AG_INIT_GPT2,        /* weights and embeddings N(0, 0.02), the residual
                            projections (w_o, dense2) N(0, 0.02 / sqrt(2 L)),
                            biases 0 */
    AG_INIT_XAVIER       /* linear weights Xavier-uniform, biases 0 (the
                            blocks' default); embeddings N(0, 1) */
} ag_init_scheme;

/* A scheme and its numbers; all zeros is AG_INIT_DEFAULT. */
typedef struct ag_init_opts {
    ag_init_scheme scheme;
    double std; /* AG_INIT_NORMAL: the standard deviation (> 0);
                   AG_INIT_GPT2: in place of 0.02 when > 0 */
    int layers; /* AG_INIT_GPT2: L, the blocks of the model (0: 1; a GPT
                   fills in its own) */
} ag_init_opts;

/* ---- linear ---------------------------------------------------------------- */

/* y = x W^T + b, nn.Linear's layout and init U(-1/sqrt(in), 1/sqrt(in)). */
typedef struct ag_linear_layer {
    ag_tensor *weight; /* [out, in] */
    ag_tensor *bias;   /* [out], or NULL */
    int in, out;
} ag_linear_layer;

/* Makes "<prefix>.weight" (and "<prefix>.bias" when bias) in s; an error's
 * reason in ag_store_error(s), as for every _init below. */
ag_status ag_linear_layer_init(ag_linear_layer *l, ag_store *s, const char *prefix, int in, int out, int bias,
                         uint64_t seed);
/* The same with an init (NULL or AG_INIT_DEFAULT: nn.Linear's, as above);
 * a bad init is AG_ERR_ARG with the message in ag_store_error(s). */
ag_status ag_linear_layer_init_ex(ag_linear_layer *l, ag_store *s, const char *prefix, int in, int out, int bias,
                            const ag_init_opts *init, uint64_t seed);
/* x [..., in] -> [..., out]. */
ag_tensor *ag_linear_layer_forward(ag_graph *g, const ag_linear_layer *l, ag_tensor *x);
/* res + x W^T + b, res [..., out]: one node, the bits of ag_add(g, res,
 * ag_linear_layer_forward(g, l, x)) and less kept (a residual branch's
 * last projection, as ag_mha_layer's). */
ag_tensor *ag_linear_layer_forward_add(ag_graph *g, const ag_linear_layer *l, ag_tensor *x, ag_tensor *res);

/* ---- layer norm -------------------------------------------------------------- */

/* nn.LayerNorm(C): ag_layer_norm with "<prefix>.weight" and "<prefix>.bias". */
typedef struct ag_layer_norm_layer {
    ag_tensor *weight, *bias; /* [C]: gain 1, bias 0 at init */
    double eps;               /* 1e-5 */
} ag_layer_norm_layer;
ag_status ag_layer_norm_layer_init(ag_layer_norm_layer *n, ag_store *s, const char *prefix, int C);
/* x [..., C] -> [..., C]. */
ag_tensor *ag_layer_norm_layer_forward(ag_graph *g, const ag_layer_norm_layer *n, ag_tensor *x);

/* ---- masks ------------------------------------------------------------------- */

/* [T, S]: 1 where key s <= query t (a decoder sees its past and itself). */
ag_tensor *ag_causal_mask(ag_graph *g, int T, int S);
/* Key s allowed when s < valid_lens[b] (mask [B, 1, 1, S]) or, per_query,
 * s < valid_lens[b * T + t] (mask [B, 1, T, S]): d2l's valid_lens. */
ag_tensor *ag_padding_mask(ag_graph *g, const int *valid_lens, int B, int per_query, int T, int S);

/* ---- attention --------------------------------------------------------------- */

/* out = dropout(P) V, P = softmax(Q K^T / sqrt(D), fill where mask == 0):
 * q [..., T, D], k [..., S, D], v [..., S, Dv] -> [..., T, Dv].  mask may
 * be NULL; *weights (if not NULL) gets P after dropout.  Up to 4 axes,
 * the batch axes alike and no weights asked: a call of
 * ag_scaled_dot_product_attention; otherwise three nodes that keep P. */
ag_tensor *ag_attention(ag_graph *g, ag_tensor *q, ag_tensor *k, ag_tensor *v, ag_tensor *mask,
                        double fill, double p_drop, ag_tensor **weights);

/* PyTorch 2's F.scaled_dot_product_attention: out = dropout(P) V with
 *   P = softmax(mask ? scale Q K^T + bias : fill), row-wise,
 * q [B, H, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv] -> [B, H, T, Dv];
 * H a multiple of Hkv: query head h reads key/value head h / (H / Hkv)
 * (grouped-query attention; Hkv = 1 is multi-query attention).  One node
 * that keeps no [T, S] matrix past 256 keys (docs/attention_long.md);
 * cfg NULL: all zeros. */
typedef enum ag_causal {
    AG_CAUSAL_NONE,
    AG_CAUSAL_TOP_LEFT,     /* query t sees keys s <= t (PyTorch's is_causal) */
    AG_CAUSAL_BOTTOM_RIGHT, /* s <= t + S - T: the queries are the last T of
                               the S positions (a KV cache, a prefix;
                               PyTorch's causal_lower_right) */
} ag_causal;
typedef struct ag_sdpa_config {
    ag_tensor *mask;   /* NULL, or 0/1 broadcast to [B, H, T, S]: 0 hides key s
                          from query t (it gets no gradient) */
    double fill;       /* a hidden key's score; 0 means -inf (PyTorch's): a
                          query that sees no key gets 0.  -1e9: a uniform row */
    ag_causal causal;  /* hides keys as a mask 0 does, with no tensor */
    double dropout_p;  /* on P, in training mode (ag_graph_set_training),
                          inside the node: no mask is kept */
    uint64_t seed;     /* dropout's: the same seed, the same mask; 0: the
                          next draw of g's stream (ag_graph_seed) */
    double scale;      /* 0 means 1 / sqrt(D) */
    int heads_layout;  /* 1: q [B, T, H, D], k and v [B, S, Hkv, D] and the
                          result [B, T, H, Dv]: a linear layer's [B, T, C]
                          reshaped, read in place (no permute) */
    ag_tensor *bias;   /* NULL, or an additive mask (PyTorch's float
                          attn_mask: ALiBi, relative positions) broadcast
                          to [B, H, T, S], added to the scaled scores of
                          the keys the mask and causal rule keep; -inf
                          hides a key (a row all -inf gets 0, as with fill
                          -inf); a NaN or +inf makes NaN only the rows of
                          the queries that see its key.  With mask, both
                          apply (a hidden key's score is fill).  One that
                          requires a gradient gets it (summed over the
                          axes it is broadcast along) on the path the
                          call takes anyway (flash, P kept); a shape
                          that does not broadcast is AG_ERR_SHAPE */
} ag_sdpa_config;
ag_tensor *ag_scaled_dot_product_attention(ag_graph *g, ag_tensor *q, ag_tensor *k, ag_tensor *v,
                                           const ag_sdpa_config *cfg);

/* A key/value cache for a decoder written from the calls above: per
 * layer, the keys and values [B, len, Hkv, D] of the positions seen so far
 * (up to S_max), so that a decoding step computes only its new rows.
 * NULL when a size is < 1 or out of memory. */
typedef struct ag_kv_cache ag_kv_cache;
ag_kv_cache *ag_kv_cache_new(int layers, int B, int S_max, int Hkv, int D);
void ag_kv_cache_free(ag_kv_cache *c);
void ag_kv_cache_clear(ag_kv_cache *c);      /* forget every position */
int ag_kv_cache_len(const ag_kv_cache *c);   /* positions layer 0 holds */
/* Copies the new rows k, v [B, T, Hkv, D] (values, not a link: no
 * gradient flows into the cache) after layer's len rows and sets *k_all,
 * *v_all to its rows [0, len + T) as [B, len + T, Hkv, D], views of the
 * cache valid until its next append or clear.  A step then attends as
 *   ag_scaled_dot_product_attention(g, q, k_all, v_all, &(ag_sdpa_config){
 *       .causal = AG_CAUSAL_BOTTOM_RIGHT, .heads_layout = 1})
 * with q [B, T, H, D].  B = 1 copies only the new rows; B > 1 also moves
 * the rows of sequences 1 .. B - 1 (the views are packed).  A layer out of
 * range is AG_ERR_ARG, a shape other than [B, T >= 1, Hkv, D] or more than
 * S_max rows AG_ERR_SHAPE, k or v needing a gradient on a graph that
 * records them AG_ERR_STATE (decode in no-grad mode); cache unchanged. */
ag_status ag_kv_cache_append(ag_graph *g, ag_kv_cache *c, int layer, ag_tensor *k, ag_tensor *v, ag_tensor **k_all,
                             ag_tensor **v_all);

/* Which path the attention that made y took (y as an attention call
 * returned it): "flash" (no [T, S] matrix: each row's max and sum),
 * "P kept" (the fused node's kernel, 256 keys or fewer), "plain" (the
 * fused node's plain code: AG_KERNELS_REFERENCE, or a NaN or inf input
 * with fill -inf), "three nodes" (the weights asked for, or an
 * ag_mha_layer's dropout over 256 keys or fewer), "textbook"; NULL when
 * y is no attention's result.  With dropout (ag_attention's p_drop, the
 * sdpa's dropout_p, an ag_mha_layer's over more than 256 keys) the fused
 * node draws its mask inside, on either of its kernels' paths.
 * *kept_bytes (may be NULL) gets what it keeps for the backward.
 * docs/attention_long.md. */
const char *ag_attention_path(const ag_tensor *y, size_t *kept_bytes);
/* The same over every attention on g's tape. */
typedef struct ag_attention_stats {
    int flash, p_kept, plain, three_nodes, textbook; /* attentions per path */
    size_t kept_bytes;                               /* what they keep, in all */
} ag_attention_stats;
void ag_graph_attention_stats(const ag_graph *g, ag_attention_stats *st);

/* Multi-head attention, H heads of width D = C / H: out = concat_h(
 * attention(x_q W_q^T, x_kv W_k^T, x_kv W_v^T)_h) W_o^T (+ biases);
 * x_q [B, T, C], x_kv [B, S, C] (x_q itself for self-attention). */
typedef struct ag_mha_layer {
    ag_linear_layer w_q, w_k, w_v, w_o;
    int C, H;
    double dropout; /* on the attention weights, in training mode: drawn
                       inside the fused node over more than 256 keys (no
                       mask kept), else as ag_dropout on a kept P */
    int causal;     /* 1: query t attends to keys s <= t only (a rule, with
                       any mask given; a [T, S] mask only where the
                       weights are asked for) */
    int textbook;   /* 1: the textbook path (ag_mha_layer_forward_textbook) */
    int qk_norm;    /* 1: q_norm and k_norm (ag_mha_layer_add_qk_norm) apply */
    ag_layer_norm_layer q_norm, k_norm; /* [D] each: LayerNorm of every head's q, k */
} ag_mha_layer;
/* "<prefix>.w_q.weight" ... "<prefix>.w_o.bias", not causal; C % H != 0 is
 * AG_ERR_SHAPE. */
ag_status ag_mha_layer_init(ag_mha_layer *m, ag_store *s, const char *prefix, int C, int H, int bias,
                      double dropout, uint64_t seed);
/* -> [B, T, C]; *weights (if not NULL) gets P [B, H, T, S], which then
 * is kept (three nodes); otherwise one fused node, dropout included past
 * 256 keys. */
ag_tensor *ag_mha_layer_forward(ag_graph *g, const ag_mha_layer *m, ag_tensor *x_q, ag_tensor *x_kv, ag_tensor *mask,
                  double fill, ag_tensor **weights);
/* QK-norm (ViT-22B, OLMo-2): each head's query and key, width D, go through
 * a LayerNorm before the dot product,
 *   scores = LN_q(q_h) LN_k(k_h)^T / sqrt(D),
 * so a score is bounded by the norms' gains, not by how large W_q, W_k and
 * the inputs grow.  Makes "<prefix>.q_norm.weight", "<prefix>.q_norm.bias",
 * "<prefix>.k_norm.*" (each [D], gain 1, bias 0) and sets m->qk_norm. */
ag_status ag_mha_layer_add_qk_norm(ag_mha_layer *m, ag_store *s, const char *prefix);

/* ---- the textbook path ---------------------------------------------------- */

/* ag_attention and ag_mha_layer_forward (same values and gradients) as tutorials
 * write them, one public op per step: transpose, matmul, scale, masked_fill,
 * softmax, matmul; heads split and joined by reshape + permute.  An ag_mha_layer
 * with .textbook = 1 takes this path everywhere. */
ag_tensor *ag_attention_textbook(ag_graph *g, ag_tensor *q, ag_tensor *k, ag_tensor *v, ag_tensor *mask,
                                 double fill, double p_drop, ag_tensor **weights);
ag_tensor *ag_mha_layer_forward_textbook(ag_graph *g, const ag_mha_layer *m, ag_tensor *x_q, ag_tensor *x_kv,
                                   ag_tensor *mask, double fill, ag_tensor **weights);

/* The queries and keys behind attention weights P [..., T, S] as ag_attention,
 * ag_mha_layer_forward (either path) or a block returned them, without dropout: copies on g,
 * q [..., T, D], k [..., S, D] (heads as [B, H, T, D]), the scale (scores = scale q.k)
 * and the 0/1 mask used (or NULL; mask may be NULL).  AG_ERR_ARG when P was made otherwise. */
ag_status ag_attention_qk(ag_graph *g, const ag_tensor *weights, ag_tensor **q, ag_tensor **k, double *scale,
                          ag_tensor **mask);

/* ---- Add&Norm, feed-forward, positions ----------------------------------- */

/* layer_norm(x + dropout(y)), the post-norm residual. */
ag_tensor *ag_add_norm(ag_graph *g, const ag_layer_norm_layer *n, ag_tensor *x, ag_tensor *y, double p_drop);

/* The feed-forward layer's activation. */
typedef enum ag_activation {
    AG_ACT_RELU = 0,  /* max(x, 0): the original Transformer's */
    AG_ACT_GELU,      /* x Phi(x), erf form: nn.GELU() */
    AG_ACT_GELU_TANH  /* GPT-2's tanh form: nn.GELU(approximate="tanh") */
} ag_activation;

/* Position-wise feed-forward: dense2(act(dense1(x))), C -> F -> C. */
typedef struct ag_ffn_layer {
    ag_linear_layer dense1, dense2;
    ag_activation activation; /* relu unless made by ag_ffn_layer_init_ex */
} ag_ffn_layer;
ag_status ag_ffn_layer_init(ag_ffn_layer *f, ag_store *s, const char *prefix, int C, int F, uint64_t seed);
ag_status ag_ffn_layer_init_ex(ag_ffn_layer *f, ag_store *s, const char *prefix, int C, int F, ag_activation act,
                         uint64_t seed);
ag_tensor *ag_ffn_layer_forward(ag_graph *g, const ag_ffn_layer *f, ag_tensor *x);
/* res + ffn(x), res x's shape: the bits of ag_add(g, res,
 * ag_ffn_layer_forward(g, f, x)) with the residual added by dense2 itself,
 * and, with GELU past 256 positions, GELU recomputed in the backward
 * instead of kept (8 C fewer values a token): the blocks' own path. */
ag_tensor *ag_ffn_layer_forward_add(ag_graph *g, const ag_ffn_layer *f, ag_tensor *x, ag_tensor *res);

/* [T, C] leaf: P[t, 2i] = sin(t / 10000^(2i/C)), P[t, 2i+1] = cos(same). */
ag_tensor *ag_positional_encoding(ag_graph *g, int T, int C);

/* ---- token and position embeddings ------------------------------------------- */

/* How positions enter the embedding. */
typedef enum ag_positions {
    AG_POS_LEARNED = 0, /* a learned table [max_len, C] (GPT-2's wpe) */
    AG_POS_SINUSOIDAL,  /* ag_positional_encoding, no parameters */
    AG_POS_NONE         /* tokens only */
} ag_positions;

/* x[b, t] = tokens[ids[b, t]] + positions[t]: "<prefix>.tokens.weight" and
 * (learned) "<prefix>.positions.weight", N(0, 1) as nn.Embedding. */
typedef struct ag_embedding_layer {
    ag_tensor *tokens;    /* [V, C] */
    ag_tensor *positions; /* [max_len, C], or NULL unless AG_POS_LEARNED */
    int V, C, max_len;
    ag_positions kind;
} ag_embedding_layer;
/* max_len bounds T for learned positions (ignored otherwise). */
ag_status ag_embedding_layer_init(ag_embedding_layer *e, ag_store *s, const char *prefix, int V, int C,
                                  int max_len, ag_positions kind, uint64_t seed);
/* The same with an init for both tables (NULL or AG_INIT_DEFAULT: N(0, 1)). */
ag_status ag_embedding_layer_init_ex(ag_embedding_layer *e, ag_store *s, const char *prefix, int V, int C,
                                     int max_len, ag_positions kind, const ag_init_opts *init, uint64_t seed);
/* ids [B, T] (each in [0, V)) -> [B, T, C]; T > max_len (learned) is an error. */
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

/* A block's options; all zeros (or NULL) is the original Transformer's. */
typedef struct ag_block_config {
    /* 0, post-norm: x = norm(x + dropout(f(x))) (Vaswani et al.);
     * 1, pre-norm:  x = x + dropout(f(norm(x))) (GPT-2, norm_first=True) */
    int pre_norm;
    ag_activation activation; /* the FFN's: relu (0), gelu, gelu_tanh */
    int causal;               /* self-attention: query t sees keys s <= t */
    ag_init_opts init;        /* linear layers; default: Xavier-uniform, zero biases */
    int qk_norm;              /* 1: every attention has QK-norm (ag_mha_layer_add_qk_norm) */
} ag_block_config;

/* Self-attention then FFN, each a sublayer as cfg.pre_norm says; with
 * cfg.causal, the decoder-only (GPT) block. */
typedef struct ag_encoder_block {
    ag_mha_layer attention;
    ag_layer_norm_layer norm1, norm2;
    ag_ffn_layer ffn;
    double dropout;
    ag_block_config cfg;
} ag_encoder_block;

/* Self-attention, cross-attention over the encoder's output, then FFN,
 * each a sublayer as cfg.pre_norm says (enc is never normalised here). */
typedef struct ag_decoder_block {
    ag_mha_layer self_attention, cross_attention;
    ag_layer_norm_layer norm1, norm2, norm3;
    ag_ffn_layer ffn;
    double dropout;
    ag_block_config cfg;
} ag_decoder_block;

/* The decoder-only block: an encoder block with cfg.causal = 1. */
typedef ag_encoder_block ag_decoder_only_block;

/* Blocks with cfg all zeros; parameters "<prefix>.attention.*" (decoder:
 * ".self_attention.*", ".cross_attention.*"), ".norm1.*", ".ffn.dense1.*",
 * ...; linear weights Xavier-uniform, biases 0. */
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
/* x [B, S, C] -> [B, S, C]; src_mask broadcast to [B, H, S, S] or NULL;
 * *weights (if not NULL) gets [B, H, S, S]. */
ag_tensor *ag_encoder_block_forward(ag_graph *g, const ag_encoder_block *b, ag_tensor *x, ag_tensor *src_mask,
                            ag_tensor **weights);
/* x [B, T, C], enc [B, S, C] -> [B, T, C]; self_mask (causal [T, T]) and
 * src_mask ([B, 1, 1, S]) may be NULL; self_w, cross_w get the weights. */
ag_tensor *ag_decoder_block_forward(ag_graph *g, const ag_decoder_block *b, ag_tensor *x, ag_tensor *enc,
                            ag_tensor *self_mask, ag_tensor *src_mask, ag_tensor **self_w,
                            ag_tensor **cross_w);
/* x [B, T, C] -> [B, T, C], causal; *weights gets [B, H, T, T]. */
ag_tensor *ag_decoder_only_block_forward(ag_graph *g, const ag_decoder_only_block *b, ag_tensor *x,
                                         ag_tensor **weights);


/* ---- the encoder-decoder Transformer (the translator's model) ----------- */

/* SCALED: embeddings N(0, 1/C), linear biases 0; D2L: d2l.ai's init,
 * embeddings N(0, 1), FFN and output biases U(-1/sqrt(in), 1/sqrt(in)).
 * Both: linear weights Xavier-uniform, layer norms 1 and 0. */
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
    int qk_norm;              /* 1: QK-norm in every attention (ag_mha_layer_add_qk_norm) */
} ag_seq2seq_config;

/* "encoder.embedding.weight" [Vs, C], "encoder.blocks.<i>.*", "decoder.
 * embedding.weight" [Vt, C], "decoder.blocks.<i>.*", "decoder.dense.*"; with
 * pre_norm "encoder.norm.*" and "decoder.norm.*" after each stack; with
 * qk_norm every attention's "<prefix>.q_norm.*" and "<prefix>.k_norm.*". */
typedef struct ag_seq2seq {
    ag_seq2seq_config cfg;
    ag_tensor *src_embedding, *tgt_embedding;
    ag_encoder_block *enc; /* cfg.layers of each, owned */
    ag_decoder_block *dec;
    ag_linear_layer dense;
    ag_layer_norm_layer enc_norm, dec_norm; /* cfg.pre_norm only: after each stack */
} ag_seq2seq;

/* Every parameter in s, drawn as cfg->init says; a bad config value is
 * AG_ERR_ARG.  m owns its blocks: ag_seq2seq_free. */
ag_status ag_seq2seq_init(ag_seq2seq *m, ag_store *s, const ag_seq2seq_config *cfg, uint64_t seed);
void ag_seq2seq_free(ag_seq2seq *m);

/* src ids [B, S], src_valid [B] -> [B, S, C]: blocks over dropout(embed *
 * sqrt(C) + positions); *src_mask (if not NULL) gets the mask [B, 1, 1, S]. */
ag_tensor *ag_seq2seq_encode(ag_graph *g, const ag_seq2seq *m, const int *src, const int *src_valid, int B,
                             int S, ag_tensor **src_mask);
/* tgt_in ids [B, T] (<bos> + target) over enc [B, S, C] -> logits [B, T, Vt]. */
ag_tensor *ag_seq2seq_decode(ag_graph *g, const ag_seq2seq *m, ag_tensor *enc, ag_tensor *src_mask,
                             const int *tgt_in, int B, int T);
/* Per layer: encoder self [B, H, S, S], decoder self [B, H, T, T], cross
 * [B, H, T, S] attention weights. */
#define AG_SEQ2SEQ_MAX_LAYERS 16
typedef struct ag_seq2seq_weights {
    int layers;
    ag_tensor *enc_self[AG_SEQ2SEQ_MAX_LAYERS];
    ag_tensor *dec_self[AG_SEQ2SEQ_MAX_LAYERS];
    ag_tensor *dec_cross[AG_SEQ2SEQ_MAX_LAYERS];
} ag_seq2seq_weights;
/* One eval forward -> logits [B, T, Vt], w filled (first 16 layers). */
ag_tensor *ag_seq2seq_trace(ag_graph *g, const ag_seq2seq *m, const int *src, const int *src_valid, int B, int S,
                            const int *tgt_in, int T, ag_seq2seq_weights *w);
/* Scalar mean cross-entropy of tgt_out [B, T] over its non-<pad> tokens
 * (position-wise layers skip the padding; the same value). */
ag_tensor *ag_seq2seq_loss(ag_graph *g, const ag_seq2seq *m, const int *src, const int *src_valid,
                           const int *tgt_in, const int *tgt_out, int B, int S, int T);
/* ---- data-parallel training: the translator's batch on several threads -- */

/* An ag_team of n workers for m; NULL with the reason in err (errlen bytes). */
typedef struct ag_seq2seq_team ag_seq2seq_team;
ag_seq2seq_team *ag_seq2seq_team_new(const ag_seq2seq *m, ag_store *s, int n, char *err, size_t errlen);
void ag_seq2seq_team_free(ag_seq2seq_team *t);
int ag_seq2seq_team_size(const ag_seq2seq_team *t);

/* *loss = ag_seq2seq_loss of the batch, its gradient added as ag_backward
 * would, the batch cut among the workers (ag_team_step); n = 1 gives the
 * same bits.  Returns g's status. */
ag_status ag_seq2seq_team_step(ag_seq2seq_team *t, ag_graph *g, const int *src, const int *src_valid,
                               const int *tgt_in, const int *tgt_out, int B, int S, int T, double *loss);
/* The cut ag_seq2seq_team_step makes for n workers (1..256): returns the
 * parts P (0 on a bad argument); part k is sentences [lo[k], lo[k + 1])
 * (lo: n + 1 ints) of weight w[k] (n doubles), 0 for an empty part.  Part k's
 * ag_seq2seq_loss on P processes, summed as ag_team_step sums, is the step. */
int ag_seq2seq_cut(const ag_seq2seq *m, const int *src_valid, const int *tgt_out, int B, int S, int T, int n, int *lo,
                   double *w);

/* Greedy decoding with a key/value cache, no-grad: out [B, max_len] gets
 * the ids before <eos>, out_len [B] their counts.  Uses (and resets) g;
 * returns its status. */
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
    ag_init_opts init; /* AG_INIT_DEFAULT (zeros): GPT-2's (ag_gpt_init) */
} ag_gpt_config;

/* logits = head(norm(block_L(... block_1(embed(ids))))), pre-norm causal
 * blocks; parameters "embedding.*", "blocks.<i>.*", "norm.*" and, untied,
 * "head.weight", as tests/reference/gpt.py's state_dict. */
typedef struct ag_gpt {
    ag_gpt_config cfg;
    ag_embedding_layer embedding;
    ag_decoder_only_block *blocks; /* cfg.layers, owned */
    ag_layer_norm_layer norm;             /* the final layer norm */
    ag_linear_layer head;                /* unused (weight NULL) when tied */
} ag_gpt;

/* Parameters drawn as cfg->init says, by default GPT-2's: N(0, 0.02),
 * residual projections N(0, 0.02 / sqrt(2 L)), biases 0; a bad config value
 * is AG_ERR_ARG.  Free m with ag_gpt_free. */
ag_status ag_gpt_init(ag_gpt *m, ag_store *s, const ag_gpt_config *cfg, uint64_t seed);
void ag_gpt_free(ag_gpt *m);
/* ids [B, T] (T <= context) -> logits [B, T, V]. */
ag_tensor *ag_gpt_forward(ag_graph *g, const ag_gpt *m, const int *ids, int B, int T);
/* Scalar mean cross-entropy of ids [B, T]'s logits against targets [B, T]. */
ag_tensor *ag_gpt_loss(ag_graph *g, const ag_gpt *m, const int *ids, const int *targets, int B, int T);

/* ---- sampling ---------------------------------------------------------------- */

typedef struct ag_sample_opts {
    double temperature; /* p ~ exp(logit / temperature); 0: greedy (argmax) */
    int top_k;          /* draw among the top_k largest logits only; 0: all */
    uint64_t seed;      /* the same seed gives the same tokens */
    int no_cache;       /* 1: recompute the whole window for every token
                           (no key/value cache); the same tokens, slower */
    double top_p;       /* nucleus (ag_sampling); 0 (unset) or 1: all */
} ag_sample_opts;

/* The sampler's filters between a row of logits l[V] and the draw, in order:
 *   temperature  w_v = exp((l_v - max l) / temperature); 0: greedy (the
 *                largest finite logit, the lowest id on ties)
 *   top_k        keep v when l_v >= the k-th largest logit, every tie of
 *                it; 0: all
 *   top_p        keep v when the tokens strictly more probable than v hold
 *                < top_p of the probability (after the two above): the
 *                smallest set of most probable tokens whose total is
 *                >= top_p, with every tie of the least probable; 1: all
 * A logit that is not finite is never drawn.  The draw: with u uniform in
 * [0, 1), the first v in id order with u * sum w < w_0 + ... + w_v. */
typedef struct ag_sampling {
    double temperature; /* >= 0, finite */
    int top_k;          /* >= 0 */
    double top_p;       /* 0 < top_p <= 1 */
} ag_sampling;

/* AG_OK, or AG_ERR_ARG with a message naming the bad value in err. */
ag_status ag_sampling_check(const ag_sampling *s, char *err, size_t errlen);
/* before[V] = softmax(logits) (temperature 1, no filter), after[V] = the
 * distribution s draws from (one-hot for temperature 0).  AG_ERR_ARG for a
 * bad argument, AG_ERR_NUMERIC when no logit is finite, the reason in err. */
ag_status ag_sample_dist(const ag_real *logits, int V, const ag_sampling *s, double *before, double *after,
                         char *err, size_t errlen);
/* A token drawn from logits[V] as s says, rng's next uniform as u; work:
 * 2 V doubles.  -1 when no logit is finite or an argument is bad. */
int ag_sample_next(const ag_real *logits, int V, const ag_sampling *s, ag_rng *rng, double *work);
/* The inverse CDF: the first v with u * sum w < w_0 + ... + w_v, over the
 * w_v > 0 (weights or probabilities, u in [0, 1)); -1 when none is > 0. */
int ag_sample_draw(const double *w, int V, double u);
/* ag_sample_next without top-p: temperature <= 0 greedy, top_k <= 0 all;
 * work: V doubles. */
int ag_sample_logits(const ag_real *logits, int V, double temperature, int top_k, ag_rng *rng, double *work);

/* out [n_prompt + n_new] = the prompt, then n_new tokens drawn from the
 * model's last logits over the last `context` ids (eval, no-grad, a key/value
 * cache).  Uses (and resets) g; returns its status. */
ag_status ag_gpt_sample(ag_graph *g, const ag_gpt *m, const int *prompt, int n_prompt, int n_new,
                        const ag_sample_opts *opts, int *out);

/* ---- incremental decoding: the key/value cache ------------------------------- */

/* Every block's keys and values of the positions seen so far, so that the
 * next token's forward computes only its own row. */
typedef struct ag_gpt_cache ag_gpt_cache;
/* NULL when out of memory or m is not made. */
ag_gpt_cache *ag_gpt_cache_new(const ag_gpt *m);
void ag_gpt_cache_free(ag_gpt_cache *c);
void ag_gpt_cache_clear(ag_gpt_cache *c); /* forget every position */
int ag_gpt_cache_len(const ag_gpt_cache *c); /* positions held */
/* ids [T] at positions len .. len + T - 1 -> logits [1, T, V], as
 * ag_gpt_forward on the whole prefix; len + T > context is AG_ERR_SHAPE
 * (cache unchanged); dropout in training mode is AG_ERR_STATE. */
ag_tensor *ag_gpt_forward_cached(ag_graph *g, const ag_gpt *m, ag_gpt_cache *c, const int *ids, int T);

#ifdef __cplusplus
}
#endif
#endif
