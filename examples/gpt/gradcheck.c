/* gradcheck.c: `gpt gradcheck`, the GPT that `gpt train` would train
 * (the same flags, the same first batch of the same text), its gradient
 * checked whole along random directions and, with --walk or when that
 * fails, node by node (examples/common/model_check.h).  Runs in double:
 * build/gpt64.  Dropout is off (eval mode), as a check needs a loss that
 * is the same function at every call. */
#include "gpt.h"
#include "../common/model_check.h"

#include <stdlib.h>
#include <string.h>

typedef struct batch_loss {
    const model *m;
    const int *x, *y;
    int B, T;
} batch_loss;

static ag_tensor *build_loss(ag_graph *g, void *ctx)
{
    const batch_loss *b = ctx;
    return ag_gpt_loss(g, &b->m->net, b->x, b->y, b->B, b->T);
}

int cmd_gradcheck(const opts *o)
{
    if (!o->data) {
        fprintf(stderr, "%s: gradcheck needs --data FILE\n", prog);
        usage(stderr);
        return 2;
    }
    if (o->hidden % o->heads) {
        fprintf(stderr, "%s: --hidden %d is not a multiple of --heads %d\n", prog, o->hidden, o->heads);
        return 2;
    }
    unsigned char *text = NULL;
    size_t n = 0;
    if (text_load(o->data, &text, &n)) return 1;
    model m = {0};
    vocab_from_text(&m.voc, text, n);
    ag_activation act = !strcmp(o->activation, "gelu_tanh") ? AG_ACT_GELU_TANH
                        : !strcmp(o->activation, "relu")    ? AG_ACT_RELU
                                                            : AG_ACT_GELU;
    m.cfg = (ag_gpt_config){.vocab = m.voc.V, .context = o->context, .hidden = o->hidden, .heads = o->heads,
                            .ffn = o->ffn, .layers = o->layers, .activation = act, .untied = o->untied};
    int B = o->batch, T = o->context, rc = 1;
    int *ids = malloc(n * sizeof *ids), *x = malloc((size_t)B * T * sizeof *x), *y = malloc((size_t)B * T * sizeof *y);
    ag_graph *g = ag_graph_new();
    if (!ids || !x || !y || !g) {
        fprintf(stderr, "%s: out of memory\n", prog);
    } else if (n < (size_t)T + 1) {
        fprintf(stderr, "%s: %s: %zu characters, need more than the context (%d)\n", prog, o->data, n, T);
    } else if (!text_encode(&m.voc, text, n, ids, o->data) && !model_build(&m, o->seed)) {
        ag_rng r; /* B windows at seeded offsets, as a training step's */
        ag_rng_seed(&r, o->seed ^ 0xda7aull);
        for (int b = 0; b < B; b++) {
            size_t at = (size_t)(ag_rng_next(&r) % (uint64_t)(n - (size_t)T));
            memcpy(x + (size_t)b * T, ids + at, (size_t)T * sizeof *x);
            memcpy(y + (size_t)b * T, ids + at + 1, (size_t)T * sizeof *y);
        }
        ag_graph_set_training(g, 0);
        printf("gpt: hidden %d, %d heads, ffn %d, %d layers, context %d, batch %d, vocabulary %d\n", o->hidden,
               o->heads, o->ffn, o->layers, T, B, m.voc.V);
        batch_loss bl = {&m, x, y, B, T};
        model_check_opts mo = {o->directions, o->seed + 1, o->walk, o->break_op, o->by};
        rc = model_check_run(prog, g, build_loss, &bl, m.store, &mo);
    }
    if (m.store) model_free(&m);
    ag_graph_free(g);
    free(ids), free(x), free(y);
    ag_file_free((char *)text);
    return rc;
}
