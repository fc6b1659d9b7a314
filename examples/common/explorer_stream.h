/* explorer_stream.h: the residual stream of a traced forward, for the
 * explorer's layer-norm and residual views (the page's "norms" and
 * "residuals", docs/explorer.md), found on the tape as explorer_json.h
 * finds the embeddings.
 *
 * A stack (an encoder, a decoder, decoder-only blocks) is walked from its
 * input x (the embeddings' sum), block by block, sublayer by sublayer (its
 * attention kinds, then the feed-forward layer):
 *
 *   pre-norm   ln  = the layer norm that reads x   (the sublayer reads ln)
 *              sum = the add that reads x          (x + f(ln(x)));  x = sum
 *              after the last block, the final norm reads x
 *   post-norm  sum = the add that reads x;  x = the layer norm that reads sum
 *   no norm    sum = the add that reads x;  x = sum
 *
 * "The add that reads x": the first add, linear_add or gelu_linear_add
 * with x among its inputs.  f, the sublayer's output, is the add's other
 * input; where the residual joins the sublayer's last projection (linear_add:
 * x W^T + b + res in one op) the output alone is no node, and f = sum - x. */
#ifndef EXAMPLES_EXPLORER_STREAM_H
#define EXAMPLES_EXPLORER_STREAM_H

#include "explorer_json.h"

/* One stack of blocks, as the page's overview draws it. */
typedef struct explorer_stack {
    const char *id, *block;   /* "decoder", "decoder block": the overview's names */
    const char *const *kinds; /* a block's attention kinds, in order ("decoder", "cross") */
    int nkinds, layers, ffn;  /* ffn: 1 when a block has a feed-forward layer */
    int pre_norm, norm;       /* norm: 0 for a model without layer norm */
    double eps;               /* the layer norms' (ag_layer_norm_layer's eps) */
    const char *const *rows;  /* T token labels */
    int T;
} explorer_stack;

/* The first node on g that reads x: a layer norm (norm), else an add. */
static inline const ag_tensor *explorer_reader(const ag_graph *g, const ag_tensor *x, int norm)
{
    for (int i = 0, n = ag_graph_node_count(g); i < n; i++) {
        const ag_tensor *t = ag_graph_node(g, i);
        if (norm && t->op == AG_OP_LAYER_NORM && t->src[0] == x) return t;
        if (norm || (t->op != AG_OP_ADD && t->op != AG_OP_LINEAR_ADD && t->op != AG_OP_GELU_LINEAR_ADD)) continue;
        for (int s = 0; s < t->nsrc; s++)
            if (t->src[s] == x) return t;
    }
    return NULL;
}

static inline void json_where(FILE *f, const explorer_stack *st, int layer, const char *sub, const char *at)
{
    fprintf(f, "{\"stack\": "), json_string(f, st->id), fprintf(f, ", \"block\": "), json_string(f, st->block);
    fprintf(f, ", \"layer\": %d, \"sublayer\": ", layer), json_string(f, sub);
    if (at) fprintf(f, ", \"at\": "), json_string(f, at);
    fprintf(f, ", \"rows\": "), json_strings(f, st->rows, st->T);
}

/* {where, "eps", "x", "y", "mean", "std", "gamma", "beta"}: the layer norm y
 * (at "before" its sublayer, "after" the add, or "final"), its input x
 * [T, C], each row's mean and standard deviation sqrt(var) (in double, over
 * C), y = (x - mean) / sqrt(var + eps) * gamma + beta. */
static inline void json_norm(FILE *f, const explorer_stack *st, int layer, const char *sub, const char *at,
                             const ag_tensor *y, int *n)
{
    const ag_tensor *x = y->src[0];
    int T = st->T, C = x->shape[x->ndim - 1];
    fputs((*n)++ ? ",\n" : "\n", f), json_where(f, st, layer, sub, at);
    fprintf(f, ", \"eps\": "), json_number(f, st->eps);
    fprintf(f, ",\n \"x\": "), json_matrix(f, x->data, T, C), fprintf(f, ",\n \"y\": "), json_matrix(f, y->data, T, C);
    for (int k = 0; k < 2; k++) {
        fprintf(f, k ? ", \"std\": [" : ",\n \"mean\": [");
        for (int t = 0; t < T; t++) {
            const ag_real *r = x->data + (size_t)t * C;
            double mu = 0, var = 0;
            for (int c = 0; c < C; c++) mu += r[c];
            mu /= C;
            for (int c = 0; c < C; c++) var += (r[c] - mu) * (r[c] - mu);
            fputs(t ? ", " : "", f), json_number(f, k ? sqrt(var / C) : mu);
        }
        fputc(']', f);
    }
    fprintf(f, ",\n \"gamma\": "), json_reals(f, y->src[1]->data, C);
    fprintf(f, ", \"beta\": "), json_reals(f, y->src[2]->data, C), fputc('}', f);
}

/* {where, "how", "x", "f", "sum"}: the residual add sum = x + f, [T, C] each. */
static inline void json_residual(FILE *f, const explorer_stack *st, int layer, const char *sub, const ag_tensor *x,
                                 const ag_tensor *sum, int *n)
{
    int T = st->T, C = x->shape[x->ndim - 1];
    const ag_tensor *other = sum->op == AG_OP_ADD ? sum->src[sum->src[0] == x] : NULL;
    fputs((*n)++ ? ",\n" : "\n", f), json_where(f, st, layer, sub, NULL);
    fprintf(f, ", \"how\": "), json_string(f, other ? "add" : "linear_add");
    fprintf(f, ",\n \"x\": "), json_matrix(f, x->data, T, C), fprintf(f, ",\n \"f\": ");
    if (other) json_matrix(f, other->data, T, C);
    for (int t = 0; !other && t < T; t++) {
        fputs(t ? ", [" : "[[", f);
        for (size_t c = 0, at = (size_t)t * C; c < (size_t)C; c++)
            fputs(c ? ", " : "", f), json_number(f, (double)sum->data[at + c] - (double)x->data[at + c]);
        fputs(t == T - 1 ? "]]" : "]", f);
    }
    fprintf(f, ",\n \"sum\": "), json_matrix(f, sum->data, T, C), fputc('}', f);
}

/* The stack st walked from its input x on g (see the top): its layer norms
 * (residuals 0) or its residual adds (1) as entries of a JSON list, *n
 * counting them.  0, or 1 when the tape holds no such stream. */
static inline int json_stream(FILE *f, const ag_graph *g, const ag_tensor *x, const explorer_stack *st, int residuals,
                              int *n)
{
    const ag_tensor *y;
    size_t TC = x ? (size_t)st->T * x->shape[x->ndim - 1] : 0;
    if (!x || x->size != TC) return 1;
    for (int l = 0; l < st->layers; l++)
        for (int k = 0; k < st->nkinds + (st->ffn != 0); k++) {
            const char *sub = k < st->nkinds ? st->kinds[k] : "ffn";
            if (st->pre_norm && !(y = explorer_reader(g, x, 1))) return 1;
            if (st->pre_norm && !residuals) json_norm(f, st, l, sub, "before", y, n);
            const ag_tensor *sum = explorer_reader(g, x, 0);
            if (!sum || sum->size != TC) return 1;
            if (residuals) json_residual(f, st, l, sub, x, sum, n);
            x = sum;
            if (!st->norm || st->pre_norm) continue;
            if (!(y = explorer_reader(g, sum, 1))) return 1;
            if (!residuals) json_norm(f, st, l, sub, "after", y, n);
            x = y;
        }
    if (!st->pre_norm) return 0;
    if (!(y = explorer_reader(g, x, 1))) return 1;
    if (!residuals) json_norm(f, st, -1, "final", "final", y, n);
    return 0;
}

/* ",\n\"norms\": [...], \"residuals\": [...]" of the stacks st[0..ns), each
 * read from its input x[i].  0, or 1 (after a message) when one is not
 * on g. */
static inline int json_streams(FILE *f, const ag_graph *g, const ag_tensor *const *x, const explorer_stack *st,
                               int ns, const char *prog)
{
    int bad = 0;
    for (int r = 0; r < 2; r++) {
        int n = 0;
        fprintf(f, r ? "],\n\"residuals\": [" : ",\n\"norms\": [");
        for (int i = 0; i < ns; i++) bad |= json_stream(f, g, x[i], &st[i], r, &n);
    }
    fputc(']', f);
    if (bad) fprintf(stderr, "%s: --html: a layer norm or a residual add is not on the graph\n", prog);
    return bad;
}

#endif /* EXAMPLES_EXPLORER_STREAM_H */
