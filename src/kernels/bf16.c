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

/* One buffer for all of the call's copies, each at a multiple of 64 bytes;
 * a graph's arena would keep every product's copies until the reset,
 * half as much again as the step's own memory. */
bool ag__k_bf16_copies(ag_graph *g, int count, const ag_real **x[], const size_t n[])
{
    enum { LINE = 64 / sizeof(ag_real) };
    size_t total = 0;
    for (int i = 0; i < count; i++) total += (n[i] + LINE - 1) / LINE * LINE;
    ag_real *buf = ag__temp_copies(g, (total ? total : 1) * sizeof(ag_real));
    if (!buf) return false;
    for (int i = 0; i < count; i++) {
        if (!n[i]) continue; /* not read: left as it is */
        ag__bf16_round_all(n[i], *x[i], buf);
        *x[i] = buf;
        buf += (n[i] + LINE - 1) / LINE * LINE;
    }
    return true;
}
