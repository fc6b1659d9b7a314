/* ops/sub.c: PLACEHOLDER, being written. */
#include "internal.h"

ag_tensor *ag_sub(ag_graph *g, ag_tensor *a, ag_tensor *b)
{
    (void)g;
    (void)a;
    (void)b;
    ag_graph_fail(g, AG_ERR_STATE, "sub: not implemented yet");
    return NULL;
}

const ag_op_desc ag_op_sub = {.name = "sub", .backward = NULL};
