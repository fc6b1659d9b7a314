/* attograd_viz.h: pictures of graphs and attention (DOT, SVG).  Included by
 * attograd.h.
 *
 *   ag_graph_write_dot   the tape (or the part of it that leads to one
 *                        tensor) as a Graphviz DOT file: render it with
 *                        `dot -Tsvg attention.dot -o attention.svg`
 *   ag_svg_heatmap*      attention weights as SVG heatmaps: one panel per
 *                        head, tokens on the axes, a colour scale, and the
 *                        weight of each cell in its tooltip
 *   ag_svg_line_plot     curves such as the loss per epoch
 *
 * The writers need nothing but the C library.  Every file is written
 * crash-safely, as ag_st_save writes a checkpoint (attograd_io.h): to a new
 * "<path>.tmp.<pid>.<random>" first, then renamed over path, so a reader
 * never sees half a picture; a device or FIFO at path is refused.  Failures return a status and write a
 * message naming the path into err (errlen bytes, always NUL-terminated;
 * err may be NULL).  Text from the caller (token labels, names, titles) is
 * escaped for the format; bytes that are not valid UTF-8, and control
 * characters, become '?'. */
#ifndef ATTOGRAD_VIZ_H
#define ATTOGRAD_VIZ_H

#include "attograd_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the graph as a picture (Graphviz DOT) ------------------------------ */

/* What ag_graph_write_dot adds under each node's name and shape. */
#define AG_DOT_VALUES 1 /* min, max and L2 norm of the values */
#define AG_DOT_GRADS 2  /* the same of the gradient, when it has one */

/* Write the graph g as DOT to path: one node per tensor, an edge from each
 * input to the op that used it, inputs at the top.
 *   op nodes     rounded boxes: "attn = masked_softmax x0.3536" over
 *                "[2, 8, 4, 4]" (the user-given name first, when the
 *                tensor has one)
 *   inputs       green ellipses (leaves on the tape: data, masks)
 *   parameters   orange cylinders with their store name ("mha.w_q.weight");
 *                they are not on the tape and appear as inputs of ops
 *   root         drawn with a double border
 * root NULL draws the whole tape; otherwise only root and the tensors it was
 * computed from (found by one backward sweep over the tape, no recursion).
 * flags: 0, or AG_DOT_VALUES | AG_DOT_GRADS.  A graph in error is still
 * drawn, with its message as the caption (useful to see where it failed).
 * AG_ERR_ARG when g or path is NULL or root is not on g's tape. */
ag_status ag_graph_write_dot(const ag_graph *g, const ag_tensor *root, int flags, const char *path,
                             char *err, size_t errlen);

/* ---- heatmaps (SVG) ---------------------------------------------------- */

/* One picture of `panels` heatmaps of rows x cols each, in a grid, sharing
 * one fixed colour scale ("viridis" colours): [lo, hi], 0 to 1 by default,
 * so that one colour is one weight in every picture.  A cell is drawn
 * masked (a pale crossed box) where the mask says 0, and only there: a
 * weight of exactly 0 where nothing is masked (a saturated softmax) keeps
 * its colour.  NaN and infinite cells are drawn empty.  Every cell has a
 * tooltip: `query "perdu" -> key "lost": 0.7341` (and "(masked)").  Values
 * are written in the cells when they are large enough to hold them. */
typedef struct ag_heatmap_spec {
    const char *title;                /* over the picture, or NULL */
    const char *row_axis, *col_axis;  /* axis names; NULL: "query", "key" */
    int rows, cols;                   /* T and S, each >= 1 */
    const char *const *row_labels;    /* rows tokens (NULL: 0, 1, ...) */
    const char *const *col_labels;    /* cols tokens (NULL: 0, 1, ...) */
    int panels;                       /* heads; 0 means 1 */
    const char *const *panel_titles;  /* NULL: "head 0", "head 1", ... */
    int grid_cols;                    /* panels per row; 0: up to 4 */
    const ag_real *w;                 /* panels x rows x cols, row-major */
    const ag_real *mask;              /* NULL, or rows x cols of 0/1 per mask: 0 = masked */
    int mask_panels;                  /* masks given: 0 or 1 (shared by every panel), or panels */
    double lo, hi;                    /* the colour scale; both 0: 0 and 1 */
    const char *value_name;           /* over the colour scale; NULL: "weight" */
} ag_heatmap_spec;

ag_status ag_svg_heatmaps(const char *path, const ag_heatmap_spec *spec, char *err, size_t errlen);

/* One heatmap: w [rows, cols] (row t = query t's weights over the keys). */
ag_status ag_svg_heatmap(const char *path, const char *title, const char *const *row_labels, int rows,
                         const char *const *col_labels, int cols, const ag_real *w, char *err,
                         size_t errlen);

/* Several heads side by side: w [n_panels, rows, cols]. */
ag_status ag_svg_heatmap_grid(const char *path, const char *title, int n_panels,
                              const char *const *panel_titles, int rows, int cols,
                              const char *const *row_labels, const char *const *col_labels,
                              const ag_real *w, char *err, size_t errlen);

/* The attention weights of one sentence straight from a weights tensor (as
 * ag_attention, ag_mha_layer_forward and the Transformer blocks return them):
 * w [B, H, T, S], [H, T, S] or [T, S]; draws the H heads of batch element b
 * (rows: the T queries, labelled by row_labels; columns: the S keys).
 * No cell is drawn masked: pass the mask to ag_svg_attention_masked.
 * AG_ERR_SHAPE when b is out of range or w has another rank. */
ag_status ag_svg_attention(const char *path, const char *title, const ag_tensor *w, int b,
                           const char *const *row_labels, const char *const *col_labels, char *err,
                           size_t errlen);
/* The same, with the mask the weights were computed with (the 0/1 mask given
 * to ag_attention, broadcasting to w as it did to the scores, or NULL):
 * cells where it is 0 are drawn masked.  AG_ERR_SHAPE when it does not
 * broadcast to w. */
ag_status ag_svg_attention_masked(const char *path, const char *title, const ag_tensor *w, int b,
                                  const ag_tensor *mask, const char *const *row_labels,
                                  const char *const *col_labels, char *err, size_t errlen);

/* ---- line plots (SVG) -------------------------------------------------- */

/* nseries curves y[i][0 .. n[i]) against x = 1, 2, ..., n[i] (epochs), with
 * axes, ticks, axis labels, a legend with names[i] and a tooltip on every
 * point.  Points that are NaN or infinite are skipped and break the line.
 * names may be NULL ("series 1", ...); xlabel, ylabel and title may be
 * NULL. */
ag_status ag_svg_line_plot(const char *path, const char *title, const char *xlabel, const char *ylabel,
                           int nseries, const char *const *names, const double *const *y, const int *n,
                           char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
