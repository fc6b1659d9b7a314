/* kernels/attention_head512.c: the attention op's heads (ops/attention.c)
 * when each is a toy's, on AVX-512 in float: at most 32 keys (a multiple
 * of 8), D and Dv <= 16 and T <= 64, a GPT's at toy sizes.  A head goes in
 * three passes, forward and backward alike:
 *   1. K^T (V^T) turned once per head, in registers (core/transpose.h);
 *   2. the queries in groups of 8: a group's rows of scores (dP) are one
 *      or two vectors each, built by broadcast FMAs over K^T's (V^T's)
 *      rows, then the softmax (its backward) step by step for the whole
 *      group, so that the rows' chains of latency overlap: P (dA) out to a
 *      buffer of T S values that stays in the cache;
 *   3. the products that read it, P V (dA K) for 16 queries at a time, and
 *      the backward's P^T dO and dA^T Q for 8 keys at a time.
 * A group of queries stops at the last key any of them may see, rounded
 * up to 8 (ag__head512_plan), as a block does on the op's general path.
 * The mask comes as bits, a row of keys in one word: made once per call
 * when one mask serves every head (a causal [T, S] mask), else once per
 * head.  While a head runs, the next head's rows are asked of the cache,
 * in pieces.
 *
 * Invariant: each element is the same chain of operations as on the op's
 * general path (gemm.c's kernel for toy heads, then masked_softmax's rows):
 * k ascending from 0 in every product; the softmax's max, exps and sums
 * lane for lane as kernels/rows.c's softmax_short; the backward's
 * rowsum(dP P) in 8 lanes as ops/masked_softmax.c's.  So the results are
 * the same to the bit (tests/test_fusion.c), and what is saved is the
 * overhead: the transposes of K and V per block of queries, a call per
 * product, passes of fill and softmax over rows one at a time, the mask's
 * values read and compared for every row of every head, and the waits
 * for rows that the hardware's prefetchers bring too late.
 * Compiled only for x86 in float; elsewhere ag__head512_plan says no. */
#include "kernels/attention.h"

#include <math.h>

#if AG_X86_KERNELS && !defined(AG_DOUBLE)
/* the kernel's exp (kernels/fastmath.h, whose selects want this) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "kernels/fastmath.h"
#include "core/transpose.h"

#define HEAD512 __attribute__((target("avx512f,fma")))
#define HEAD512_INLINE __attribute__((target("avx512f,fma"), always_inline)) static inline
/* The entry points start on a cache line, so that where their loops fall
 * does not move with the code linked before them. */
#define HEAD512_ENTRY __attribute__((target("avx512f,fma"), aligned(64)))

enum { GR = 8 }; /* query rows at a time: 8 of them, 16 score vectors, in flight */

typedef struct head512 {
    const float *q, *k, *v, *dy; /* head bh's */
    float *p, *y, *da;           /* P and dA [T, S]; y like v */
    size_t ld, ldv;              /* rows of q, k (H D apart); of v, dO, y (H Dv) */
    const uint32_t *keep;        /* bit s of keep[t]: query t may see key s (the job's, or own) */
    uint32_t own[64];            /* keep, when this head's mask is its own */
    int T, S, D, Dv;
    __mmask16 md, mdv, ms[2]; /* the lanes of a row of q or k, of v or dO; of P's two vectors */
    float scale, fill;
    __m512 xt[16][2]; /* K^T or V^T: xt[c][v] holds column c of keys 16 v .. 16 v + 15 */
} head512;

HEAD512_INLINE __mmask16 lanes(int n) { return (__mmask16)(n <= 0 ? 0 : n >= 16 ? 0xFFFFu : (1u << n) - 1); }

/* Bit s < S of the result: m[s] != 0 (a NaN counts as != 0), for a row m
 * of S <= 32 mask values. */
HEAD512_INLINE uint32_t row_bits(const float *m, int S)
{
    uint32_t b = 0;
    for (int v = 0; 16 * v < S; v++) {
        __m512 x = _mm512_maskz_loadu_ps(lanes(S - 16 * v), m + 16 * v);
        b |= (uint32_t)_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NEQ_UQ) << (16 * v);
    }
    return b;
}

/* keep[t] for rows t < T of a mask from m on, rows mst apart (m NULL: no
 * mask), then the keys the causal rule hides taken out. */
HEAD512 static void keep_bits(const ag__att_job *j, const float *m, size_t mst, uint32_t *keep)
{
    for (int t = 0; t < j->T; t++) {
        int hid = ag__attn_hide(j->a->causal, j->a->diag, j->S, t);
        keep[t] = (m ? row_bits(m + (size_t)t * mst, j->S) : 0xFFFFFFFFu) & (hid >= 32 ? 0xFFFFFFFFu : (1u << hid) - 1);
    }
}

/* The heads fit when the CPU runs AVX-512, S <= 32 keys (a multiple of
 * 8), D, Dv <= 16, T <= 64, and a mask, if any, holds a row's S values
 * side by side (mm->along == 1, not one value stretched over the keys),
 * and no dropout (heads with dropout take the general path, which draws
 * it).  Then the plan: the keys each group of 8 queries sees, rounded up to 8,
 * and the first query that sees any of 8 keys (kernels/attention.c's
 * seen_keys' last; P is 0 elsewhere): the same for every head.  When the
 * mask is one for every head (it does not move along B and H: a causal
 * mask [T, S]), or there is none, its rows as bits, once for all heads;
 * the causal rule's bits with them.  The heads are multi-head attention's
 * own (heads layout, as many keys' heads as queries'). */
bool ag__head512_plan(ag__att_job *j)
{
    if (!(ag__isa() == AG_ISA_AVX512 && j->S % 8 == 0 && j->S <= 32 && j->D <= 16 && j->Dv <= 16 && j->T <= 64 &&
          (!j->mask || j->mm->along == 1) && !j->bias && !j->a->bhtd && j->a->H == j->a->Hkv &&
          j->a->dropout <= 0))
        return false;
    j->one_mask = true;
    for (int k = 0; j->mask && k < j->mm->nd - 1; k++) /* the axes B and H */
        j->one_mask &= j->mm->st[k] == 0 || j->mm->shape[k] == 1;
    if (!j->mask)
        keep_bits(j, NULL, 0, j->keep);
    else if (j->one_mask)
        keep_bits(j, j->mask->data + ag__mask_row(j->mm, 0), j->mm->st[j->mm->nd - 1], j->keep);
    for (int r = 0; r < j->T; r += 8) {
        int e = 0;
        for (int t = r; t < j->T && t < r + 8; t++) e = j->last[t] > e ? j->last[t] : e;
        j->ek[r / 8] = (e + 7) / 8 * 8; /* <= S, a multiple of 8 */
    }
    for (int s0 = 0; s0 < j->S; s0 += 8) {
        int t = 0;
        while (t < j->T && j->last[t] <= s0) t++;
        j->tf[s0 / 8] = t;
    }
    return true;
}

/* A group of GR queries from t0, mr of them real: the rest repeat t0
 * (computed and not stored). */
HEAD512_INLINE void group_rows(int *t, int t0, int mr)
{
    for (int i = 0; i < GR; i++) t[i] = t0 + (i < mr ? i : 0);
}

/* Head bh's pointers, strides, lane masks and mask bits. */
HEAD512_INLINE void head512_init(const ag__att_job *j, size_t bh, head512 *h)
{
    h->T = j->T, h->S = j->S, h->D = j->D, h->Dv = j->Dv;
    h->ld = (size_t)j->H * (size_t)j->D, h->ldv = (size_t)j->H * (size_t)j->Dv;
    h->q = j->q + ag__att_at(j, bh, j->T, j->D, false), h->k = j->k + ag__att_at(j, bh, j->S, j->D, true);
    h->v = j->v + ag__att_at(j, bh, j->S, j->Dv, true);
    h->dy = j->dy ? j->dy + ag__att_at(j, bh, j->T, j->Dv, false) : NULL;
    h->y = j->y ? j->y + ag__att_at(j, bh, j->T, j->Dv, false) : NULL;
    h->p = j->p + bh * (size_t)j->T * (size_t)j->S;
    h->keep = j->one_mask ? j->keep : h->own;
    if (!j->one_mask) /* rows mst apart along the queries, the mask's innermost leading axis */
        keep_bits(j, j->mask->data + ag__mask_row(j->mm, bh * (size_t)j->T), j->mm->st[j->mm->nd - 1], h->own);
    h->md = lanes(j->D), h->mdv = lanes(j->Dv), h->ms[0] = lanes(j->S), h->ms[1] = lanes(j->S - 16);
    h->scale = j->scale, h->fill = j->fill;
}

/* What a head reads and writes, as rows to ask of the cache ahead of it:
 * row i < n[r] of stream r at x[r] + i ld[r] (n cache lines, ld 16, for
 * P), in pieces of per[r] rows.
 * At a GPT's sizes the heads' inputs, P and the gradients are larger
 * than the cache, and the rows of a head, 256 bytes apart in 64-byte
 * pieces, are a pattern the hardware's prefetchers pick up too late: a
 * head that waits for each row takes twice as long.  In pieces, one per
 * group of queries (or keys), so that the requests do not all wait in
 * line at once.  The addresses and the pieces' sizes are worked out once
 * per head, so that a piece costs its prefetches and little else. */
typedef struct ahead {
    const float *x[8];
    size_t ld[8];
    int n[8], per[8], streams;
} ahead;

HEAD512_INLINE void ahead_add(ahead *a, const float *x, size_t ld, int n, int parts)
{
    int r = a->streams++;
    a->x[r] = x, a->ld[r] = ld, a->n[r] = n, a->per[r] = (n + parts - 1) / parts;
}

/* Head bh's streams, forward or backward, in `parts` pieces; none past
 * the last head. */
HEAD512_INLINE void ahead_init(ahead *a, const ag__att_job *j, size_t bh, bool backward, int parts)
{
    a->streams = 0;
    if (bh >= j->heads) return;
    size_t ld = (size_t)j->H * (size_t)j->D, ldv = (size_t)j->H * (size_t)j->Dv;
    int T = j->T, S = j->S;
    ahead_add(a, j->q + ag__att_at(j, bh, T, j->D, false), ld, T, parts);
    ahead_add(a, j->k + ag__att_at(j, bh, S, j->D, true), ld, S, parts);
    ahead_add(a, j->v + ag__att_at(j, bh, S, j->Dv, true), ldv, S, parts);
    ahead_add(a, j->p + bh * (size_t)T * (size_t)S, 16, (T * S + 15) / 16, parts);
    if (!backward) {
        ahead_add(a, j->y + ag__att_at(j, bh, T, j->Dv, false), ldv, T, parts);
        return;
    }
    ahead_add(a, j->dy + ag__att_at(j, bh, T, j->Dv, false), ldv, T, parts);
    if (j->dq) ahead_add(a, j->dq + ag__att_at(j, bh, T, j->D, false), ld, T, parts);
    if (j->dk) ahead_add(a, j->dk + ag__att_at(j, bh, S, j->D, true), ld, S, parts);
    if (j->dv) ahead_add(a, j->dv + ag__att_at(j, bh, S, j->Dv, true), ldv, S, parts);
}

/* Piece `part` of every stream into the cache. */
HEAD512_INLINE void ahead_part(const ahead *a, int part)
{
    for (int r = 0; r < a->streams; r++) {
        int lo = part * a->per[r], hi = lo + a->per[r] < a->n[r] ? lo + a->per[r] : a->n[r];
        const float *x = a->x[r] + (size_t)lo * a->ld[r];
        for (int i = lo; i < hi; i++, x += a->ld[r]) _mm_prefetch((const char *)x, _MM_HINT_T0);
    }
}

/* xt = x^T for x [S, cols <= 16], rows ld apart (zero past column cols). */
HEAD512_INLINE void turn(head512 *h, const float *x, size_t ld, __mmask16 mc)
{
    for (int v = 0; 16 * v < h->S; v++) {
        __m512 r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            r[i] = 16 * v + i < h->S ? _mm512_maskz_loadu_ps(mc, x + (size_t)(16 * v + i) * ld) : _mm512_setzero_ps();
        transpose16(r, &h->xt[0][v], 2);
    }
}

/* The lanes of keys 16 v .. 16 v + 15 that query t may see. */
HEAD512_INLINE __mmask16 kept(const head512 *h, int t, int v) { return (__mmask16)(h->keep[t] >> (16 * v)); }

/* Where rows of x [T, S] (P or dA) go, as a value of its own: read
 * through h, the compiler would load it again after every store. */
typedef struct rows_out {
    float *x;
    size_t S;
    __mmask16 ms[2]; /* the lanes of its two vectors (h->ms) */
} rows_out;

HEAD512_INLINE rows_out rows_of(const head512 *h, float *x) { return (rows_out){x, (size_t)h->S, {h->ms[0], h->ms[1]}}; }

/* Row t of o.x: r[v] on the lanes in[v] of its first nv vectors, 0
 * elsewhere. */
HEAD512_INLINE void store_row(const rows_out o, int t, const __m512 *r, const __mmask16 *in, const int nv)
{
    float *row = o.x + (size_t)t * o.S;
    _mm512_mask_storeu_ps(row, o.ms[0], _mm512_maskz_mov_ps(in[0], r[0]));
    if (o.S > 16)
        _mm512_mask_storeu_ps(row + 16, o.ms[1], nv > 1 ? _mm512_maskz_mov_ps(in[1], r[1]) : _mm512_setzero_ps());
}

/* y = A B for rows t[0..GR) of A [T, S] (broadcast, keys s < e) and B
 * [S, cols] (rows ld apart, lanes mc): y[i] = sum_s A[t_i, s] B[s],
 * s ascending (gemm's order). */
HEAD512_INLINE void rows_times(const head512 *h, const float *a, const int *t, int e, const float *b, size_t ld,
                               __mmask16 mc, __m512 *y)
{
#pragma GCC unroll 8
    for (int i = 0; i < GR; i++) y[i] = _mm512_setzero_ps();
    for (int s = 0; s < e; s++) {
        __m512 bs = _mm512_maskz_loadu_ps(mc, b + (size_t)s * ld);
#pragma GCC unroll 8
        for (int i = 0; i < GR; i++)
            y[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[(size_t)t[i] * h->S + s]), bs, y[i]);
    }
}

/* a[i][v] = sum_c x[t_i, c] xt[c][v], c < cols ascending: rows of Q K^T
 * (x = Q, xt = K^T) or dO V^T (x = dO, xt = V^T). */
HEAD512_INLINE void rows_times_xt(const head512 *h, const float *x, size_t ld, int cols, const int *t,
                                  __m512 a[GR][2], const int nv)
{
#pragma GCC unroll 8
    for (int i = 0; i < GR; i++)
        for (int v = 0; v < nv; v++) a[i][v] = _mm512_setzero_ps();
    for (int c = 0; c < cols; c++) {
        __m512 xv[2] = {h->xt[c][0], nv > 1 ? h->xt[c][1] : _mm512_setzero_ps()};
#pragma GCC unroll 8
        for (int i = 0; i < GR; i++) {
            __m512 xi = _mm512_set1_ps(x[(size_t)t[i] * ld + c]);
            for (int v = 0; v < nv; v++) a[i][v] = _mm512_fmadd_ps(xi, xv[v], a[i][v]);
        }
    }
}

/* Rows t[i] (i < mr) of dst [T, cols], lanes mc, rows ld apart: y[i], plus
 * what was there when beta is 1 (y + dst, gemm's order). */
HEAD512_INLINE void store_rows(float *dst, size_t ld, __mmask16 mc, int t0, int mr, const __m512 *y, float beta)
{
#pragma GCC unroll 8
    for (int i = 0; i < GR; i++) {
        if (i >= mr) break;
        float *d = dst + (size_t)(t0 + i) * ld;
        __m512 r = beta != 0 ? _mm512_add_ps(y[i], _mm512_maskz_loadu_ps(mc, d)) : y[i];
        _mm512_mask_storeu_ps(d, mc, r);
    }
}

/* Rows t0 .. t0 + mr - 1 of x [T, S] (P or dA): 0. */
HEAD512_INLINE void zero_rows(const head512 *h, float *x, int t0, int mr)
{
    __m512 zero[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    __mmask16 none[2] = {0, 0};
    for (int i = 0; i < mr; i++) store_row(rows_of(h, x), t0 + i, zero, none, 2);
}

/* Rows t0 .. t0 + mr - 1 (mr <= GR) of dst [T, cols] (+)= A B, A [T, S]
 * (keys [0, e) only: A is 0 beyond), B [S, cols] rows ld apart, lanes mc:
 * O = P V, or dQ (+)= dA K.  An empty sum (e = 0) stores 0 or adds
 * nothing. */
HEAD512_INLINE void rows_product(const head512 *h, const float *a, int t0, int mr, int e, const float *b, size_t ld,
                                 __mmask16 mc, float *dst, float beta)
{
    if (e == 0 && beta != 0) return;
    int t[GR];
    group_rows(t, t0, mr);
    __m512 y[GR];
    rows_times(h, a, t, e, b, ld, mc, y);
    store_rows(dst, ld, mc, t0, mr, y, beta);
}

/* The same for two whole groups, rows t0 .. t0 + 15, the first 8 over
 * keys [0, e0), the others over [0, e1): 16 chains in flight where one
 * group has 8.  Row 4 j + m of A at r[j] + m S (m < 4): 4 pointers and
 * the offsets S, 3 S in registers (16 pointers would spill). */
HEAD512_INLINE void rows_product16(const head512 *h, const float *a, int t0, int e0, int e1, const float *b,
                                   size_t ld, __mmask16 mc, float *dst, float beta)
{
    const size_t S = (size_t)h->S;
    const float *r[4] = {a + (size_t)t0 * S, a + (size_t)(t0 + 4) * S, a + (size_t)(t0 + 8) * S,
                         a + (size_t)(t0 + 12) * S};
    __m512 y[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) y[i] = _mm512_setzero_ps();
    int ec = e0 < e1 ? e0 : e1, s = 0;
    for (; s < ec; s++) {
        __m512 bs = _mm512_maskz_loadu_ps(mc, b + (size_t)s * ld);
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) y[i] = _mm512_fmadd_ps(_mm512_set1_ps(r[i / 4][(size_t)(i % 4) * S + s]), bs, y[i]);
    }
    for (int k = s; k < e0; k++) { /* the rest of the longer group's keys */
        __m512 bs = _mm512_maskz_loadu_ps(mc, b + (size_t)k * ld);
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) y[i] = _mm512_fmadd_ps(_mm512_set1_ps(r[i / 4][(size_t)(i % 4) * S + k]), bs, y[i]);
    }
    for (int k = s; k < e1; k++) {
        __m512 bs = _mm512_maskz_loadu_ps(mc, b + (size_t)k * ld);
#pragma GCC unroll 8
        for (int i = 8; i < 16; i++) y[i] = _mm512_fmadd_ps(_mm512_set1_ps(r[i / 4][(size_t)(i % 4) * S + k]), bs, y[i]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) {
        if ((i < 8 ? e0 : e1) == 0 && beta != 0) continue; /* an empty sum adds nothing */
        float *d = dst + (size_t)(t0 + i) * ld;
        _mm512_mask_storeu_ps(d, mc, beta != 0 ? _mm512_add_ps(y[i], _mm512_maskz_loadu_ps(mc, d)) : y[i]);
    }
}

/* Every row of dst [T, cols] (+)= A B (rows_product), two groups at a time
 * where it can: rows [r, r + 8) see the keys [0, e[r / 8]). */
HEAD512_INLINE void product_all(const head512 *h, const int *e, const float *a, const float *b, size_t ld,
                                __mmask16 mc, float *dst, float beta)
{
    int r = 0;
    for (; r + 16 <= h->T; r += 16) rows_product16(h, a, r, e[r / 8], e[r / 8 + 1], b, ld, mc, dst, beta);
    for (; r < h->T; r += GR) rows_product(h, a, r, h->T - r < GR ? h->T - r : GR, e[r / 8], b, ld, mc, dst, beta);
}

/* Lanes 8 k .. 8 k + 7 of x. */
HEAD512_INLINE __m256 half(__m512 x, const int k)
{
    return k ? _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)) : _mm512_castps512_ps256(x);
}

/* The softmax's own order (kernels/rows.c): lanes 8 apart, 4, 2, 1.
 * A row at a time: these 256- and 128-bit steps are cheap, and 8 rows
 * folded together in 512-bit shuffles (the same pairs of lanes, the same
 * bits) made the forward slower. */
HEAD512_INLINE float lanes_max(__m512 x)
{
    __m256 a = _mm256_max_ps(half(x, 1), half(x, 0));
    __m128 b = _mm_max_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    b = _mm_max_ps(_mm_movehl_ps(b, b), b);
    return _mm_cvtss_f32(_mm_max_ss(_mm_shuffle_ps(b, b, 1), b));
}
HEAD512_INLINE float lanes_sum(__m512 x)
{
    __m256 a = _mm256_add_ps(half(x, 0), half(x, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(b, _mm_shuffle_ps(b, b, 1)));
}

/* A row of P whose query sees no key (max z = -inf, z's lanes in0 of a0
 * and in1 of a1): 0, or NaN where a NaN hides among them, as
 * softmax_short.  Out of line and cold, so that the compiler does not
 * work it out for every row, the likely ones too. */
__attribute__((target("avx512f"), noinline, cold)) static float unseen(__m512 a0, __m512 a1, __mmask16 in0,
                                                                       __mmask16 in1)
{
    bool nan = (_mm512_cmp_ps_mask(a0, a0, _CMP_UNORD_Q) & in0) || (_mm512_cmp_ps_mask(a1, a1, _CMP_UNORD_Q) & in1);
    return nan ? NAN : 0;
}

/* Here only, a * b + c may fuse, as in kernels/rows.c's softmax: exp
 * is exp_core compiled the same way, so its bits are softmax_short's. */
AG_FUSED_BEGIN
/* Rows t0 .. t0 + mr - 1 of P (mr <= GR), keys [0, e) (e > 0, nv
 * vectors), each step for the whole group before the next, so that the
 * rows' chains of latency overlap:
 *   A = Q K^T;  z = mask ? scale A : fill, -inf past e
 *   P = exp(z - max z) / sum exp(z - max z)
 * A row all -inf is 0 (NaN if a NaN hides among them), as softmax_short. */
HEAD512_INLINE void probs_rows(const head512 *h, int t0, int mr, int e, const int nv)
{
    const rows_out out_p = rows_of(h, h->p);
    int t[GR];
    group_rows(t, t0, mr);
    __m512 a[GR][2];
    rows_times_xt(h, h->q, h->ld, h->D, t, a, nv);
    __mmask16 in[2] = {lanes(e), lanes(e - 16)};
    __m512 sc = _mm512_set1_ps(h->scale), fill = _mm512_set1_ps(h->fill), ninf = _mm512_set1_ps(-INFINITY);
    __m512 out[2] = {_mm512_mask_blend_ps(in[0], ninf, fill), _mm512_mask_blend_ps(in[1], ninf, fill)};
    /* z - max z through memory on purpose: the exps in registers (exp_core
     * step for step in intrinsics, the same bits) spill a[]; a row at a
     * time from A to P, or two groups' steps interleaved, were slower */
    float m[GR], x[GR][32] __attribute__((aligned(64)));
#pragma GCC unroll 8
    for (int i = 0; i < GR; i++) {
        for (int v = 0; v < nv; v++) /* scale A where kept, else fill (keys < e) or -inf */
            a[i][v] = _mm512_mask_mul_ps(out[v], kept(h, t[i], v) & in[v], sc, a[i][v]);
        m[i] = lanes_max(nv > 1 ? _mm512_max_ps(a[i][1], a[i][0]) : a[i][0]);
        for (int v = 0; v < nv; v++) _mm512_store_ps(x[i] + 16 * v, _mm512_sub_ps(a[i][v], _mm512_set1_ps(m[i])));
    }
    for (int i = 0; i < GR; i++)
#pragma omp simd
        for (int l = 0; l < 16 * nv; l++) x[i][l] = exp_core(x[i][l], 0);
#pragma GCC unroll 8
    for (int i = 0; i < GR; i++) {
        if (i >= mr) break;
        __m512 ex[2];
        if (m[i] == -INFINITY) { /* no key seen */
            float u = unseen(a[i][0], nv > 1 ? a[i][1] : a[i][0], in[0], nv > 1 ? in[1] : 0);
            for (int v = 0; v < nv; v++) ex[v] = _mm512_set1_ps(u);
        } else {
            for (int v = 0; v < nv; v++) ex[v] = _mm512_load_ps(x[i] + 16 * v);
            __m512 inv = _mm512_set1_ps(1 / lanes_sum(nv > 1 ? _mm512_add_ps(ex[0], ex[1]) : ex[0]));
            for (int v = 0; v < nv; v++) ex[v] = _mm512_mul_ps(ex[v], inv);
        }
        store_row(out_p, t[i], ex, in, nv);
    }
}

/* Every row of P first, then O = P V: the products then read rows of P
 * stored long before, never one still on its way to the cache. */
HEAD512_ENTRY void ag__head512_forward(const ag__att_job *j, size_t bh)
{
    head512 h;
    head512_init(j, bh, &h);
    ahead next;
    ahead_init(&next, j, bh + 1, false, (h.T + GR - 1) / GR);
    turn(&h, h.k, h.ld, h.md);
    for (int r = 0; r < h.T; r += GR) { /* queries [r, r + mr), keys [0, e) */
        int mr = h.T - r < GR ? h.T - r : GR, e = j->ek[r / 8];
        ahead_part(&next, r / GR);
        if (e == 0) zero_rows(&h, h.p, r, mr); /* no key: P is 0 */
        else if (e <= 16) probs_rows(&h, r, mr, e, 1);
        else probs_rows(&h, r, mr, e, 2);
    }
    product_all(&h, j->ek, h.p, h.v, h.ldv, h.mdv, h.y, 0);
}
AG_FUSED_END

/* Rows t0 .. t0 + mr - 1 of dA (as probs_rows), keys [0, e) (e > 0):
 *   dP = dO V^T;  dA = mask ? scale P (dP - rowsum(dP P)) : 0
 * rowsum in 8 lanes, 8 keys at a time, then ((0 + 4) + (2 + 6)) + ((1 + 5)
 * + (3 + 7)), as ops/masked_softmax.c's softmax_row_backward. */
HEAD512_INLINE void dscores_rows(const head512 *h, int t0, int mr, int e, const int nv)
{
    const rows_out out_da = rows_of(h, h->da);
    const float *p = h->p;
    const size_t S = (size_t)h->S;
    int t[GR];
    group_rows(t, t0, mr);
    __m512 dp[GR][2];
    rows_times_xt(h, h->dy, h->ldv, h->Dv, t, dp, nv);
    __mmask16 in[2] = {lanes(e), lanes(e - 16)};
    /* P's rows kept from the first pass to the second, with dP: 32 vectors,
     * some spilled; loaded again instead, or a row at a time from dP to
     * dA, the backward was no faster */
    __m512 pr[GR][2];
    float dot[GR];
#pragma GCC unroll 8
    for (int i = 0; i < GR; i++) {
        __m512 prod[2];
        for (int v = 0; v < nv; v++) {
            pr[i][v] = _mm512_maskz_loadu_ps(in[v], p + (size_t)t[i] * S + 16 * v);
            prod[v] = _mm512_mul_ps(_mm512_maskz_mov_ps(in[v], dp[i][v]), pr[i][v]);
        }
        __m256 l8 = _mm256_add_ps(_mm256_setzero_ps(), half(prod[0], 0)); /* pieces c < e / 8 ascending */
        if (e > 8) l8 = _mm256_add_ps(l8, half(prod[0], 1));
        if (nv > 1) l8 = _mm256_add_ps(l8, half(prod[1], 0)); /* e > 16 */
        if (e > 24) l8 = _mm256_add_ps(l8, half(prod[1], 1));
        __m128 l4 = _mm_add_ps(_mm256_castps256_ps128(l8), _mm256_extractf128_ps(l8, 1)); /* l + (l + 4) */
        __m128 l2 = _mm_add_ps(l4, _mm_movehl_ps(l4, l4)); /* 0: (0 + 4) + (2 + 6) */
        dot[i] = 0.0f + _mm_cvtss_f32(_mm_add_ss(l2, _mm_shuffle_ps(l2, l2, 1)));
    }
    __m512 sc = _mm512_set1_ps(h->scale);
#pragma GCC unroll 8
    for (int i = 0; i < GR; i++) {
        if (i >= mr) break;
        __m512 da[2], dd = _mm512_set1_ps(dot[i]);
        for (int v = 0; v < nv; v++) {
            __m512 d = _mm512_mul_ps(sc, _mm512_mul_ps(pr[i][v], _mm512_sub_ps(dp[i][v], dd)));
            da[v] = _mm512_add_ps(_mm512_setzero_ps(), _mm512_maskz_mov_ps(kept(h, t[i], v) & in[v], d));
        }
        store_row(out_da, t[i], da, in, nv);
    }
}

/* dx[s] (+)= acc[i] for keys s = s0 + i, i < 8, rows of dx ld apart,
 * lanes mc; an empty sum (`none`) adds nothing. */
HEAD512_INLINE void store_keys(float *dx, size_t ld, __mmask16 mc, int s0, const __m512 *acc, float beta, bool none)
{
    if (none && beta != 0) return;
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        float *d = dx + (size_t)(s0 + i) * ld;
        _mm512_mask_storeu_ps(d, mc, beta != 0 ? _mm512_add_ps(acc[i], _mm512_maskz_loadu_ps(mc, d)) : acc[i]);
    }
}

/* Keys s0 .. s0 + 7, queries [tf, T), t ascending (gemm's order):
 *   dV[s] (+)= sum_t P[t, s] dO[t]     dK[s] (+)= sum_t dA[t, s] Q[t]
 * the two side by side: 16 chains in flight. */
HEAD512_INLINE void key_rows(const head512 *h, int s0, int tf, float *dv, float beta_v, float *dk, float beta_k)
{
    __m512 av[8], ak[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) av[i] = ak[i] = _mm512_setzero_ps();
    /* h's fields in registers: read through h, they are loaded again for every t */
    const size_t S = (size_t)h->S, ld = h->ld, ldv = h->ldv;
    const __mmask16 md = h->md, mdv = h->mdv;
    const float *pt = h->p + (size_t)tf * S + s0, *at = h->da + (size_t)tf * S + s0;
    const float *o = h->dy + (size_t)tf * ldv, *x = h->q + (size_t)tf * ld;
    for (int t = tf; t < h->T; t++, pt += S, at += S, o += ldv, x += ld) {
        if (dv) {
            __m512 ot = _mm512_maskz_loadu_ps(mdv, o);
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) av[i] = _mm512_fmadd_ps(_mm512_set1_ps(pt[i]), ot, av[i]);
        }
        if (dk) {
            __m512 xt = _mm512_maskz_loadu_ps(md, x);
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) ak[i] = _mm512_fmadd_ps(_mm512_set1_ps(at[i]), xt, ak[i]);
        }
    }
    if (dv) store_keys(dv, ldv, mdv, s0, av, beta_v, tf >= h->T);
    if (dk) store_keys(dk, ld, md, s0, ak, beta_k, tf >= h->T);
}

HEAD512_ENTRY void ag__head512_backward(const ag__att_job *j, size_t bh, float *da)
{
    head512 h;
    head512_init(j, bh, &h);
    h.da = da;
    float *dq = j->dq ? j->dq + ag__att_at(j, bh, h.T, h.D, false) : NULL;
    float *dk = j->dk ? j->dk + ag__att_at(j, bh, h.S, h.D, true) : NULL;
    float *dv = j->dv ? j->dv + ag__att_at(j, bh, h.S, h.Dv, true) : NULL;
    int groups = dq || dk ? (h.T + GR - 1) / GR : 0; /* pieces of the next head's prefetch, then S / 8 more */
    ahead next;
    ahead_init(&next, j, bh + 1, true, groups + h.S / 8);
    if (dq || dk) { /* every row of dA first, then dQ (+)= dA K (as ag__head512_forward) */
        turn(&h, h.v, h.ldv, h.mdv);
        for (int r = 0; r < h.T; r += GR) { /* queries [r, r + mr), keys [0, e) */
            int mr = h.T - r < GR ? h.T - r : GR, e = j->ek[r / 8];
            ahead_part(&next, r / GR);
            if (e == 0) zero_rows(&h, h.da, r, mr); /* no key: dA is 0 */
            else if (e <= 16) dscores_rows(&h, r, mr, e, 1);
            else dscores_rows(&h, r, mr, e, 2);
        }
        if (dq) product_all(&h, j->ek, h.da, h.k, h.ld, h.md, dq, j->beta_q);
    }
    for (int s0 = 0; s0 < h.S; s0 += 8) { /* keys [s0, s0 + 8), queries [tf, T) */
        ahead_part(&next, groups + s0 / 8);
        key_rows(&h, s0, j->tf[s0 / 8], dv, j->beta_v, dk, j->beta_k);
    }
}
#else
bool ag__head512_plan(ag__att_job *j)
{
    (void)j;
    return false;
}
#endif
