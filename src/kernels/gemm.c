/* gemm.c: C = beta * C + op(A) op(B), row-major, every transpose combination
 * that matmul's forward and backward need; ag__gemm_bias_res then adds a
 * bias per column in the same store (a dense layer's y = x W^T + b, one
 * pass), and a matrix R after it, if given (y = x W^T + b + r: a dense
 * layer and the residual added to it).
 *
 * The classic blocked design (Goto; BLIS), loops from the outside in:
 *   jc: columns of C in blocks of NC
 *   pc:   depth in blocks of KC; B[pc:pc+kc, jc:jc+nc] is packed into
 *         panels of NR columns ([kc][NR], zero-padded), undoing any
 *         transpose, so that the kernel's loads of B are contiguous
 *   ic:     rows of C in blocks of MC
 *   jr, ir:   the micro-kernel: an MR x NR tile of C held in vector
 *             registers while k walks a panel of B and MR rows of A:
 *               acc[i][:] += A(i, k) * b[k][:]   (one broadcast, NR/VL FMAs)
 * A needs little packing: the kernel broadcasts one element of A at a
 * time, so it reads A in place through two strides (row, depth) whatever
 * the transpose.  Only an edge of fewer than MR rows is copied,
 * zero-padded, and A^T when its rows lie far apart (kernels/gemm_pack.c
 * does the packing).
 * Packing B pays only when many row panels reuse it: for a product of a
 * few rows the kernel reads B (not transposed) in place too.
 *
 * The kernel is written with intrinsics for AVX-512, AVX2+FMA and arm64's
 * NEON and with GCC vector extensions for a portable baseline; the CPU
 * picks at run time (ag__gemm_kernel forces one).  Every variant adds the
 * same products in the same order (k ascending in each KC block, one
 * accumulator per output element, blocks added to C in order), so the FMA
 * variants, x86's and arm64's, agree to the last bit and the baseline (no
 * FMA: a rounding per multiply) agrees within float rounding.
 *
 * Threads (ag_set_threads): C is cut into one contiguous share of row
 * panels or of column panels per thread, and each thread computes its
 * share alone, packing what it needs: no barriers.  Which thread computes
 * a tile never changes how it is computed, so the result does not depend
 * on the thread count at all.
 *
 * On AVX-512 and AVX2 the products of a toy attention head (N <= 32,
 * K <= 64, M <= 64) take a kernel of their own with no packing or blocking
 * (kernels/gemm_head.c; the same bits as the blocked kernel).  Elsewhere,
 * products too small to repay any of this (M N K < 256) take plain,
 * vectorised loops instead. */
#include "core/internal.h"
#include "kernels/gemm.h"
#include "kernels/gemm_blocks.h"

#include <stdint.h>

#ifndef GEMM_SMALL
#define GEMM_SMALL 256 /* M N K below which the plain loops win */
#endif

/* Write an MR x w tile (row stride w) into C: the rows and columns that
 * exist, overwriting or adding. */
static void store_tile(const ag_real *tile, int w, ag_real *c, int ldc, int mr, int nr, int overwrite)
{
    for (int i = 0; i < mr; i++) {
        ag_real *ci = c + (size_t)i * ldc;
        const ag_real *ti = tile + (size_t)i * w;
        if (overwrite)
            memcpy(ci, ti, (size_t)nr * sizeof(ag_real));
        else
#pragma omp simd
            for (int j = 0; j < nr; j++) ci[j] += ti[j];
    }
}

/* The same, then bias[j] added to column j: c = (tile [+ c]) + bias, the
 * kernel's order. */
__attribute__((noinline)) static void store_tile_bias(const ag_real *tile, int w, ag_real *c, int ldc, int mr,
                                                      int nr, int overwrite, const ag_real *bias)
{
    for (int i = 0; i < mr; i++) {
        ag_real *ci = c + (size_t)i * ldc;
        const ag_real *ti = tile + (size_t)i * w;
        if (overwrite)
#pragma omp simd
            for (int j = 0; j < nr; j++) ci[j] = ti[j] + bias[j];
        else
#pragma omp simd
            for (int j = 0; j < nr; j++) ci[j] = (ci[j] + ti[j]) + bias[j];
    }
}

/* C[i, j] = (C[i, j] + bias[j]) + R[i, j] over M rows of N (bias or R
 * NULL: left out; R has C's row stride): the bias and the residual of the
 * paths whose store cannot add them, the same sums as the kernel's. */
static void add_bias_res(int M, int N, const ag_real *bias, const ag_real *res, ag_real *C, int ldc)
{
    for (int i = 0; i < M; i++) {
        ag_real *c = C + (size_t)i * ldc;
        if (bias)
#pragma omp simd
            for (int j = 0; j < N; j++) c[j] += bias[j];
        if (res) {
            const ag_real *r = res + (size_t)i * ldc;
#pragma omp simd
            for (int j = 0; j < N; j++) c[j] += r[j];
        }
    }
}

/* ---- micro-kernels ------------------------------------------------------ */

/* How the kernel reaches element (i, k) of A, a[i rsa + k csa] (ROWS, the
 * last argument of KERNEL_BODY): STRIDED indexes from a, which steps by
 * csa; ROWPTR keeps one pointer a row, each stepping by csa.  The
 * compilers turn STRIDED's six rows into one address register stepped
 * six times a k on arm64 (clang: six dependent post-incremented loads), a
 * chain as long as the FMAs' whole issue time; ROWPTR's pointers are made
 * opaque once (the empty asm), so that they stay six independent ones. */
#define STRIDED_INIT
#define STRIDED_AT(i) a[(i) * rsa]
#define STRIDED_STEP(i)
#define ROWPTR_INIT                                                                                            \
    const ag_real *ar[MR];                                                                                     \
    _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) {                                                     \
        ar[i] = a + (size_t)i * rsa;                                                                           \
        __asm__("" : "+r"(ar[i]));                                                                             \
    }
#define ROWPTR_AT(i) ar[i][0]
#define ROWPTR_STEP(i) ar[i] += csa;

/* The body shared by every variant.  V is the vector type holding VL reals;
 * the tile is MR rows of NV vectors (NV VL columns): acc[i][v] holds
 * columns [v VL, (v+1) VL) of row i.  Element (i, k) of A is a[i rsa +
 * k csa]; row k of the B panel starts at b + k ldbk (ldbk = NV VL packed,
 * or B's own row length when B is read in place).  A full tile is stored
 * straight into C; an edge tile goes through a buffer.  bias (the tile's
 * columns of it, or NULL) is added last, after C: acc [+ C] + bias.
 * Every loop over acc is unrolled, the edge's too: one indexed by a
 * variable makes the compiler keep acc on the stack, and every tile then
 * stores its 24 vectors there twice and loads them once.  DONE runs once
 * the vectors are stored: on x86 it clears the wide registers' upper
 * halves (vzeroupper).  gcc 12 puts none before the call to
 * store_tile_bias, a function of this file whose registers it knows, nor
 * at the return after it, so that the kernel would leave them dirty, and
 * every SSE instruction after it (plain C code, libm's erf and exp) would
 * wait on them, up to ten times slower, until the next vzeroupper. */
#define KERNEL_BODY(V, VL, NV, ZERO, LOAD, STORE, SET1, FMA, ADD, ROWS, DONE)                                 \
    {                                                                                                          \
        V acc[MR][NV];                                                                                         \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                                   \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = ZERO;                             \
        ROWS##_INIT                                                                                            \
        for (int k = 0; k < kc; k++) {                                                                         \
            V bv[NV];                                                                                          \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) bv[v] = LOAD(b + v * VL);                     \
            _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) {                                             \
                V ai = SET1(ROWS##_AT(i));                                                                     \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = FMA(ai, bv[v], acc[i][v]);    \
                ROWS##_STEP(i)                                                                                 \
            }                                                                                                  \
            a += csa;                                                                                          \
            b += ldbk;                                                                                         \
        }                                                                                                      \
        if (skip == 0 && mr == MR && nr == NV * VL) {                                                          \
            V bias_v[NV];                                                                                      \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) bias_v[v] = bias ? LOAD(bias + v * VL) : ZERO; \
            _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) {                                             \
                ag_real *ci = c + (size_t)i * ldc;                                                             \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                         \
                    if (!overwrite) acc[i][v] = ADD(acc[i][v], LOAD(ci + v * VL));                             \
                    if (bias) acc[i][v] = ADD(acc[i][v], bias_v[v]);                                           \
                    STORE(ci + v * VL, acc[i][v]);                                                             \
                }                                                                                              \
            }                                                                                                  \
            return;                                                                                            \
        }                                                                                                      \
        ag_real tile[MR * NV * VL];                                                                            \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                                   \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) STORE(tile + (i * NV + v) * VL, acc[i][v]);   \
        DONE;                                                                                                  \
        if (bias)                                                                                              \
            store_tile_bias(tile + skip * NV * VL, NV * VL, c + (size_t)skip * ldc, ldc, mr - skip, nr,        \
                            overwrite, bias);                                                                  \
        else                                                                                                   \
            store_tile(tile + skip * NV * VL, NV * VL, c + (size_t)skip * ldc, ldc, mr - skip, nr, overwrite); \
    }

#define KERNEL_ARGS                                                                                            \
    int kc, const ag_real *a, int rsa, int csa, const ag_real *b, int ldbk, ag_real *c, int ldc, int mr, int nr,  \
        int overwrite, int skip, const ag_real *bias
typedef void (*kernel_fn)(KERNEL_ARGS);

/* R added to a tile the kernel has just stored (ag__gemm_bias_res), while
 * it is in L1: c[i][j] += r[i][j] over mr rows of nr columns, row stride
 * ldc for both; whole vectors, then single values.  The sums of a store
 * that would add R after the bias, without costing the products that have
 * no R a thing.  One per instruction set, as the kernels. */
#define ADD_TILE_BODY(V, VL, LOAD, STORE, ADD)                                                                 \
    {                                                                                                          \
        for (int i = 0; i < mr; i++) {                                                                         \
            ag_real *ci = c + (size_t)i * ldc;                                                                 \
            const ag_real *ri = r + (size_t)i * ldc;                                                           \
            int j = 0;                                                                                         \
            for (; j + VL <= nr; j += VL) STORE(ci + j, ADD(LOAD(ci + j), LOAD(ri + j)));                      \
            for (; j < nr; j++) ci[j] += ri[j];                                                                \
        }                                                                                                      \
    }
#define ADD_TILE_ARGS int mr, int nr, const ag_real *r, ag_real *c, int ldc
typedef void (*add_tile_fn)(ADD_TILE_ARGS);

/* One kernel per tile width: NV = 1..4 vectors, so that a narrow product
 * (a head of 16 columns) or the last panel of a wide one does not pay for
 * a full-width tile. */
#define KERNELS(PREFIX, TARGET, BODY)                                                                           \
    TARGET static void PREFIX##1(KERNEL_ARGS) BODY(1);                                                         \
    TARGET static void PREFIX##2(KERNEL_ARGS) BODY(2);                                                         \
    TARGET static void PREFIX##3(KERNEL_ARGS) BODY(3);                                                         \
    TARGET static void PREFIX##4(KERNEL_ARGS) BODY(4);

#if AG_X86_KERNELS
#define HAVE_X86 1
#include <immintrin.h>
#ifdef AG_DOUBLE
#define K512(NV) KERNEL_BODY(__m512d, 8, NV, _mm512_setzero_pd(), _mm512_loadu_pd, _mm512_storeu_pd, \
                             _mm512_set1_pd, _mm512_fmadd_pd, _mm512_add_pd, STRIDED, _mm256_zeroupper())
#define K256(NV) KERNEL_BODY(__m256d, 4, NV, _mm256_setzero_pd(), _mm256_loadu_pd, _mm256_storeu_pd, \
                             _mm256_set1_pd, _mm256_fmadd_pd, _mm256_add_pd, STRIDED, _mm256_zeroupper())
#define A512 ADD_TILE_BODY(__m512d, 8, _mm512_loadu_pd, _mm512_storeu_pd, _mm512_add_pd)
#define A256 ADD_TILE_BODY(__m256d, 4, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_add_pd)
#else
#define K512(NV) KERNEL_BODY(__m512, 16, NV, _mm512_setzero_ps(), _mm512_loadu_ps, _mm512_storeu_ps, \
                             _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, STRIDED, _mm256_zeroupper())
#define K256(NV) KERNEL_BODY(__m256, 8, NV, _mm256_setzero_ps(), _mm256_loadu_ps, _mm256_storeu_ps, \
                             _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, STRIDED, _mm256_zeroupper())
#define A512 ADD_TILE_BODY(__m512, 16, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_add_ps)
#define A256 ADD_TILE_BODY(__m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_add_ps)
#endif
/* AVX-512: 32 registers; the widest tile, 6 x 4 vectors (6 x 64 floats),
 * keeps 24 accumulators, 4 vectors of B and a broadcast of A. */
KERNELS(k512_, __attribute__((target("avx512f,fma"))), K512)
__attribute__((target("avx512f"))) static void k512_add(ADD_TILE_ARGS) A512
/* AVX2: 16 registers; 6 x 2 vectors is the widest that fits (12
 * accumulators), so the 3- and 4-vector tiles spill and are never picked. */
KERNELS(k256_, __attribute__((target("avx2,fma"))), K256)
__attribute__((target("avx2"))) static void k256_add(ADD_TILE_ARGS) A256
#endif

#if AG_NEON_KERNELS
#define HAVE_NEON 1
#include <arm_neon.h>
/* NEON: 32 registers of 16 bytes, and a fused multiply-add (vfmaq) on
 * every arm64 CPU.  The widest tile, 6 x 4 vectors (6 x 16 floats, 6 x 8
 * doubles), is AVX-512's shape: 24 accumulators, 4 vectors of B and a
 * broadcast of A, 29 registers; per step of k, 4 loads of B and 6 of A
 * feed 24 FMAs (an 8 x 12 tile: 3 and 8 for the same 24).  One MR for
 * every level keeps the blocking above the same. */
#ifdef AG_DOUBLE
typedef float64x2_t vneon;
#define VN(f) f##_f64 /* vfmaq_f64 ... */
#else
typedef float32x4_t vneon;
#define VN(f) f##_f32
#endif
enum { VL_NEON = 16 / (int)sizeof(ag_real) };
static inline vneon vn_zero(void) { return VN(vdupq_n)(0); }
static inline vneon vn_fma(vneon a, vneon b, vneon c) { return VN(vfmaq)(c, a, b); } /* a b + c, one rounding */
#define KNEON(NV) \
    KERNEL_BODY(vneon, VL_NEON, NV, vn_zero(), VN(vld1q), VN(vst1q), VN(vdupq_n), vn_fma, VN(vaddq), ROWPTR, (void)0)
/* GCC's scheduler, run before registers are allocated, hoists the six
 * loads of A above the FMAs, and 24 + 4 + 6 vectors do not fit in 32: it
 * spills accumulators in the loop.  Without that pass it keeps the source
 * order, one broadcast of A live at a time (clang does so anyway). */
#if defined(__GNUC__) && !defined(__clang__)
#define NEON_SCHED __attribute__((optimize("no-schedule-insns")))
#else
#define NEON_SCHED
#endif
KERNELS(kneon_, NEON_SCHED, KNEON)
static void kneon_add(ADD_TILE_ARGS) ADD_TILE_BODY(vneon, VL_NEON, VN(vld1q), VN(vst1q), VN(vaddq))
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
#ifdef AG_DOUBLE
static inline vbase vb_set1(ag_real x) { return (vbase){x, x}; }
#else
static inline vbase vb_set1(ag_real x) { return (vbase){x, x, x, x}; }
#endif
static inline vbase vb_fma(vbase a, vbase b, vbase c) { return a * b + c; }
static inline vbase vb_add(vbase a, vbase b) { return a + b; }
#define KBASE(NV) \
    KERNEL_BODY(vbase, VL_BASE, NV, (vbase){0}, vb_load, vb_store, vb_set1, vb_fma, vb_add, STRIDED, (void)0)
KERNELS(kbase_, , KBASE)
static void kbase_add(ADD_TILE_ARGS) ADD_TILE_BODY(vbase, VL_BASE, vb_load, vb_store, vb_add)

typedef struct isa {
    kernel_fn kernel[NV_MAX + 1]; /* by tile width in vectors; [0] unused */
    add_tile_fn add_tile;         /* R added to a stored tile */
    int vl, nv;                   /* reals per vector; the widest tile used */
    const char *name;
} isa;

static const isa isa_base = {{NULL, kbase_1, kbase_2, kbase_3, kbase_4}, kbase_add, VL_BASE, 2, "baseline"};
#ifdef HAVE_X86
static const isa isa_avx512 = {{NULL, k512_1, k512_2, k512_3, k512_4}, k512_add, 64 / (int)sizeof(ag_real), 4,
                                "avx512"};
static const isa isa_avx2 = {{NULL, k256_1, k256_2, k256_3, k256_4}, k256_add, 32 / (int)sizeof(ag_real), 2,
                              "avx2"};
#endif
#ifdef HAVE_NEON
static const isa isa_neon = {{NULL, kneon_1, kneon_2, kneon_3, kneon_4}, kneon_add, VL_NEON, 4, "neon"};
#endif

/* The kernel set in use: the instruction set ag__isa picks. */
static const isa *current(void)
{
#ifdef HAVE_X86
    static const isa *const by_level[AG_ISA_COUNT] = {&isa_base, &isa_avx2, &isa_avx512};
    return by_level[ag__isa()];
#elif defined(HAVE_NEON)
    return ag__isa() == AG_ISA_NEON ? &isa_neon : &isa_base;
#else
    return &isa_base;
#endif
}

const char *ag__gemm_kernel(const char *force) { return ag__isa_force(force); }

/* ---- the blocked product -------------------------------------------------- */

typedef struct job {
    int ta, tb, M, N, K, lda, ldb, ldc;
    const ag_real *A, *B;
    ag_real *C;
    ag_real beta;
    const ag_real *bias; /* [N], added to every row of C after the sum, or NULL */
    const ag_real *res;  /* [M, N] with C's row stride, added after the bias, or NULL */
    const isa *isa;
    int nshares, by_rows; /* C cut in nshares shares of row (or column) panels */
} job;

/* The tiles of rows [ic, ic+mc) and columns [jc, jc+nc) over one depth
 * block [pc, pc+kc): B's panels are in bpack (or, direct, read in place
 * where whole), A's in apack when packed (pack_a), else read in place.
 * bias and res: only with the last depth block. */
static void gemm_block(const job *jb, int ic, int mc, int m1, int jc, int nc, int pc, int kc, const ag_real *apack,
                       bool pack_a, const ag_real *bpack, bool direct, const ag_real *bias, const ag_real *res)
{
    const isa *is = jb->isa;
    const int VL = is->vl, NR = is->nv * VL, overwrite = pc == 0 && jb->beta == 0;
    ag_real *edge = (ag_real *)apack; /* a product of fewer than MR rows, read in place */
    for (int j0 = jc; j0 < jc + nc; j0 += NR) {
        int nr = jc + nc - j0 < NR ? jc + nc - j0 : NR, w = (nr + VL - 1) / VL * VL, ldbk = w;
        kernel_fn kern = is->kernel[w / VL];
        const ag_real *bp = bpack + (size_t)(j0 - jc) * kc, *bj = bias ? bias + j0 : NULL;
        if (direct && nr == w) bp = jb->B + (size_t)pc * jb->ldb + j0, ldbk = jb->ldb;
        for (int i0 = ic; i0 < ic + mc; i0 += MR) {
            int mr, skip, i = ag__gemm_panel_at(i0, m1, &mr, &skip);
            ag_real *c = jb->C + (size_t)i * jb->ldc + j0;
            if (pack_a)
                kern(kc, apack + (size_t)(i0 - ic) * kc, 1, MR, bp, ldbk, c, jb->ldc, mr, nr, overwrite, skip, bj);
            else if (mr < MR) { /* a zero-padded copy, once per depth block */
                if (j0 == jc) ag__gemm_pack_a_edge(edge, jb->A, jb->ta, jb->lda, i, mr, pc, kc);
                kern(kc, edge, 1, MR, bp, ldbk, c, jb->ldc, mr, nr, overwrite, 0, bj);
            } else if (jb->ta) /* A stored [K, M]: element (i, k) at A[k lda + i] */
                kern(kc, jb->A + (size_t)pc * jb->lda + i, 1, jb->lda, bp, ldbk, c, jb->ldc, mr, nr, overwrite, skip,
                     bj);
            else /* A stored [M, K]: element (i, k) at A[i lda + k] */
                kern(kc, jb->A + (size_t)i * jb->lda + pc, jb->lda, 1, bp, ldbk, c, jb->ldc, mr, nr, overwrite,
                     skip, bj);
            if (res) /* + R, while the tile is in L1 */
                is->add_tile(mr - skip, nr, res + (size_t)i0 * jb->ldc + j0, c + (size_t)skip * jb->ldc, jb->ldc);
        }
    }
}

/* C[m0:m1, n0:n1] of the product, on the calling thread with its own
 * packing buffers: the loops jc, pc, ic of the blocked design, packing B's
 * block once per (jc, pc) and A's once per (pc, ic) when it is packed.
 * Panels of B are NR = nv VL columns wide; the last one only as many
 * vectors wide as it needs.  A is read in place (the kernel takes its
 * strides) but for an edge of fewer than MR rows and a wide A^T
 * (pack_a).  Without memory for the buffers, the plain loops do it. */
static void gemm_part(const job *jb, int m0, int m1, int n0, int n1)
{
    const isa *is = jb->isa;
    const int VL = is->vl, NR = is->nv * VL, K = jb->K;
    int ncmax = n1 - n0 < NC ? n1 - n0 : NC, kcmax = K < KC ? K : KC;
    /* A stored [K, M] is packed when more than 4 panels of B read the copy
     * (dW = dY^T X of a 512-wide layer: 1.12x); for fewer, the copy costs
     * as much as it saves (a 64-wide layer's: 0.97x). */
    bool pack_a = jb->ta && n1 - n0 > 4 * NR;
    ag_real *apack, *bpack;
    if (!ag__gemm_buffers((size_t)(pack_a ? MC : MR) * kcmax, (size_t)((ncmax + NR - 1) / NR) * NR * kcmax, &apack,
                          &bpack)) {
        ag_real *c = jb->C + (size_t)m0 * jb->ldc + n0;
        ag__gemm_small(jb->ta, jb->tb, m1 - m0, n1 - n0, K, jb->A + (size_t)m0 * (jb->ta ? 1 : jb->lda), jb->lda,
                       jb->B + (size_t)n0 * (jb->tb ? jb->ldb : 1), jb->ldb, jb->beta, c, jb->ldc);
        add_bias_res(m1 - m0, n1 - n0, jb->bias ? jb->bias + n0 : NULL,
                     jb->res ? jb->res + (size_t)m0 * jb->ldc + n0 : NULL, c, jb->ldc);
        return;
    }
    /* Packing B repays itself when many row panels read it; for a few rows
     * the kernel reads B (not transposed) in place, whole vectors of it.
     * So it does when B's rows are no wider than a panel: then a panel's
     * rows already follow each other in memory, as packing would lay them;
     * when they are up to 4 panels wide: a panel's rows, a few cache lines
     * apart, stream as well from L2 as packed ones, and the copy is saved
     * (dW = dY^T X of a 256-wide layer); and, however wide, for up to 16
     * row panels (96 rows), too few to repay the copy.  Either way the
     * kernel adds the same products in the same order: the same bits. */
    bool direct = !jb->tb && (m1 - m0 <= 16 * MR || jb->ldb <= 4 * NR);
    for (int jc = n0; jc < n1; jc += NC) {
        int nc = n1 - jc < NC ? n1 - jc : NC;
        for (int pc = 0; pc < K; pc += KC) {
            int kc = K - pc < KC ? K - pc : KC;
            bool last = pc + kc == K; /* the bias and R are added once, after the last block */
            if (!jb->tb && !direct) ag__gemm_pack_b_block(bpack, NR, VL, jb->B, jb->ldb, jc, nc, pc, kc);
            else
                for (int j0 = jc; j0 < jc + nc; j0 += NR) {
                    int nr = jc + nc - j0 < NR ? jc + nc - j0 : NR, w = (nr + VL - 1) / VL * VL;
                    if (!(direct && nr == w))
                        ag__gemm_pack_b_panel(bpack + (size_t)(j0 - jc) * kc, w, jb->B, jb->tb, jb->ldb, j0, nr, pc, kc);
                }
            for (int ic = m0; ic < m1; ic += MC) {
                int mc = m1 - ic < MC ? m1 - ic : MC;
                if (pack_a) ag__gemm_pack_a_block(apack, jb->A, jb->lda, ic, mc, m1, pc, kc);
                gemm_block(jb, ic, mc, m1, jc, nc, pc, kc, apack, pack_a, bpack, direct, last ? jb->bias : NULL,
                           last ? jb->res : NULL);
            }
        }
    }
}

/* Thread t of nt takes a contiguous share of the MR-row panels (rows) or of
 * the NR-column panels (columns) and computes it alone: no barriers, and
 * each element is computed exactly as one thread would. */
static void gemm_share(void *ctx, size_t share)
{
    const job *jb = ctx;
    int by_rows = jb->by_rows, t = (int)share, nt = jb->nshares;
    int P = by_rows ? MR : jb->isa->nv * jb->isa->vl, n = by_rows ? jb->M : jb->N;
    int panels = (n + P - 1) / P;
    int lo = (int)((long)panels * t / nt) * P, hi = (int)((long)panels * (t + 1) / nt) * P;
    if (hi > n) hi = n;
    if (lo >= hi) return;
    if (by_rows) gemm_part(jb, lo, hi, 0, jb->N);
    else gemm_part(jb, 0, jb->M, lo, hi);
}

/* The blocked product, on the library's threads when it is large enough. */
__attribute__((noinline)) static void gemm_blocked(int ta, int tb, int M, int N, int K, const ag_real *A, int lda,
                                                   const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc,
                                                   const ag_real *bias, const ag_real *res, const isa *is)
{
    job jb = {ta, tb, M, N, K, lda, ldb, ldc, A, B, C, beta, bias, res, is, 1, 0};
    /* threads: from ~16 MFLOP of work on (about 100 microseconds on one
     * core; M N K / 8 multiply-adds count as one "value" of src/core/threads.c) */
    int nt = ag__threads_for((size_t)((double)M * N * K / 8));
    if (nt == 1) {
        gemm_part(&jb, 0, M, 0, N);
        return;
    }
    /* split the way that leaves the largest share smallest; columns on a
     * tie (each thread then packs only its own part of B) */
    long NR = is->nv * is->vl, mp = (M + MR - 1) / MR, np = (N + NR - 1) / NR;
    long rows = (mp + nt - 1) / nt * MR * (long)N, cols = (np + nt - 1) / nt * NR * (long)M;
    jb.nshares = nt, jb.by_rows = rows < cols;
    ag__parallel_for((size_t)nt, nt, gemm_share, &jb);
}

/* A product of no depth: C = beta C, then the bias and R. */
__attribute__((noinline)) static void gemm_empty(int M, int N, ag_real beta, ag_real *C, int ldc, const ag_real *bias,
                                                 const ag_real *res)
{
    if (beta == 0)
        for (int i = 0; i < M; i++) memset(C + (size_t)i * ldc, 0, (size_t)N * sizeof(ag_real));
    add_bias_res(M, N, bias, res, C, ldc);
}

/* The plain loops, then the bias and R. */
__attribute__((noinline)) static void gemm_small_bias(int ta, int tb, int M, int N, int K, const ag_real *A, int lda,
                                                      const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc,
                                                      const ag_real *bias, const ag_real *res)
{
    ag__gemm_small(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    add_bias_res(M, N, bias, res, C, ldc);
}

#if defined(HAVE_X86) && !defined(AG_DOUBLE)
/* A toy head's product, for the head kernels (kernels/gemm_head.c):
 * returns the one that takes it, or NULL.  The level is read as stored,
 * without reading the CPU when it is not yet known (the first product
 * then takes gemm_general, which reads it): no call here. */
typedef void (*head_fn)(int, int, int, int, int, const float *, int, const float *, int, float, float *, int);
static inline head_fn head_product(int M, int N, int K, ag_real beta)
{
    if (!((unsigned)M - 1 < 64 && (unsigned)N - 1 < 32 && (unsigned)K - 1 < 64 && (beta == 0 || beta == 1)))
        return NULL;
    int level = atomic_load_explicit(&ag__isa_level, memory_order_relaxed);
    return level == AG_ISA_AVX512 ? ag__gemm_head512 : level == AG_ISA_AVX2 ? ag__gemm_head256 : NULL;
}
#endif

/* C = beta C + op(A) op(B), then + bias, then + R: the kernel that fits.  (ag__gemm
 * sends a head's product to its kernel itself, except while the
 * instruction set is not read yet: it is read here, and the product goes
 * where it would have gone, with its bits.) */
__attribute__((noinline)) static void gemm_general(int ta, int tb, int M, int N, int K, const ag_real *A, int lda,
                                                   const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc,
                                                   const ag_real *bias, const ag_real *res)
{
    (void)ag__isa(); /* reads the CPU the first time */
#if defined(HAVE_X86) && !defined(AG_DOUBLE)
    head_fn head = head_product(M, N, K, beta);
    if (head) {
        head(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
        add_bias_res(M, N, bias, res, C, ldc);
        return;
    }
#endif
    if (M <= 0 || N <= 0) return;
    if (K <= 0) gemm_empty(M, N, beta, C, ldc, bias, res);
    else if ((double)M * N * K < GEMM_SMALL)
        gemm_small_bias(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, bias, res);
    else gemm_blocked(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, bias, res, current());
}

void ag__gemm_bias_res(int ta, int tb, int M, int N, int K, const ag_real *A, int lda, const ag_real *B, int ldb,
                       ag_real beta, ag_real *C, int ldc, const ag_real *bias, const ag_real *res)
{
    gemm_general(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, bias, res);
}

/* gemm_general without the bias: the same signature as ag__gemm, so that
 * both of ag__gemm's calls are jumps, and the head products, thousands a
 * step, pass through it with a short prologue. */
__attribute__((noinline)) static void gemm_nobias(int ta, int tb, int M, int N, int K, const ag_real *A, int lda,
                                                  const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc)
{
    gemm_general(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, NULL, NULL);
}

void ag__gemm(int ta, int tb, int M, int N, int K, const ag_real *A, int lda, const ag_real *B, int ldb,
              ag_real beta, ag_real *C, int ldc)
{
#if defined(HAVE_X86) && !defined(AG_DOUBLE)
    head_fn head = head_product(M, N, K, beta);
    if (head) {
        head(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#endif
    gemm_nobias(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}
