/* heatmap.c: attention heatmaps as SVG, in two halves.
 *
 *   layout   every size and position, in pixels, computed once from the
 *            counts, the labels' lengths and the colour scale's range
 *            (struct layout); no output
 *   drawing  the panels (titles, token labels, axis names, cells with
 *            tooltips) and the colour scale, written from the layout; no
 *            arithmetic on sizes beyond placing an item in its slot
 *
 * Invariant (svg.c's): every number written into a coordinate is finite.
 * Sizes come from counts and constants; a weight only picks a colour (a
 * non-finite weight draws an empty cell), never a position. */
#include "viz/viz.h"

#include <math.h>
#include <stdio.h>

enum { LABEL_CHARS = 16 }; /* longer tokens are cut, with an ellipsis */

/* Label i of a heatmap axis: the caller's, or its index. */
static const char *axis_label(const char *const *labels, int i, char buf[16])
{
    if (labels && labels[i]) return labels[i];
    snprintf(buf, 16, "%d", i);
    return buf;
}

/* ============================================================================
 * Layout
 * ========================================================================== */

/* Font sizes and fixed spaces, in pixels. */
static const double MARGIN = 16, GAP = 28, F_TITLE = 16, F_PANEL = 13, F_LABEL = 12, F_VALUE = 9;
static const double AXIS_W = 20, PANEL_TITLE_H = 22, COL_AXIS_H = 20, LEGEND_W = 110, BAR_W = 16;

typedef struct layout {
    int R, C, P;                 /* rows, columns, panels */
    double lo, hi;               /* the colour scale: lo -> dark, hi -> bright */
    double cell;                 /* side of a cell */
    int show_values;             /* cells are large enough to hold "0.73" */
    double rowlab_w, collab_h;   /* room for the row labels, the leaning column labels */
    double panel_w, panel_h;     /* one panel, labels included */
    int grid_cols;               /* panels per row of the grid */
    double title_h;              /* the picture's title, 0 without one */
    double legend_x, legend_y, legend_h;
    double W, H;                 /* the picture */
} layout;

static double longest_label(const char *const *labels, int n)
{
    double w = 0;
    char buf[16];
    for (int i = 0; i < n; i++) {
        double x = ag__svg_text_width(axis_label(labels, i, buf), LABEL_CHARS, F_LABEL);
        if (x > w) w = x;
    }
    return w;
}

/* The colour scale: from min(0, smallest) to the largest finite weight. */
static void colour_range(const ag_heatmap_spec *spec, layout *L)
{
    double lo = 0, hi = -INFINITY;
    size_t ncell = (size_t)L->P * L->R * L->C;
    for (size_t i = 0; i < ncell; i++) {
        double v = (double)spec->w[i];
        if (!isfinite(v)) continue;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
    }
    L->lo = lo;
    L->hi = hi > lo ? hi : lo + 1;
}

/* One panel: cells of 14 to 40 pixels (about 320 for the longer side), the
 * row labels on the left, the column labels leaning at 45 degrees above. */
static void panel_size(const ag_heatmap_spec *spec, layout *L)
{
    int maxrc = L->R > L->C ? L->R : L->C;
    double cell = floor(320.0 / maxrc);
    L->cell = cell < 14 ? 14 : cell > 40 ? 40 : cell;
    L->show_values = L->cell >= 28;
    L->rowlab_w = longest_label(spec->row_labels, L->R) + 8;
    double collab_len = longest_label(spec->col_labels, L->C);
    L->collab_h = collab_len * 0.7071 + 12;               /* labels at 45 degrees */
    double overhang = collab_len * 0.7071 - L->cell / 2; /* the last label leans right */
    L->panel_w = AXIS_W + L->rowlab_w + L->C * L->cell + (overhang > 0 ? overhang : 0);
    L->panel_h = PANEL_TITLE_H + L->collab_h + L->R * L->cell + COL_AXIS_H;
}

/* The panels in a grid (up to 4 a row unless asked), the legend to the
 * right of it, the picture around both. */
static void grid_size(const ag_heatmap_spec *spec, layout *L)
{
    int gc = spec->grid_cols > 0 ? spec->grid_cols : (L->P < 4 ? L->P : 4);
    L->grid_cols = gc > L->P ? L->P : gc;
    int gr = (L->P + L->grid_cols - 1) / L->grid_cols;
    L->title_h = spec->title ? 30 : 0;
    double bar = L->R * L->cell;
    L->legend_h = bar < 120 ? 120 : bar > 260 ? 260 : bar;
    L->legend_x = MARGIN + L->grid_cols * L->panel_w + (L->grid_cols - 1) * GAP + GAP;
    L->legend_y = MARGIN + L->title_h + PANEL_TITLE_H + L->collab_h;
    L->W = MARGIN * 2 + L->grid_cols * L->panel_w + (L->grid_cols - 1) * GAP + GAP + LEGEND_W;
    L->H = MARGIN * 2 + L->title_h + gr * L->panel_h + (gr - 1) * GAP;
    double min_h = MARGIN * 2 + L->title_h + PANEL_TITLE_H + L->collab_h + L->legend_h + 50;
    if (L->H < min_h) L->H = min_h;
}

static layout lay_out(const ag_heatmap_spec *spec)
{
    layout L = {.R = spec->rows, .C = spec->cols, .P = spec->panels ? spec->panels : 1};
    colour_range(spec, &L);
    panel_size(spec, &L);
    grid_size(spec, &L);
    return L;
}

/* ============================================================================
 * Drawing
 * ========================================================================== */

/* What every panel shares: the spec, the layout and the axis names. */
typedef struct canvas {
    ag__text *t;
    const ag_heatmap_spec *spec;
    const layout *L;
    const char *row_axis, *col_axis;
} canvas;

/* Tooltip of a cell: head 2: query "perdu" -> key "lost": 0.7341 */
static void cell_tooltip(const canvas *k, const char *panel_title, int r, int c, double v)
{
    char buf[16], buf2[16];
    ag__text *t = k->t;
    ag__text_puts(t, "<title>");
    if (panel_title) ag__text_xml(t, panel_title, 40), ag__text_puts(t, ": ");
    ag__text_xml(t, k->row_axis, 40);
    ag__text_puts(t, " \"");
    ag__text_xml(t, axis_label(k->spec->row_labels, r, buf), 0);
    ag__text_puts(t, "\" \xe2\x86\x92 "); /* U+2192 -> */
    ag__text_xml(t, k->col_axis, 40);
    ag__text_puts(t, " \"");
    ag__text_xml(t, axis_label(k->spec->col_labels, c, buf2), 0);
    if (isfinite(v)) ag__text_printf(t, "\": %.4g</title></rect>\n", v);
    else ag__text_printf(t, "\": %s</title></rect>\n", isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf");
}

/* Cell (r, c) with its top-left corner at (x, y): a colour from the scale,
 * or an empty box for 0 (a masked position) and non-finite weights. */
static void draw_cell(const canvas *k, const char *panel_title, int r, int c, double v, double x, double y)
{
    const layout *L = k->L;
    double cell = L->cell, u = (v - L->lo) / (L->hi - L->lo);
    int empty = v == 0 || !isfinite(v);
    char col[8];
    if (empty)
        ag__text_printf(k->t,
                        "<rect class=\"cell empty\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                        "fill=\"#ffffff\" stroke=\"#d4d4d4\" stroke-width=\"1\">",
                        x + 1.5, y + 1.5, cell - 3, cell - 3);
    else {
        ag__svg_viridis(u, col);
        ag__text_printf(k->t,
                        "<rect class=\"cell\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
                        "stroke=\"#ffffff\" stroke-width=\"1\">",
                        x, y, cell, cell, col);
    }
    cell_tooltip(k, panel_title, r, c, v);
    if (L->show_values && !empty)
        ag__text_printf(k->t,
                        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\" text-anchor=\"middle\" fill=\"%s\" "
                        "pointer-events=\"none\">%.2f</text>\n",
                        x + cell / 2, y + cell / 2 + F_VALUE * 0.35, F_VALUE, u < 0.6 ? "#ffffff" : "#000000", v);
}

/* The tokens and axis names around the cells, whose top-left is (cx0, cy0);
 * px is the panel's left edge. */
static void draw_labels(const canvas *k, double px, double cx0, double cy0)
{
    const layout *L = k->L;
    ag__text *t = k->t;
    char buf[16];
    /* the key (column) tokens, leaning at 45 degrees */
    for (int c = 0; c < L->C; c++) {
        ag__text_printf(t, "<text transform=\"translate(%.1f %.1f) rotate(-45)\" font-size=\"%.0f\">",
                        cx0 + (c + 0.5) * L->cell + 4, cy0 - 6, F_LABEL);
        ag__text_xml(t, axis_label(k->spec->col_labels, c, buf), LABEL_CHARS);
        ag__text_puts(t, "</text>\n");
    }
    /* the query (row) tokens, right-aligned */
    for (int r = 0; r < L->R; r++)
        ag__svg_text(t, cx0 - 6, cy0 + (r + 0.5) * L->cell + F_LABEL * 0.35, F_LABEL, "end", NULL,
                     axis_label(k->spec->row_labels, r, buf), LABEL_CHARS);
    /* axis names: the key axis under the cells, the query axis turned up the left side */
    ag__svg_text(t, cx0 + L->C * L->cell / 2, cy0 + L->R * L->cell + 15, 11, "middle", "fill=\"#555555\"",
                 k->col_axis, 40);
    ag__text_printf(t,
                    "<text transform=\"translate(%.1f %.1f) rotate(-90)\" font-size=\"11\" "
                    "text-anchor=\"middle\" fill=\"#555555\">",
                    px + 12, cy0 + L->R * L->cell / 2);
    ag__text_xml(t, k->row_axis, 40);
    ag__text_puts(t, "</text>\n");
}

/* Panel p in its slot of the grid: title, labels, cells. */
static void draw_panel(const canvas *k, int p)
{
    const layout *L = k->L;
    const ag_heatmap_spec *spec = k->spec;
    double px = MARGIN + (p % L->grid_cols) * (L->panel_w + GAP);
    double py = MARGIN + L->title_h + (p / L->grid_cols) * (L->panel_h + GAP);
    double cx0 = px + AXIS_W + L->rowlab_w;     /* left of the cells */
    double cy0 = py + PANEL_TITLE_H + L->collab_h; /* top of the cells */
    char ptitle[32];
    const char *pt = spec->panel_titles && spec->panel_titles[p] ? spec->panel_titles[p] : NULL;
    if (!pt && L->P > 1) snprintf(ptitle, sizeof ptitle, "head %d", p), pt = ptitle;
    ag__text_puts(k->t, "<g class=\"panel\">\n");
    if (pt)
        ag__svg_text(k->t, cx0 + L->C * L->cell / 2, py + F_PANEL + 2, F_PANEL, "middle", "font-weight=\"bold\"",
                     pt, 40);
    draw_labels(k, px, cx0, cy0);
    const ag_real *w = spec->w + (size_t)p * L->R * L->C;
    for (int r = 0; r < L->R; r++)
        for (int c = 0; c < L->C; c++)
            draw_cell(k, pt, r, c, (double)w[(size_t)r * L->C + c], cx0 + c * L->cell, cy0 + r * L->cell);
    ag__text_puts(k->t, "</g>\n");
}

/* The colour scale: a vertical gradient bar with ticks at round values,
 * and the empty box that stands for 0 (masked). */
static void draw_legend(const canvas *k)
{
    const layout *L = k->L;
    ag__text *t = k->t;
    double lx = L->legend_x, ly = L->legend_y, lo = L->lo, hi = L->hi;
    ag__text_puts(t, "<g class=\"legend\">\n<defs><linearGradient id=\"ag-viridis\" x1=\"0\" y1=\"1\" x2=\"0\" "
                     "y2=\"0\">\n");
    ag__svg_viridis_stops(t);
    ag__text_puts(t, "</linearGradient></defs>\n");
    ag__svg_text(t, lx, ly - 8, 11, "start", "fill=\"#555555\"", "weight", 0);
    ag__text_printf(t,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"url(#ag-viridis)\" "
                    "stroke=\"#888888\" stroke-width=\"0.8\"/>\n",
                    lx, ly, BAR_W, L->legend_h);
    double step = ag__svg_nice_step(hi - lo, 5);
    int dec = ag__svg_step_decimals(step);
    for (int i = (int)ceil(lo / step - 1e-9); i * step <= hi + 1e-9 * step; i++) {
        double v = i * step, y = ly + L->legend_h * (1 - (v - lo) / (hi - lo));
        ag__text_printf(t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888888\"/>\n",
                        lx + BAR_W, y, lx + BAR_W + 4, y);
        char num[32];
        snprintf(num, sizeof num, "%.*f", dec, i == 0 ? 0.0 : v);
        ag__svg_text(t, lx + BAR_W + 7, y + 4, 11, "start", NULL, num, 0);
    }
    double sy = ly + L->legend_h + 16;
    ag__text_printf(t,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#ffffff\" "
                    "stroke=\"#d4d4d4\" stroke-width=\"1\"/>\n",
                    lx + 1.5, sy + 1.5, BAR_W - 3, BAR_W - 3);
    ag__svg_text(t, lx + BAR_W + 7, sy + 12, 11, "start", NULL, "0 (masked)", 0);
    ag__text_puts(t, "</g>\n");
}

/* ============================================================================
 * The public calls
 * ========================================================================== */

ag_status ag_svg_heatmaps(const char *path, const ag_heatmap_spec *spec, char *err, size_t errlen)
{
    const char *what = "heatmap";
    if (!spec || !spec->w)
        return ag__errf(err, errlen, AG_ERR_ARG, "%s: %s: the spec or its weights are NULL", what,
                        path ? path : "(null)");
    int R = spec->rows, C = spec->cols, P = spec->panels ? spec->panels : 1;
    if (R < 1 || C < 1 || P < 1 || R > 4096 || C > 4096 || P > 1024)
        return ag__errf(err, errlen, AG_ERR_ARG,
                        "%s: %s: %d panels of %d x %d cells: each count must be >= 1 (and at most 4096 "
                        "rows/cols, 1024 panels)",
                        what, path ? path : "(null)", P, R, C);
    layout L = lay_out(spec);
    ag__text t = {0};
    canvas k = {&t, spec, &L, spec->row_axis ? spec->row_axis : "query", spec->col_axis ? spec->col_axis : "key"};
    ag__svg_open(&t, L.W, L.H, spec->title);
    if (spec->title)
        ag__svg_text(&t, MARGIN, MARGIN + F_TITLE, F_TITLE, "start", "font-weight=\"bold\"", spec->title, 0);
    for (int p = 0; p < P; p++) draw_panel(&k, p);
    draw_legend(&k);
    ag__text_puts(&t, "</svg>\n");
    ag_status st = ag__text_save(&t, what, path, err, errlen);
    ag__text_free(&t);
    return st;
}

ag_status ag_svg_heatmap(const char *path, const char *title, const char *const *row_labels, int rows,
                         const char *const *col_labels, int cols, const ag_real *w, char *err, size_t errlen)
{
    ag_heatmap_spec s = {.title = title, .rows = rows, .cols = cols, .row_labels = row_labels,
                         .col_labels = col_labels, .panels = 1, .w = w};
    return ag_svg_heatmaps(path, &s, err, errlen);
}

ag_status ag_svg_heatmap_grid(const char *path, const char *title, int n_panels, const char *const *panel_titles,
                              int rows, int cols, const char *const *row_labels, const char *const *col_labels,
                              const ag_real *w, char *err, size_t errlen)
{
    ag_heatmap_spec s = {.title = title, .rows = rows, .cols = cols, .row_labels = row_labels,
                         .col_labels = col_labels, .panels = n_panels, .panel_titles = panel_titles, .w = w};
    return ag_svg_heatmaps(path, &s, err, errlen);
}

ag_status ag_svg_attention(const char *path, const char *title, const ag_tensor *w, int b,
                           const char *const *row_labels, const char *const *col_labels, char *err, size_t errlen)
{
    if (!w)
        return ag__errf(err, errlen, AG_ERR_ARG, "heatmap: %s: the weights tensor is NULL", path ? path : "(null)");
    char sh[96];
    int nd = w->ndim;
    if (nd < 2 || nd > 4)
        return ag__errf(err, errlen, AG_ERR_SHAPE,
                        "heatmap: %s: attention weights must be [B, H, T, S], [H, T, S] or [T, S], got %s",
                        path ? path : "(null)", ag_shape_str(w, sh, sizeof sh));
    int B = nd == 4 ? w->shape[0] : 1, H = nd >= 3 ? w->shape[nd - 3] : 1;
    int T = w->shape[nd - 2], S = w->shape[nd - 1];
    if (b < 0 || b >= B)
        return ag__errf(err, errlen, AG_ERR_SHAPE, "heatmap: %s: batch element %d out of range for %s",
                        path ? path : "(null)", b, ag_shape_str(w, sh, sizeof sh));
    ag_heatmap_spec s = {.title = title, .rows = T, .cols = S, .row_labels = row_labels, .col_labels = col_labels,
                         .panels = H, .w = w->data + (size_t)b * H * T * S};
    return ag_svg_heatmaps(path, &s, err, errlen);
}
