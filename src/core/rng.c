/* rng.c: xoshiro256** (Blackman & Vigna), seeded through splitmix64.
 * Fast, small state, and the same numbers on every machine: the source of
 * every random draw in the library, so one seed reproduces a whole run. */
#include "core/internal.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void ag_rng_seed(ag_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ag_rng_next(ag_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double ag_rng_uniform(ag_rng *r) { return (double)(ag_rng_next(r) >> 11) * 0x1.0p-53; }

/* Bernoulli draws in bulk, for dropout.  Eight xoshiro256** streams run
 * side by side (vector lanes), seeded from r (32 draws, so the same r gives
 * the same keep[] and leaves r in the same state); each 64-bit output gives
 * two 32-bit uniforms u = k 2^-32.  u < p exactly when k < ceil(p 2^32)
 * (scaling by a power of two is exact): integer compares only. */
enum { LANES = 8 };
static inline AG_ALWAYS_INLINE void rng_keep(ag_rng *r, double p, size_t n, unsigned char *keep)
{
    const uint64_t below = (uint64_t)ceil(p * 0x1.0p32);
    uint64_t s0[LANES], s1[LANES], s2[LANES], s3[LANES];
    for (int l = 0; l < LANES; l++)
        s0[l] = ag_rng_next(r), s1[l] = ag_rng_next(r), s2[l] = ag_rng_next(r), s3[l] = ag_rng_next(r);
    size_t i = 0;
    for (; i + 2 * LANES <= n; i += 2 * LANES) {
        uint64_t out[LANES];
        for (int l = 0; l < LANES; l++) { /* one xoshiro256** step per lane */
            out[l] = rotl(s1[l] * 5, 7) * 9;
            uint64_t t = s1[l] << 17;
            s2[l] ^= s0[l];
            s3[l] ^= s1[l];
            s1[l] ^= s2[l];
            s0[l] ^= s3[l];
            s2[l] ^= t;
            s3[l] = rotl(s3[l], 45);
        }
        for (int l = 0; l < LANES; l++) {
            keep[i + l] = (out[l] & 0xffffffffu) >= below;
            keep[i + LANES + l] = (out[l] >> 32) >= below;
        }
    }
    for (; i < n; i++) keep[i] = (ag_rng_next(r) & 0xffffffffu) >= below; /* the last few */
}
AG_ISA_CLONES(void, rng_keep, (ag_rng *r, double p, size_t n, unsigned char *keep), rng_keep(r, p, n, keep))
void ag__rng_keep(ag_rng *r, double p, size_t n, unsigned char *keep) { AG_ISA_CALL(rng_keep, (r, p, n, keep)); }

double ag_rng_normal(ag_rng *r)
{
    /* Box-Muller; u1 in (0, 1] so the log is finite */
    double u1 = 1.0 - ag_rng_uniform(r), u2 = ag_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void ag_init_uniform(ag_tensor *t, double lo, double hi, uint64_t seed)
{
    if (!t) return;
    ag_rng r;
    ag_rng_seed(&r, seed);
    for (size_t i = 0; i < t->size; i++) t->data[i] = (ag_real)(lo + (hi - lo) * ag_rng_uniform(&r));
}

void ag_init_normal(ag_tensor *t, double mean, double std, uint64_t seed)
{
    if (!t) return;
    ag_rng r;
    ag_rng_seed(&r, seed);
    for (size_t i = 0; i < t->size; i++) t->data[i] = (ag_real)(mean + std * ag_rng_normal(&r));
}

void ag_init_const(ag_tensor *t, double value)
{
    if (!t) return;
    for (size_t i = 0; i < t->size; i++) t->data[i] = (ag_real)value;
}
