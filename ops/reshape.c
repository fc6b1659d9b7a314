/* ops/reshape.c: PLACEHOLDER, being written. */
#include "internal.h"

ag_tensor *ag_reshape(ag_graph *g, ag_tensor *x, int ndim, const int *shape)
{
    (void)g;
    (void)x;
    (void)ndim;
    (void)shape;
    ag_graph_fail(g, AG_ERR_STATE, "reshape: not implemented yet");
    return NULL;
}

const ag_op_desc ag_op_reshape = {.name = "reshape", .backward = NULL};
