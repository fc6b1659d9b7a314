/* explorer_json.h: the JSON the examples give ag_html_explorer (the page
 * docs/explorer.md describes), built in memory and written as one page.
 *
 *   explorer_out x;
 *   if (!explorer_open(&x, prog)) return 1;
 *   fprintf(x.f, "{\"kind\": \"training\", ...");   json_reals(x.f, y, n); ...
 *   return explorer_close(&x, prog, path, title);   // 0, or 1 after a message
 *
 * The attention page's views: json_attention_map (a layer's heads),
 * json_embedding (token, position, sum), json_ffn (hidden units),
 * json_output (the next token's top 5); the tensors are found on the
 * graph of the forward pass that made the weights.
 *
 * Numbers are written to the precision of ag_real (%.9g in float, %.17g in
 * double), so the page holds the program's numbers exactly; NaN and the
 * infinities (not JSON) become null. */
#ifndef EXAMPLES_EXPLORER_JSON_H
#define EXAMPLES_EXPLORER_JSON_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"

typedef struct explorer_out {
    FILE *f;   /* write the JSON here */
    char *buf; /* what was written, once closed */
    size_t len;
} explorer_out;

static inline FILE *explorer_open(explorer_out *x, const char *prog)
{
    *x = (explorer_out){0};
    x->f = open_memstream(&x->buf, &x->len);
    if (!x->f) fprintf(stderr, "%s: explorer page: %s\n", prog, strerror(errno));
    return x->f;
}

/* The page at path; 0, or 1 after a message. */
static inline int explorer_close(explorer_out *x, const char *prog, const char *path, const char *title)
{
    char err[512];
    int rc = 1;
    if (fclose(x->f) != 0) fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
    else if (ag_html_explorer(path, title, x->buf, err, sizeof err) != AG_OK) fprintf(stderr, "%s: %s\n", prog, err);
    else rc = 0;
    free(x->buf);
    return rc;
}

/* s as a JSON string (UTF-8 kept; quotes, backslashes, controls escaped). */
static inline void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++)
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    fputc('"', f);
}

static inline void json_number(FILE *f, double v)
{
    if (!isfinite(v)) fputs("null", f);
    else fprintf(f, sizeof(ag_real) == sizeof(float) ? "%.9g" : "%.17g", v);
}

/* [v0, v1, ...] */
static inline void json_reals(FILE *f, const ag_real *v, int n)
{
    fputc('[', f);
    for (int i = 0; i < n; i++) fputs(i ? ", " : "", f), json_number(f, (double)v[i]);
    fputc(']', f);
}

static inline void json_doubles(FILE *f, const double *v, int n)
{
    fputc('[', f);
    for (int i = 0; i < n; i++) fputs(i ? ", " : "", f), json_number(f, v[i]);
    fputc(']', f);
}

/* [[row 0], [row 1], ...] of a row-major rows x cols matrix */
static inline void json_matrix(FILE *f, const ag_real *v, int rows, int cols)
{
    fputc('[', f);
    for (int r = 0; r < rows; r++) fputs(r ? ", " : "", f), json_reals(f, v + (size_t)r * cols, cols);
    fputc(']', f);
}

static inline void json_strings(FILE *f, const char *const *s, int n)
{
    fputc('[', f);
    for (int i = 0; i < n; i++) fputs(i ? ", " : "", f), json_string(f, s[i]);
    fputc(']', f);
}

/* ---- one attention map: weights, scores, q and k of every head ---------------- */

/* What one map of the attention page shows, and its labels. */
typedef struct explorer_map {
    const char *name, *kind;          /* "decoder cross-attention", "cross" */
    int layer;
    const char *row_axis, *col_axis;  /* "target (query)", "source (key)" */
    const char *const *rows, *const *cols;
} explorer_map;

/* Entry (t, s) of a 0/1 mask broadcasting to [B, H, T, S] for sentence b,
 * head h. */
static inline int explorer_masked(const ag_tensor *mask, int b, int h, int t, int s)
{
    if (!mask) return 0;
    int idx[4] = {b, h, t, s};
    size_t off = 0;
    for (int a = 0; a < mask->ndim; a++) {
        int n = mask->shape[a];
        off = off * (size_t)n + (size_t)(n == 1 ? 0 : idx[4 - mask->ndim + a]);
    }
    return mask->data[off] == 0;
}

/* The map of weights P [B, H, T, S] (from the model, on g) for sentence b:
 * the weights, the scores the softmax read (scaled; null where masked), and
 * q [T, D] and k [S, D] per head (ag_attention_qk).  0, or 1 with g's error. */
static inline int json_attention_map(FILE *f, ag_graph *g, const ag_tensor *P, int b, const explorer_map *m)
{
    ag_tensor *q, *k, *mask;
    double scale;
    if (P->ndim != 4 || ag_attention_qk(g, P, &q, &k, &scale, &mask) != AG_OK) return 1;
    int H = P->shape[1], T = P->shape[2], S = P->shape[3], D = q->shape[3];
    /* the softmax's input: unscaled scores (masked_softmax scales them), or
     * already scaled and filled (the textbook path) */
    const ag_tensor *x = P->src[0];
    double sx = P->op == AG_OP_MASKED_SOFTMAX ? scale : 1;
    fprintf(f, "{\"name\": "), json_string(f, m->name), fprintf(f, ", \"kind\": "), json_string(f, m->kind);
    fprintf(f, ", \"layer\": %d, \"row_axis\": ", m->layer), json_string(f, m->row_axis);
    fprintf(f, ", \"col_axis\": "), json_string(f, m->col_axis);
    fprintf(f, ", \"rows\": "), json_strings(f, m->rows, T), fprintf(f, ", \"cols\": "), json_strings(f, m->cols, S);
    fprintf(f, ", \"scale\": "), json_number(f, scale), fprintf(f, ", \"mask\": ");
    if (!mask) fputs("null", f);
    for (int t = 0; mask && t < T; t++) {
        fputs(t ? ", [" : "[[", f);
        for (int s = 0; s < S; s++) fprintf(f, "%s%d", s ? ", " : "", !explorer_masked(mask, b, 0, t, s));
        fputs(t == T - 1 ? "]]" : "]", f);
    }
    fprintf(f, ", \"heads\": [");
    for (int h = 0; h < H; h++) {
        size_t at = ((size_t)b * H + h) * T * S;
        fprintf(f, "%s\n {\"weights\": ", h ? "," : ""), json_matrix(f, P->data + at, T, S);
        fprintf(f, ",\n  \"scores\": [");
        for (int t = 0; t < T; t++) {
            fputs(t ? ", [" : "[", f);
            for (int s = 0; s < S; s++) {
                fputs(s ? ", " : "", f);
                ag_real z = (ag_real)sx * x->data[at + (size_t)t * S + s];
                json_number(f, explorer_masked(mask, b, h, t, s) ? NAN : (double)z);
            }
            fputc(']', f);
        }
        fprintf(f, "],\n  \"q\": "), json_matrix(f, q->data + ((size_t)b * H + h) * T * D, T, D);
        fprintf(f, ",\n  \"k\": "), json_matrix(f, k->data + ((size_t)b * H + h) * S * D, S, D);
        fputc('}', f);
    }
    fputs("]}", f);
    return 0;
}

/* ---- what the model computed on the way: found on g's tape ------------------- */

/* x = tok + pos, the embedding of ids through table on g (the first lookup
 * of table on the tape): tok the token rows as the model adds them (the
 * translator's E[id] * sqrt(C)), pos the positions (learned or
 * sinusoidal), x their sum, what the first block reads; each T x C values.
 * The lookup is followed, node by node, to the add that takes it.  0, or 1
 * when g holds no such lookup.  explorer_embedding_at(.., last = 1, ..):
 * the last lookup (of the last forward on g). */
static inline int explorer_embedding_at(const ag_graph *g, const ag_tensor *table, int last, const ag_tensor **tok,
                                        const ag_tensor **pos, const ag_tensor **x)
{
    int n = ag_graph_node_count(g), i = 0, from = n;
    const ag_tensor *y = NULL;
    for (; i < n && (last || !y); i++) {
        const ag_tensor *t = ag_graph_node(g, i);
        if (t->op == AG_OP_EMBEDDING && t->src[0] == table) y = t, from = i + 1;
    }
    i = from;
    for (; i < n && y; i++) {
        const ag_tensor *t = ag_graph_node(g, i);
        if (t->nsrc < 1 || t->src[0] != y) continue;
        if (t->op == AG_OP_ADD) {
            *tok = y, *pos = t->src[1], *x = t;
            return 0;
        }
        y = t; /* the scale by sqrt(C) */
    }
    return 1;
}
static inline int explorer_embedding(const ag_graph *g, const ag_tensor *table, const ag_tensor **tok,
                                     const ag_tensor **pos, const ag_tensor **x)
{
    return explorer_embedding_at(g, table, 0, tok, pos, x);
}

/* The hidden units act(W1 x + b1) of the feed-forward layer f on g: the
 * input of the node that multiplies by W2 (linear, or linear_add with the
 * residual), [..., T, F]; NULL when g holds none. */
static inline const ag_tensor *explorer_ffn_hidden(const ag_graph *g, const ag_ffn_layer *f)
{
    for (int i = 0, n = ag_graph_node_count(g); i < n; i++) {
        const ag_tensor *t = ag_graph_node(g, i);
        for (int s = 1; s < t->nsrc; s++)
            if (t->src[s] == f->dense2.weight && (t->op == AG_OP_LINEAR || t->op == AG_OP_LINEAR_ADD))
                return t->src[s - 1];
    }
    return NULL;
}

/* {"name", "rows", "token", "position", "sum", "token_label",
 * "position_label"}: one embedding of the embeddings view, T rows of C. */
static inline int json_embedding(FILE *f, const ag_graph *g, const ag_tensor *table, const char *name,
                                 const char *const *rows, int T, const char *token_label, const char *position_label)
{
    const ag_tensor *tok, *pos, *x;
    if (explorer_embedding(g, table, &tok, &pos, &x)) return 1;
    int C = x->shape[x->ndim - 1];
    if (tok->size != (size_t)T * C || pos->size != (size_t)T * C || x->size != (size_t)T * C) return 1;
    fprintf(f, "{\"name\": "), json_string(f, name), fprintf(f, ", \"rows\": "), json_strings(f, rows, T);
    fprintf(f, ", \"token_label\": "), json_string(f, token_label);
    fprintf(f, ", \"position_label\": "), json_string(f, position_label);
    fprintf(f, ",\n \"token\": "), json_matrix(f, tok->data, T, C);
    fprintf(f, ",\n \"position\": "), json_matrix(f, pos->data, T, C);
    fprintf(f, ",\n \"sum\": "), json_matrix(f, x->data, T, C);
    fputc('}', f);
    return 0;
}

/* {"name", "layer", "activation", "rows", "values"}: a feed-forward
 * layer's hidden units for T tokens (the ffn view). */
static inline int json_ffn(FILE *f, const ag_graph *g, const ag_ffn_layer *ffn, const char *name, int layer,
                           const char *const *rows, int T)
{
    static const char *const act[] = {"relu", "gelu", "gelu_tanh"};
    const ag_tensor *h = explorer_ffn_hidden(g, ffn);
    if (!h || h->size != (size_t)T * ffn->dense1.out) return 1;
    fprintf(f, "{\"name\": "), json_string(f, name), fprintf(f, ", \"layer\": %d, \"activation\": ", layer);
    json_string(f, act[ffn->activation]), fprintf(f, ", \"rows\": "), json_strings(f, rows, T);
    fprintf(f, ",\n \"values\": "), json_matrix(f, h->data, T, ffn->dense1.out);
    fputc('}', f);
    return 0;
}

/* {"vocab", "rows", "next", "next_p", "next_label", "top", "lse"}: the
 * output view.  logits and probs (softmax(logits), the program's op) are
 * T x V; row t is the distribution of the token after rows[t].  top[t]:
 * the 5 likeliest tokens, each {"token", "p", "logit"}, p descending;
 * lse[t] = log sum_v exp(logits[t, v]) (in double), so that a reader can
 * check p = exp(logit - lse); next[t], the token that came next (id -1:
 * none, null), and next_p[t] its probability. */
static inline void json_output(FILE *f, const ag_real *logits, const ag_real *probs, int T, int V,
                               const char *const *vocab, const char *const *rows, const int *next,
                               const char *next_label)
{
    fprintf(f, "{\"vocab\": %d, \"next_label\": ", V), json_string(f, next_label);
    fprintf(f, ", \"rows\": "), json_strings(f, rows, T), fprintf(f, ",\n \"next\": [");
    for (int t = 0; t < T; t++) {
        fputs(t ? ", " : "", f);
        if (next[t] < 0) fputs("null", f);
        else json_string(f, vocab[next[t]]);
    }
    fprintf(f, "], \"next_p\": [");
    for (int t = 0; t < T; t++) fputs(t ? ", " : "", f), json_number(f, next[t] < 0 ? NAN : (double)probs[(size_t)t * V + next[t]]);
    fprintf(f, "],\n \"lse\": [");
    for (int t = 0; t < T; t++) {
        const ag_real *z = logits + (size_t)t * V;
        double mx = z[0], s = 0;
        for (int v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        for (int v = 0; v < V; v++) s += exp((double)z[v] - mx);
        fputs(t ? ", " : "", f), json_number(f, mx + log(s));
    }
    fprintf(f, "],\n \"top\": [");
    for (int t = 0; t < T; t++) {
        const ag_real *p = probs + (size_t)t * V;
        int top[5], k = V < 5 ? V : 5;
        for (int r = 0; r < k; r++) { /* the r-th largest: larger than the ones before, first of equals */
            top[r] = -1;
            for (int v = 0; v < V; v++) {
                int taken = 0;
                for (int q = 0; q < r; q++) taken |= top[q] == v;
                if (!taken && (top[r] < 0 || p[v] > p[top[r]])) top[r] = v;
            }
        }
        fputs(t ? ",\n  [" : "\n  [", f);
        for (int r = 0; r < k; r++) {
            fprintf(f, "%s{\"token\": ", r ? ", " : ""), json_string(f, vocab[top[r]]);
            fprintf(f, ", \"p\": "), json_number(f, (double)p[top[r]]);
            fprintf(f, ", \"logit\": "), json_number(f, (double)logits[(size_t)t * V + top[r]]), fputc('}', f);
        }
        fputc(']', f);
    }
    fputs("]}", f);
}

#endif /* EXAMPLES_EXPLORER_JSON_H */
