/* gpt.h: what the files of the gpt example share.
 *
 *   main.c        the command line: flags, usage, dispatch
 *   text.c        the corpus: reading a file, its characters, the split
 *   checkpoint.c  the model file: config, vocabulary, weights, training state
 *   train.c       `gpt train`: batches, Adam steps, held-out loss, plot, JSON
 *   parts.c       a step's batch in parts: threads (--parts) or mpirun's processes
 *   eval.c        `gpt eval`: loss and bits per character on a file
 *   sample.c      `gpt sample`: seeded text from a prompt, heads switched off
 *   explore.c     --html: the explorer page of a sample's attention
 *   gradcheck.c   `gpt gradcheck`: the model's gradient against finite differences
 *
 * Exit status everywhere: 0 ok, 1 a file or the data is bad, 2 bad usage;
 * `gpt train` stopped by SIGINT / SIGTERM, after saving a checkpoint that
 * --resume continues: 130 / 143. */
#ifndef GPT_EXAMPLE_H
#define GPT_EXAMPLE_H

#include "attograd.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define GPT_FORMAT "attograd-gpt-1"

extern const char *prog; /* "gpt", for messages */

#define HEADS_OFF_MAX 64 /* --head-off given at most this often */

typedef struct opts {
    const char *data, *out, *model, *resume, *json, *plot, *prompt, *activation, *html;
    const char *live, *wasm, *argv0; /* sample's live page, its module, and where the program is */
    int steps, batch, context, hidden, heads, ffn, layers, untied, eval_every, threads, parts, length, top_k, quiet,
        all;
    double lr, clip, dropout, temperature, top_p; /* sample's --top-p: 1 (off) unless given */
    int show_dist; /* sample's --show-dist N: the N most probable first tokens */
    uint64_t seed;
    int stdin_uses; /* input flags given "-" (stdin) */
    const char *head_off[HEADS_OFF_MAX]; /* sample's --head-off self:LAYER:HEAD, each */
    int heads_off;
    int directions, walk;   /* gradcheck's --directions N, --walk */
    const char *break_op;   /* gradcheck's --break OP --by X */
    double by;
} opts;

void usage(FILE *f);

/* ---- text.c: the corpus ------------------------------------------------------ */

/* The characters (bytes) of a corpus; id = rank of the byte among those
 * seen (ids 0..V-1 in byte order). */
typedef struct vocab {
    int V;
    unsigned char chars[256]; /* id -> byte */
    int id[256];              /* byte -> id, or -1 */
} vocab;

/* A .tsv file gives its first column (the English side of eng-fra.tsv),
 * one sentence a line, a sentence equal to the one before it skipped; any
 * other file is read as it is (a regular file only).  Free *bytes with
 * ag_file_free. */
int text_load(const char *path, unsigned char **bytes, size_t *n);
void vocab_from_text(vocab *v, const unsigned char *bytes, size_t n);
/* "10,32,33,...": the bytes in id order, in the checkpoint's metadata. */
int vocab_parse(vocab *v, const char *s);
void vocab_format(const vocab *v, char *buf, size_t len); /* len >= 1024 */
/* ids[i] = v's id of bytes[i]; a byte the vocabulary lacks is an error
 * naming it and its offset in path. */
int text_encode(const vocab *v, const unsigned char *bytes, size_t n, int *ids, const char *path);
/* The held-out part: the last tenth of the text (at least context + 1
 * characters when the text has them). */
size_t held_out_start(size_t n, int context);

/* ---- checkpoint.c: the model file -------------------------------------------- */

typedef struct model {
    ag_gpt_config cfg;
    vocab voc;
    ag_store *store;
    ag_gpt net;
    int has_net;
} model;

/* What --resume needs to continue bit for bit. */
typedef struct train_state {
    int64_t step;      /* optimizer steps taken */
    ag_rng data_rng;   /* the batches' offsets */
    uint64_t graph_rng[4];
    double loss_sum;   /* the training loss summed over the loss_steps steps */
    int loss_steps;    /* since the last evaluation (saved when not 0) */
} train_state;

int model_build(model *m, uint64_t seed);
void model_free(model *m);
/* opt and ts may be NULL (then only the model is written). */
int model_save(const model *m, ag_optim *opt, const train_state *ts, const char *path);
/* Config, vocabulary and weights from path; *keep (when not NULL) gets the
 * open file, for model_load_state. */
int model_load(model *m, const char *path, ag_safetensors **keep);
int model_load_state(const ag_safetensors *f, const model *m, ag_optim *opt, train_state *ts, const char *path);

/* ---- parts.c: a training step's batch in parts ---------------------------------- */

typedef struct parts {
    const model *m;
    int n;             /* parts a step */
    ag_team *team;     /* one process: n workers (NULL under mpirun) */
    ag_gpt *rep;       /* rep[k], k > 0: worker k's model */
    int built;         /* rep[1..built) were made */
    const int *x, *y;  /* the step's batch [B, T] */
    int B, T;
} parts;

/* n parts (the processes' count under mpirun); 0, or the exit status. */
int parts_new(parts *p, const model *m, int n);
void parts_free(parts *p);
/* The batch's mean loss into *loss and its gradient added into the
 * model's, as ag_backward would (ag_team_step). */
ag_status parts_step(parts *p, ag_graph *g, const int *x, const int *y, int B, int T, double *loss);

/* ---- the commands ---------------------------------------------------------------- */

/* The mean cross-entropy over every position of the windows of ids[0..n)
 * that start at multiples of the context (each predicts the character
 * after it), B windows a graph; *count gets the positions. */
ag_status dataset_loss(const model *m, ag_graph *g, const int *ids, size_t n, int B, double *loss, size_t *count);

int cmd_train(const opts *o);
int cmd_eval(const opts *o);
int cmd_sample(const opts *o);
int cmd_gradcheck(const opts *o); /* gradcheck.c, in double (build/gpt64) */
/* --head-off's value s, "self:LAYER:HEAD" (the kind of the page's GPT
 * maps) with LAYER and HEAD within m, into *layer and *head.  0, or 2
 * after a message naming s. */
int head_off_parse(const char *s, const model *m, int *layer, int *head);
/* The attention data (docs/explorer.md) of the model on ids[0..n): the last
 * `context` of them, every layer and head, and the heads switched off
 * (o's --head-off), to o's --html, --json and --live; the live page gets
 * the weights saved at `weights` (every head on: the page switches them);
 * the first prompt_len of ids are the prompt ("prompt" and "sample" in the
 * data: the whole text, shown first).  0, or 1 after a message. */
int explore_sample(const model *m, const int *ids, int n, int prompt_len, const opts *o, const char *weights);
/* A character as a label: itself, or a visible stand-in (explore.c). */
void char_label(unsigned char c, char out[8]);
/* sample_dist.c: the first sampled token's distribution, before and after
 * the sampler's filters (ag_sample_dist): the page's "sampling" data and
 * --show-dist N's table.  0, or 1 after a message. */
int json_sampling(FILE *f, const model *m, const int *ids, int prompt_len, int n, const opts *o);
int print_dist(const model *m, const int *ids, int prompt_len, const opts *o);
/* Each layer's attention entropy on the window ids[0..T) (T <= context):
 * the mean over heads and rows of -sum_s P_s log P_s, nats, into out
 * [layers].  0, or 1 after a message. */
int attention_entropy(const model *m, const int *ids, int T, double *out);

#endif
