/* tests/bench/bf16.h: bench's bf16 section (included by bench.c after
 * peak.h and gpt.h, for emit, best_time and their loops): the bf16
 * products (docs/precision.md) against fp32's, in the same run, one thread.
 *
 *   vdpbf16ps peak: 12 independent chains of vdpbf16ps, 64 flops each (16
 *                   lanes, 2 products, each a multiply and an add);
 *   FMA peak:       peak.h's 12 chains of zmm FMAs (32 flops each);
 *   AMX peak:       ag__amx_peak_loop, TDPBF16PS into four tiles (16 x 16
 *                   x 32 multiply-adds each), where the tiles are used;
 *   gemm:           ag__gemm_amx (AMX's tiles, where the process may use
 *                   them), ag__gemm_bf16 forced to vdpbf16ps, and ag__gemm,
 *                   in turn, M x N x
 *                   K = 512 x 512 x 2048, 768 x 768 x 4096, 2048 x 768 x 768,
 *                   and PyTorch's torch.matmul in bf16 and fp32 on the same
 *                   shapes when it is there;
 *   GPT step:       gpt.h's training step (examples/gpt's default model)
 *                   with the process default at fp32, then at bf16 with
 *                   vdpbf16ps, then with AMX.
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
static void peak_amx(void *p) { ((fma_ctx *)p)->sink += ag__amx_peak_loop(PEAK_STEPS); }

typedef struct bf16_gemm_ctx {
    int M, N, K, kind; /* 0 fp32 (ag__gemm), 1 bf16 by vdpbf16ps, 2 bf16 by AMX's tiles */
    float *a, *b, *c;
} bf16_gemm_ctx;

static void bf16_gemm_run(void *p)
{
    bf16_gemm_ctx *k = p;
    if (k->kind == 2) ag__gemm_amx(0, 0, k->M, k->N, k->K, k->a, k->K, k->b, k->N, 0, k->c, k->N);
    else (k->kind ? ag__gemm_bf16 : ag__gemm)(0, 0, k->M, k->N, k->K, k->a, k->K, k->b, k->N, 0, k->c, k->N);
    /* (kind 1 runs with the level forced to avx512bf16: bf16_gemm_rates) */
}

/* GFLOP/s of the three kernels on one shape, out[kind]: measured in turn,
 * three rounds, the best of each (a busy machine slows one round, not
 * one kernel); out[2] 0 without AMX */
static void bf16_gemm_rates(int M, int N, int K, const char *level, double budget, double out[3])
{
    bf16_gemm_ctx k = {M, N, K, 0, malloc((size_t)M * K * 4), malloc((size_t)K * N * 4), malloc((size_t)M * N * 4)};
    out[0] = out[1] = out[2] = 0;
    if (k.a && k.b && k.c) {
        for (size_t i = 0; i < (size_t)M * K; i++) k.a[i] = ag_bf16_round((float)(i % 7) / 7);
        for (size_t i = 0; i < (size_t)K * N; i++) k.b[i] = ag_bf16_round((float)(i % 5) / 5);
        for (int round = 0; round < 3; round++)
            for (k.kind = 0; k.kind < (strcmp(level, "amx") ? 2 : 3); k.kind++) {
                ag__isa_force(k.kind == 1 ? "avx512bf16" : level);
                double r = 2.0 * M * N * K / best_time(bf16_gemm_run, &k, budget / 3) / 1e9;
                if (r > out[k.kind]) out[k.kind] = r;
            }
        ag__isa_force(level);
    }
    free(k.a), free(k.b), free(k.c);
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
         "Instruction loops: vdpbf16ps %.0f GFLOP/s, fp32 FMA (zmm) %.0f GFLOP/s: %.2fx.  Products in "
         "GFLOP/s: AMX's tiles, vdpbf16ps (and its share of its loop's peak), fp32, PyTorch's torch.matmul.\n\n",
         dp, fma, dp / fma);
    if (f.sink == 12345) emit(" "); /* the chains' result is used */
    static const int shapes[3][3] = {{512, 512, 2048}, {768, 768, 4096}, {2048, 768, 768}};
    double torch[3][2] = {{0}};
    if (have_torch) torch_bf16_gemm(python, torch);
    const char *why = NULL, *level = ag__isa_bf16_kernel(&why); /* "amx" or "avx512bf16" */
    bool amx = !why;
    double tiles = 0; /* the tiles' loop: 4 TDPBF16PS of 16 x 16 x 32 multiply-adds a step */
    if (amx) tiles = 4.0 * 2 * 16 * 16 * 32 * PEAK_STEPS / best_time(peak_amx, &f, budget) / 1e9;
    if (amx) emit("AMX's tiles, a loop of TDPBF16PS alone: %.0f GFLOP/s, %.2fx vdpbf16ps's loop.\n\n", tiles, tiles / dp);
    else emit("AMX: not used (%s).\n\n", why);
    emit("| M x N x K | AMX | its share of peak | vdpbf16ps | its share of peak | fp32 | AMX / fp32 |"
         " AMX / vdpbf16ps | PyTorch bf16 | PyTorch fp32 | AMX / PyTorch bf16 |\n"
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int s = 0; s < 3; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        double r[3];
        bf16_gemm_rates(M, N, K, level, budget, r);
        char amx_r[32] = "-", amx_share[16] = "-", ratios[2][16], vs_torch[16];
        if (amx) snprintf(amx_r, sizeof amx_r, "%.0f", r[2]), snprintf(amx_share, sizeof amx_share, "%.0f%%", 100 * r[2] / tiles);
        ratio_cell(ratios[0], sizeof ratios[0], r[2] / r[0]), ratio_cell(ratios[1], sizeof ratios[1], r[2] / r[1]);
        ratio_cell(vs_torch, sizeof vs_torch, torch[s][0] > 0 ? r[2] / torch[s][0] : 0);
        emit("| %d x %d x %d | %s | %s | %.0f | %.0f%% | %.0f | %s | %s | ", M, N, K, amx_r, amx_share, r[1],
             100 * r[1] / dp, r[0], ratios[0], ratios[1]);
        if (torch[s][0] > 0) emit("%.0f | %.0f | %s |\n", torch[s][0], torch[s][1], vs_torch);
        else emit("- | - | - |\n");
    }
    /* the GPT step, the process default at each precision, bf16 with the
     * tiles and with vdpbf16ps, in turn, three rounds, the best of each */
    double ms[3] = {INFINITY, INFINITY, INFINITY};
    for (int round = 0; round < 3; round++)
        for (int p = 0; p < (amx ? 3 : 2); p++) {
            ag_set_precision(p ? AG_PRECISION_BF16 : AG_PRECISION_FP32);
            ag__isa_force(p == 1 ? "avx512bf16" : level);
            gpt_bench b;
            if (gpt_bench_new(&b, 1)) return;
            double t = 1e3 * best_time(gpt_step, &b, 5 * budget / 3);
            if (t < ms[p]) ms[p] = t;
            gpt_bench_free(&b);
        }
    ag__isa_force(level);
    ag_set_precision(AG_PRECISION_FP32);
    emit("\nGPT training step (examples/gpt's default model, batch 32, one thread): fp32 %.2f ms, bf16 by vdpbf16ps "
         "%.2f ms (%.2fx fp32's speed)",
         ms[0], ms[1], ms[0] / ms[1]);
    if (amx) emit(", bf16 by AMX %.2f ms (%.2fx fp32's speed)", ms[2], ms[0] / ms[2]);
    emit(".\n");
}
#else
static void bench_bf16(const char *python, int have_torch, double budget)
{
    (void)python, (void)have_torch, (void)budget;
    emit("\n### bf16 products: a build without the AVX512_BF16 kernel (x86-64 float, gcc 12 or clang 14)\n");
}
#endif
