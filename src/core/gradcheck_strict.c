/* gradcheck_strict.c: the gradient checker's strict stage, a numeric
 * derivative with a tolerance derived from its own measured error.
 *
 * The central difference with step s has a truncation error and a rounding
 * error:
 *   D(s) = (L(x + s) - L(x - s)) / 2s = L' + L''' s^2/6 + L^(5) s^4/120 + ...
 *                                        + (e_+ - e_-) / 2s
 * where e_+-, the rounding errors of the two losses, are about sigma each.
 * Richardson extrapolation cancels the s^2 term:
 *   R1 = (4 D(h/2) - D(h)) / 3,   R2 = (4 D(h/4) - D(h/2)) / 3
 * both L' + O(s^4); R2's truncation error is a 16th of R1's, so |R1 - R2|
 * (15 times R2's truncation error, plus rounding) bounds it.  With the six
 * losses' errors independent, R2's rounding error has the standard
 * deviation sqrt(130)/3 sigma/h (each D(h/2^k) contributes 2^(2k)/2
 * (sigma/h)^2, weighted by 4/3 and 1/3).  Element i passes when
 *   |analytic - R2| <= SIGMAS sqrt(130)/3 sigma/h + |R1 - R2|.
 * sigma is measured once per check (ag__loss_noise), so that nothing in
 * the tolerance is chosen to fit an op.
 *
 * A kink or a jump of L within h (relu at 0, a max changing hands) breaks
 * the series, and |R1 - R2| no longer bounds R2's error: then R2 disagrees
 * with stage one's D(eps), whose step is a thousand times smaller, by more
 * than both estimates' errors.  Such an
 * element is `rough`: counted and reported, not judged (the op cases stay
 * off kinks, and ag_op_check fails a case with a rough element). */
#include "core/gradcheck.h"

#include <float.h>
#include <math.h>

/* Standard deviations of rounding noise the tolerance allows.  The noise
 * of a sum of many rounding errors is close to Gaussian, for which 8
 * deviations happen with probability 1e-15 per element. */
#define SIGMAS 8.0

/* The noise estimate follows Moré and Wild ("Estimating computational
 * noise", SIAM J. Sci. Comput. 2011): along a direction v of random signs,
 * f_j = L(x + j t v), j = 0..8, t = 1e-7 max(1, |x|).  For a smooth L the
 * third difference f_{j+3} - 3 f_{j+2} + 3 f_{j+1} - f_j is t^3 (v.grad)^3 L,
 * near 1e-21: what remains is rounding, of variance (1 + 9 + 9 + 1) sigma^2.
 * So sigma^2 = mean(difference^2) / 20, over 6 differences in each of 4
 * directions.  A loss whose rounding does not move with x (x / x is 1
 * exactly) measures 0, but its value is still rounded once: sigma is at
 * least u |L| / sqrt(3), the deviation of a rounding error spread evenly
 * over half an ulp either side (u = 2^-53, the unit roundoff).  The
 * analytic gradient's own rounding error, u times its terms, stays below
 * the tolerance that this sigma gives: SIGMAS sqrt(130)/3 sigma/h is some
 * 10^4 u |L| at h = 1e-3. */
#define NOISE_DIRS 4
#define NOISE_POINTS 9

/* Every element of the n inputs moved to x + j t v, v's signs from r. */
static void move_along(ag_tensor *const *in, int n, const ag_real *keep, uint64_t dir, int j)
{
    ag_rng r;
    ag_rng_seed(&r, 0x401eull + dir);
    size_t at = 0;
    for (int k = 0; k < n; k++)
        for (size_t e = 0; e < in[k]->size; e++, at++) {
            double v = (ag_rng_next(&r) & 1) ? 1 : -1, t = 1e-7 * fmax(1, fabs((double)keep[at]));
            in[k]->data[e] = (ag_real)((double)keep[at] + j * t * v);
        }
}

ag_status ag__loss_noise(const ag__probe *p, ag_tensor *const *in, int n, ag_real *keep, double *sigma)
{
    for (size_t k = 0, at = 0; k < (size_t)n; at += in[k]->size, k++)
        memcpy(keep + at, in[k]->data, in[k]->size * sizeof(ag_real));
    double sum_count[2] = {0, 0}, l0 = 0;
    ag_status st = AG_OK;
    for (uint64_t dir = 0; dir < NOISE_DIRS && st == AG_OK; dir++) {
        double f[NOISE_POINTS];
        for (int j = 0; j < NOISE_POINTS && st == AG_OK; j++) {
            move_along(in, n, keep, dir, j);
            st = ag__probe_loss(p, &f[j]);
        }
        l0 = f[0];
        if (st == AG_OK) ag__noise_add(f, NOISE_POINTS, sum_count);
    }
    for (size_t k = 0, at = 0; k < (size_t)n; at += in[k]->size, k++)
        memcpy(in[k]->data, keep + at, in[k]->size * sizeof(ag_real));
    *sigma = ag__noise_sigma(sum_count, l0);
    return st;
}

ag_status ag__strict_element(const ag__probe *p, ag_tensor *x, size_t i, double h, double sigma,
                             double d_eps, double eps, ag__strict *out)
{
    ag_real keep = x->data[i];
    double d[3]; /* D(h), D(h/2), D(h/4), each over the step actually taken */
    for (int k = 0; k < 3; k++) {
        double s = h / (1 << k), lp, lm;
        ag_real a = (ag_real)(keep + s), b = (ag_real)(keep - s);
        ag_status st = ag__probe_loss_at(p, x, i, a, &lp);
        if (st == AG_OK) st = ag__probe_loss_at(p, x, i, b, &lm);
        if (st != AG_OK) return st;
        d[k] = (lp - lm) / ((double)a - (double)b);
    }
    ag__strict_from(d, h, sigma, d_eps, eps, out);
    return AG_OK;
}

void ag__strict_from(const double d[3], double h, double sigma, double d_eps, double eps, ag__strict *out)
{
    double r1 = (4 * d[1] - d[0]) / 3, r2 = (4 * d[2] - d[1]) / 3, spread = fabs(r1 - r2);
    out->numeric = r2;
    out->spread = spread;
    out->tol = SIGMAS * sqrt(130.0) / 3 * sigma / h + spread;
    /* Stage one's D(eps) against R2.  R2's truncation error is |R1 - R2|/15
     * (doubled below, for the series' next terms); D(eps)'s is
     * L3 eps^2/6 (L3 = L'''), where D(h) - D(h/2) = L3 h^2/8 gives L3;
     * the rounding error of the difference has deviation
     * sigma sqrt(130/9 h^-2 + 1/2 eps^-2).  A kink between eps and h moves
     * R2 (and R1) by a fraction of the slope's jump, far beyond. */
    double trunc_eps = 4.0 / 3 * fabs(d[0] - d[1]) * (eps / h) * (eps / h);
    double noise = sigma * sqrt(130.0 / 9 / (h * h) + 0.5 / (eps * eps));
    out->rough = fabs(r2 - d_eps) > SIGMAS * noise + 2 * spread / 15 + trunc_eps;
}

void ag__noise_add(const double *f, int n, double *sum_count)
{
    for (int j = 0; j + 3 < n; j++) {
        double d3 = f[j + 3] - 3 * f[j + 2] + 3 * f[j + 1] - f[j];
        sum_count[0] += d3 * d3, sum_count[1] += 1;
    }
}

double ag__noise_sigma(const double *sum_count, double l0)
{
    double measured = sum_count[1] ? sqrt(sum_count[0] / sum_count[1] / 20) : 0;
    double floor = DBL_EPSILON / 2 * fabs(l0) / sqrt(3);
    return isnan(measured) || measured > floor ? measured : floor; /* a NaN stays */
}

double ag__rms(const ag_real *x, size_t n)
{
    double sum = 0;
    size_t count = 0;
    for (size_t j = 0; j < n; j++)
        if (isfinite((double)x[j])) sum += (double)x[j] * (double)x[j], count++;
    double r = count ? sqrt(sum / (double)count) : 0;
    return r > 0 ? r : 1;
}

bool ag__kink_here(const double e[3], double h, double sigma)
{
    /* e[k] = phi(t) + phi(-t) - 2 phi(0), t = h / 2^k: phi'' t^2 + O(t^4)
     * where phi is smooth, so e / t halves with t; a kink at the point
     * itself (a relu's input exactly 0) gives |jump| t, so e / t stays.
     * Each e has rounding noise of deviation sqrt(6) sigma. */
    double j1 = fabs(e[1]) / (h / 2), j2 = fabs(e[2]) / (h / 4), noise = SIGMAS * sqrt(6.0) * sigma / (h / 4);
    return j2 > noise && j2 > 0.75 * j1;
}
