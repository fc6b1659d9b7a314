/* examples/common/whole_number.h: a flag's whole-number value, checked,
 * for the examples' command lines. */
#ifndef EXAMPLES_COMMON_WHOLE_NUMBER_H
#define EXAMPLES_COMMON_WHOLE_NUMBER_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* s as a whole number in [lo, hi] into *out: 0, or 2 (bad usage) after
 * "PROG: FLAG needs a whole number from LO to HI, got 'S'" on stderr. */
static inline int whole_number(const char *prog, const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "%s: %s needs a whole number from %ld to %ld, got '%s'\n", prog, flag, lo, hi, s);
        return 2;
    }
    *out = v;
    return 0;
}

#endif
