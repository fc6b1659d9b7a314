/* tests/bench/bf16.h: bench's bf16 section (included by bench.c after
 * peak.h and gpt.h, for emit, best_time and their loops): the bf16
 * products (docs/precision.md) against fp32's, in the same run, one thread.
 *
 *   vdpbf16ps peak: 12 independent chains of vdpbf16ps, 64 flops each (16
 *                   lanes, 2 products, each a multiply and an add);
 *   FMA peak:       peak.h's 12 chains of zmm FMAs (32 flops each);
 *   gemm:           ag__gemm_bf16 on rounded operands and ag__gemm, M x N x
 *                   K = 512 x 512 x 2048, 768 x 768 x 4096, 2048 x 768 x 768,
 *                   and PyTorch's torch.matmul in bf16 and fp32 on the same
 *                   shapes when it is there;
 *   GPT step:       gpt.h's training step (examples/gpt's default model)
 *                   with the process default at fp32, then at bf16.
 * Shares of peak are against the instruction loops measured here. */

#if AG_BF16_KERNEL && !defined(AG_DOUBLE)
__attribute__((target("avx512f,avx512bf16"), noinline)) static float dpbf16_chains(void)
{
    __m512 acc[12];
    __m512i x = _mm512_set1_epi32(0x3f7f3f7f), y = _mm512_set1_epi32(0x3a833a83); /* pairs (0.996, 0.996), (1e-3, 1e-3) */
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) acc[i] = _mm512_set1_ps((float)i);
    for (int s = 0; s < PEAK_STEPS; s++) {
        __asm__("" : "+v"(x)); /* not hoisted out of the loop */
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)x, (__m512bh)y);
    }
#pragma GCC unroll 12
    for (int i = 1; i < 12; i++) acc[0] = _mm512_add_ps(acc[0], acc[i]);
    return _mm512_reduce_add_ps(acc[0]);
}
static void peak_dpbf16(void *p) { ((fma_ctx *)p)->sink += dpbf16_chains(); }

typedef struct bf16_gemm_ctx {
    int M, N, K, bf16;
    float *a, *b, *c;
} bf16_gemm_ctx;

static void bf16_gemm_run(void *p)
{
    bf16_gemm_ctx *k = p;
    (k->bf16 ? ag__gemm_bf16 : ag__gemm)(0, 0, k->M, k->N, k->K, k->a, k->K, k->b, k->N, 0, k->c, k->N);
}

/* PyTorch's matmul GFLOP/s for the three shapes, bf16 then fp32 (0: not run) */
static void torch_bf16_gemm(const char *python, double out[3][2])
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "OMP_NUM_THREADS=1 %s -c 'import time, torch\n"
             "torch.set_num_threads(1)\n"
             "for m, n, k in ((512, 512, 2048), (768, 768, 4096), (2048, 768, 768)):\n"
             "    for dt in (torch.bfloat16, torch.float32):\n"
             "        a, b = torch.randn(m, k).to(dt), torch.randn(k, n).to(dt)\n"
             "        torch.matmul(a, b); best = 1e9\n"
             "        for _ in range(5):\n"
             "            t = time.perf_counter(); torch.matmul(a, b); best = min(best, time.perf_counter() - t)\n"
             "        print(2 * m * n * k / best / 1e9)\n' 2>/dev/null",
             python);
    FILE *f = popen(cmd, "r");
    for (int s = 0; s < 3; s++)
        for (int d = 0; d < 2; d++)
            if (!f || fscanf(f, "%lf", &out[s][d]) != 1) out[s][d] = 0;
    if (f) pclose(f);
}

static void bench_bf16(const char *python, int have_torch, double budget)
{
    if (!ag__isa_bf16()) {
        emit("\n### bf16 products: this CPU (or the level forced) has no AVX512_BF16: the bf16 products run "
             "on the fp32 kernel, at its speed\n");
        return;
    }
    ag_set_threads(1);
    fma_ctx f = {0, AG_ISA_AVX512};
    double fma = 2.0 * 12 * PEAK_STEPS * 16 / best_time(peak_fma, &f, budget) / 1e9;
    double dp = 64.0 * 12 * PEAK_STEPS / best_time(peak_dpbf16, &f, budget) / 1e9;
    emit("\n### bf16 products against fp32, one thread (same run)\n\n"
         "Instruction loops: vdpbf16ps %.0f GFLOP/s, fp32 FMA (zmm) %.0f GFLOP/s: %.2fx.\n\n"
         "| M x N x K | bf16 gemm, GFLOP/s | share of vdpbf16ps peak | fp32 gemm, GFLOP/s | bf16 / fp32 |"
         " PyTorch bf16 | PyTorch fp32 | bf16 / PyTorch bf16 |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
         dp, fma, dp / fma);
    if (f.sink == 12345) emit(" "); /* the chains' result is used */
    static const int shapes[3][3] = {{512, 512, 2048}, {768, 768, 4096}, {2048, 768, 768}};
    double torch[3][2] = {{0}};
    if (have_torch) torch_bf16_gemm(python, torch);
    for (int s = 0; s < 3; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        bf16_gemm_ctx k = {M, N, K, 1, malloc((size_t)M * K * 4), malloc((size_t)K * N * 4), malloc((size_t)M * N * 4)};
        if (!k.a || !k.b || !k.c) return;
        for (size_t i = 0; i < (size_t)M * K; i++) k.a[i] = ag_bf16_round((float)(i % 7) / 7);
        for (size_t i = 0; i < (size_t)K * N; i++) k.b[i] = ag_bf16_round((float)(i % 5) / 5);
        double flops = 2.0 * M * N * K, b16 = flops / best_time(bf16_gemm_run, &k, budget) / 1e9;
        k.bf16 = 0;
        double f32 = flops / best_time(bf16_gemm_run, &k, budget) / 1e9;
        emit("| %d x %d x %d | %.0f | %.0f%% | %.0f | %.2fx | ", M, N, K, b16, 100 * b16 / dp, f32, b16 / f32);
        if (torch[s][0] > 0) emit("%.0f | %.0f | %.2fx |\n", torch[s][0], torch[s][1], b16 / torch[s][0]);
        else emit("- | - | - |\n");
        free(k.a), free(k.b), free(k.c);
    }
    /* the GPT step, the process default at each precision */
    double ms[2];
    for (int p = 0; p < 2; p++) {
        ag_set_precision(p ? AG_PRECISION_BF16 : AG_PRECISION_FP32);
        gpt_bench b;
        if (gpt_bench_new(&b, 1)) return;
        ms[p] = 1e3 * best_time(gpt_step, &b, 5 * budget);
        gpt_bench_free(&b);
    }
    ag_set_precision(AG_PRECISION_FP32);
    emit("\nGPT training step (examples/gpt's default model, batch 32, one thread): fp32 %.2f ms, bf16 %.2f ms: "
         "bf16 %.2fx fp32's speed.\n",
         ms[0], ms[1], ms[0] / ms[1]);
}
#else
static void bench_bf16(const char *python, int have_torch, double budget)
{
    (void)python, (void)have_torch, (void)budget;
    emit("\n### bf16 products: a build without the AVX512_BF16 kernel (x86-64 float, gcc 12 or clang 14)\n");
}
#endif
