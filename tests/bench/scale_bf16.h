/* tests/bench/scale_bf16.h: bench's bf16 scale section (`build/bench
 * --only scale-bf16`, `make bench-scale-bf16`; included by bench.c after
 * scale.h, whose sizes, steps and child processes it reuses): the GPT's
 * training step at S, M and XL with bf16 products against attograd's own
 * fp32 step, the PyTorch twin's fp32 step and its step under
 * torch.autocast("cpu", dtype=torch.bfloat16) (the forward under
 * autocast, backward, clip and Adam after it, as PyTorch's recipe), all
 * four in the same run, each in a process of its own (its peak RSS its
 * own), at each thread count asked for.
 *
 * The targets the bf16 products are held to (docs/precision.md), printed
 * as met or not under the table:
 *   step against autocast: S 2.5x, M 1.5x, XL 1.2x; XL against
 *   attograd's fp32: 1.7x; XL's peak RSS at most 0.8x attograd fp32's and
 *   0.7x autocast's. */

typedef struct bf16_row {
    scale_result ag_bf16, ag_fp32, torch_bf16, torch_fp32;
} bf16_row;

/* attograd's step of size z at precision p (the child inherits it) */
static scale_result scale_attograd_at(const scale_size *z, int threads, double budget, ag_precision p)
{
    ag_precision was = ag_get_precision();
    ag_set_precision(p);
    scale_result r = scale_attograd(z, threads, budget);
    ag_set_precision(was);
    return r;
}

static double speedup(scale_result slow, scale_result fast)
{
    return slow.ms > 0 && fast.ms > 0 ? slow.ms / fast.ms : 0;
}

static void bf16_scale_row(const scale_size *z, int threads, const bf16_row *r)
{
    char a[32], b[32];
    ratio_cell(a, sizeof a, speedup(r->torch_bf16, r->ag_bf16));
    ratio_cell(b, sizeof b, speedup(r->ag_fp32, r->ag_bf16));
    emit("| %s | %d | %.1f | %.1f | %.1f | %.1f | %s | %s | %.0f | %.0f | %.0f |\n", z->name, threads, r->ag_bf16.ms,
         r->ag_fp32.ms, r->torch_bf16.ms, r->torch_fp32.ms, a, b, r->ag_bf16.rss_mb, r->ag_fp32.rss_mb,
         r->torch_bf16.rss_mb);
}

/* "- what: 1.23x (target at least 1.50x): met" (or "not met", or "not measured") */
static void bf16_target(const char *what, double got, double target, int at_most)
{
    const char *verdict = got <= 0 ? "not measured" : (at_most ? got <= target : got >= target) ? "met" : "not met";
    emit("- %s: %.2fx (target at %s %.2fx): %s\n", what, got, at_most ? "most" : "least", target, verdict);
}

static void bf16_targets(const int *threads, int nthreads, bf16_row rows[][8])
{
    static const double vs_autocast[] = {2.5, 1.5, 1.2}; /* S, M, XL */
    char what[96];
    emit("\n");
    for (int t = 0; t < nthreads && t < 8; t++)
        for (int i = 0; i < 3; i++) {
            snprintf(what, sizeof what, "%s, %d thread%s, bf16 against autocast", scale_sizes[i].name, threads[t],
                     threads[t] > 1 ? "s" : "");
            bf16_target(what, speedup(rows[i][t].torch_bf16, rows[i][t].ag_bf16), vs_autocast[i], 0);
        }
    for (int t = 0; t < nthreads && t < 8; t++) {
        const bf16_row *xl = &rows[2][t];
        snprintf(what, sizeof what, "XL, %d thread%s, bf16 against attograd fp32", threads[t],
                 threads[t] > 1 ? "s" : "");
        bf16_target(what, speedup(xl->ag_fp32, xl->ag_bf16), 1.7, 0);
        if (threads[t] != 1) continue;
        bf16_target("XL peak RSS, bf16 over attograd fp32",
                    xl->ag_fp32.rss_mb > 0 ? xl->ag_bf16.rss_mb / xl->ag_fp32.rss_mb : 0, 0.8, 1);
        bf16_target("XL peak RSS, bf16 over autocast",
                    xl->torch_bf16.rss_mb > 0 ? xl->ag_bf16.rss_mb / xl->torch_bf16.rss_mb : 0, 0.7, 1);
    }
}

static void bench_scale_bf16(const int *threads, int nthreads, const char *python, int have_torch, double budget)
{
#ifdef AG_DOUBLE
    (void)threads, (void)nthreads, (void)python, (void)have_torch, (void)budget;
    emit("\n### Scale in bf16: float builds only\n");
#else
    int have_ref = have_torch && access("tests/reference/gpt.py", R_OK) == 0;
    static bf16_row rows[3][8]; /* [size][thread count] */
    emit("\n### Scale in bf16: the GPT's step against PyTorch's autocast\n\n");
    emit("ag_gpt's step (random ids, forward, backward, %s) with bf16 products (`--precision bf16`) and in fp32, "
         "against the PyTorch twin (tests/reference/gpt.py bench) in fp32 and with its forward under "
         "torch.autocast(\"cpu\", dtype=torch.bfloat16)%s; the four in turn, each in a process of its own.  "
         "Speed-ups: the other's time over attograd bf16's.  Peak RSS: the whole process's, MB.\n\n",
         scale_loop_text(), have_ref ? "" : " (PyTorch is not available: its columns are 0)");
    emit("| size | threads | attograd bf16 ms | attograd fp32 ms | autocast ms | PyTorch fp32 ms | against autocast | "
         "against attograd fp32 | attograd bf16 RSS | attograd fp32 RSS | autocast RSS |\n"
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < 3; i++) {
        const scale_size *z = &scale_sizes[i];
        double secs = budget * (z->C >= 512 ? 4 : 1);
        for (int t = 0; t < nthreads && t < 8; t++) {
            bf16_row *r = &rows[i][t];
            if (have_ref) {
                r->torch_fp32 = scale_torch(python, z, threads[t], secs, "");
                r->torch_bf16 = scale_torch(python, z, threads[t], secs, "--autocast");
            }
            r->ag_fp32 = scale_attograd_at(z, threads[t], secs, AG_PRECISION_FP32);
            r->ag_bf16 = scale_attograd_at(z, threads[t], secs, AG_PRECISION_BF16);
            bf16_scale_row(z, threads[t], r);
        }
    }
    bf16_targets(threads, nthreads, rows);
#endif
}
