/* kernels/attention.h: what the attention kernel (kernels/attention.c)
 * shares with its kernel for toy heads (kernels/attention_head512.c): the
 * job that a block of heads is given, forward or backward, where a head
 * starts in it, and the kernel's entry points.
 *
 * Invariant: a job describes B H heads in one of the layouts of
 * ops/attention.c's header (ag__attn: heads layout or PyTorch's, Hkv
 * key/value heads; y and dO like q with Dv, P [B, H, T, S]); either path
 * reads and writes it alike, so
 * that kernels/attention.c may hand any head to the kernel when ag__head512_plan says
 * it fits. */
#ifndef AG_KERNELS_ATTENTION_H
#define AG_KERNELS_ATTENTION_H

#include "core/internal.h"
#include "kernels/kernels.h"

/* Everything a block of heads needs, forward or backward. */
typedef struct ag__att_job {
    const ag__attn *a; /* the heads' layout, causal rule */
    int T, S, H, D, Dv;
    int ldq, ldk, ldv, ldy; /* the rows' strides in q (and dQ), k, v, y (and dO) */
    size_t heads, nt; /* B H heads, cut into nt blocks of whole groups */
    size_t group;     /* H / Hkv: the query heads that share a key/value head */
    const ag__mask_map *mm, *bm; /* where a row's mask and bias values start */
    const ag_tensor *mask, *bias;
    const int *kend, *tfirst, *last; /* kernels/attention.c's seen_keys' */
    const ag_real *q, *k, *v, *dy;
    ag_real *y, *p, *dq, *dk, *dv, *scratch;
    ag_real *ml; /* the flash kernel's: each row's max m and sum l [B H T][2], in P's place */
    size_t scratch_stride;
    ag_real *dm;       /* the bias's gradient (NULL: not wanted), added to by block 0, */
    ag_real *dm_parts; /* and blocks 1.. each into its part, dm_stride apart, when heads share M */
    size_t dm_stride;
    ag_real scale, fill, beta_q, beta_k, beta_v;
    bool head512;     /* the heads fit head512's registers (ag__head512_plan) */
    int ek[8], tf[4]; /* head512's: groups of 8 queries see keys [0, ek); keys s0 .. s0 + 7, queries [tf, T) */
    bool one_mask;    /* head512's: every head has the same mask (or none), */
    uint32_t keep[64]; /* whose bit s of keep[t] says that query t may see key s */
} ag__att_job;

/* Head bh = b H + h: where it starts in q and y (kv false, rows T) or in
 * k and v (kv true, rows S: its key/value head's), cols D or Dv. */
static inline size_t ag__att_at(const ag__att_job *j, size_t bh, int rows, int cols, bool kv)
{
    return ag__attn_head(j->a, bh, rows, cols, kv);
}

/* scores += M (the bias, ops/attention.c) where the mask and causal rule
 * keep the key: rows [0, n) of z (queries t0.., rows ld apart), keys
 * [s0, s0 + kb), of head bh.  Nothing without a bias. */
void ag__att_add_bias(const ag__att_job *j, size_t bh, int t0, int n, int s0, int kb, ag_real *z, size_t ld);

/* The bias's gradient from the same rows and keys of dz, which holds
 * P (dP - rowsum(dP P)) where the key is kept and 0 elsewhere: dM += dz
 * where kept (into j->dm, the block's share), then dz = scale dz, dA.
 * Nothing but the scaling when j->dm is NULL. */
void ag__att_bias_grad(const ag__att_job *j, size_t bh, int t0, int n, int s0, int kb, ag_real *dz, size_t ld);

/* Dropout on rows [0, n) of x (queries t0.., rows ld apart), keys
 * [s0, s0 + kb), of head bh: x = x Z, Z each weight's factor
 * (ag__attn_kept's bits, drawn in vector lanes; kernels/attention_flash.c).
 * Nothing without dropout. */
void ag__att_drop(const ag__att_job *j, size_t bh, int t0, int n, int s0, int kb, ag_real *x, int ld);

/* Queries per block on the general path when S > 32 (kernels/attention.c's
 * block_rows), whose kend the plan holds; the flash kernel's blocks too. */
enum { AG__ATT_BLOCK = 64 };

/* The flash kernel (kernels/attention_flash.c), for rows of more than
 * AG__FLASH_KEYS keys: head bh forward (y and j->ml) or backward (dQ, dK,
 * dV added to: their buffers hold zeros or earlier gradients), in the
 * caller's scratch of ag__flash_scratch() values. */
void ag__flash_forward(const ag__att_job *j, size_t bh, ag_real *scratch);
void ag__flash_backward(const ag__att_job *j, size_t bh, ag_real *scratch);
size_t ag__flash_scratch(bool backward);

/* Whether j's heads fit the kernel for toy heads (no bias, no dropout; S <= 32 keys, a
 * multiple of 8; D, Dv <= 16; T <= 64; on AVX-512, in float); if they do,
 * fills j->ek and j->tf from j->last, and j->keep from the mask when one
 * mask serves every head.  Never true where the kernel is not
 * compiled (off x86, or in double). */
bool ag__head512_plan(ag__att_job *j);

#if AG_X86_KERNELS && !defined(AG_DOUBLE)
#define AG_HAVE_HEAD512 1
/* Head bh forward: P and y; backward: dQ, dK, dV (+)= as j's betas say,
 * dA [T, S] in the caller's scratch.  Only when ag__head512_plan(j). */
void ag__head512_forward(const ag__att_job *j, size_t bh);
void ag__head512_backward(const ag__att_job *j, size_t bh, float *da);
#endif

#endif
