/* kernels/elementwise.c: the fast kernels of the element-wise ops.
 *
 * Each op of ops/ is its scalar math, and runs as plain loops over it in
 * the reference mode.  Here are the same functions as loops that the
 * compiler vectorises, in blocks of 16 (core/blocks.h), each compiled once
 * per instruction set (AG_ISA_CLONES) so that it is as wide as the CPU's
 * vectors; and, in the float build, the vectorised exp, log, tanh and GELU
 * (kernels/fastmath.c).  The table at the end is the one way in: an op
 * with an entry runs it when ag__fast().
 *
 * Every kernel gives its reference's values: exactly, where it computes
 * the same expression element by element (the build has one rounding per
 * operation, -ffp-contract=off, in every clone); within the stated ulps
 * for the fast exp, log, tanh and GELU. */

/* Let the compiler turn the selects below (relu's) into vector blends:
 * nothing here reads the floating-point exception flags, which is all that
 * -ftrapping-math protects (before core/blocks.h, whose loops must be
 * compiled with the same options). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include "core/blocks.h"
#include "core/elementwise.h"
#include "kernels/kernels.h"

#include <math.h>

/* ---- binary: add, sub, mul, div ------------------------------------------ */

static inline ag_real plus(ag_real a, ag_real b) { return a + b; }
static inline ag_real minus(ag_real a, ag_real b) { return a - b; }
static inline ag_real times(ag_real a, ag_real b) { return a * b; }
static inline ag_real over(ag_real a, ag_real b) { return a / b; }

AG_ISA_ZIP(add_fwd, plus)
AG_ISA_ZIP(sub_fwd, minus)
AG_ISA_ZIP(mul_fwd, times)
AG_ISA_ZIP(div_fwd, over)

/* Rows of y = a + b (ag_binary_rows: row r at a + r ra, b + r rb; a bias
 * has row stride 0), all in one clone per instruction set: a [R, C] + [C]
 * pays the dispatch once, not once per row. */
#define ADD_ROWS_PARAMS (size_t rows, size_t n, const ag_real *a, size_t ra, const ag_real *b, size_t rb, ag_real *y)
static inline AG_ALWAYS_INLINE void add_rows_loop ADD_ROWS_PARAMS
{
    for (size_t r = 0; r < rows; r++) ag__zip(n, a + r * ra, b + r * rb, y + r * n, plus);
}
AG_ISA_CLONES(void, add_rows_loop, ADD_ROWS_PARAMS, add_rows_loop(rows, n, a, ra, b, rb, y))
static void add_rows ADD_ROWS_PARAMS { AG_ISA_CALL(add_rows_loop, (rows, n, a, ra, b, rb, y)); }

/* dx[i] += dy[i], compiled once per instruction set, the same bits on
 * every level */
static inline AG_ALWAYS_INLINE void add_into(size_t n, const ag_real *dy, ag_real *dx)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] += dy[i];
}
AG_ISA_CLONES(void, add_into, (size_t n, const ag_real *dy, ag_real *dx), add_into(n, dy, dx))

void ag__grad_pass(size_t n, const ag_real *dy, ag_real *d, bool fresh)
{
    if (fresh) memcpy(d, dy, n * sizeof *d);
    else AG_ISA_CALL(add_into, (n, dy, d));
}

/* d_i (+)= dy_i at stride s: a fresh d (stride 1) is a copy of dy. */
static void pass_on(size_t n, const ag_real *dy, ag_real *d, size_t s, bool fresh)
{
    if (fresh || s == 1)
        ag__grad_pass(n, dy, d, fresh);
    else
        for (size_t i = 0; i < n; i++) d[i * s] += dy[i];
}

static void add_bwd(size_t n, const ag_real *a, size_t sa, const ag_real *b, size_t sb, const ag_real *y,
                    const ag_real *dy, ag_real *da, bool fa, ag_real *db, bool fb)
{
    (void)a, (void)b, (void)y;
    if (da) pass_on(n, dy, da, sa, fa);
    if (db) pass_on(n, dy, db, sb, fb);
}

static void sub_bwd(size_t n, const ag_real *a, size_t sa, const ag_real *b, size_t sb, const ag_real *y,
                    const ag_real *dy, ag_real *da, bool fa, ag_real *db, bool fb)
{
    (void)a, (void)b, (void)y;
    if (da)
        for (size_t i = 0; i < n; i++) da[i * sa] = fa ? dy[i] : da[i * sa] + dy[i];
    if (db)
        for (size_t i = 0; i < n; i++) db[i * sb] = fb ? -dy[i] : db[i * sb] - dy[i];
}

/* d_i += u_i v_i for i < n, or d_i = u_i v_i where `fresh`, in blocks of
 * 16, one clone per instruction set (no multiply-add fuses: the same bits
 * in each). */
#define MAC_PARAMS (size_t n, const ag_real *u, const ag_real *v, ag_real *d, bool fresh)
static inline AG_ALWAYS_INLINE void mac MAC_PARAMS
{
    ag_real t[AG_BLOCK];
    size_t i = 0;
    for (; i + AG_BLOCK <= n; i += AG_BLOCK) {
        if (fresh)
            for (int l = 0; l < AG_BLOCK; l++) t[l] = u[i + l] * v[i + l];
        else
            for (int l = 0; l < AG_BLOCK; l++) t[l] = d[i + l] + u[i + l] * v[i + l];
        memcpy(d + i, t, sizeof t);
    }
    for (; i < n; i++) d[i] = fresh ? u[i] * v[i] : d[i] + u[i] * v[i];
}
AG_ISA_CLONES(void, mac, MAC_PARAMS, mac(n, u, v, d, fresh))

static void mul_bwd(size_t n, const ag_real *a, size_t sa, const ag_real *b, size_t sb, const ag_real *y,
                    const ag_real *dy, ag_real *da, bool fa, ag_real *db, bool fb)
{
    (void)y;
    if (sa == 1 && sb == 1) {
        if (da) AG_ISA_CALL(mac, (n, dy, b, da, fa));
        if (db) AG_ISA_CALL(mac, (n, dy, a, db, fb));
        return;
    }
    if (da)
        for (size_t i = 0; i < n; i++) da[i * sa] += dy[i] * b[i * sb];
    if (db)
        for (size_t i = 0; i < n; i++) db[i * sb] += dy[i] * a[i * sa];
}

/* -a / b^2 written (a / b) / b, so that b * b cannot overflow */
static void div_bwd(size_t n, const ag_real *a, size_t sa, const ag_real *b, size_t sb, const ag_real *y,
                    const ag_real *dy, ag_real *da, bool fa, ag_real *db, bool fb)
{
    (void)y;
    if (da)
        for (size_t i = 0; i < n; i++) {
            ag_real v = dy[i] / b[i * sb];
            da[i * sa] = fa ? v : da[i * sa] + v;
        }
    if (db)
        for (size_t i = 0; i < n; i++) {
            ag_real v = dy[i] * (a[i * sa] / b[i * sb] / b[i * sb]);
            db[i * sb] = fb ? -v : db[i * sb] - v;
        }
}

/* ---- unary: exp, log, sqrt, tanh, relu ----------------------------------- */

/* The float build's exp, log and tanh are kernels/fastmath.c's; the double
 * build's are libm's, as the references'. */
#ifdef AG_DOUBLE
#define LIBM_FWD(name)                                                                        \
    static void name##_fwd(size_t n, const ag_real *x, ag_real *y, const double *farg)        \
    {                                                                                         \
        (void)farg;                                                                           \
        for (size_t i = 0; i < n; i++) y[i] = name(x[i]);                                     \
    }
#else
#define LIBM_FWD(name)                                                                        \
    static void name##_fwd(size_t n, const ag_real *x, ag_real *y, const double *farg)        \
    {                                                                                         \
        (void)farg;                                                                           \
        ag__##name##_floats(n, x, y);                                                         \
    }
#endif
LIBM_FWD(exp)
LIBM_FWD(log)
LIBM_FWD(tanh)

#ifdef AG_DOUBLE
static inline ag_real sqrt_of(ag_real x) { return sqrt(x); }
#else
static inline ag_real sqrt_of(ag_real x) { return sqrtf(x); }
#endif
/* written x < 0 (not x > 0) so that a NaN is kept, not turned into 0 */
static inline ag_real relu_of(ag_real x) { return x < 0 ? 0 : x; }
AG_ISA_MAP(sqrt_map, sqrt_of)
AG_ISA_MAP(relu_map, relu_of)

static void sqrt_fwd(size_t n, const ag_real *x, ag_real *y, const double *farg)
{
    (void)farg;
    sqrt_map(n, x, y);
}
static void relu_fwd(size_t n, const ag_real *x, ag_real *y, const double *farg)
{
    (void)farg;
    relu_map(n, x, y);
}

/* dx_i (+)= g(x_i, y_i, dy_i), ops/<name>.c's dy_i * df(x_i, y_i) */
static inline ag_real exp_dx(ag_real x, ag_real y, ag_real dy) { return (void)x, dy * y; }
static inline ag_real log_dx(ag_real x, ag_real y, ag_real dy) { return (void)y, dy / x; }
static inline ag_real sqrt_dx(ag_real x, ag_real y, ag_real dy) { return (void)x, dy / (2 * y); }
static inline ag_real tanh_dx(ag_real x, ag_real y, ag_real dy) { return (void)x, dy * (1 - y * y); }
static inline ag_real relu_dx(ag_real x, ag_real y, ag_real dy) { return (void)y, x > 0 ? dy : 0; }
AG_ISA_MAP_GRAD(exp_grad, exp_dx)
AG_ISA_MAP_GRAD(log_grad, log_dx)
AG_ISA_MAP_GRAD(sqrt_grad, sqrt_dx)
AG_ISA_MAP_GRAD(tanh_grad, tanh_dx)
AG_ISA_MAP_GRAD(relu_grad, relu_dx)

#define GRAD_BWD(name)                                                                        \
    static void name##_bwd(size_t n, const ag_real *x, const ag_real *y, const ag_real *dy, ag_real *dx, \
                           bool fresh, const double *farg)                                    \
    {                                                                                         \
        (void)farg;                                                                           \
        name##_grad(n, x, y, dy, dx, fresh);                                                  \
    }
GRAD_BWD(exp)
GRAD_BWD(log)
GRAD_BWD(sqrt)
GRAD_BWD(tanh)
GRAD_BWD(relu)

/* ---- GELU, both forms: the slope kept by the forward ---------------------- */

#ifdef AG_DOUBLE
/* C11 has no M_SQRT1_2 or M_PI (they are POSIX/XSI extensions). */
#define SQRT1_2 0.70710678118654752440       /* 1 / sqrt(2) */
#define INV_SQRT_2PI 0.39894228040143267794  /* 1 / sqrt(2 pi) */
#define SQRT_2_OVER_PI 0.79788456080286535588 /* sqrt(2 / pi) */
#define COEF 0.044715

/* y = x Phi(x), s = Phi(x) + x phi(x); Phi(x) = 0.5 erfc(-x / sqrt 2)
 * where x < 0, as ops/gelu.c (1 + erf cancels to 0 in the tail) */
static void gelu_fwd(size_t n, const ag_real *x, ag_real *y, ag_real *s)
{
    for (size_t i = 0; i < n; i++) {
        double e = erf(x[i] * SQRT1_2), p = x[i] >= 0 ? 0.5 * (1 + e) : 0.5 * erfc(-x[i] * SQRT1_2);
        y[i] = x[i] >= 0 ? x[i] * 0.5 * (1 + e) : x[i] * p;
        if (s) s[i] = p + x[i] * (exp(-0.5 * x[i] * x[i]) * INV_SQRT_2PI);
    }
}

/* y = x h, h = 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)), u = k (x + c x^3);
 * s = h + x 2 h (1 - h) k (1 + 3 c x^2) */
static void gelu_tanh_fwd(size_t n, const ag_real *x, ag_real *y, ag_real *s)
{
    for (size_t i = 0; i < n; i++) {
        double v = x[i], u = SQRT_2_OVER_PI * (v + COEF * v * v * v), h = 1 / (1 + exp(-2 * u));
        y[i] = v * h;
        if (s) s[i] = h + v * 2 * h * (1 - h) * (SQRT_2_OVER_PI * (1 + 3 * COEF * v * v));
    }
}
#else
static void gelu_fwd(size_t n, const ag_real *x, ag_real *y, ag_real *s)
{
    if (s) ag__gelu_slope_floats(n, x, y, s);
    else ag__gelu_floats(n, x, y);
}
static void gelu_tanh_fwd(size_t n, const ag_real *x, ag_real *y, ag_real *s)
{
    if (s) ag__gelu_tanh_slope_floats(n, x, y, s);
    else ag__gelu_tanh_floats(n, x, y);
}
#endif

/* dx (+)= dy * s over n elements, one clone per instruction set (GELU's
 * backward from its kept slope: src/core/unary.c, ops/linear_gelu.c) */
#define SLOPE_PARAMS (size_t n, const ag_real *dy, const ag_real *s, ag_real *dx, bool fresh)
AG_INLINE void slope_loop SLOPE_PARAMS
{
    if (fresh) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) dx[i] = dy[i] * s[i];
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) dx[i] += dy[i] * s[i];
    }
}
AG_ISA_CLONES(void, slope_loop, SLOPE_PARAMS, slope_loop(n, dy, s, dx, fresh))
void ag__k_slope_mul(size_t n, const ag_real *dy, const ag_real *s, ag_real *dx, bool fresh)
{
    AG_ISA_CALL(slope_loop, (n, dy, s, dx, fresh));
}

/* GELU in place, y = gelu(y), s its slope where s is not NULL: the
 * forward's kernel (gelu_fwd) on y as its own input, a block at a time so
 * that each block is read before it is written. */
typedef struct gelu_job {
    size_t n;
    ag_real *y, *s;
    int nt;
} gelu_job;
static void gelu_piece(void *ctx, size_t t)
{
    const gelu_job *j = ctx;
    size_t i0 = ag__piece(j->n, (int)t, j->nt), i1 = ag__piece(j->n, (int)t + 1, j->nt);
    ag_real x[256];
    for (size_t i = i0; i < i1; i += 256) {
        size_t m = i1 - i < 256 ? i1 - i : 256;
        memcpy(x, j->y + i, m * sizeof *x);
        gelu_fwd(m, x, j->y + i, j->s ? j->s + i : NULL);
    }
}
bool ag__k_gelu_in_place(size_t n, ag_real *y, ag_real *s)
{
    gelu_job j = {n, y, s, ag__threads_for(n)};
    ag__parallel_for((size_t)j.nt, j.nt, gelu_piece, &j);
    return true;
}

/* ---- the table ------------------------------------------------------------- */

static const ag__unary_kernel unary[AG_OP_COUNT] = {
    [AG_OP_EXP] = {exp_fwd, exp_bwd, NULL},
    [AG_OP_LOG] = {log_fwd, log_bwd, NULL},
    [AG_OP_SQRT] = {sqrt_fwd, sqrt_bwd, NULL},
    [AG_OP_TANH] = {tanh_fwd, tanh_bwd, NULL},
    [AG_OP_RELU] = {relu_fwd, relu_bwd, NULL},
    [AG_OP_GELU] = {NULL, NULL, gelu_fwd},
    [AG_OP_GELU_TANH] = {NULL, NULL, gelu_tanh_fwd},
};

static const ag__binary_kernel binary[AG_OP_COUNT] = {
    [AG_OP_ADD] = {add_fwd, add_bwd, add_rows},
    [AG_OP_SUB] = {sub_fwd, sub_bwd, NULL},
    [AG_OP_MUL] = {mul_fwd, mul_bwd, NULL},
    [AG_OP_DIV] = {div_fwd, div_bwd, NULL},
};

const ag__unary_kernel *ag__unary_kernel_of(int op)
{
    if (op <= 0 || op >= AG_OP_COUNT) return NULL;
    const ag__unary_kernel *k = &unary[op];
    return k->fwd || k->fwd_slope ? k : NULL;
}

const ag__binary_kernel *ag__binary_kernel_of(int op)
{
    if (op <= 0 || op >= AG_OP_COUNT) return NULL;
    return binary[op].fwd ? &binary[op] : NULL;
}
