/* Exercise 2: layer norm's backward (exercises.h).  Derive it on paper
 * first: with xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + eps), the
 * gradient of each row flows through xhat, the mean and the variance.
 * Check: make exercise N=2.  Answer: docs/answers.md. */
#include "exercises.h"

void ex_layer_norm_backward(int N, int C, const double *x, const double *gain, double eps, const double *dy,
                            double *dx, double *dgain, double *dbias)
{
    (void)N, (void)C, (void)x, (void)gain, (void)eps, (void)dy, (void)dx, (void)dgain, (void)dbias;
    /* TODO */
}
