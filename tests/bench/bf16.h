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
 *                   vdpbf16ps, then with AMX;
 *   attention:      the flash kernel's forward and backward at T 2048, fp32
 *                   and bf16 (bf16_flash_line), on every build.
 * Shares of peak are against the instruction loops measured here. */

/* Attention past the flash kernel's seam: GPT-2 small's heads (B 1, H 12,
 * D 64) at T 2048, causal, forward and backward, one thread, fp32 then
 * bf16 products.  Under bf16 the flash kernel makes its scores twice in
 * the forward and P and dP once more in the backward (docs/precision.md):
 * this is what that costs. */
typedef struct flash_ctx {
    ag_graph *g;
    ag_real *x; /* q, k, v values, 3 T H D */
} flash_ctx;
enum { FLASH_T = 2048, FLASH_H = 12, FLASH_D = 64 };

static void flash_step(void *p)
{
    flash_ctx *c = p;
    size_t n = (size_t)FLASH_T * FLASH_H * FLASH_D;
    ag_graph_reset(c->g);
    ag_tensor *x[3];
    for (int i = 0; i < 3; i++) {
        x[i] = ag_tensor_from(c->g, 4, (int[]){1, FLASH_T, FLASH_H, FLASH_D}, c->x + i * n);
        ag_set_requires_grad(x[i], 1);
    }
    ag_tensor *y = ag_scaled_dot_product_attention(c->g, x[0], x[1], x[2],
                                                   &(ag_sdpa_config){.causal = AG_CAUSAL_TOP_LEFT, .heads_layout = 1});
    if (!y || ag_backward(c->g, ag_sum_all(c->g, y)) != AG_OK) fprintf(stderr, "bench: %s\n", ag_graph_error(c->g));
}

static void bf16_flash_line(double budget)
{
    size_t n = 3 * (size_t)FLASH_T * FLASH_H * FLASH_D;
    flash_ctx c = {ag_graph_new(), malloc(n * sizeof(ag_real))};
    if (!c.g || !c.x) {
        ag_graph_free(c.g), free(c.x);
        return;
    }
    ag_rng r;
    ag_rng_seed(&r, 2048);
    for (size_t i = 0; i < n; i++) c.x[i] = (ag_real)ag_rng_normal(&r);
    ag_set_threads(1);
    double ms[2] = {INFINITY, INFINITY};
    for (int round = 0; round < 3; round++)
        for (int p = 0; p < 2; p++) {
            ag_graph_set_precision(c.g, p ? AG_PRECISION_BF16 : AG_PRECISION_FP32);
            double t = 1e3 * best_time(flash_step, &c, budget);
            if (t < ms[p]) ms[p] = t;
        }
    emit("\nAttention, flash kernel (B 1, H 12, D 64, T %d, causal), forward and backward, one thread: fp32 %.1f ms, "
         "bf16 products %.1f ms (%.2fx fp32's speed).\n",
         FLASH_T, ms[0], ms[1], ms[0] / ms[1]);
    ag_graph_free(c.g), free(c.x);
}

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
        bf16_flash_line(budget);
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
    bf16_flash_line(budget);
}
#else
static void bench_bf16(const char *python, int have_torch, double budget)
{
    (void)python, (void)have_torch, (void)budget;
    emit("\n### bf16 products: a build without the AVX512_BF16 kernel (x86-64 float, gcc 12 or clang 14)\n");
    bf16_flash_line(budget);
}
#endif
