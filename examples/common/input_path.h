/* examples/common/input_path.h: "-" as an input flag's value means stdin,
 * shared by the examples' option parsers.
 *
 *   o->data = input_path(v, &o->stdin_uses);   for each input flag
 *   if (o->stdin_uses > 1) refuse: stdin can be read once
 *
 * The library reads "/dev/stdin" as any other input: a regular file when
 * stdin is redirected from one, a pipe read to its end as a stream
 * (docs/errors.md), refused when it is a terminal. */
#ifndef EXAMPLES_INPUT_PATH_H
#define EXAMPLES_INPUT_PATH_H

#include <string.h>

static inline const char *input_path(const char *v, int *stdin_uses)
{
    if (strcmp(v, "-") != 0) return v;
    ++*stdin_uses;
    return "/dev/stdin";
}

#endif /* EXAMPLES_INPUT_PATH_H */
