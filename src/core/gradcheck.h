/* gradcheck.h: what the gradient checker's two files share: evaluating the
 * loss (gradcheck.c) and the strict stage (gradcheck_strict.c). */
#ifndef AG_CORE_GRADCHECK_H
#define AG_CORE_GRADCHECK_H

#include "core/internal.h"

/* How to evaluate L: g reset, its stream rewound to rng0 (the same dropout
 * mask every time), build called. */
typedef struct ag__probe {
    ag_graph *g;
    ag_build_fn build;
    void *ctx;
    const ag_rng *rng0;
} ag__probe;

/* L at the inputs' current values. */
ag_status ag__probe_loss(const ag__probe *p, double *loss);
/* L with element i of x set to v; x's element is restored afterwards. */
ag_status ag__probe_loss_at(const ag__probe *p, ag_tensor *x, size_t i, ag_real v, double *loss);

/* The rounding noise of L near the inputs' values: the standard deviation
 * of the error of one evaluation, measured.  `keep` holds room for every
 * element of the n inputs (their values are restored from it). */
ag_status ag__loss_noise(const ag__probe *p, ag_tensor *const *in, int n, ag_real *keep, double *sigma);

/* The strict stage's verdict material for element i of x. */
typedef struct ag__strict {
    double numeric; /* dL/dx_i by Richardson extrapolation */
    double tol;     /* a bound on |numeric - dL/dx_i|, from the errors measured */
    bool rough;     /* L is not smooth within the step: no verdict */
    double spread;  /* |R1 - R2|, tol's share from truncation (the rest is noise) */
} ag__strict;

/* Steps h, h/2, h/4 around x_i; d_eps is stage one's central difference
 * (step eps) at the same element, sigma the noise of ag__loss_noise. */
ag_status ag__strict_element(const ag__probe *p, ag_tensor *x, size_t i, double h, double sigma,
                             double d_eps, double eps, ag__strict *out);

/* The same verdict from d[k] = D(h / 2^k), k = 0..2, central differences
 * along any direction (gradcheck_model.c, gradcheck_nodes.c). */
void ag__strict_from(const double d[3], double h, double sigma, double d_eps, double eps, ag__strict *out);

/* ag__loss_noise's estimate from any samples: f[0..n) the loss at equal
 * steps of about 1e-7 along a line.  ag__noise_add adds their third
 * differences' squares and count into sum_count[2]; ag__noise_sigma turns
 * them into sigma (at least the rounding of a loss of l0). */
void ag__noise_add(const double *f, int n, double *sum_count);
double ag__noise_sigma(const double *sum_count, double l0);

/* The loss node, built afresh: g reset, its stream rewound (gradcheck.c). */
ag_status ag__build_loss(const ag__probe *p, ag_tensor **loss);

/* Directions: element j of a tensor's direction is a random sign times a
 * scale, ag__rms of the tensor's values: the root mean square of its
 * finite values (1 when that is 0); 0 where a value is not finite. */
double ag__rms(const ag_real *x, size_t n);
static inline double ag__sign(ag_rng *r) { return (ag_rng_next(r) >> 63) ? 1.0 : -1.0; }

/* A kink of phi at 0 itself (not merely within the step), which no step
 * resolves: e[k] = phi(h/2^k) + phi(-h/2^k) - 2 phi(0), k = 0..2. */
bool ag__kink_here(const double e[3], double h, double sigma);

#endif
