/* ladder.h: what the files of the ladder example share.
 *
 * A ladder of experiments, after the way "Let's build GPT" grows a
 * character-level model one idea at a time.  Every rung is the rung below
 * it plus one idea, trained the same way on the same text and scored by
 * its held-out bits per character:
 *
 *   1 bigram        logits = table[this character]
 *   2 positions     x = tokens[c] + positions[t]; logits = head(x)
 *   3 one head      x = attention(x), one causal head of width C, per layer
 *   4 heads         the same attention split into H heads of width C / H
 *   5 feed-forward  x = ffn(attention(x))
 *   6 residual      x = x + attention(x); x = x + ffn(x)
 *   7 post-norm     x = norm(x + attention(x)); x = norm(x + ffn(x))
 *   8 pre-norm      x = x + attention(norm(x)); x = x + ffn(norm(x));
 *                   logits = head(norm(x))
 *
 *   text.c   the text: the English side of the pairs file, its bytes, the split
 *   model.c  the model at any rung: its parameters and its forward
 *   train.c  training, held-out bits per character, attention pictures
 *   tasks.c  copy and reverse: tasks where attention must do something visible
 *   explore.c  the explorer page of a rung (--html, --json, --live)
 *   main.c   the command line */
#ifndef LADDER_EXAMPLE_H
#define LADDER_EXAMPLE_H

#include "attograd.h"

#include <stddef.h>
#include <stdint.h>

extern const char *prog; /* "ladder", for messages */

enum rung { BIGRAM = 1, POSITIONS, ONE_HEAD, HEADS, FEED_FORWARD, RESIDUAL, POST_NORM, PRE_NORM, NRUNGS = PRE_NORM };
extern const char *const rung_idea[NRUNGS + 1]; /* "bigram", ... by rung */

/* ---- text.c ------------------------------------------------------------------ */

typedef struct text {
    int *ids;     /* the text as ids, owned */
    size_t n;     /* its length */
    size_t split; /* ids[split..n) are held out: the last tenth */
    int V;        /* distinct bytes */
    unsigned char chars[256];
} text;

/* The first column of every line of a .tsv (a line equal to the one before
 * skipped), each ended by '\n', as ids of the bytes it uses.  0 or 1. */
int text_load(text *t, const char *path, int context);
void text_free(text *t);

/* ---- model.c ------------------------------------------------------------------ */

typedef struct ladder_config {
    int rung;    /* 1 .. NRUNGS */
    int V;       /* vocabulary */
    int context; /* T */
    int hidden;  /* C */
    int heads;   /* H from rung HEADS on (1 before) */
    int ffn;     /* F */
    int layers;  /* L */
} ladder_config;

typedef struct ladder_layer {
    ag_mha_layer attention;
    ag_ffn_layer ffn;
    ag_layer_norm_layer norm1, norm2;
} ladder_layer;

typedef struct ladder_model {
    ladder_config cfg;
    ag_tensor *bigram;             /* [V, V]: rung 1 */
    ag_tensor *tokens, *positions; /* [V, C], [T, C] */
    ladder_layer *layers;          /* cfg.layers, owned */
    ag_layer_norm_layer norm;             /* the final norm: pre-norm */
    ag_linear_layer head;                /* C -> V */
} ladder_model;

ag_status ladder_init(ladder_model *m, ag_store *s, const ladder_config *cfg, uint64_t seed);
void ladder_free(ladder_model *m);
/* ids [B, T] -> logits [B, T, V].  weights (NULL, or cfg.layers slots)
 * gets each layer's attention weights [B, H, T, T]. */
ag_tensor *ladder_forward(ag_graph *g, const ladder_model *m, const int *ids, int B, int T, ag_tensor **weights);

/* ---- train.c ------------------------------------------------------------------ */

typedef struct train_opts {
    int steps, batch;
    double lr;
    uint64_t seed;
    int quiet;
    int progress; /* 1: "step n of N loss x" on stderr after each step */
    int *done;    /* NULL, or where the steps taken go (fewer when stopped) */
    /* NULL, or called after each step but the last (the live page's
     * picture of the model so far); nonzero: stop */
    int (*snapshot)(const ladder_model *m, int steps, void *ctx);
    void *snapshot_ctx;
} train_opts;

/* Adam on batches of B windows of the training text; the loss of each
 * position is that of the character after it (targets may be -1: no loss).
 * With o->done, SIGINT or SIGTERM ends the loop after the step in flight:
 * the model keeps the steps taken, *o->done says how many. */
typedef ag_tensor *(*loss_fn)(ag_graph *g, const ladder_model *m, void *ctx, ag_rng *r, int B);
ag_status train(ladder_model *m, ag_store *s, const train_opts *o, loss_fn loss, void *ctx);
/* The mean held-out loss per character, in bits. */
ag_status held_out_bits(const ladder_model *m, const text *t, double *bits);
/* The windows' loss: B random windows of the training text. */
ag_tensor *text_loss(ag_graph *g, const ladder_model *m, void *ctx, ag_rng *r, int B);
/* The attention of every layer on one sequence ids [T], as SVG heatmaps
 * path_prefix + "_layer<l>.svg", labelled by labels[T]. */
int draw_attention(const ladder_model *m, const int *ids, int T, const char *const *labels, const char *path_prefix);

/* ---- tasks.c ------------------------------------------------------------------ */

/* "copy" or "reverse": train a two-layer pre-norm model on seeded random
 * digit strings, print its held-out accuracy, draw its attention. */
int run_task(const char *task, const train_opts *o, const char *svg_prefix);

/* ---- explore.c ----------------------------------------------------------------- */

typedef struct explore_opts {
    const char *html, *json, *live; /* the pages and the data, NULL when not asked for */
    const char *wasm, *argv0;       /* the module (NULL: beside the program) */
    const char *input, *data;       /* the line read; the text file, put in the live page */
    int steps;                      /* how the rung was trained */
    uint64_t seed;
} explore_opts;

/* The explorer's attention page of m (a rung from ONE_HEAD on, trained on
 * t) reading o->input.  0, or 1 after a message. */
int explore_rung(const ladder_model *m, const text *t, const explore_opts *o);

#endif
