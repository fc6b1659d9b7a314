/* gemm_bf16.c: C = beta C + bf16(op(A)) bf16(op(B)) (+ bias, + R): the
 * product of the operands rounded to bf16 (ops/bf16.c's rule), summed in
 * float, with the multiplications done on bf16 halves by AVX512_BF16's
 * vdpbf16ps, or on arm64 by FEAT_BF16's BFMLALB/BFMLALT.  Only where the
 * CPU has one (ag__isa_bf16()): elsewhere the callers round the operands
 * (ag__bf16_operand) and call ag__gemm.
 *
 * vdpbf16ps takes, in each 32-bit lane, a pair of bf16 values of each
 * operand and adds both products to a float accumulator, one rounding
 * each, the odd (high) half's product first:
 *   acc = (acc + a[1] b[1]) + a[0] b[0]
 * So packing, which rounds, puts depth k in the high half and k + 1 in
 * the low one (pair(x, y) below): the accumulator adds k, then k + 1, in
 * ag__gemm's order.  Each product of two bf16 values is exact in a float,
 * so a float fused multiply-add of the same values rounds as each step
 * does: with the blocks of ag__gemm (KC deep, each block's sum added to C
 * in order) this kernel gives ag__gemm's bits on the rounded operands.
 * But for subnormals: vdpbf16ps reads a subnormal operand as 0 and flushes
 * a subnormal sum to 0, which moves a value by at most 2^-126 (1.2e-38)
 * times the other operand's largest magnitude a step, times K for a sum.
 * Zeros pad an odd depth: the pair's second product, +0, leaves the sum
 * as it is (it is never -0: it starts at +0, and x + -x is +0).
 *
 * The tile is MR = 6 rows of 4 vectors of 16 floats, 24 accumulators of
 * the 32 registers, as the fp32 AVX-512 kernel's, each step of k pairs
 * one broadcast of A's pair per row and one vdpbf16ps per row and vector:
 * twice the fp32 kernel's multiply-adds per instruction.  A is packed
 * too ([k pairs][MR]), since packing is where the operands are rounded.
 *
 * The products that ag__gemm does not block (too small, or a toy head's)
 * go to ag__gemm on rounded copies (a thread's scratch: they are small),
 * with the same sums.
 *
 * arm64: BFMLALB (BFMLALT) widens the even (odd) bf16 halves of each
 * 32-bit lane of two vectors to float and adds their product to a float
 * accumulator by an IEEE fused multiply-add (the Arm ARM's FPMulAdd, under
 * FPCR as any float instruction: subnormals kept unless FPCR.FZ):
 *   acc = acc + a[0] b[0]   (B),   acc = acc + a[1] b[1]   (T)
 * So packing puts depth k in the low half and k + 1 in the high one, and
 * B then T per pair adds k, then k + 1: the NEON fp32 kernel's fused
 * multiply-adds on the same values, its bits, subnormals included.
 * (BFDOT and BFMMLA, which do 2 and 8 products an instruction, add a
 * pair's products with a rounding of their own, to odd in the first
 * implementations, and flush subnormals: neither the fp32 kernel's bits
 * nor a bound as simple.)  The tile is MR = 6 rows of 4 vectors of 4
 * floats, the NEON fp32 kernel's: 24 accumulators, 4 vectors of B (a pair
 * of depths for 4 columns each) and 2 of A (a pair for 4 rows each, the
 * lane chosen by the instruction), 30 of the 32 registers.  A's pairs are
 * packed 8 to a depth pair (MR and 2 zero rows), two whole vectors. */
#include "core/internal.h"
#include "kernels/amx.h"
#include "kernels/bf16.h"
#include "kernels/gemm.h"

#include <assert.h>
#include <stdint.h>

void ag__gemm_bf16_plain(int ta, int tb, int m0, int m1, int n0, int n1, int K, const float *A, int lda,
                         const float *B, int ldb, bool overwrite, float *C, int ldc)
{
    for (int i = m0; i < m1; i++)
        for (int j = n0; j < n1; j++) {
            float s = 0;
            for (int k = 0; k < K; k++) {
                float a = ag_bf16_round(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]);
                float b = ag_bf16_round(tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
                s += a * b;
            }
            float *c = C + (size_t)i * ldc + j;
            *c = overwrite ? s : *c + s;
        }
}

#if AG_BF16_PRODUCTS && !defined(AG_DOUBLE)

/* ag__gemm's blocks (kernels/gemm.c), which give the order of the sums;
 * NR, the tile's columns, and AP, A's pairs a depth pair (MR rows, zero
 * padded), per instruction set */
#define MR 6
#define KC 384
#define MC 72
#define NC 3072
#if AG_BF16_KERNEL
#include <immintrin.h>
#define NR 64
#define AP MR
#define VEC_TARGET __attribute__((target("avx512f")))
/* rounded bits k0 and k1 (bf16 in the high half) as a pair: k0 high, k1
 * low (scalars or vectors) */
#define JOIN(k0, k1) ((k0) | (k1) >> 16)
#else
#include <arm_neon.h>
#define NR 16
#define AP 8
#define VEC_TARGET
#define JOIN(k0, k1) ((k0) >> 16 | (k1)) /* k0 low, k1 high */
#endif

/* x's bits; the pair of depths k and k + 1 from their bits, each rounded
 * to bf16 */
static inline uint32_t bits(const float *x)
{
    uint32_t u;
    memcpy(&u, x, sizeof u);
    return u;
}
static inline uint32_t pair(uint32_t k0, uint32_t k1) { return JOIN(ag__bf16_bits(k0), ag__bf16_bits(k1)); }

/* Rows [i0, i0+mr) of op(A), mr <= MR, zero rows up to AP, depth [p0,
 * p0+kc): dst[kc/2 rounded up][AP] pairs; an odd depth's last pair is
 * (k, 0). */
VEC_TARGET static void pack_a(uint32_t *dst, const float *A, int ta, int lda, int i0, int mr, int p0, int kc)
{
    int ke = kc / 2, kp = (kc + 1) / 2;
    for (int p = 0; p < kp; p++)
        for (int i = mr; i < AP; i++) dst[(size_t)p * AP + i] = 0;
    if (!ta) { /* A stored [M, K]: a pair is adjacent in a row; the row rounded first, 16 values a step */
        uint32_t r[KC];
        for (int i = 0; i < mr; i++) {
            const float *a = A + (size_t)(i0 + i) * lda + p0;
            int k = 0;
            for (; k + 16 <= kc; k += 16) {
                ag__u32x16 v;
                memcpy(&v, a + k, sizeof v);
                ag__bf16_bits16(&v);
                memcpy(r + k, &v, sizeof v);
            }
            for (; k < kc; k++) r[k] = ag__bf16_bits(bits(a + k));
            for (int p = 0; p < ke; p++) dst[(size_t)p * AP + i] = JOIN(r[2 * p], r[2 * p + 1]);
            if (kc & 1) dst[(size_t)ke * AP + i] = JOIN(r[kc - 1], 0u);
        }
    } else { /* A stored [K, M]: rows k and k + 1 hold the pairs' halves */
        for (int p = 0; p < kp; p++) {
            const float *a0 = A + (size_t)(p0 + 2 * p) * lda + i0, *a1 = a0 + lda;
            bool last = p == ke; /* (k, 0) */
            for (int i = 0; i < mr; i++) dst[(size_t)p * AP + i] = pair(bits(a0 + i), last ? 0 : bits(a1 + i));
        }
    }
}

/* Columns [j0, j0+nr) of op(B), nr <= NR, zero columns up to NR, depth
 * [p0, p0+kc): dst[kc/2 rounded up][NR] pairs. */
VEC_TARGET static void pack_b(uint32_t *dst, const float *B, int tb, int ldb, int j0, int nr, int p0, int kc)
{
    int ke = kc / 2, kp = (kc + 1) / 2;
    if (!tb) { /* B stored [K, N]: rows k and k + 1 side by side, whole vectors of them */
        for (int p = 0; p < kp; p++) {
            const float *b0 = B + (size_t)(p0 + 2 * p) * ldb + j0, *b1 = b0 + ldb;
            uint32_t *d = dst + (size_t)p * NR;
            if (p < ke && nr == NR)
                for (int v = 0; v < NR / 16; v++) {
                    ag__u32x16 x0, x1;
                    memcpy(&x0, b0 + 16 * v, sizeof x0), memcpy(&x1, b1 + 16 * v, sizeof x1);
                    ag__bf16_bits16(&x0), ag__bf16_bits16(&x1);
                    x0 = JOIN(x0, x1);
                    memcpy(d + 16 * v, &x0, sizeof x0);
                }
            else {
                for (int j = 0; j < nr; j++) d[j] = pair(bits(b0 + j), p < ke ? bits(b1 + j) : 0);
                for (int j = nr; j < NR; j++) d[j] = 0;
            }
        }
        return;
    }
    /* B stored [N, K]: a pair is adjacent in a row of B, a column of the panel */
    for (int j = 0; j < nr; j++) {
        const float *b = B + (size_t)(j0 + j) * ldb + p0;
        for (int p = 0; p < ke; p++) dst[(size_t)p * NR + j] = pair(bits(b + 2 * p), bits(b + 2 * p + 1));
        if (kc & 1) dst[(size_t)ke * NR + j] = pair(bits(b + kc - 1), 0);
    }
    for (int p = 0; p < kp; p++)
        for (int j = nr; j < NR; j++) dst[(size_t)p * NR + j] = 0;
}

/* The mr x nr of an edge tile that exist, stored (overwrite) or added to C */
static void store_edge(const float tile[MR][NR], float *c, int ldc, int mr, int nr, bool overwrite)
{
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float *cij = c + (size_t)i * ldc + j;
            *cij = overwrite ? tile[i][j] : *cij + tile[i][j];
        }
}

/* The MR x NR tile at c: kp pairs of k from a [kp][AP] and b [kp][NR];
 * stored (overwrite) or added to C, the mr x nr of it that exist. */
#if AG_BF16_KERNEL
__attribute__((target("avx512f,avx512bf16"))) static void kernel(int kp, const uint32_t *a, const uint32_t *b, float *c,
                                                                 int ldc, int mr, int nr, bool overwrite)
{
    __m512 acc[MR][4];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) acc[i][v] = _mm512_setzero_ps();
    for (int p = 0; p < kp; p++, a += MR, b += NR) {
        __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 16), b2 = _mm512_loadu_si512(b + 32),
                b3 = _mm512_loadu_si512(b + 48);
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, (__m512bh)b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, (__m512bh)b1);
            acc[i][2] = _mm512_dpbf16_ps(acc[i][2], ai, (__m512bh)b2);
            acc[i][3] = _mm512_dpbf16_ps(acc[i][3], ai, (__m512bh)b3);
        }
    }
    if (mr == MR && nr == NR) {
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++) {
                float *ci = c + (size_t)i * ldc + 16 * v;
                _mm512_storeu_ps(ci, overwrite ? acc[i][v] : _mm512_add_ps(_mm512_loadu_ps(ci), acc[i][v]));
            }
        return;
    }
    float tile[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < 4; v++) _mm512_storeu_ps(&tile[i][16 * v], acc[i][v]);
    store_edge(tile, c, ldc, mr, nr, overwrite);
}
#else
/* Row i of the tile, its pair (k, k + 1) in lanes l, l + 1 of av: k's
 * products (B), then k + 1's (T), into each of the row's 4 vectors. */
#define ROW(i, av, l)                                                                                          \
    _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) {                                                      \
        acc[i][v] = vbfmlalbq_laneq_f32(acc[i][v], bv[v], av, l);                                              \
        acc[i][v] = vbfmlaltq_laneq_f32(acc[i][v], bv[v], av, (l) + 1);                                        \
    }
#ifdef __clang__
#define BF16_TARGET __attribute__((target("bf16")))
#else
#define BF16_TARGET __attribute__((target("arch=armv8.2-a+bf16")))
#endif
BF16_TARGET static void kernel(int kp, const uint32_t *a, const uint32_t *b, float *c, int ldc, int mr, int nr,
                               bool overwrite)
{
    float32x4_t acc[MR][4];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) acc[i][v] = vdupq_n_f32(0);
    for (int p = 0; p < kp; p++, a += AP, b += NR) {
        bfloat16x8_t bv[4], a0 = vreinterpretq_bf16_u32(vld1q_u32(a)), a1 = vreinterpretq_bf16_u32(vld1q_u32(a + 4));
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) bv[v] = vreinterpretq_bf16_u32(vld1q_u32(b + 4 * v));
        ROW(0, a0, 0) ROW(1, a0, 2) ROW(2, a0, 4) ROW(3, a0, 6) ROW(4, a1, 0) ROW(5, a1, 2)
    }
    if (mr == MR && nr == NR) {
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++) {
                float *ci = c + (size_t)i * ldc + 4 * v;
                vst1q_f32(ci, overwrite ? acc[i][v] : vaddq_f32(acc[i][v], vld1q_f32(ci)));
            }
        return;
    }
    float tile[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < 4; v++) vst1q_f32(&tile[i][4 * v], acc[i][v]);
    store_edge(tile, c, ldc, mr, nr, overwrite);
}
#undef ROW
#endif

typedef ag__bf16_job job;

/* C[m0:m1, n0:n1] on the calling thread, with its packing buffers: the
 * loops jc, pc, ic of the blocked design, then the tiles.  false: no
 * memory for the buffers. */
static bool part(const job *jb, int m0, int m1, int n0, int n1)
{
    int K = jb->K, kcmax = K < KC ? K : KC, kpmax = (kcmax + 1) / 2, ncmax = n1 - n0 < NC ? n1 - n0 : NC;
    float *abuf, *bbuf;
    if (!ag__gemm_buffers((size_t)MC / MR * AP * kpmax, (size_t)((ncmax + NR - 1) / NR) * NR * kpmax, &abuf, &bbuf)) return false;
    uint32_t *apack = (uint32_t *)abuf, *bpack = (uint32_t *)bbuf;
    for (int jc = n0; jc < n1; jc += NC) {
        int nc = n1 - jc < NC ? n1 - jc : NC;
        for (int pc = 0; pc < K; pc += KC) {
            int kc = K - pc < KC ? K - pc : KC, kp = (kc + 1) / 2;
            bool overwrite = pc == 0 && jb->overwrite;
            for (int j = 0; j < nc; j += NR)
                pack_b(bpack + (size_t)j * kp, jb->B, jb->tb, jb->ldb, jc + j, nc - j < NR ? nc - j : NR, pc, kc);
            for (int ic = m0; ic < m1; ic += MC) {
                int mc = m1 - ic < MC ? m1 - ic : MC;
                for (int i = 0; i < mc; i += MR)
                    pack_a(apack + (size_t)i / MR * AP * kp, jb->A, jb->ta, jb->lda, ic + i, mc - i < MR ? mc - i : MR, pc, kc);
                for (int j = 0; j < nc; j += NR)
                    for (int i = 0; i < mc; i += MR)
                        kernel(kp, apack + (size_t)i / MR * AP * kp, bpack + (size_t)j * kp,
                               jb->C + (size_t)(ic + i) * jb->ldc + jc + j, jb->ldc, mc - i < MR ? mc - i : MR,
                               nc - j < NR ? nc - j : NR, overwrite);
            }
        }
    }
    return true;
}

/* Thread t's share: a contiguous run of row (or column) panels. */
static void share(void *ctx, size_t t)
{
    const job *jb = ctx;
    int P = jb->by_rows ? MR : NR, n = jb->by_rows ? jb->M : jb->N, panels = (n + P - 1) / P, nt = jb->nshares;
    int lo = (int)((long)panels * (long)t / nt) * P, hi_ = (int)((long)panels * ((long)t + 1) / nt) * P;
    if (hi_ > n) hi_ = n;
    if (lo >= hi_) return;
    bool ok = jb->by_rows ? part(jb, lo, hi_, 0, jb->N) : part(jb, 0, jb->M, lo, hi_);
    if (!ok) /* no buffers: plain loops, the same rounded products, one sum each */
        ag__gemm_bf16_plain(jb->ta, jb->tb, jb->by_rows ? lo : 0, jb->by_rows ? hi_ : jb->M, jb->by_rows ? 0 : lo,
                            jb->by_rows ? jb->N : hi_, jb->K, jb->A, jb->lda, jb->B, jb->ldb, jb->overwrite, jb->C,
                            jb->ldc);
}

/* Whether the blocked kernel takes the product: ag__gemm blocks it (not
 * too small, not a toy head's: kernels/gemm.c's rules). */
static bool takes(int M, int N, int K)
{
    if ((double)M * N * K < 256) return false;
    return !(M <= 64 && N <= 32 && K <= 64); /* a head's product: its own kernel */
}

/* rows x cols of X (row stride ld) rounded to bf16 into dst, rows x cols */
static void round_copy(float *dst, const float *X, int ld, int rows, int cols)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            uint32_t u = ag__bf16_bits(bits(X + (size_t)i * ld + j));
            memcpy(dst + (size_t)i * cols + j, &u, sizeof u);
        }
}

/* A product the blocked kernel does not take (M N K < 256, or M <= 64,
 * N <= 32, K <= 64): ag__gemm on rounded copies of op(A) and op(B), at
 * most 64 x 64 and 64 x 32 values, in the thread's scratch. */
static void small(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
                  float *C, int ldc, const float *bias, const float *res)
{
    static _Thread_local float a[64 * 64], b[64 * 64];
    round_copy(a, A, lda, ta ? K : M, ta ? M : K);
    round_copy(b, B, ldb, tb ? N : K, tb ? K : N);
    ag__gemm_bias_res(ta, tb, M, N, K, a, ta ? M : K, b, tb ? K : N, beta, C, ldc, bias, res);
}

static void blocked(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                    ag_real beta, float *C, int ldc)
{
    job jb = {ta, tb, M, N, K, lda, ldb, ldc, A, B, C, beta == 0, 1, 0};
    int nt = ag__threads_for((size_t)((double)M * N * K / 8));
    if (nt > 1) {
        long mp = (M + MR - 1) / MR, np = (N + NR - 1) / NR;
        long rows = (mp + nt - 1) / nt * MR * (long)N, cols = (np + nt - 1) / nt * NR * (long)M;
        jb.nshares = nt, jb.by_rows = rows < cols;
    }
    ag__parallel_for((size_t)jb.nshares, jb.nshares, share, &jb);
}

/* C = (C + bias) + R, row by row, 16 columns a step: the fp32 kernel's
 * sums, in its store's order (bias or R NULL: left out). */
typedef float f32x16 __attribute__((vector_size(64)));
VEC_TARGET static void add_bias_res(int M, int N, const float *bias, const float *res, float *C, int ldc)
{
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        const float *r = res ? res + (size_t)i * ldc : NULL;
        int j = 0;
        for (; j + 16 <= N; j += 16) {
            f32x16 v, x;
            memcpy(&v, c + j, sizeof v);
            if (bias) memcpy(&x, bias + j, sizeof x), v += x;
            if (r) memcpy(&x, r + j, sizeof x), v += x;
            memcpy(c + j, &v, sizeof v);
        }
        for (; j < N; j++) {
            if (bias) c[j] += bias[j];
            if (r) c[j] += r[j];
        }
    }
}

#endif

/* Both need ag__isa_bf16(): without it, no vdpbf16ps or BFMLAL (and, built
 * without the kernel, no code). */
void ag__gemm_bf16(int ta, int tb, int M, int N, int K, const ag_real *A, int lda, const ag_real *B, int ldb,
                   ag_real beta, ag_real *C, int ldc)
{
    ag__gemm_bias_res_bf16(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, NULL, NULL);
}

void ag__gemm_bias_res_bf16(int ta, int tb, int M, int N, int K, const ag_real *A, int lda, const ag_real *B,
                            int ldb, ag_real beta, ag_real *C, int ldc, const ag_real *bias, const ag_real *res)
{
#if AG_BF16_PRODUCTS && !defined(AG_DOUBLE)
    assert(ag__isa_bf16());
    if (M <= 0 || N <= 0 || K <= 0) { /* no operand read: ag__gemm's C = beta C, + bias, + R */
        ag__gemm_bias_res(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, bias, res);
        return;
    }
    if (!takes(M, N, K)) {
        small(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, bias, res);
        return;
    }
    if (ag__isa_amx()) ag__gemm_amx(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc); /* the tiles */
    else blocked(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    if (bias || res) add_bias_res(M, N, bias, res, C, ldc);
#else
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)beta, (void)C,
        (void)ldc, (void)bias, (void)res;
    assert(!"ag__gemm_bf16 without the bf16 kernel");
#endif
}
