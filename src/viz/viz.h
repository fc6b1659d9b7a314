/* viz.h: what the picture writers (dot.c, svg.c) share, private to the
 * library: a growing text buffer, the escaping of caller text for XML and
 * DOT, and saving (through io/file.h).  Defined in svg.c.
 *
 * The buffer allocates through ag__malloc (the allocator hook).  Out of
 * memory is sticky: later appends do nothing and saving reports it, so a
 * writer reads straight through and checks once, like a graph. */
#ifndef AG_VIZ_H
#define AG_VIZ_H

#include "attograd.h"
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

#endif
