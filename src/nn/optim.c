/* optim.c: SGD, Adam and AdamW over a parameter store; gradient clipping;
 * learning-rate schedules.  The semantics are PyTorch's (torch.optim.SGD,
 * Adam, AdamW with dampening 0, amsgrad and maximize off, and
 * torch.nn.utils.clip_grad_norm_), so a run can be checked against it
 * number for number (tests/reference/make_optim_fixtures.py).
 *
 * For a parameter p with gradient grad, at step t = 1, 2, ... :
 *
 *   SGD (lr, momentum mu, weight decay wd, nesterov):
 *     g   = grad + wd * p
 *     buf = mu * buf + g                  (PyTorch: buf = g on the first step;
 *                                          buf starts at 0, which is the same)
 *     g   = nesterov ? g + mu * buf : buf (only when mu > 0)
 *     p   = p - lr * g
 *
 *   Adam (lr, b1, b2, eps, wd):
 *     g    = grad + wd * p                (L2 penalty folded into the gradient)
 *     m    = b1 * m + (1 - b1) * g
 *     v    = b2 * v + (1 - b2) * g^2
 *     mhat = m / (1 - b1^t),  vhat = v / (1 - b2^t)
 *     p    = p - lr * mhat / (sqrt(vhat) + eps)     (eps outside the sqrt)
 *   computed as PyTorch does it:
 *     p    = p - (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 *
 *   AdamW: the decay is decoupled from the gradient (Loshchilov & Hutter):
 *     p    = p * (1 - lr * wd)            first, then Adam with g = grad.
 *
 * Invariant: every state buffer lives in the one block allocated with the
 * optimizer, sized for the store's parameters at that time; a step reads
 * and writes in place and never allocates.  State is stored as ag_real,
 * and the updates compute in it, as PyTorch computes on a tensor of that
 * type. */
#include "nn/nn_internal.h"
#include "attograd_optim.h"
#include "attograd_compat.h" /* defines the deprecated ag_optim_last_error */

#include <math.h>
#include <stdio.h>

enum { OPT_SGD, OPT_ADAM, OPT_ADAMW };
enum { ERR_LEN = 256 };

struct ag_optim {
    ag_store *store;
    int kind;    /* OPT_* */
    int nparams; /* store's parameter count when the optimizer was made */
    int nstate;  /* state buffers per parameter: 0, 1 or 2 */
    double lr, momentum, weight_decay, beta1, beta2, eps;
    int nesterov;
    int64_t steps;
    size_t *sizes;   /* [nparams] element count of each parameter */
    ag_real **state; /* [nparams * nstate] buffer `which` of param i at i * nstate + which */
    char err[ERR_LEN]; /* why the last call on this optimizer failed, "" if none */
};

/* Why a call failed.  The reason sticks to the object the call acted on:
 * the optimizer (ag_optim_error) for a step, the store (ag_store_error) for
 * a constructor or a clip; a schedule acts on none (ag_lr_schedule_check
 * takes the caller's buffer).  Each thread also keeps a copy of its own last
 * reason for the deprecated ag_optim_last_error(). */
static _Thread_local char last_err[ERR_LEN];

const char *ag_optim_last_error(void) { return last_err; }

const char *ag_optim_error(const ag_optim *o) { return o ? o->err : "optimizer is NULL"; }

ag_status ag__optim_fail(ag_optim *o, ag_store *s, ag_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ag__verrf(last_err, sizeof last_err, st, fmt, ap);
    va_end(ap);
    if (o) memcpy(o->err, last_err, sizeof o->err);
    if (s) ag__store_fail(s, st, "%s", last_err);
    return st;
}

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/* The optimizer, its size table, its pointer table and all state buffers in
 * one zero-filled allocation.  NULL (error set) on overflow or no memory. */
static ag_optim *optim_alloc(ag_store *s, const char *who, int nstate)
{
    int np = ag_store_count(s);
    const size_t align = sizeof(double) > sizeof(void *) ? sizeof(double) : sizeof(void *);
    size_t off_sizes = round_up(sizeof(ag_optim), align);
    size_t off_state = off_sizes + round_up((size_t)np * sizeof(size_t), align);
    size_t off_data = off_state + round_up((size_t)np * (size_t)nstate * sizeof(ag_real *), align);
    size_t total = off_data;
    for (int i = 0; i < np; i++) {
        size_t n = ag_store_at(s, i)->size;
        for (int w = 0; w < nstate; w++) {
            if (n > (SIZE_MAX - total) / sizeof(ag_real)) {
                ag__optim_fail(NULL, s, AG_ERR_NOMEM, "%s: state for %zu parameters does not fit in memory", who, ag_store_numel(s));
                return NULL;
            }
            total += n * sizeof(ag_real);
        }
    }
    unsigned char *block = ag__calloc(1, total);
    if (!block) {
        ag__optim_fail(NULL, s, AG_ERR_NOMEM, "%s: out of memory for %zu bytes of state", who, total);
        return NULL;
    }
    ag_optim *o = (ag_optim *)block;
    o->store = s;
    o->nparams = np;
    o->nstate = nstate;
    o->sizes = (size_t *)(block + off_sizes);
    o->state = (ag_real **)(block + off_state);
    ag_real *data = (ag_real *)(block + off_data);
    for (int i = 0; i < np; i++) {
        o->sizes[i] = ag_store_at(s, i)->size;
        for (int w = 0; w < nstate; w++) {
            o->state[i * nstate + w] = data;
            data += o->sizes[i];
        }
    }
    return o;
}

/* A hyperparameter that must be finite and >= 0; false (error set) if not. */
static bool nonneg(ag_store *s, const char *who, const char *what, double v)
{
    if (isfinite(v) && v >= 0) return true;
    ag__optim_fail(NULL, s, AG_ERR_ARG, "%s: %s = %g must be finite and >= 0", who, what, v);
    return false;
}

/* A beta that must lie in [0, 1); false (error set) if not. */
static bool unit(ag_store *s, const char *who, const char *what, double v)
{
    if (v >= 0 && v < 1) return true;
    ag__optim_fail(NULL, s, AG_ERR_ARG, "%s: %s = %g is outside [0, 1)", who, what, v);
    return false;
}

ag_optim *ag_sgd_new(ag_store *s, double lr, double momentum, double weight_decay, int nesterov)
{
    if (!s) {
        ag__optim_fail(NULL, NULL, AG_ERR_ARG, "sgd: store is NULL");
        return NULL;
    }
    if (!nonneg(s, "sgd", "lr", lr) || !nonneg(s, "sgd", "momentum", momentum) ||
        !nonneg(s, "sgd", "weight_decay", weight_decay))
        return NULL;
    if (nesterov && momentum == 0) {
        ag__optim_fail(NULL, s, AG_ERR_ARG, "sgd: nesterov needs momentum > 0 (momentum = %g)", momentum);
        return NULL;
    }
    ag_optim *o = optim_alloc(s, "sgd", momentum > 0 ? 1 : 0);
    if (!o) return NULL;
    o->kind = OPT_SGD;
    o->lr = lr;
    o->momentum = momentum;
    o->weight_decay = weight_decay;
    o->nesterov = nesterov != 0;
    return o;
}

ag_optim *ag_adam_new(ag_store *s, double lr, double beta1, double beta2, double eps,
                      double weight_decay, int decoupled)
{
    const char *who = decoupled ? "adamw" : "adam";
    if (!s) {
        ag__optim_fail(NULL, NULL, AG_ERR_ARG, "%s: store is NULL", who);
        return NULL;
    }
    if (!nonneg(s, who, "lr", lr) || !unit(s, who, "beta1", beta1) || !unit(s, who, "beta2", beta2) ||
        !nonneg(s, who, "eps", eps) || !nonneg(s, who, "weight_decay", weight_decay))
        return NULL;
    ag_optim *o = optim_alloc(s, who, 2);
    if (!o) return NULL;
    o->kind = decoupled ? OPT_ADAMW : OPT_ADAM;
    o->lr = lr;
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    o->weight_decay = weight_decay;
    return o;
}

void ag_optim_free(ag_optim *o) { ag__free(o); /* one block: the state goes with it */ }

/* The element-wise loops below are compiled once per instruction set
 * (AG_ISA_CLONES, core/internal.h) and the machine's is picked at each
 * call, so that they run as wide as its vectors.  Every element is updated
 * on its own, one rounding per operation (sqrt and division are correctly
 * rounded, and no multiply-add fuses: the build's -ffp-contract=off), so
 * every level gives the same bits. */

/* SGD on one parameter of n elements; buf is NULL when momentum is 0.
 * In ag_real arithmetic, as PyTorch does it in the parameter's dtype; one
 * loop per variant, so that each is a plain vector loop. */
static inline AG_ALWAYS_INLINE void sgd_update(const ag_optim *o, size_t n, ag_real *p, const ag_real *grad,
                                               ag_real *buf)
{
    const ag_real lr = (ag_real)o->lr, mu = (ag_real)o->momentum, wd = (ag_real)o->weight_decay;
    if (!buf) {
#pragma omp simd
        for (size_t j = 0; j < n; j++) {
            ag_real g = grad[j] + wd * p[j]; /* g = grad + wd * p */
            p[j] -= lr * g;                  /* p = p - lr * g */
        }
    } else if (o->nesterov) {
#pragma omp simd
        for (size_t j = 0; j < n; j++) {
            ag_real g = grad[j] + wd * p[j];
            ag_real b = mu * buf[j] + g;     /* buf = mu * buf + g */
            buf[j] = b;
            p[j] -= lr * (g + mu * b);       /* look ahead: g + mu * buf */
        }
    } else {
#pragma omp simd
        for (size_t j = 0; j < n; j++) {
            ag_real g = grad[j] + wd * p[j];
            ag_real b = mu * buf[j] + g;
            buf[j] = b;
            p[j] -= lr * b;                  /* follow buf */
        }
    }
}

#define SGD_PARAMS (const ag_optim *o, size_t n, ag_real *p, const ag_real *grad, ag_real *buf)
AG_ISA_CLONES(void, sgd_update, SGD_PARAMS, sgd_update(o, n, p, grad, buf))

/* the square root in ag_real's precision */
#ifdef AG_DOUBLE
#define REAL_SQRT sqrt
#else
#define REAL_SQRT sqrtf
#endif

/* Adam / AdamW at step t.  The scalars are worked out in double, as
 * PyTorch works them out in Python, then rounded once to ag_real, and the
 * elements' arithmetic is ag_real's, as torch.optim.Adam's on a float
 * tensor: float in the float build (a division and a square root per
 * element in double would be most of the update's time), double in the
 * double build. */
typedef struct adam_k {
    ag_real step_size, bc2_sqrt, decay, l2, eps, beta1, keep1, beta2, keep2;
} adam_k;

static adam_k adam_constants(const ag_optim *o, int64_t t)
{
    const double b1 = o->beta1, b2 = o->beta2, wd = o->weight_decay;
    const double bc1 = 1 - pow(b1, (double)t); /* bias corrections: m and v start at 0, */
    const double bc2 = 1 - pow(b2, (double)t); /* so early averages are scaled down by these */
    return (adam_k){
        .step_size = (ag_real)(o->lr / bc1),
        .bc2_sqrt = (ag_real)sqrt(bc2),
        .decay = (ag_real)(o->kind == OPT_ADAMW ? 1 - o->lr * wd : 1), /* AdamW: p *= 1 - lr * wd */
        .l2 = (ag_real)(o->kind == OPT_ADAM ? wd : 0),                 /* Adam: g += wd * p */
        .eps = (ag_real)o->eps,
        .beta1 = (ag_real)b1, .keep1 = (ag_real)(1 - b1),
        .beta2 = (ag_real)b2, .keep2 = (ag_real)(1 - b2),
    };
}

/* One element: p, m and v updated from the gradient g. */
static inline AG_ALWAYS_INLINE void adam_one(const adam_k *k, ag_real *p, ag_real grad, ag_real *m, ag_real *v)
{
    ag_real pj = *p * k->decay;
    ag_real g = grad + k->l2 * pj;
    ag_real mj = k->beta1 * *m + k->keep1 * g;      /* m = b1 m + (1 - b1) g */
    ag_real vj = k->beta2 * *v + k->keep2 * g * g;  /* v = b2 v + (1 - b2) g^2 */
    *m = mj;
    *v = vj;
    ag_real denom = REAL_SQRT(vj) / k->bc2_sqrt + k->eps; /* sqrt(vhat) + eps */
    *p = pj - k->step_size * mj / denom;                  /* p -= lr * mhat / denom */
}

/* Adam on one parameter of n elements */
static inline AG_ALWAYS_INLINE void adam_update(const adam_k *k, size_t n, ag_real *p, const ag_real *grad,
                                                ag_real *m, ag_real *v)
{
    const adam_k c = *k; /* a local copy: no store below can alias it */
#pragma omp simd
    for (size_t j = 0; j < n; j++) adam_one(&c, p + j, grad[j], m + j, v + j);
}
#define ADAM_PARAMS (const adam_k *k, size_t n, ag_real *p, const ag_real *grad, ag_real *m, ag_real *v)
AG_ISA_CLONES(void, adam_update, ADAM_PARAMS, adam_update(k, n, p, grad, m, v))

/* The same with the gradient clipped on the way in, as ag_clip_grad_norm
 * scales it (in double: a coef of 1 gives grad's own bits), and zeroed on
 * the way out, as ag_store_zero_grad: one pass over the memory, not three. */
static inline AG_ALWAYS_INLINE void adam_clip_zero(const adam_k *k, size_t n, ag_real *p, ag_real *grad,
                                                   ag_real *m, ag_real *v, double coef)
{
    const adam_k c = *k;
#pragma omp simd
    for (size_t j = 0; j < n; j++) {
        adam_one(&c, p + j, (ag_real)((double)grad[j] * coef), m + j, v + j);
        grad[j] = 0;
    }
}
#define ADAM_CZ_PARAMS (const adam_k *k, size_t n, ag_real *p, ag_real *grad, ag_real *m, ag_real *v, double coef)
AG_ISA_CLONES(void, adam_clip_zero, ADAM_CZ_PARAMS, adam_clip_zero(k, n, p, grad, m, v, coef))

static const char *kind_name(int kind)
{
    return kind == OPT_SGD ? "sgd" : kind == OPT_ADAM ? "adam" : "adamw";
}

/* ---- element-wise passes over every parameter, on the library's threads ---- */

/* fn over all the store's values, split in equal contiguous pieces among
 * the library's threads when the pass touches enough memory (`arrays`
 * arrays of the parameters' size, read or written) to repay a fork: a
 * training step's optimizer and clipping are otherwise the serial part of
 * a data-parallel step (src/core/team.c). */
typedef struct values_job {
    ag_store *s;
    size_t n, nt;
    ag_piece_fn fn;
    void *ctx;
} values_job;

static void values_piece(void *ctx, size_t k)
{
    const values_job *j = ctx;
    ag__store_pieces(j->s, j->n * k / j->nt, j->n * (k + 1) / j->nt, j->fn, j->ctx);
}

void ag__for_values(ag_store *s, size_t arrays, ag_piece_fn fn, void *ctx)
{
    size_t n = ag_store_numel(s);
    int nt = ag__threads_for(n * arrays);
    values_job j = {s, n, (size_t)nt, fn, ctx};
    ag__parallel_for((size_t)nt, nt, values_piece, &j);
}

/* The pass of one step: coef 0, the plain update; otherwise the gradient
 * scaled by coef and zeroed with it. */
typedef struct step_job {
    ag_optim *o;
    adam_k k;
    double coef;
} step_job;

static void update_piece(void *ctx, int i, ag_tensor *t, size_t a, size_t b)
{
    const step_job *j = ctx;
    const ag_optim *o = j->o;
    ag_real **st = o->state + (size_t)i * (size_t)o->nstate;
    ag_real *p = t->data + a, *grad = t->grad + a;
    size_t n = b - a;
    if (o->kind != OPT_SGD) {
        if (j->coef) AG_ISA_CALL(adam_clip_zero, (&j->k, n, p, grad, st[0] + a, st[1] + a, j->coef));
        else AG_ISA_CALL(adam_update, (&j->k, n, p, grad, st[0] + a, st[1] + a));
        return;
    }
    if (j->coef != 0 && j->coef != 1) ag__scale_grad(n, grad, j->coef);
    AG_ISA_CALL(sgd_update, (o, n, p, grad, o->nstate ? st[0] + a : NULL));
    if (j->coef) memset(grad, 0, n * sizeof *grad);
}

/* What a step needs: the store as the optimizer knows it, a usable lr
 * (the reason after fn, "" or "name: "). */
static ag_status step_ready(ag_optim *o, const char *fn)
{
    const char *who = kind_name(o->kind);
    int np = ag_store_count(o->store);
    if (np != o->nparams) {
        return ag__optim_fail(o, NULL, AG_ERR_STATE,
                              "%s%s: the store has %d parameters but the optimizer was made for %d "
                              "(make the optimizer after the last ag_param)", fn, who, np, o->nparams);
    }
    for (int i = 0; i < np; i++) {
        const ag_tensor *t = ag_store_at(o->store, i);
        if (t->size != o->sizes[i] || !t->grad)
            return ag__optim_fail(o, NULL, AG_ERR_STATE, "%s%s: parameter %d '%s' changed since the optimizer was made",
                                  fn, who, i, t->name);
    }
    if (!(isfinite(o->lr) && o->lr >= 0))
        return ag__optim_fail(o, NULL, AG_ERR_ARG, "%s%s: lr = %g must be finite and >= 0", fn, who, o->lr);
    return AG_OK;
}

/* Every value is updated on its own: any split gives the same bits. */
static void step_pass(ag_optim *o, double coef)
{
    o->steps++;
    step_job j = {.o = o, .coef = coef};
    if (o->kind != OPT_SGD) j.k = adam_constants(o, o->steps);
    ag__for_values(o->store, (size_t)(3 + 2 * o->nstate), update_piece, &j);
}

ag_status ag_optim_step(ag_optim *o)
{
    if (!o) return ag__optim_fail(NULL, NULL, AG_ERR_ARG, "optim_step: optimizer is NULL");
    ag_status st = step_ready(o, "");
    if (st) return st;
    step_pass(o, 0);
    return AG_OK;
}

ag_status ag_optim_step_clip_zero(ag_optim *o, double max_norm, double *total_norm)
{
    if (total_norm) *total_norm = 0;
    if (!o) return ag__optim_fail(NULL, NULL, AG_ERR_ARG, "optim_step_clip_zero: optimizer is NULL");
    if (isnan(max_norm)) return ag__optim_fail(o, NULL, AG_ERR_ARG, "optim_step_clip_zero: max_norm is nan");
    ag_status st = step_ready(o, "optim_step_clip_zero: ");
    if (st) return st;
    int bad;
    double norm = ag__grad_norm(o->store, &bad);
    if (total_norm) *total_norm = norm;
    if (!isfinite(norm))
        return ag__optim_fail(o, NULL, AG_ERR_NUMERIC, "optim_step_clip_zero: %s", ag__norm_error(o->store, norm, bad));
    step_pass(o, ag__clip_coef(max_norm, norm));
    return AG_OK;
}

void ag_optim_set_lr(ag_optim *o, double lr)
{
    if (o) o->lr = lr;
}

double ag_optim_lr(const ag_optim *o) { return o ? o->lr : NAN; }

int64_t ag_optim_steps(const ag_optim *o) { return o ? o->steps : 0; }

void ag_optim_set_steps(ag_optim *o, int64_t steps)
{
    if (!o) return;
    if (steps < 0) {
        ag__optim_fail(o, NULL, AG_ERR_ARG, "%s: set_steps: steps = %lld is negative", kind_name(o->kind), (long long)steps);
        return;
    }
    o->steps = steps;
}

const char *ag_optim_kind(const ag_optim *o) { return o ? kind_name(o->kind) : "none"; }

int ag_optim_state_count(const ag_optim *o) { return o ? o->nstate : 0; }

ag_real *ag_optim_state(ag_optim *o, int param_index, int which, size_t *n)
{
    if (n) *n = 0;
    if (!o || param_index < 0 || param_index >= o->nparams || which < 0 || which >= o->nstate)
        return NULL;
    if (n) *n = o->sizes[param_index];
    return o->state[(size_t)param_index * (size_t)o->nstate + (size_t)which];
}

/* ---- learning-rate schedules ---------------------------------------------
 *
 * Warmup: a large step from random weights with Adam's noisy early v can
 * blow a transformer up, so the rate ramps up linearly over the first
 * `warmup` steps: base_lr * step / warmup (step 1 gets base_lr / warmup,
 * step warmup gets base_lr).  After it:
 *   constant  base_lr
 *   linear    base_lr * (total - step) / (total - warmup), 0 from step total
 *   cosine    base_lr * (1 + cos(pi * (step - warmup) / (total - warmup))) / 2
 *   noam      base_lr * min(sqrt(warmup / step), step / warmup): the same as
 *             base_lr * sqrt(warmup) * min(step^-0.5, step * warmup^-1.5), the
 *             schedule of "Attention Is All You Need" with d_model^-0.5
 *             replaced by the peak base_lr; it has its own warmup. */

/* The arguments of a schedule, checked: AG_OK, or AG_ERR_ARG with the reason
 * in err. */
static ag_status schedule_args(int64_t step, int64_t warmup, int64_t total, const char *kind, char *err,
                               size_t errlen)
{
    if (!kind) return ag__errf(err, errlen, AG_ERR_ARG, "lr_schedule: kind is NULL");
    const bool decays = strcmp(kind, "linear") == 0 || strcmp(kind, "cosine") == 0;
    const bool noam = strcmp(kind, "noam") == 0;
    if (!decays && !noam && strcmp(kind, "constant") != 0)
        return ag__errf(err, errlen, AG_ERR_ARG, "lr_schedule: unknown kind '%s' (constant, linear, cosine, noam)",
                        kind);
    if (step < 1 || warmup < 0)
        return ag__errf(err, errlen, AG_ERR_ARG,
                        "lr_schedule '%s': step = %lld (counts from 1), warmup = %lld (must be >= 0)", kind,
                        (long long)step, (long long)warmup);
    if (noam && warmup < 1)
        return ag__errf(err, errlen, AG_ERR_ARG, "lr_schedule 'noam': warmup = %lld must be >= 1",
                        (long long)warmup);
    if (decays && total <= warmup)
        return ag__errf(err, errlen, AG_ERR_ARG, "lr_schedule '%s': total = %lld must exceed warmup = %lld", kind,
                        (long long)total, (long long)warmup);
    return AG_OK;
}

ag_status ag_lr_schedule_check(int64_t warmup, int64_t total, const char *kind, char *err, size_t errlen)
{
    return schedule_args(1, warmup, total, kind, err, errlen);
}

double ag_lr_schedule(double base_lr, int64_t step, int64_t warmup, int64_t total, const char *kind)
{
    if (schedule_args(step, warmup, total, kind, last_err, sizeof last_err)) return NAN;
    const double s = (double)step, w = (double)warmup;
    if (strcmp(kind, "noam") == 0) return base_lr * fmin(sqrt(w / s), s / w);
    if (step <= warmup) return base_lr * s / w;
    if (strcmp(kind, "constant") == 0) return base_lr;
    if (step >= total) return 0;
    double progress = (s - w) / ((double)total - w); /* in (0, 1) */
    if (kind[0] == 'l') return base_lr * (1 - progress);
    const double pi = 3.14159265358979323846;
    return base_lr * 0.5 * (1 + cos(pi * progress));
}
