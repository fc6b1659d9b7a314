/* gradcheck: check every op's backward against central finite differences.
 *
 *   build/gradcheck              all ops, every case, table on stdout
 *   build/gradcheck --op NAME    one op
 *   build/gradcheck --break NAME multiply NAME's incoming gradient by 1.01,
 *                                to see the checker catch a wrong backward
 *   build/gradcheck --seed N     draw inputs from another seed
 *
 * Runs in double (linked with libattograd64.a).  An element passes when
 * |analytic - numeric| <= 1e-5 + 1e-3 |numeric| with eps = 1e-6.
 * Exit status: 0 when every case passes, 1 when one fails, 2 on bad usage. */
#include "attograd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(const char *why)
{
    fprintf(stderr, "gradcheck: %s\nusage: gradcheck [--op NAME] [--break NAME] [--seed N]\n", why);
    return 2;
}

int main(int argc, char **argv)
{
    int only = -1, broken = -1;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "--op") || !strcmp(argv[i], "--break")) && i + 1 < argc) {
            int op = ag_op_find(argv[i + 1]);
            if (op <= 0) {
                fprintf(stderr, "gradcheck: unknown op '%s'\n", argv[i + 1]);
                return 2;
            }
            if (!strcmp(argv[i], "--op")) only = op;
            else broken = op;
            i++;
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            char *end;
            seed = strtoull(argv[++i], &end, 10);
            if (*end || !*argv[i]) return usage("--seed needs a whole number");
        } else {
            char why[128];
            snprintf(why, sizeof why, "unknown or incomplete flag '%s'", argv[i]);
            return usage(why);
        }
    }
    if (sizeof(ag_real) != sizeof(double)) {
        fprintf(stderr, "gradcheck: built in float; finite differences need the double build\n");
        return 2;
    }
    ag_gradcheck_opts opts = AG_GRADCHECK_DEFAULTS;
    if (broken > 0) {
        opts.break_op = broken;
        opts.break_factor = 1.01;
        printf("(backward of %s deliberately broken: its incoming gradient is scaled by 1.01)\n\n",
               ag_op_name(broken));
    }
    printf("| %-13s | %-42s | %-10s | %-10s | %-4s |\n", "op", "case", "max abs", "max rel", "ok");
    printf("|---------------|--------------------------------------------|------------|------------|------|\n");
    int cases = 0, failed = 0;
    double worst_abs = 0, worst_rel = 0;
    for (int op = 1; op < AG_OP_COUNT; op++) {
        if (only > 0 && op != only) continue;
        int n = ag_op_case_count(op);
        if (n == 0) {
            printf("| %-13s | %-42s | %-10s | %-10s | FAIL |\n", ag_op_name(op), "(no gradient check)", "-", "-");
            failed++;
        }
        for (int c = 0; c < n; c++) {
            ag_gradcheck_result r;
            char err[256];
            ag_status st = ag_op_check(op, c, seed + (uint64_t)c, &opts, &r, err, sizeof err);
            cases++;
            if (st == AG_OK || st == AG_ERR_NUMERIC) {
                printf("| %-13s | %-42s | %10.2e | %10.2e | %s |\n", ag_op_name(op), ag_op_case_label(op, c),
                       r.max_abs_err, r.max_rel_err, st == AG_OK ? "pass" : "FAIL");
                if (r.max_abs_err > worst_abs) worst_abs = r.max_abs_err;
                if (r.max_rel_err > worst_rel) worst_rel = r.max_rel_err;
            } else {
                printf("| %-13s | %-42s | %-10s | %-10s | FAIL |  %s\n", ag_op_name(op), ag_op_case_label(op, c),
                       "-", "-", err);
            }
            if (st != AG_OK) failed++;
        }
    }
    printf("\n%d cases, %d failed; worst abs error %.2e, worst rel error %.2e\n", cases, failed, worst_abs,
           worst_rel);
    return failed ? 1 : 0;
}
