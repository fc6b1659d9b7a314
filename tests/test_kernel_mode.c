/* tests/test_kernel_mode.c: the switch between the kernel room and the
 * references (ag_set_kernels, AG_KERNELS).  Criterion runs each test in a
 * process of its own, so the environment is read afresh in each. */
#include <stdlib.h>

#include "common.h"

Test(kernel_mode, fast_is_the_default)
{
    unsetenv("AG_KERNELS");
    cr_expect_eq(ag_get_kernels(), AG_KERNELS_FAST);
}

Test(kernel_mode, the_environment_asks_for_the_references)
{
    setenv("AG_KERNELS", "reference", 1);
    cr_expect_eq(ag_get_kernels(), AG_KERNELS_REFERENCE);
}

Test(kernel_mode, another_value_in_the_environment_keeps_the_kernels)
{
    setenv("AG_KERNELS", "fast", 1);
    cr_expect_eq(ag_get_kernels(), AG_KERNELS_FAST);
}

Test(kernel_mode, the_call_overrides_the_environment)
{
    setenv("AG_KERNELS", "reference", 1);
    ag_set_kernels(AG_KERNELS_FAST);
    cr_expect_eq(ag_get_kernels(), AG_KERNELS_FAST);
    ag_set_kernels(AG_KERNELS_REFERENCE);
    cr_expect_eq(ag_get_kernels(), AG_KERNELS_REFERENCE);
    ag_set_kernels((ag_kernels)7); /* not a mode: the kernels */
    cr_expect_eq(ag_get_kernels(), AG_KERNELS_FAST);
}
