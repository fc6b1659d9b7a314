/* Exercise 10: a learning-rate warmup, then cosine decay (exercises.h).
 * Check: make exercise N=10.  Answer: docs/answers.md. */
#include "exercises.h"

double ex_warmup_cosine(double base_lr, long step, long warmup, long total)
{
    (void)step, (void)warmup, (void)total;
    return base_lr; /* TODO: constant */
}
