/* ops/log_softmax.c: PLACEHOLDER, being written. */
#include "internal.h"

ag_tensor *ag_log_softmax(ag_graph *g, ag_tensor *x)
{
    (void)g;
    (void)x;
    ag_graph_fail(g, AG_ERR_STATE, "log_softmax: not implemented yet");
    return NULL;
}

const ag_op_desc ag_op_log_softmax = {.name = "log_softmax", .backward = NULL};
