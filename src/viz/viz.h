/* viz.h: what the picture writers (dot.c, svg.c, heatmap.c) share, private
 * to the library: a growing text buffer, the escaping of caller text for
 * XML and DOT, and saving (through io/file.h), defined in buffer.c; and the
 * SVG primitives, defined in svg.c.
 *
 * The buffer allocates through ag__malloc (the allocator hook).  Out of
 * memory is sticky: later appends do nothing and saving reports it, so a
 * writer reads straight through and checks once, like a graph. */
#ifndef AG_VIZ_H
#define AG_VIZ_H

#include "attograd_viz.h"
#include "core/alloc.h"
#include "io/file.h"

#include <stdarg.h>
#include <string.h>

typedef struct ag__text {
    char *s;      /* NUL-terminated when len > 0 */
    size_t len, cap;
    int nomem;    /* an append failed */
} ag__text;

void ag__text_printf(ag__text *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void ag__text_puts(ag__text *t, const char *s);
void ag__text_free(ag__text *t);

/* Caller text, made safe: invalid UTF-8 and control characters become '?',
 * and at most max_chars characters are kept (then "..." as one character,
 * U+2026); max_chars 0 keeps everything.  xml escapes & < > " ' as
 * entities; dot escapes " and \ for a double-quoted DOT string.  NULL
 * appends nothing. */
void ag__text_xml(ag__text *t, const char *s, int max_chars);
void ag__text_dot(ag__text *t, const char *s, int max_chars);
/* Characters (code points) of s as ag__text_xml would keep them. */
int ag__text_chars(const char *s, int max_chars);

/* Write t to path crash-safely (ag__file_save, io/file.h).  what names the
 * writer in messages ("dot: x.dot: cannot create the temporary file ..."). */
ag_status ag__text_save(const ag__text *t, const char *what, const char *path, char *err, size_t errlen);

/* ---- SVG primitives (svg.c) ------------------------------------------------ */

/* The XML prolog, <svg> of w x h pixels on a white background, and
 * <title> when title is not NULL. */
void ag__svg_open(ag__text *t, double w, double h, const char *title);
/* <text> at (x, y) with anchor start|middle|end and extra attributes (or
 * NULL), s escaped and cut to max_chars (0: all). */
void ag__svg_text(ag__text *t, double x, double y, double font, const char *anchor, const char *extra,
                  const char *s, int max_chars);
/* Rough width of s (cut to max_chars) at font size font: only to make
 * room for labels. */
double ag__svg_text_width(const char *s, int max_chars, double font);
#define AG__SVG_BOLD 1.1 /* bold glyphs are about a tenth wider */
/* "#rrggbb" of the viridis map at t in [0, 1] (clamped; NaN gives 0). */
void ag__svg_viridis(double t, char hex[8]);
/* The <stop> elements of a gradient through the viridis samples. */
void ag__svg_viridis_stops(ag__text *t);
/* A round tick step (1, 2 or 5 times a power of ten) giving about target
 * intervals over range; the decimals it needs (0.05 -> 2, 5 -> 0). */
double ag__svg_nice_step(double range, int target);
int ag__svg_step_decimals(double step);

/* The explorer page's scripts, written into it by html.c: the drawing
 * functions (explorer_draw_js.c), then the page (explorer_js.c). */
extern const char ag__explorer_draw_js[];
extern const char ag__explorer_js[];
/* The whole model at a glance (overview_js.c): its style, and its script,
 * after the page's, on the explorer and the live page of kind "attention"
 * (the others draw no glance). */
extern const char ag__overview_css[];
extern const char ag__overview_js[];
/* What the explorer page and the live page (live.c) share, from html.c:
 * the style; the check of the data (strict UTF-8 JSON, an object whose
 * "kind" the script draws; *attention: that kind is "attention"), AG_ERR_ARG
 * naming path; the JSON put in the page with each '<' as \u003c. */
extern const char ag__explorer_css[];
ag_status ag__explorer_check_json(const char *path, const char *json, int *attention, char *err, size_t errlen);
void ag__explorer_put_json(ag__text *t, const char *json);
/* The live page's scripts: its WASI (live_wasi_js.c, also the source of
 * its worker), then the page (live_js.c), after the explorer's. */
extern const char ag__live_wasi_js[];
extern const char ag__live_js[];
extern const char ag__sampling_js[]; /* the GPT page's sampling controls */

#endif
