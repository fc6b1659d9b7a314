/* text.h: what the parts of the text layer share, private to src/text/:
 * FNV-1a hashing of tokens and the size of an open-addressing table.
 *
 *   pairs.c   preprocessing, tokenizing, and the TSV data reader
 *   groups.c  pairs with the same source, for multi-reference scoring
 *   vocab.c   the vocabulary, its text form, and encoding to ids
 *   bleu.c    BLEU */
#ifndef AG_TEXT_TEXT_H
#define AG_TEXT_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define AG__HASH_SEED 14695981039346656037u

/* FNV-1a of s[0..n), continuing from h (AG__HASH_SEED to start). */
static inline uint64_t ag__hash_bytes(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211u;
    }
    return h;
}

/* FNV-1a over a token sequence, each token followed by a 0 byte so that
 * ["ab"] and ["a", "b"] differ. */
static inline uint64_t ag__hash_tokens(const char *const *tok, int n)
{
    uint64_t h = AG__HASH_SEED;
    for (int i = 0; i < n; i++) h = ag__hash_bytes(h, tok[i], strlen(tok[i]) + 1);
    return h;
}

/* Smallest power of two >= 2 n (and >= 8): hash tables stay half empty. */
static inline size_t ag__table_cap(size_t n)
{
    size_t cap = 8;
    while (cap < 2 * n) cap *= 2;
    return cap;
}

#endif /* AG_TEXT_TEXT_H */
