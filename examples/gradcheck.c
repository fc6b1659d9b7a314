/* gradcheck: check every op's backward against central finite differences.
 *
 *   build/gradcheck              all ops, every case, table on stdout
 *   build/gradcheck --op NAME    one op
 *   build/gradcheck --break NAME multiply the gradients NAME's backward gives
 *                                by 1.01, to see the checker catch a wrong
 *                                backward
 *   build/gradcheck --by X       the factor of --break instead (1.0001: 1e-4 off;
 *                                nan: every gradient NaN)
 *   build/gradcheck --mutate X   break each op in turn by X, its own cases only:
 *                                the mutation test (1.0001: each should fail)
 *   build/gradcheck --seed N     draw inputs from another seed
 *
 * Runs in double (linked with libattograd64.a).  An element passes stage
 * one when |analytic - numeric| <= 1e-5 + 1e-3 |numeric| with eps = 1e-6,
 * and the strict stage when its error is within the tolerance derived from
 * the finite differences' own measured error (docs/testing.md); the column
 * "strict" is the worst error over that tolerance.  A NaN anywhere is the
 * worst error and prints as nan.
 * Exit status: 0 when every case passes, 1 when one fails, 2 on bad usage. */
#include "attograd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The worse of two errors: NaN beats any number, so that a NaN is never a
 * quiet 0 in the summary. */
static double worse(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }

static int usage(const char *why)
{
    fprintf(stderr, "gradcheck: %s\nusage: gradcheck [--op NAME] [--break NAME [--by X] | --mutate X] [--seed N]\n", why);
    return 2;
}

int main(int argc, char **argv)
{
    int only = -1, broken = -1;
    unsigned long long seed = 1;
    double by = 1.01;
    int mutate = 0;
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
        } else if ((!strcmp(argv[i], "--by") || !strcmp(argv[i], "--mutate")) && i + 1 < argc) {
            mutate = mutate || !strcmp(argv[i], "--mutate");
            char *end;
            by = strtod(argv[++i], &end);
            /* nan is allowed: every gradient NaN, to see the summary say nan */
            if (*end || !*argv[i] || !(by > 0 || isnan(by)) || isinf(by))
                return usage("--by and --mutate need a positive number (or nan)");
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
        opts.break_factor = by;
        printf("(backward of %s deliberately broken: the gradients it gives are scaled by %.10g)\n\n",
               ag_op_name(broken), by);
    } else if (mutate) {
        opts.break_factor = by;
        printf("(each op's backward in turn deliberately broken, its own cases checked: the gradients it gives "
               "are scaled by %.10g)\n\n", by);
    }
    printf("| %-13s | %-42s | %-10s | %-10s | %-8s | %-4s |\n", "op", "case", "max abs", "max rel", "strict", "ok");
    printf("|---------------|--------------------------------------------|------------|------------|----------|------|\n");
    int cases = 0, failed = 0, ops = 0;
    double worst_abs = 0, worst_rel = 0, worst_strict = 0;
    for (int op = 1; op < AG_OP_COUNT; op++) {
        if (only > 0 && op != only) continue;
        int n = ag_op_case_count(op);
        if (mutate) opts.break_op = op;
        ops++;
        if (n == 0) {
            printf("| %-13s | %-42s | %-10s | %-10s | %-8s | FAIL |\n", ag_op_name(op), "(no gradient check)", "-",
                   "-", "-");
            failed++;
        }
        for (int c = 0; c < n; c++) {
            ag_gradcheck_result r;
            char err[256];
            ag_status st = ag_op_check(op, c, seed + (uint64_t)c, &opts, &r, err, sizeof err);
            cases++;
            if (st == AG_OK || st == AG_ERR_NUMERIC) {
                printf("| %-13s | %-42s | %10.2e | %10.2e | %8.2g | %s |%s%s\n", ag_op_name(op),
                       ag_op_case_label(op, c), r.max_abs_err, r.max_rel_err, r.strict_worst,
                       st == AG_OK ? "pass" : "FAIL", r.rough ? "  " : "", r.rough ? err : "");
                worst_abs = worse(worst_abs, r.max_abs_err);
                worst_rel = worse(worst_rel, r.max_rel_err);
                worst_strict = worse(worst_strict, r.strict_worst);
            } else {
                printf("| %-13s | %-42s | %-10s | %-10s | %-8s | FAIL |  %s\n", ag_op_name(op),
                       ag_op_case_label(op, c), "-", "-", "-", err);
                worst_abs = worst_rel = worst_strict = NAN; /* no number: the worst */
            }
            if (st != AG_OK) failed++;
        }
    }
    if (mutate) printf("\nmutation by %.10g: %d ops, %d cases, %d fail\n", by, ops, cases, failed);
    printf("\n%d cases, %d failed; strict stage worst %.2g of its tolerance; worst abs error %.2e, "
           "worst rel error %.2e\n", cases, failed, worst_strict, worst_abs, worst_rel);
    return failed && !mutate ? 1 : 0; /* --mutate reports only: tests/test_gradcheck.c judges */
}
