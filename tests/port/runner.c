/* tests/port/runner.c: runs the tests registered through tests/port/
 * criterion/criterion.h one after the other, in this process (qemu-user
 * here cannot run a forked child), and ends with Criterion's summary
 * line.  A failed assertion reports and returns to the runner, which goes
 * on with the next test.  Exit status 0 when every test passed. */
#include <setjmp.h>
#include <stdarg.h>

#include "criterion/criterion.h"

enum { MAX_TESTS = 256 };
static struct {
    const char *suite, *name;
    void (*fn)(void);
} tests[MAX_TESTS];
static int ntests;
static jmp_buf failed; /* where a failed assertion returns to */

void mc_register(const char *suite, const char *name, void (*fn)(void))
{
    if (ntests < MAX_TESTS) tests[ntests].suite = suite, tests[ntests].name = name, tests[ntests++].fn = fn;
}

void mc_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
    fprintf(stderr, "[----] %s:%d: Assertion Failed: %s\n[----]   ", file, line, expr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    longjmp(failed, 1);
}

/* fn, true when it returned: false when an assertion failed in it */
static bool passes(void (*fn)(void))
{
    if (setjmp(failed)) return false;
    fn();
    return true;
}

int main(void)
{
    int passed = 0;
    for (int i = 0; i < ntests; i++) {
        bool ok = passes(tests[i].fn);
        passed += ok;
        printf("[%s] %s::%s\n", ok ? "PASS" : "FAIL", tests[i].suite, tests[i].name);
        fflush(stdout);
    }
    printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Crashing: 0 \n", ntests, passed,
           ntests - passed);
    return passed == ntests ? 0 : 1;
}
