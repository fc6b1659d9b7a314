/* text.c: d2l.ai's machine-translation data pipeline, in C.
 *
 *   preprocess   NBSPs -> ' ', lowercase, a space before , . ! ?
 *   tokenize     split at spaces, empty tokens skipped
 *   pairs        a TSV file of `source<TAB>target[<TAB>credits]` lines,
 *                bad lines skipped with a warning naming FILE:LINE
 *   groups       pairs with the same source, for multi-reference scoring
 *   vocab        <pad> <bos> <eos> <unk>, then tokens by decreasing count
 *   encode       ids + <eos>, cut or padded to a fixed length
 *
 * The d2l code it follows is MTFraEng._preprocess / _tokenize / _build_arrays
 * and the older preprocess_nmt / build_array_nmt / truncate_pad: the
 * preprocessing is character for character the same on the shipped data
 * (checked against Python when this file was written), except that
 * lowercasing covers ASCII and Latin-1 only (see attograd_text.h).
 *
 * Memory: each object is a few blocks from ag__malloc, sized by a measuring
 * pass first, so a parse either succeeds whole or frees everything and says
 * AG_ERR_NOMEM.  Nothing here recurses; sorting is qsort. */
#include "attograd.h"
#include "core/alloc.h"

#include <stdarg.h>
#include <string.h>

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "attograd_text.h"
#include "io/file.h"

/* FNV-1a over a token sequence, each token followed by a 0 byte so that
 * ["ab"] and ["a", "b"] differ. */
static uint64_t hash_bytes(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211u;
    }
    return h;
}
#define HASH_SEED 14695981039346656037u

static uint64_t hash_tokens(const char *const *tok, int n)
{
    uint64_t h = HASH_SEED;
    for (int i = 0; i < n; i++) h = hash_bytes(h, tok[i], strlen(tok[i]) + 1);
    return h;
}

/* Smallest power of two >= 2 n (and >= 8): hash tables stay half empty. */
static size_t table_cap(size_t n)
{
    size_t cap = 8;
    while (cap < 2 * n) cap *= 2;
    return cap;
}

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

/* Offset of the first byte of s[0..n) that is not part of valid UTF-8
 * (overlong forms, surrogates and code points past U+10FFFF are invalid), or
 * n when it all is. */
static size_t utf8_bad_at(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t len;
        unsigned char lo = 0x80, hi = 0xBF; /* range of the second byte */
        if (c < 0x80) { i++; continue; }
        else if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c == 0xE0) len = 3, lo = 0xA0;
        else if (c == 0xED) len = 3, hi = 0x9F;
        else if (c >= 0xE1 && c <= 0xEF) len = 3;
        else if (c == 0xF0) len = 4, lo = 0x90;
        else if (c == 0xF4) len = 4, hi = 0x8F;
        else if (c >= 0xF1 && c <= 0xF3) len = 4;
        else return i;
        if (n - i < len || s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return i;
        i += len;
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
    size_t bad = utf8_bad_at((const unsigned char *)s, n);
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

/* ------------------------------------------------------------------------ */
/* Grouping by source                                                         */
/* ------------------------------------------------------------------------ */

void ag_groups_free(ag_groups *g)
{
    if (!g) return;
    ag__free(g->storage_);
    ag__free(g);
}

ag_status ag_groups_build(const ag_pairs *p, const int *idx, int nidx, ag_groups **out,
                          char *err, size_t errlen)
{
    if (!out)
        return ag__errf(err, errlen, AG_ERR_ARG, "groups: out is NULL");
    *out = NULL;
    if (!p)
        return ag__errf(err, errlen, AG_ERR_ARG, "groups: pairs is NULL");
    if (!idx) nidx = p->n;
    if (nidx < 0)
        return ag__errf(err, errlen, AG_ERR_ARG, "groups: %d indices", nidx);
    for (int i = 0; idx && i < nidx; i++)
        if (idx[i] < 0 || idx[i] >= p->n)
            return ag__errf(err, errlen, AG_ERR_ARG, "groups: index %d is pair %d, outside [0, %d)", i, idx[i], p->n);

    /* The kept block: groups, then the reference pointers, pair indices and
     * lengths (at most one of each per pair).  The temporary block: the hash
     * table and, per pair, its group. */
    size_t n = (size_t)nidx, cap = table_cap(n);
    size_t off_ref = n * sizeof(ag_group);
    size_t off_pair = off_ref + n * sizeof(const char *const *);
    size_t off_len = off_pair + n * sizeof(int);
    ag_groups *g = ag__calloc(1, sizeof *g);
    char *keep = ag__malloc(off_len + n * sizeof(int));
    int *tmp = ag__malloc((cap + 2 * n) * sizeof(int));
    if (!g || !keep || !tmp) {
        ag__free(g), ag__free(keep), ag__free(tmp);
        return ag__errf(err, errlen, AG_ERR_NOMEM, "groups: out of memory for %d pairs", nidx);
    }
    g->storage_ = keep;
    g->groups = (ag_group *)keep;
    const char *const **ref = (const char *const **)(keep + off_ref);
    int *ref_pair = (int *)(keep + off_pair);
    int *ref_len = (int *)(keep + off_len);
    int *table = tmp, *group_of = tmp + cap, *fill = tmp + cap + n;
    for (size_t i = 0; i < cap; i++) table[i] = -1;

    /* 1. each pair finds (or opens) the group of its source */
    int ng = 0;
    for (int i = 0; i < nidx; i++) {
        const ag_pair *pr = &p->pairs[idx ? idx[i] : i];
        size_t h = (size_t)hash_tokens(pr->src, pr->src_len) & (cap - 1);
        while (table[h] >= 0 &&
               !ag_tokens_equal(g->groups[table[h]].src, g->groups[table[h]].src_len, pr->src,
                                pr->src_len))
            h = (h + 1) & (cap - 1);
        if (table[h] < 0) {
            table[h] = ng;
            g->groups[ng++] = (ag_group){.first = idx ? idx[i] : i, .src = pr->src,
                                         .src_len = pr->src_len};
        }
        group_of[i] = table[h];
        g->groups[table[h]].nrefs++;
    }
    /* 2. each group's references are a run of the arrays, in file order */
    int start = 0;
    for (int k = 0; k < ng; k++) {
        fill[k] = start;
        g->groups[k].ref_pair = ref_pair + start;
        g->groups[k].ref = ref + start;
        g->groups[k].ref_len = ref_len + start;
        start += g->groups[k].nrefs;
    }
    for (int i = 0; i < nidx; i++) {
        int pi = idx ? idx[i] : i, at = fill[group_of[i]]++;
        ref_pair[at] = pi;
        ref[at] = p->pairs[pi].tgt;
        ref_len[at] = p->pairs[pi].tgt_len;
    }
    ag__free(tmp);
    g->n = ng;
    *out = g;
    return AG_OK;
}

/* ------------------------------------------------------------------------ */
/* Vocabulary                                                                 */
/* ------------------------------------------------------------------------ */

static const char *const special[AG_N_SPECIAL] = {"<pad>", "<bos>", "<eos>", "<unk>"};

/* One block: this struct, the id -> token pointers, the hash table of ids
 * and the token bytes. */
struct ag_vocab {
    int n;        /* tokens so far (== size once built) */
    char **tok;   /* id -> token */
    int *table;   /* cap slots: an id, or -1 */
    size_t cap;
    char *pool;   /* the tokens, NUL-terminated, in id order */
    size_t used;
};

static size_t round16(size_t x) { return (x + 15) & ~(size_t)15; }

static ag_vocab *vocab_alloc(int n, size_t pool_bytes)
{
    size_t cap = table_cap((size_t)n);
    size_t off_tok = round16(sizeof(ag_vocab));
    size_t off_table = off_tok + round16((size_t)n * sizeof(char *));
    size_t off_pool = off_table + round16(cap * sizeof(int));
    char *block = ag__malloc(off_pool + pool_bytes);
    if (!block) return NULL;
    ag_vocab *v = (ag_vocab *)block;
    *v = (ag_vocab){.tok = (char **)(block + off_tok), .table = (int *)(block + off_table),
                    .cap = cap, .pool = block + off_pool};
    for (size_t i = 0; i < cap; i++) v->table[i] = -1;
    return v;
}

/* Slot of token s[0..len) in the table: its id's slot, or the empty slot
 * where it would go. */
static size_t vocab_slot(const ag_vocab *v, const char *s, size_t len)
{
    size_t h = (size_t)hash_bytes(HASH_SEED, s, len) & (v->cap - 1);
    while (v->table[h] >= 0) {
        const char *t = v->tok[v->table[h]];
        if (strncmp(t, s, len) == 0 && t[len] == '\0') break;
        h = (h + 1) & (v->cap - 1);
    }
    return h;
}

/* Append token s[0..len) as the next id; -1 when it is already there. */
static int vocab_add(ag_vocab *v, const char *s, size_t len)
{
    size_t h = vocab_slot(v, s, len);
    if (v->table[h] >= 0) return -1;
    char *dst = v->pool + v->used;
    memcpy(dst, s, len);
    dst[len] = '\0';
    v->used += len + 1;
    v->tok[v->n] = dst;
    v->table[h] = v->n++;
    return 0;
}

void ag_vocab_free(ag_vocab *v) { ag__free(v); }
int ag_vocab_size(const ag_vocab *v) { return v ? v->n : 0; }

int ag_vocab_id(const ag_vocab *v, const char *token)
{
    if (!v || !token) return AG_UNK;
    int id = v->table[vocab_slot(v, token, strlen(token))];
    return id >= 0 ? id : AG_UNK;
}

const char *ag_vocab_token(const ag_vocab *v, int id)
{
    return v && id >= 0 && id < v->n ? v->tok[id] : NULL;
}

/* Where the sequences come from: arrays given by the caller, or one side of
 * a pairs object. */
typedef struct seq_source {
    const char *const *const *seq;
    const int *len;
    const ag_pairs *pairs;
    int side;
} seq_source;

static const char *const *seq_at(const seq_source *src, int i, int *n)
{
    if (src->pairs) {
        const ag_pair *p = &src->pairs->pairs[i];
        *n = src->side == AG_SOURCE ? p->src_len : p->tgt_len;
        return src->side == AG_SOURCE ? p->src : p->tgt;
    }
    *n = src->len[i];
    return src->seq[i];
}

typedef struct counted {
    const char *tok;
    int count;
} counted;

/* Decreasing count, then byte order. */
static int by_count(const void *a, const void *b)
{
    const counted *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return strcmp(x->tok, y->tok);
}

static int is_special(const char *t)
{
    for (int i = 0; i < AG_N_SPECIAL; i++)
        if (strcmp(t, special[i]) == 0) return 1;
    return 0;
}

static ag_status vocab_build(const seq_source *src, int nseq, int min_freq, ag_vocab **out,
                             char *err, size_t errlen)
{
    /* check the tokens and count them */
    size_t total = 0;
    for (int i = 0; i < nseq; i++) {
        int n;
        const char *const *t = seq_at(src, i, &n);
        if (n < 0 || (n > 0 && !t))
            return ag__errf(err, errlen, AG_ERR_ARG, "vocab: sequence %d has %d tokens%s", i, n, n > 0 ? " but is NULL" : "");
        for (int j = 0; j < n; j++) {
            if (!t[j] || !t[j][0] || strpbrk(t[j], " \n"))
                return ag__errf(err, errlen, AG_ERR_ARG, "vocab: sequence %d token %d is %s", i, j,
                                !t[j] ? "NULL" : !t[j][0] ? "empty" : "holding a space or newline");
        }
        total += (size_t)n;
    }
    if (total > (size_t)INT_MAX - AG_N_SPECIAL)
        return ag__errf(err, errlen, AG_ERR_ARG, "vocab: %zu tokens, too many", total);

    /* count: a hash table of indices into `words` */
    size_t cap = table_cap(total);
    counted *words = ag__malloc((total ? total : 1) * sizeof *words);
    int *table = ag__malloc(cap * sizeof *table);
    if (!words || !table) {
        ag__free(words), ag__free(table);
        return ag__errf(err, errlen, AG_ERR_NOMEM, "vocab: out of memory counting %zu tokens", total);
    }
    for (size_t i = 0; i < cap; i++) table[i] = -1;
    int nwords = 0;
    for (int i = 0; i < nseq; i++) {
        int n;
        const char *const *t = seq_at(src, i, &n);
        for (int j = 0; j < n; j++) {
            if (is_special(t[j])) continue;
            size_t h = (size_t)hash_bytes(HASH_SEED, t[j], strlen(t[j])) & (cap - 1);
            while (table[h] >= 0 && strcmp(words[table[h]].tok, t[j]) != 0) h = (h + 1) & (cap - 1);
            if (table[h] < 0) {
                table[h] = nwords;
                words[nwords++] = (counted){t[j], 0};
            }
            words[table[h]].count++;
        }
    }
    ag__free(table);

    /* keep the frequent ones, most frequent first */
    int kept = 0;
    size_t bytes = 0;
    for (int i = 0; i < AG_N_SPECIAL; i++) bytes += strlen(special[i]) + 1;
    for (int i = 0; i < nwords; i++)
        if (words[i].count >= min_freq) {
            bytes += strlen(words[i].tok) + 1;
            words[kept++] = words[i];
        }
    qsort(words, (size_t)kept, sizeof *words, by_count);

    ag_vocab *v = vocab_alloc(AG_N_SPECIAL + kept, bytes);
    if (!v) {
        ag__free(words);
        return ag__errf(err, errlen, AG_ERR_NOMEM, "vocab: out of memory for %d tokens", AG_N_SPECIAL + kept);
    }
    for (int i = 0; i < AG_N_SPECIAL; i++) vocab_add(v, special[i], strlen(special[i]));
    for (int i = 0; i < kept; i++) {
        int dup = vocab_add(v, words[i].tok, strlen(words[i].tok));
        assert(dup == 0); /* counted once each */
        (void)dup;
    }
    ag__free(words);
    *out = v;
    return AG_OK;
}

ag_status ag_vocab_build(const char *const *const *seq, const int *len, int nseq, int min_freq,
                         ag_vocab **out, char *err, size_t errlen)
{
    if (!out)
        return ag__errf(err, errlen, AG_ERR_ARG, "vocab: out is NULL");
    *out = NULL;
    if (nseq < 0 || (nseq > 0 && (!seq || !len)))
        return ag__errf(err, errlen, AG_ERR_ARG, "vocab: %d sequences, or seq/len is NULL", nseq);
    seq_source src = {.seq = seq, .len = len};
    return vocab_build(&src, nseq, min_freq, out, err, errlen);
}

ag_status ag_vocab_from_pairs(const ag_pairs *p, int side, int min_freq, ag_vocab **out,
                              char *err, size_t errlen)
{
    if (!out)
        return ag__errf(err, errlen, AG_ERR_ARG, "vocab: out is NULL");
    *out = NULL;
    if (!p || (side != AG_SOURCE && side != AG_TARGET))
        return ag__errf(err, errlen, AG_ERR_ARG, "vocab: %s", !p ? "pairs is NULL" : "side is neither AG_SOURCE nor AG_TARGET");
    seq_source src = {.pairs = p, .side = side};
    return vocab_build(&src, p->n, min_freq, out, err, errlen);
}

size_t ag_vocab_serialize(const ag_vocab *v, char *buf, size_t buflen)
{
    size_t need = 0;
    for (int i = 0; v && i < v->n; i++) need += strlen(v->tok[i]) + (i > 0);
    if (!buf || buflen == 0) return need;
    size_t o = 0;
    for (int i = 0; v && i < v->n; i++) {
        if (i > 0 && o + 1 < buflen) buf[o++] = '\n';
        for (const char *t = v->tok[i]; *t && o + 1 < buflen; t++) buf[o++] = *t;
    }
    buf[o] = '\0';
    return need;
}

ag_status ag_vocab_parse(const char *s, size_t len, ag_vocab **out, char *err, size_t errlen)
{
    if (!out)
        return ag__errf(err, errlen, AG_ERR_ARG, "vocab: out is NULL");
    *out = NULL;
    if (!s && len > 0)
        return ag__errf(err, errlen, AG_ERR_ARG, "vocab: string is NULL");
    size_t n = 1;
    for (size_t i = 0; i < len; i++) n += s[i] == '\n';
    if (n > (size_t)INT_MAX)
        return ag__errf(err, errlen, AG_ERR_FORMAT, "vocab: %zu tokens, too many", n);
    if (n < AG_N_SPECIAL)
        return ag__errf(err, errlen, AG_ERR_FORMAT, "vocab: %zu tokens, fewer than the %d special ones", n, AG_N_SPECIAL);
    ag_vocab *v = vocab_alloc((int)n, len + 1); /* n tokens + n NULs - (n-1) newlines */
    if (!v)
        return ag__errf(err, errlen, AG_ERR_NOMEM, "vocab: out of memory for %zu tokens", n);
    size_t pos = 0;
    for (int id = 0; id < (int)n; id++) {
        const char *t = s + pos;
        const char *nl = memchr(t, '\n', len - pos);
        size_t tl = nl ? (size_t)(nl - t) : len - pos;
        pos += tl + 1;
        const char *why = NULL;
        if (tl == 0) why = "is empty";
        else if (memchr(t, ' ', tl)) why = "holds a space";
        else if (memchr(t, '\0', tl)) why = "holds a NUL byte";
        else if (utf8_bad_at((const unsigned char *)t, tl) < tl) why = "is not UTF-8";
        else if (id < AG_N_SPECIAL &&
                 (tl != strlen(special[id]) || memcmp(t, special[id], tl) != 0)) {
            ag__errf(err, errlen, AG_ERR_FORMAT, "vocab: token %d is '%.*s', want '%s'", id,
                     (int)(tl < 40 ? tl : 40), t, special[id]);
            ag_vocab_free(v);
            return AG_ERR_FORMAT;
        } else if (vocab_add(v, t, tl) != 0) {
            ag__errf(err, errlen, AG_ERR_FORMAT, "vocab: token %d '%.*s' repeats token %d", id,
                     (int)(tl < 40 ? tl : 40), t, v->table[vocab_slot(v, t, tl)]);
            ag_vocab_free(v);
            return AG_ERR_FORMAT;
        }
        if (why) {
            ag__errf(err, errlen, AG_ERR_FORMAT, "vocab: token %d %s", id, why);
            ag_vocab_free(v);
            return AG_ERR_FORMAT;
        }
    }
    *out = v;
    return AG_OK;
}

/* ------------------------------------------------------------------------ */
/* Encoding                                                                   */
/* ------------------------------------------------------------------------ */

ag_status ag_encode(const ag_vocab *v, const char *const *tokens, int n, int max_len,
                    int *ids_out, int *valid_len)
{
    if (!v || (n > 0 && !tokens) || n < 0 || max_len < 1 || !ids_out || !valid_len)
        return AG_ERR_ARG;
    /* d2l: line + [<eos>], then truncate_pad(line, num_steps, <pad>) */
    int t = 0;
    for (; t < n && t < max_len; t++) ids_out[t] = ag_vocab_id(v, tokens[t]);
    if (t < max_len) ids_out[t++] = AG_EOS;
    *valid_len = t;
    for (; t < max_len; t++) ids_out[t] = AG_PAD;
    return AG_OK;
}

void ag_decoder_input(const int *tgt_ids, int max_len, int *dec_in)
{
    if (!tgt_ids || !dec_in || max_len < 1) return;
    /* backwards, so dec_in may be tgt_ids itself */
    for (int t = max_len - 1; t > 0; t--) dec_in[t] = tgt_ids[t - 1];
    dec_in[0] = AG_BOS;
}
