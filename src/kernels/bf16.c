/* kernels/bf16.c: ops/bf16.c's rounding over an array, 16 values a step
 * (the compiler's vectors, compiled per instruction set): the same integer
 * rule, y = the 16 high bits of (bits(x) + 0x7fff + bit 16), NaN -> 0x7fc0,
 * so the same bits as ag_bf16_round. */
#include "kernels/bf16.h"
#include "kernels/kernels.h"

#include <string.h>

#ifndef AG_DOUBLE /* the double build rounds by ops/bf16.c's loop */
static inline AG_ALWAYS_INLINE void round_floats(size_t n, const float *x, float *y)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        ag__u32x16 u;
        memcpy(&u, x + i, sizeof u);
        ag__bf16_bits16(&u);
        memcpy(y + i, &u, sizeof u);
    }
    for (; i < n; i++) y[i] = ag_bf16_round(x[i]);
}
AG_ISA_CLONES(void, round_floats, (size_t n, const float *x, float *y), round_floats(n, x, y))
#endif

bool ag__k_bf16_round(size_t n, const ag_real *x, ag_real *y)
{
#ifdef AG_DOUBLE
    (void)n, (void)x, (void)y;
    return false;
#else
    AG_ISA_CALL(round_floats, (n, x, y));
    return true;
#endif
}
