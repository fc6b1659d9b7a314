/* examples/translate/translate.h: what the translator's files share.
 *
 *   cli.c         flags, usage, messages and main: parse, then dispatch
 *   checkpoint.c  the model file: build, save, and load with every metadata
 *                 field checked (one table) against the tensors' shapes
 *   train.c       translate train: the training loop as a list of steps
 *   curves.c      its loss and entropy plots, the probe's json, its page
 *   eval.c        greedy decoding of many sentences; translate eval
 *   run.c         translate run: sentences from argv or stdin, pictures
 *   split.c       translate split: a held-out part by distinct source
 *   probe.c       each attention layer's entropy and largest score
 *   gradcheck.c   translate64 gradcheck: the gradient against finite differences
 *
 * The model is ag_seq2seq (src/nn/seq2seq.c); a checkpoint is a safetensors
 * file holding its parameters, its config and vocabularies in __metadata__,
 * and, when written by train, the optimizer's state and the random streams,
 * so that --resume continues bit for bit. */
#ifndef TRANSLATE_H
#define TRANSLATE_H

#include "attograd.h"

#include <stdint.h>
#include <stdio.h>

#define FORMAT "attograd-translator-1"

/* The ranges of the flags, which a model file's metadata must keep too: a
 * hostile file cannot ask for a model that takes hours to build. */
enum {
    HIDDEN_MAX = 4096, HEADS_MAX = 256, FFN_MAX = 16384, LAYERS_MAX = 64,
    MAX_LEN_MIN = 2, MAX_LEN_MAX = 512, EPOCHS_MAX = 100000, MIN_FREQ_MAX = 1000000, HEADS_OFF_MAX = 64,
};

/* ---- cli.c ------------------------------------------------------------ */

/* Flags a user gave, for --resume to tell a conflict from a default. */
enum {
    GIVEN_HIDDEN = 1 << 0, GIVEN_HEADS = 1 << 1, GIVEN_FFN = 1 << 2, GIVEN_LAYERS = 1 << 3,
    GIVEN_MAX_LEN = 1 << 4, GIVEN_DROPOUT = 1 << 5, GIVEN_MIN_FREQ = 1 << 6, GIVEN_OPTIMIZER = 1 << 7,
    GIVEN_INIT = 1 << 8, GIVEN_PRE_NORM = 1 << 9, GIVEN_QK_NORM = 1 << 10,
};

/* The names of --init, by AG_SEQ2SEQ_INIT_* value (NULL-terminated). */
extern const char *const init_names[];

typedef struct opts {
    const char *data, *test, *out, *model, *resume, *json, *plot, *attention, *train_out, *entropy_plot, *html;
    const char *save_init, *trace; /* train: the checkpoint before step 1; a line per step */
    const char *live, *wasm, *argv0; /* run's live page, its module, and where the program is */
    int epochs, stop_after, batch, hidden, heads, ffn, layers, max_len, min_freq, threads, nesterov, warmup;
    int init, every; /* AG_SEQ2SEQ_INIT_*; split's every N-th source */
    double lr, momentum, clip, dropout, weight_decay;
    const char *optimizer, *schedule;
    uint64_t seed;
    int quiet;
    int pre_norm, qk_norm; /* ag_seq2seq_config's */
    unsigned given; /* GIVEN_* */
    int stdin_uses; /* input flags given "-" (stdin) */
    const char *head_off[HEADS_OFF_MAX]; /* run's --head-off KIND:LAYER:HEAD, each */
    int heads_off;
    int directions, walk;  /* gradcheck's --directions N, --walk */
    const char *break_op;  /* gradcheck's --break OP --by X */
    double by;
} opts;

extern const char *prog;
void usage(FILE *f);
/* "prog: <fmt with a and b>", the usage on stderr; returns 2. */
int bad(const char *fmt, const char *a, const char *b);
/* Read a data file, its warnings (skipped lines) on stderr.  0 or 1. */
int load_pairs(const char *path, ag_pairs **p);
/* The same from len bytes already read from path. */
int parse_pairs(const char *buf, size_t len, const char *path, ag_pairs **p);

/* ---- checkpoint.c -------------------------------------------------------- */

typedef struct model {
    ag_seq2seq_config cfg;
    ag_vocab *sv, *tv;
    ag_store *store;
    ag_seq2seq net;
    int has_net;
} model;

/* Where a run is, saved beside the weights so that --resume continues it.
 * The shuffle of epoch `epoch` is drawn from data_rng; pairs_done > 0 when
 * the run stopped inside that epoch (a signal), with the epoch's loss so far
 * in loss_sum (sum of loss * tokens) and tokens. */
typedef struct train_state {
    int epoch;               /* epochs completed */
    int pairs_done;          /* of the shuffled epoch `epoch` */
    int min_freq;            /* the vocabularies' */
    const char *optimizer;   /* "sgd" or "adam" (a static string) */
    int64_t optimizer_steps;
    ag_rng data_rng;         /* shuffling, as at the start of epoch `epoch` */
    uint64_t graph_rng[4];   /* dropout */
    double loss_sum;
    int64_t tokens;
} train_state;

/* The store and the model for m->cfg, parameters drawn from seed; `from`
 * names the config's source in messages.  0 or 1. */
int model_build(model *m, uint64_t seed, const char *from);
void model_free(model *m);
/* Config, vocabularies and weights from path, the metadata checked against
 * the tensors before anything is built.  With keep, the open file goes to
 * *keep for load_train_state and optimizer_load.  0 or 1. */
int load_model(model *m, const char *path, ag_safetensors **keep);
/* The training state of a checkpoint, every field checked.  0 or 1. */
int load_train_state(const ag_safetensors *f, const char *path, train_state *ts);
/* The optimizer's moments and step count from f.  0 or 1. */
int optimizer_load(ag_optim *opt, const model *m, const ag_safetensors *f, const char *path, int64_t steps);
/* Save m (and, with opt and ts, what --resume needs) crash-safely.  0 or 1. */
int save_model(const model *m, ag_optim *opt, const train_state *ts, const char *path);

/* ---- eval.c ------------------------------------------------------------- */

typedef struct metrics {
    int sources;
    double exact, bleu, ceiling;
} metrics;

/* Translate n token lists; out_tok[i] gets up to max_len token strings
 * (pointers into the vocabulary), out_len[i] their count.  0 or 1. */
int translate_batch(const model *m, ag_graph *g, const char *const *const *src, const int *src_len, int n,
                    const char ***out_tok, int *out_len);
/* Exact match, BLEU and its ceiling over the distinct sources of p.  0 or 1. */
int evaluate(const model *m, ag_graph *g, const ag_pairs *p, metrics *r);

/* ---- probe.c -------------------------------------------------------------- */

#define PROBE_PAIRS 64 /* the probe batch: the first min(64, --batch) training pairs */

typedef struct layer_stats {
    double entropy;   /* mean row entropy of the weights, nats */
    double max_score; /* largest scaled score q.k / sqrt(D) of a key a query sees */
    double max_gap;   /* largest max - min of those scores in one row */
} layer_stats;

struct dataset;
struct batch;
/* The layers probed: the first AG_SEQ2SEQ_MAX_LAYERS of each kind. */
int probe_layers(const model *m);
/* "encoder.self", "decoder.self", "decoder.cross" for k = 0, 1, 2. */
const char *probe_kind(int k);
/* out[k * probe_layers(m) + i]: layer i of kind k, on the first
 * min(PROBE_PAIRS, cap) pairs of d (b holds cap pairs).  Resets g.  0 or 1. */
int probe_attention(const model *m, ag_graph *g, const struct dataset *d, struct batch *b, int cap,
                    layer_stats *out);

/* ---- curves.c: the run's plots and page ------------------------------------ */

/* What translate train recorded of its run, for the plots and the page. */
typedef struct train_curves {
    const opts *o;
    const model *m;
    int has_test;                  /* --test: a held-out loss per epoch */
    const double *loss, *test_loss; /* per epoch, o->epochs of each */
    const layer_stats *probe;      /* (epochs + 1) x 3 x probe_layers, row e after epoch e */
    const int *probed;             /* probed[e]: row e was measured */
} train_curves;
/* --plot: the training (and held-out) loss per epoch, as SVG.  0 or 1. */
int write_loss_plot(const train_curves *c);
/* --entropy-plot: each attention layer's entropy per epoch.  0 or 1. */
int write_entropy_plot(const train_curves *c);
/* ", \"attention\": [...]": the probe's figures per epoch, for --json. */
void json_probe(FILE *f, const train_curves *c);
/* --html: the explorer's training page.  0 or 1. */
int write_training_page(const train_curves *c, const metrics *tr, const metrics *te, double test_loss);

/* ---- the commands: each returns the exit status --------------------------- */

int cmd_split(const opts *o);
int cmd_train(const opts *o);
int cmd_eval(const opts *o);
int cmd_run(const opts *o, char **sentences, int n);
/* gradcheck.c: the model's gradient against finite differences (double). */
int cmd_gradcheck(const opts *o);

#endif
