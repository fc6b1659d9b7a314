/* attograd_optim.h: optimizers over an ag_store.  Included by attograd.h.
 *
 *   ag_optim *opt = ag_adam_new(params, 3e-4, 0.9, 0.98, 1e-9, 0.01, 1);  // AdamW
 *   if (!opt) fprintf(stderr, "%s\n", ag_store_error(params));
 *   for (int64_t step = 1; step <= total; step++) {
 *       ... build the loss on g, ag_backward(g, loss) ...
 *       double norm;
 *       if (ag_clip_grad_norm(params, 1.0, &norm) != AG_OK) { ... skip ... }
 *       ag_optim_set_lr(opt, ag_lr_schedule(3e-4, step, 4000, total, "cosine"));
 *       if (ag_optim_step(opt) != AG_OK) fprintf(stderr, "%s\n", ag_optim_error(opt));
 *       ag_store_zero_grad(params);
 *       ag_graph_reset(g);
 *   }
 *   ag_optim_free(opt);
 *
 * Semantics are PyTorch's (torch.optim.SGD, Adam, AdamW, clip_grad_norm_)
 * with dampening 0, amsgrad off, maximize off; the update formulas are at
 * the top of src/nn/optim.c.  The state (momentum, Adam m and v) is allocated
 * in one block when the optimizer is made, so a step never allocates.  The
 * store must not get new parameters after that: the step checks and fails.
 *
 * Errors (docs/errors.md): every call that can fail returns a status (or
 * NULL, or NaN for a schedule), and its reason sticks to the object it acted
 * on: ag_store_error(s) after a constructor or ag_clip_grad_norm,
 * ag_optim_error(o) after a step.  Nothing is shared between threads.
 */
#ifndef ATTOGRAD_OPTIM_H
#define ATTOGRAD_OPTIM_H

#include "attograd_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ag_optim ag_optim;

/* SGD over every parameter of s:
 *   g = grad + wd * p;  buf = momentum * buf + g;  g = nesterov ? g + momentum * buf : buf;
 *   p -= lr * g        (momentum 0: p -= lr * g, no buffer).
 * Needs lr >= 0, momentum >= 0, weight_decay >= 0, and momentum > 0 for
 * nesterov.  NULL on a bad argument or no memory (ag_store_error(s) says
 * which). */
ag_optim *ag_sgd_new(ag_store *s, double lr, double momentum, double weight_decay,
                     int nesterov);

/* Adam (decoupled 0) or AdamW (decoupled 1) over every parameter of s, at
 * step t = 1, 2, ...:
 *   AdamW only: p *= 1 - lr * wd
 *   g = grad (+ wd * p for Adam);  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 * Needs lr >= 0, 0 <= beta1, beta2 < 1, eps >= 0, weight_decay >= 0.  NULL
 * on a bad argument or no memory (ag_store_error(s) says which). */
ag_optim *ag_adam_new(ag_store *s, double lr, double beta1, double beta2, double eps,
                      double weight_decay, int decoupled);

/* One update of every parameter from its current grad (grads are read, not
 * zeroed).  Counts the step first, so Adam's first step has t = 1.  No
 * allocation.  AG_ERR_STATE when the store's parameter count changed since
 * the optimizer was made, AG_ERR_ARG when the lr is negative or not finite
 * (e.g. from a bad schedule); nothing is updated then, and
 * ag_optim_error(o) says why. */
ag_status ag_optim_step(ag_optim *o);
/* Why the last failed call on o (a step, ag_optim_set_steps) failed; "" if
 * none has.  Owned by o. */
const char *ag_optim_error(const ag_optim *o);
void ag_optim_free(ag_optim *o);

void ag_optim_set_lr(ag_optim *o, double lr); /* checked at the next step */
double ag_optim_lr(const ag_optim *o);
int64_t ag_optim_steps(const ag_optim *o);    /* steps taken so far */
const char *ag_optim_kind(const ag_optim *o); /* "sgd", "adam" or "adamw" */

/* ---- state, for checkpoints --------------------------------------------- */

/* State buffers per parameter: 0 (plain SGD), 1 (SGD momentum buffer), or
 * 2 (Adam m and v). */
int ag_optim_state_count(const ag_optim *o);
/* Buffer `which` of parameter param_index (its size elements, owned by the
 * optimizer, writable to restore a checkpoint): which 0 is the momentum
 * buffer or Adam's m, which 1 is Adam's v.  Sets *n (when n is not NULL) to
 * the element count.  NULL (and *n = 0) when there is no such buffer. */
ag_real *ag_optim_state(ag_optim *o, int param_index, int which, size_t *n);
/* Restore the step count (Adam's bias correction depends on it).  A
 * negative count is refused (ag_optim_error). */
void ag_optim_set_steps(ag_optim *o, int64_t steps);

/* Deprecated: use ag_store_error (constructors, clipping), ag_optim_error
 * (steps) or ag_lr_schedule_check (schedules).  Why the calling thread's
 * last constructor, step, clip or schedule failed ("" if none yet); each
 * thread has its own copy. */
const char *ag_optim_last_error(void);

/* ---- gradient clipping -------------------------------------------------- */

/* norm = sqrt(sum of grad^2 over every parameter of s), accumulated in
 * double, stored in *total_norm (when not NULL) before clipping.  When
 * norm > max_norm every grad is multiplied by max_norm / (norm + 1e-6)
 * (torch.nn.utils.clip_grad_norm_'s factor).  max_norm <= 0: no clipping.
 * A NaN or Inf norm returns AG_ERR_NUMERIC and leaves the grads untouched,
 * ag_store_error(s) naming the first parameter with a non-finite gradient;
 * a NULL store returns AG_ERR_ARG. */
ag_status ag_clip_grad_norm(ag_store *s, double max_norm, double *total_norm);

/* ---- learning-rate schedules -------------------------------------------- */

/* The learning rate for step (counted from 1) of a run of `total` steps:
 *   "constant": base_lr after a linear warmup
 *   "linear":   linear warmup, then linear decay to 0 at step total
 *   "cosine":   linear warmup, then base_lr * (1 + cos(pi * progress)) / 2,
 *               progress = (step - warmup) / (total - warmup), 0 after total
 *   "noam":     base_lr * sqrt(warmup) * min(step^-0.5, step * warmup^-1.5),
 *               i.e. "Attention Is All You Need" scaled so the peak (at
 *               step == warmup) is base_lr; total is ignored
 * The linear warmup is base_lr * step / warmup for step <= warmup (warmup 0:
 * none).  Returns NaN for an unknown kind, step < 1, warmup < 0,
 * total <= warmup for "linear"/"cosine", or warmup < 1 for "noam";
 * ag_optim_step then refuses that lr.  Check the arguments once, before
 * training, with ag_lr_schedule_check. */
double ag_lr_schedule(double base_lr, int64_t step, int64_t warmup, int64_t total,
                      const char *kind);
/* AG_OK when ag_lr_schedule(base_lr, step, warmup, total, kind) is a number
 * for every step >= 1; else AG_ERR_ARG with the reason in err (errlen bytes,
 * always NUL-terminated; err may be NULL), e.g.
 *   "lr_schedule: unknown kind 'cosin' (constant, linear, cosine, noam)". */
ag_status ag_lr_schedule_check(int64_t warmup, int64_t total, const char *kind, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
