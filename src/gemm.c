/* gemm.c: C = beta * C + op(A) op(B), row-major, every transpose combination
 * that matmul's forward and backward need.
 *
 * The classic blocked design (Goto; BLIS), loops from the outside in:
 *   jc: columns of C in blocks of NC
 *   pc:   depth in blocks of KC; B[pc:pc+kc, jc:jc+nc] is packed into
 *         panels of NR columns ([kc][NR], zero-padded) that stay in L2/L3
 *   ic:     rows of C in blocks of MC; A[ic:ic+mc, pc:pc+kc] is packed
 *           into panels of MR rows ([kc][MR], zero-padded), kept in L2
 *   jr, ir:   the micro-kernel: an MR x NR tile of C held in vector
 *             registers while k walks the two panels:
 *               acc[i][:] += a[k][i] * b[k][:]   (one broadcast, NR/VL FMAs)
 * Packing also undoes any transpose, so one micro-kernel serves all four
 * cases, and every load in the kernel is contiguous.
 *
 * The kernel is written with intrinsics for AVX-512 and AVX2+FMA and with
 * GCC vector extensions for a portable baseline; the CPU picks at run time.
 * Every variant adds the same products in the same order (k ascending in
 * each KC block, one accumulator per output element, blocks added to C in
 * order), so the FMA variants agree to the last bit and the baseline (no
 * FMA: a rounding per multiply) agrees within float rounding.
 *
 * Threads (ag_set_threads): the calling thread and its helpers pack the
 * shared B block together, then each packs its own rows of A and computes
 * its own tiles of C.  Which thread computes a tile never changes how it is
 * computed, so the result does not depend on the thread count at all.
 *
 * Products too small to repay packing (the toy sizes of attention heads)
 * take plain loops instead. */
#include "internal.h"

#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef AVX512_MR
#define AVX512_MR 12
#define AVX512_NV 2
#endif
#ifndef KC
#define KC 256
#endif
#define KCX  /* depth of a block: an A and a B micro-panel fit in L1 */
#ifndef MC
#define MC 144
#endif
#define MCX  /* rows of A per block (a multiple of every MR) */
#define NC 3072 /* columns of B per block */

/* Packing buffers, grown once and kept (a training step after the first
 * allocates nothing).  Thread-local so threads never share them; the
 * calling thread's B buffer is the one its helpers read. */
static _Thread_local ag_real *pack_a, *pack_b;
static _Thread_local size_t cap_a, cap_b;

/* A buffer of n values, 64-byte aligned: *raw keeps what to free. */
static ag_real *reserve(ag_real **raw, size_t *cap, size_t n)
{
    if (n > *cap) {
        ag_real *p = ag__malloc(n * sizeof(ag_real) + 64);
        if (!p) return NULL;
        ag__free(*raw);
        *raw = p;
        *cap = n;
    }
    return (ag_real *)(((uintptr_t)*raw + 63) & ~(uintptr_t)63);
}

/* element (r, c) of op(X) for X stored row-major with leading dim ld */
#define AT(X, t, ld, r, c) ((t) ? (X)[(size_t)(c) * (ld) + (r)] : (X)[(size_t)(r) * (ld) + (c)])

/* One panel of op(A): rows [i0, i0+mr) (zero rows up to MR), depth
 * [p0, p0+kc): dst[k][MR]. */
static void pack_a_panel(ag_real *dst, int MR, const ag_real *A, int ta, int lda, int i0, int mr, int p0, int kc)
{
    if (ta && mr == MR) { /* A stored [K, M]: row k of the panel is contiguous */
        for (int k = 0; k < kc; k++) memcpy(dst + (size_t)k * MR, A + (size_t)(p0 + k) * lda + i0, MR * sizeof(ag_real));
        return;
    }
    if (!ta && mr == MR) { /* MR rows of A read side by side, written in order */
        const ag_real *rows[16];
        for (int i = 0; i < MR; i++) rows[i] = A + (size_t)(i0 + i) * lda + p0;
        for (int k = 0; k < kc; k++, dst += MR)
            for (int i = 0; i < MR; i++) dst[i] = rows[i][k];
        return;
    }
    for (int k = 0; k < kc; k++) /* an edge panel */
        for (int i = 0; i < MR; i++) dst[(size_t)k * MR + i] = i < mr ? AT(A, ta, lda, i0 + i, p0 + k) : 0;
}

/* One panel of op(B): columns [j0, j0+nr) (zero columns up to NR), depth
 * [p0, p0+kc): dst[k][NR]. */
static void pack_b_panel(ag_real *dst, int NR, const ag_real *B, int tb, int ldb, int j0, int nr, int p0, int kc)
{
    if (!tb && nr == NR) { /* B stored [K, N]: row k of the panel is contiguous */
        for (int k = 0; k < kc; k++) memcpy(dst + (size_t)k * NR, B + (size_t)(p0 + k) * ldb + j0, NR * sizeof(ag_real));
        return;
    }
    if (tb && nr == NR) { /* B stored [N, K]: NR rows read side by side */
        const ag_real *rows[64];
        for (int j = 0; j < NR; j++) rows[j] = B + (size_t)(j0 + j) * ldb + p0;
        for (int k = 0; k < kc; k++, dst += NR)
            for (int j = 0; j < NR; j++) dst[j] = rows[j][k];
        return;
    }
    for (int k = 0; k < kc; k++) /* an edge panel */
        for (int j = 0; j < NR; j++) dst[(size_t)k * NR + j] = j < nr ? AT(B, tb, ldb, p0 + k, j0 + j) : 0;
}

/* Write an MR x NR tile (row stride NR) into C: the rows and columns that
 * exist, overwriting or adding. */
static void store_tile(const ag_real *tile, int NR, ag_real *c, int ldc, int mr, int nr, int overwrite)
{
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            c[(size_t)i * ldc + j] = (overwrite ? 0 : c[(size_t)i * ldc + j]) + tile[(size_t)i * NR + j];
}

/* ---- micro-kernels ------------------------------------------------------ */

/* The body shared by every variant.  V is the vector type holding VL reals;
 * the tile is MR rows of NV vectors (NR = NV VL columns): acc[i][v] holds
 * columns [v VL, (v+1) VL) of row i.  A full tile is stored straight into
 * C; an edge tile goes through a buffer. */
#define KERNEL_BODY(V, VL, MR, NV, ZERO, LOAD, STORE, SET1, FMA, ADD)                                         \
    {                                                                                                          \
        V acc[MR][NV];                                                                                         \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                                  \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = ZERO;                             \
        for (int k = 0; k < kc; k++) {                                                                         \
            V bv[NV];                                                                                          \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) bv[v] = LOAD(b + v * VL);                     \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                            \
                V ai = SET1(a[i * rsa]);                                                                       \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = FMA(ai, bv[v], acc[i][v]);    \
            }                                                                                                  \
            a += csa;                                                                                          \
            b += NV * VL;                                                                                      \
        }                                                                                                      \
        if (mr == MR && nr == NV * VL) {                                                                       \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                            \
                ag_real *ci = c + (size_t)i * ldc;                                                             \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                         \
                    if (!overwrite) acc[i][v] = ADD(acc[i][v], LOAD(ci + v * VL));                             \
                    STORE(ci + v * VL, acc[i][v]);                                                             \
                }                                                                                              \
            }                                                                                                  \
            return;                                                                                            \
        }                                                                                                      \
        ag_real tile[MR * NV * VL];                                                                            \
        for (int i = 0; i < MR; i++)                                                                           \
            for (int v = 0; v < NV; v++) STORE(tile + (i * NV + v) * VL, acc[i][v]);                          \
        store_tile(tile, NV * VL, c, ldc, mr, nr, overwrite);                                                  \
    }

#define KERNEL_ARGS int kc, const ag_real *a, int rsa, int csa, const ag_real *b, ag_real *c, int ldc, int mr, int nr, int overwrite

#if defined(__GNUC__) && defined(__x86_64__)
#define HAVE_X86 1
#include <immintrin.h>
#ifdef AG_DOUBLE
#define K512(MR, NV) KERNEL_BODY(__m512d, 8, MR, NV, _mm512_setzero_pd(), _mm512_loadu_pd, _mm512_storeu_pd, \
                             _mm512_set1_pd, _mm512_fmadd_pd, _mm512_add_pd)
#define K256(MR, NV) KERNEL_BODY(__m256d, 4, MR, NV, _mm256_setzero_pd(), _mm256_loadu_pd, _mm256_storeu_pd, \
                             _mm256_set1_pd, _mm256_fmadd_pd, _mm256_add_pd)
#else
#define K512(MR, NV) KERNEL_BODY(__m512, 16, MR, NV, _mm512_setzero_ps(), _mm512_loadu_ps, _mm512_storeu_ps, \
                             _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps)
#define K256(MR, NV) KERNEL_BODY(__m256, 8, MR, NV, _mm256_setzero_ps(), _mm256_loadu_ps, _mm256_storeu_ps, \
                             _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps)
#endif
/* AVX-512: 32 registers, 24 of them accumulators (12 x 2). */
__attribute__((target("avx512f,fma"))) static void kernel_avx512(KERNEL_ARGS) K512(AVX512_MR, AVX512_NV)
/* AVX2: 16 registers, 12 of them accumulators (6 x 2). */
__attribute__((target("avx2,fma"))) static void kernel_avx2(KERNEL_ARGS) K256(6, 2)
#endif

/* Portable: 16-byte vectors of the compiler's choosing, multiply then add. */
typedef ag_real vbase __attribute__((vector_size(16)));
enum { VL_BASE = 16 / (int)sizeof(ag_real) };
static inline vbase vb_load(const ag_real *p)
{
    vbase v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void vb_store(ag_real *p, vbase v) { memcpy(p, &v, sizeof v); }
static inline vbase vb_set1(ag_real x) { return (vbase){0} + x; }
static inline vbase vb_fma(vbase a, vbase b, vbase c) { return a * b + c; }
static inline vbase vb_add(vbase a, vbase b) { return a + b; }
static void kernel_base(KERNEL_ARGS) KERNEL_BODY(vbase, VL_BASE, 6, 2, (vbase){0}, vb_load, vb_store, vb_set1, vb_fma,
                                                 vb_add)

typedef void (*kernel_fn)(KERNEL_ARGS);
typedef struct isa {
    kernel_fn kernel;
    int mr, nr;
    const char *name;
} isa;

static isa pick(void)
{
#ifdef HAVE_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return (isa){kernel_avx512, AVX512_MR, AVX512_NV * 64 / (int)sizeof(ag_real), "avx512"};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return (isa){kernel_avx2, 6, 2 * 32 / (int)sizeof(ag_real), "avx2"};
#endif
    return (isa){kernel_base, 6, 2 * VL_BASE, "baseline"};
}

static isa cpu;

static const isa *current(void)
{
    if (!cpu.kernel) cpu = pick();
    return &cpu;
}

/* Which micro-kernel runs: "avx512", "avx2" or "baseline".  Tests and the
 * benchmark may force one the CPU has (by name), or return to the CPU's
 * choice (NULL).  Returns the name of the one in use.  Not thread-safe:
 * call it while no product runs. */
const char *ag__gemm_kernel(const char *force)
{
    isa best = pick();
    if (!force) {
        cpu = best;
        return cpu.name;
    }
    if (!strcmp(force, "baseline")) cpu = (isa){kernel_base, 6, 2 * VL_BASE, "baseline"};
#ifdef HAVE_X86
    else if (!strcmp(force, "avx2") && strcmp(best.name, "baseline"))
        cpu = (isa){kernel_avx2, 6, 2 * 32 / (int)sizeof(ag_real), "avx2"};
    else if (!strcmp(force, "avx512") && !strcmp(best.name, "avx512"))
        cpu = best;
#endif
    return current()->name;
}

/* ---- the plain loops: for products too small to repay packing ---------- */

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

/* ---- the blocked product -------------------------------------------------- */

typedef struct job {
    int ta, tb, M, N, K, lda, ldb, ldc;
    const ag_real *A, *B;
    ag_real *C;
    ag_real beta;
    const isa *isa;
    ag_real *bpack; /* shared: the calling thread's B buffer */
    int failed;     /* a thread could not get its A buffer: C untouched */
} job;

/* Thread t of nt: pack its share of the B block, wait for the others, then
 * compute its share of every block of rows.  With nt == 1 this is the
 * whole product on the calling thread. */
static void gemm_thread(job *jb, int t, int nt)
{
    const int MR = jb->isa->mr, NR = jb->isa->nr;
    const int M = jb->M, N = jb->N, K = jb->K;
    ag_real *apack = reserve(&pack_a, &cap_a, (size_t)MR * KC);
    if (!apack) {
#ifdef _OPENMP
#pragma omp atomic write
#endif
        jb->failed = 1;
    }
#ifdef _OPENMP
#pragma omp barrier
#endif
    int failed;
#ifdef _OPENMP
#pragma omp atomic read
#endif
    failed = jb->failed;
    if (failed) return; /* nobody has touched C: the caller falls back */
    for (int jc = 0; jc < N; jc += NC) {
        int nc = N - jc < NC ? N - jc : NC, npanels = (nc + NR - 1) / NR;
        for (int pc = 0; pc < K; pc += KC) {
            int kc = K - pc < KC ? K - pc : KC;
            int overwrite = pc == 0 && jb->beta == 0;
            /* B block: panels dealt out to the threads in turn */
            for (int jp = t; jp < npanels; jp += nt) {
                int j0 = jc + jp * NR, nr = N - j0 < NR ? N - j0 : NR;
                pack_b_panel(jb->bpack + (size_t)jp * NR * kc, NR, jb->B, jb->tb, jb->ldb, j0, nr, pc, kc);
            }
#ifdef _OPENMP
#pragma omp barrier
#endif
            {
                /* this thread's rows: a contiguous share of the MR panels */
                int mpanels = (M + MR - 1) / MR;
                int r0 = (int)((long)mpanels * t / nt) * MR, r1 = (int)((long)mpanels * (t + 1) / nt) * MR;
                if (r1 > M) r1 = M;
                for (int ic = r0; ic < r1; ic += MC) {
                    int mc = r1 - ic < MC ? r1 - ic : MC;
                    for (int jp = 0; jp < npanels; jp++) {
                        int j0 = jc + jp * NR, nr = N - j0 < NR ? N - j0 : NR;
                        const ag_real *bp = jb->bpack + (size_t)jp * NR * kc;
                        for (int i0 = ic; i0 < ic + mc; i0 += MR) {
                            int mr = r1 - i0 < MR ? r1 - i0 : MR;
                            ag_real *c = jb->C + (size_t)i0 * jb->ldc + j0;
                            if (mr < MR) { /* the edge: zero-padded copy */
                                if (jp == 0) pack_a_panel(apack, MR, jb->A, jb->ta, jb->lda, i0, mr, pc, kc);
                                jb->isa->kernel(kc, apack, 1, MR, bp, c, jb->ldc, mr, nr, overwrite);
                            } else if (jb->ta) { /* A stored [K, M]: rows of depth are contiguous */
                                jb->isa->kernel(kc, jb->A + (size_t)pc * jb->lda + i0, 1, jb->lda, bp, c, jb->ldc,
                                                mr, nr, overwrite);
                            } else {
                                jb->isa->kernel(kc, jb->A + (size_t)i0 * jb->lda + pc, jb->lda, 1, bp, c, jb->ldc,
                                                mr, nr, overwrite);
                            }
                        }
                    }
                }
            }
#ifdef _OPENMP
#pragma omp barrier /* before the B block is packed again */
#endif
        }
    }
}

/* How many threads a product of this size deserves: one per ~2 MFLOP of
 * work, never more than ag_get_threads(), one inside a parallel region. */
static int threads_for(double flops)
{
#ifdef _OPENMP
    int nt = ag_get_threads();
    if (nt <= 1 || omp_in_parallel()) return 1;
    int want = (int)(flops / 2e6);
    if (want < nt) nt = want < 1 ? 1 : want;
    return nt;
#else
    (void)flops;
    return 1;
#endif
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
    const isa *is = current();
    if ((double)M * N * K < 8 * 1024 || M < is->mr || N < is->nr / 2) {
        gemm_small(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    int nc = N < NC ? N : NC, kc = K < KC ? K : KC;
    ag_real *bpack = reserve(&pack_b, &cap_b, (size_t)((nc + is->nr - 1) / is->nr) * is->nr * kc);
    if (!bpack) {
        gemm_small(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc); /* no memory: still correct */
        return;
    }
    job jb = {ta, tb, M, N, K, lda, ldb, ldc, A, B, C, beta, is, bpack, 0};
    int nt = threads_for(2.0 * M * N * K);
#ifdef _OPENMP
    if (nt > 1) {
#pragma omp parallel num_threads(nt)
        gemm_thread(&jb, omp_get_thread_num(), omp_get_num_threads());
    } else
#endif
        gemm_thread(&jb, 0, 1);
    if (jb.failed) gemm_small(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}
