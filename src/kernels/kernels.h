/* kernels/kernels.h: the kernel room's entry points.
 *
 * ops/<name>.c holds an op as a reader should meet it: the math, a plain
 * reference forward and backward, its cases.  src/kernels/ holds the code
 * that makes some of them fast (SIMD, per instruction set, tiles, fused row
 * loops, gemm, the attention kernel).  An op calls its kernel only when
 * ag__fast() is true and a kernel exists; otherwise it runs its reference.
 * Each kernel is tested equal to its reference (tests/test_kernels_vs_ref.c,
 * tests/test_rooms.c). */
#ifndef AG_KERNELS_KERNELS_H
#define AG_KERNELS_KERNELS_H

#include "core/internal.h"

#include <stdbool.h>
#include <stddef.h>

/* true unless the reference mode is on (ag_set_kernels, AG_KERNELS). */
bool ag__fast(void);

/* Each ag__k_<op> below is an op's fast code: it returns true when it did
 * the work (a failure it met is left on the graph), false when it leaves
 * this case to the reference.  The arguments are the reference's, named
 * as in ops/<op>.c, which holds the math. */

/* ops/linear.c: x [N, I], W [O, I], b [O] and r [N, O] (ops/linear_add.c's)
 * or NULL; dx stored when fresh, else added (kernels/linear.c). */
/* bf16: the products of x, W (and dy) rounded to bf16 (ops/bf16.c), db
 * from dy itself. */
bool ag__k_linear_forward(ag_graph *g, int N, int I, int O, const ag_real *x, const ag_real *w, const ag_real *b,
                          const ag_real *r, ag_real *y, bool bf16);
bool ag__k_linear_backward(ag_graph *g, int N, int I, int O, const ag_real *dy, const ag_real *x, const ag_real *w,
                           ag_real *dx, bool fresh, ag_real *dw, ag_real *db, bool bf16);

/* ops/linear_gelu.c: y = gelu(y) in place over n values, and its slope
 * into s unless s is NULL; dx = dy * s over n values, dx stored when
 * fresh, else added (dx may be dy) (kernels/elementwise.c). */
bool ag__k_gelu_in_place(size_t n, ag_real *y, ag_real *s);
void ag__k_slope_mul(size_t n, const ag_real *dy, const ag_real *s, ag_real *dx, bool fresh);

/* ops/bf16.c: y = x rounded to bf16 over n values (y may be x)
 * (kernels/bf16.c). */
bool ag__k_bf16_round(size_t n, const ag_real *x, ag_real *y);
/* Rounded copies of count operands for one product's call, where the
 * gemm cannot round them itself (no bf16 instruction): *x[i] (n[i]
 * values) replaced by its copy, all in g's ag__temp_copies, which the
 * next call reuses (kernels/bf16.c).  false: no memory (the failure on g). */
bool ag__k_bf16_copies(ag_graph *g, int count, const ag_real **x[], const size_t n[]);

/* ops/embedding.c: n ids into a table [V, C]; increasing: the ids are
 * distinct and in order; dweight stored when fresh, else added
 * (kernels/embedding.c). */
bool ag__k_embedding_forward(size_t n, size_t C, const int *ids, const ag_real *weight, ag_real *y);
bool ag__k_embedding_backward(size_t n, size_t V, size_t C, const int *ids, bool increasing, const ag_real *dy,
                              ag_real *dweight, bool fresh);

/* ops/layer_norm.c: rows of C values; gain, bias NULL for 1, 0; mean and
 * rstd one per row (kernels/layer_norm_forward.c, _backward.c). */
bool ag__k_layer_norm_forward(ag_graph *g, size_t rows, size_t C, const ag_real *x, const ag_real *gain,
                              const ag_real *bias, double eps, ag_real *y, ag_real *mean, ag_real *rstd);
bool ag__k_layer_norm_backward(ag_graph *g, size_t rows, size_t C, const ag_real *x, const ag_real *gain,
                               const ag_real *mean, const ag_real *rstd, const ag_real *dy, ag_real *dx, bool fresh,
                               ag_real *dgain, ag_real *dbias);

/* ops/matmul.c: count products y[r] = a[r] b[r] (b[r]^T when tb), each
 * [M, K] x [K, N].  Operand x's r-th matrix starts at ag__products_at(p, p->x, r)
 * and its rows are p->x[nb] apart (its columns are adjacent); x[i] for
 * i < nb is its stride along y's batch axis i (0 where x was stretched). */
typedef struct ag__products {
    int M, N, K, tb, nb;
    bool bf16;              /* products of the operands rounded to bf16 (ops/bf16.c) */
    int shape[AG_MAX_DIMS]; /* y's batch axes (logical: [B, H] for heads) */
    size_t count;           /* their product */
    size_t a[AG_MAX_DIMS + 1], b[AG_MAX_DIMS + 1], y[AG_MAX_DIMS + 1];
} ag__products;
static inline size_t ag__products_at(const ag__products *p, const size_t *st, size_t r)
{
    size_t off = 0;
    for (int i = p->nb - 1; i >= 0; i--) {
        off += (r % (size_t)p->shape[i]) * st[i];
        r /= (size_t)p->shape[i];
    }
    return off;
}
/* The plan of y = a b (b^T when tb), the operands in `heads` (AG__MM_A,
 * _B, _Y) in heads layout (core/products.c). */
void ag__products_plan(ag__products *p, const ag_tensor *a, const ag_tensor *b, const ag_tensor *y, int tb,
                       int heads);
/* kernels/matmul.c: each product by gemm; the backward gets a's and b's
 * gradients itself (dy is y's).  p->bf16: of the operands rounded to bf16
 * (dy too), never in heads layout. */
bool ag__k_matmul_forward(ag_graph *g, const ag__products *p, const ag_tensor *a, const ag_tensor *b, ag_real *y);
bool ag__k_matmul_backward(ag_graph *g, const ag__products *p, ag_tensor *a, ag_tensor *b, const ag_real *dy);

/* ops/attention.c: every head of q, k and v, in heads layout (q
 * [B, T, H, D], k [B, S, Hkv, D], v [B, S, Hkv, Dv]) or in PyTorch's
 * (bhtd: q [B, H, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv]); query head
 * h reads key/value head h / (H / Hkv) (grouped-query attention).  The
 * mask is broadcast to [B, H, T, S] (or NULL), and so is the bias, added
 * to the scaled scores of the keys kept (ag__att_add_bias); causal: query
 * t sees keys s <= t + diag only (a rule, no tensor), hidden as a mask 0
 * hides.  P
 * [B, H, T, S] is the op's, saved (for long rows, each row's log-sum-exp
 * instead, as its max and sum).  plan: the kernel's own state, made by its
 * forward (NULL until then), kept by the op for the backward
 * (kernels/attention.c). */
typedef struct ag__attn {
    int B, T, S, H, Hkv, D, Dv;
    bool bhtd;        /* PyTorch's layout, each head's rows side by side */
    bool causal;      /* query t sees keys s <= t + diag only */
    int diag;         /* 0: top-left; S - T: bottom-right */
    const ag_tensor *mask;
    const ag_tensor *bias; /* added to the kept keys' scale A, or NULL */
    double scale, fill;
    void *plan;
    bool flash; /* the kernel keeps no P: p holds each row's max and sum [B, H, T, 2] */
    bool plain; /* the plain code (ops/attention.c) forward and backward
                   whatever the mode: a NaN or inf in q, k or v (a NaN or
                   +inf in the bias) with fill -inf, whose hidden keys it
                   leaves out exactly; a bias that needs its gradient */
    double dropout; /* on P: a weight kept with probability 1 - dropout, / (1 - dropout) */
    uint64_t seed;  /* which weights: ag__attn_kept, drawn again by the backward */
    bool bf16;      /* the products' operands rounded to bf16 (ops/attention.c):
                       the plain code or the P-kept kernel, never flash */
} ag__attn;
/* Dropout's draw for weight (t, s) of head bh = b H + h: a counter-based
 * generator (as FlashAttention's Philox), a function of the seed and the
 * weight's coordinates alone, so that any tiling and the backward draw
 * the same bits without keeping a mask.  Two rounds of splitmix64's
 * finaliser (a bijection of 64 bits that mixes every input bit into every
 * output bit): the first keys the head, the second the position. */
static inline uint64_t ag__attn_mix(uint64_t x)
{
    x ^= x >> 30, x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27, x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
/* The factor of weight (t, s) of head bh: 1 / (1 - p) kept, 0 dropped;
 * 1 without dropout. */
static inline double ag__attn_kept(const ag__attn *a, size_t bh, int t, int s)
{
    if (a->dropout <= 0) return 1;
    uint64_t head = ag__attn_mix(a->seed + 0x9E3779B97F4A7C15ull * (bh + 1));
    uint64_t x = ag__attn_mix(head ^ ((uint64_t)(uint32_t)t << 32 | (uint32_t)s));
    return (double)(x >> 40) >= a->dropout * 16777216.0 ? 1 / (1 - a->dropout) : 0; /* a 24-bit uniform */
}
/* The first key that query t may not see by the causal rule (S without it). */
static inline int ag__attn_hide(bool causal, int diag, int S, int t)
{
    long e = (long)t + diag + 1;
    return !causal || e >= S ? S : e < 0 ? 0 : (int)e;
}
/* Where head bh = b H + h of an operand of `rows` rows of `cols` starts,
 * and its rows' stride: q, y, dO (kv false) have H heads, k and v (kv
 * true) Hkv, query head h reading head h / (H / Hkv). */
static inline size_t ag__attn_head(const ag__attn *a, size_t bh, int rows, int cols, bool kv)
{
    size_t b = bh / (size_t)a->H, h = bh % (size_t)a->H, nh = (size_t)a->H;
    if (kv) h /= (size_t)(a->H / a->Hkv), nh = (size_t)a->Hkv;
    return a->bhtd ? (b * nh + h) * (size_t)rows * (size_t)cols : (b * (size_t)rows * nh + h) * (size_t)cols;
}
static inline int ag__attn_ld(const ag__attn *a, int cols, bool kv)
{
    return a->bhtd ? cols : (kv ? a->Hkv : a->H) * cols;
}
/* Rows of more than this many keys take the flash kernel
 * (kernels/attention_flash.c), which keeps no P: the op asks
 * ag__k_attention_flash before it saves anything, and a forward that took
 * it has its backward by the kernel in either mode (P is not there for the
 * reference to read). */
enum { AG__FLASH_KEYS = 256 };
bool ag__k_attention_flash(const ag__attn *a);
/* Whether x [n] holds no NaN and no inf: the op's test for its one NaN
 * rule, in vectors. */
bool ag__k_all_finite(size_t n, const ag_real *x);
bool ag__k_attention_forward(ag_graph *g, ag__attn *a, const ag_real *q, const ag_real *k, const ag_real *v,
                             ag_real *p, ag_real *y);
/* y: the forward's output, which the flash kernel reads; m: the bias
 * when its gradient is wanted (dM added to), else NULL. */
bool ag__k_attention_backward(ag_graph *g, const ag__attn *a, ag_tensor *q, ag_tensor *k, ag_tensor *v,
                              ag_tensor *m, const ag_real *p, const ag_real *y, const ag_real *dy);

/* ops/softmax.c: rows of n values; dx stored when fresh, else added
 * (kernels/softmax.c). */
bool ag__k_softmax_forward(size_t rows, size_t n, const ag_real *x, ag_real *y);
bool ag__k_softmax_backward(size_t rows, size_t n, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh);

/* ops/log_softmax.c: rows of n values; dx stored when fresh, else added
 * (kernels/log_softmax.c). */
bool ag__k_log_softmax_forward(size_t rows, size_t n, const ag_real *x, ag_real *y);
bool ag__k_log_softmax_backward(size_t rows, size_t n, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh);

/* ops/cross_entropy.c: what its forward keeps for its backward. */
typedef struct ag__xent {
    size_t rows, count; /* rows of logits; rows whose target is not ignored */
    int V;              /* classes */
    int *targets;       /* [rows], a copy of the caller's */
    double *max;        /* [rows], m: the row's largest logit */
    double *logsum;     /* [rows], log(sum_v exp(x_v - m)); lse = m + logsum */
    ag_real *expd;      /* [rows, V], exp(x_v - m): p_v = expd_v / exp(logsum) */
} ag__xent;
/* kernels/cross_entropy.c: the forward's rows, each row's m, exp(x - m)
 * and log sum kept in sv (-inf and 0 for an ignored row), loss_r in
 * loss[r] (when loss is not NULL; 0 for an ignored row), the counted
 * rows' sum in *total; the backward's dx, stored when fresh, else added. */
bool ag__k_cross_entropy_forward(ag__xent *sv, int ignore_index, double ls, const ag_real *x, ag_real *loss,
                                 double *total);
bool ag__k_cross_entropy_backward(const ag__xent *sv, int ignore, ag_reduction reduction, double ls,
                                  const ag_real *dy, ag_real *dx, bool fresh);

/* ops/dropout.c: y_i = x_i scale_i and dx_i (+)= dy_i scale_i, scale_i =
 * keep where kept_i, else 0 (kept NULL: scale_i = 1); dx stored when
 * fresh, else added (kernels/dropout.c). */
bool ag__k_dropout_forward(size_t n, const ag_real *x, const unsigned char *kept, ag_real keep, ag_real *y);
bool ag__k_dropout_backward(size_t n, const ag_real *dy, const unsigned char *kept, ag_real keep, ag_real *dx,
                            bool fresh);

/* ops/permute.c: y [shape] gathered from x, whose stride along y's axis
 * k is st[k], and its backward, dx stored when fresh, else added; only
 * when y's last axis is x's (st[nd - 1] == 1) (kernels/permute.c). */
bool ag__k_permute_forward(int nd, const int *shape, const size_t *st, const ag_real *x, ag_real *y);
bool ag__k_permute_backward(int nd, const int *shape, const size_t *st, const ag_real *dy, ag_real *dx, bool fresh);

/* ops/masked_softmax.c: all rows (threads), mm the mask's map
 * (kernels/masked_softmax.c). */
bool ag__k_masked_softmax_forward(ag_graph *g, const ag_tensor *x, const ag_tensor *mask, const ag__mask_map *mm,
                                  ag_real scale, ag_real fill, ag_tensor *y);
bool ag__k_masked_softmax_backward(const ag_tensor *y, const ag_tensor *mask, const ag__mask_map *mm, ag_real scale,
                                   ag_real *dx);
/* Its forward on `rows` rows of n values, ld apart, that are
 * rows r0.. of the whole (for the mask): z = mask ? scale x : fill (z may
 * be x), then y = softmax(z) (y may be z).  mask NULL: no mask (mm
 * unread).  A row may be the first n values of a longer one. */
void ag__masked_softmax_rows(size_t r0, size_t rows, size_t n, size_t ld, const ag_real *x, const ag_tensor *mask,
                             const ag__mask_map *mm, ag_real scale, ag_real fill, ag_real *z, ag_real *y);
/* Its first step alone on those rows: z = mask ? scale x : fill. */
void ag__masked_fill_rows(size_t r0, size_t rows, size_t n, size_t ld, const ag_real *x, const ag_tensor *mask,
                          const ag__mask_map *mm, ag_real scale, ag_real fill, ag_real *z);
/* Its backward on those rows, from y and dy: dx += (add) or = (dx may be
 * dy) mask ? scale y (dy - sum_k dy_k y_k) : 0. */
void ag__masked_softmax_rows_backward(size_t r0, size_t rows, size_t n, size_t ld, const ag_real *y,
                                      const ag_real *dy, ag_real *dx, const ag_tensor *mask, const ag__mask_map *mm,
                                      ag_real scale, bool add);

/* The element-wise ops' kernels (src/kernels/elementwise.c), one entry per
 * op that has one, found by op id; NULL for an op with none.  A unary op's
 * entry gives fwd and bwd, or fwd_slope, a forward that keeps dy/dx for a
 * backward that needs nothing else (GELU's: ag__unary_slope); a binary
 * op's gives fwd, bwd and, optionally, rows_fwd (ag__binary_rows). */
typedef struct ag__unary_kernel {
    ag_unary_fwd fwd;
    ag_unary_bwd bwd;
    ag_unary_fwd_slope fwd_slope;
} ag__unary_kernel;
typedef struct ag__binary_kernel {
    ag_binary_fwd fwd;
    ag_binary_bwd bwd;
    ag_binary_rows rows_fwd;
} ag__binary_kernel;
const ag__unary_kernel *ag__unary_kernel_of(int op);
const ag__binary_kernel *ag__binary_kernel_of(int op);

#endif
