/* gemm.c: C = beta * C + op(A) op(B), row-major, every transpose combination
 * that matmul's forward and backward need.
 *
 * The classic blocked design (Goto; BLIS):
 *   - B is packed, KC rows at a time, into panels of NR columns
 *     ([kc][NR], zero-padded), A into panels of MR rows ([kc][MR]); packing
 *     also undoes any transpose, so one micro-kernel serves all four cases;
 *   - the micro-kernel keeps an MR x NR tile of C in vector registers and
 *     walks k: acc[i] += a[k][i] * b[k][:], one broadcast and NR/VL fused
 *     multiply-adds per row.
 * The kernel is written once with GCC vector extensions and compiled for
 * AVX-512, AVX2+FMA and a portable baseline; the CPU picks at run time.
 * Every variant adds the same products in the same order (k ascending,
 * one accumulator per output element), so they agree to the last bit
 * whenever the compiler contracts the same way, and within float rounding
 * otherwise.
 *
 * Small products (the toy sizes of attention heads) skip packing: a plain
 * loop is faster when the whole problem fits in L1. */
#include "internal.h"

#include <stdint.h>

#define KC 256
#define MR 6

/* Packing buffers, grown once and kept (a training step after the first
 * allocates nothing).  Thread-local so threads never share them. */
static _Thread_local ag_real *pack_a, *pack_b;
static _Thread_local size_t cap_a, cap_b;

static int reserve(ag_real **buf, size_t *cap, size_t n)
{
    if (n <= *cap) return 1;
    ag_real *p = ag__malloc(n * sizeof(ag_real) + 64);
    if (!p) return 0;
    ag__free(*buf);
    *buf = p;
    *cap = n;
    return 1;
}

/* element (r, c) of op(X) for X stored row-major with leading dim ld */
#define AT(X, t, ld, r, c) ((t) ? (X)[(size_t)(c) * (ld) + (r)] : (X)[(size_t)(r) * (ld) + (c)])

/* A panel: rows [i0, i0+MR) of op(A), depth [p0, p0+kc): dst[k][MR]. */
static void pack_a_panel(ag_real *dst, const ag_real *A, int ta, int lda, int i0, int mr, int p0, int kc)
{
    for (int k = 0; k < kc; k++)
        for (int i = 0; i < MR; i++) dst[k * MR + i] = i < mr ? AT(A, ta, lda, i0 + i, p0 + k) : 0;
}

/* A panel of op(B): columns [j0, j0+nr) depth [p0, p0+kc): dst[k][NR]. */
static void pack_b_panel(ag_real *dst, int NR, const ag_real *B, int tb, int ldb, int j0, int nr, int p0, int kc)
{
    if (!tb && nr == NR) {
        for (int k = 0; k < kc; k++) memcpy(dst + (size_t)k * NR, B + (size_t)(p0 + k) * ldb + j0, NR * sizeof(ag_real));
        return;
    }
    for (int k = 0; k < kc; k++)
        for (int j = 0; j < NR; j++) dst[(size_t)k * NR + j] = j < nr ? AT(B, tb, ldb, p0 + k, j0 + j) : 0;
}

/* The micro-kernel, instantiated per instruction set.  VB is the vector
 * width in bytes; NR = 2 vectors. */
#define DEFINE_KERNEL(NAME, VB, TARGET)                                                                        \
    typedef ag_real NAME##_vec __attribute__((vector_size(VB), aligned(sizeof(ag_real))));                    \
    enum { NAME##_VL = VB / (int)sizeof(ag_real), NAME##_NR = 2 * NAME##_VL };                                \
    TARGET static void NAME(int kc, const ag_real *a, const ag_real *b, ag_real *c, int ldc, int mr, int nr,  \
                            int overwrite)                                                                     \
    {                                                                                                          \
        NAME##_vec acc0[MR], acc1[MR];                                                                         \
        for (int i = 0; i < MR; i++) acc0[i] = (NAME##_vec){0}, acc1[i] = (NAME##_vec){0};                     \
        for (int k = 0; k < kc; k++) {                                                                         \
            NAME##_vec b0, b1;                                                                                 \
            memcpy(&b0, b + (size_t)k * NAME##_NR, VB);                                                        \
            memcpy(&b1, b + (size_t)k * NAME##_NR + NAME##_VL, VB);                                            \
            const ag_real *ak = a + (size_t)k * MR;                                                            \
            for (int i = 0; i < MR; i++) {                                                                     \
                acc0[i] += ak[i] * b0;                                                                         \
                acc1[i] += ak[i] * b1;                                                                         \
            }                                                                                                  \
        }                                                                                                      \
        if (mr == MR && nr == NAME##_NR) {                                                                     \
            for (int i = 0; i < MR; i++) {                                                                     \
                ag_real *ci = c + (size_t)i * ldc;                                                             \
                if (!overwrite) {                                                                              \
                    NAME##_vec c0, c1;                                                                         \
                    memcpy(&c0, ci, VB);                                                                       \
                    memcpy(&c1, ci + NAME##_VL, VB);                                                           \
                    acc0[i] += c0, acc1[i] += c1;                                                              \
                }                                                                                              \
                memcpy(ci, &acc0[i], VB);                                                                      \
                memcpy(ci + NAME##_VL, &acc1[i], VB);                                                          \
            }                                                                                                  \
            return;                                                                                            \
        }                                                                                                      \
        ag_real tile[MR][NAME##_NR];                                                                           \
        for (int i = 0; i < MR; i++) {                                                                         \
            memcpy(tile[i], &acc0[i], VB);                                                                     \
            memcpy(tile[i] + NAME##_VL, &acc1[i], VB);                                                         \
        }                                                                                                      \
        for (int i = 0; i < mr; i++)                                                                           \
            for (int j = 0; j < nr; j++) c[(size_t)i * ldc + j] = (overwrite ? 0 : c[(size_t)i * ldc + j]) + tile[i][j]; \
    }

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
DEFINE_KERNEL(kernel_avx512, 64, __attribute__((target("avx512f,fma"))))
DEFINE_KERNEL(kernel_avx2, 32, __attribute__((target("avx2,fma"))))
#define HAVE_X86 1
#endif
DEFINE_KERNEL(kernel_base, 16, )

typedef void (*kernel_fn)(int, const ag_real *, const ag_real *, ag_real *, int, int, int, int);

static kernel_fn pick(int *nr)
{
#ifdef HAVE_X86
    if (__builtin_cpu_supports("avx512f")) {
        *nr = kernel_avx512_NR;
        return kernel_avx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        *nr = kernel_avx2_NR;
        return kernel_avx2;
    }
#endif
    *nr = kernel_base_NR;
    return kernel_base;
}

/* The plain loops: for products too small to repay packing. */
static void gemm_small(int ta, int tb, int M, int N, int K, const ag_real *A, int lda, const ag_real *B, int ldb,
                       ag_real beta, ag_real *C, int ldc)
{
    for (int i = 0; i < M; i++) {
        ag_real *c = C + (size_t)i * ldc;
        if (beta == 0)
            for (int j = 0; j < N; j++) c[j] = 0;
        if (!tb) {
            for (int k = 0; k < K; k++) {
                ag_real aik = AT(A, ta, lda, i, k);
                const ag_real *b = B + (size_t)k * ldb;
                for (int j = 0; j < N; j++) c[j] += aik * b[j];
            }
        } else {
            for (int j = 0; j < N; j++) {
                const ag_real *b = B + (size_t)j * ldb;
                ag_real s = 0;
                for (int k = 0; k < K; k++) s += AT(A, ta, lda, i, k) * b[k];
                c[j] += s;
            }
        }
    }
}

void ag__gemm(int ta, int tb, int M, int N, int K, const ag_real *A, int lda, const ag_real *B, int ldb,
              ag_real beta, ag_real *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        if (beta == 0)
            for (int i = 0; i < M; i++) memset(C + (size_t)i * ldc, 0, (size_t)N * sizeof(ag_real));
        return;
    }
    static int nr_cached;
    static kernel_fn kern;
    if (!kern) kern = pick(&nr_cached);
    const int NR = nr_cached;
    if ((double)M * N * K < 8 * 1024 || M < MR || N < NR / 2) {
        gemm_small(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    int npanels = (N + NR - 1) / NR, mpanels = (M + MR - 1) / MR;
    size_t need_b = (size_t)npanels * NR * KC, need_a = (size_t)mpanels * MR * KC;
    if (!reserve(&pack_b, &cap_b, need_b) || !reserve(&pack_a, &cap_a, need_a)) {
        gemm_small(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc); /* no memory: still correct */
        return;
    }
    for (int p0 = 0; p0 < K; p0 += KC) {
        int kc = K - p0 < KC ? K - p0 : KC;
        int overwrite = p0 == 0 && beta == 0;
        for (int jp = 0; jp < npanels; jp++) {
            int j0 = jp * NR, nr = N - j0 < NR ? N - j0 : NR;
            pack_b_panel(pack_b + (size_t)jp * NR * kc, NR, B, tb, ldb, j0, nr, p0, kc);
        }
        for (int ip = 0; ip < mpanels; ip++) {
            int i0 = ip * MR, mr = M - i0 < MR ? M - i0 : MR;
            pack_a_panel(pack_a + (size_t)ip * MR * kc, A, ta, lda, i0, mr, p0, kc);
        }
        for (int ip = 0; ip < mpanels; ip++) {
            int i0 = ip * MR, mr = M - i0 < MR ? M - i0 : MR;
            for (int jp = 0; jp < npanels; jp++) {
                int j0 = jp * NR, nr = N - j0 < NR ? N - j0 : NR;
                kern(kc, pack_a + (size_t)ip * MR * kc, pack_b + (size_t)jp * NR * kc, C + (size_t)i0 * ldc + j0, ldc,
                     mr, nr, overwrite);
            }
        }
    }
}
