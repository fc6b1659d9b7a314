/* ops/layer_norm.c: PLACEHOLDER, being written. */
#include "internal.h"

ag_tensor *ag_layer_norm(ag_graph *g, ag_tensor *x, ag_tensor *gain, ag_tensor *bias, double eps)
{
    (void)g;
    (void)x;
    (void)gain;
    (void)bias;
    (void)eps;
    ag_graph_fail(g, AG_ERR_STATE, "layer_norm: not implemented yet");
    return NULL;
}

const ag_op_desc ag_op_layer_norm = {.name = "layer_norm", .backward = NULL};
