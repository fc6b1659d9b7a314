/* src/core/graph.h: the graph's own fields, shared by the files that make
 * it (graph.c: the tape, its memory and its error), differentiate it
 * (backward.c) and check it (check_finite.c).  Nothing else reads them. */
#ifndef AG_CORE_GRAPH_H
#define AG_CORE_GRAPH_H

#include "core/internal.h"

#define ERR_LEN 512

/* A piece of the arena a backward gave back: bytes from p on. */
typedef struct ag__span {
    unsigned char *p;
    size_t bytes;
} ag__span;

struct ag_graph {
    ag_arena *arena;   /* values, gradients and the ops' saved state */
    ag_arena *heads;   /* tensor headers, two slots each (see header_new) */
    ag_arena *scratch; /* no-grad mode: the newest op's saved state (ag__save) */
    ag_tensor **nodes; /* the tape; capacity kept across resets */
    int count, cap;
    int made;          /* headers made since the last reset */
    uint32_t epoch;    /* resets that followed a made tensor: the stamp of tensors */
    uint32_t passes;   /* backward calls so far: the stamp of their buffers */
    ag_status status;
    char err[ERR_LEN];
    int training;
    int no_grad;       /* ag_graph_set_grad(g, 0): nothing recorded for backward */
    int drop_grads;    /* ag_graph_set_keep_grads(g, 0): intermediates' buffers recycled */
    int precision;     /* the products' (ag_graph_set_precision); -1: the process default */
    ag__span *spare;   /* those recycled buffers, free for the next (backward.c) */
    int nspare, spare_cap;
    ag_rng rng;
    /* the op table backward reads: ag_op_table, or a copy with one op's
     * backward wrapped by ag__graph_break (the gradient checker's test) */
    const ag_op_desc *const *ops;
    const ag_op_desc *table[AG_OP_COUNT];
    ag_op_desc broken;             /* the wrapping descriptor */
    const ag_op_desc *broken_real; /* the op it wraps */
    double broken_factor;
    bool poison;       /* fill fresh gradient buffers with NaN (ag__graph_poison) */
    ag_tensor *causal; /* the causal mask the layers share until the reset (ag__causal_shared) */
    void *temp;        /* ag__temp's buffer, kept across resets */
    size_t temp_cap;
    void *copies;      /* ag__temp_copies' buffer, kept across resets */
    size_t copies_cap;
    struct ag__replay *replay; /* the node walk's replay (gradcheck_nodes.c), or NULL */
};

/* The node walk's hook: t has just gone on g's tape (graph.c, while
 * g->replay is set); gradcheck_nodes.c. */
void ag__replay_node(ag_graph *g, ag_tensor *t);

/* " 'name'" when t has a name, else "" (graph.c). */
const char *ag__name_str(const ag_tensor *t, char *buf, size_t len);
/* AG_CHECK_FINITE's checks (check_finite.c): the forward values, oldest
 * node first; the forward values and the seed of a backward from y (dy
 * NULL: the loss y itself); the gradients, newest node first.  Each
 * records what it found on g and returns g's status. */
ag_status ag__check_values(ag_graph *g);
ag_status ag__check_before(ag_graph *g, ag_tensor *y, const ag_real *dy);
ag_status ag__check_gradients(ag_graph *g);

#endif
