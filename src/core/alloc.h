/* alloc.h: the library's allocator, through the ag_set_allocator hooks, and
 * its one way of formatting an error message.
 *
 * The one internal header that every layer may include: io, text and viz
 * use the public API and this, nothing else (as Lua's lauxlib uses only
 * the official API). */
#ifndef AG_ALLOC_H
#define AG_ALLOC_H

#include <stdarg.h>
#include <stddef.h>

#include "attograd_core.h"

void *ag__malloc(size_t bytes);          /* NULL when out of memory */
void ag__free(void *p);                  /* NULL is fine */
void *ag__calloc(size_t n, size_t size); /* zeroed; NULL on overflow */

/* printf into err[0..errlen) and return s, so that a failure reads as one
 * line: `return ag__errf(err, errlen, AG_ERR_IO, "%s: cannot open: %s", path,
 * strerror(errno));`.  err may be NULL (or errlen 0): nothing is written.
 * The message is cut to fit and always NUL-terminated (docs/errors.md). */
ag_status ag__errf(char *err, size_t errlen, ag_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
ag_status ag__verrf(char *err, size_t errlen, ag_status s, const char *fmt, va_list ap);

#endif /* AG_ALLOC_H */
