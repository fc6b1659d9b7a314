/* Exercise 6: label smoothing from ops (exercises.h): ag_log_softmax, a
 * one-hot leaf of the targets, ag_mul, ag_mean and ag_sum, ag_scale.
 * Check: make exercise N=6.  Answer: docs/answers.md. */
#include "exercises.h"

ag_tensor *ex_label_smoothing_loss(ag_graph *g, ag_tensor *logits, const int *targets, double eps)
{
    (void)targets, (void)eps;
    return ag_mean_all(g, logits); /* TODO: not a loss at all */
}
