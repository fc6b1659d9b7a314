/* ops/scale.c: PLACEHOLDER, being written. */
#include "internal.h"

ag_tensor *ag_scale(ag_graph *g, ag_tensor *x, double s)
{
    (void)g;
    (void)x;
    (void)s;
    ag_graph_fail(g, AG_ERR_STATE, "scale: not implemented yet");
    return NULL;
}

const ag_op_desc ag_op_scale = {.name = "scale", .backward = NULL};
