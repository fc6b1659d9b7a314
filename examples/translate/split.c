/* examples/translate/split.c: translate split, a training part and a
 * held-out part of a data file, by distinct source sentence.
 *
 * The k-th distinct source (its preprocessed tokens, in order of first
 * appearance, k from 0) goes with all its pairs to the held-out file when
 * k % every == every - 1, and to the training file otherwise.  So no
 * held-out source is seen in training (a model cannot score there by
 * memorising), and both parts span every sentence length.  Lines are
 * copied verbatim (a final '\r' dropped); lines the data reader skips are
 * left out of both.  tests/reference/translator.py split is the same rule
 * and writes the same bytes.
 *
 * Invariant: each file is written whole or not at all (a temporary and a
 * rename), and the two share no source. */
#include "translate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* held[line] = 1 for the (1-based) line of each pair that goes to the
 * held-out part; *sources gets the number of its distinct sources. */
static int mark_held_out(const ag_pairs *p, int every, unsigned char *held, int *sources)
{
    char err[256];
    ag_groups *gr = NULL;
    if (ag_groups_build(p, NULL, 0, &gr, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    *sources = 0;
    for (int k = 0; k < gr->n; k++) {
        if (k % every != every - 1) continue;
        const ag_group *g = &gr->groups[k];
        for (int r = 0; r < g->nrefs; r++) held[p->pairs[g->ref_pair[r]].line] = 1;
        (*sources)++;
    }
    ag_groups_free(gr);
    return 0;
}

/* All of the file, or of the stream (ag_file_read); free with ag_file_free.
 * NULL (with a message) on failure. */
static char *read_all(const char *path, size_t *len)
{
    char *buf, err[512];
    if (ag_file_read(path, &buf, len, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return NULL;
    }
    return buf;
}

/* Append the kept lines of buf (keep[line] == want) to out, each with '\n'. */
static size_t copy_lines(const char *buf, size_t len, const unsigned char *keep, int want, char *out)
{
    size_t n = 0;
    int line = 1;
    for (size_t at = 0; at < len; line++) {
        const char *nl = memchr(buf + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - buf) : len, l = end - at;
        if (l && buf[end - 1] == '\r') l--;
        if (keep[line] == want) memcpy(out + n, buf + at, l), n += l, out[n++] = '\n';
        at = end + 1;
    }
    return n;
}

/* data to path through a temporary beside it and a rename, so that path
 * is either its old self or the whole new file. */
/* path holds data afterwards, or what it held before (ag_file_write). */
static int write_part(const char *path, const char *data, size_t len)
{
    char err[512];
    if (ag_file_write(path, data, len, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    return 0;
}

int cmd_split(const opts *o)
{
    if (!o->data || !o->train_out || !o->test)
        return bad("split needs --data FILE, --train TRAIN and --test HELD_OUT%s%s", "", "");
    ag_pairs *p = NULL;
    size_t len = 0;
    char *buf = NULL, *out = NULL;
    unsigned char *keep = NULL;
    int rc = 1, sources = 0;
    /* read once: a pipe cannot be read twice */
    if (!(buf = read_all(o->data, &len)) || parse_pairs(buf, len, o->data, &p)) goto done;
    /* a line per '\n', and one more when the file does not end in one */
    size_t lines = 2;
    for (size_t i = 0; i < len; i++) lines += buf[i] == '\n';
    keep = calloc(lines, 1), out = malloc(len + lines);
    if (!keep || !out) {
        fprintf(stderr, "%s: out of memory\n", prog);
        goto done;
    }
    memset(keep, 2, lines); /* 2: skipped by the reader, in neither part */
    for (int i = 0; i < p->n; i++) keep[p->pairs[i].line] = 0;
    if (mark_held_out(p, o->every, keep, &sources)) goto done;
    size_t n_train = copy_lines(buf, len, keep, 0, out);
    if (write_part(o->train_out, out, n_train)) goto done;
    size_t n_test = copy_lines(buf, len, keep, 1, out);
    if (write_part(o->test, out, n_test)) goto done;
    int pairs_test = 0;
    for (int i = 0; i < p->n; i++) pairs_test += keep[p->pairs[i].line] == 1;
    printf("%s: %d pairs -> %s: %d pairs, %s: %d pairs (%d of the sources)\n", o->data, p->n, o->train_out,
           p->n - pairs_test, o->test, pairs_test, sources);
    rc = 0;
done:
    free(keep), free(out), ag_file_free(buf);
    ag_pairs_free(p);
    return rc;
}
