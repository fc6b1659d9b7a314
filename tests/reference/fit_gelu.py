"""Fits the two approximations of the float GELU kernel (src/core/fastmath.c).

    /usr/bin/python3 tests/reference/fit_gelu.py

prints the float coefficients of normal_cdf_f's tables (mills_t, mills_s)
and phi_2p64's (gauss_c), and the largest relative error of each fit
(in double, before the coefficients are rounded to float).  Only numpy
and Python's math module: the references are math.erfc and math.exp in
double.

Both fits are minimax of the relative error, by Lawson's algorithm: a
least-squares fit weighted by w, and w multiplied by the error at each
step, so that the weight gathers where the error peaks (300 steps).

1. The Mills ratio of the standard normal, M(a) = (1 - Phi(a)) / phi(a)
   = erfc(a / sqrt 2) e^(a^2/2) sqrt(pi / 2), on a in [0, 14.5] (beyond,
   Phi(-a) is below float's range), as
       M(a) = 1 / (a + S(a) / T(a)) = T(a) / (a T(a) + S(a)),
   T monic of degree 4, S of degree 3: then M(a) ~ 1/a for large a, as
   the true ratio, and all coefficients are positive.  The fit is
   linearised as S - g T = 0 with g = 1/M - a, weighted so that the
   residual reads as the relative error of M, and T taken from the
   previous step (the Sanathanan-Koerner iteration).

2. e^(-r/2) / sqrt(2 pi) = k - (k/2) r + r^2 G(r), |r| <= 0.7 (the
   reduced argument is within ln 2 and a rounding), G of degree 3, with
   k = 1/sqrt(2 pi) and k/2 rounded to float first (they are the last two
   Horner steps' addends; k's rounding alone is an error of 2.8e-8).
"""
import math

import numpy as np


def lawson(design, target, weight_of_residual, steps=300):
    """c minimising max |(design c - target) * weight_of_residual|."""
    w = np.full(len(target), 1.0 / len(target))
    best = None
    for _ in range(steps):
        sw = np.sqrt(w) * weight_of_residual
        c, *_ = np.linalg.lstsq(design * sw[:, None], target * sw, rcond=None)
        err = np.abs(design @ c - target) * weight_of_residual
        if best is None or err.max() < best[0]:
            best = (err.max(), c)
        w = w * (err + 1e-300)
        w /= w.sum()
    return best


def fit_mills():
    a = 14.5 * np.linspace(0, 1, 20000) ** 1.3
    mills = np.array([math.erfc(v / math.sqrt(2)) * math.exp(v * v / 2) * math.sqrt(math.pi / 2) for v in a])
    g = 1 / mills - a
    t = np.ones_like(a)
    w = np.full(len(a), 1.0 / len(a))
    best = None
    for _ in range(300):
        # S(a) - g(a) (T(a) - a^4) = g(a) a^4; unknowns s0..s3, t0..t3 (a^0 first),
        # the residual divided by T (a + g): the relative error of M
        design = np.hstack([np.vander(a, 4, increasing=True), -g[:, None] * np.vander(a, 4, increasing=True)])
        sw = np.sqrt(w) / (t * (a + g))
        c, *_ = np.linalg.lstsq(design * sw[:, None], g * a**4 * sw, rcond=None)
        s, tt = c[:4], np.concatenate([c[4:], [1.0]])
        t = np.polyval(tt[::-1], a)
        m = 1 / (a + np.polyval(s[::-1], a) / t)
        err = np.abs(m - mills) / mills
        if best is None or err.max() < best[0]:
            best = (err.max(), s, tt)
        w = w * (err + 1e-300)
        w /= w.sum()
    return best


def fit_gauss():
    r = 0.7 * np.cos(np.linspace(0, math.pi, 4000))
    k = float(np.float32(1 / math.sqrt(2 * math.pi)))
    k2 = float(np.float32(k / 2))
    f = np.exp(-r / 2) / math.sqrt(2 * math.pi)
    # r^2 G(r) = f - k + k2 r, G of degree 3 (highest first)
    design = np.vander(r, 4) * (r * r)[:, None]
    err, c = lawson(design, f - k + k2 * r, 1 / f)
    return err, c, k, k2


def floats(cs):
    return ", ".join("%.9ef" % np.float32(v) for v in cs)


if __name__ == "__main__":
    err, s, t = fit_mills()
    print("Mills ratio T / (a T + S): largest relative error %.2e" % err)
    print("  mills_t (T's a^4 .. a^0: 1, then):", floats(t[:4][::-1]))
    print("  mills_s (a^3 .. a^0 of S):", floats(s[::-1]))
    err, c, k, k2 = fit_gauss()
    print("e^(-r/2) / sqrt(2 pi): largest relative error %.2e" % err)
    print("  gauss_c (r^3 .. r^0 of G):", floats(c))
    print("  k, k/2:", floats([k, k2]))
