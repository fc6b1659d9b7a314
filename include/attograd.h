/* attograd.h: the header programs include.
 *
 *   ag_store *params = ag_store_new();                   // weights: the whole run
 *   ag_tensor *w = ag_param(params, "w", AG_SHAPE(3, 2));
 *   ag_init_uniform(w, -0.5, 0.5, 42);
 *   ag_graph *g = ag_graph_new();                        // activations: one step
 *   ag_tensor *x = ag_tensor_from(g, AG_SHAPE(4, 3), xs); // xs: 12 values
 *   ag_tensor *loss = ag_mean_all(g, ag_tanh(g, ag_matmul(g, x, w)));
 *   if (ag_backward(g, loss) != AG_OK)                   // fills w->grad
 *       fprintf(stderr, "%s\n", ag_graph_error(g));      // first error, with shapes
 *   ag_graph_reset(g);
 *
 * Topics: attograd_core.h (tensors, graph, store), _nn.h (layers, models),
 * _optim.h, _io.h (checkpoints, files), _text.h, _viz.h; the deprecated names
 * in attograd_compat.h (define AG_NO_DEPRECATED to leave them out). */
#ifndef ATTOGRAD_H
#define ATTOGRAD_H

#include "attograd_core.h"
#include "attograd_io.h"
#include "attograd_nn.h"
#include "attograd_optim.h"
#include "attograd_text.h"
#include "attograd_viz.h"
#ifndef AG_NO_DEPRECATED
#include "attograd_compat.h"
#endif

#endif /* ATTOGRAD_H */
