/* tests/bench/loops.h: the loops section of bench (`build/bench --only
 * loops`, or `make bench-loops`; included by bench.c once, after scale.h,
 * whose runs it uses): GPT-2 small's body (C 768, L 12, H 12, F 3072) at
 * B 1, T 1024, causal, one thread, trained by the loop a PyTorch user
 * writes (ag_store_zero_grad, forward, ag_backward, ag_clip_grad_norm,
 * ag_optim_step, nothing else asked for) and by the fused end of step
 * (ag_optim_step_clip_zero), each in a process of its own, against the
 * PyTorch twin in the same run: each one's peak RSS and its ratio to
 * PyTorch's.  Memory only: a step's time is the scale and long sections'.
 * `--smoke` runs the same code on a toy model (C 64, L 2, H 4) at T 320 in
 * seconds: a check that the section runs, not a measurement. */

static void loops_row(const char *name, scale_result r, scale_result torch)
{
    char ratio[32];
    ratio_cell(ratio, sizeof ratio, r.rss_mb > 0 && torch.rss_mb > 0 ? r.rss_mb / torch.rss_mb : 0);
    if (r.ms <= 0) emit("| %s | failed | - |\n", name);
    else emit("| %s | %.0f | %s |\n", name, r.rss_mb, ratio);
}

static void bench_loops(const char *python, int have_torch, double budget, int smoke)
{
#ifdef AG_DOUBLE
    (void)python, (void)have_torch, (void)budget, (void)smoke;
    emit("\n### Loops: float builds only\n");
#else
    scale_size z = {"XL", 65, 1024, 768, 12, 12, 3072, 1};
    if (smoke) z = (scale_size){"toy", 65, AG__FLASH_KEYS + 64, 64, 2, 4, 256, 1};
    int have_ref = have_torch && access("tests/reference/gpt.py", R_OK) == 0;
    emit("\n### Loops: the peak memory of a training step as a user writes it%s\n\n",
         smoke ? " (--smoke: a toy, a check that the section runs, not a measurement)" : "");
    emit("%s (C %d, L %d, H %d, F %d), causal, B 1, T %d, one thread; each loop in a process of its own, against "
         "%s.  Peak RSS: the whole process's, in MB of 2^20 bytes.\n\n",
         smoke ? "A toy GPT" : "GPT-2 small's body", z.C, z.L, z.H, z.F, z.T,
         have_ref ? "the PyTorch twin (tests/reference/gpt.py bench) in the same run" : "nothing (no PyTorch)");
    emit("| loop | peak RSS MB | of PyTorch's |\n|---|---:|---:|\n");
    scale_result torch = have_ref ? scale_torch(python, &z, 1, budget, "") : (scale_result){0};
    int was = scale_plain;
    scale_plain = 1;
    loops_row("plain: ag_store_zero_grad, ag_backward, ag_clip_grad_norm, ag_optim_step",
              scale_attograd(&z, 1, budget), torch);
    scale_plain = 0;
    loops_row("fused: ag_backward, ag_optim_step_clip_zero", scale_attograd(&z, 1, budget), torch);
    scale_plain = was;
    if (torch.ms > 0)
        emit("| PyTorch: zero_grad(set_to_none=True), backward, clip_grad_norm_, step | %.0f | 1.00x |\n",
             torch.rss_mb);
    else if (have_ref) emit("| PyTorch | %s | - |\n", torch.oom ? "out of memory" : "failed");
#endif
}
