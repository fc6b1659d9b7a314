/* ops/masked_fill.c: PLACEHOLDER, being written. */
#include "internal.h"

ag_tensor *ag_masked_fill(ag_graph *g, ag_tensor *x, ag_tensor *mask, double value)
{
    (void)g;
    (void)x;
    (void)mask;
    (void)value;
    ag_graph_fail(g, AG_ERR_STATE, "masked_fill: not implemented yet");
    return NULL;
}

const ag_op_desc ag_op_masked_fill = {.name = "masked_fill", .backward = NULL};
