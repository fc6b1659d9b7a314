/* cpu.c: which instruction set the vectorised kernels use.
 *
 * A few kernels (gemm's micro-kernels; exp, max and softmax over rows; the
 * dropout draws) are compiled more than once: a portable baseline, and on
 * x86-64 an AVX2 and an AVX-512 variant of the same source.  Each is an
 * ordinary function whose entry point switches on ag__isa(): no ifunc
 * resolvers, so gcc and clang (and Mach-O, which has no ifuncs) all build
 * it the same way.
 *
 * Invariant: the level is read from the CPU once (the first call, from any
 * thread) and changes only through ag__isa_force, which tests and the
 * benchmark call while no kernel runs. */
#include "core/internal.h"

#include <stdatomic.h>

static const char *const names[AG_ISA_COUNT] = {
    [AG_ISA_BASE] = "baseline",
    [AG_ISA_AVX2] = "avx2",
    [AG_ISA_AVX512] = "avx512",
};

/* -1 until read; then the level in use (read inline by ag__isa) */
_Atomic int ag__isa_level = -1;

static int best(void)
{
#if AG_X86_KERNELS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return AG_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return AG_ISA_AVX2;
#endif
    return AG_ISA_BASE;
}

int ag__isa_read(void)
{
    int l = best(); /* threads that race here all store the same value */
    atomic_store_explicit(&ag__isa_level, l, memory_order_relaxed);
    return l;
}

const char *ag__isa_force(const char *name)
{
    int want = best();
    for (int l = 0; name && l < want; l++)
        if (!strcmp(name, names[l])) want = l; /* only a level the CPU has */
    atomic_store_explicit(&ag__isa_level, want, memory_order_relaxed);
    return names[want];
}
