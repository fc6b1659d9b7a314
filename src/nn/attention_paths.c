/* attention_paths.c: which path an attention took, and what it keeps for
 * its backward, read from the tape (docs/attention_long.md lists when
 * each path is taken):
 *
 *   flash        the fused node past 256 keys: two numbers a row (its
 *                max and sum), no [T, S] matrix;
 *   P kept       the fused node's kernel at 256 keys or fewer, dropout or
 *                not: P [B, H, T, S];
 *   plain        the fused node by its plain code (ops/attention.c): the
 *                reference mode, or a NaN or inf input with fill -inf; P;
 *   three nodes  products and masked_softmax (and ag_dropout), when the
 *                weights are asked for or a layer's dropout applies to
 *                256 keys or fewer: P a tensor of the graph;
 *   textbook     the tutorials' ops (softmax of the masked scores): P too.
 *
 * Invariant: only reads the tape (the node's op, its path argument, its
 * shapes and name). */
#include "nn/nn_internal.h"

/* The fused node's path argument (ops/attention.c's iarg[1]). */
static const char *const fused_paths[4] = {NULL, "flash", "P kept", "plain"};

/* What attention node y keeps for its backward, in bytes. */
static size_t kept_of(const ag_tensor *y, int path)
{
    bool bhtd = ag_tensor_iarg(y, 2) != 0;
    size_t rows = (size_t)y->shape[0] * (size_t)y->shape[1] * (size_t)y->shape[2]; /* B H T */
    const ag_tensor *k = y->src[1];
    size_t S = (size_t)k->shape[bhtd ? 2 : 1];
    return rows * (path == 1 ? 2 : S) * sizeof(ag_real);
}

/* The path of node t if it is an attention's last step, or NULL. */
static const char *node_path(const ag_tensor *t, size_t *kept)
{
    if (t->op == AG_OP_ATTENTION) {
        int path = ag_tensor_iarg(t, 1);
        if (path < 1 || path > 3) return NULL;
        *kept = kept_of(t, path);
        return fused_paths[path];
    }
    if (t->op != AG_OP_MATMUL || t->nsrc < 1) return NULL; /* P V, P maybe after dropout */
    const ag_tensor *p = t->src[0];
    if (p->op == AG_OP_DROPOUT && p->nsrc > 0) p = p->src[0];
    if (p->op != AG_OP_MASKED_SOFTMAX && !(p->op == AG_OP_SOFTMAX && !strcmp(p->name, "attn"))) return NULL;
    *kept = p->size * sizeof(ag_real);
    return p->op == AG_OP_MASKED_SOFTMAX ? "three nodes" : "textbook";
}

const char *ag_attention_path(const ag_tensor *y, size_t *kept_bytes)
{
    size_t kept = 0;
    const char *path = NULL;
    for (int hop = 0; y && !path && hop < 4; hop++) { /* through the views after it (reshape, permute) */
        path = node_path(y, &kept);
        y = (y->op == AG_OP_RESHAPE || y->op == AG_OP_PERMUTE) && y->nsrc > 0 ? y->src[0] : NULL;
    }
    if (kept_bytes) *kept_bytes = path ? kept : 0;
    return path;
}

void ag_graph_attention_stats(const ag_graph *g, ag_attention_stats *st)
{
    if (!st) return;
    memset(st, 0, sizeof *st);
    for (int i = 0; g && i < ag_graph_node_count(g); i++) {
        size_t kept = 0;
        const char *path = node_path(ag_graph_node(g, i), &kept);
        if (!path) continue;
        int *count = !strcmp(path, "flash") ? &st->flash : !strcmp(path, "P kept") ? &st->p_kept
                   : !strcmp(path, "plain") ? &st->plain : !strcmp(path, "three nodes") ? &st->three_nodes
                                             : &st->textbook;
        (*count)++;
        st->kept_bytes += kept;
    }
}
