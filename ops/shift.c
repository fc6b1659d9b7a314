/* ops/shift.c: PLACEHOLDER, being written. */
#include "internal.h"

ag_tensor *ag_shift(ag_graph *g, ag_tensor *x, double c)
{
    (void)g;
    (void)x;
    (void)c;
    ag_graph_fail(g, AG_ERR_STATE, "shift: not implemented yet");
    return NULL;
}

const ag_op_desc ag_op_shift = {.name = "shift", .backward = NULL};
