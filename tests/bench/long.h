/* tests/bench/long.h: the long-context section of `make bench` (`build/bench
 * --only long`, or `make bench-long`; included by bench.c once, after
 * scale.h, whose runs it uses): GPT-2 small's body (C 768, L 12, H 12,
 * F 3072) at B 1 and T 512, 1024, 2048 and 4096, causal, one thread,
 * attograd's training step against the PyTorch twin's (math attention,
 * which keeps [B, H, T, T] matrices) in the same run: step ms, the
 * ratio, each one's peak RSS and the bytes one forward keeps per token
 * and layer.  A size PyTorch cannot hold in 3/4 of the machine's memory is
 * reported as such.  `--smoke` runs the same code on a toy model (C 64,
 * L 2, H 4) at T 64 and 320, either side of the attention kernel's seam
 * (AG__FLASH_KEYS), in seconds: a check that the section runs, not a
 * measurement. */

/* A PyTorch cell: v with `digits` decimals, or why there is none. */
static void torch_cell(char *buf, size_t len, double v, int digits, scale_result torch, int have_ref)
{
    if (torch.ms > 0) snprintf(buf, len, "%.*f", digits, v);
    else snprintf(buf, len, "%s", !have_ref ? "-" : torch.oom ? "out of memory" : "failed");
}

static void long_row(const scale_size *z, scale_result ag, scale_result torch, int have_ref)
{
    double per = (double)z->B * z->T * z->L * 1024; /* KB per token per layer */
    char ratio[32], rss[32], tms[32], tkb[32], trss[32];
    ratio_cell(ratio, sizeof ratio, torch.ms > 0 && ag.ms > 0 ? torch.ms / ag.ms : 0);
    ratio_cell(rss, sizeof rss, ag.rss_mb > 0 && torch.rss_mb > 0 ? ag.rss_mb / torch.rss_mb : 0);
    torch_cell(tms, sizeof tms, torch.ms, 0, torch, have_ref);
    torch_cell(tkb, sizeof tkb, torch.act_bytes / per, 1, torch, have_ref);
    torch_cell(trss, sizeof trss, torch.rss_mb, 0, torch, have_ref);
    if (ag.ms <= 0) {
        emit("| %d | failed | %s | - | - | %s | - | %s | - |\n", z->T, tms, tkb, trss);
        return;
    }
    emit("| %d | %.0f | %s | %s | %.1f | %s | %.0f | %s | %s |\n", z->T, ag.ms, tms, ratio, ag.act_bytes / per, tkb,
         ag.rss_mb, trss, rss);
}

static void bench_long(const char *python, int have_torch, double budget, int smoke)
{
#ifdef AG_DOUBLE
    (void)python, (void)have_torch, (void)budget, (void)smoke;
    emit("\n### Long contexts: float builds only\n");
#else
    static const int Ts[] = {512, 1024, 2048, 4096}, smoke_Ts[] = {64, AG__FLASH_KEYS + 64};
    const int *T = smoke ? smoke_Ts : Ts, n = smoke ? 2 : 4;
    scale_size z = {"XL", 65, 0, 768, 12, 12, 3072, 1};
    if (smoke) z = (scale_size){"toy", 65, 0, 64, 2, 4, 256, 1};
    int have_ref = have_torch && access("tests/reference/gpt.py", R_OK) == 0;
    emit("\n### Long contexts: %s at B 1, one thread%s\n\n", smoke ? "a toy (--smoke)" : "GPT-2 small's body",
         smoke ? ": a check that the section runs, not a measurement" : "");
    emit("C %d, L %d, H %d, F %d, causal; ag_gpt's training step as in the scale section, against %s.  "
         "Rows of more than %d keys take the attention kernel that keeps no [T, T] matrix.  KB: what one training "
         "forward keeps for the backward, per token per layer.  Peak RSS: the whole process's; PyTorch's address "
         "space is capped at three quarters of the machine's memory.\n\n",
         z.C, z.L, z.H, z.F,
         have_ref ? "the PyTorch twin (tests/reference/gpt.py bench) in the same run" : "nothing (no PyTorch)",
         AG__FLASH_KEYS);
    emit("| T | attograd ms | PyTorch ms | speed-up | attograd KB/token/layer | PyTorch KB/token/layer | "
         "attograd peak RSS MB | PyTorch peak RSS MB | RSS ratio |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < n; i++) {
        z.T = T[i];
        scale_result torch = have_ref ? scale_torch(python, &z, 1, budget, "") : (scale_result){0};
        long_row(&z, scale_attograd(&z, 1, budget), torch, have_ref);
    }
#endif
}
