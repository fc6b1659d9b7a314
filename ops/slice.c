/* ops/slice.c: PLACEHOLDER, being written. */
#include "internal.h"

ag_tensor *ag_slice(ag_graph *g, ag_tensor *x, int axis, int start, int len)
{
    (void)g;
    (void)x;
    (void)axis;
    (void)start;
    (void)len;
    ag_graph_fail(g, AG_ERR_STATE, "slice: not implemented yet");
    return NULL;
}

const ag_op_desc ag_op_slice = {.name = "slice", .backward = NULL};
