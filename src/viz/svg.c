/* svg.c: SVG pictures (attention heatmaps, line plots) and the text
 * plumbing the picture writers share (viz.h): a growing buffer, escaping of
 * caller text, and crash-safe saving.
 *
 * Invariant: every number written into a coordinate is finite.  Layout
 * numbers come from counts and constants; data enters a coordinate only
 * after non-finite values are dropped (line plots) or it chooses a colour,
 * never a position (heatmaps).  Caller text always passes through
 * ag__text_xml, so a token such as `<unk>` or `l'homme` cannot break the
 * XML. */
#include "viz/viz.h"

#include <math.h>
#include <stdio.h>

/* ---- the text buffer ------------------------------------------------------ */

/* Room for `extra` more bytes and a NUL; false (sticky) when out of memory. */
static int reserve(ag__text *t, size_t extra)
{
    if (t->nomem) return 0;
    if (t->len + extra + 1 <= t->cap) return 1;
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->len + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            t->nomem = 1;
            return 0;
        }
        cap *= 2;
    }
    char *s = ag__malloc(cap);
    if (!s) {
        t->nomem = 1;
        return 0;
    }
    if (t->len) memcpy(s, t->s, t->len);
    s[t->len] = '\0';
    ag__free(t->s);
    t->s = s;
    t->cap = cap;
    return 1;
}

static void put_bytes(ag__text *t, const char *s, size_t n)
{
    if (!reserve(t, n)) return;
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

void ag__text_puts(ag__text *t, const char *s)
{
    if (s) put_bytes(t, s, strlen(s));
}

void ag__text_printf(ag__text *t, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n >= 0 && reserve(t, (size_t)n)) {
        vsnprintf(t->s + t->len, (size_t)n + 1, fmt, ap2);
        t->len += (size_t)n;
    }
    va_end(ap2);
}

void ag__text_free(ag__text *t)
{
    ag__free(t->s);
    *t = (ag__text){0};
}

/* ---- caller text: UTF-8 checked, escaped ------------------------------------ */

/* Length (1..4) of the well-formed UTF-8 character at p, or 0 when the bytes
 * there are not one (a stray continuation byte, an overlong form, a
 * surrogate, past U+10FFFF, or U+FFFE / U+FFFF, which XML forbids).  p is
 * NUL-terminated, and each byte is checked before the next is read. */
static int utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    if (c < 0x80) return 1;
    int n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0; /* overlong */
        if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90; /* overlong */
        if (c == 0xF4) hi = 0x8F; /* past U+10FFFF */
    } else
        return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    if (n == 3 && c == 0xEF && p[1] == 0xBF && p[2] >= 0xBE) return 0;
    return n;
}

static int count_chars(const char *s)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; n++) {
        int k = utf8_len(p);
        p += k ? k : 1;
    }
    return n;
}

int ag__text_chars(const char *s, int max_chars)
{
    if (!s) return 0;
    int n = count_chars(s);
    return max_chars > 0 && n > max_chars ? max_chars : n;
}

enum { ESC_XML, ESC_DOT };

static void put_safe(ag__text *t, const char *s, int max_chars, int mode)
{
    if (!s) return;
    int total = count_chars(s);
    int truncated = max_chars > 0 && total > max_chars;
    int keep = truncated ? max_chars - 1 : total;
    const unsigned char *p = (const unsigned char *)s;
    for (int i = 0; i < keep; i++) {
        int k = utf8_len(p);
        if (k == 0 || (k == 1 && (*p < 0x20 || *p == 0x7f))) {
            ag__text_puts(t, "?");
            p++;
            continue;
        }
        if (k > 1) {
            put_bytes(t, (const char *)p, (size_t)k);
        } else if (mode == ESC_XML) {
            switch (*p) {
            case '&': ag__text_puts(t, "&amp;"); break;
            case '<': ag__text_puts(t, "&lt;"); break;
            case '>': ag__text_puts(t, "&gt;"); break;
            case '"': ag__text_puts(t, "&quot;"); break;
            case '\'': ag__text_puts(t, "&apos;"); break;
            default: put_bytes(t, (const char *)p, 1);
            }
        } else {
            if (*p == '"' || *p == '\\') ag__text_puts(t, "\\");
            put_bytes(t, (const char *)p, 1);
        }
        p += k;
    }
    if (truncated) ag__text_puts(t, "\xe2\x80\xa6"); /* U+2026 ... */
}

void ag__text_xml(ag__text *t, const char *s, int max_chars) { put_safe(t, s, max_chars, ESC_XML); }
void ag__text_dot(ag__text *t, const char *s, int max_chars) { put_safe(t, s, max_chars, ESC_DOT); }

/* ---- saving crash-safely ----------------------------------------------------- */

ag_status ag__text_save(const ag__text *t, const char *what, const char *path, char *err, size_t errlen)
{
    if (t->nomem) return ag__errf(err, errlen, AG_ERR_NOMEM, "%s: out of memory making '%s'", what, path);
    ag__bytes all = {t->s, t->len};
    return ag__file_save(what, path, &all, 1, err, errlen);
}

/* ---- drawing helpers -------------------------------------------------------- */

/* Rough advance width of text in a sans-serif font: most glyphs are about
 * 0.6 em wide.  Used only to make room for labels. */
static double text_width(const char *s, int max_chars, double font)
{
    return ag__text_chars(s, max_chars) * 0.6 * font;
}

/* "viridis" (matplotlib's perceptually uniform map), 10 samples from dark
 * purple (0) to yellow (1), interpolated linearly. */
static const unsigned char VIRIDIS[10][3] = {
    {68, 1, 84},    {72, 40, 120},  {62, 73, 137},  {49, 104, 142}, {38, 130, 142},
    {31, 158, 137}, {53, 183, 121}, {110, 206, 88}, {181, 222, 43}, {253, 231, 37},
};

static void viridis(double t, char hex[8])
{
    if (!(t >= 0)) t = 0;
    if (t > 1) t = 1;
    double f = t * 9;
    int i = (int)f;
    if (i > 8) i = 8;
    f -= i;
    int c[3];
    for (int k = 0; k < 3; k++) c[k] = (int)lround(VIRIDIS[i][k] + f * (VIRIDIS[i + 1][k] - VIRIDIS[i][k]));
    snprintf(hex, 8, "#%02x%02x%02x", c[0], c[1], c[2]);
}

/* A "nice" step (1, 2 or 5 times a power of ten) giving about `target`
 * intervals over range. */
static double nice_step(double range, int target)
{
    if (!(range > 0) || !isfinite(range)) return 1;
    double raw = range / target, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

/* Decimals that a tick step needs: 0.05 -> 2, 5 -> 0. */
static int step_decimals(double step)
{
    int d = (int)ceil(-log10(step) - 1e-9);
    return d < 0 ? 0 : d > 10 ? 10 : d;
}

static const char *const FONT = "DejaVu Sans, Helvetica, Arial, sans-serif";

static void svg_open(ag__text *t, double w, double h, const char *title)
{
    ag__text_printf(t,
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                    "viewBox=\"0 0 %.0f %.0f\" font-family=\"%s\">\n",
                    w, h, w, h, FONT);
    if (title) {
        ag__text_puts(t, "<title>");
        ag__text_xml(t, title, 0);
        ag__text_puts(t, "</title>\n");
    }
    ag__text_puts(t, "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n");
}

/* <text> at (x, y) with anchor start|middle|end, escaped, up to max_chars. */
static void svg_text(ag__text *t, double x, double y, double font, const char *anchor, const char *extra,
                     const char *s, int max_chars)
{
    ag__text_printf(t, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\" text-anchor=\"%s\"%s%s>", x, y, font,
                    anchor, extra ? " " : "", extra ? extra : "");
    ag__text_xml(t, s, max_chars);
    ag__text_puts(t, "</text>\n");
}

/* ---- heatmaps ------------------------------------------------------------------ */

enum { LABEL_CHARS = 16 }; /* longer tokens are cut, with an ellipsis */

/* Label i of a heatmap axis: the caller's, or its index. */
static const char *axis_label(const char *const *labels, int i, char buf[16])
{
    if (labels && labels[i]) return labels[i];
    snprintf(buf, 16, "%d", i);
    return buf;
}

static double longest_label(const char *const *labels, int n, double font)
{
    double w = 0;
    char buf[16];
    for (int i = 0; i < n; i++) {
        double x = text_width(axis_label(labels, i, buf), LABEL_CHARS, font);
        if (x > w) w = x;
    }
    return w;
}

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
    const char *row_axis = spec->row_axis ? spec->row_axis : "query";
    const char *col_axis = spec->col_axis ? spec->col_axis : "key";

    /* the colour scale: from min(0, smallest) to the largest finite weight */
    double lo = 0, hi = -INFINITY;
    size_t ncell = (size_t)P * R * C;
    for (size_t i = 0; i < ncell; i++) {
        double v = (double)spec->w[i];
        if (!isfinite(v)) continue;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
    }
    if (!(hi > lo)) hi = lo + 1;

    /* layout, in pixels */
    const double margin = 16, gap = 28, f_title = 16, f_panel = 13, f_label = 12, f_value = 9;
    int maxrc = R > C ? R : C;
    double cell = floor(320.0 / maxrc);
    cell = cell < 14 ? 14 : cell > 40 ? 40 : cell;
    int show_values = cell >= 28;
    double rowlab_w = longest_label(spec->row_labels, R, f_label) + 8;
    double collab_len = longest_label(spec->col_labels, C, f_label);
    double collab_h = collab_len * 0.7071 + 12;       /* labels at 45 degrees */
    double overhang = collab_len * 0.7071 - cell / 2; /* the last label leans right */
    if (overhang < 0) overhang = 0;
    const double axis_w = 20, panel_title_h = 22, col_axis_h = 20;
    double panel_w = axis_w + rowlab_w + C * cell + overhang;
    double panel_h = panel_title_h + collab_h + R * cell + col_axis_h;
    int gc = spec->grid_cols > 0 ? spec->grid_cols : (P < 4 ? P : 4);
    if (gc > P) gc = P;
    int gr = (P + gc - 1) / gc;
    double title_h = spec->title ? 30 : 0;
    const double legend_w = 110;
    double legend_h = R * cell < 120 ? 120 : R * cell > 260 ? 260 : R * cell;
    double W = margin * 2 + gc * panel_w + (gc - 1) * gap + gap + legend_w;
    double H = margin * 2 + title_h + gr * panel_h + (gr - 1) * gap;
    double min_h = margin * 2 + title_h + panel_title_h + collab_h + legend_h + 50;
    if (H < min_h) H = min_h;

    ag__text t = {0};
    svg_open(&t, W, H, spec->title);
    if (spec->title) svg_text(&t, margin, margin + f_title, f_title, "start", "font-weight=\"bold\"", spec->title, 0);

    char buf[16], buf2[16], col[8];
    for (int p = 0; p < P; p++) {
        double px = margin + (p % gc) * (panel_w + gap), py = margin + title_h + (p / gc) * (panel_h + gap);
        double cx0 = px + axis_w + rowlab_w;               /* left of the cells */
        double cy0 = py + panel_title_h + collab_h;         /* top of the cells */
        char ptitle[32];
        const char *pt = spec->panel_titles && spec->panel_titles[p] ? spec->panel_titles[p] : NULL;
        if (!pt && P > 1) snprintf(ptitle, sizeof ptitle, "head %d", p), pt = ptitle;
        ag__text_printf(&t, "<g class=\"panel\">\n");
        if (pt) svg_text(&t, cx0 + C * cell / 2, py + f_panel + 2, f_panel, "middle", "font-weight=\"bold\"", pt, 40);
        /* the key (column) tokens, leaning at 45 degrees */
        for (int c = 0; c < C; c++) {
            double x = cx0 + (c + 0.5) * cell + 4, y = cy0 - 6;
            ag__text_printf(&t, "<text transform=\"translate(%.1f %.1f) rotate(-45)\" font-size=\"%.0f\">", x, y,
                            f_label);
            ag__text_xml(&t, axis_label(spec->col_labels, c, buf), LABEL_CHARS);
            ag__text_puts(&t, "</text>\n");
        }
        /* the query (row) tokens, right-aligned */
        for (int r = 0; r < R; r++)
            svg_text(&t, cx0 - 6, cy0 + (r + 0.5) * cell + f_label * 0.35, f_label, "end", NULL,
                     axis_label(spec->row_labels, r, buf), LABEL_CHARS);
        /* axis names: the key axis under the cells, the query axis turned up the left side */
        svg_text(&t, cx0 + C * cell / 2, cy0 + R * cell + 15, 11, "middle", "fill=\"#555555\"", col_axis, 40);
        ag__text_printf(&t,
                        "<text transform=\"translate(%.1f %.1f) rotate(-90)\" font-size=\"11\" "
                        "text-anchor=\"middle\" fill=\"#555555\">",
                        px + 12, cy0 + R * cell / 2);
        ag__text_xml(&t, row_axis, 40);
        ag__text_puts(&t, "</text>\n");
        /* the cells */
        const ag_real *w = spec->w + (size_t)p * R * C;
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) {
                double v = (double)w[(size_t)r * C + c], x = cx0 + c * cell, y = cy0 + r * cell;
                int empty = v == 0 || !isfinite(v);
                double u = (v - lo) / (hi - lo);
                if (empty)
                    ag__text_printf(&t,
                                    "<rect class=\"cell empty\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                                    "height=\"%.1f\" fill=\"#ffffff\" stroke=\"#d4d4d4\" stroke-width=\"1\">",
                                    x + 1.5, y + 1.5, cell - 3, cell - 3);
                else {
                    viridis(u, col);
                    ag__text_printf(&t,
                                    "<rect class=\"cell\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                                    "fill=\"%s\" stroke=\"#ffffff\" stroke-width=\"1\">",
                                    x, y, cell, cell, col);
                }
                /* tooltip: head 2: query "perdu" -> key "lost": 0.7341 */
                ag__text_puts(&t, "<title>");
                if (pt) ag__text_xml(&t, pt, 40), ag__text_puts(&t, ": ");
                ag__text_xml(&t, row_axis, 40);
                ag__text_puts(&t, " \"");
                ag__text_xml(&t, axis_label(spec->row_labels, r, buf), 0);
                ag__text_puts(&t, "\" \xe2\x86\x92 "); /* U+2192 -> */
                ag__text_xml(&t, col_axis, 40);
                ag__text_puts(&t, " \"");
                ag__text_xml(&t, axis_label(spec->col_labels, c, buf2), 0);
                if (isfinite(v))
                    ag__text_printf(&t, "\": %.4g</title></rect>\n", v);
                else
                    ag__text_printf(&t, "\": %s</title></rect>\n", isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf");
                if (show_values && !empty) {
                    char num[16];
                    snprintf(num, sizeof num, "%.2f", v);
                    ag__text_printf(&t,
                                    "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\" text-anchor=\"middle\" "
                                    "fill=\"%s\" pointer-events=\"none\">%s</text>\n",
                                    x + cell / 2, y + cell / 2 + f_value * 0.35, f_value,
                                    u < 0.6 ? "#ffffff" : "#000000", num);
                }
            }
        ag__text_puts(&t, "</g>\n");
    }

    /* the colour scale: a vertical gradient bar with ticks at round values */
    double lx = margin + gc * panel_w + (gc - 1) * gap + gap, ly = margin + title_h + panel_title_h + collab_h;
    const double bar_w = 16;
    ag__text_puts(&t, "<g class=\"legend\">\n<defs><linearGradient id=\"ag-viridis\" x1=\"0\" y1=\"1\" x2=\"0\" "
                      "y2=\"0\">\n");
    for (int i = 0; i < 10; i++)
        ag__text_printf(&t, "<stop offset=\"%.3f\" stop-color=\"#%02x%02x%02x\"/>\n", i / 9.0, VIRIDIS[i][0],
                        VIRIDIS[i][1], VIRIDIS[i][2]);
    ag__text_puts(&t, "</linearGradient></defs>\n");
    svg_text(&t, lx, ly - 8, 11, "start", "fill=\"#555555\"", "weight", 0);
    ag__text_printf(&t,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"url(#ag-viridis)\" "
                    "stroke=\"#888888\" stroke-width=\"0.8\"/>\n",
                    lx, ly, bar_w, legend_h);
    double step = nice_step(hi - lo, 5);
    int dec = step_decimals(step);
    for (int k = (int)ceil(lo / step - 1e-9); k * step <= hi + 1e-9 * step; k++) {
        double v = k * step, y = ly + legend_h * (1 - (v - lo) / (hi - lo));
        ag__text_printf(&t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888888\"/>\n",
                        lx + bar_w, y, lx + bar_w + 4, y);
        char num[32];
        snprintf(num, sizeof num, "%.*f", dec, k == 0 ? 0.0 : v);
        svg_text(&t, lx + bar_w + 7, y + 4, 11, "start", NULL, num, 0);
    }
    double sy = ly + legend_h + 16;
    ag__text_printf(&t,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#ffffff\" "
                    "stroke=\"#d4d4d4\" stroke-width=\"1\"/>\n",
                    lx + 1.5, sy + 1.5, bar_w - 3, bar_w - 3);
    svg_text(&t, lx + bar_w + 7, sy + 12, 11, "start", NULL, "0 (masked)", 0);
    ag__text_puts(&t, "</g>\n</svg>\n");

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
        return ag__errf(err, errlen, AG_ERR_ARG, "heatmap: %s: the weights tensor is NULL",
                            path ? path : "(null)");
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

/* ---- line plots --------------------------------------------------------------- */

static const char *const SERIES_COLOURS[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                             "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

ag_status ag_svg_line_plot(const char *path, const char *title, const char *xlabel, const char *ylabel, int nseries,
                           const char *const *names, const double *const *y, const int *n, char *err,
                           size_t errlen)
{
    const char *what = "plot";
    if (nseries < 1 || nseries > 64 || !y || !n)
        return ag__errf(err, errlen, AG_ERR_ARG, "%s: %s: need 1 to 64 series with their values and counts, got %d",
                            what, path ? path : "(null)", nseries);
    int N = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (int s = 0; s < nseries; s++) {
        if (n[s] < 0 || (n[s] > 0 && !y[s]))
            return ag__errf(err, errlen, AG_ERR_ARG, "%s: %s: series %d has %d points and values %p", what,
                                path ? path : "(null)", s, n[s], (const void *)y[s]);
        if (n[s] > N) N = n[s];
        for (int i = 0; i < n[s]; i++) {
            double v = y[s][i];
            if (!isfinite(v)) continue;
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
    }
    /* the y range: the data's, widened to whole ticks (about 6 of them) */
    if (!(lo <= hi)) lo = 0, hi = 1;
    if (lo < -1e300) lo = -1e300; /* keeps hi - lo finite */
    if (hi > 1e300) hi = 1e300;
    if (hi == lo) {
        double d = lo == 0 ? 1 : fabs(lo) * 0.1;
        lo -= d, hi += d;
    }
    double ystep = nice_step(hi - lo, 6);
    lo = floor(lo / ystep) * ystep, hi = ceil(hi / ystep) * ystep;
    if (hi <= lo) hi = lo + ystep;
    /* the x range: 1 .. N (at least 1 .. 2), integer ticks */
    int xmax = N < 2 ? 2 : N;
    double xs = ceil(nice_step(xmax - 1, 8));
    int xstep = xs < 1 ? 1 : (int)xs;

    /* layout */
    const double Wd = 720, Ht = 420, left = 78, right = 170, top = title ? 48 : 20, bottom = 58;
    double x0 = left, x1 = Wd - right, y0 = Ht - bottom, y1 = top; /* plot area corners */
#define XPOS(x) (x0 + ((x)-1.0) / (xmax - 1.0) * (x1 - x0))
#define YPOS(v) (y0 - ((v)-lo) / (hi - lo) * (y0 - y1))

    ag__text t = {0};
    svg_open(&t, Wd, Ht, title);
    if (title) svg_text(&t, (x0 + x1) / 2, 28, 16, "middle", "font-weight=\"bold\"", title, 0);
    /* grid and ticks */
    char num[48];
    ag__text_puts(&t, "<g class=\"axes\" font-size=\"11\">\n");
    int yd = step_decimals(ystep);
    for (int k = 0;; k++) {
        double v = lo + k * ystep;
        if (v > hi + ystep * 1e-6 || k > 100) break;
        double yy = YPOS(v);
        ag__text_printf(&t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>\n", x0, yy, x1,
                        yy);
        snprintf(num, sizeof num, "%.*f", yd, fabs(v) < ystep * 1e-9 ? 0.0 : v);
        svg_text(&t, x0 - 8, yy + 4, 11, "end", NULL, num, 0);
    }
    /* x ticks at 1 and the multiples of the step: 1, 5, 10, ... */
    for (int x = 1; x <= xmax; x = x == 1 && xstep > 1 ? xstep : x + xstep) {
        double xx = XPOS(x);
        ag__text_printf(&t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>\n", xx, y0, xx,
                        y1);
        ag__text_printf(&t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333333\"/>\n", xx, y0, xx,
                        y0 + 5);
        snprintf(num, sizeof num, "%d", x);
        svg_text(&t, xx, y0 + 19, 11, "middle", NULL, num, 0);
    }
    ag__text_printf(&t,
                    "<polyline points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"none\" stroke=\"#333333\" "
                    "stroke-width=\"1.2\"/>\n",
                    x0, y1, x0, y0, x1, y0);
    if (xlabel) svg_text(&t, (x0 + x1) / 2, Ht - 16, 13, "middle", NULL, xlabel, 60);
    if (ylabel) {
        ag__text_printf(&t, "<text transform=\"translate(%.1f %.1f) rotate(-90)\" font-size=\"13\" "
                            "text-anchor=\"middle\">", 22.0, (y0 + y1) / 2);
        ag__text_xml(&t, ylabel, 60);
        ag__text_puts(&t, "</text>\n");
    }
    ag__text_puts(&t, "</g>\n");

    /* the curves: a polyline per run of finite points, a dot with a tooltip on each */
    for (int s = 0; s < nseries; s++) {
        const char *c = SERIES_COLOURS[s % 8];
        const char *dash = s % 2 ? " stroke-dasharray=\"6 3\"" : "";
        char dflt[24];
        snprintf(dflt, sizeof dflt, "series %d", s + 1);
        const char *name = names && names[s] ? names[s] : dflt;
        ag__text_puts(&t, "<g class=\"series\">\n");
        for (int i = 0; i < n[s];) {
            while (i < n[s] && !isfinite(y[s][i])) i++;
            int j = i;
            while (j < n[s] && isfinite(y[s][j])) j++;
            if (j - i >= 2) {
                ag__text_puts(&t, "<polyline points=\"");
                for (int k = i; k < j; k++)
                    ag__text_printf(&t, "%s%.1f,%.1f", k > i ? " " : "", XPOS(k + 1), YPOS(y[s][k]));
                ag__text_printf(&t, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", c, dash);
            }
            i = j;
        }
        double r = N <= 60 ? 3 : 1.5;
        for (int i = 0; i < n[s]; i++) {
            if (!isfinite(y[s][i])) continue;
            ag__text_printf(&t, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"><title>", XPOS(i + 1),
                            YPOS(y[s][i]), r, c);
            ag__text_xml(&t, name, 40);
            ag__text_puts(&t, ", ");
            ag__text_xml(&t, xlabel ? xlabel : "x", 40);
            ag__text_printf(&t, " %d: %.6g</title></circle>\n", i + 1, y[s][i]);
        }
        /* legend entry, right of the plot */
        double ly = y1 + 10 + s * 22;
        ag__text_printf(&t,
                        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>\n",
                        x1 + 16, ly, x1 + 44, ly, c, dash);
        svg_text(&t, x1 + 50, ly + 4, 12, "start", NULL, name, 18);
        ag__text_puts(&t, "</g>\n");
    }
#undef XPOS
#undef YPOS
    ag__text_puts(&t, "</svg>\n");
    ag_status st = ag__text_save(&t, what, path, err, errlen);
    ag__text_free(&t);
    return st;
}
