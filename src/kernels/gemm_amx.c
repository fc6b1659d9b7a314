/* gemm_amx.c: C = beta C + bf16(op(A)) bf16(op(B)) on AMX's tiles: the
 * product of the operands rounded to bf16 (ops/bf16.c's rule, applied
 * while packing), summed in float.
 *
 * AMX (Advanced Matrix Extensions, Sapphire Rapids on) adds eight tile
 * registers tmm0..tmm7 of up to 16 rows of 64 bytes, loaded and stored
 * with a row stride (tileloadd, tilestored), and TDPBF16PS, a matrix
 * multiply-add on them: with C a tile of 16 x 16 floats, A 16 rows of 16
 * bf16 pairs and B 16 rows (pairs of depths) of 16 columns' pairs,
 *   for m, n, p:  C[m][n] += A[m].bf16[2p] B[p].bf16[2n]
 *                 C[m][n] += A[m].bf16[2p+1] B[p].bf16[2n+1]
 * 16 x 16 x 32 multiply-adds, one instruction.  Intel's description: each
 * accumulation rounds to nearest even, input denormals are read as zero
 * and output denormals flushed to zero (MXCSR is not consulted), as
 * vdpbf16ps does.  The shape of each tile is set by a 64-byte
 * configuration (ldtilecfg), per thread; tilerelease gives the tiles back.
 * Linux enables the tiles' 8 KB of state per process, on request
 * (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)); without it the
 * first tile instruction kills the process, so ag__amx_permitted() asks
 * once and the dispatch (core/cpu.c) uses the tiles only when granted.
 *
 * Within one instruction (Intel's pseudo-code, which the tiles follow bit
 * for bit: tests/test_amx.c) the even depths' products are summed from 0
 * in order, the odd depths' apart, then C + (even + odd).
 *
 * The layout: B "VNNI", each 32-bit word a pair of depths (k even in the
 * low half, k + 1 in the high one), 16 columns to a tile row; A rows of
 * pairs, 16 rows to a tile.  Both are packed into whole tiles of 16 x 64
 * bytes, 1 KB each, laid one after the other so that each tileloadd reads
 * 1 KB in a row; packing rounds, and pads with zeros to whole tiles (rows,
 * columns, and pairs of depth: an odd depth's last pair is (k, 0)).  A
 * zero pair adds +0 to an instruction's even and odd sums, which start at
 * +0 and so are never -0: they stay as they are.
 *
 * The micro-kernel holds a 32 x 32 block of C in four tiles (2 x 2),
 * with two tiles of A and two of B: each step of 16 pairs of depth is
 * four loads and four TDPBF16PS.  The tiles load C's block, add a block
 * of depth (KC 384: 12 steps, A's two row tiles, 24 KB, stay in L1 while
 * B's tiles stream from L2) and store it back; an edge block goes through
 * a buffer.  The order in which the tiles add their products is the
 * hardware's, so this kernel is held to the bound of a sum in float
 * (tests/test_amx.c), not to ag__gemm's bits. */
#define _DEFAULT_SOURCE /* syscall(), for arch_prctl */
#include "kernels/amx.h"
#include "kernels/bf16.h"
#include "kernels/gemm.h"

#include <stdint.h>
#include <string.h>

#if AG_AMX_KERNEL
#include <cpuid.h>
#include <errno.h>
#include <immintrin.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023 /* arch/x86/include/uapi/asm/prctl.h */
#define XFEATURE_XTILEDATA 18

/* The answer: -1 not asked yet, 0 granted, else why not (an index of why_not) */
static _Atomic int permission = -1;
static const char *const why_not[] = {
    NULL,
    "the CPU has no AMX-TILE and AMX-BF16",
    "the kernel does not offer AMX tile data (Linux 5.16 on)",
    "the kernel refused AMX tile data (arch_prctl)",
};

static int ask(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d >> 24 & 1) || !(d >> 22 & 1)) return 1;
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
        return errno == EINVAL || errno == ENOSYS ? 2 : 3;
    return 0;
}

bool ag__amx_permitted(const char **why)
{
    int p = atomic_load_explicit(&permission, memory_order_acquire);
    if (p < 0) { /* threads that race here ask twice: the same answer */
        p = ask();
        atomic_store_explicit(&permission, p, memory_order_release);
    }
    if (why) *why = why_not[p];
    return p == 0;
}

#define TR 16   /* rows of a tile, and pairs of depth in a tile row */
#define TW 256  /* 32-bit words in a tile: 16 x 16 */
#define BM 32   /* rows of C's block of tiles (2 tiles) */
#define BN 32   /* columns of it (2 tiles) */
#define KC 384  /* depth block: 192 pairs, 12 steps (A's two row tiles, 24 KB, in L1) */
#define MC 128  /* rows of A packed at a time (a multiple of BM) */
#define NC 1024 /* columns of B packed at a time (a multiple of BN) */

/* the pair (k, k + 1) from their floats' bits, each rounded: k low */
static inline uint32_t pair(uint32_t k0, uint32_t k1) { return ag__bf16_bits(k0) >> 16 | ag__bf16_bits(k1); }
static inline uint32_t bits(const float *x)
{
    uint32_t u;
    memcpy(&u, x, sizeof u);
    return u;
}

/* One line of a tile, 16 words: the 16 pairs of depths (x[2c], x[2c+1])
 * of 32 contiguous values (n of them there, n <= 32: zeros past them; an
 * odd n's last pair is (x[n-1], 0)).  Rounds 16 and 16 and keeps the high
 * halves in order. */
__attribute__((target("avx512f,avx512bw"))) static inline void along16(uint32_t *dst, const float *x, int n)
{
    const __m512i odd = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                                         25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    float pad[32];
    if (n < 32) { /* a depth block's end */
        for (int k = 0; k < 32; k++) pad[k] = k < n ? x[k] : 0;
        x = pad;
    }
    ag__u32x16 lo, hi;
    memcpy(&lo, x, sizeof lo), memcpy(&hi, x + 16, sizeof hi);
    ag__bf16_bits16(&lo), ag__bf16_bits16(&hi);
    _mm512_storeu_si512(dst, _mm512_permutex2var_epi16((__m512i)lo, odd, (__m512i)hi));
}

/* One line of a tile, 16 words: the pairs (x0[i], x1[i]) of 16 entries (n
 * of them there: zeros past them; x1 NULL: (x0[i], 0)). */
__attribute__((target("avx512f,avx512bw"))) static inline void across16(uint32_t *dst, const float *x0,
                                                                        const float *x1, int n)
{
    if (n == 16 && x1) {
        ag__u32x16 lo, hi;
        memcpy(&lo, x0, sizeof lo), memcpy(&hi, x1, sizeof hi);
        ag__bf16_bits16(&lo), ag__bf16_bits16(&hi);
        lo = lo >> 16 | hi;
        memcpy(dst, &lo, sizeof lo);
        return;
    }
    for (int i = 0; i < 16; i++) dst[i] = i < n ? pair(bits(x0 + i), x1 ? bits(x1 + i) : 0) : 0;
}

/* tile = the transpose of t (16 x 16 words) */
__attribute__((target("avx512f,avx512bw"))) static inline void transpose16(uint32_t *tile, const uint32_t *t)
{
    for (int r = 0; r < TR; r++)
        for (int c = 0; c < TR; c++) tile[r * TR + c] = t[c * TR + r];
}

static int least(int a, int b) { return a < b ? a : b; }

/* Rows [i0, i0+mr) of op(A), depth [p0, p0+kc), into row tiles of 16 rows
 * by 16 pairs: tile (s, q) at dst + (s nq + q) 256 words, row r's pair c
 * at word 16 r + c; nq = kp16 / 16 steps, zero rows up to mr16 (the
 * pairs past the depth are zeros too). */
/* (compiled for AVX-512, as the lines it calls, so that they inline) */
__attribute__((target("avx512f,avx512bw"))) static void pack_a(uint32_t *dst, const float *A, int ta, int lda,
                                                                int i0, int mr, int mr16, int p0, int kc, int kp16)
{
    int nq = kp16 / TR, ns = mr16 / TR;
    if (!ta) { /* A stored [M, K]: a tile row is 32 depths of a row of A */
        for (int i = 0; i < mr16; i++) {
            /* the row after next fetched meanwhile: a row's kc values are a
             * few cache lines, too short a run for the hardware's prefetcher */
            for (int k = 0; i + 2 < mr && k < kc; k += 16) __builtin_prefetch(A + (size_t)(i0 + i + 2) * lda + p0 + k);
            for (int q = 0; q < nq; q++) {
                uint32_t *line = dst + ((size_t)(i / TR) * nq + q) * TW + (i % TR) * TR;
                if (i < mr) along16(line, A + (size_t)(i0 + i) * lda + p0 + 32 * q, kc - 32 * q);
                else memset(line, 0, TR * sizeof *line);
            }
        }
        return;
    }
    /* A stored [K, M]: rows k and k + 1 of A hold a pair for 16 rows of
     * op(A), a tile column: read along A's rows, then each tile transposed */
    uint32_t t[MC / TR][TW];
    for (int q = 0; q < nq; q++) {
        for (int c = 0, k = 32 * q; c < TR; c++, k += 2)
            for (int s = 0; s < ns; s++) {
                const float *a0 = A + (size_t)(p0 + k) * lda + i0 + TR * s;
                if (k < kc && TR * s < mr)
                    across16(t[s] + c * TR, a0, k + 1 < kc ? a0 + lda : NULL, least(TR, mr - TR * s));
                else memset(t[s] + c * TR, 0, TR * sizeof *t[s]);
            }
        for (int s = 0; s < ns; s++) transpose16(dst + ((size_t)s * nq + q) * TW, t[s]);
    }
}

/* Columns [j0, j0+nr) of op(B), depth [p0, p0+kc), into column tiles of
 * 16 pairs by 16 columns: tile (t, q) at dst + (t nq + q) 256 words, pair
 * c of column j at word 16 c + j; zero columns up to nr16. */
__attribute__((target("avx512f,avx512bw"))) static void pack_b(uint32_t *dst, const float *B, int tb, int ldb,
                                                                int j0, int nr, int nr16, int p0, int kc, int kp16)
{
    int nq = kp16 / TR, nu = nr16 / TR;
    if (!tb) { /* B stored [K, N]: rows k and k + 1 hold tile rows' pairs, read along */
        for (int q = 0; q < nq; q++)
            for (int c = 0, k = 32 * q; c < TR; c++, k += 2)
                for (int u = 0; u < nu; u++) {
                    uint32_t *line = dst + ((size_t)u * nq + q) * TW + c * TR;
                    const float *b0 = B + (size_t)(p0 + k) * ldb + j0 + TR * u;
                    if (k < kc && TR * u < nr) across16(line, b0, k + 1 < kc ? b0 + ldb : NULL, least(TR, nr - TR * u));
                    else memset(line, 0, TR * sizeof *line);
                }
        return;
    }
    /* B stored [N, K]: a column of op(B) is a row of B, a tile column: each
     * row read along (the row after next fetched meanwhile, as for A),
     * then each tile transposed */
    uint32_t t[KC / 32][TW];
    for (int u = 0; u < nu; u++) {
        for (int j = 0; j < TR; j++) {
            const float *b = B + (size_t)(j0 + TR * u + j) * ldb + p0;
            for (int k = 0; TR * u + j + 2 < nr && k < kc; k += 16) __builtin_prefetch(b + 2 * (size_t)ldb + k);
            for (int q = 0; q < nq; q++) {
                if (TR * u + j < nr) along16(t[q] + j * TR, b + 32 * q, kc - 32 * q);
                else memset(t[q] + j * TR, 0, TR * sizeof *t[q]);
            }
        }
        for (int q = 0; q < nq; q++) transpose16(dst + ((size_t)u * nq + q) * TW, t[q]);
    }
}

/* The 64-byte tile configuration: palette 1, every tile 16 rows of 64 bytes */
typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* gcc's tile intrinsics are asm statements that tell the compiler of the
 * address they read or write but not of the memory: this says that the
 * memory at p is read and written here, so its stores are done before (a
 * packed panel, the configuration) and its loads come after (a stored
 * block). */
#define MEMORY_AT(p) __asm__ volatile("" : : "r"(p) : "memory")

__attribute__((target("amx-tile"))) static void tiles_on(void)
{
    tile_config cfg = {.palette = 1};
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = TR;
    MEMORY_AT(&cfg);
    _tile_loadconfig(&cfg);
}
__attribute__((target("amx-tile"))) static void tiles_off(void) { _tile_release(); }

/* A 32 x 32 block of C, c (row stride ldc floats), += the sums of nq
 * steps of 16 pairs from row tiles a, a + nq (A's tiles (s, .) and
 * (s + 1, .)) and column tiles b, b + nq; overwrite: = them.  The tiles
 * start from C itself (or zeros) and are stored back to it. */
__attribute__((target("amx-tile,amx-bf16"))) static void block(int nq, const uint32_t *a, const uint32_t *b, float *c,
                                                               int ldc, bool overwrite)
{
    const size_t stride = (size_t)ldc * sizeof(float);
    float *c1 = c + (size_t)16 * ldc;
    MEMORY_AT(a);
    MEMORY_AT(b);
    MEMORY_AT(c);
    if (overwrite) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    } else {
        _tile_loadd(0, c, stride);
        _tile_loadd(1, c + 16, stride);
        _tile_loadd(2, c1, stride);
        _tile_loadd(3, c1 + 16, stride);
    }
    const uint32_t *a1 = a + (size_t)nq * TW, *b1 = b + (size_t)nq * TW;
    for (int q = 0; q < nq; q++) {
        _tile_loadd(4, a + (size_t)q * TW, 64);
        _tile_loadd(5, a1 + (size_t)q * TW, 64);
        _tile_loadd(6, b + (size_t)q * TW, 64);
        _tile_loadd(7, b1 + (size_t)q * TW, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c, stride);
    _tile_stored(1, c + 16, stride);
    _tile_stored(2, c1, stride);
    _tile_stored(3, c1 + 16, stride);
    MEMORY_AT(c);
}

/* c (mr x nr of it, row stride ldc) = t, or += t */
__attribute__((target("avx512f"))) static void put(float *c, int ldc, const float *t, int mr, int nr, bool overwrite)
{
    for (int i = 0; i < mr; i++) {
        float *ci = c + (size_t)i * ldc;
        const float *ti = t + (size_t)i * BN;
        if (overwrite)
            for (int j = 0; j < nr; j++) ci[j] = ti[j];
        else
            for (int j = 0; j < nr; j++) ci[j] += ti[j];
    }
}

typedef ag__bf16_job job;

static int up(int n, int m) { return (n + m - 1) / m * m; }

/* C[m0:m1, n0:n1] on the calling thread, with its packing buffers and its
 * tile configuration: the loops jc, pc, ic, then the 32 x 32 blocks.
 * false: no memory for the buffers. */
static bool part(const job *jb, int m0, int m1, int n0, int n1)
{
    int K = jb->K, kpmax = up((K < KC ? K : KC) + 1, 2) / 2, kp16max = up(kpmax, TR);
    int mcmax = up(m1 - m0 < MC ? m1 - m0 : MC, BM), ncmax = up(n1 - n0 < NC ? n1 - n0 : NC, BN);
    float *abuf, *bbuf;
    if (!ag__gemm_buffers((size_t)mcmax * kp16max, (size_t)ncmax * kp16max, &abuf, &bbuf)) return false;
    uint32_t *apack = (uint32_t *)abuf, *bpack = (uint32_t *)bbuf;
    float out[BM * BN] __attribute__((aligned(64)));
    tiles_on();
    for (int jc = n0; jc < n1; jc += NC) {
        int nc = n1 - jc < NC ? n1 - jc : NC, nc32 = up(nc, BN);
        for (int pc = 0; pc < K; pc += KC) {
            int kc = K - pc < KC ? K - pc : KC, kp16 = up((kc + 1) / 2, TR), nq = kp16 / TR;
            bool overwrite = pc == 0 && jb->overwrite;
            pack_b(bpack, jb->B, jb->tb, jb->ldb, jc, nc, nc32, pc, kc, kp16);
            for (int ic = m0; ic < m1; ic += MC) {
                int mc = m1 - ic < MC ? m1 - ic : MC, mc32 = up(mc, BM);
                pack_a(apack, jb->A, jb->ta, jb->lda, ic, mc, mc32, pc, kc, kp16);
                for (int i = 0; i < mc; i += BM)
                    for (int j = 0; j < nc; j += BN) {
                        const uint32_t *a = apack + (size_t)(i / TR) * nq * TW, *b = bpack + (size_t)(j / TR) * nq * TW;
                        float *c = jb->C + (size_t)(ic + i) * jb->ldc + jc + j;
                        int mr = mc - i < BM ? mc - i : BM, nr = nc - j < BN ? nc - j : BN;
                        if (mr == BM && nr == BN) block(nq, a, b, c, jb->ldc, overwrite);
                        else { /* an edge: the block in out, its mr x nr part added to C */
                            block(nq, a, b, out, BN, true);
                            put(c, jb->ldc, out, mr, nr, overwrite);
                        }
                    }
            }
        }
    }
    tiles_off();
    return true;
}

/* Thread t's share: a contiguous run of 32-row (or 32-column) strips. */
static void share(void *ctx, size_t t)
{
    const job *jb = ctx;
    int n = jb->by_rows ? jb->M : jb->N, strips = (n + BM - 1) / BM, nt = jb->nshares;
    int lo = (int)((long)strips * (long)t / nt) * BM, hi = (int)((long)strips * ((long)t + 1) / nt) * BM;
    if (hi > n) hi = n;
    if (lo >= hi) return;
    int m0 = jb->by_rows ? lo : 0, m1 = jb->by_rows ? hi : jb->M;
    int n0 = jb->by_rows ? 0 : lo, n1 = jb->by_rows ? jb->N : hi;
    if (!part(jb, m0, m1, n0, n1)) /* no buffers: plain loops, the same rounded products, one sum each */
        ag__gemm_bf16_plain(jb->ta, jb->tb, m0, m1, n0, n1, jb->K, jb->A, jb->lda, jb->B, jb->ldb, jb->overwrite,
                            jb->C, jb->ldc);
}

void ag__gemm_amx(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
                  float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    if (K <= 0) { /* no product: C = beta C */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0 ? 0 : C[(size_t)i * ldc + j];
        return;
    }
    if (!ag__amx_permitted(NULL)) { /* (asks first: a tile instruction before the grant kills the process) */
        ag__gemm_bf16_plain(ta, tb, 0, M, 0, N, K, A, lda, B, ldb, beta == 0, C, ldc);
        return;
    }
    job jb = {ta, tb, M, N, K, lda, ldb, ldc, A, B, C, beta == 0, 1, 0};
    int nt = ag__threads_for((size_t)((double)M * N * K / 8));
    if (nt > 1) { /* the split that shares the fewer padded strips' work */
        long ms = (M + BM - 1) / BM, ns = (N + BN - 1) / BN;
        jb.nshares = nt, jb.by_rows = (ms + nt - 1) / nt * BM * (long)N <= (ns + nt - 1) / nt * BN * (long)M;
    }
    ag__parallel_for((size_t)jb.nshares, jb.nshares, share, &jb);
}

/* The tiles' multiply-add peak, for the bench: steps of four TDPBF16PS
 * into four independent accumulators (the micro-kernel's 2 x 2), their
 * operands held in tiles 4..7: nothing but the multiply-adds, 4 x 16 x
 * 16 x 32 of them a step.  Returns the accumulators' sum, so that the
 * loop is kept.  Only where ag__amx_permitted(). */
__attribute__((target("amx-tile,amx-bf16"))) float ag__amx_peak_loop(int steps)
{
    static _Alignas(64) uint32_t ops[TW];
    _Alignas(64) float out[4][TW];
    for (int i = 0; i < TW; i++) ops[i] = 0x3c003c00u; /* the pair (2^-7, 2^-7) */
    tiles_on();
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    MEMORY_AT(ops);
    _tile_loadd(4, ops, 64);
    _tile_loadd(5, ops, 64);
    _tile_loadd(6, ops, 64);
    _tile_loadd(7, ops, 64);
    for (int s = 0; s < steps; s++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, out[0], 64);
    _tile_stored(1, out[1], 64);
    _tile_stored(2, out[2], 64);
    _tile_stored(3, out[3], 64);
    MEMORY_AT(out);
    tiles_off();
    float sum = 0;
    for (int t = 0; t < 4; t++) sum += out[t][0];
    return sum;
}

#else

bool ag__amx_permitted(const char **why)
{
    if (why) *why = "built without the AMX kernel (x86-64 Linux, float, gcc 12 or clang 14)";
    return false;
}

void ag__gemm_amx(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
                  float *C, int ldc)
{
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)beta, (void)C,
        (void)ldc;
}

float ag__amx_peak_loop(int steps)
{
    (void)steps;
    return 0;
}

#endif
