/* tests/bench/peak.h: bench's `--only peak` section (included by bench.c
 * for its emit and best_time): how close gemm's micro-kernel comes to the
 * core's multiply-add peak, measured, at each x86 level the CPU has (or
 * the one --isa forces).  docs/kernels.md sets it beside llvm-mca's
 * estimate of the same loop (tests/bench/mca.sh reads this table).
 *
 *   FMA peak:  a loop of 12 independent FMA chains (AVX-512's zmm, AVX2's
 *              ymm): nothing but multiply-adds, as many as the units take;
 *   in cache:  a product whose operands stay in L1 and L2 and that the
 *              blocked product runs with no packing (72 x 128 x 384: 72
 *              rows read in place, B read in place, one depth block), so
 *              that nearly all of its time is the micro-kernel;
 *   share:     in cache / FMA peak.
 * One thread; the best of several rounds of each. */

#if AG_X86_KERNELS && !defined(AG_DOUBLE)
#include <immintrin.h>

enum { PEAK_STEPS = 4096 };
typedef struct fma_ctx {
    float sink;
    int level;
} fma_ctx;

/* 12 chains of PEAK_STEPS multiply-adds each: acc = acc x + y */
#define FMA_CHAINS(V, SET1, FMA, ADD, TO_FLOAT)                                                             \
    {                                                                                                          \
        V acc[12], x = SET1(0.999f), y = SET1(1e-3f);                                                          \
        _Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) acc[i] = SET1((float)i);                         \
        for (int s = 0; s < PEAK_STEPS; s++) {                                                                 \
            __asm__("" : "+v"(x)); /* not hoisted out of the loop */                                          \
            _Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) acc[i] = FMA(acc[i], x, y);                  \
        }                                                                                                      \
        _Pragma("GCC unroll 12") for (int i = 1; i < 12; i++) acc[0] = ADD(acc[0], acc[i]);                    \
        return TO_FLOAT(acc[0]);                                                                               \
    }
__attribute__((target("avx512f"), noinline)) static float fma_chains512(void)
    FMA_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_reduce_add_ps)
__attribute__((target("avx2,fma"), noinline)) static float fma_chains256(void)
    FMA_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_cvtss_f32)

static void peak_fma(void *p)
{
    fma_ctx *k = p;
    k->sink += k->level == AG_ISA_AVX512 ? fma_chains512() : fma_chains256();
}

static void peak_in_cache(void *p) /* peak_ctx: gpt.h's operands of gemm_peak */
{
    peak_ctx *k = p;
    ag__gemm(0, 0, 72, 128, 384, k->a, 384, k->b, 128, 0, k->c, 128);
}

static void bench_peak(const char *forced, double budget)
{
    static const char *const names[] = {"avx2", "avx512"};
    static const int levels[] = {AG_ISA_AVX2, AG_ISA_AVX512}, lanes[] = {8, 16};
    ag_set_threads(1);
    peak_ctx k = {malloc(72 * 384 * sizeof(float)), malloc(384 * 128 * sizeof(float)),
                   malloc(72 * 128 * sizeof(float))};
    if (!k.a || !k.b || !k.c) return;
    for (int i = 0; i < 72 * 384; i++) k.a[i] = (float)(i % 7) / 7;
    for (int i = 0; i < 384 * 128; i++) k.b[i] = (float)(i % 5) / 5;
    emit("\n### Peak: gemm's micro-kernel against the core's multiply-add peak, one thread\n\n"
         "FMA peak: 12 independent chains of FMAs; in cache: a 72 x 128 x 384 product read in place (no packing).\n\n"
         "| level | in cache, GFLOP/s | FMA peak, GFLOP/s | measured share of peak |\n|---|---:|---:|---:|\n");
    for (int l = 0; l < 2; l++) {
        if (forced ? strcmp(forced, names[l]) != 0 : strcmp(ag__isa_force(names[l]), names[l]) != 0) continue;
        fma_ctx f = {0, levels[l]};
        double fma = 2.0 * 12 * PEAK_STEPS * lanes[l] / best_time(peak_fma, &f, budget) / 1e9;
        double gemm = 2.0 * 72 * 128 * 384 / best_time(peak_in_cache, &k, budget) / 1e9;
        emit("| %s | %.1f | %.1f | %.0f%% |\n", names[l], gemm, fma, 100 * gemm / fma);
        if (f.sink == 12345) emit(" "); /* the chains' result is used */
    }
    if (!forced) ag__isa_force(NULL);
    free(k.a), free(k.b), free(k.c);
}
#else
static void bench_peak(const char *forced, double budget)
{
    (void)forced, (void)budget;
    emit("\n### Peak: x86-64's float build only\n");
}
#endif
