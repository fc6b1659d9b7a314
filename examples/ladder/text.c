/* text.c: the text the ladder trains on: the English sentences of the pairs
 * file, one a line, as ids of the bytes they use; the last tenth held out. */
#include "ladder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int text_load(text *t, const char *path, int context)
{
    char *buf, err[512];
    size_t n, out = 0, prev = 0, prev_len = (size_t)-1;
    memset(t, 0, sizeof *t);
    if (ag_file_read(path, &buf, &n, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    for (size_t at = 0; at < n;) { /* the first column, in place */
        size_t end = at, len;
        while (end < n && buf[end] != '\n') end++;
        for (len = 0; at + len < end && buf[at + len] != '\t' && buf[at + len] != '\r'; len++) {}
        if (len > 0 && !(len == prev_len && !memcmp(buf + prev, buf + at, len))) {
            memmove(buf + out, buf + at, len);
            prev = out, prev_len = len, out += len;
            buf[out++] = '\n';
        }
        at = end + 1;
    }
    if (out < 20 * ((size_t)context + 1)) {
        fprintf(stderr, "%s: %s: %zu characters of text, need at least %d\n", prog, path, out, 20 * (context + 1));
        ag_file_free(buf);
        return 1;
    }
    int id[256];
    for (int c = 0; c < 256; c++) id[c] = -1;
    for (size_t i = 0; i < out; i++) id[(unsigned char)buf[i]] = 0;
    for (int c = 0; c < 256; c++)
        if (id[c] == 0) t->chars[t->V] = (unsigned char)c, id[c] = t->V++;
    if (!(t->ids = malloc(out * sizeof *t->ids))) {
        fprintf(stderr, "%s: out of memory\n", prog);
        ag_file_free(buf);
        return 1;
    }
    for (size_t i = 0; i < out; i++) t->ids[i] = id[(unsigned char)buf[i]];
    t->n = out, t->split = out - out / 10;
    ag_file_free(buf);
    return 0;
}

void text_free(text *t)
{
    free(t->ids);
    memset(t, 0, sizeof *t);
}
