/* ops/embedding.c: PLACEHOLDER, being written. */
#include "internal.h"

ag_tensor *ag_embedding(ag_graph *g, ag_tensor *weight, const int *ids, int ndim, const int *shape)
{
    (void)g;
    (void)weight;
    (void)ids;
    (void)ndim;
    (void)shape;
    ag_graph_fail(g, AG_ERR_STATE, "embedding: not implemented yet");
    return NULL;
}

const ag_op_desc ag_op_embedding = {.name = "embedding", .backward = NULL};
