/* attograd_text.h: sentence pairs, vocabularies, sequence encoding and BLEU
 * for the translation example.  Included by attograd.h.
 *
 * The pipeline is the one of d2l.ai's machine-translation chapter
 * (MTFraEng._preprocess, _tokenize, _build_arrays and bleu):
 *
 *   "Go.\tVa !"  --preprocess-->  "go ." / "va !"
 *                --tokenize---->  [go, .] / [va, !]
 *                --encode------>  src ids [go . <eos> <pad> ...], valid_len 3
 *                                 label   [va ! <eos> <pad> ...]
 *                                 dec_in  [<bos> va ! <eos> ...]   (teacher forcing)
 *
 *   ag_pairs *p;
 *   char err[256];
 *   if (ag_pairs_load("examples/data/eng-fra.tsv", &p, err, sizeof err) != AG_OK)
 *       fprintf(stderr, "%s\n", err);
 *   for (int i = 0; i < p->n_warnings_kept; i++) fprintf(stderr, "%s\n", p->warnings[i]);
 *   ag_vocab *src_vocab;
 *   ag_vocab_from_pairs(p, AG_SOURCE, 2, &src_vocab, err, sizeof err);
 *   int ids[T], valid;
 *   ag_encode(src_vocab, p->pairs[0].src, p->pairs[0].src_len, T, ids, &valid);
 *   ...
 *   ag_vocab_free(src_vocab);
 *   ag_pairs_free(p);
 *
 * Every object is allocated through the library's allocator hook; every
 * constructor returns AG_ERR_NOMEM (and leaks nothing) when it fails.
 */
#ifndef ATTOGRAD_TEXT_H
#define ATTOGRAD_TEXT_H

#include "attograd_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- preprocessing and tokenizing ---------------------------------------- */

/* d2l's preprocessing of one sentence (UTF-8) into out:
 *   1. U+00A0 (no-break space) and U+202F (narrow no-break space) -> ' ';
 *   2. lowercase: ASCII A-Z, the Latin-1 capitals U+00C0..U+00DE except
 *      U+00D7 (the multiplication sign), which are C3 80..C3 9E in UTF-8 and
 *      become C3 A0..C3 BE, and U+0152 'OE' ligature -> U+0153.  Other
 *      scripts are left as they are (Python's str.lower() would change them);
 *   3. a space before each of , . ! ? that does not start the sentence and is
 *      not already preceded by a space (checked after step 1).
 * Other spaces (U+2009 thin space, tabs) are kept, as d2l keeps them.  The
 * input is treated as bytes: invalid UTF-8 passes through unchanged.
 * Returns the length written (out is NUL-terminated), or -1 when the result
 * and its NUL do not fit in outlen bytes.  The result is at most
 * 2 * strlen(in) bytes. */
int ag_text_preprocess(const char *in, char *out, size_t outlen);

/* Split s in place at ' ' (one or many) into tokens: each token is
 * NUL-terminated and tok[i] points to it; empty tokens are skipped, as d2l's
 * `[t for t in s.split(' ') if t]`.  Returns the token count, or -1 when
 * there are more than maxtok (tok then holds the first maxtok). */
int ag_text_tokenize(char *s, char **tok, int maxtok);

/* Token sequences a[0..na) and b[0..nb) are equal (same tokens, same order). */
int ag_tokens_equal(const char *const *a, int na, const char *const *b, int nb);

/* ---- sentence pairs from a TSV file -------------------------------------- */

/* One pair: the source and target columns as they are in the file, and their
 * preprocessed tokens (never empty). */
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

/* Read pairs from a UTF-8 file of lines `source<TAB>target[<TAB>anything]`
 * (a final '\r' before the newline is dropped).  A bad line is skipped with a
 * warning "FILE:LINE: why; line skipped", for: no tab; an empty line; invalid
 * UTF-8 or a NUL byte; more than AG_PAIRS_MAX_LINE bytes; a source or target
 * with no token.  Errors: AG_ERR_IO "FILE: strerror" when the file cannot be
 * read, AG_ERR_FORMAT "FILE: no usable sentence pairs" when no line is good
 * (err then also gives the first warning), AG_ERR_NOMEM.  On failure *out is
 * NULL.  The caller frees *out with ag_pairs_free. */
ag_status ag_pairs_load(const char *path, ag_pairs **out, char *err, size_t errlen);
/* The same from len bytes in memory; name stands for the file in messages. */
ag_status ag_pairs_parse(const char *buf, size_t len, const char *name, ag_pairs **out,
                         char *err, size_t errlen);
void ag_pairs_free(ag_pairs *p);

/* Pairs grouped by source sentence (equal token sequences): one group per
 * distinct source, in order of first appearance, with every target of that
 * source as a reference.  Used for exact match and BLEU over distinct
 * sources ("Go." has the references "va !", "marche .", "bouge !"). */
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

/* Group the pairs p->pairs[idx[i]], i < nidx (idx NULL: all pairs, in
 * order).  An index outside [0, p->n) is AG_ERR_ARG.  The groups point into
 * p, which must outlive them.  Free with ag_groups_free. */
ag_status ag_groups_build(const ag_pairs *p, const int *idx, int nidx, ag_groups **out,
                          char *err, size_t errlen);
void ag_groups_free(ag_groups *g);

/* ---- vocabulary ----------------------------------------------------------- */

/* Ids 0..3 are the special tokens; then every token seen at least min_freq
 * times, by decreasing count, ties in byte order (strcmp). */
enum { AG_PAD = 0, AG_BOS = 1, AG_EOS = 2, AG_UNK = 3, AG_N_SPECIAL = 4 };
enum { AG_SOURCE = 0, AG_TARGET = 1 };

typedef struct ag_vocab ag_vocab;

/* From nseq token sequences seq[i][0..len[i]).  Tokens equal to a special
 * token's spelling are not counted.  Tokens must not contain ' ' or '\n'
 * (AG_ERR_ARG), nor be empty.  min_freq <= 1 keeps every token.  Free with
 * ag_vocab_free. */
ag_status ag_vocab_build(const char *const *const *seq, const int *len, int nseq, int min_freq,
                         ag_vocab **out, char *err, size_t errlen);
/* From one side of pairs: AG_SOURCE or AG_TARGET. */
ag_status ag_vocab_from_pairs(const ag_pairs *p, int side, int min_freq, ag_vocab **out,
                              char *err, size_t errlen);
void ag_vocab_free(ag_vocab *v);

int ag_vocab_size(const ag_vocab *v);
int ag_vocab_id(const ag_vocab *v, const char *token);  /* AG_UNK when absent */
const char *ag_vocab_token(const ag_vocab *v, int id);  /* NULL outside [0, size) */

/* The tokens joined by '\n', id order, specials first ("<pad>\n<bos>\n...").
 * snprintf-like: writes at most buflen bytes (NUL included) and returns the
 * full length, NUL aside; call with buflen 0 to size the buffer. */
size_t ag_vocab_serialize(const ag_vocab *v, char *buf, size_t buflen);
/* Back from that string (len bytes).  AG_ERR_FORMAT, with the token number,
 * when the four specials do not come first, or a token is empty, repeated,
 * holds a space or is not UTF-8. */
ag_status ag_vocab_parse(const char *s, size_t len, ag_vocab **out, char *err, size_t errlen);

/* ---- sequences of ids ------------------------------------------------------ */

/* d2l's fixed-length encoding (build_array_nmt): the ids of the n tokens,
 * then <eos>, cut to max_len, then <pad> up to max_len.
 *   ids_out[0..max_len)   (e.g. [go . <eos> <pad> <pad>] for max_len 5)
 *   *valid_len = min(n + 1, max_len): the ids before the padding (d2l counts
 *   the non-pad ids, the same unless the text holds a literal "<pad>").
 * AG_ERR_ARG when max_len < 1, n < 0, or a pointer is NULL. */
ag_status ag_encode(const ag_vocab *v, const char *const *tokens, int n, int max_len,
                    int *ids_out, int *valid_len);

/* Teacher forcing: the decoder reads <bos> then the target shifted right by
 * one and must predict the target itself (d2l: tgt_array[:, :-1] and
 * tgt_array[:, 1:] of [<bos>] + target):
 *   dec_in[0] = <bos>,  dec_in[t] = tgt_ids[t - 1]  for 0 < t < max_len. */
void ag_decoder_input(const int *tgt_ids, int max_len, int *dec_in);

/* ---- metrics --------------------------------------------------------------- */

/* d2l's BLEU of a prediction against one label:
 *   exp(min(0, 1 - len_label / len_pred)) * prod_{n=1..min(k, len_pred)} p_n^(1/2^n)
 * p_n = matched n-grams / (len_pred - n + 1), an n-gram of the prediction
 * matching only while the label has unmatched copies of it left (clipped
 * counts).  len_pred 0 gives 0 (d2l would divide by zero). */
double ag_bleu(const char *const *pred, int len_pred, const char *const *label, int len_label,
               int k);
/* The best ag_bleu over nrefs references (0 when nrefs is 0). */
double ag_bleu_best(const char *const *pred, int len_pred, const char *const *const *refs,
                    const int *ref_lens, int nrefs, int k);

#ifdef __cplusplus
}
#endif
#endif
