/* ops/bf16.c: bfloat16, the other precision of the matrix products.
 *
 * A bf16 number is the top half of a float: the same sign bit, the same
 * 8 exponent bits (the same range, 1e-38 to 3e38), and 7 of its 23
 * fraction bits.  Rounding a float to bf16 cuts the low 16 bits off,
 * rounding to the nearest even, as PyTorch's tensor.bfloat16() does:
 *
 *   bf16(x) = the 16 high bits of (bits(x) + 0x7fff + bit 16 of bits(x))
 *
 * The added 0x7fff carries into bit 16 exactly when the cut-off half is
 * more than half an ulp of the result; at exactly half (a tie) the carry
 * happens when bit 16 is 1, so the result ends in 0: the even one.  A
 * carry out of the fraction steps the exponent up, so the largest finite
 * floats (from 0x7f7f8000, half an ulp below bf16's largest step) round to
 * infinity, as in any rounding.  Subnormals round the same way; -0 stays
 * -0.  A NaN stays a NaN: PyTorch keeps none of its payload and gives
 * 0x7fc0 for every NaN (the rule above could carry a NaN into infinity).
 *
 * Under AG_PRECISION_BF16 (ag_graph_set_precision, ag_set_precision)
 * matmul, linear and its fused forms, and attention's products
 * (ops/attention.c), round their operands to bf16
 * (ag__bf16_operand below), forward and backward, and then run the same
 * product as in fp32: each product of two 8-bit significands has at most
 * 16 bits and is exact in a float, and the sums are fp32's (ag_real's:
 * double in the double build), as under PyTorch's autocast.  So the
 * reference product in bf16 is ops/matmul.c's and ops/linear.c's loops on
 * rounded operands, and only the operands change.  The kernel room rounds
 * by the same rule where it packs the operands and multiplies the halves
 * themselves (kernels/gemm_bf16.c), with no copies.
 *
 * Everything else stays fp32: the parameters (the master weights), their
 * gradients, the optimizer's state, layer norm, softmax, the losses.  The
 * values stored are floats whose low 16 bits are zero, never bf16 arrays,
 * so a checkpoint is the same file in both precisions. */
#include "core/internal.h"
#include "kernels/kernels.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

float ag_bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) u = 0x7fc00000u; /* NaN: PyTorch's one NaN */
    else u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u; /* to nearest, ties to even */
    memcpy(&x, &u, sizeof x);
    return x;
}

/* In the double build, through float first, as PyTorch's double
 * tensor.bfloat16() goes (and a float is what a bf16 number widens to). */
void ag__bf16_round_all(size_t n, const ag_real *x, ag_real *y)
{
    if (ag__fast() && ag__k_bf16_round(n, x, y)) return; /* the same rule, in vectors */
    for (size_t i = 0; i < n; i++) y[i] = (ag_real)ag_bf16_round((float)x[i]);
}

const ag_real *ag__bf16_operand(ag_graph *g, const ag_real *x, size_t n)
{
    ag_real *y = ag__alloc(g, (n ? n : 1) * sizeof(ag_real));
    if (y) ag__bf16_round_all(n, x, y);
    return y;
}

/* The process default (AG_PRECISION_FP32 until set), for the graphs that set none. */
static _Atomic int default_precision = AG_PRECISION_FP32;

void ag_set_precision(ag_precision p)
{
    atomic_store_explicit(&default_precision, p == AG_PRECISION_BF16 ? AG_PRECISION_BF16 : AG_PRECISION_FP32,
                          memory_order_relaxed);
}

ag_precision ag_get_precision(void)
{
    return (ag_precision)atomic_load_explicit(&default_precision, memory_order_relaxed);
}

const char *ag_precision_name(ag_precision p) { return p == AG_PRECISION_BF16 ? "bf16" : "fp32"; }

int ag_precision_parse(const char *name, ag_precision *p)
{
    if (!name || !p) return -1;
    if (!strcmp(name, "fp32")) *p = AG_PRECISION_FP32;
    else if (!strcmp(name, "bf16")) *p = AG_PRECISION_BF16;
    else return -1;
    return 0;
}
