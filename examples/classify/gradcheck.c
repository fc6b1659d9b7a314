/* gradcheck.c: `classify64 gradcheck`, the classifier that `classify`
 * would train (the same flags and first batch), its gradient checked whole
 * along random directions and, with --walk or when that fails, node by
 * node (examples/common/model_check.h).  Runs in double, in eval mode. */
#include "classify.h"
#include "../common/model_check.h"

#include <stdio.h>

typedef struct batch_loss {
    const classifier *m;
    const minibatch *b;
} batch_loss;

static ag_tensor *build_loss(ag_graph *g, void *ctx)
{
    const batch_loss *l = ctx;
    return ag_cross_entropy(g, classifier_forward(g, l->m, l->b), l->b->labels, -1, 0);
}

int classify_gradcheck(const char *data, const classifier_config *cfg, int B, uint64_t seed,
                       const model_check_opts *mo)
{
    corpus d;
    if (corpus_load(&d, data, cfg->max_len)) return 1;
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    classifier m = {0};
    minibatch b = {0};
    int rc = 1;
    if (!s || !g || minibatch_alloc(&b, B, cfg->max_len)) {
        fprintf(stderr, "%s: out of memory\n", prog);
    } else if (classifier_init(&m, s, cfg, seed) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, ag_store_error(s));
    } else if (d.n_train < 1) {
        fprintf(stderr, "%s: %s: no training sentences\n", prog, data);
    } else {
        ag_rng rng; /* the first training step's batch */
        ag_rng_seed(&rng, seed ^ 0x5eedc1a55ULL);
        const sentence *rows[B];
        for (int i = 0; i < B; i++) rows[i] = &d.train[ag_rng_next(&rng) % (uint64_t)d.n_train];
        minibatch_fill(&b, rows, B);
        ag_graph_set_training(g, 0);
        printf("classify: hidden %d, %d heads, ffn %d, %d layers, batch %d x %d bytes\n", cfg->hidden, cfg->heads,
               cfg->ffn, cfg->layers, B, b.T);
        batch_loss l = {&m, &b};
        rc = model_check_run(prog, g, build_loss, &l, s, mo);
    }
    minibatch_free(&b);
    classifier_free(&m);
    ag_graph_free(g);
    ag_store_free(s);
    corpus_free(&d);
    return rc;
}
