/* ops/dropout.c: PLACEHOLDER, being written. */
#include "internal.h"

ag_tensor *ag_dropout(ag_graph *g, ag_tensor *x, double p)
{
    (void)g;
    (void)x;
    (void)p;
    ag_graph_fail(g, AG_ERR_STATE, "dropout: not implemented yet");
    return NULL;
}

const ag_op_desc ag_op_dropout = {.name = "dropout", .backward = NULL};
