/* ops/permute.c: PLACEHOLDER, being written. */
#include "internal.h"

ag_tensor *ag_permute(ag_graph *g, ag_tensor *x, const int *perm)
{
    (void)g;
    (void)x;
    (void)perm;
    ag_graph_fail(g, AG_ERR_STATE, "permute: not implemented yet");
    return NULL;
}

const ag_op_desc ag_op_permute = {.name = "permute", .backward = NULL};
