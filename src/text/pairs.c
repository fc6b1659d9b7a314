/* pairs.c: d2l.ai's machine-translation data, read in C: preprocessing,
 * tokenizing, and the reader of a TSV file of sentence pairs.
 *
 *   preprocess   NBSPs -> ' ', lowercase, a space before , . ! ?
 *   tokenize     split at spaces, empty tokens skipped
 *   pairs        a TSV file of `source<TAB>target[<TAB>credits]` lines,
 *                bad lines skipped with a warning naming FILE:LINE
 *
 * The d2l code it follows is MTFraEng._preprocess / _tokenize / _build_arrays
 * and the older preprocess_nmt: the preprocessing is character for character
 * the same on the shipped data (checked against Python when this file was
 * written), except that lowercasing covers ASCII and Latin-1 only (see
 * attograd_text.h).
 *
 * Memory: a pairs object is a few blocks from ag__malloc, sized by a
 * measuring pass first, so a parse either succeeds whole or frees
 * everything and says AG_ERR_NOMEM.  Nothing here recurses. */
#include "core/alloc.h"

#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "attograd_text.h"
#include "io/file.h"
#include "io/json.h"

/* ------------------------------------------------------------------------ */
/* Preprocessing and tokenizing                                               */
/* ------------------------------------------------------------------------ */

int ag_text_preprocess(const char *in, char *out, size_t outlen)
{
    if (!in || !out || outlen == 0) return -1;
    const unsigned char *s = (const unsigned char *)in;
    size_t o = 0;
    int prev_space = 0; /* the previous character (after step 1) is ' ' */
    for (size_t i = 0; s[i];) {
        unsigned char c[2];
        size_t nc = 1, used = 1;
        c[0] = s[i];
        if (s[i] == 0xC2 && s[i + 1] == 0xA0) { /* U+00A0 no-break space */
            c[0] = ' ', used = 2;
        } else if (s[i] == 0xE2 && s[i + 1] == 0x80 && s[i + 2] == 0xAF) { /* U+202F */
            c[0] = ' ', used = 3;
        } else if (s[i] >= 'A' && s[i] <= 'Z') {
            c[0] = (unsigned char)(s[i] + ('a' - 'A'));
        } else if (s[i] == 0xC3 && s[i + 1] >= 0x80 && s[i + 1] <= 0x9E && s[i + 1] != 0x97) {
            /* U+00C0..U+00DE -> U+00E0..U+00FE: same lead byte, +0x20 */
            c[0] = 0xC3, c[1] = (unsigned char)(s[i + 1] + 0x20), nc = used = 2;
        } else if (s[i] == 0xC5 && s[i + 1] == 0x92) { /* U+0152 -> U+0153 */
            c[0] = 0xC5, c[1] = 0x93, nc = used = 2;
        }
        int space_before = i > 0 && !prev_space &&
                           (c[0] == ',' || c[0] == '.' || c[0] == '!' || c[0] == '?');
        if (o + (size_t)space_before + nc >= outlen || o + nc >= (size_t)INT_MAX) return -1;
        if (space_before) out[o++] = ' ';
        for (size_t k = 0; k < nc; k++) out[o++] = (char)c[k];
        prev_space = c[0] == ' ';
        i += used;
    }
    out[o] = '\0';
    return (int)o;
}

int ag_text_tokenize(char *s, char **tok, int maxtok)
{
    if (!s) return 0;
    int n = 0;
    char *p = s;
    for (;;) {
        while (*p == ' ') *p++ = '\0';
        if (!*p) break;
        if (n >= maxtok) return -1;
        tok[n++] = p;
        while (*p && *p != ' ') p++;
    }
    return n;
}

int ag_tokens_equal(const char *const *a, int na, const char *const *b, int nb)
{
    if (na != nb) return 0;
    for (int i = 0; i < na; i++)
        if (strcmp(a[i], b[i]) != 0) return 0;
    return 1;
}

/* Tokens in a preprocessed string, and the bytes they take with a NUL each. */
static int count_tokens(const char *s, size_t *bytes)
{
    int n = 0;
    *bytes = 0;
    for (size_t i = 0; s[i];) {
        if (s[i] == ' ') { i++; continue; }
        size_t j = i;
        while (s[j] && s[j] != ' ') j++;
        n++;
        *bytes += j - i + 1;
        i = j;
    }
    return n;
}

/* ------------------------------------------------------------------------ */
/* Sentence pairs                                                             */
/* ------------------------------------------------------------------------ */

/* The parse runs twice over the same lines with the same code: a measuring
 * pass (fill 0) that counts pairs, tokens and bytes and records warnings,
 * then a filling pass into blocks of exactly that size. */
typedef struct builder {
    int fill;
    int npairs;
    size_t ntok, nbytes;
    ag_pair *pairs;
    const char **tok;
    char *text;
} builder;

static const char *put_text(builder *b, const char *s, size_t n)
{
    char *dst = NULL;
    if (b->fill) {
        dst = b->text + b->nbytes;
        memcpy(dst, s, n);
        dst[n] = '\0';
    }
    b->nbytes += n + 1;
    return dst;
}

/* Copy the tokens of preprocessed string s; returns where they start. */
static const char *const *put_tokens(builder *b, const char *s)
{
    const char *const *start = b->fill ? b->tok + b->ntok : NULL;
    for (size_t i = 0; s[i];) {
        if (s[i] == ' ') { i++; continue; }
        size_t j = i;
        while (s[j] && s[j] != ' ') j++;
        const char *t = put_text(b, s + i, j - i);
        if (b->fill) b->tok[b->ntok] = t;
        b->ntok++;
        i = j;
    }
    return start;
}

/* Why line s[0..n) cannot be used, written into why, or NULL when it can
 * (then *tab is its first tab). */
static const char *line_problem(const char *s, size_t n, const char **tab, char *why,
                                size_t whylen)
{
    if (n == 0) return "empty line";
    if (n > AG_PAIRS_MAX_LINE) {
        snprintf(why, whylen, "line is %zu bytes long, more than %d", n, AG_PAIRS_MAX_LINE);
        return why;
    }
    const char *nul = memchr(s, '\0', n);
    if (nul) {
        snprintf(why, whylen, "NUL byte at column %zu", (size_t)(nul - s) + 1);
        return why;
    }
    size_t bad = ag__utf8_check((const unsigned char *)s, n);
    if (bad < n) {
        snprintf(why, whylen, "invalid UTF-8 at column %zu", bad + 1);
        return why;
    }
    *tab = memchr(s, '\t', n);
    if (!*tab) return "no tab between source and target";
    return NULL;
}

/* The target column: up to the next tab (a third column is credits). */
static size_t target_len(const char *t, const char *end)
{
    const char *tab = memchr(t, '\t', (size_t)(end - t));
    return (size_t)((tab ? tab : end) - t);
}

static void warn(ag_pairs *p, const char *name, int lineno, const char *why)
{
    if (p->n_warnings_kept < AG_PAIRS_MAX_WARNINGS)
        snprintf(p->warnings[p->n_warnings_kept++], sizeof p->warnings[0],
                 "%s:%d: %s; line skipped", name, lineno, why);
    p->n_skipped++;
}

/* One pass over the buffer.  Returns 0, or -1 when the line count would not
 * fit in an int. */
static int parse_pass(const char *buf, size_t len, const char *name, ag_pairs *p, builder *b)
{
    /* A line is at most AG_PAIRS_MAX_LINE bytes, so each column fits `raw`
     * and preprocessing at most doubles it. */
    char raw[AG_PAIRS_MAX_LINE + 1];
    char pre_src[2 * AG_PAIRS_MAX_LINE + 1], pre_tgt[2 * AG_PAIRS_MAX_LINE + 1];
    char why[128];
    int lineno = 0;
    size_t pos = 0;
    while (pos < len) {
        if (lineno == INT_MAX) return -1;
        lineno++;
        const char *s = buf + pos;
        const char *nl = memchr(s, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - s) : len - pos;
        pos += n + (nl ? 1 : 0);
        if (n > 0 && s[n - 1] == '\r') n--;

        const char *tab = NULL;
        const char *problem = line_problem(s, n, &tab, why, sizeof why);
        if (problem) {
            if (!b->fill) warn(p, name, lineno, problem);
            continue;
        }
        size_t src_n = (size_t)(tab - s);
        const char *tgt = tab + 1;
        size_t tgt_n = target_len(tgt, s + n);

        size_t src_bytes, tgt_bytes;
        memcpy(raw, s, src_n), raw[src_n] = '\0';
        int ok = ag_text_preprocess(raw, pre_src, sizeof pre_src) >= 0;
        memcpy(raw, tgt, tgt_n), raw[tgt_n] = '\0';
        ok = ok && ag_text_preprocess(raw, pre_tgt, sizeof pre_tgt) >= 0;
        assert(ok); /* sized above: a column never outgrows its buffer */
        (void)ok;
        int src_len = count_tokens(pre_src, &src_bytes);
        int tgt_len = count_tokens(pre_tgt, &tgt_bytes);
        if (src_len == 0 || tgt_len == 0) {
            if (!b->fill)
                warn(p, name, lineno, src_len == 0 ? "empty source sentence" : "empty target sentence");
            continue;
        }

        ag_pair pr = {.src_len = src_len, .tgt_len = tgt_len, .line = lineno};
        pr.src_text = put_text(b, s, src_n);
        pr.tgt_text = put_text(b, tgt, tgt_n);
        pr.src = put_tokens(b, pre_src);
        pr.tgt = put_tokens(b, pre_tgt);
        if (b->fill) b->pairs[b->npairs] = pr;
        b->npairs++;
    }
    return 0;
}

void ag_pairs_free(ag_pairs *p)
{
    if (!p) return;
    ag__free(p->text_);
    ag__free((void *)p->tok_);
    ag__free(p->pairs);
    ag__free(p);
}

ag_status ag_pairs_parse(const char *buf, size_t len, const char *name, ag_pairs **out,
                         char *err, size_t errlen)
{
    if (!out)
        return ag__errf(err, errlen, AG_ERR_ARG, "pairs: out is NULL");
    *out = NULL;
    if (!name) name = "<memory>";
    if (!buf && len > 0)
        return ag__errf(err, errlen, AG_ERR_ARG, "%s: buffer is NULL", name);
    ag_pairs *p = ag__calloc(1, sizeof *p);
    if (!p)
        return ag__errf(err, errlen, AG_ERR_NOMEM, "%s: out of memory", name);
    builder b = {0};
    if (parse_pass(buf, len, name, p, &b) != 0) {
        ag__errf(err, errlen, AG_ERR_FORMAT, "%s: more than %d lines", name, INT_MAX);
        ag_pairs_free(p);
        return AG_ERR_FORMAT;
    }
    if (b.npairs == 0) {
        if (p->n_skipped > 0)
            ag__errf(err, errlen, AG_ERR_FORMAT, "%s: no usable sentence pairs (%d line%s skipped; first: %s)",
                     name, p->n_skipped, p->n_skipped == 1 ? "" : "s", p->warnings[0]);
        else
            ag__errf(err, errlen, AG_ERR_FORMAT, "%s: no usable sentence pairs (the file is empty)", name);
        ag_pairs_free(p);
        return AG_ERR_FORMAT;
    }
    size_t ntok = b.ntok, nbytes = b.nbytes;
    int npairs = b.npairs;
    p->pairs = ag__calloc((size_t)npairs, sizeof *p->pairs);
    p->tok_ = ag__calloc(ntok, sizeof *p->tok_);
    p->text_ = ag__malloc(nbytes);
    if (!p->pairs || !p->tok_ || !p->text_) {
        ag__errf(err, errlen, AG_ERR_NOMEM, "%s: out of memory for %d sentence pairs", name, npairs);
        ag_pairs_free(p);
        return AG_ERR_NOMEM;
    }
    b = (builder){.fill = 1, .pairs = p->pairs, .tok = p->tok_, .text = p->text_};
    parse_pass(buf, len, name, p, &b);
    assert(b.npairs == npairs && b.ntok == ntok && b.nbytes == nbytes);
    p->n = npairs;
    *out = p;
    return AG_OK;
}

ag_status ag_pairs_load(const char *path, ag_pairs **out, char *err, size_t errlen)
{
    if (out) *out = NULL;
    if (!path || !out)
        return ag__errf(err, errlen, AG_ERR_ARG, "pairs: %s is NULL", path ? "out" : "path");
    char *data;
    size_t len;
    ag_status st = ag__file_read(path, &data, &len, err, errlen);
    if (st != AG_OK) return st;
    st = ag_pairs_parse(data, len, path, out, err, errlen);
    ag__free(data);
    return st;
}

