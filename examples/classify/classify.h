/* classify.h: what the files of the classify example share.
 *
 * An encoder-only Transformer that tells which language a sentence is in,
 * English or French, read byte by byte: the shape of BERT's and ViT's
 * classifiers at toy size.
 *
 *   data.c   the labelled sentences of a pairs file, the held-out split, batches
 *   model.c  the model: class token, learned positions, pre-norm blocks, head
 *   main.c   the command line, the training loop and the accuracy
 *   gradcheck.c  `classify64 gradcheck`: the gradient against finite differences
 *
 * tests/reference/classifier.py is its PyTorch twin: the same data, split,
 * model and training, under the same parameter names. */
#ifndef CLASSIFY_EXAMPLE_H
#define CLASSIFY_EXAMPLE_H

#include "attograd.h"

#include <stddef.h>
#include <stdint.h>

extern const char *prog; /* "classify", for messages */

/* ---- data.c ------------------------------------------------------------------ */

enum { LABEL_ENGLISH = 0, LABEL_FRENCH = 1, NCLASSES = 2 };

typedef struct sentence {
    const unsigned char *bytes; /* into the file's buffer, not NUL-ended */
    int len;                    /* bytes, at most the model's max_len */
    int label;                  /* LABEL_ENGLISH or LABEL_FRENCH */
} sentence;

typedef struct corpus {
    char *buf;                /* the file, owned */
    sentence *train, *held;   /* owned */
    int n_train, n_held;
    int truncated;            /* sentences cut to max_len bytes */
} corpus;

/* Every line of path is "english<TAB>french[<TAB>...]".  Each distinct
 * English sentence (a line equal in its first column to the one before
 * adds only its French) and each French one is a sentence; the sentences
 * of every 10th distinct English sentence's lines are held out.  Sentences
 * are cut to max_len bytes.  A bad line is an error naming it.  0 or 1. */
int corpus_load(corpus *d, const char *path, int max_len);
void corpus_free(corpus *d);

/* A minibatch of B sentences as the model reads them: ids [B, T] (the bytes,
 * 0 after a sentence's end), seen [B] (the positions a row fills: the
 * class token and its bytes), labels [B]; T = the longest sentence's
 * length. */
typedef struct minibatch {
    int B, T;
    int *ids, *seen, *labels; /* owned, sized for B x max_len */
} minibatch;
int minibatch_alloc(minibatch *b, int B, int max_len);
void minibatch_free(minibatch *b);
void minibatch_fill(minibatch *b, const sentence *const *rows, int B);

/* ---- model.c ------------------------------------------------------------------ */

typedef struct classifier_config {
    int max_len; /* longest sentence in bytes (positions: max_len + 1) */
    int hidden;  /* C */
    int heads;   /* H */
    int ffn;     /* F */
    int layers;  /* L */
} classifier_config;

/* Parameters, as the twin's state_dict:
 *   "embedding.weight" [256, C]  a row per byte
 *   "cls" [1, 1, C]              the class token
 *   "positions.weight" [max_len + 1, C]
 *   "blocks.<i>.*"               pre-norm encoder blocks (GELU)
 *   "norm.*", "head.weight" [2, C], "head.bias" [2] */
typedef struct classifier {
    classifier_config cfg;
    ag_tensor *embedding, *cls;
    ag_learned_positions positions;
    ag_encoder_block *blocks; /* cfg.layers, owned */
    ag_layer_norm_layer norm;
    ag_linear_layer head;
} classifier;

ag_status classifier_init(classifier *m, ag_store *s, const classifier_config *cfg, uint64_t seed);
void classifier_free(classifier *m);
/* logits [B, 2] of a minibatch: the class token's output, normalised, through
 * the head. */
ag_tensor *classifier_forward(ag_graph *g, const classifier *m, const minibatch *b);

/* ---- gradcheck.c: `classify64 gradcheck` ------------------------------------------- */

struct model_check_opts;
/* The model of cfg and seed on the first batch of B sentences of data,
 * checked against finite differences (double).  The exit status. */
int classify_gradcheck(const char *data, const classifier_config *cfg, int B, uint64_t seed,
                       const struct model_check_opts *mo);

#endif
