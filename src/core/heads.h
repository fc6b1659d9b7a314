/* core/heads.h: attention's heads layout, read and written in place by
 * the ops of multi-head attention (ops/matmul_heads.c, ops/attention.c).
 *
 * A tensor stored [B, R, H, C] (a linear layer's output [B, R, H C],
 * reshaped: a view) is read as the [B, H, R, C] that
 * permute(x, {0, 2, 1, 3}) would copy out: head h of sentence b is an
 * R x C matrix whose rows are H C values apart. */
#ifndef AG_CORE_HEADS_H
#define AG_CORE_HEADS_H

#include <stddef.h>

/* Where row r of head h of sentence b starts in x stored [B, R, H, C]. */
static inline size_t ag__head_row(int R, int H, int C, int b, int h, int r)
{
    return (((size_t)b * (size_t)R + (size_t)r) * (size_t)H + (size_t)h) * (size_t)C;
}

/* The layout's strides, st[0]: from a sentence to the next (R H C);
 * st[1]: from a head to the next (C); st[2]: from a row to the next (H C). */
static inline void ag__head_strides(int R, int H, int C, size_t st[3])
{
    st[0] = ag__head_row(R, H, C, 1, 0, 0);
    st[1] = ag__head_row(R, H, C, 0, 1, 0);
    st[2] = ag__head_row(R, H, C, 0, 0, 1);
}

#endif
