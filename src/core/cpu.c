/* cpu.c: which instruction set the vectorised kernels use.
 *
 * A few kernels (gemm's micro-kernels; exp, max and softmax over rows; the
 * dropout draws) are compiled more than once: a portable baseline, and on
 * x86-64 an AVX2 and an AVX-512 variant of the same source.  On arm64 the
 * portable code is NEON code already; the NEON level adds gemm's
 * micro-kernel with fused multiply-adds and a tile for 32 registers.  Each is an
 * ordinary function whose entry point switches on ag__isa(): no ifunc
 * resolvers, so gcc and clang (and Mach-O, which has no ifuncs) all build
 * it the same way.
 *
 * The bf16 products have two more kernels beside the AVX-512 level:
 * vdpbf16ps (AVX512_BF16, "avx512bf16") and AMX's tiles ("amx", where
 * Linux grants them: kernels/gemm_amx.c), the best the CPU has unless a
 * lower level is forced.  On arm64 the NEON level has one: BFMLALB and
 * BFMLALT (FEAT_BF16, "neonbf16").
 *
 * Invariant: the level is read from the CPU once (the first call, from any
 * thread) and changes only through ag__isa_force, which tests and the
 * benchmark call while no kernel runs. */
#include "core/internal.h"
#include "kernels/amx.h"

#include <stdatomic.h>
#if AG_BF16_KERNEL && !defined(AG_DOUBLE)
#include <cpuid.h>
#endif
#if AG_NEON_BF16_KERNEL && !defined(AG_DOUBLE)
#include <sys/auxv.h>
#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1UL << 14) /* Linux's arm64 hwcap bit, for older headers */
#endif
#endif

static const char *const names[AG_ISA_COUNT] = {
    [AG_ISA_BASE] = "baseline",
    [AG_ISA_AVX2] = "avx2",
    [AG_ISA_AVX512] = "avx512",
    [AG_ISA_NEON] = "neon",
};

/* -1 until read; then the level in use (read inline by ag__isa) */
_Atomic int ag__isa_level = -1;
/* whether the bf16 products may use their kernel, vdpbf16ps or BFMLAL
 * (set with the level) */
static _Atomic bool bf16_on;
/* whether they may use AMX's tiles (with bf16_on, where Linux grants
 * them: asked at the first bf16 product, so that a process that never
 * runs one never asks; kernels/gemm_amx.c) */
static _Atomic bool amx_on;

/* The level that has the bf16 kernel, and the kernel's name */
#if AG_NEON_KERNELS
#define BF16_LEVEL AG_ISA_NEON
#define BF16_NAME "neonbf16"
#else
#define BF16_LEVEL AG_ISA_AVX512
#define BF16_NAME "avx512bf16"
#endif

/* AVX512_BF16: CPUID leaf 7, sub-leaf 1, EAX bit 5; FEAT_BF16: Linux's
 * HWCAP2_BF16 (and a kernel built: the float build's) */
static bool cpu_bf16(void)
{
#if AG_BF16_KERNEL && !defined(AG_DOUBLE)
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1);
#elif AG_NEON_BF16_KERNEL && !defined(AG_DOUBLE)
    return (getauxval(AT_HWCAP2) & HWCAP2_BF16) != 0;
#else
    return false;
#endif
}

static int best(void)
{
#if AG_X86_KERNELS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return AG_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return AG_ISA_AVX2;
#endif
#if AG_NEON_KERNELS
    return AG_ISA_NEON; /* Advanced SIMD and its FMA: part of every arm64 CPU */
#endif
    return AG_ISA_BASE;
}

/* Whether the CPU, whose best level is `best`, has level l: the baseline,
 * its best, and on x86-64 AVX2 below AVX-512. */
static bool has(int l, int best)
{
    return l == AG_ISA_BASE || l == best || (l == AG_ISA_AVX2 && best == AG_ISA_AVX512);
}

int ag__isa_read(void)
{
    int l = best(); /* threads that race here all store the same value */
    bool bf16 = l == BF16_LEVEL && cpu_bf16();
    atomic_store_explicit(&amx_on, bf16, memory_order_relaxed);
    atomic_store_explicit(&bf16_on, bf16, memory_order_relaxed);
    atomic_store_explicit(&ag__isa_level, l, memory_order_relaxed);
    return l;
}

const char *ag__isa_force(const char *name)
{
    int top = best(), want = top;
    bool bf16 = top == BF16_LEVEL && cpu_bf16();
    if (name && (!strcmp(name, "amx") || !strcmp(name, BF16_NAME))) { /* the tiles on or off */
        bool tiles = !strcmp(name, "amx") && bf16 && ag__amx_permitted(NULL);
        atomic_store_explicit(&amx_on, tiles, memory_order_relaxed);
        atomic_store_explicit(&bf16_on, bf16, memory_order_relaxed);
        atomic_store_explicit(&ag__isa_level, top, memory_order_relaxed);
        return tiles ? "amx" : bf16 ? BF16_NAME : names[top];
    }
    bool named = false; /* a level by name: the bf16 kernel and the tiles off */
    for (int l = 0; name && l < AG_ISA_COUNT; l++)
        if (!strcmp(name, names[l]) && has(l, top)) want = l, named = true;
    atomic_store_explicit(&amx_on, bf16 && !named, memory_order_relaxed);
    atomic_store_explicit(&bf16_on, bf16 && !named, memory_order_relaxed);
    atomic_store_explicit(&ag__isa_level, want, memory_order_relaxed);
    return names[want];
}

bool ag__isa_bf16(void) { return ag__isa() == BF16_LEVEL && atomic_load_explicit(&bf16_on, memory_order_relaxed); }

bool ag__isa_amx(void)
{
    return ag__isa_bf16() && atomic_load_explicit(&amx_on, memory_order_relaxed) && ag__amx_permitted(NULL);
}

const char *ag__isa_bf16_kernel(const char **why_not_amx)
{
    const char *why = NULL;
    if (ag__amx_permitted(&why) && !ag__isa_amx())
        why = ag__isa_bf16() ? "forced off (--isa avx512bf16 or lower)" : "the level in use has no AVX512_BF16";
    if (why_not_amx) *why_not_amx = why;
    return ag__isa_amx() ? "amx" : ag__isa_bf16() ? BF16_NAME : "fp32 kernel";
}
