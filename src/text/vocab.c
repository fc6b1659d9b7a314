/* vocab.c: the vocabulary (d2l's Vocab: <pad> <bos> <eos> <unk>, then the
 * tokens by decreasing count, then byte order), its text form (one token a
 * line), and encoding a sentence to a fixed number of ids (d2l's
 * build_array_nmt / truncate_pad).
 *
 * Invariant: a vocabulary is one block (struct, id -> token, hash table,
 * token bytes), so it is freed with one call and never half built. */
#include "core/alloc.h"

#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "attograd_text.h"
#include "io/json.h"
#include "text/text.h"

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
    size_t cap = ag__table_cap((size_t)n);
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
    size_t h = (size_t)ag__hash_bytes(AG__HASH_SEED, s, len) & (v->cap - 1);
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

/* Step 1: every sequence and token usable (no NULL, empty or spaced
 * token); *total gets the number of tokens. */
static ag_status check_sequences(const seq_source *src, int nseq, size_t *total, char *err, size_t errlen)
{
    *total = 0;
    for (int i = 0; i < nseq; i++) {
        int n;
        const char *const *t = seq_at(src, i, &n);
        if (n < 0 || (n > 0 && !t))
            return ag__errf(err, errlen, AG_ERR_ARG, "vocab: sequence %d has %d tokens%s", i, n,
                            n > 0 ? " but is NULL" : "");
        for (int j = 0; j < n; j++)
            if (!t[j] || !t[j][0] || strpbrk(t[j], " \n"))
                return ag__errf(err, errlen, AG_ERR_ARG, "vocab: sequence %d token %d is %s", i, j,
                                !t[j] ? "NULL" : !t[j][0] ? "empty" : "holding a space or newline");
        *total += (size_t)n;
    }
    if (*total > (size_t)INT_MAX - AG_N_SPECIAL)
        return ag__errf(err, errlen, AG_ERR_ARG, "vocab: %zu tokens, too many", *total);
    return AG_OK;
}

/* Step 2: each distinct token (special ones aside) once in words, with its
 * count, through a hash table of cap slots; returns how many. */
static int count_words(const seq_source *src, int nseq, counted *words, int *table, size_t cap)
{
    for (size_t i = 0; i < cap; i++) table[i] = -1;
    int nwords = 0;
    for (int i = 0; i < nseq; i++) {
        int n;
        const char *const *t = seq_at(src, i, &n);
        for (int j = 0; j < n; j++) {
            if (is_special(t[j])) continue;
            size_t h = (size_t)ag__hash_bytes(AG__HASH_SEED, t[j], strlen(t[j])) & (cap - 1);
            while (table[h] >= 0 && strcmp(words[table[h]].tok, t[j]) != 0) h = (h + 1) & (cap - 1);
            if (table[h] < 0) {
                table[h] = nwords;
                words[nwords++] = (counted){t[j], 0};
            }
            words[table[h]].count++;
        }
    }
    return nwords;
}

/* Step 3: the words seen at least min_freq times, most frequent first, at
 * the front of words; returns how many, and *bytes what the special tokens
 * and they take with a NUL each. */
static int keep_frequent(counted *words, int nwords, int min_freq, size_t *bytes)
{
    int kept = 0;
    *bytes = 0;
    for (int i = 0; i < AG_N_SPECIAL; i++) *bytes += strlen(special[i]) + 1;
    for (int i = 0; i < nwords; i++)
        if (words[i].count >= min_freq) {
            *bytes += strlen(words[i].tok) + 1;
            words[kept++] = words[i];
        }
    qsort(words, (size_t)kept, sizeof *words, by_count);
    return kept;
}

static ag_status vocab_build(const seq_source *src, int nseq, int min_freq, ag_vocab **out,
                             char *err, size_t errlen)
{
    size_t total;
    ag_status st = check_sequences(src, nseq, &total, err, errlen);
    if (st) return st;
    size_t cap = ag__table_cap(total);
    counted *words = ag__malloc((total ? total : 1) * sizeof *words);
    int *table = ag__malloc(cap * sizeof *table);
    if (!words || !table) {
        ag__free(words), ag__free(table);
        return ag__errf(err, errlen, AG_ERR_NOMEM, "vocab: out of memory counting %zu tokens", total);
    }
    int nwords = count_words(src, nseq, words, table, cap);
    ag__free(table);
    size_t bytes;
    int kept = keep_frequent(words, nwords, min_freq, &bytes);

    /* step 4: the special tokens, then the kept ones, into one block */
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
        else if (ag__utf8_check((const unsigned char *)t, tl) < tl) why = "is not UTF-8";
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
