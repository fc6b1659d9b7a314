/* explorer_json.h: the JSON the examples give ag_html_explorer (the page
 * docs/explorer.md describes), built in memory and written as one page.
 *
 *   explorer_out x;
 *   if (!explorer_open(&x, prog)) return 1;
 *   fprintf(x.f, "{\"kind\": \"training\", ...");   json_reals(x.f, y, n); ...
 *   return explorer_close(&x, prog, path, title);   // 0, or 1 after a message
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

#endif /* EXAMPLES_EXPLORER_JSON_H */
