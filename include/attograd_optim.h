/* attograd_optim.h: SGD, Adam and AdamW over an ag_store, gradient clipping
 * and learning-rate schedules, with PyTorch's semantics (formulas at the top
 * of src/nn/optim.c).  A step never allocates.  Errors stick to the object
 * acted on: ag_store_error(s) for constructors and clipping, ag_optim_error(o)
 * for steps (docs/errors.md). */
#ifndef ATTOGRAD_OPTIM_H
#define ATTOGRAD_OPTIM_H

#include "attograd_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ag_optim ag_optim;

/* g = grad + wd p; buf = momentum buf + g; p -= lr (nesterov ? g + momentum
 * buf : buf).  Needs lr, momentum, wd >= 0 (momentum > 0 for nesterov).  NULL
 * on a bad argument or no memory (ag_store_error(s)); free: ag_optim_free. */
ag_optim *ag_sgd_new(ag_store *s, double lr, double momentum, double weight_decay,
                     int nesterov);

/* m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2, p -= lr m^ / (sqrt(v^) + eps)
 * (bias-corrected); wd added to g (Adam) or p *= 1 - lr wd (decoupled: AdamW).
 * Needs lr, eps, wd >= 0, 0 <= betas < 1.  NULL as ag_sgd_new. */
ag_optim *ag_adam_new(ag_store *s, double lr, double beta1, double beta2, double eps,
                      double weight_decay, int decoupled);

/* Update every parameter from its grad (not zeroed); t counts from 1.
 * AG_ERR_STATE if the store's parameters changed, AG_ERR_ARG for a negative
 * or non-finite lr: nothing updated, ag_optim_error(o) says why. */
ag_status ag_optim_step(ag_optim *o);
/* A training step's end in one pass over the parameters: ag_clip_grad_norm
 * (max_norm <= 0: no clipping), ag_optim_step, ag_store_zero_grad, with
 * the same bits.  A non-finite norm: AG_ERR_NUMERIC, nothing changed.
 * Errors as ag_optim_step's, on o. */
ag_status ag_optim_step_clip_zero(ag_optim *o, double max_norm, double *total_norm);
/* Why the last failed call on o failed, or ""; owned by o. */
const char *ag_optim_error(const ag_optim *o);
void ag_optim_free(ag_optim *o);

void ag_optim_set_lr(ag_optim *o, double lr); /* checked at the next step */
double ag_optim_lr(const ag_optim *o);
int64_t ag_optim_steps(const ag_optim *o);    /* steps taken so far */
const char *ag_optim_kind(const ag_optim *o); /* "sgd", "adam" or "adamw" */

/* ---- state, for checkpoints --------------------------------------------- */

/* Buffers per parameter: 0 (plain SGD), 1 (momentum), 2 (Adam m, v). */
int ag_optim_state_count(const ag_optim *o);
/* Buffer `which` (0: momentum or m, 1: v) of parameter param_index, owned by
 * o, writable; *n (if not NULL) its size.  NULL, *n = 0, when there is none. */
ag_real *ag_optim_state(ag_optim *o, int param_index, int which, size_t *n);
/* Restore the step count; a negative one is refused (ag_optim_error). */
void ag_optim_set_steps(ag_optim *o, int64_t steps);

/* ---- gradient clipping -------------------------------------------------- */

/* *total_norm = sqrt(sum grad^2) over s; above max_norm (> 0) every grad is
 * scaled by max_norm / (norm + 1e-6), as clip_grad_norm_.  A non-finite norm:
 * AG_ERR_NUMERIC, grads untouched, ag_store_error(s) names the parameter. */
ag_status ag_clip_grad_norm(ag_store *s, double max_norm, double *total_norm);

/* ---- learning-rate schedules -------------------------------------------- */

/* lr at step (from 1) of `total`: "constant", "linear" (to 0 at total),
 * "cosine" after a linear warmup, or "noam" (peak base_lr at warmup); the
 * formulas: docs/design.md.  NaN for bad arguments (ag_lr_schedule_check). */
double ag_lr_schedule(double base_lr, int64_t step, int64_t warmup, int64_t total,
                      const char *kind);
/* AG_OK when ag_lr_schedule gives a number for every step >= 1; else
 * AG_ERR_ARG with the reason in err (errlen bytes; err may be NULL). */
ag_status ag_lr_schedule_check(int64_t warmup, int64_t total, const char *kind, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
