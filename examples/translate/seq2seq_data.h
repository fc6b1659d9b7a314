/* examples/translate/seq2seq_data.h: sentence pairs as id arrays, and
 * batches cut from them, for the translator (train.c) and its benchmark
 * (tests/bench/bench.c), so that both train on exactly the same batches. */
#ifndef SEQ2SEQ_DATA_H
#define SEQ2SEQ_DATA_H

#include "attograd.h"

#include <stdlib.h>
#include <string.h>

typedef struct dataset {
    int n, L;             /* pairs, max_len */
    int *src, *src_valid; /* [n, L], [n] */
    int *tgt_in, *tgt_out, *tgt_valid;
} dataset;

static inline void dataset_free(dataset *d)
{
    free(d->src), free(d->src_valid), free(d->tgt_in), free(d->tgt_out), free(d->tgt_valid);
    memset(d, 0, sizeof *d);
}

/* Each pair encoded to L ids (<eos>, truncated or padded), the decoder input
 * <bos> + target shifted.  Returns 1 (and d empty) when out of memory. */
static inline int dataset_make(dataset *d, const ag_pairs *p, const ag_vocab *sv, const ag_vocab *tv, int L)
{
    d->n = p->n;
    d->L = L;
    size_t n = (size_t)p->n;
    d->src = malloc(n * L * sizeof(int)), d->tgt_in = malloc(n * L * sizeof(int));
    d->tgt_out = malloc(n * L * sizeof(int));
    d->src_valid = malloc(n * sizeof(int)), d->tgt_valid = malloc(n * sizeof(int));
    if (!d->src || !d->tgt_in || !d->tgt_out || !d->src_valid || !d->tgt_valid) {
        dataset_free(d);
        return 1;
    }
    for (int i = 0; i < p->n; i++) {
        const ag_pair *pr = &p->pairs[i];
        ag_encode(sv, pr->src, pr->src_len, L, d->src + (size_t)i * L, &d->src_valid[i]);
        ag_encode(tv, pr->tgt, pr->tgt_len, L, d->tgt_out + (size_t)i * L, &d->tgt_valid[i]);
        ag_decoder_input(d->tgt_out + (size_t)i * L, L, d->tgt_in + (size_t)i * L);
    }
    return 0;
}

/* Copy rows idx[0..B) into a batch trimmed to the longest source (S) and
 * target (T) in it: padding beyond them changes nothing (masked keys,
 * ignored targets, causal queries) but costs time.  The arrays hold
 * B_max * L (src, tgt_in, tgt_out) and B_max (src_valid) ids. */
typedef struct batch {
    int B, S, T, tokens;
    int *src, *src_valid, *tgt_in, *tgt_out;
} batch;

static inline void batch_fill(batch *b, const dataset *d, const int *idx, int B)
{
    b->B = B, b->S = 1, b->T = 1, b->tokens = 0;
    for (int i = 0; i < B; i++) {
        if (d->src_valid[idx[i]] > b->S) b->S = d->src_valid[idx[i]];
        if (d->tgt_valid[idx[i]] > b->T) b->T = d->tgt_valid[idx[i]];
        b->tokens += d->tgt_valid[idx[i]];
    }
    for (int i = 0; i < B; i++) {
        memcpy(b->src + (size_t)i * b->S, d->src + (size_t)idx[i] * d->L, (size_t)b->S * sizeof(int));
        memcpy(b->tgt_in + (size_t)i * b->T, d->tgt_in + (size_t)idx[i] * d->L, (size_t)b->T * sizeof(int));
        memcpy(b->tgt_out + (size_t)i * b->T, d->tgt_out + (size_t)idx[i] * d->L, (size_t)b->T * sizeof(int));
        b->src_valid[i] = d->src_valid[idx[i]];
    }
}

#endif
