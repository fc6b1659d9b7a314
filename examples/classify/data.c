/* data.c: the labelled sentences of a pairs file, their held-out split and
 * the batches the model reads.
 *
 * The split holds out every 10th distinct English sentence with all of its
 * translations, so that no sentence of the held-out part was seen, in
 * either language, during training. */
#include "classify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The next column of the line [at, end): its start and length, and *at
 * past its tab (or at end). */
static int column(const char *buf, size_t *at, size_t end, size_t *len)
{
    size_t a = *at, e = a;
    while (e < end && buf[e] != '\t') e++;
    *len = e - a;
    *at = e < end ? e + 1 : e;
    return (int)a;
}

static int grow(sentence **s, int *cap, int n)
{
    if (n < *cap) return 0;
    int c = *cap ? *cap * 2 : 1024;
    sentence *p = realloc(*s, (size_t)c * sizeof *p);
    if (!p) return 1;
    *s = p, *cap = c;
    return 0;
}

static int add(sentence **s, int *n, int *cap, const char *bytes, size_t len, int label, int max_len,
               int *truncated)
{
    if (grow(s, cap, *n)) return 1;
    if (len > (size_t)max_len) (*truncated)++, len = (size_t)max_len;
    (*s)[(*n)++] = (sentence){(const unsigned char *)bytes, (int)len, label};
    return 0;
}

/* One line [at, end) of path, line number lineno: its sentences go to the
 * held-out part when its English sentence is the 10th, 20th ... distinct one. */
static int take_line(corpus *d, const char *path, int lineno, size_t at, size_t end, int max_len,
                     size_t *prev, size_t *prev_len, int *group, int cap[2])
{
    if (end > at && d->buf[end - 1] == '\r') end--;
    if (end == at) return 0; /* an empty line */
    size_t en_len, fr_len;
    int en = column(d->buf, &at, end, &en_len), fr = column(d->buf, &at, end, &fr_len);
    if (en_len == 0 || fr_len == 0) {
        fprintf(stderr, "%s: %s:%d: need two tab-separated sentences, English then French\n", prog, path, lineno);
        return 1;
    }
    int repeat = en_len == *prev_len && !memcmp(d->buf + *prev, d->buf + en, en_len);
    if (!repeat) (*group)++, *prev = (size_t)en, *prev_len = en_len;
    int held = *group % 10 == 0;
    sentence **s = held ? &d->held : &d->train;
    int *n = held ? &d->n_held : &d->n_train;
    if ((!repeat && add(s, n, &cap[held], d->buf + en, en_len, LABEL_ENGLISH, max_len, &d->truncated)) ||
        add(s, n, &cap[held], d->buf + fr, fr_len, LABEL_FRENCH, max_len, &d->truncated)) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    return 0;
}

int corpus_load(corpus *d, const char *path, int max_len)
{
    char err[512];
    size_t n;
    memset(d, 0, sizeof *d);
    if (ag_file_read(path, &d->buf, &n, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    size_t prev = 0, prev_len = (size_t)-1;
    int group = 0, cap[2] = {0, 0}, lineno = 0;
    for (size_t at = 0; at < n; lineno++) {
        size_t end = at;
        while (end < n && d->buf[end] != '\n') end++;
        if (take_line(d, path, lineno + 1, at, end, max_len, &prev, &prev_len, &group, cap)) {
            corpus_free(d);
            return 1;
        }
        at = end + 1;
    }
    if (d->n_train < 1 || d->n_held < 1) {
        fprintf(stderr, "%s: %s: %d training and %d held-out sentences; need at least 10 distinct English ones\n",
                prog, path, d->n_train, d->n_held);
        corpus_free(d);
        return 1;
    }
    return 0;
}

void corpus_free(corpus *d)
{
    ag_file_free(d->buf);
    free(d->train);
    free(d->held);
    memset(d, 0, sizeof *d);
}

int minibatch_alloc(minibatch *b, int B, int max_len)
{
    b->B = B, b->T = 0;
    b->ids = malloc((size_t)B * (size_t)max_len * sizeof *b->ids);
    b->seen = malloc((size_t)B * sizeof *b->seen);
    b->labels = malloc((size_t)B * sizeof *b->labels);
    if (b->ids && b->seen && b->labels) return 0;
    minibatch_free(b);
    return 1;
}

void minibatch_free(minibatch *b)
{
    free(b->ids);
    free(b->seen);
    free(b->labels);
    b->ids = b->seen = b->labels = NULL;
}

void minibatch_fill(minibatch *b, const sentence *const *rows, int B)
{
    int T = 1;
    for (int i = 0; i < B; i++)
        if (rows[i]->len > T) T = rows[i]->len;
    b->B = B, b->T = T;
    for (int i = 0; i < B; i++) {
        for (int t = 0; t < T; t++) b->ids[i * T + t] = t < rows[i]->len ? rows[i]->bytes[t] : 0;
        b->seen[i] = rows[i]->len + 1;
        b->labels[i] = rows[i]->label;
    }
}
