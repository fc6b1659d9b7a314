/* Exercise 3: attention's backward as one op (exercises.h).  Go back
 * through the forward: scores = q k^T / sqrt(D), P = softmax(scores) row
 * by row, out = P v; so dv = P^T dout, dP = dout v^T, dscores from dP
 * through the softmax, then dq and dk.
 * Check: make exercise N=3.  Answer: docs/answers.md. */
#include "exercises.h"

void ex_attention_backward(int T, int S, int D, const double *q, const double *k, const double *v,
                           const double *dout, double *dq, double *dk, double *dv)
{
    (void)T, (void)S, (void)D, (void)q, (void)k, (void)v, (void)dout, (void)dq, (void)dk, (void)dv;
    /* TODO */
}
