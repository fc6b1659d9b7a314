/* svg.c: the SVG primitives the pictures share (viz.h: the document, a
 * text item, the colour map, round tick steps) and line plots.  Heatmaps
 * are in heatmap.c.
 *
 * Invariant: every number written into a coordinate is finite.  Layout
 * numbers come from counts and constants; data enters a coordinate only
 * after non-finite values are dropped (line plots) or it chooses a colour,
 * never a position (heatmaps).  Caller text always passes through
 * ag__text_xml (buffer.c). */
#include "viz/viz.h"

#include <math.h>
#include <stdio.h>

/* ---- SVG primitives -------------------------------------------------------- */

/* Most glyphs of a sans-serif font are at most about 0.62 em wide (DejaVu
 * Sans averages 0.55 on text, its digits 0.64): room enough for a text
 * never to be cut (tests/pictures/check_text.pl measures the same way). */
double ag__svg_text_width(const char *s, int max_chars, double font)
{
    return ag__text_chars(s, max_chars) * 0.62 * font;
}

/* "viridis" (matplotlib's perceptually uniform map), 10 samples from dark
 * purple (0) to yellow (1), interpolated linearly between them. */
static const unsigned char VIRIDIS[10][3] = {
    {68, 1, 84},    {72, 40, 120},  {62, 73, 137},  {49, 104, 142}, {38, 130, 142},
    {31, 158, 137}, {53, 183, 121}, {110, 206, 88}, {181, 222, 43}, {253, 231, 37},
};

void ag__svg_viridis(double t, char hex[8])
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

void ag__svg_viridis_stops(ag__text *t)
{
    for (int i = 0; i < 10; i++)
        ag__text_printf(t, "<stop offset=\"%.3f\" stop-color=\"#%02x%02x%02x\"/>\n", i / 9.0, VIRIDIS[i][0],
                        VIRIDIS[i][1], VIRIDIS[i][2]);
}

double ag__svg_nice_step(double range, int target)
{
    if (!(range > 0) || !isfinite(range)) return 1;
    double raw = range / target, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

int ag__svg_step_decimals(double step)
{
    int d = (int)ceil(-log10(step) - 1e-9);
    return d < 0 ? 0 : d > 10 ? 10 : d;
}

static const char *const FONT = "DejaVu Sans, Helvetica, Arial, sans-serif";

void ag__svg_open(ag__text *t, double w, double h, const char *title)
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

void ag__svg_text(ag__text *t, double x, double y, double font, const char *anchor, const char *extra,
                     const char *s, int max_chars)
{
    ag__text_printf(t, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\" text-anchor=\"%s\"%s%s>", x, y, font,
                    anchor, extra ? " " : "", extra ? extra : "");
    ag__text_xml(t, s, max_chars);
    ag__text_puts(t, "</text>\n");
}

/* ---- line plots ---------------------------------------------------------------
 *
 * Layout (the ranges and the plot area), then drawing (axes, then one group
 * per series). */

static const char *const SERIES_COLOURS[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                             "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

typedef struct plot {
    double lo, hi, ystep; /* the y range, widened to whole ticks */
    int xmax, xstep;      /* the x range 1 .. xmax, integer ticks */
    int N;                /* points of the longest series */
    double x0, x1, y0, y1; /* plot area: left, right, bottom, top */
    double W;              /* the picture's width: the legend's names fit */
} plot;

static double xpos(const plot *P, double x) { return P->x0 + (x - 1.0) / (P->xmax - 1.0) * (P->x1 - P->x0); }
static double ypos(const plot *P, double v) { return P->y0 - (v - P->lo) / (P->hi - P->lo) * (P->y0 - P->y1); }

static const double PLOT_W = 720, PLOT_H = 420;
enum { LEGEND_CHARS = 48 }; /* longer series names are cut, with an ellipsis */

/* The y range: the finite data's, widened to about 6 whole ticks; the x
 * range 1 .. N (at least 1 .. 2) with about 8 integer ticks. */
static plot plot_layout(int nseries, const char *const *names, const double *const *y, const int *n,
                        const char *title)
{
    plot P = {.lo = INFINITY, .hi = -INFINITY};
    for (int s = 0; s < nseries; s++) {
        if (n[s] > P.N) P.N = n[s];
        for (int i = 0; i < n[s]; i++) {
            double v = y[s][i];
            if (!isfinite(v)) continue;
            if (v < P.lo) P.lo = v;
            if (v > P.hi) P.hi = v;
        }
    }
    if (!(P.lo <= P.hi)) P.lo = 0, P.hi = 1;
    if (P.lo < -1e300) P.lo = -1e300; /* keeps hi - lo finite */
    if (P.hi > 1e300) P.hi = 1e300;
    if (P.hi == P.lo) {
        double d = P.lo == 0 ? 1 : fabs(P.lo) * 0.1;
        P.lo -= d, P.hi += d;
    }
    P.ystep = ag__svg_nice_step(P.hi - P.lo, 6);
    P.lo = floor(P.lo / P.ystep) * P.ystep, P.hi = ceil(P.hi / P.ystep) * P.ystep;
    if (P.hi <= P.lo) P.hi = P.lo + P.ystep;
    P.xmax = P.N < 2 ? 2 : P.N;
    double xs = ceil(ag__svg_nice_step(P.xmax - 1, 8));
    P.xstep = xs < 1 ? 1 : (int)xs;
    const double left = 78, right = 170, top = title ? 48 : 20, bottom = 58;
    P.x0 = left, P.x1 = PLOT_W - right, P.y0 = PLOT_H - bottom, P.y1 = top;
    P.W = PLOT_W;
    if (title && P.W < 32 + ag__svg_text_width(title, 0, 16) * AG__SVG_BOLD)
        P.W = ceil(32 + ag__svg_text_width(title, 0, 16) * AG__SVG_BOLD);
    for (int s = 0; s < nseries; s++) {
        double w = P.x1 + 50 + ag__svg_text_width(names && names[s] ? names[s] : "series 99", LEGEND_CHARS, 12) + 12;
        if (w > P.W) P.W = ceil(w);
    }
    return P;
}

/* Grid lines and tick labels, the axes, and their labels. */
static void draw_axes(ag__text *t, const plot *P, const char *xlabel, const char *ylabel)
{
    char num[48];
    ag__text_puts(t, "<g class=\"axes\" font-size=\"11\">\n");
    int yd = ag__svg_step_decimals(P->ystep);
    for (int k = 0;; k++) {
        double v = P->lo + k * P->ystep;
        if (v > P->hi + P->ystep * 1e-6 || k > 100) break;
        double yy = ypos(P, v);
        ag__text_printf(t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>\n", P->x0, yy,
                        P->x1, yy);
        snprintf(num, sizeof num, "%.*f", yd, fabs(v) < P->ystep * 1e-9 ? 0.0 : v);
        ag__svg_text(t, P->x0 - 8, yy + 4, 11, "end", NULL, num, 0);
    }
    /* x ticks at 1 and the multiples of the step: 1, 5, 10, ... */
    for (int x = 1; x <= P->xmax; x = x == 1 && P->xstep > 1 ? P->xstep : x + P->xstep) {
        double xx = xpos(P, x);
        ag__text_printf(t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>\n", xx, P->y0,
                        xx, P->y1);
        ag__text_printf(t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333333\"/>\n", xx, P->y0,
                        xx, P->y0 + 5);
        snprintf(num, sizeof num, "%d", x);
        ag__svg_text(t, xx, P->y0 + 19, 11, "middle", NULL, num, 0);
    }
    ag__text_printf(t,
                    "<polyline points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"none\" stroke=\"#333333\" "
                    "stroke-width=\"1.2\"/>\n",
                    P->x0, P->y1, P->x0, P->y0, P->x1, P->y0);
    if (xlabel) ag__svg_text(t, (P->x0 + P->x1) / 2, PLOT_H - 16, 13, "middle", NULL, xlabel, 60);
    if (ylabel) {
        ag__text_printf(t, "<text transform=\"translate(%.1f %.1f) rotate(-90)\" font-size=\"13\" "
                           "text-anchor=\"middle\">", 22.0, (P->y0 + P->y1) / 2);
        ag__text_xml(t, ylabel, 60);
        ag__text_puts(t, "</text>\n");
    }
    ag__text_puts(t, "</g>\n");
}

/* Series s: a polyline per run of finite points, a dot with a tooltip on
 * each, and its legend entry right of the plot. */
static void draw_series(ag__text *t, const plot *P, int s, const char *name, const double *y, int n,
                        const char *xlabel)
{
    const char *c = SERIES_COLOURS[s % 8];
    const char *dash = s % 2 ? " stroke-dasharray=\"6 3\"" : "";
    ag__text_puts(t, "<g class=\"series\">\n");
    for (int i = 0; i < n;) {
        while (i < n && !isfinite(y[i])) i++;
        int j = i;
        while (j < n && isfinite(y[j])) j++;
        if (j - i >= 2) {
            ag__text_puts(t, "<polyline points=\"");
            for (int k = i; k < j; k++) ag__text_printf(t, "%s%.1f,%.1f", k > i ? " " : "", xpos(P, k + 1), ypos(P, y[k]));
            ag__text_printf(t, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", c, dash);
        }
        i = j;
    }
    double r = P->N <= 60 ? 3 : 1.5;
    for (int i = 0; i < n; i++) {
        if (!isfinite(y[i])) continue;
        ag__text_printf(t, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"><title>", xpos(P, i + 1),
                        ypos(P, y[i]), r, c);
        ag__text_xml(t, name, 40);
        ag__text_puts(t, ", ");
        ag__text_xml(t, xlabel ? xlabel : "x", 40);
        ag__text_printf(t, " %d: %.6g</title></circle>\n", i + 1, y[i]);
    }
    double ly = P->y1 + 10 + s * 22;
    ag__text_printf(t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>\n",
                    P->x1 + 16, ly, P->x1 + 44, ly, c, dash);
    ag__svg_text(t, P->x1 + 50, ly + 4, 12, "start", NULL, name, LEGEND_CHARS);
    ag__text_puts(t, "</g>\n");
}

ag_status ag_svg_line_plot(const char *path, const char *title, const char *xlabel, const char *ylabel, int nseries,
                           const char *const *names, const double *const *y, const int *n, char *err,
                           size_t errlen)
{
    const char *what = "plot";
    if (nseries < 1 || nseries > 64 || !y || !n)
        return ag__errf(err, errlen, AG_ERR_ARG, "%s: %s: need 1 to 64 series with their values and counts, got %d",
                        what, path ? path : "(null)", nseries);
    for (int s = 0; s < nseries; s++)
        if (n[s] < 0 || (n[s] > 0 && !y[s]))
            return ag__errf(err, errlen, AG_ERR_ARG, "%s: %s: series %d has %d points and values %p", what,
                            path ? path : "(null)", s, n[s], (const void *)y[s]);
    plot P = plot_layout(nseries, names, y, n, title);
    ag__text t = {0};
    ag__svg_open(&t, P.W, PLOT_H, title);
    /* the title centred over the plot area, or over the picture when wider */
    double tw = title ? ag__svg_text_width(title, 0, 16) * AG__SVG_BOLD : 0;
    double tx = (P.x0 + P.x1) / 2 - tw / 2 >= 16 ? (P.x0 + P.x1) / 2 : P.W / 2;
    if (title) ag__svg_text(&t, tx, 28, 16, "middle", "font-weight=\"bold\"", title, 0);
    draw_axes(&t, &P, xlabel, ylabel);
    for (int s = 0; s < nseries; s++) {
        char dflt[24];
        snprintf(dflt, sizeof dflt, "series %d", s + 1);
        draw_series(&t, &P, s, names && names[s] ? names[s] : dflt, y[s], n[s], xlabel);
    }
    ag__text_puts(&t, "</svg>\n");
    ag_status st = ag__text_save(&t, what, path, err, errlen);
    ag__text_free(&t);
    return st;
}
