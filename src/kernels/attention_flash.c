/* kernels/attention_flash.c: the attention op's heads (ops/attention.c)
 * when their rows are long (more than AG__FLASH_KEYS keys): no P [T, S]
 * is kept, only each row's log-sum-exp L = m + log l (FlashAttention-2's
 * forward and backward; docs/attention_long.md derives them).  Queries go
 * in blocks of QB, keys in tiles of KB; for row t of a block, tile after
 * tile:
 *
 * forward:  z  = mask ? scale q_t k_s + M_ts : fill   (the tile's keys s)
 *           m' = max(m, max_s z_s),   c = exp(m - m')
 *           l  = c l + sum_s exp(z_s - m')
 *           o  = c o + sum_s exp(z_s - m') v_s
 *           then y_t = o / l, and m and l are saved: L = m + log l
 *           as its two parts, since in float m + log l is m when |m| is
 *           large (a row that a fill of -1e9 makes uniform);
 *           with dropout, o adds exp(z_s - m') Z_ts v_s: Z the weight's
 *           factor (1 / (1 - p) or 0) from a counter-based draw;
 * backward: P_ts = exp(z_s - m_t) / l_t, the forward's weight, recomputed
 *           Dl_t = dO_t . y_t   (= sum_s P_ts dP_ts, the whole row's)
 *           dV  += (P Z)^T dO,   dP = (dO V^T) Z (Z drawn again)
 *           dA   = mask ? scale P (dP - Dl) : 0
 *           dQ  += dA K,     dK += dA^T Q
 *           dM  += mask ? P (dP - Dl) : 0   (a bias that needs its gradient)
 *
 * Each tile's products are gemm's; its rows go through rows.c's max and
 * exps.  A row that sees no key (all -inf) gives y = 0 and l = 0, whose
 * weights are 0 in the backward: the reference's zeros.  A NaN or
 * +inf score makes its row NaN, as in the reference.
 * Invariant: with fill -inf, a tile of keys that no query of its block may
 * see (past the block's kend, kernels/attention.c's seen_keys: the tiles
 * above a causal mask's diagonal) is never computed, forward or backward;
 * the others are computed whole, their masked weights exactly 0.
 *
 * Under bf16 (ops/attention.c: the products' operands rounded) the tiles
 * meet copies of q, k, v and dO already rounded, and P Z and dA are
 * rounded before their products; P Z must be the normalised weights', so
 * the forward takes two passes (forward_block_bf16), and Dl is made as
 * rowsum(dP P) by a pass of its own (row_dots). */
#include "kernels/attention.h"
#include "kernels/kernels.h"

/* The selects below (mask ? a : b) as vector blends: nothing here reads
 * the floating-point exception flags (as kernels/masked_softmax.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>

/* Queries per block (the plan's blocks are 16 rows when S <= 32, so the
 * keys a block sees come from the plan's last, not its kend).  Keys per
 * tile: a tile's scores and their gradient, 2 QB KB values, stay in the
 * cache. */
enum { QB = AG__ATT_BLOCK, KB = 128 };

/* The keys [0, e) that some query of rows [t0, t0 + n) may see, e a
 * multiple of 16 (as seen_keys' kend) or S. */
static int keys_seen(const ag__att_job *j, int t0, int n)
{
    int e = 0;
    for (int i = 0; i < n; i++) e = j->last[t0 + i] > e ? j->last[t0 + i] : e;
    e = (e + 15) / 16 * 16;
    return e < j->S ? e : j->S;
}

/* Where the mask's row for query t0 + i of head bh starts, for i < n
 * (none without a mask). */
static void mask_rows(const ag__att_job *j, size_t bh, int t0, int n, const ag_real **mr)
{
    for (int i = 0; i < n; i++)
        mr[i] = j->mask ? j->mask->data + ag__mask_row(j->mm, bh * (size_t)j->T + (size_t)(t0 + i)) : NULL;
}

/* Where the causal rule starts hiding keys for query t0 + i, i < n, and
 * the mask's row for it (none without a mask). */
static void block_rules(const ag__att_job *j, size_t bh, int t0, int n, const ag_real **mr, int *hid)
{
    mask_rows(j, bh, t0, n, mr);
    for (int i = 0; i < n; i++) hid[i] = ag__attn_hide(j->a->causal, j->a->diag, j->S, t0 + i);
}

/* The tile's keys [hid - s0, kb) of a row that the causal rule hides. */
static inline int hidden_from(int hid, int s0) { return hid - s0 < 0 ? 0 : hid - s0; }

/* z = mask ? scale z : fill over rows [0, n) of a tile (kb keys from s0,
 * rows ld apart); mr[i] is row i's mask (stride along), or NULL; keys
 * from hid[i] on are hidden too. */
static inline AG_ALWAYS_INLINE void fill_tile(int n, int kb, ag_real *z, int ld, const ag_real *const *mr,
                                              const int *hid, size_t along, int s0, ag_real scale, ag_real fill)
{
    for (int i = 0; i < n; i++) {
        ag_real *zr = z + (size_t)i * (size_t)ld;
        const ag_real *m = mr[i] ? mr[i] + (size_t)s0 * along : NULL;
        if (m && along == 1) {
#pragma omp simd
            for (int s = 0; s < kb; s++) zr[s] = m[s] != 0 ? scale * zr[s] : fill;
        } else if (m) {
            for (int s = 0; s < kb; s++) zr[s] = m[(size_t)s * along] != 0 ? scale * zr[s] : fill;
        } else {
#pragma omp simd
            for (int s = 0; s < kb; s++) zr[s] *= scale;
        }
        for (int s = hidden_from(hid[i], s0); s < kb; s++) zr[s] = fill;
    }
}
#define FILL_PARAMS \
    (int n, int kb, ag_real *z, int ld, const ag_real *const *mr, const int *hid, size_t along, int s0, \
     ag_real scale, ag_real fill)
#define FILL_ARGS (n, kb, z, ld, mr, hid, along, s0, scale, fill)
AG_ISA_CLONES(void, fill_tile, FILL_PARAMS, fill_tile FILL_ARGS)

/* The backward's dA = mask ? scale P (dP - Dl) : 0, in dP's place. */
static inline AG_ALWAYS_INLINE void dscores_tile(int n, int kb, const ag_real *p, ag_real *dp, int ld,
                                                 const ag_real *dl, const ag_real *const *mr, const int *hid,
                                                 size_t along, int s0, ag_real scale)
{
    for (int i = 0; i < n; i++) {
        const ag_real *pr = p + (size_t)i * (size_t)ld, *m = mr[i] ? mr[i] + (size_t)s0 * along : NULL;
        ag_real *d = dp + (size_t)i * (size_t)ld, dli = dl[i];
        if (m && along == 1) {
#pragma omp simd
            for (int s = 0; s < kb; s++) d[s] = m[s] != 0 ? scale * (pr[s] * (d[s] - dli)) : 0;
        } else if (m) {
            for (int s = 0; s < kb; s++) d[s] = m[(size_t)s * along] != 0 ? scale * (pr[s] * (d[s] - dli)) : 0;
        } else {
#pragma omp simd
            for (int s = 0; s < kb; s++) d[s] = scale * (pr[s] * (d[s] - dli));
        }
        for (int s = hidden_from(hid[i], s0); s < kb; s++) d[s] = 0;
    }
}
#define DSCORES_PARAMS \
    (int n, int kb, const ag_real *p, ag_real *dp, int ld, const ag_real *dl, const ag_real *const *mr, \
     const int *hid, size_t along, int s0, ag_real scale)
#define DSCORES_ARGS (n, kb, p, dp, ld, dl, mr, hid, along, s0, scale)
AG_ISA_CLONES(void, dscores_tile, DSCORES_PARAMS, dscores_tile DSCORES_ARGS)

/* Dropout on rows [0, n) of a tile (kb keys from s0, rows ld apart) of
 * queries t0.. of head bh: x = x Z, Z the weight's factor (1 / (1 - p)
 * or 0), drawn from its coordinates (ag__attn_kept), forward and
 * backward alike.  ag__attn_kept's bits, its per-head half and its
 * threshold out of the loop: the key head ^ (t << 32 | s) is
 * (head ^ t << 32) ^ s, and for the integer u = x >> 40, u >= p 2^24
 * exactly when u >= ceil(p 2^24); the keys of a row in vector lanes. */
static inline AG_ALWAYS_INLINE void drop_rows(int n, int kb, ag_real *x, int ld, uint64_t head, int t0, int s0,
                                              uint64_t cut, ag_real keep)
{
    for (int i = 0; i < n; i++) {
        uint64_t row = head ^ (uint64_t)(uint32_t)(t0 + i) << 32;
        ag_real *xr = x + (size_t)i * ld;
#pragma omp simd
        for (int s = 0; s < kb; s++) xr[s] *= ag__attn_mix(row ^ (uint32_t)(s0 + s)) >> 40 >= cut ? keep : 0;
    }
}
#define DROP_PARAMS (int n, int kb, ag_real *x, int ld, uint64_t head, int t0, int s0, uint64_t cut, ag_real keep)
#define DROP_ARGS (n, kb, x, ld, head, t0, s0, cut, keep)
AG_ISA_CLONES(void, drop_rows, DROP_PARAMS, drop_rows DROP_ARGS)

static void drop_tile(const ag__att_job *j, size_t bh, int t0, int n, int s0, int kb, ag_real *x, int ld)
{
    const ag__attn *a = j->a;
    if (a->dropout <= 0) return;
    uint64_t head = ag__attn_mix(a->seed + 0x9E3779B97F4A7C15ull * (bh + 1));
    uint64_t cut = (uint64_t)ceil(a->dropout * 16777216.0);
    AG_ISA_CALL(drop_rows, (n, kb, x, ld, head, t0, s0, cut, (ag_real)(1 / (1 - a->dropout))));
}

void ag__att_drop(const ag__att_job *j, size_t bh, int t0, int n, int s0, int kb, ag_real *x, int ld)
{
    drop_tile(j, bh, t0, n, s0, kb, x, ld);
}

/* z = mask ? scale Q K^T + M : fill: the scores of rows [t0, t0 + n) of
 * head bh (q at row t0) for the tile's keys [s0, s0 + kb), rows KB apart. */
static void scores(const ag__att_job *j, size_t bh, int t0, int n, int s0, int kb, const ag_real *q,
                   const ag_real *k, const ag_real *const *mr, const int *hid, ag_real *z)
{
    ag__gemm(0, 1, n, kb, j->D, q, j->ldq, k + (size_t)s0 * j->ldk, j->ldk, 0, z, KB);
    AG_ISA_CALL(fill_tile, (n, kb, z, KB, mr, hid, j->mm->along, s0, j->scale, j->fill));
    ag__att_add_bias(j, bh, t0, n, s0, kb, z, KB); /* + M where kept */
}

/* P = exp(z - m) / l in z's place over rows [0, n) of a tile, each row's
 * final m and l from ml (pairs); a row that saw no key (l = 0): 0. */
static void weights(int n, int kb, ag_real *z, const ag_real *ml)
{
    for (int i = 0; i < n; i++) {
        ag_real *pr = z + (size_t)i * KB, inv = 1 / ml[2 * i + 1];
        if (ml[2 * i + 1] == 0) { /* no key seen: no weight */
            memset(pr, 0, (size_t)kb * sizeof *pr);
            continue;
        }
        (void)ag__exp_sum((size_t)kb, pr, ml[2 * i], pr);
        for (int s = 0; s < kb; s++) pr[s] *= inv;
    }
}

/* Rows [0, n) of a tile (kb values each, KB apart) rounded to bf16 in
 * place, as a product's operand (the values between rows too: unread). */
static void round_tile(int n, int kb, ag_real *x)
{
    if (n > 0) ag__bf16_round_all((size_t)(n - 1) * KB + (size_t)kb, x, x);
}

/* Row i of a tile's scores z (kb keys, after fill) into exp(z - m'), m and
 * l carried on (the online softmax above); c, what o must be multiplied
 * by, is returned.  A row that has seen nothing above -inf stays at
 * m = -inf, l = 0, its weights 0. */
static ag_real online_row(int kb, ag_real *z, ag_real *m, ag_real *l)
{
    ag_real mt = ag__row_max((size_t)kb, z), mn = isnan(*m) || isnan(mt) ? NAN : mt > *m ? mt : *m;
    if (mn == -INFINITY) {
        memset(z, 0, (size_t)kb * sizeof *z);
        return 1;
    }
    ag_real c = mn == *m ? 1 : (ag_real)exp((double)(*m - mn)); /* m = -inf: c = 0 */
    *l = c * *l + ag__exp_sum((size_t)kb, z, mn, z);
    *m = mn;
    return c;
}

/* Rows [t0, t0 + n) of head bh in the forward: where they read and write,
 * the keys [0, e) they see, their mask rows and where the causal rule
 * starts hiding keys. */
typedef struct rows_at {
    const ag_real *q, *k, *v, *mr[QB];
    ag_real *y, *ml;
    int e, hid[QB];
} rows_at;

static void forward_rows(const ag__att_job *j, size_t bh, int t0, int n, rows_at *r)
{
    const int T = j->T;
    r->e = keys_seen(j, t0, n);
    r->q = j->q + ag__att_at(j, bh, T, j->D, false) + (size_t)t0 * j->ldq;
    r->k = j->k + ag__att_at(j, bh, j->S, j->D, true), r->v = j->v + ag__att_at(j, bh, j->S, j->Dv, true);
    r->y = j->y + ag__att_at(j, bh, T, j->Dv, false) + (size_t)t0 * j->ldy;
    r->ml = j->ml + 2 * (bh * (size_t)T + (size_t)t0);
    block_rules(j, bh, t0, n, r->mr, r->hid);
}

/* Rows [t0, t0 + n) of head bh: y, and each row's m and l. */
static void forward_block(const ag__att_job *j, size_t bh, int t0, int n, ag_real *z, ag_real *m, ag_real *l)
{
    const int Dv = j->Dv, ldv = j->ldv, ldy = j->ldy;
    rows_at r;
    forward_rows(j, bh, t0, n, &r);
    ag_real *y = r.y;
    for (int i = 0; i < n; i++) m[i] = -INFINITY, l[i] = 0;
    for (int s0 = 0; s0 < r.e; s0 += KB) { /* keys [s0, s0 + kb): the tiles below kend only */
        int kb = r.e - s0 < KB ? r.e - s0 : KB;
        scores(j, bh, t0, n, s0, kb, r.q, r.k, r.mr, r.hid, z); /* z = mask ? scale Q K^T + M : fill */
        for (int i = 0; i < n; i++) { /* z = exp(z - m'); o = c o */
            ag_real c = online_row(kb, z + (size_t)i * KB, &m[i], &l[i]);
            if (s0 > 0 && c != 1)
                for (int d = 0; d < Dv; d++) y[(size_t)i * ldy + d] *= c;
        }
        /* o += (exp(z - m') Z) V: dropout after the row's sum, which is P's */
        drop_tile(j, bh, t0, n, s0, kb, z, KB);
        ag__gemm(0, 0, n, Dv, kb, z, KB, r.v + (size_t)s0 * ldv, ldv, s0 > 0 ? 1 : 0, y, ldy);
    }
    for (int i = 0; i < n; i++) { /* y = o / l; no key seen: 0 */
        ag_real *yr = y + (size_t)i * ldy, inv = 1 / l[i];
        for (int d = 0; d < Dv; d++) yr[d] = l[i] == 0 ? 0 : yr[d] * inv;
        r.ml[2 * i] = m[i], r.ml[2 * i + 1] = l[i];
    }
}

/* Under bf16 (q, k, v rounded copies, kernels/attention.c) P V's operand
 * is bf16(P Z), P normalised, as the reference's and autocast's: the
 * online softmax has P's scale only after a row's last tile, so a first
 * pass over the tiles finds each row's m and l, and a second makes the
 * scores again, P = exp(z - m) / l, P Z rounded, y += bf16(P Z) V.  The
 * scores cost twice; nothing more is kept. */
static void forward_block_bf16(const ag__att_job *j, size_t bh, int t0, int n, ag_real *z, ag_real *m, ag_real *l)
{
    const int Dv = j->Dv, ldv = j->ldv, ldy = j->ldy;
    rows_at r;
    forward_rows(j, bh, t0, n, &r);
    for (int i = 0; i < n; i++) m[i] = -INFINITY, l[i] = 0;
    for (int s0 = 0; s0 < r.e; s0 += KB) { /* pass 1: each row's m and l */
        int kb = r.e - s0 < KB ? r.e - s0 : KB;
        scores(j, bh, t0, n, s0, kb, r.q, r.k, r.mr, r.hid, z);
        for (int i = 0; i < n; i++) (void)online_row(kb, z + (size_t)i * KB, &m[i], &l[i]);
    }
    for (int i = 0; i < n; i++) r.ml[2 * i] = m[i], r.ml[2 * i + 1] = l[i];
    for (int i = 0; r.e == 0 && i < n; i++) memset(r.y + (size_t)i * ldy, 0, (size_t)Dv * sizeof *r.y); /* no key */
    for (int s0 = 0; s0 < r.e; s0 += KB) { /* pass 2: y = sum over tiles of bf16(P Z) V */
        int kb = r.e - s0 < KB ? r.e - s0 : KB;
        scores(j, bh, t0, n, s0, kb, r.q, r.k, r.mr, r.hid, z);
        weights(n, kb, z, r.ml);
        drop_tile(j, bh, t0, n, s0, kb, z, KB);
        round_tile(n, kb, z);
        ag__gemm(0, 0, n, Dv, kb, z, KB, r.v + (size_t)s0 * ldv, ldv, s0 > 0 ? 1 : 0, r.y, ldy);
    }
}

void ag__flash_forward(const ag__att_job *j, size_t bh, ag_real *scratch)
{
    ag_real *z = scratch, *m = z + QB * KB, *l = m + QB;
    for (int t0 = 0; t0 < j->T; t0 += QB)
        (j->a->bf16 ? forward_block_bf16 : forward_block)(j, bh, t0, j->T - t0 < QB ? j->T - t0 : QB, z, m, l);
}

/* Under bf16, Dl = rowsum(dP P) as the reference makes it, dP = Z
 * bf16(dO) bf16(V)^T: dO . y is that sum only when y = (P Z) V exactly,
 * and y's P Z was rounded.  A pass over the row's tiles before the
 * others (P and dP each made one more time). */
static void row_dots(const ag__att_job *j, size_t bh, int t0, int n, int e, const ag_real *q, const ag_real *k,
                     const ag_real *v, const ag_real *dy, const ag_real *ml, const ag_real *const *mr,
                     const int *hid, ag_real *p, ag_real *dp, ag_real *dl)
{
    for (int i = 0; i < n; i++) dl[i] = 0;
    for (int s0 = 0; s0 < e; s0 += KB) {
        int kb = e - s0 < KB ? e - s0 : KB;
        scores(j, bh, t0, n, s0, kb, q, k, mr, hid, p);
        weights(n, kb, p, ml);
        ag__gemm(0, 1, n, kb, j->Dv, dy, j->ldy, v + (size_t)s0 * j->ldv, j->ldv, 0, dp, KB);
        drop_tile(j, bh, t0, n, s0, kb, dp, KB);
        for (int i = 0; i < n; i++) {
            const ag_real *pr = p + (size_t)i * KB, *dr = dp + (size_t)i * KB;
            ag_real s = dl[i];
            for (int c = 0; c < kb; c++) s += pr[c] * dr[c];
            dl[i] = s;
        }
    }
}

/* Rows [t0, t0 + n) of head bh: their share of dQ, dK and dV. */
static void backward_block(const ag__att_job *j, size_t bh, int t0, int n, ag_real *p, ag_real *dp, ag_real *dl)
{
    const int T = j->T, S = j->S, D = j->D, Dv = j->Dv, ldq = j->ldq, ldk = j->ldk, ldv = j->ldv, ldy = j->ldy;
    const int e = keys_seen(j, t0, n);
    const bool bf16 = j->a->bf16; /* q, k, v and dy rounded copies (kernels/attention.c) */
    const ag_real *q = j->q + ag__att_at(j, bh, T, D, false) + (size_t)t0 * ldq;
    const ag_real *k = j->k + ag__att_at(j, bh, S, D, true), *v = j->v + ag__att_at(j, bh, S, Dv, true);
    const ag_real *ml = j->ml + 2 * (bh * (size_t)T + (size_t)t0);
    const ag_real *y = j->y + ag__att_at(j, bh, T, Dv, false) + (size_t)t0 * ldy;
    const ag_real *dy = j->dy + ag__att_at(j, bh, T, Dv, false) + (size_t)t0 * ldy;
    ag_real *dq = j->dq ? j->dq + ag__att_at(j, bh, T, D, false) + (size_t)t0 * ldq : NULL;
    ag_real *dk = j->dk ? j->dk + ag__att_at(j, bh, S, D, true) : NULL;
    ag_real *dv = j->dv ? j->dv + ag__att_at(j, bh, S, Dv, true) : NULL;
    const ag_real *mr[QB];
    int hid[QB];
    block_rules(j, bh, t0, n, mr, hid);
    if (bf16) row_dots(j, bh, t0, n, e, q, k, v, dy, ml, mr, hid, p, dp, dl);
    else
        for (int i = 0; i < n; i++) { /* Dl = dO . y, for the whole row */
            ag_real s = 0;
            for (int d = 0; d < Dv; d++) s += dy[(size_t)i * ldy + d] * y[(size_t)i * ldy + d];
            dl[i] = s;
        }
    for (int s0 = 0; s0 < e; s0 += KB) { /* keys [s0, s0 + kb): the forward's tiles */
        int kb = e - s0 < KB ? e - s0 : KB;
        /* P = exp((mask ? scale Q K^T + M : fill) - m) / l, the forward's weights */
        scores(j, bh, t0, n, s0, kb, q, k, mr, hid, p);
        weights(n, kb, p, ml);
        if (dq || dk || j->dm) {
            /* O = (P Z) V:  dP = (dO V^T) Z  [n, Dv] x [Dv, kb];  dA = mask ? scale P (dP - Dl) : 0;
             * dM += mask ? P (dP - Dl) : 0, made first (scale 1), then scaled: the same dA */
            ag__gemm(0, 1, n, kb, Dv, dy, ldy, v + (size_t)s0 * ldv, ldv, 0, dp, KB);
            drop_tile(j, bh, t0, n, s0, kb, dp, KB);
            AG_ISA_CALL(dscores_tile, (n, kb, p, dp, KB, dl, mr, hid, j->mm->along, s0, j->dm ? 1 : j->scale));
            if (j->dm) ag__att_bias_grad(j, bh, t0, n, s0, kb, dp, KB);
            if (bf16) round_tile(n, kb, dp); /* dA as the products' operand */
        }
        /* O = (P Z) V:  dV += (P Z)^T dO  [kb, n] x [n, Dv] */
        drop_tile(j, bh, t0, n, s0, kb, p, KB);
        if (bf16) round_tile(n, kb, p);
        if (dv) ag__gemm(1, 0, kb, Dv, n, p, KB, dy, ldy, 1, dv + (size_t)s0 * ldv, ldv);
        if (!dq && !dk) continue;
        /* A = Q K^T:  dQ += dA K  [n, kb] x [kb, D],  dK += dA^T Q  [kb, n] x [n, D] */
        if (dq) ag__gemm(0, 0, n, D, kb, dp, KB, k + (size_t)s0 * ldk, ldk, 1, dq, ldq);
        if (dk) ag__gemm(1, 0, kb, D, n, dp, KB, q, ldq, 1, dk + (size_t)s0 * ldk, ldk);
    }
}

void ag__flash_backward(const ag__att_job *j, size_t bh, ag_real *scratch)
{
    ag_real *p = scratch, *dp = p + QB * KB, *dl = dp + QB * KB;
    for (int t0 = 0; t0 < j->T; t0 += QB) backward_block(j, bh, t0, j->T - t0 < QB ? j->T - t0 : QB, p, dp, dl);
}

size_t ag__flash_scratch(bool backward) { return backward ? 2 * QB * KB + QB : QB * KB + 2 * QB; }
