/* Exercise 5: ALiBi's bias (exercises.h): a leaf [H, T, T], added to the
 * scores before the softmax, so that far keys weigh less, more so in the
 * heads with steep slopes.
 * Check: make exercise N=5.  Answer: docs/answers.md. */
#include "exercises.h"

ag_tensor *ex_alibi_bias(ag_graph *g, int H, int T)
{
    (void)g, (void)H, (void)T;
    return NULL; /* TODO */
}
