/* ops/max.c: PLACEHOLDER, being written. */
#include "internal.h"

ag_tensor *ag_max(ag_graph *g, ag_tensor *x, int axis, int keepdim)
{
    (void)g;
    (void)x;
    (void)axis;
    (void)keepdim;
    ag_graph_fail(g, AG_ERR_STATE, "max: not implemented yet");
    return NULL;
}

const ag_op_desc ag_op_max = {.name = "max", .backward = NULL};
