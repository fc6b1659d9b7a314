/* attograd_text.h: sentence pairs, vocabularies, sequence encoding and BLEU
 * for the translation example, as d2l.ai's machine-translation chapter
 * (the pipeline, step by step: docs/translator.md).  Every constructor
 * returns AG_ERR_NOMEM, leaking nothing, when an allocation fails. */
#ifndef ATTOGRAD_TEXT_H
#define ATTOGRAD_TEXT_H

#include "attograd_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- preprocessing and tokenizing ---------------------------------------- */

/* d2l's preprocessing into out: no-break spaces to ' ', Latin-1 and ASCII
 * lowercase, a space before , . ! ? (details: docs/design.md).  Returns the
 * length, or -1 when it and its NUL exceed outlen (at most 2 strlen(in)). */
int ag_text_preprocess(const char *in, char *out, size_t outlen);

/* Split s in place at spaces into tok (empty tokens skipped, as d2l).  The
 * count, or -1 when there are more than maxtok (tok holds the first maxtok). */
int ag_text_tokenize(char *s, char **tok, int maxtok);

/* 1 when a[0..na) and b[0..nb) are the same tokens in the same order. */
int ag_tokens_equal(const char *const *a, int na, const char *const *b, int nb);

/* ---- sentence pairs from a TSV file -------------------------------------- */

/* One pair: the columns verbatim and their preprocessed tokens (never empty). */
typedef struct ag_pair {
    const char *src_text;   /* column 1, verbatim ("Go.") */
    const char *tgt_text;   /* column 2, verbatim ("Va !") */
    const char *const *src; /* src_len tokens ("go", ".") */
    const char *const *tgt; /* tgt_len tokens ("va", "!") */
    int src_len, tgt_len;
    int line;               /* 1-based line number in the file */
} ag_pair;

#define AG_PAIRS_MAX_WARNINGS 8
#define AG_PAIRS_MAX_LINE 4096 /* bytes in a line, its newline aside */

typedef struct ag_pairs {
    int n;           /* usable pairs */
    ag_pair *pairs;  /* n, in file order */
    int n_skipped;   /* lines skipped, each with a warning */
    int n_warnings_kept; /* the first min(n_skipped, AG_PAIRS_MAX_WARNINGS) */
    char warnings[AG_PAIRS_MAX_WARNINGS][256];
    /* storage of every string and token (one block each): private */
    char *text_;
    const char **tok_;
} ag_pairs;

/* Lines `source<TAB>target[<TAB>...]` of a UTF-8 file into *out (free:
 * ag_pairs_free); a bad line is skipped with a "FILE:LINE: why" warning.
 * AG_ERR_IO, AG_ERR_FORMAT (no usable pair) or AG_ERR_NOMEM, *out NULL. */
ag_status ag_pairs_load(const char *path, ag_pairs **out, char *err, size_t errlen);
/* The same from len bytes in memory; name stands for the file in messages. */
ag_status ag_pairs_parse(const char *buf, size_t len, const char *name, ag_pairs **out,
                         char *err, size_t errlen);
void ag_pairs_free(ag_pairs *p);

/* One group per distinct source (first appearance order), every target of
 * that source a reference: for exact match and BLEU over distinct sources. */
typedef struct ag_group {
    int first;                      /* index in pairs of the first pair with this source */
    const char *const *src;         /* its tokens (the pair's) */
    int src_len;
    int nrefs;                      /* >= 1 */
    const int *ref_pair;            /* nrefs pair indices, in file order */
    const char *const *const *ref;  /* nrefs target token lists ... */
    const int *ref_len;             /* ... and their lengths: ready for ag_bleu_best */
} ag_group;

typedef struct ag_groups {
    int n;
    ag_group *groups;
    void *storage_; /* private */
} ag_groups;

/* Groups of p->pairs[idx[i]], i < nidx (idx NULL: all), pointing into p,
 * which must outlive them; free: ag_groups_free.  A bad index: AG_ERR_ARG. */
ag_status ag_groups_build(const ag_pairs *p, const int *idx, int nidx, ag_groups **out,
                          char *err, size_t errlen);
void ag_groups_free(ag_groups *g);

/* ---- vocabulary ----------------------------------------------------------- */

/* Ids 0..3 are the specials, then tokens by decreasing count, ties by strcmp. */
enum { AG_PAD = 0, AG_BOS = 1, AG_EOS = 2, AG_UNK = 3, AG_N_SPECIAL = 4 };
enum { AG_SOURCE = 0, AG_TARGET = 1 };

typedef struct ag_vocab ag_vocab;

/* Tokens of seq[i][0..len[i]), i < nseq, seen at least min_freq times (free:
 * ag_vocab_free).  An empty token or one holding ' ' or '\n': AG_ERR_ARG. */
ag_status ag_vocab_build(const char *const *const *seq, const int *len, int nseq, int min_freq,
                         ag_vocab **out, char *err, size_t errlen);
/* From one side of pairs: AG_SOURCE or AG_TARGET. */
ag_status ag_vocab_from_pairs(const ag_pairs *p, int side, int min_freq, ag_vocab **out,
                              char *err, size_t errlen);
void ag_vocab_free(ag_vocab *v);

int ag_vocab_size(const ag_vocab *v);
int ag_vocab_id(const ag_vocab *v, const char *token);  /* AG_UNK when absent */
const char *ag_vocab_token(const ag_vocab *v, int id);  /* NULL outside [0, size) */

/* The tokens joined by '\n' in id order, snprintf-like: at most buflen bytes
 * written, the full length (NUL aside) returned. */
size_t ag_vocab_serialize(const ag_vocab *v, char *buf, size_t buflen);
/* Back from that string (len bytes); AG_ERR_FORMAT naming the bad token. */
ag_status ag_vocab_parse(const char *s, size_t len, ag_vocab **out, char *err, size_t errlen);

/* ---- sequences of ids ------------------------------------------------------ */

/* ids_out[0..max_len) = the n tokens' ids, <eos>, cut to max_len, padded
 * with <pad> (d2l's build_array_nmt); *valid_len = min(n + 1, max_len).
 * AG_ERR_ARG for max_len < 1, n < 0 or a NULL pointer. */
ag_status ag_encode(const ag_vocab *v, const char *const *tokens, int n, int max_len,
                    int *ids_out, int *valid_len);

/* Teacher forcing: dec_in[0] = <bos>, dec_in[t] = tgt_ids[t - 1], t < max_len. */
void ag_decoder_input(const int *tgt_ids, int max_len, int *dec_in);

/* ---- metrics --------------------------------------------------------------- */

/* d2l's BLEU: exp(min(0, 1 - len_label / len_pred)) prod_{n <= k} p_n^(1/2^n),
 * p_n the clipped n-gram precision; 0 when len_pred is 0. */
double ag_bleu(const char *const *pred, int len_pred, const char *const *label, int len_label,
               int k);
/* The best ag_bleu over nrefs references (0 when nrefs is 0). */
double ag_bleu_best(const char *const *pred, int len_pred, const char *const *const *refs,
                    const int *ref_lens, int nrefs, int k);

#ifdef __cplusplus
}
#endif
#endif
