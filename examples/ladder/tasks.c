/* tasks.c: copy and reverse, tasks where attention must do something
 * visible.  A sequence is N random digits, a separator, then the same
 * digits (copy) or the same digits backwards (reverse):
 *
 *   copy     3 1 4 1 5 9 2 6 | 3 1 4 1 5 9 2 6
 *   reverse  3 1 4 1 5 9 2 6 | 6 2 9 5 1 4 1 3
 *
 * The model is the ladder's top rung (pre-norm, two layers); only the
 * digits after the separator are scored.  To write the i-th answer digit,
 * the position before it must find one input digit: i (copy) or N - 1 - i
 * (reverse).  Its attention pictures show that as a diagonal and an
 * anti-diagonal. */
#include "ladder.h"

#include <stdio.h>
#include <string.h>

enum { N = 8, SEP = 10, V = 11, T = 2 * N, MAX_B = 256 };

typedef struct task {
    int reverse;
} task;

/* One sequence: ids [T] (the digits, the separator, the answer but its
 * last digit) and targets [T] (-1 but where an answer digit comes next). */
static void sequence(const task *k, ag_rng *r, int *ids, int *targets)
{
    int d[N];
    for (int i = 0; i < N; i++) d[i] = (int)(ag_rng_next(r) % 10);
    for (int i = 0; i < N; i++) ids[i] = d[i], targets[i] = -1;
    ids[N] = SEP;
    for (int i = 0; i < N; i++) {
        int answer = d[k->reverse ? N - 1 - i : i];
        targets[N + i] = answer;
        if (N + 1 + i < T) ids[N + 1 + i] = answer;
    }
}

static ag_tensor *task_loss(ag_graph *g, const ladder_model *m, void *ctx, ag_rng *r, int B)
{
    static int ids[MAX_B * T], targets[MAX_B * T];
    for (int b = 0; b < B; b++) sequence(ctx, r, ids + b * T, targets + b * T);
    return ag_cross_entropy(g, ladder_forward(g, m, ids, B, T, NULL), targets, -1, 0);
}

/* Answer digits right (the likeliest digit is the target) and whole answers
 * right, over n held-out sequences. */
static ag_status score(const ladder_model *m, const task *k, int n, double *digits, double *answers)
{
    ag_graph *g = ag_graph_new();
    ag_rng r;
    ag_rng_seed(&r, 0x4e1d07u); /* held-out sequences: a stream of their own */
    int ids[T], targets[T], right = 0, whole = 0;
    ag_graph_set_grad(g, 0);
    for (int s = 0; s < n; s++) {
        sequence(k, &r, ids, targets);
        ag_tensor *logits = ladder_forward(g, m, ids, 1, T, NULL); /* [1, T, V] */
        if (!logits) break;
        int all = 1;
        for (int t = N; t < T; t++) {
            const ag_real *row = logits->data + t * V;
            int best = 0;
            for (int v = 1; v < V; v++) best = row[v] > row[best] ? v : best;
            right += best == targets[t], all &= best == targets[t];
        }
        whole += all;
        ag_graph_reset(g);
    }
    ag_status st = ag_graph_status(g);
    ag_graph_free(g);
    *digits = (double)right / (n * N), *answers = (double)whole / n;
    return st;
}

int run_task(const char *name, const train_opts *o, const char *svg_prefix)
{
    task k = {.reverse = !strcmp(name, "reverse")};
    ladder_config cfg = {.rung = PRE_NORM, .V = V, .context = T, .hidden = 32, .heads = 2, .ffn = 64, .layers = 2};
    ladder_model m;
    ag_store *s = ag_store_new();
    int rc = 1;
    double digits, answers;
    if (!s || ladder_init(&m, s, &cfg, o->seed) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, s ? ag_store_error(s) : "out of memory");
    } else if (train(&m, s, o, task_loss, &k) == AG_OK && score(&m, &k, 1000, &digits, &answers) == AG_OK) {
        printf("%-8s answer digits right %6.2f%%, whole answers right %6.2f%%\n", name, 100 * digits, 100 * answers);
        int ids[T], targets[T];
        const char *labels[T] = {0};
        static const char *const names[V] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "|"};
        ag_rng r;
        ag_rng_seed(&r, 1);
        sequence(&k, &r, ids, targets);
        for (int t = 0; t < T; t++) labels[t] = names[ids[t]];
        rc = svg_prefix ? draw_attention(&m, ids, T, labels, svg_prefix) : 0;
    }
    ladder_free(&m);
    ag_store_free(s);
    return rc;
}
