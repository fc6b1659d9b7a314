/* ops/gelu_tanh.c: y = gelu_tanh(x), element-wise: GELU's tanh
 * approximation, the activation of GPT-2 (PyTorch's nn.GELU(approximate="tanh")).
 *
 *   x [...] -> y [...]
 *
 * With k = sqrt(2 / pi) and c = 0.044715:
 *   u = k (x + c x^3),   t = tanh(u)
 * forward:  y[i] = 0.5 x (1 + t)
 * backward: dx[i] += dy[i] * (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2))
 *
 * It differs from the erf form (ops/gelu.c) by at most about 5e-4; a model
 * trained with one should be run with the same one.  Written in PyTorch's
 * order of operations, so the double build agrees with torch.float64 to the
 * last bit or two. */
#include "core/internal.h"

#include <math.h>

#define SQRT_2_OVER_PI 0.79788456080286535588 /* sqrt(2 / pi) */
#define COEF 0.044715

/* The float build computes in double and rounds. */
static void gelu_tanh_fwd(size_t n, const ag_real *x, ag_real *y, const double *farg)
{
    (void)farg;
    for (size_t i = 0; i < n; i++) {
        double v = x[i], u = SQRT_2_OVER_PI * (v + COEF * v * v * v);
        y[i] = (ag_real)(0.5 * v * (1 + tanh(u)));
    }
}

/* y = 0.5 x (1 + tanh(u)), u = k (x + c x^3):
 *   dy/dx = 0.5 (1 + t)                   (the factor x differentiated)
 *         + 0.5 x (1 - t^2) du/dx         (tanh' = 1 - tanh^2)
 *   du/dx = k (1 + 3 c x^2) */
static void gelu_tanh_bwd(size_t n, const ag_real *x, const ag_real *y, const ag_real *dy, ag_real *dx,
                          const double *farg)
{
    (void)y, (void)farg;
    for (size_t i = 0; i < n; i++) {
        double v = x[i], u = SQRT_2_OVER_PI * (v + COEF * v * v * v), t = tanh(u);
        double du = SQRT_2_OVER_PI * (1 + 3 * COEF * v * v);
        dx[i] += (ag_real)(dy[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * du));
    }
}

ag_tensor *ag_gelu_tanh(ag_graph *g, ag_tensor *x) { return ag__unary(g, AG_OP_GELU_TANH, x, gelu_tanh_fwd, 0); }

static void gelu_tanh_backward(ag_graph *g, ag_tensor *y) { ag__unary_backward(g, y, gelu_tanh_bwd); }

static ag_tensor *case_gelu_tanh(ag_graph *g, ag_tensor *const *in) { return ag_gelu_tanh(g, in[0]); }

static const ag_op_case cases[] = {
    {"gelu_tanh [3, 4]", 1, {2}, {{3, 4}}, -4, 4, 0, case_gelu_tanh},
    {"gelu_tanh [2, 1, 3] size-1", 1, {3}, {{2, 1, 3}}, -4, 4, 0, case_gelu_tanh},
    {"gelu_tanh [] scalar", 1, {0}, {{0}}, -4, 4, 0, case_gelu_tanh},
};

const ag_op_desc ag_op_gelu_tanh = {.name = "gelu_tanh", .backward = gelu_tanh_backward, AG_CASES(cases)};
