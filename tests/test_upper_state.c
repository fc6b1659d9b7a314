/* tests/test_upper_state.c: every AVX kernel returns with the vector
 * registers' upper halves clean (vzeroupper).
 *
 * A kernel that leaves them dirty costs nothing itself, but every SSE
 * instruction after it (the plain C code of the library, libm's erf and
 * exp) then waits on the stale upper halves, many times slower, until the
 * next vzeroupper.  No result changes, so no value test sees it; the CPU
 * says it instead: XGETBV with ECX = 1 reads XINUSE, whose bit 2 (upper
 * halves of ymm0-15) and bit 6 (upper halves of zmm0-15) are set while that
 * state is dirty and cleared by vzeroupper.  Each test first checks that
 * the probe works on this CPU (clean after vzeroupper, dirty after a ymm
 * write) and is skipped where it does not. */
#include "common.h"
#include "core/internal.h"

#if AG_X86_KERNELS
#include <cpuid.h>
#include <stdint.h>

enum { UPPER_DIRTY = 1 << 2 | 1 << 6 }; /* XINUSE: YMM_Hi128, ZMM_Hi256 */

static uint32_t xinuse(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
    return lo;
}

/* XGETBV(1) exists (CPUID.(EAX=0DH, ECX=1):EAX bit 2) and tells a write
 * to a ymm register from vzeroupper; false skips the test. */
static bool probe_works(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX)) return false;
    if (!__get_cpuid_count(0xd, 1, &a, &b, &c, &d) || !(a & 1 << 2)) return false;
    __asm__ volatile("vzeroupper");
    bool clean = !(xinuse() & UPPER_DIRTY);
    __asm__ volatile("vpcmpeqd %%ymm0, %%ymm0, %%ymm0" ::: "xmm0");
    bool dirty = xinuse() & UPPER_DIRTY;
    __asm__ volatile("vzeroupper");
    return clean && dirty && !(xinuse() & UPPER_DIRTY);
}

/* gcc places vzeroupper where a function that used ymm returns or calls
 * plain code only when it optimises at -O2 or more
 * (-fexpensive-optimizations): at -O0 and -O1 (make matrix's -O0 cell,
 * make asan's -O1) AVX code returns with the upper state dirty whatever the
 * kernels do, so the check runs in builds at -O2 or -O3 (the Makefile
 * defines AG_O2_BUILD there) and is skipped, saying why, elsewhere. */
#ifdef AG_O2_BUILD
#define O2_BUILD 1
#else
#define O2_BUILD 0
#endif
#define SKIP_UNLESS_CHECKABLE()                                                                            \
    do {                                                                                                   \
        if (!probe_works()) cr_skip_test("XGETBV(1) does not report the upper state here");                \
        if (!O2_BUILD) cr_skip_test("checked in -O2 and -O3 builds only (no vzeroupper below -O2)");        \
    } while (0)

static const char *const levels[] = {"avx2", "avx512"};

static ag_real *filled(size_t n, ag_real scale)
{
    ag_real *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = scale * (ag_real)((int)(i * 7 % 13) - 6);
    return v;
}

Test(upper_state, gemm_kernels_return_it_clean)
{
    SKIP_UNLESS_CHECKABLE();
    /* full and edge tiles, with and without a bias (the edge with a bias
     * stores through a plain function), over the blocked path */
    static const int shapes[][3] = {{13, 17, 40}, {37, 70, 300}, {64, 64, 64}, {7, 129, 80}, {50, 3, 20}};
    int tested = 0;
    for (int l = 0; l < 2; l++) {
        if (strcmp(ag__isa_force(levels[l]), levels[l]) != 0) continue;
        tested++;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int biased = 0; biased < 2; biased++) {
                int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                ag_real *A = filled((size_t)M * K, 0.1f), *B = filled((size_t)K * N, 0.2f);
                ag_real *C = filled((size_t)M * N, 0), *bias = filled((size_t)N, 0.3f);
                __asm__ volatile("vzeroupper");
                if (biased) ag__gemm_bias_res(0, 1, M, N, K, A, K, B, K, 0, C, N, bias, NULL);
                else ag__gemm(0, 1, M, N, K, A, K, B, K, 0, C, N);
                uint32_t state = xinuse();
                cr_assert(!(state & UPPER_DIRTY), "%s: %dx%dx%d bias=%d: XINUSE %#x after gemm", levels[l], M, N,
                          K, biased, (unsigned)state);
                free(A), free(B), free(C), free(bias);
            }
    }
    ag__isa_force(NULL);
    cr_assert(tested > 0, "no AVX level on a CPU with AVX");
}

/* GELU after a linear, the op whose libm calls ran dirty in double:
 * forward and backward, at each level, clean at the end.  (In float the
 * GELU is itself an AVX kernel, which cleans the state the linear left:
 * there the gemm test above is the one that sees a dirty kernel.) */
Test(upper_state, linear_gelu_forward_and_backward_leave_it_clean)
{
    SKIP_UNLESS_CHECKABLE();
    int tested = 0;
    for (int l = 0; l < 2; l++) {
        if (strcmp(ag__isa_force(levels[l]), levels[l]) != 0) continue;
        tested++;
        ag_store *s = ag_store_new();
        ag_init_uniform(ag_param(s, "x", AG_SHAPE(37, 300)), -2, 2, 1);
        ag_init_uniform(ag_param(s, "w", AG_SHAPE(70, 300)), -1, 1, 2);
        ag_init_uniform(ag_param(s, "b", AG_SHAPE(70)), -1, 1, 3);
        ag_graph *g = ag_graph_new();
        __asm__ volatile("vzeroupper");
        ag_tensor *y = ag__linear_gelu(g, ag_store_find(s, "x"), ag_store_find(s, "w"), ag_store_find(s, "b"));
        uint32_t forward = xinuse();
        ag_tensor *loss = ag_sum_all(g, y);
        cr_assert_not_null(loss, "%s", ag_graph_error(g));
        __asm__ volatile("vzeroupper");
        cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
        uint32_t backward = xinuse();
        cr_assert(!(forward & UPPER_DIRTY), "%s: XINUSE %#x after linear_gelu", levels[l], (unsigned)forward);
        cr_assert(!(backward & UPPER_DIRTY), "%s: XINUSE %#x after its backward", levels[l], (unsigned)backward);
        ag_graph_free(g);
        ag_store_free(s);
    }
    ag__isa_force(NULL);
    cr_assert(tested > 0, "no AVX level on a CPU with AVX");
}
#endif
