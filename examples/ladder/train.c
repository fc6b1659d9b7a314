/* train.c: the same training for every rung (Adam, gradient norm clipped
 * at 1, random windows of the training text), the held-out score in bits
 * per character, and pictures of the attention. */
#define _XOPEN_SOURCE 700 /* stop_signal.h: SA_RESTART, SA_RESETHAND */
#include "ladder.h"
#include "../common/stop_signal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { MAX_B = 256, MAX_T = 256 };

/* B windows of T + 1 characters from [lo, hi): inputs and next characters. */
static void windows(const text *t, size_t lo, size_t hi, ag_rng *r, int B, int T, int *ids, int *next)
{
    for (int b = 0; b < B; b++) {
        size_t at = lo + ag_rng_next(r) % (hi - lo - (size_t)T);
        for (int i = 0; i < T; i++) ids[b * T + i] = t->ids[at + i], next[b * T + i] = t->ids[at + i + 1];
    }
}

ag_tensor *text_loss(ag_graph *g, const ladder_model *m, void *ctx, ag_rng *r, int B)
{
    static int ids[MAX_B * MAX_T], next[MAX_B * MAX_T];
    const text *t = ctx;
    const int T = m->cfg.context;
    windows(t, 0, t->split, r, B, T, ids, next);
    return ag_cross_entropy(g, ladder_forward(g, m, ids, B, T, NULL), next, -1, 0);
}

ag_status train(ladder_model *m, ag_store *s, const train_opts *o, loss_fn loss, void *ctx)
{
    ag_optim *opt = ag_adam_new(s, o->lr, 0.9, 0.999, 1e-8, 0, 0);
    ag_graph *g = ag_graph_new();
    ag_status st = opt && g ? AG_OK : AG_ERR_NOMEM;
    ag_rng r;
    ag_rng_seed(&r, o->seed);
    int step = 1;
    if (o->done) catch_stop_signals(); /* the caller reads how many steps were taken */
    for (; step <= o->steps && st == AG_OK; step++) {
        ag_tensor *l = loss(g, m, ctx, &r, o->batch);
        double norm;
        if (!l || (st = ag_backward(g, l)) != AG_OK) {
            fprintf(stderr, "%s: step %d: %s\n", prog, step, ag_graph_error(g));
            st = st == AG_OK ? ag_graph_status(g) : st;
            break;
        }
        double loss_value = l->data[0];
        if (!o->quiet && step % 500 == 0) printf("  step %d loss %.4f (nats)\n", step, loss_value);
        if ((st = ag_clip_grad_norm(s, 1.0, &norm)) == AG_OK && (st = ag_optim_step(opt)) != AG_OK)
            fprintf(stderr, "%s: %s\n", prog, ag_optim_error(opt));
        ag_store_zero_grad(s);
        ag_graph_reset(g);
        if (st == AG_OK && o->snapshot && step < o->steps) {
            if (o->snapshot(m, step, o->snapshot_ctx)) st = AG_ERR_IO;
        }
        if (st == AG_OK && o->progress) fprintf(stderr, "step %d of %d loss %.4f\n", step, o->steps, loss_value);
        if (st == AG_OK && o->done && step < o->steps && stop_signal) {
            step++;
            break;
        }
    }
    if (o->done) *o->done = step - 1;
    ag_graph_free(g);
    ag_optim_free(opt);
    return st;
}

ag_status held_out_bits(const ladder_model *m, const text *t, double *bits)
{
    const int T = m->cfg.context;
    ag_graph *g = ag_graph_new();
    if (!g) return AG_ERR_NOMEM;
    ag_graph_set_grad(g, 0);
    ag_graph_set_training(g, 0);
    double sum = 0;
    size_t count = 0;
    ag_status st = AG_OK;
    for (size_t at = t->split; at + (size_t)T < t->n && st == AG_OK; at += (size_t)T) {
        ag_tensor *l = ag_cross_entropy(g, ladder_forward(g, m, t->ids + at, 1, T, NULL), t->ids + at + 1, -1, 0);
        if (!l) st = ag_graph_status(g);
        else sum += (double)l->data[0] * T, count += (size_t)T;
        ag_graph_reset(g);
    }
    ag_graph_free(g);
    *bits = count ? sum / (double)count / log(2.0) : NAN;
    return st;
}

int draw_attention(const ladder_model *m, const int *ids, int T, const char *const *labels, const char *path_prefix)
{
    if (m->cfg.rung < ONE_HEAD) return 0; /* nothing attends below rung 3 */
    ag_graph *g = ag_graph_new();
    ag_tensor *w[16] = {0};
    int rc = 0, L = m->cfg.layers < 16 ? m->cfg.layers : 16;
    ag_graph_set_grad(g, 0);
    ag_graph_set_training(g, 0);
    if (!ladder_forward(g, m, ids, 1, T, w)) rc = 1;
    for (int l = 0; l < L && !rc; l++) {
        char path[512], title[128], err[512];
        snprintf(path, sizeof path, "%s_layer%d.svg", path_prefix, l);
        snprintf(title, sizeof title, "rung %d (%s), layer %d: attention of each character (row)", m->cfg.rung,
                 rung_idea[m->cfg.rung], l);
        if (ag_svg_attention(path, title, w[l], 0, labels, labels, err, sizeof err) != AG_OK)
            fprintf(stderr, "%s: %s\n", prog, err), rc = 1;
    }
    if (rc && ag_graph_status(g) != AG_OK) fprintf(stderr, "%s: %s\n", prog, ag_graph_error(g));
    ag_graph_free(g);
    return rc;
}
