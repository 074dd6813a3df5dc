/* xoshiro256** (Blackman & Vigna), seeded through splitmix64. Small, fast, and the same
 * sequence on every platform, which is what makes a run reproducible from its seed. */
#include <math.h>

#include "flare/flare.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void fl_rng_seed(fl_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t fl_rng_u64(fl_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint32_t fl_rng_below(fl_rng *r, uint32_t n) {
    /* Lemire's multiply-shift; the bias (< n / 2^32) does not matter for our uses. */
    return (uint32_t)(((fl_rng_u64(r) >> 32) * (uint64_t)n) >> 32);
}

float fl_rng_uniform(fl_rng *r) { return (float)(fl_rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

float fl_rng_normal(fl_rng *r) {
    double u1 = ((double)(fl_rng_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0); /* (0,1] */
    double u2 = (double)(fl_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void fl_rng_shuffle(fl_rng *r, int64_t *idx, int64_t n) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(fl_rng_u64(r) % (uint64_t)(i + 1));
        int64_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
}
