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
 * non-finite weight draws an empty cell), never a position.  A cell is drawn
 * masked only where the caller's mask says 0: a weight of 0 is a colour like
 * any other (a saturated softmax gives exact zeros where nothing is
 * masked).  The colour scale is the caller's range, 0 to 1 by default, the
 * same in every picture of attention weights. */
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
enum { PANEL_TITLE_CHARS = 48 };
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

/* The colour scale: the spec's [lo, hi], or [0, 1] (weights) when both
 * are 0.  Fixed, never taken from the data: one colour means one weight in
 * every picture. */
static void colour_range(const ag_heatmap_spec *spec, layout *L)
{
    int given = spec->lo != 0 || spec->hi != 0;
    L->lo = given ? spec->lo : 0;
    L->hi = given ? spec->hi : 1;
}

/* The widest panel title (bold, centred over the cells). */
static double widest_panel_title(const ag_heatmap_spec *spec, int P)
{
    double w = 0;
    char buf[32];
    for (int p = 0; p < P; p++) {
        const char *pt = spec->panel_titles && spec->panel_titles[p] ? spec->panel_titles[p] : NULL;
        if (!pt && P > 1) snprintf(buf, sizeof buf, "head %d", p), pt = buf;
        double x = ag__svg_text_width(pt, PANEL_TITLE_CHARS, F_PANEL) * AG__SVG_BOLD;
        if (x > w) w = x;
    }
    return w;
}

/* One panel: cells of 14 to 40 pixels (about 320 for the longer side), the
 * row labels on the left, the column labels leaning at 45 degrees above;
 * wide enough for its title, which is centred over the cells. */
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
    double half_title = widest_panel_title(spec, L->P) / 2 + 2, centre = AXIS_W + L->rowlab_w + L->C * L->cell / 2;
    if (centre < half_title) L->rowlab_w += half_title - centre, centre = half_title;
    L->panel_w = AXIS_W + L->rowlab_w + L->C * L->cell + (overhang > 0 ? overhang : 0);
    if (L->panel_w < centre + half_title) L->panel_w = centre + half_title;
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
    double title_w = MARGIN * 2 + ag__svg_text_width(spec->title, 0, F_TITLE) * AG__SVG_BOLD;
    if (L->W < title_w) L->W = title_w;
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
static void cell_tooltip(const canvas *k, const char *panel_title, int r, int c, double v, int masked)
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
    if (isfinite(v)) ag__text_printf(t, "\": %.4g", v);
    else ag__text_printf(t, "\": %s", isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf");
    ag__text_printf(t, "%s</title></rect>\n", masked ? " (masked)" : "");
}

/* Cell (r, c) with its top-left corner at (x, y): a colour from the scale;
 * a crossed grey box where the mask is 0; an empty box for a non-finite
 * weight. */
static void draw_cell(const canvas *k, const char *panel_title, int r, int c, double v, int masked, double x,
                      double y)
{
    const layout *L = k->L;
    double cell = L->cell, u = (v - L->lo) / (L->hi - L->lo);
    int empty = masked || !isfinite(v);
    char col[8];
    if (masked)
        ag__text_printf(k->t,
                        "<path d=\"M%.1f %.1fL%.1f %.1f\" stroke=\"#c8c8c8\" stroke-width=\"1\"/>"
                        "<rect class=\"cell masked\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                        "fill=\"#f2f2f2\" fill-opacity=\"0.6\" stroke=\"#c8c8c8\" stroke-width=\"1\">",
                        x + 1.5, y + cell - 1.5, x + cell - 1.5, y + 1.5, x + 1.5, y + 1.5, cell - 3, cell - 3);
    else if (empty)
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
    cell_tooltip(k, panel_title, r, c, v, masked);
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
                     pt, PANEL_TITLE_CHARS);
    draw_labels(k, px, cx0, cy0);
    size_t n = (size_t)L->R * L->C;
    const ag_real *w = spec->w + p * n;
    const ag_real *m = spec->mask ? spec->mask + (spec->mask_panels > 1 ? p * n : 0) : NULL;
    for (int r = 0; r < L->R; r++)
        for (int c = 0; c < L->C; c++) {
            size_t i = (size_t)r * L->C + c;
            draw_cell(k, pt, r, c, (double)w[i], m && m[i] == 0, cx0 + c * L->cell, cy0 + r * L->cell);
        }
    ag__text_puts(k->t, "</g>\n");
}

/* The colour scale: a vertical gradient bar with ticks at round values,
 * and, when there is a mask, the box that stands for a masked cell. */
static void draw_legend(const canvas *k)
{
    const layout *L = k->L;
    ag__text *t = k->t;
    double lx = L->legend_x, ly = L->legend_y, lo = L->lo, hi = L->hi;
    ag__text_puts(t, "<g class=\"legend\">\n<defs><linearGradient id=\"ag-viridis\" x1=\"0\" y1=\"1\" x2=\"0\" "
                     "y2=\"0\">\n");
    ag__svg_viridis_stops(t);
    ag__text_puts(t, "</linearGradient></defs>\n");
    ag__svg_text(t, lx, ly - 8, 11, "start", "fill=\"#555555\"", k->spec->value_name ? k->spec->value_name : "weight",
                 16);
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
    if (k->spec->mask) {
        double sy = ly + L->legend_h + 16;
        ag__text_printf(t,
                        "<path d=\"M%.1f %.1fL%.1f %.1f\" stroke=\"#c8c8c8\" stroke-width=\"1\"/>"
                        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#f2f2f2\" "
                        "fill-opacity=\"0.6\" stroke=\"#c8c8c8\" stroke-width=\"1\"/>\n",
                        lx + 1.5, sy + BAR_W - 1.5, lx + BAR_W - 1.5, sy + 1.5, lx + 1.5, sy + 1.5, BAR_W - 3,
                        BAR_W - 3);
        ag__svg_text(t, lx + BAR_W + 7, sy + 12, 11, "start", NULL, "masked", 0);
    }
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
    if (!isfinite(spec->lo) || !isfinite(spec->hi) || ((spec->lo != 0 || spec->hi != 0) && !(spec->lo < spec->hi)))
        return ag__errf(err, errlen, AG_ERR_ARG, "%s: %s: colour scale [%g, %g]: lo must be below hi, both finite",
                        what, path ? path : "(null)", spec->lo, spec->hi);
    if (spec->mask && spec->mask_panels > 1 && spec->mask_panels != P)
        return ag__errf(err, errlen, AG_ERR_ARG, "%s: %s: %d masks for %d panels: give 1 (shared) or one per panel",
                        what, path ? path : "(null)", spec->mask_panels, P);
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

/* Mask entry for weight (h, t, s) of batch element b: the mask's axes are
 * aligned on the right with w's [B, H, T, S], and a size-1 axis stretches. */
static ag_real mask_at(const ag_tensor *mask, const int idx[4])
{
    size_t off = 0;
    for (int a = 0; a < mask->ndim; a++) {
        int wa = 4 - mask->ndim + a, n = mask->shape[a];
        off = off * (size_t)n + (size_t)(n == 1 ? 0 : idx[wa]);
    }
    return mask->data[off];
}

/* w's [B, H, T, S] from its rank; the mask must broadcast to it. */
static ag_status attention_shape(const char *path, const ag_tensor *w, int b, const ag_tensor *mask, int dims[4],
                                 char *err, size_t errlen)
{
    char sh[96], sm[96];
    int nd = w->ndim;
    if (nd < 2 || nd > 4)
        return ag__errf(err, errlen, AG_ERR_SHAPE,
                        "heatmap: %s: attention weights must be [B, H, T, S], [H, T, S] or [T, S], got %s",
                        path ? path : "(null)", ag_shape_str(w, sh, sizeof sh));
    dims[0] = nd == 4 ? w->shape[0] : 1, dims[1] = nd >= 3 ? w->shape[nd - 3] : 1;
    dims[2] = w->shape[nd - 2], dims[3] = w->shape[nd - 1];
    if (b < 0 || b >= dims[0])
        return ag__errf(err, errlen, AG_ERR_SHAPE, "heatmap: %s: batch element %d out of range for %s",
                        path ? path : "(null)", b, ag_shape_str(w, sh, sizeof sh));
    int fits = !mask || mask->ndim <= 4;
    for (int a = 0; fits && mask && a < mask->ndim; a++) {
        int n = mask->shape[a], want = dims[4 - mask->ndim + a];
        fits = n == 1 || n == want;
    }
    if (!fits)
        return ag__errf(err, errlen, AG_ERR_SHAPE, "heatmap: %s: mask %s does not broadcast to the weights [%d, %d, %d, %d]",
                        path ? path : "(null)", ag_shape_str(mask, sm, sizeof sm), dims[0], dims[1], dims[2],
                        dims[3]);
    return AG_OK;
}

ag_status ag_svg_attention_masked(const char *path, const char *title, const ag_tensor *w, int b,
                                  const ag_tensor *mask, const char *const *row_labels,
                                  const char *const *col_labels, char *err, size_t errlen)
{
    if (!w)
        return ag__errf(err, errlen, AG_ERR_ARG, "heatmap: %s: the weights tensor is NULL", path ? path : "(null)");
    int d[4];
    ag_status st = attention_shape(path, w, b, mask, d, err, errlen);
    if (st != AG_OK) return st;
    int H = d[1], T = d[2], S = d[3];
    size_t n = (size_t)H * T * S;
    ag_real *m = NULL;
    if (mask) {
        m = ag__malloc(n * sizeof *m);
        if (!m) return ag__errf(err, errlen, AG_ERR_NOMEM, "heatmap: %s: no memory for the mask", path ? path : "(null)");
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int s2 = 0; s2 < S; s2++) m[((size_t)h * T + t) * S + s2] = mask_at(mask, (int[4]){b, h, t, s2});
    }
    ag_heatmap_spec s = {.title = title, .rows = T, .cols = S, .row_labels = row_labels, .col_labels = col_labels,
                         .panels = H, .w = w->data + (size_t)b * n, .mask = m, .mask_panels = H};
    st = ag_svg_heatmaps(path, &s, err, errlen);
    ag__free(m);
    return st;
}

ag_status ag_svg_attention(const char *path, const char *title, const ag_tensor *w, int b,
                           const char *const *row_labels, const char *const *col_labels, char *err, size_t errlen)
{
    return ag_svg_attention_masked(path, title, w, b, NULL, row_labels, col_labels, err, errlen);
}
