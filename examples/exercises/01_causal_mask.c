/* Exercise 1: the causal mask, with a key/value cache in front (exercises.h).
 * Hint: ag_tensor_new(g, AG_SHAPE(T, S)) gives a zero-filled [T, S] leaf;
 * set t->data[t * S + s] to 1 where query t may see key s.
 * Check: make exercise N=1.  Answer: docs/answers.md. */
#include "exercises.h"

ag_tensor *ex_causal_mask(ag_graph *g, int T, int S)
{
    (void)g, (void)T, (void)S;
    return NULL; /* TODO */
}
