/* errf.c: ag__errf, the library's one printf into an error message.
 *
 * Every module that formats a reason (the graph's sticky error, the store's,
 * the optimizer's, and the caller's err buffer of io, text and viz) goes
 * through here, so a message is always cut to fit and NUL-terminated the
 * same way (docs/errors.md). */
#include "core/alloc.h"

#include <stdio.h>

ag_status ag__verrf(char *err, size_t errlen, ag_status s, const char *fmt, va_list ap)
{
    if (err && errlen) {
        if (vsnprintf(err, errlen, fmt, ap) < 0) err[0] = '\0'; /* an encoding error */
    }
    return s;
}

ag_status ag__errf(char *err, size_t errlen, ag_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ag__verrf(err, errlen, s, fmt, ap);
    va_end(ap);
    return s;
}
