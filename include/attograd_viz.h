/* attograd_viz.h: pictures of graphs (Graphviz DOT), attention heatmaps and
 * line plots (SVG), and explorer pages (HTML), needing nothing but the C
 * library.  Every file is written crash-safely, as ag_file_write
 * (attograd_io.h) writes.  Failures return a status and write a message
 * naming the path into err (errlen bytes, may be NULL).  Caller's text is
 * escaped; invalid UTF-8 becomes '?'. */
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

/* g's tape as DOT (one node per tensor, an edge per input); root NULL: all
 * of it, else root and what it was computed from.  A graph in error is drawn
 * with its message.  AG_ERR_ARG for NULL g or path, root not on g. */
ag_status ag_graph_write_dot(const ag_graph *g, const ag_tensor *root, int flags, const char *path,
                             char *err, size_t errlen);

/* ---- heatmaps (SVG) ---------------------------------------------------- */

/* `panels` heatmaps of rows x cols in a grid on one colour scale [lo, hi];
 * a cell is drawn masked only where the mask is 0, empty when not finite;
 * every cell has a tooltip with its labels and weight. */
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

/* The H heads of batch element b of w [B, H, T, S], [H, T, S] or [T, S]
 * (rows: queries, columns: keys).  AG_ERR_SHAPE for a bad b or rank. */
ag_status ag_svg_attention(const char *path, const char *title, const ag_tensor *w, int b,
                           const char *const *row_labels, const char *const *col_labels, char *err,
                           size_t errlen);
/* The same, cells where mask (broadcast to w, or NULL) is 0 drawn masked;
 * AG_ERR_SHAPE when it does not broadcast. */
ag_status ag_svg_attention_masked(const char *path, const char *title, const ag_tensor *w, int b,
                                  const ag_tensor *mask, const char *const *row_labels,
                                  const char *const *col_labels, char *err, size_t errlen);

/* ---- line plots (SVG) -------------------------------------------------- */

/* nseries curves y[i][0 .. n[i]) against x = 1 .. n[i], with a legend
 * (names may be NULL) and tooltips; non-finite points break the line. */
ag_status ag_svg_line_plot(const char *path, const char *title, const char *xlabel, const char *ylabel,
                           int nseries, const char *const *names, const double *const *y, const int *n,
                           char *err, size_t errlen);

/* ---- the explorer page (HTML) ------------------------------------------ */

/* One self-contained HTML file at path (its script and style inside, no
 * network, no external file: it works from file://) that draws data_json, the
 * caller's numbers: one JSON object whose "kind" is "attention", "backward"
 * or "training", laid out as docs/explorer.md describes.  The JSON is kept
 * as it is in <script type="application/json" id="data"> (every '<' written
 * \u003c), so a test can compare the page with it.  The page reads its URL's
 * query (?layer=1&head=2&token=3) to choose what it shows.  AG_ERR_ARG when
 * data_json is not strict JSON in UTF-8, with where it is not. */
ag_status ag_html_explorer(const char *path, const char *title, const char *data_json, char *err, size_t errlen);

/* ---- the live page (HTML and WebAssembly) ------------------------------ */

/* A program compiled to WebAssembly (make wasm: a WASI command), the
 * command the page runs, and one file the page lets it read. */
typedef struct ag_live_program {
    const char *name;                       /* its argv[0], "translate" */
    const unsigned char *wasm;              /* the module's bytes */
    size_t wasm_len;
    const char *file_name;                  /* read as "/" file_name, or NULL: no file */
    const unsigned char *file;
    size_t file_len;
    const char *const *args;                /* its arguments, NULL-terminated; "{input}": the text typed */
    const char *input;                      /* the text the page starts with, or NULL */
} ag_live_program;

/* The explorer page of data_json (as ag_html_explorer writes it) that also
 * holds the program and its file (base64) and runs the program in the
 * page, with args and what its controls add, to draw the JSON the program
 * prints: a typed sentence or prompt (kind "attention"), a mask cell or a
 * training step (kind "backward").  Still one file, loading nothing, that works
 * from file:// (docs/explorer.md).  AG_ERR_ARG for bad data_json (as
 * ag_html_explorer) or a program without a name or module. */
ag_status ag_html_live(const char *path, const char *title, const char *data_json, const ag_live_program *prog,
                       char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
