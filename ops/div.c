/* ops/div.c: PLACEHOLDER, being written. */
#include "internal.h"

ag_tensor *ag_div(ag_graph *g, ag_tensor *a, ag_tensor *b)
{
    (void)g;
    (void)a;
    (void)b;
    ag_graph_fail(g, AG_ERR_STATE, "div: not implemented yet");
    return NULL;
}

const ag_op_desc ag_op_div = {.name = "div", .backward = NULL};
