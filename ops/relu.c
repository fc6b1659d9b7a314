/* ops/relu.c: PLACEHOLDER, being written. */
#include "internal.h"

ag_tensor *ag_relu(ag_graph *g, ag_tensor *x)
{
    (void)g;
    (void)x;
    ag_graph_fail(g, AG_ERR_STATE, "relu: not implemented yet");
    return NULL;
}

const ag_op_desc ag_op_relu = {.name = "relu", .backward = NULL};
