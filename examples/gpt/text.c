/* text.c: the corpus of the gpt example: a file's characters, the
 * vocabulary of its bytes, and the held-out split. */
#include "gpt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* The first column of each line, each followed by '\n', a line equal to
 * the one before it skipped (eng-fra.tsv repeats an English sentence for
 * each of its translations).  In place: the result is never longer. */
static size_t first_column(unsigned char *b, size_t n)
{
    size_t out = 0, prev = 0, prev_len = (size_t)-1;
    for (size_t at = 0; at < n;) {
        size_t end = at, len;
        while (end < n && b[end] != '\n') end++;
        for (len = 0; at + len < end && b[at + len] != '\t' && b[at + len] != '\r'; len++) {}
        int repeat = len == prev_len && !memcmp(b + prev, b + at, len);
        if (len > 0 && !repeat) {
            memmove(b + out, b + at, len);
            prev = out, prev_len = len;
            out += len;
            b[out++] = '\n';
        }
        at = end + 1;
    }
    return out;
}

int text_load(const char *path, unsigned char **bytes, size_t *n)
{
    char *buf, err[512];
    *bytes = NULL, *n = 0;
    if (ag_file_read(path, &buf, n, err, sizeof err) != AG_OK) { /* a regular file only: a FIFO never blocks */
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    unsigned char *b = (unsigned char *)buf;
    size_t len = *n;
    if (has_suffix(path, ".tsv")) len = first_column(b, len);
    if (len < 2) {
        fprintf(stderr, "%s: %s: %zu characters of text, need at least 2\n", prog, path, len);
        ag_file_free(buf);
        *n = 0;
        return 1;
    }
    *bytes = b, *n = len;
    return 0;
}

void vocab_from_text(vocab *v, const unsigned char *bytes, size_t n)
{
    int seen[256] = {0};
    for (size_t i = 0; i < n; i++) seen[bytes[i]] = 1;
    v->V = 0;
    for (int c = 0; c < 256; c++) {
        v->id[c] = seen[c] ? v->V : -1;
        if (seen[c]) v->chars[v->V++] = (unsigned char)c;
    }
}

int vocab_parse(vocab *v, const char *s)
{
    v->V = 0;
    for (int c = 0; c < 256; c++) v->id[c] = -1;
    while (s && *s) {
        char *end;
        errno = 0;
        long c = strtol(s, &end, 10);
        if (end == s || errno || c < 0 || c > 255 || v->id[c] >= 0 || (v->V && c <= v->chars[v->V - 1]) ||
            (*end && *end != ','))
            return 1;
        v->id[c] = v->V;
        v->chars[v->V++] = (unsigned char)c;
        s = *end ? end + 1 : end;
    }
    return v->V < 1;
}

void vocab_format(const vocab *v, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < v->V && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? "," : "", v->chars[i]);
}

int text_encode(const vocab *v, const unsigned char *bytes, size_t n, int *ids, const char *path)
{
    for (size_t i = 0; i < n; i++) {
        ids[i] = v->id[bytes[i]];
        if (ids[i] < 0) {
            fprintf(stderr, "%s: %s: character %d ('%c') at byte %zu is not in the model's vocabulary\n", prog,
                    path, bytes[i], bytes[i] >= 32 && bytes[i] < 127 ? bytes[i] : '?', i);
            return 1;
        }
    }
    return 0;
}

size_t held_out_start(size_t n, int context)
{
    size_t held = n / 10;
    if (held < (size_t)context + 1 && n >= 2 * ((size_t)context + 1)) held = (size_t)context + 1;
    return n - held;
}
