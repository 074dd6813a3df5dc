/* KMNC and NC against a naive re-implementation of their definitions, on random values built
 * to sit on the edges that fast paths get wrong: exact section boundaries and the floats next
 * to them, the training min and max, values outside, huge ranges and k too large for float
 * (both take KMNC's exact path); and TKNC/TKNP against a stable sort. Layers are 13 and 5
 * neurons wide (37, 2, 8 and 19 for top-k), so every vector loop has a tail; batches come in
 * odd sizes, so state carries over between updates. */
#include <float.h>

#include "testutil.h"
#include "core/simd.h"
#include "flare/cover.h"

/* Hand-made dense layers "a", "b", ... of the given widths. */
static fl_layerset *layers_of(int n, const int64_t *width) {
    fl_layerset *ls = calloc(1, sizeof *ls);
    ls->n = n;
    ls->value = calloc((size_t)n, sizeof(int));
    ls->name = calloc((size_t)n, sizeof(char *));
    ls->width = calloc((size_t)n, sizeof(int64_t));
    ls->offset = calloc((size_t)n, sizeof(int64_t));
    for (int l = 0; l < n; l++) {
        char name[2] = {(char)('a' + l), 0};
        ls->name[l] = strdup(name);
        ls->width[l] = width[l];
        ls->offset[l] = ls->total;
        ls->total += width[l];
    }
    return ls;
}

/* "a" (13 neurons) and "b" (5). */
static fl_layerset *two_layers(void) { return layers_of(2, (const int64_t[]){13, 5}); }

#define T 18
#define N 300

/* A profile whose neuron j has min lo[j] and max hi[j] (two training rows). */
static fl_profile *profile_of(const fl_layerset *ls, const float *lo, const float *hi) {
    fl_err e = {0};
    fl_profile *p;
    float rows[2 * T];
    memcpy(rows, lo, sizeof(float) * T), memcpy(rows + T, hi, sizeof(float) * T);
    assert_int_equal(fl_profile_new(ls, &p, &e), FL_OK);
    assert_int_equal(fl_profile_add(p, rows, 2, &e), FL_OK);
    return p;
}

/* DeepHunter's section of x, or -1 outside [lo, hi]. */
static int64_t ref_section(float x, float lo, float hi, int64_t k) {
    if (!(x >= lo && x <= hi) || !(hi > lo)) return -1;
    double unit = ((double)hi - lo) / (double)k;
    int64_t s = (int64_t)(((double)x - lo) / unit);
    return s < k - 1 ? s : k - 1;
}

/* A value for neuron j that sits where rounding matters. */
static float edge_value(fl_rng *r, float lo, float hi, int64_t k) {
    double unit = ((double)hi - lo) / (double)k;
    float x;
    switch (fl_rng_below(r, 6)) {
    case 0: x = lo; break;
    case 1: x = hi; break;
    case 2: /* anywhere in the range and around it, some outside */
        x = (float)fmax(-FLT_MAX, fmin(FLT_MAX, lo + ((double)hi - lo) * (2 * fl_rng_uniform(r) - 0.5)));
        break;
    default: x = (float)(lo + (double)fl_rng_below(r, (uint32_t)(k < 100000 ? k + 1 : 100000)) * unit);
    }
    int step = (int)fl_rng_below(r, 5) - 2; /* up to two floats either side */
    for (; step < 0; step++) x = nextafterf(x, -INFINITY);
    for (; step > 0; step--) x = nextafterf(x, INFINITY);
    return isfinite(x) ? x : copysignf(FLT_MAX, x);
}

static void test_kmnc_matches_definition(void **state) {
    (void)state;
    const int64_t ks[] = {1000, 7, 1, 3 << 20};
    fl_layerset *ls = two_layers();
    fl_rng r;
    fl_rng_seed(&r, 20261202);
    for (int ki = 0; ki < 4; ki++) {
        int64_t k = ks[ki];
        float lo[T], hi[T];
        for (int j = 0; j < T; j++) {
            lo[j] = (fl_rng_uniform(&r) - 0.7f) * 10;
            hi[j] = lo[j] + 0.01f + fl_rng_uniform(&r) * 20;
        }
        lo[3] = -3e38f, hi[3] = 3e38f; /* hi - lo overflows float */
        lo[5] = 0, hi[5] = 1e-30f;     /* 1 / unit overflows float */
        lo[16] = hi[16] = 2;           /* constant: no sections */
        fl_profile *p = profile_of(ls, lo, hi);
        fl_cover_ctx ctx = {.ls = ls, .profile = p};
        char spec[32];
        snprintf(spec, sizeof spec, "kmnc:%lld", (long long)k);
        fl_cover *c;
        fl_err e = {0};
        assert_int_equal(fl_cover_new(&ctx, spec, &c, &e), FL_OK);
        int64_t cov, tot;
        fl_cover_stats(c, &cov, &tot);
        assert_int_equal(tot, (T - 1) * k);

        float *x = malloc(sizeof(float) * N * T);
        for (int i = 0; i < N * T; i++) x[i] = edge_value(&r, lo[i % T], hi[i % T], k);
        uint8_t *seen = calloc((size_t)((T - 1) * k + 7) / 8, 1), added[N], want[N];
        int64_t want_cov = 0;
        for (int i = 0; i < N; i++) {
            want[i] = 0;
            for (int j = 0, base = 0; j < T; j++) {
                int64_t s = ref_section(x[i * T + j], lo[j], hi[j], k);
                if (s >= 0 && !(seen[(base * k + s) / 8] >> ((base * k + s) % 8) & 1)) {
                    seen[(base * k + s) / 8] |= (uint8_t)(1u << ((base * k + s) % 8));
                    want[i] = 1, want_cov++;
                }
                base += hi[j] > lo[j];
            }
        }
        for (int i0 = 0, step = 1; i0 < N; i0 += step, step = step * 3 % 17 + 1) {
            int n = N - i0 < step ? N - i0 : step;
            fl_cover_batch b = {.n = n, .mean = x + i0 * T};
            if (fl_cover_update(c, &b, added + i0, NULL, &e) != FL_OK) fail_msg("%s", e.msg);
        }
        fl_cover_stats(c, &cov, NULL);
        assert_int_equal(cov, want_cov);
        for (int i = 0; i < N; i++)
            if (added[i] != want[i]) fail_msg("k=%lld input %d: added %d, want %d", (long long)k, i, added[i], want[i]);
        for (int64_t it = 0; it < (T - 1) * k; it++)
            if (fl_cover_is_hit(c, it) != (seen[it / 8] >> (it % 8) & 1))
                fail_msg("k=%lld item %lld differs", (long long)k, (long long)it);
        /* a clone starts from the same bits; after a reset everything is new again */
        fl_cover *d;
        assert_int_equal(fl_cover_clone(c, &d, &e), FL_OK);
        fl_cover_batch all = {.n = N, .mean = x};
        int any = 1;
        assert_int_equal(fl_cover_update(d, &all, added, &any, &e), FL_OK);
        assert_false(any);
        fl_cover_reset(d);
        assert_int_equal(fl_cover_update(d, &all, added, &any, &e), FL_OK);
        fl_cover_stats(d, &cov, NULL);
        assert_int_equal(cov, want_cov);
        for (int i = 0; i < N; i++) assert_int_equal(added[i], want[i]);
        fl_cover_free(d);
        fl_cover_free(c);
        free(seen), free(x);
        fl_profile_free(p);
    }
    fl_layerset_free(ls);
}

/* NC with channel scaling and with none, against (v - min) / (max - min) > t per layer. */
static void test_nc_matches_definition(void **state) {
    (void)state;
    fl_layerset *ls = two_layers();
    fl_rng r;
    fl_rng_seed(&r, 7);
    float *x = malloc(sizeof(float) * N * T);
    for (int i = 0; i < N * T; i++) x[i] = (float)fl_rng_below(&r, 9) / 4 - 1; /* ties */
    for (int j = 13; j < T; j++) x[5 * T + j] = 0.5f; /* a constant layer */
    const char *specs[] = {"nc:0.5:channel", "nc:0.25:none", "nc:0.999:channel"};
    for (int si = 0; si < 3; si++) {
        int none = si == 1;
        double t = si == 0 ? 0.5 : si == 1 ? 0.25 : 0.999;
        uint8_t seen[T] = {0}, want[N], added[N];
        int64_t want_cov = 0;
        for (int i = 0; i < N; i++) {
            want[i] = 0;
            for (int l = 0; l < 2; l++) {
                const float *v = x + i * T + ls->offset[l];
                float mn = v[0], mx = v[0];
                for (int j = 1; j < ls->width[l]; j++) mn = fminf(mn, v[j]), mx = fmaxf(mx, v[j]);
                for (int j = 0; j < ls->width[l]; j++) {
                    double s = none ? v[j] : ((double)v[j] - mn) / ((double)mx - mn);
                    if (s > t && !seen[ls->offset[l] + j])
                        seen[ls->offset[l] + j] = 1, want[i] = 1, want_cov++;
                }
            }
        }
        fl_cover_ctx ctx = {.ls = ls};
        fl_cover *c;
        fl_err e = {0};
        assert_int_equal(fl_cover_new(&ctx, specs[si], &c, &e), FL_OK);
        for (int i0 = 0, step = 1; i0 < N; i0 += step, step = step * 5 % 13 + 1) {
            int n = N - i0 < step ? N - i0 : step;
            fl_cover_batch b = {.n = n, .mean = x + i0 * T};
            assert_int_equal(fl_cover_update(c, &b, added + i0, NULL, &e), FL_OK);
        }
        int64_t cov;
        fl_cover_stats(c, &cov, NULL);
        assert_int_equal(cov, want_cov);
        for (int i = 0; i < N; i++) assert_int_equal(added[i], want[i]);
        for (int j = 0; j < T; j++) assert_int_equal(fl_cover_is_hit(c, j), seen[j]);
        fl_cover_free(c);
    }
    free(x);
    fl_layerset_free(ls);
}

/* The stable top k of v[0..w) (descending, ties to the lower index) as a bit set. */
static uint64_t ref_topk(const float *v, int64_t w, int64_t k) {
    uint64_t set = 0;
    for (int64_t q = 0; q < k && q < w; q++) {
        int64_t best = -1;
        for (int64_t j = 0; j < w; j++)
            if (!(set >> j & 1) && (best < 0 || v[j] > v[best])) best = j;
        set |= 1ull << best;
    }
    return set;
}

/* TKNC and TKNP, alone (each makes its own lists) and in a set (sharing the lists of the
 * largest k), against a stable sort per layer; layers wider and narrower than the selection's
 * eight lanes and than k, batches of sizes that are no multiple of eight. */
static void test_topk_matches_definition(void **state) {
    (void)state;
    const int64_t width[] = {37, 2, 8, 19};
    enum { L = 4, W = 66 };
    fl_layerset *ls = layers_of(L, width);
    fl_rng r;
    fl_rng_seed(&r, 11);
    float *x = malloc(sizeof(float) * N * W);
    for (int i = 0; i < N * W; i++) /* many ties, both zeros, wide magnitudes */
        x[i] = i % 3 ? (float)fl_rng_below(&r, 7) - 3 : (fl_rng_uniform(&r) - 0.5f) * 1e30f;
    for (int i = 0; i < N * W; i += 17) x[i] = -0.0f;
    const int64_t ks[] = {1, 3, 5, 20};
    for (int ki = 0; ki < 4; ki++) {
        int64_t k = ks[ki];
        uint8_t seen[W] = {0}, want_c[N], want_p[N], added[N];
        uint64_t *pat = calloc(N * L, sizeof(uint64_t));
        int64_t want_cov = 0, patterns = 0;
        for (int i = 0; i < N; i++) {
            want_c[i] = 0;
            for (int l = 0; l < L; l++) {
                uint64_t set = ref_topk(x + i * W + ls->offset[l], width[l], k);
                pat[i * L + l] = set;
                for (int j = 0; j < width[l]; j++)
                    if (set >> j & 1 && !seen[ls->offset[l] + j])
                        seen[ls->offset[l] + j] = 1, want_c[i] = 1, want_cov++;
            }
            int old = 0;
            for (int q = 0; q < i && !old; q++)
                old = memcmp(pat + q * L, pat + i * L, sizeof(uint64_t) * L) == 0;
            want_p[i] = !old;
            patterns += !old;
        }
        char spec[64];
        snprintf(spec, sizeof spec, "tknc:%lld,tknp:%lld", (long long)k, (long long)k);
        fl_cover_ctx ctx = {.ls = ls};
        fl_coverset *s;
        fl_err e = {0};
        assert_int_equal(fl_coverset_new(&ctx, spec, &s, &e), FL_OK);
        for (int pass = 0; pass < 2; pass++) { /* each alone, then the set */
            for (int c = 0; c < 2; c++) fl_cover_reset(s->c[c]);
            uint8_t got[2][N];
            for (int i0 = 0, step = 1; i0 < N; i0 += step, step = step * 7 % 19 + 1) {
                int n = N - i0 < step ? N - i0 : step;
                fl_cover_batch b = {.n = n, .mean = x + i0 * W};
                if (pass == 0)
                    for (int c = 0; c < 2; c++)
                        assert_int_equal(fl_cover_update(s->c[c], &b, got[c] + i0, NULL, &e), FL_OK);
                else
                    assert_int_equal(fl_coverset_update(s, &b, added + i0, &e), FL_OK);
            }
            int64_t cov;
            fl_cover_stats(s->c[0], &cov, NULL);
            assert_int_equal(cov, want_cov);
            for (int j = 0; j < W; j++) assert_int_equal(fl_cover_is_hit(s->c[0], j), seen[j]);
            fl_cover_stats(s->c[1], &cov, NULL);
            assert_int_equal(cov, patterns);
            for (int i = 0; i < N; i++) {
                if (pass == 0) {
                    if (got[0][i] != want_c[i] || got[1][i] != want_p[i])
                        fail_msg("k=%lld input %d: tknc %d/%d tknp %d/%d", (long long)k, i,
                                 got[0][i], want_c[i], got[1][i], want_p[i]);
                } else {
                    assert_int_equal(added[i], want_c[i] | want_p[i]);
                }
            }
        }
        fl_coverset_free(s);
        free(pat);
    }
    free(x);
    fl_layerset_free(ls);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kmnc_matches_definition),
        cmocka_unit_test(test_nc_matches_definition),
        cmocka_unit_test(test_topk_matches_definition),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    fl__simd_portable(1); /* again on the portable kernels (KMNC's bitmap check) */
    return failed + cmocka_run_group_tests(tests, NULL, NULL);
}
