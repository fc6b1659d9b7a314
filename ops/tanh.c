/* ops/tanh.c: PLACEHOLDER, being written. */
#include "internal.h"

ag_tensor *ag_tanh(ag_graph *g, ag_tensor *x)
{
    (void)g;
    (void)x;
    ag_graph_fail(g, AG_ERR_STATE, "tanh: not implemented yet");
    return NULL;
}

const ag_op_desc ag_op_tanh = {.name = "tanh", .backward = NULL};
