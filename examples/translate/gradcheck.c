/* gradcheck.c: `translate64 gradcheck`, the translator that `translate
 * train` would train (the same flags, vocabularies and first batch size),
 * its gradient checked whole along random directions and, with --walk or
 * when that fails, node by node (examples/common/model_check.h).  Runs in
 * double.  Dropout is off (eval mode): a check needs the same function at
 * every call. */
#include "translate.h"
#include "seq2seq_data.h"
#include "../common/model_check.h"

typedef struct batch_loss {
    const model *m;
    const batch *b;
} batch_loss;

static ag_tensor *build_loss(ag_graph *g, void *ctx)
{
    const batch_loss *l = ctx;
    const batch *b = l->b;
    return ag_seq2seq_loss(g, &l->m->net, b->src, b->src_valid, b->tgt_in, b->tgt_out, b->B, b->S, b->T);
}

/* The first batch: o->batch pairs (at most the data's) drawn without
 * repeats from a stream seeded as train's shuffle. */
static void first_batch(const dataset *d, int B, uint64_t seed, int *idx)
{
    int *order = malloc((size_t)d->n * sizeof *order);
    ag_rng r;
    ag_rng_seed(&r, seed ^ 0xda7aull);
    for (int i = 0; i < d->n; i++) order[i] = i;
    for (int i = 0; i < B; i++) { /* the first B steps of a Fisher-Yates shuffle */
        int j = i + (int)(ag_rng_next(&r) % (uint64_t)(d->n - i)), t = order[i];
        order[i] = order[j], order[j] = t;
        idx[i] = order[i];
    }
    free(order);
}

int cmd_gradcheck(const opts *o)
{
    if (!o->data) return bad("gradcheck needs --data FILE%s%s", "", "");
    if (o->hidden % o->heads) return bad("--hidden is not a multiple of --heads%s%s", "", "");
    ag_pairs *p = NULL;
    if (load_pairs(o->data, &p)) return 1;
    model m = {0};
    dataset d = {0};
    batch b = {0};
    ag_graph *g = NULL;
    int rc = 1, *idx = NULL;
    char err[512];
    if (ag_vocab_from_pairs(p, AG_SOURCE, o->min_freq, &m.sv, err, sizeof err) != AG_OK ||
        ag_vocab_from_pairs(p, AG_TARGET, o->min_freq, &m.tv, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        goto done;
    }
    m.cfg = (ag_seq2seq_config){ag_vocab_size(m.sv), ag_vocab_size(m.tv), o->hidden, o->heads, o->ffn,
                                o->layers, o->max_len, 0, o->init, o->pre_norm, o->qk_norm};
    if (model_build(&m, o->seed, "the flags")) goto done;
    int L = o->max_len, B = o->batch < p->n ? o->batch : p->n;
    if (B < 1) {
        fprintf(stderr, "%s: %s: no sentence pairs\n", prog, o->data);
        goto done;
    }
    b.src = malloc((size_t)B * L * sizeof(int)), b.tgt_in = malloc((size_t)B * L * sizeof(int));
    b.tgt_out = malloc((size_t)B * L * sizeof(int)), b.src_valid = malloc((size_t)B * sizeof(int));
    idx = malloc((size_t)B * sizeof *idx);
    g = ag_graph_new();
    if (!b.src || !b.tgt_in || !b.tgt_out || !b.src_valid || !idx || !g || dataset_make(&d, p, m.sv, m.tv, L)) {
        fprintf(stderr, "%s: out of memory\n", prog);
        goto done;
    }
    first_batch(&d, B, o->seed, idx);
    batch_fill(&b, &d, idx, B);
    ag_graph_set_training(g, 0);
    printf("translate: hidden %d, %d heads, ffn %d, %d + %d layers, %s-norm, batch %d (%d x %d source, %d target "
           "tokens), vocabularies %d and %d\n",
           o->hidden, o->heads, o->ffn, o->layers, o->layers, o->pre_norm ? "pre" : "post", B, B, b.S, b.tokens,
           m.cfg.src_vocab, m.cfg.tgt_vocab);
    batch_loss bl = {&m, &b};
    model_check_opts mo = {o->directions, o->seed + 1, o->walk, o->break_op, o->by};
    rc = model_check_run(prog, g, build_loss, &bl, m.store, &mo);
done:
    ag_graph_free(g);
    free(b.src), free(b.tgt_in), free(b.tgt_out), free(b.src_valid), free(idx);
    dataset_free(&d);
    model_free(&m);
    ag_pairs_free(p);
    return rc;
}
