/* backward_tour_html.h: backward_tour --html FILE, the explorer page
 * (docs/explorer.md) of the tour's attention backward: each tensor (P and
 * the gradients dP, dS, dQ, dK, dV) as a heatmap, side by side, with its
 * formula, the op file whose backward computed it and its two checks
 * (finite differences, the formula by hand).  Rows are the tour's tokens;
 * columns are keys (T x T) or dimensions (T x D); the panels of one group
 * share a colour scale; the causal mask goes with the T x T panels, so
 * that the page draws masked cells as masked, not as zeros. */
#ifndef BACKWARD_TOUR_HTML_H
#define BACKWARD_TOUR_HTML_H

#include "attograd.h"
#include "common/explorer_json.h"

typedef struct tour_panel {
    const char *name;      /* "dS" */
    const char *formula;   /* "dS = P * (dP - rowsum(dP * P))" */
    const char *file;      /* "ops/softmax.c" */
    const ag_tensor *t;    /* for the shape: values are rows of its last axis */
    const ag_real *values; /* t->size of them */
    int weights;           /* 1: values in [0, 1] (a colour scale of weights) */
    double fd_err;         /* max |analytic - numeric|, or < 0: no check */
    double formula_err;    /* max |by hand - backward|, or < 0 */
    int ok;
    const char *group;     /* panels of one group share a colour scale */
    const ag_tensor *mask; /* T x T, 0 where masked, or NULL */
    const char *mask_note; /* what a masked cell of this panel means */
    const char *rows_are;  /* "token (key)": dK's and dV's rows; NULL: "token (query)" */
} tour_panel;

/* ["token 0", ...] or ["d0", ...] */
static inline void tour_labels(FILE *f, const char *stem, int n)
{
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, "%s\"%s%d\"", i ? ", " : "", stem, i);
    fputc(']', f);
}

/* What the page shows: the panels, the mask the forward used (T x T, 1:
 * allowed) and the training steps taken before (the loss before each). */
typedef struct tour_page {
    double loss;
    const tour_panel *p;
    int n;
    const ag_real *mask;
    int T;
    const double *losses;
    int steps;
    double lr;
} tour_page;

/* For each query whose every key is masked, what the tour computes for
 * it (the note's last sentences; nothing when no row is); how many. */
static inline int tour_masked_rows(FILE *f, const ag_real *mask, int T)
{
    int n = 0;
    for (int r = 0; r < T; r++) {
        int seen = 0;
        for (int c = 0; c < T; c++) seen |= mask[r * T + c] != 0;
        if (!seen)
            fprintf(f, "  Query %d may see no key (its whole row of the mask is 0): the softmax of a row of -inf "
                       "is defined as 0 (ops/softmax.c), so row %d of P is 0, O's row is 0 and only X goes on "
                       "through the residual.  dP's row is still dO V^T, but it reaches no score: dS and dQ are 0 "
                       "on that row, and dK and dV get nothing from query %d.", r, r, r), n++;
    }
    return n;
}

/* The page's JSON (docs/explorer.md, kind "backward"). */
static inline void tour_json(FILE *f, const tour_page *pg)
{
    const tour_panel *p = pg->p;
    fprintf(f, "{\"kind\": \"backward\", \"loss\": "), json_number(f, pg->loss);
    fprintf(f, ", \"note\": \"The tour's 4 tokens, backward: L = mean cross-entropy = %.6f.  Each gradient is dL/d(the "
               "tensor), checked against central finite differences (eps 1e-6) and against the formula computed "
               "by hand from the forward values.", pg->loss);
    tour_masked_rows(f, pg->mask, pg->T);
    fprintf(f, "\", \"panels\": [");
    for (int i = 0; i < pg->n; i++) {
        const ag_tensor *t = p[i].t;
        int cols = t->shape[t->ndim - 1], rows = (int)(t->size / (size_t)cols);
        char shape[64], check[160];
        if (p[i].fd_err < 0) snprintf(check, sizeof check, "the forward value");
        else
            snprintf(check, sizeof check, "finite differences: max |analytic - numeric| %.1e; by hand: %.1e  %s",
                     p[i].fd_err, p[i].formula_err, p[i].ok ? "ok" : "FAIL");
        fprintf(f, "%s\n{\"name\": ", i ? "," : ""), json_string(f, p[i].name);
        fprintf(f, ", \"shape\": "), json_string(f, ag_shape_str(t, shape, sizeof shape));
        fprintf(f, ", \"formula\": "), json_string(f, p[i].formula);
        fprintf(f, ", \"file\": "), json_string(f, p[i].file);
        fprintf(f, ", \"kind\": \"%s\", \"ok\": %s, \"check\": ", p[i].weights ? "weights" : "gradient",
                p[i].ok ? "true" : "false");
        json_string(f, check);
        fprintf(f, ", \"fd_err\": "), json_number(f, p[i].fd_err), fprintf(f, ", \"values\": ");
        json_matrix(f, p[i].values, rows, cols);
        int square = p[i].mask && (int)p[i].mask->size == rows * cols && rows == cols;
        fprintf(f, ", \"group\": "), json_string(f, p[i].group);
        fprintf(f, ", \"row_axis\": "), json_string(f, p[i].rows_are ? p[i].rows_are : "token (query)");
        fprintf(f, ", \"rows\": "), tour_labels(f, "token ", rows);
        fprintf(f, ", \"col_axis\": \"%s\", \"cols\": ", rows == cols ? "token (key)" : "dimension");
        tour_labels(f, rows == cols ? "token " : "d", cols);
        fprintf(f, ", \"mask\": ");
        if (!square) fputs("null", f);
        for (int r = 0; square && r < rows; r++) {
            fputs(r ? ", [" : "[[", f);
            for (int c = 0; c < cols; c++) fprintf(f, "%s%d", c ? ", " : "", p[i].mask->data[r * cols + c] != 0);
            fputs(r == rows - 1 ? "]]" : "]", f);
        }
        if (square && p[i].mask_note) fprintf(f, ", \"mask_note\": "), json_string(f, p[i].mask_note);
        fputc('}', f);
    }
    fprintf(f, "],\n\"mask\": "), json_matrix(f, pg->mask, pg->T, pg->T);
    fprintf(f, ",\n\"steps\": %d, \"lr\": ", pg->steps), json_number(f, pg->lr);
    fprintf(f, ", \"x_label\": \"step\", \"losses\": "), json_doubles(f, pg->losses, pg->steps);
    fprintf(f, "}\n");
}

#define TOUR_TITLE "attograd explorer: attention, backward"

#endif
