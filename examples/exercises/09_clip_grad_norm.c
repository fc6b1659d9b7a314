/* Exercise 9: gradient clipping by the global norm (exercises.h): every
 * parameter is ag_store_at(s, i) for i < ag_store_count(s); its gradient
 * is p->grad, p->size values.
 * Check: make exercise N=9.  Answer: docs/answers.md. */
#include "exercises.h"

double ex_clip_grad_norm(ag_store *s, double max_norm)
{
    (void)s, (void)max_norm;
    return 0; /* TODO */
}
