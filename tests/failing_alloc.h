/* tests/failing_alloc.h: an allocator hook (ag_set_allocator) that fails
 * the fail_at-th allocation, or every allocation from the fail_at-th on,
 * and counts the blocks alive, for the tests that make each allocation of
 * some work fail in turn (tests/test_oom.c, tests/test_safetensors.c).
 *
 *   oom_install();       the hook, failing nothing yet
 *   oom_arm(k, 0);       the k-th allocation from now fails (k from 0)
 *   oom_arm(k, 1);       the k-th and every later one fail
 *   oom_arm(-1, 0);      nothing fails
 *   ag_set_allocator(NULL) puts malloc back. */
#ifndef AG_TESTS_FAILING_ALLOC_H
#define AG_TESTS_FAILING_ALLOC_H

#include <stdlib.h>
#include <string.h>

#include "common.h"

static struct {
    long calls;   /* allocations since the last arm */
    long fail_at; /* the first allocation to fail, or -1 */
    int fail_all; /* 1: every allocation from fail_at on fails */
    long failed;  /* allocations refused since the last arm */
    long live;    /* blocks handed out and not yet released */
} oom;

static inline void *oom_alloc(size_t n, void *user)
{
    (void)user;
    long k = oom.calls++;
    if (oom.fail_at >= 0 && (k == oom.fail_at || (oom.fail_all && k > oom.fail_at))) {
        oom.failed++;
        return NULL;
    }
    void *p = malloc(n);
    if (p) oom.live++;
    return p;
}

static inline void oom_release(void *p, void *user)
{
    (void)user;
    oom.live--;
    free(p);
}

static inline void oom_install(void)
{
    memset(&oom, 0, sizeof oom);
    oom.fail_at = -1;
    ag_set_allocator(&(ag_allocator){oom_alloc, oom_release, NULL});
}

static inline void oom_arm(long fail_at, int fail_all)
{
    oom.calls = 0;
    oom.fail_at = fail_at;
    oom.fail_all = fail_all;
    oom.failed = 0;
}

#endif
