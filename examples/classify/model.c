/* model.c: the classifier, an encoder-only Transformer.
 *
 *   x      = embedding[bytes]                       [B, T, C]
 *   x      = concat(cls, x) + positions[:T + 1]     [B, T + 1, C]  (cls first)
 *   x      = block_L(... block_1(x, padding mask))  pre-norm, GELU
 *   logits = head(norm(x[:, 0]))                    [B, 2]
 *
 * The class token is a learned vector in front of every sentence; attention
 * lets it gather what the sentence's bytes say, and only its output is
 * classified (BERT's [CLS], ViT's class token).  Padding after a sentence's
 * end is masked out of every attention, so a sentence's logits do not
 * depend on the batch it is in. */
#include "classify.h"

#include <stdio.h>
#include <stdlib.h>

ag_status classifier_init(classifier *m, ag_store *s, const classifier_config *cfg, uint64_t seed)
{
    const int C = cfg->hidden;
    *m = (classifier){.cfg = *cfg};
    m->embedding = ag_param(s, "embedding.weight", AG_SHAPE(256, C));
    m->cls = ag_param(s, "cls", AG_SHAPE(1, 1, C));
    if (!m->embedding || !m->cls) return AG_ERR_ARG; /* ag_store_error(s) says why */
    ag_init_normal(m->embedding, 0, 0.02, ag_param_seed(seed, "embedding.weight"));
    ag_init_normal(m->cls, 0, 0.02, ag_param_seed(seed, "cls"));
    ag_status st = ag_learned_positions_init(&m->positions, s, "positions", cfg->max_len + 1, C, seed);
    if (st != AG_OK) return st;
    m->blocks = calloc((size_t)cfg->layers, sizeof *m->blocks);
    if (!m->blocks) return AG_ERR_NOMEM;
    const ag_block_config block = {.pre_norm = 1, .activation = AG_ACT_GELU};
    for (int i = 0; i < cfg->layers && st == AG_OK; i++) {
        char name[32];
        snprintf(name, sizeof name, "blocks.%d", i);
        st = ag_encoder_block_init_ex(&m->blocks[i], s, name, C, cfg->heads, cfg->ffn, 0, &block, seed);
    }
    if (st == AG_OK) st = ag_layer_norm_layer_init(&m->norm, s, "norm", C);
    if (st == AG_OK) st = ag_linear_layer_init(&m->head, s, "head", C, NCLASSES, 1, seed);
    return st;
}

void classifier_free(classifier *m)
{
    free(m->blocks);
    m->blocks = NULL;
}

ag_tensor *classifier_forward(ag_graph *g, const classifier *m, const minibatch *b)
{
    const int B = b->B, T = b->T, C = m->cfg.hidden;
    ag_tensor *x = ag_embedding(g, m->embedding, b->ids, AG_SHAPE(B, T)); /* [B, T, C] */
    x = ag_prepend_token(g, m->cls, x);                                  /* [B, T + 1, C] */
    x = ag_learned_positions_forward(g, &m->positions, x);               /* + P[:T + 1] */
    ag_tensor *mask = ag_padding_mask(g, b->seen, B, 0, 0, T + 1);       /* [B, 1, 1, T + 1] */
    for (int i = 0; i < m->cfg.layers; i++) x = ag_encoder_block_forward(g, &m->blocks[i], x, mask, NULL);
    ag_tensor *first = ag_reshape(g, ag_slice(g, x, 1, 0, 1), AG_SHAPE(B, C)); /* x[:, 0] */
    return ag_linear_layer_forward(g, &m->head, ag_layer_norm_layer_forward(g, &m->norm, first));
}
