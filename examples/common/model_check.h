/* examples/common/model_check.h: the examples' `gradcheck` command, shared
 * by gpt, translate and classify: their own model, at its size, on their
 * own data, checked in double (docs/testing.md).
 *
 *   whole model  ag_gradcheck_model_store: grad L . u against the loss's
 *                slope along u, for a few random directions u over every
 *                parameter
 *   nodes        ag_gradcheck_nodes (with --walk, or when the whole model
 *                fails): each node's backward alone, the failing ones
 *                named in tape order with their op and layer
 *
 * --break OP --by X multiplies OP's backward by X in both, to see the
 * check catch a wrong backward.  Returns the exit status: 0 when both
 * pass, 1 when one fails or cannot run, 2 in the float build. */
#ifndef EXAMPLES_MODEL_CHECK_H
#define EXAMPLES_MODEL_CHECK_H

#include "attograd.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct model_check_opts {
    int directions;       /* 0: the default (4) */
    uint64_t seed;        /* of the directions */
    int walk;             /* walk the nodes even when the whole model passes */
    const char *break_op; /* NULL: none */
    double by;            /* --break's factor */
} model_check_opts;

static inline double model_check_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* "106,368" into buf. */
static inline const char *model_check_count(size_t n, char *buf, size_t len)
{
    char plain[32];
    int d = snprintf(plain, sizeof plain, "%zu", n), o = 0;
    for (int i = 0; i < d && (size_t)o + 2 < len; i++) {
        if (i && (d - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = plain[i];
    }
    buf[o] = 0;
    return buf;
}

/* The ops on the model's tape and how often each occurs: "ops: linear 8,
 * layer_norm 5, ...", in the op table's order.  0, or 1 after a message. */
static inline int model_check_ops(const char *prog, ag_graph *g, ag_build_fn build, void *ctx)
{
    ag_graph_reset(g);
    uint64_t keep[4];
    memcpy(keep, ag_graph_rng(g), sizeof keep);
    build(g, ctx);
    if (ag_graph_status(g) != AG_OK) {
        fprintf(stderr, "%s: gradcheck: %s\n", prog, ag_graph_error(g));
        return 1;
    }
    int seen[AG_OP_COUNT] = {0};
    for (int i = 0; i < ag_graph_node_count(g); i++) seen[ag_graph_node(g, i)->op]++;
    printf("ops:");
    for (int op = 1, first = 1; op < AG_OP_COUNT; op++)
        if (seen[op]) printf("%s %s %d", first ? "" : ",", ag_op_name(op), seen[op]), first = 0;
    printf(" (%d nodes)\n", ag_graph_node_count(g));
    ag_graph_reset(g);
    memcpy(ag_graph_rng(g), keep, sizeof keep);
    return 0;
}

static inline int model_check_run(const char *prog, ag_graph *g, ag_build_fn build, void *ctx, ag_store *s,
                           const model_check_opts *mo)
{
    if (sizeof(ag_real) != sizeof(double)) {
        fprintf(stderr, "%s: gradcheck runs in double: use the program built with libattograd64 (%s64)\n", prog,
                prog);
        return 2;
    }
    ag_gradcheck_model_opts o = AG_GRADCHECK_MODEL_DEFAULTS;
    if (mo->directions > 0) o.directions = mo->directions;
    o.seed = mo->seed ? mo->seed : 1;
    if (mo->break_op) {
        o.break_op = ag_op_find(mo->break_op);
        if (o.break_op <= 0) {
            fprintf(stderr, "%s: --break: unknown op '%s'\n", prog, mo->break_op);
            return 2;
        }
        o.break_factor = mo->by;
        printf("op %s's backward multiplied by %.17g\n", mo->break_op, mo->by);
    }
    if (model_check_ops(prog, g, build, ctx)) return 1;
    char count[32];
    printf("model: %s parameters in %d tensors, double\n", model_check_count(ag_store_numel(s), count, sizeof count),
           ag_store_count(s));
    ag_gradcheck_model_result r;
    double t0 = model_check_now();
    ag_status st = ag_gradcheck_model_store(g, build, ctx, s, &o, &r);
    double t1 = model_check_now();
    if (st != AG_OK && st != AG_ERR_NUMERIC) {
        fprintf(stderr, "%s: gradcheck: %s\n", prog, ag_graph_error(g));
        return 1;
    }
    printf("whole model: %d directions, %d failed, %d rough: worst error %.2g of its tolerance "
           "(relative %.1e); a relative error above %.1e fails; %.2f s\n",
           r.directions, r.failed, r.rough, r.worst, r.worst_rel, r.visible, t1 - t0);
    if (st != AG_OK) printf("%s\n", ag_graph_error(g));
    int failed = st != AG_OK;
    if (!failed && !mo->walk) return 0;
    ag_gradcheck_walk_result w;
    fflush(stdout);
    st = ag_gradcheck_nodes(g, build, ctx, &o, stdout, &w);
    double t2 = model_check_now();
    if (st != AG_OK && st != AG_ERR_NUMERIC) {
        fprintf(stderr, "%s: gradcheck: %s\n", prog, ag_graph_error(g));
        return 1;
    }
    printf("nodes: %d checked, %d failed, %d rough, %d flat: worst error %.2g of its tolerance; "
           "a relative error above %.1e fails; %.2f s\n",
           w.nodes, w.failed, w.rough, w.flat, w.worst, w.visible, t2 - t1);
    if (w.failed) printf("first failing node: %d %s\n", w.first, ag_op_name(w.first_op));
    return failed || st != AG_OK ? 1 : 0;
}

#endif
