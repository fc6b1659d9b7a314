/* src/core/mask_map.c: where each row of a tensor finds its mask values,
 * for a mask that broadcasts to the tensor's shape (attention's [B, 1, 1, S]
 * padding mask, a [T, S] causal one, ...).
 *
 * A tensor of `shape` is read as rows along its last axis; row r's mask
 * values start at ag__mask_row(mm, r) and are mm->along apart (0 when the
 * mask is stretched along the row).  The ops that take a mask
 * (ops/masked_softmax.c, ops/attention.c) and their kernels
 * (src/kernels/masked_softmax.c, attention.c, attention_head512.c) all read
 * a mask this way: it lives here, below both rooms. */
#include "core/internal.h"

/* The mask's stride along each axis of x (ndim axes of the given shape):
 * the product of the mask's later sizes, or 0 along an axis the mask
 * stretches (its size 1, or missing, where x's is not). */
void ag__mask_map_init(ag__mask_map *mm, int ndim, const int *shape, const ag_tensor *mask)
{
    size_t s = 1;
    mm->nd = ndim - 1;
    for (int k = ndim - 1; k >= 0; k--) {
        int km = mask->ndim - ndim + k;
        int dm = km >= 0 ? mask->shape[km] : 1;
        size_t stride = (dm == 1 && shape[k] != 1) ? 0 : s;
        if (k == ndim - 1) mm->along = stride;
        else mm->st[k] = stride, mm->shape[k] = shape[k];
        s *= (size_t)dm;
    }
}

/* Row r's index along each leading axis (r in mixed radix, the last axis
 * fastest), each times the mask's stride there. */
size_t ag__mask_row(const ag__mask_map *mm, size_t r)
{
    size_t off = 0;
    for (int k = mm->nd - 1; k >= 0; k--) {
        off += (r % (size_t)mm->shape[k]) * mm->st[k];
        r /= (size_t)mm->shape[k];
    }
    return off;
}
