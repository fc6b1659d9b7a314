/* ops/gelu_tanh.c: y = gelu_tanh(x), element-wise: GELU's tanh
 * approximation, the activation of GPT-2 (PyTorch's nn.GELU(approximate="tanh")).
 *
 *   x [...] -> y [...]
 *
 * With k = sqrt(2 / pi) and c = 0.044715:
 *   u = k (x + c x^3),   t = tanh(u)
 * forward:  y[i] = 0.5 x (1 + t);  when y requires grad, also
 *           d[i] = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)   (= dy[i] / dx[i])
 * backward: dx[i] += dy[i] * d[i]
 *
 * aux = d, one value per element, kept only when y requires grad (never in
 * no-grad mode): it comes from the forward's exp, so that backward is one
 * pass.  grad_in_place: backward may give x and y one gradient buffer,
 * which then turns from dy into dx in place (src/core/graph.c).
 *
 * Computed through the logistic function s = 1 / (1 + exp(-2u)), since
 *   0.5 (1 + tanh(u)) = s   and   0.5 (1 - tanh(u)^2) = 2 s (1 - s):
 * one exp instead of libm's tanh (several times slower), and no
 * cancellation where 1 + t is tiny (x very negative: exp(-2u) overflows to
 * inf and s to 0, as it should).  The double build agrees with
 * torch.float64 to rounding (tests/test_parity_options.c, 1e-9); the float
 * build runs the same form in float, vectorised (src/kernels/fastmath.c,
 * tests/test_fastmath.c).
 *
 * It differs from the erf form (ops/gelu.c) by at most about 5e-4; a model
 * trained with one should be run with the same one. */
#include "core/internal.h"

#include <math.h>

#define SQRT_2_OVER_PI 0.79788456080286535588 /* sqrt(2 / pi) */
#define COEF 0.044715

#ifdef AG_DOUBLE
/* s = 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)), u = k (x + c x^3) */
static inline double half_one_plus_tanh(double x)
{
    double u = SQRT_2_OVER_PI * (x + COEF * x * x * x);
    return 1 / (1 + exp(-2 * u));
}
#endif

/* y = x s, s = 0.5 (1 + tanh(u)):
 *   dy/dx = s                          (the factor x differentiated)
 *         + x * 2 s (1 - s) * du/dx    (ds/du = 0.5 tanh'(u) = 0.5 (1 - t^2) = 2 s (1 - s))
 *   du/dx = k (1 + 3 c x^2)
 * computed beside y, when d is not NULL: in training, where backward will
 * need it.  The float build takes the vectorised kernel
 * (src/kernels/fastmath.c, within 3 ulp of this double form, the slope
 * within 6 ulp of its terms); the double build is this form. */
static void gelu_tanh_fwd(size_t n, const ag_real *x, ag_real *y, ag_real *d)
{
#ifdef AG_DOUBLE
    for (size_t i = 0; i < n; i++) {
        double v = x[i], s = half_one_plus_tanh(v);
        y[i] = v * s;
        if (d) d[i] = s + v * 2 * s * (1 - s) * (SQRT_2_OVER_PI * (1 + 3 * COEF * v * v));
    }
#else
    if (d) ag__gelu_tanh_slope_floats(n, x, y, d);
    else ag__gelu_tanh_floats(n, x, y);
#endif
}

ag_tensor *ag_gelu_tanh(ag_graph *g, ag_tensor *x) { return ag__unary_slope(g, AG_OP_GELU_TANH, x, gelu_tanh_fwd); }

/* dx += dy * d, from the slope the forward kept; in place (dy's buffer
 * becomes dx's) where backward gave y and x one buffer */
static void gelu_tanh_backward(ag_graph *g, ag_tensor *y) { ag__unary_slope_backward(g, y); }

static ag_tensor *case_gelu_tanh(ag_graph *g, ag_tensor *const *in) { return ag_gelu_tanh(g, in[0]); }

static const ag_op_case cases[] = {
    {"gelu_tanh [3, 4]", 1, {2}, {{3, 4}}, -4, 4, 0, case_gelu_tanh},
    {"gelu_tanh [2, 1, 3] size-1", 1, {3}, {{2, 1, 3}}, -4, 4, 0, case_gelu_tanh},
    {"gelu_tanh [] scalar", 1, {0}, {{0}}, -4, 4, 0, case_gelu_tanh},
};

const ag_op_desc ag_op_gelu_tanh = {.name = "gelu_tanh", .backward = gelu_tanh_backward, .grad_in_place = true,
                                    AG_CASES(cases)};
