/* tests/port/criterion/criterion.h: the part of Criterion's API that the
 * arm64 subset uses (tests/port/port.mk), for running under qemu-aarch64.
 *
 * Criterion starts each test's worker by re-executing the test program,
 * which an emulated program cannot do without binfmt_misc; and Debian 12's
 * arm64 Criterion cannot be installed beside the host's.  So the subset is
 * compiled against this header instead (-Itests/port before the system's
 * headers) and run by tests/port/runner.c: one line per test, and
 * Criterion's summary line at the end.  The test files are the same ones
 * `make test` runs. */
#ifndef AG_MINI_CRITERION_H
#define AG_MINI_CRITERION_H

/* what the real header brings in, and the tests count on */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mc_register(const char *suite, const char *name, void (*fn)(void));
_Noreturn void mc_fail(const char *file, int line, const char *expr, const char *fmt, ...);

#define Test(suite, name)                                                                            \
    static void suite##_##name##_impl(void);                                                         \
    __attribute__((constructor)) static void suite##_##name##_register(void)                         \
    {                                                                                                \
        mc_register(#suite, #name, suite##_##name##_impl);                                           \
    }                                                                                                \
    static void suite##_##name##_impl(void)

/* cr_assert(cond) or cr_assert(cond, "format", args...) */
#define cr_assert(cond, ...)                                                                         \
    do {                                                                                             \
        if (!(cond)) mc_fail(__FILE__, __LINE__, #cond, "" __VA_ARGS__);                             \
    } while (0)
#define cr_assert_fail(...) mc_fail(__FILE__, __LINE__, "failed", "" __VA_ARGS__)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b), "" __VA_ARGS__)
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b), "" __VA_ARGS__)
#define cr_assert_lt(a, b, ...) cr_assert((a) < (b), "" __VA_ARGS__)
#define cr_assert_leq(a, b, ...) cr_assert((a) <= (b), "" __VA_ARGS__)
#define cr_assert_gt(a, b, ...) cr_assert((a) > (b), "" __VA_ARGS__)
#define cr_assert_geq(a, b, ...) cr_assert((a) >= (b), "" __VA_ARGS__)
#define cr_assert_null(p, ...) cr_assert((p) == NULL, "" __VA_ARGS__)
#define cr_assert_not_null(p, ...) cr_assert((p) != NULL, "" __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) cr_assert(strcmp((a), (b)) == 0, "" __VA_ARGS__)
/* cr_skip_test("format", args...): the test says why and returns */
#define cr_skip_test(...)                                                                            \
    do {                                                                                             \
        printf("[SKIP] " __VA_ARGS__), printf("\n");                                                 \
        return;                                                                                      \
    } while (0)
/* cr_log_info("format", args...): a line of the test's output */
#define cr_log_info(...) (printf("[----] " __VA_ARGS__), printf("\n"))

#endif
