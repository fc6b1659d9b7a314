/* ops/concat.c: PLACEHOLDER, being written. */
#include "internal.h"

ag_tensor *ag_concat(ag_graph *g, int n, ag_tensor *const *xs, int axis)
{
    (void)g;
    (void)n;
    (void)xs;
    (void)axis;
    ag_graph_fail(g, AG_ERR_STATE, "concat: not implemented yet");
    return NULL;
}

const ag_op_desc ag_op_concat = {.name = "concat", .backward = NULL};
