/* Tests for the image transformations of fuzz.h: geometry against hand-derived references
 * (translate, rotate by multiples of 90, scale, shear, bilinear halves), the blur kernels'
 * footprints, sums and borders, clipping and rounding, text round trips for every menu
 * entry, the menus' counts, DeepHunter's validity constraint at its boundaries, and
 * Mutate(I): the affine rule, the reference update, the two picking rules and determinism. */
#include "testutil.h"

#include "flare/fuzz.h"

#define AT(img, ch, y, x, h, w) ((img)[((size_t)(ch) * (h) + (y)) * (w) + (x)])

static void fill_rand(uint8_t *v, size_t n, uint64_t seed) {
    fl_rng r;
    fl_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) v[i] = (uint8_t)fl_rng_below(&r, 256);
}

static void apply(fl_xform_kind k, float p, float p2, const uint8_t *src, uint8_t *dst, int c,
                  int h, int w) {
    fl_xform t = {k, p, p2};
    fl_rng r;
    fl_rng_seed(&r, 1);
    fl_xform_apply(&t, src, dst, c, h, w, &r);
}

static void test_names(void **state) {
    (void)state;
    assert_string_equal(fl_xform_name(FL_XF_TRANSLATE), "translate");
    assert_string_equal(fl_xform_name(FL_XF_ROTATE), "rotate");
    assert_string_equal(fl_xform_name(FL_XF_GAUSS), "gauss");
    assert_string_equal(fl_xform_name(FL_XF_COUNT_), "?");
    for (int k = 0; k < FL_XF_COUNT_; k++)
        assert_int_equal(fl_xform_is_affine((fl_xform_kind)k), k <= FL_XF_ROTATE);
}

static void test_translate(void **state) {
    (void)state;
    enum { C = 3, H = 4, W = 5 };
    uint8_t s[C * H * W], d[C * H * W];
    for (int i = 0; i < C * H * W; i++) s[i] = (uint8_t)(i + 1); /* no zeros */
    apply(FL_XF_TRANSLATE, 2, 1, s, d, C, H, W);
    for (int ch = 0; ch < C; ch++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                int sx = x - 2, sy = y - 1;
                int want = sx >= 0 && sy >= 0 ? AT(s, ch, sy, sx, H, W) : 0;
                assert_int_equal(AT(d, ch, y, x, H, W), want);
            }
    /* a known pixel moves right by 2 and down by 1 */
    assert_int_equal(AT(d, 1, 2, 3, H, W), AT(s, 1, 1, 1, H, W));
    assert_int_equal(AT(d, 0, 0, 4, H, W), 0);
    assert_int_equal(AT(d, 2, 3, 1, H, W), 0);
    /* negative shifts fill the other sides */
    apply(FL_XF_TRANSLATE, -3, 2, s, d, 1, H, W);
    assert_int_equal(AT(d, 0, 2, 0, H, W), AT(s, 0, 0, 3, H, W));
    assert_int_equal(AT(d, 0, 2, 2, H, W), 0);
    assert_int_equal(AT(d, 0, 1, 0, H, W), 0);
    /* half a pixel: the mean of two neighbours; outside counts as 0 */
    uint8_t row[4] = {10, 20, 40, 80}, out[4];
    apply(FL_XF_TRANSLATE, 0.5f, 0, row, out, 1, 1, 4);
    assert_int_equal(out[0], 5);
    assert_int_equal(out[1], 15);
    assert_int_equal(out[2], 30);
    assert_int_equal(out[3], 60);
    /* far outside: all zero */
    apply(FL_XF_TRANSLATE, 100, 0, s, d, C, H, W);
    for (int i = 0; i < C * H * W; i++) assert_int_equal(d[i], 0);
}

static void test_rotate90(void **state) {
    (void)state;
    enum { C = 3, N = 6 };
    uint8_t s[C * N * N], d[C * N * N], d2[C * N * N], t[C * N * N];
    fill_rand(s, sizeof s, 7);
    /* counter-clockwise by 90: the top-right corner goes to the top-left */
    apply(FL_XF_ROTATE, 90, 0, s, d, C, N, N);
    for (int ch = 0; ch < C; ch++)
        for (int y = 0; y < N; y++)
            for (int x = 0; x < N; x++)
                assert_int_equal(AT(d, ch, y, x, N, N), AT(s, ch, x, N - 1 - y, N, N));
    assert_int_equal(AT(d, 0, 0, 0, N, N), AT(s, 0, 0, N - 1, N, N));
    apply(FL_XF_ROTATE, -90, 0, s, d, C, N, N);
    for (int y = 0; y < N; y++)
        for (int x = 0; x < N; x++)
            assert_int_equal(AT(d, 2, y, x, N, N), AT(s, 2, N - 1 - x, y, N, N));
    apply(FL_XF_ROTATE, 180, 0, s, d, C, N, N);
    for (int y = 0; y < N; y++)
        for (int x = 0; x < N; x++)
            assert_int_equal(AT(d, 1, y, x, N, N), AT(s, 1, N - 1 - y, N - 1 - x, N, N));
    /* four quarter turns give the image back (lossless about the true centre) */
    memcpy(t, s, sizeof s);
    for (int i = 0; i < 4; i++) {
        apply(FL_XF_ROTATE, 90, 0, t, d2, C, N, N);
        memcpy(t, d2, sizeof t);
    }
    assert_memory_equal(t, s, sizeof s);
    /* 45 degrees of an odd-sized image keeps the centre pixel, zero-fills the corners */
    enum { M = 7 };
    uint8_t a[M * M], b[M * M];
    memset(a, 200, sizeof a);
    apply(FL_XF_ROTATE, 45, 0, a, b, 1, M, M);
    assert_int_equal(b[3 * M + 3], 200);
    assert_int_equal(b[0], 0);
    assert_int_equal(b[M * M - 1], 0);
}

static void test_identities(void **state) {
    (void)state;
    enum { C = 3, H = 7, W = 9 };
    uint8_t s[C * H * W], d[C * H * W];
    fill_rand(s, sizeof s, 3);
    const fl_xform id[] = {
        {FL_XF_ROTATE, 0, 0},   {FL_XF_ROTATE, 360, 0},    {FL_XF_SCALE, 1, 0},
        {FL_XF_SHEAR, 0, 0},    {FL_XF_TRANSLATE, 0, 0},   {FL_XF_CONTRAST, 1, 0},
        {FL_XF_BRIGHTNESS, 0, 0}, {FL_XF_GAUSS, 0, 0},     {FL_XF_NOISE, 1, 0},
        {FL_XF_NOISE, 2, 0},    {FL_XF_NOISE, 3, 0},       {FL_XF_PIXEL, 0, 0},
    };
    for (size_t i = 0; i < sizeof id / sizeof id[0]; i++) {
        memset(d, 0xAA, sizeof d);
        fl_rng r;
        fl_rng_seed(&r, 9);
        fl_xform_apply(&id[i], s, d, C, H, W, &r);
        char buf[64];
        if (memcmp(d, s, sizeof s) != 0) fail_msg("%s is not the identity", fl_xform_str(&id[i], buf, sizeof buf));
    }
}

static void test_scale_shear(void **state) {
    (void)state;
    enum { N = 5 };
    uint8_t s[N * N], d[N * N];
    fill_rand(s, sizeof s, 11);
    /* zoom 2 about the centre (2,2): dst(x,y) = src((x-2)/2+2, (y-2)/2+2) */
    apply(FL_XF_SCALE, 2, 0, s, d, 1, N, N);
    assert_int_equal(d[2 * N + 2], s[2 * N + 2]);
    assert_int_equal(d[4 * N + 4], s[3 * N + 3]);
    assert_int_equal(d[0], s[1 * N + 1]);
    assert_int_equal(d[0 * N + 4], s[1 * N + 3]);
    /* in between: the bilinear mean, (src(2,2) + src(3,2)) / 2 at x = 3 */
    double m = (s[2 * N + 2] + s[2 * N + 3]) / 2.0;
    assert_true(fabs(d[2 * N + 3] - m) <= 0.5 + 1e-9);
    /* zoom 0.5 of a constant: centre kept, corners zero-filled */
    uint8_t k[8 * 8], kd[8 * 8];
    memset(k, 100, sizeof k);
    apply(FL_XF_SCALE, 0.5f, 0, k, kd, 1, 8, 8);
    assert_int_equal(kd[3 * 8 + 3], 100);
    assert_int_equal(kd[4 * 8 + 4], 100);
    assert_int_equal(kd[0], 0);
    assert_int_equal(kd[63], 0);
    /* shear 1 about row 2: src_x = x + (y - 2) */
    apply(FL_XF_SHEAR, 1, 0, s, d, 1, N, N);
    for (int y = 0; y < N; y++)
        for (int x = 0; x < N; x++) {
            int sx = x + (y - 2);
            int want = sx >= 0 && sx < N ? s[y * N + sx] : 0;
            assert_int_equal(d[y * N + x], want);
        }
}

static void test_contrast_brightness(void **state) {
    (void)state;
    uint8_t s[6] = {0, 5, 100, 128, 200, 255}, d[6];
    apply(FL_XF_CONTRAST, 2, 0, s, d, 1, 1, 6);
    const uint8_t c2[6] = {0, 10, 200, 255, 255, 255};
    assert_memory_equal(d, c2, 6);
    apply(FL_XF_CONTRAST, 0.5f, 0, s, d, 1, 1, 6);
    const uint8_t c05[6] = {0, 2, 50, 64, 100, 128}; /* 2.5 -> 2, 127.5 -> 128: ties to even */
    assert_memory_equal(d, c05, 6);
    apply(FL_XF_CONTRAST, -1, 0, s, d, 1, 1, 6);
    for (int i = 0; i < 6; i++) assert_int_equal(d[i], 0);
    apply(FL_XF_BRIGHTNESS, -20, 0, s, d, 1, 1, 6);
    const uint8_t bm[6] = {0, 0, 80, 108, 180, 235};
    assert_memory_equal(d, bm, 6);
    apply(FL_XF_BRIGHTNESS, 100, 0, s, d, 1, 1, 6);
    const uint8_t bp[6] = {100, 105, 200, 228, 255, 255};
    assert_memory_equal(d, bp, 6);
}

/* 9x9 zeros with value v at (y, x), blurred with kernel id */
static void spike(int id, int y, int x, uint8_t v, uint8_t *d) {
    uint8_t s[81] = {0};
    s[y * 9 + x] = v;
    apply(FL_XF_BLUR, (float)id, 0, s, d, 1, 9, 9);
}

static int sum81(const uint8_t *d) {
    int s = 0;
    for (int i = 0; i < 81; i++) s += d[i];
    return s;
}

static void test_blur(void **state) {
    (void)state;
    /* every kind keeps a constant image */
    enum { C = 3, H = 6, W = 7 };
    uint8_t k[C * H * W], kd[C * H * W];
    memset(k, 77, sizeof k);
    for (int id = 1; id <= 10; id++) {
        memset(kd, 0, sizeof kd);
        apply(FL_XF_BLUR, (float)id, 0, k, kd, C, H, W);
        for (int i = 0; i < C * H * W; i++)
            if (kd[i] != 77) fail_msg("blur %d of a constant: %d at %d", id, kd[i], i);
    }
    uint8_t d[81];
    /* box k x k of a spike: value v / k^2 on the footprint (offsets -k/2 .. k-1-k/2) */
    const struct { int id, k; uint8_t v; } box[] = {{1, 3, 90}, {2, 4, 160}, {3, 5, 250}, {9, 6, 180}};
    for (int b = 0; b < 4; b++) {
        spike(box[b].id, 4, 4, box[b].v, d);
        int kk = box[b].k, lo = 4 - (kk - 1 - kk / 2), hi = 4 + kk / 2;
        for (int y = 0; y < 9; y++)
            for (int x = 0; x < 9; x++) {
                int in = y >= lo && y <= hi && x >= lo && x <= hi;
                assert_int_equal(d[y * 9 + x], in ? box[b].v / (kk * kk) : 0);
            }
        assert_int_equal(sum81(d), box[b].v);
    }
    /* Gaussian 3x3: [1 2 1]^T [1 2 1] / 16 */
    spike(4, 4, 4, 160, d);
    assert_int_equal(d[4 * 9 + 4], 40);
    assert_int_equal(d[3 * 9 + 4], 20);
    assert_int_equal(d[4 * 9 + 5], 20);
    assert_int_equal(d[3 * 9 + 3], 10);
    assert_int_equal(d[5 * 9 + 5], 10);
    assert_int_equal(sum81(d), 160);
    /* Gaussian 5x5: [1 4 6 4 1] / 16 each way: centre 255 * 36/256 = 35.9, corner 1.0 */
    spike(5, 4, 4, 255, d);
    assert_int_equal(d[4 * 9 + 4], 36);
    assert_int_equal(d[2 * 9 + 2], 1);
    assert_int_equal(d[1 * 9 + 4], 0);
    /* Gaussian 7x7: OpenCV's table [2 7 14 18 14 7 2] / 64, centre 255 * 324/4096 = 20.2 */
    spike(6, 4, 4, 255, d);
    assert_int_equal(d[4 * 9 + 4], 20);
    assert_int_equal(d[4 * 9 + 1], 2); /* 255 * 18 * 2 / 4096 = 2.24 */
    assert_int_equal(d[4 * 9 + 0], 0);
    /* reflect-101 border: a spike at (1,1) is seen 4 times by the 3x3 box at (0,0) */
    spike(1, 1, 1, 90, d);
    assert_int_equal(d[0], 40);
    assert_int_equal(d[1], 20);
    assert_int_equal(d[2 * 9 + 2], 10);
    /* median removes salt and pepper, 3 and 5 */
    uint8_t m[49], md[49];
    for (int id = 7; id <= 8; id++) {
        memset(m, 50, sizeof m);
        m[3 * 7 + 3] = 255;
        m[0] = 0; /* pepper in the corner: replicate border, still the minority */
        apply(FL_XF_BLUR, (float)id, 0, m, md, 1, 7, 7);
        for (int i = 0; i < 49; i++) assert_int_equal(md[i], 50);
    }
    /* median 3 keeps an edge; box smears it */
    for (int y = 0; y < 7; y++)
        for (int x = 0; x < 7; x++) m[y * 7 + x] = x < 3 ? 0 : 200;
    apply(FL_XF_BLUR, 7, 0, m, md, 1, 7, 7);
    assert_memory_equal(md, m, 49);
    /* bilateral: an edge of 200 levels is kept (colour weight exp(-200^2/(2*75^2)) ~ 0.03)
     * far better than by the Gaussian */
    apply(FL_XF_BLUR, 10, 0, m, md, 1, 7, 7);
    assert_true(md[3 * 7 + 2] < 20);
    assert_true(md[3 * 7 + 3] > 180);
    apply(FL_XF_BLUR, 6, 0, m, md, 1, 7, 7);
    assert_true(md[3 * 7 + 2] > 40);
}

static void check_roundtrip(const fl_xform *t) {
    char buf[64], buf2[64];
    fl_xform u;
    fl_err e = {0};
    fl_xform_str(t, buf, sizeof buf);
    if (fl_xform_parse(buf, &u, &e) != FL_OK) fail_msg("parse '%s': %s", buf, e.msg);
    if (u.kind != t->kind || u.p != t->p || u.p2 != t->p2)
        fail_msg("'%s' read back as %d %.9g %.9g", buf, (int)u.kind, (double)u.p, (double)u.p2);
    assert_string_equal(fl_xform_str(&u, buf2, sizeof buf2), buf);
}

static void test_str_parse(void **state) {
    (void)state;
    for (int pr = 0; pr < 2; pr++) {
        fl_xform_menu m;
        fl_err e = {0};
        assert_int_equal(fl_xform_menu_make((fl_fuzz_preset)pr, &m, &e), FL_OK);
        for (int i = 0; i < m.n; i++) check_roundtrip(&m.v[i]);
        fl_xform_menu_free(&m);
    }
    char buf[64];
    fl_xform t = {FL_XF_ROTATE, 12, 0};
    assert_string_equal(fl_xform_str(&t, buf, sizeof buf), "rotate:12");
    t = (fl_xform){FL_XF_TRANSLATE, -3, 2};
    assert_string_equal(fl_xform_str(&t, buf, sizeof buf), "translate:-3,2");
    t = (fl_xform){FL_XF_NOISE, 2, 0.05f};
    assert_string_equal(fl_xform_str(&t, buf, sizeof buf), "noise:2,0.05");
    t = (fl_xform){FL_XF_CONTRAST, 0.7f, 0};
    assert_string_equal(fl_xform_str(&t, buf, sizeof buf), "contrast:0.7");
    t = (fl_xform){FL_XF_GAUSS, 25.5f, 0};
    check_roundtrip(&t);
    t = (fl_xform){FL_XF_ROTATE, 1.0f / 3.0f, 0}; /* needs 9 digits */
    check_roundtrip(&t);
    /* truncated output stays a C string */
    char small[6];
    t = (fl_xform){FL_XF_BRIGHTNESS, -20, 0};
    assert_string_equal(fl_xform_str(&t, small, sizeof small), "brigh");
    const char *bad[] = {"rotate", "spin:3", "rotate:abc", "rotate:", "translate:3",
                         "translate:3,", "rotate:1,2", "blur:11", "blur:0", "blur:1.5",
                         "noise:4,1", "noise:2,1.5", "noise:1,-1", "scale:0", "scale:-1",
                         "pixel:-1", "gauss:-2", "rotate:nan", "rotate:inf", "rotate:1e999",
                         "rotate:12x", ":3", "Rotate:3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fl_err e = {0};
        fl_xform u;
        if (fl_xform_parse(bad[i], &u, &e) != FL_ERR_ARG) fail_msg("'%s' was accepted", bad[i]);
        assert_non_null(strstr(e.msg, bad[i]));
    }
}

static void test_menus(void **state) {
    (void)state;
    fl_xform_menu m;
    fl_err e = {0};
    int cnt[FL_XF_COUNT_];
    /* DeepHunter */
    assert_int_equal(fl_xform_menu_make(FL_PRESET_DEEPHUNTER, &m, &e), FL_OK);
    assert_int_equal(m.n, 192);
    assert_int_equal(m.n_affine, 123);
    assert_int_equal(m.by_kind, 1);
    memset(cnt, 0, sizeof cnt);
    for (int i = 0; i < m.n; i++) {
        cnt[m.v[i].kind]++;
        assert_int_equal(fl_xform_is_affine(m.v[i].kind), i < m.n_affine);
        if (m.v[i].kind == FL_XF_TRANSLATE) {
            assert_true(m.v[i].p == m.v[i].p2);
            assert_true(m.v[i].p >= -3 && m.v[i].p <= 2);
        }
        if (m.v[i].kind == FL_XF_ROTATE) assert_true(m.v[i].p >= -50 && m.v[i].p <= 49);
        if (m.v[i].kind == FL_XF_SCALE) assert_true(m.v[i].p >= 0.69f && m.v[i].p <= 1.11f);
        if (m.v[i].kind == FL_XF_SHEAR) assert_true(m.v[i].p >= -0.61f && m.v[i].p <= 0.51f);
        if (m.v[i].kind == FL_XF_CONTRAST) assert_true(m.v[i].p >= 0.49f && m.v[i].p <= 1.21f);
        if (m.v[i].kind == FL_XF_BRIGHTNESS) assert_true(m.v[i].p >= -20 && m.v[i].p <= 19);
        if (m.v[i].kind == FL_XF_BLUR) assert_true(m.v[i].p >= 1 && m.v[i].p <= 9);
    }
    const int dh[FL_XF_COUNT_] = {6, 5, 12, 100, 8, 40, 9, 9, 3, 0};
    assert_memory_equal(cnt, dh, sizeof cnt);
    fl_xform_menu_free(&m);
    assert_null(m.v);
    assert_int_equal(m.n, 0);
    /* NeuraL-Coverage */
    assert_int_equal(fl_xform_menu_make(FL_PRESET_NLC, &m, &e), FL_OK);
    assert_int_equal(m.n, 95);
    assert_int_equal(m.n_affine, 71);
    assert_int_equal(m.by_kind, 0);
    memset(cnt, 0, sizeof cnt);
    float cmax = 0, bmax = 0, smin = 9, smax = 0;
    for (int i = 0; i < m.n; i++) {
        cnt[m.v[i].kind]++;
        assert_int_equal(fl_xform_is_affine(m.v[i].kind), i < m.n_affine);
        if (m.v[i].kind == FL_XF_CONTRAST && m.v[i].p > cmax) cmax = m.v[i].p;
        if (m.v[i].kind == FL_XF_BRIGHTNESS && m.v[i].p > bmax) bmax = m.v[i].p;
        if (m.v[i].kind == FL_XF_SCALE) {
            if (m.v[i].p < smin) smin = m.v[i].p;
            if (m.v[i].p > smax) smax = m.v[i].p;
        }
        if (m.v[i].kind == FL_XF_TRANSLATE)
            assert_true((m.v[i].p == 0 || fabsf(m.v[i].p) == 5) &&
                        (m.v[i].p2 == 0 || fabsf(m.v[i].p2) == 5) && m.v[i].p * m.v[i].p2 >= 0);
    }
    const int nlc[FL_XF_COUNT_] = {7, 4, 0, 60, 7, 7, 10, 0, 0, 0};
    assert_memory_equal(cnt, nlc, sizeof cnt);
    assert_true(cmax == 2.0f && bmax == 70.0f && smin == 0.8f && smax == 0.95f);
    fl_xform_menu_free(&m);
    fl_xform_menu_free(NULL);
    assert_int_equal(fl_xform_menu_make((fl_fuzz_preset)7, &m, &e), FL_ERR_ARG);
}

static void test_valid(void **state) {
    (void)state;
    uint8_t i0[100], x[100];
    fill_rand(i0, 100, 5);
    for (int i = 0; i < 100; i++) i0[i] = (uint8_t)(i0[i] / 2 + 1); /* 1..128: no zeros */
    memcpy(x, i0, 100);
    assert_true(fl_fuzz_valid(i0, x, 100, 0.02, 0.2, 0));
    assert_true(fl_fuzz_valid(i0, x, 100, 0, 0, 0)); /* identical: L-inf 0 <= 0 */
    /* alpha * size = 2: L0 = 1 is under it, any L-inf goes */
    x[10] = (uint8_t)(i0[10] + 120);
    assert_true(fl_fuzz_valid(i0, x, 100, 0.02, 0.2, 0));
    /* L0 = 2 is not under 2: L-inf must be <= 0.2 * 255 = 51 */
    x[10] = (uint8_t)(i0[10] + 51);
    x[20] = (uint8_t)(i0[20] + 51);
    assert_true(fl_fuzz_valid(i0, x, 100, 0.02, 0.2, 0));
    x[20] = (uint8_t)(i0[20] + 52);
    assert_false(fl_fuzz_valid(i0, x, 100, 0.02, 0.2, 0));
    x[20] = (uint8_t)(i0[20] - 52 < 0 ? 0 : i0[20] - 52);
    assert_int_equal(fl_fuzz_valid(i0, x, 100, 0.02, 0.2, 0), abs((int)x[20] - i0[20]) <= 51);
    /* alpha 0.03: 2 < 3 again */
    x[20] = (uint8_t)(i0[20] + 120);
    assert_true(fl_fuzz_valid(i0, x, 100, 0.03, 0.2, 0));
    /* nonzero_size: i0 with 10 non-zero values, alpha 0.2 -> 2 */
    uint8_t z[100] = {0}, y[100];
    for (int i = 0; i < 10; i++) z[i * 10] = 100;
    memcpy(y, z, 100);
    y[5] = 255;
    assert_true(fl_fuzz_valid(z, y, 100, 0.2, 0.2, 1));
    y[6] = 255;
    assert_false(fl_fuzz_valid(z, y, 100, 0.2, 0.2, 1));
    assert_true(fl_fuzz_valid(z, y, 100, 0.2, 0.2, 0)); /* size 100: 2 < 20 */
    y[5] = 51;
    y[6] = 51;
    assert_true(fl_fuzz_valid(z, y, 100, 0.2, 0.2, 1));
    /* NLC's beta 0.8: 204 exactly is inside */
    y[6] = 204;
    assert_true(fl_fuzz_valid(z, y, 100, 0.2, 0.8, 1));
    y[6] = 205;
    assert_false(fl_fuzz_valid(z, y, 100, 0.2, 0.8, 1));
    /* an all-zero reference has size 0 under nonzero_size: always the L-inf branch */
    uint8_t zero[100] = {0}, one[100] = {0};
    one[0] = 1;
    assert_false(fl_fuzz_valid(zero, one, 100, 1.0, 0.0, 1));
    assert_true(fl_fuzz_valid(zero, one, 100, 1.0, 0.0, 0));
}

static void test_dist(void **state) {
    (void)state;
    uint8_t a[4] = {0, 10, 255, 7}, b[4] = {0, 13, 0, 3};
    double l0, l2, linf;
    fl_fuzz_dist(a, b, 4, &l0, &l2, &linf);
    assert_true(l0 == 3);
    assert_true(fabs(l2 - sqrt(9.0 + 255.0 * 255.0 + 16.0) / 255.0) < 1e-12);
    assert_true(linf == 1.0);
    fl_fuzz_dist(a, a, 4, &l0, &l2, &linf);
    assert_true(l0 == 0 && l2 == 0 && linf == 0);
}

enum { MC = 1, MH = 12, MW = 12, MN = MC * MH * MW };

static void ramp(uint8_t *v) {
    for (int i = 0; i < MN; i++) v[i] = (uint8_t)(20 + (i * 7) % 200);
}

static void test_mutate_affine(void **state) {
    (void)state;
    fl_xform_menu m;
    fl_err e = {0};
    assert_int_equal(fl_xform_menu_make(FL_PRESET_DEEPHUNTER, &m, &e), FL_OK);
    uint8_t i0[MN], img[MN], out[MN], ni0[MN], ref[MN];
    ramp(i0);
    memcpy(img, i0, MN);
    img[5] = 0;
    fl_rng r;
    fl_rng_seed(&r, 42);
    fl_xform used;
    /* once affine_used, never an affine one; the reference is left alone */
    for (int i = 0; i < 3000; i++) {
        int au = 1;
        memset(ni0, 0xAB, MN);
        assert_int_equal(fl_fuzz_mutate(&m, img, i0, MC, MH, MW, &au, 1.0, 1.0, 0, 50, &r, out,
                                        ni0, &used, NULL), 1);
        assert_false(fl_xform_is_affine(used.kind));
        assert_int_equal(au, 1);
        for (int j = 0; j < MN; j++) assert_int_equal(ni0[j], 0xAB);
        /* out is used(img) */
        if (used.kind != FL_XF_PIXEL && used.kind != FL_XF_NOISE) {
            apply(used.kind, used.p, used.p2, img, ref, MC, MH, MW);
            assert_memory_equal(out, ref, MN);
        }
    }
    fl_xform_menu_free(&m);
    /* an affine success: out = t(img), new_i0 = t(i0), affine_used = 1 */
    fl_xform rot = {FL_XF_ROTATE, 90, 0};
    fl_xform_menu one = {.n = 1, .v = &rot, .n_affine = 1};
    int au = 0;
    assert_int_equal(fl_fuzz_mutate(&one, img, i0, MC, MH, MW, &au, 1.0, 1.0, 0, 50, &r, out,
                                    ni0, &used, NULL), 1);
    assert_int_equal(au, 1);
    assert_int_equal(used.kind, FL_XF_ROTATE);
    apply(FL_XF_ROTATE, 90, 0, img, ref, MC, MH, MW);
    assert_memory_equal(out, ref, MN);
    apply(FL_XF_ROTATE, 90, 0, i0, ref, MC, MH, MW);
    assert_memory_equal(ni0, ref, MN);
    /* ... and with affine_used set, an affine-only menu has nothing to offer */
    assert_int_equal(fl_fuzz_mutate(&one, img, i0, MC, MH, MW, &au, 1.0, 1.0, 0, 50, &r, out,
                                    ni0, &used, NULL), 0);
    /* an affine pick is checked against t(i0): a translation of an unchanged image is valid
     * however much it moves (against i0 itself it would not be), and the reference moves */
    fl_xform tr = {FL_XF_TRANSLATE, 3, 3};
    fl_xform_menu mt = {.n = 1, .v = &tr, .n_affine = 1};
    au = 0;
    assert_int_equal(fl_fuzz_valid(i0, (fl_xform_apply(&tr, i0, out, MC, MH, MW, &r), out),
                                   (int64_t)MC * MH * MW, 0.02, 0.2, 0), 0);
    assert_int_equal(fl_fuzz_mutate(&mt, i0, i0, MC, MH, MW, &au, 0.02, 0.2, 0, 50, &r, out,
                                    ni0, &used, NULL), 1);
    assert_int_equal(au, 1);
    assert_memory_equal(out, ni0, (size_t)MC * MH * MW);
    /* nothing can be valid: alpha 0, beta 0 and transformations that all change the image */
    fl_xform ch[3] = {{FL_XF_BRIGHTNESS, 10, 0}, {FL_XF_CONTRAST, 2, 0}, {FL_XF_ROTATE, 45, 0}};
    fl_xform_menu mc = {.n = 3, .v = ch, .n_affine = 0};
    au = 0;
    assert_int_equal(fl_fuzz_mutate(&mc, img, i0, MC, MH, MW, &au, 0, 0, 0, 50, &r, out, ni0,
                                    &used, NULL), 0);
    assert_int_equal(au, 0);
    assert_int_equal(fl_fuzz_mutate(&mc, img, i0, MC, MH, MW, &au, 1, 1, 0, 0, &r, out, ni0,
                                    &used, NULL), 0); /* try_num 0 */
}

/* The kinds picked over many calls where everything is valid. */
static void pick_counts(fl_fuzz_preset pr, int calls, int *cnt) {
    fl_xform_menu m;
    fl_err e = {0};
    assert_int_equal(fl_xform_menu_make(pr, &m, &e), FL_OK);
    uint8_t i0[MN], out[MN], ni0[MN];
    ramp(i0);
    fl_rng r;
    fl_rng_seed(&r, 77);
    memset(cnt, 0, sizeof(int) * FL_XF_COUNT_);
    for (int i = 0; i < calls; i++) {
        int au = 0;
        fl_xform used;
        assert_int_equal(fl_fuzz_mutate(&m, i0, i0, MC, MH, MW, &au, 1.0, 1.0, 0, 50, &r, out,
                                        ni0, &used, NULL), 1);
        cnt[used.kind]++;
    }
    fl_xform_menu_free(&m);
}

static void test_mutate_pick(void **state) {
    (void)state;
    int cnt[FL_XF_COUNT_];
    /* DeepHunter: a kind uniformly (9 kinds), then a parameter */
    pick_counts(FL_PRESET_DEEPHUNTER, 9000, cnt);
    for (int k = 0; k < FL_XF_GAUSS; k++)
        if (cnt[k] < 850 || cnt[k] > 1150) fail_msg("deephunter: kind %d picked %d / 9000", k, cnt[k]);
    /* NeuraL-Coverage: uniform over its 95 entries, 60 of them rotations */
    pick_counts(FL_PRESET_NLC, 9500, cnt);
    if (cnt[FL_XF_ROTATE] < 5600 || cnt[FL_XF_ROTATE] > 6400)
        fail_msg("nlc: rotate picked %d / 9500", cnt[FL_XF_ROTATE]);
    if (cnt[FL_XF_SCALE] < 280 || cnt[FL_XF_SCALE] > 520)
        fail_msg("nlc: scale picked %d / 9500", cnt[FL_XF_SCALE]);
}

static uint64_t mutate_digest(uint64_t seed, fl_fuzz_preset pr) {
    fl_xform_menu m;
    fl_err e = {0};
    assert_int_equal(fl_xform_menu_make(pr, &m, &e), FL_OK);
    uint8_t i0[MN], img[MN], out[MN], ni0[MN];
    ramp(i0);
    memcpy(img, i0, MN);
    fl_rng r;
    fl_rng_seed(&r, seed);
    uint64_t hsh = FL_FNV_BASIS;
    int au = 0;
    for (int i = 0; i < 300; i++) {
        fl_xform used = {0};
        int ok = fl_fuzz_mutate(&m, img, i0, MC, MH, MW, &au, 0.02, 0.2, pr == FL_PRESET_NLC,
                                50, &r, out, ni0, &used, NULL);
        uint8_t what = (uint8_t)(ok * 16 + (int)used.kind);
        hsh = fl_fnv1a(hsh, &what, 1);
        if (ok) {
            hsh = fl_fnv1a(hsh, out, MN);
            if (au && fl_xform_is_affine(used.kind)) memcpy(i0, ni0, MN);
            memcpy(img, out, MN);
        }
    }
    fl_xform_menu_free(&m);
    return hsh;
}

static void test_mutate_deterministic(void **state) {
    (void)state;
    for (int pr = 0; pr < 2; pr++) {
        assert_true(mutate_digest(5, (fl_fuzz_preset)pr) == mutate_digest(5, (fl_fuzz_preset)pr));
        assert_true(mutate_digest(5, (fl_fuzz_preset)pr) != mutate_digest(6, (fl_fuzz_preset)pr));
    }
}

/* A memo only saves work: the same mutants, the same random stream, for a pair where most
 * picks are invalid (img already 30 levels away from i0 in places), with and without an
 * affine step left; and it did learn something (entries known invalid). */
static void test_mutate_memo(void **state) {
    (void)state;
    fl_xform_menu m;
    fl_err e = {0};
    assert_int_equal(fl_xform_menu_make(FL_PRESET_DEEPHUNTER, &m, &e), FL_OK);
    uint8_t i0[MN], img[MN], a[MN], b[MN], na[MN], nb[MN];
    ramp(i0);
    for (int i = 0; i < MN; i++) img[i] = (uint8_t)(i0[i] + (i % 3 ? 30 : 0));
    for (int aff = 0; aff < 2; aff++) {
        fl_fuzz_memo memo;
        fl_fuzz_memo_init(&memo, img, i0, MN, 0);
        fl_rng r1, r2;
        fl_rng_seed(&r1, 9);
        fl_rng_seed(&r2, 9);
        int oks = 0;
        for (int k = 0; k < 64; k++) {
            int au1 = aff, au2 = aff;
            fl_xform u1 = {0}, u2 = {0};
            int ok1 = fl_fuzz_mutate(&m, img, i0, MC, MH, MW, &au1, 0.02, 0.2, 0, 50, &r1, a, na,
                                     &u1, NULL);
            int ok2 = fl_fuzz_mutate(&m, img, i0, MC, MH, MW, &au2, 0.02, 0.2, 0, 50, &r2, b, nb,
                                     &u2, &memo);
            assert_int_equal(ok1, ok2);
            assert_int_equal(au1, au2);
            assert_true(fl_rng_u64(&r1) == fl_rng_u64(&r2));
            if (!ok1) continue;
            oks++;
            assert_memory_equal(&u1, &u2, sizeof u1);
            assert_memory_equal(a, b, MN);
            if (au1 && !aff) assert_memory_equal(na, nb, MN);
        }
        assert_true(oks > 0);
        assert_true(memo.bad[0] | memo.bad[1] | memo.bad[2] | memo.bad[3]);
    }
    fl_xform_menu_free(&m);
    /* a pointwise random kind checked while it is made: when invalid (speckle on a ramp) it
     * stops early yet leaves the stream where a full apply leaves it; when valid (noise 1)
     * its image is the full apply's */
    const fl_xform nk[2] = {{FL_XF_NOISE, 3, 1}, {FL_XF_NOISE, 1, 0.316228f}};
    for (int k = 0; k < 2; k++) {
        fl_xform_menu one = {.n = 1, .v = (fl_xform *)&nk[k], .n_affine = 0};
        fl_rng r1, r2;
        fl_rng_seed(&r1, 3);
        fl_rng_seed(&r2, 3);
        int au = 1;
        fl_xform u;
        int ok = fl_fuzz_mutate(&one, i0, i0, MC, MH, MW, &au, 0.02, 0.2, 0, 1, &r1, a, na, &u,
                                NULL);
        fl_rng_below(&r2, 1); /* the pick */
        fl_xform_apply(&nk[k], i0, b, MC, MH, MW, &r2);
        assert_int_equal(ok, k == 1);
        assert_int_equal(fl_fuzz_valid(i0, b, MN, 0.02, 0.2, 0), ok);
        if (ok) assert_memory_equal(a, b, MN);
        assert_true(fl_rng_u64(&r1) == fl_rng_u64(&r2));
    }
}

static void test_random_kinds(void **state) {
    (void)state;
    enum { C = 3, H = 10, W = 10, N = C * H * W, P = H * W };
    uint8_t s[N], a[N], b[N];
    memset(s, 128, N);
    const fl_xform rk[] = {{FL_XF_PIXEL, 5, 0},   {FL_XF_NOISE, 1, 3},   {FL_XF_NOISE, 2, 0.1f},
                           {FL_XF_NOISE, 3, 0.2f}, {FL_XF_GAUSS, 10, 0}};
    for (size_t i = 0; i < sizeof rk / sizeof rk[0]; i++) {
        fl_rng r;
        fl_rng_seed(&r, 100);
        fl_xform_apply(&rk[i], s, a, C, H, W, &r);
        fl_rng_seed(&r, 100);
        fl_xform_apply(&rk[i], s, b, C, H, W, &r);
        assert_memory_equal(a, b, N);
        assert_memory_not_equal(a, s, N);
        fl_rng_seed(&r, 101);
        fl_xform_apply(&rk[i], s, b, C, H, W, &r);
        assert_memory_not_equal(a, b, N);
    }
    /* pixel: at most 5 positions changed, all channels of each */
    fl_rng r;
    fl_rng_seed(&r, 3);
    fl_xform px = {FL_XF_PIXEL, 5, 0};
    fl_xform_apply(&px, s, a, C, H, W, &r);
    int moved = 0;
    for (int p = 0; p < P; p++) {
        int any = 0;
        for (int ch = 0; ch < C; ch++) any |= a[ch * P + p] != 128;
        moved += any;
    }
    assert_true(moved >= 1 && moved <= 5);
    /* salt and pepper: ceil(0.1 * 100 / 2) = 5 of each, whole pixels, only 0 / 255 */
    fl_xform sp = {FL_XF_NOISE, 2, 0.1f};
    fl_xform_apply(&sp, s, a, C, H, W, &r);
    int salt = 0, pepper = 0;
    for (int p = 0; p < P; p++) {
        assert_true(a[p] == 0 || a[p] == 128 || a[p] == 255);
        for (int ch = 1; ch < C; ch++) assert_int_equal(a[ch * P + p], a[p]);
        salt += a[p] == 255;
        pepper += a[p] == 0;
    }
    assert_true(salt >= 1 && salt <= 5 && pepper >= 1 && pepper <= 5);
    /* the deterministic kinds do not touch the generator */
    fl_rng_seed(&r, 8);
    fl_rng before = r;
    const fl_xform det[] = {{FL_XF_ROTATE, 30, 0}, {FL_XF_BLUR, 10, 0}, {FL_XF_CONTRAST, 1.1f, 0},
                            {FL_XF_SCALE, 0.9f, 0}};
    for (size_t i = 0; i < sizeof det / sizeof det[0]; i++) fl_xform_apply(&det[i], s, a, C, H, W, &r);
    assert_memory_equal(&r, &before, sizeof r);
    /* Gaussian noise clips: sigma 1000 on mid grey gives mostly 0 and 255 */
    fl_xform g = {FL_XF_GAUSS, 1000, 0};
    fl_xform_apply(&g, s, a, C, H, W, &r);
    int ext = 0;
    for (int i = 0; i < N; i++) ext += a[i] == 0 || a[i] == 255;
    assert_true(ext > N * 8 / 10);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),          cmocka_unit_test(test_translate),
        cmocka_unit_test(test_rotate90),       cmocka_unit_test(test_identities),
        cmocka_unit_test(test_scale_shear),    cmocka_unit_test(test_contrast_brightness),
        cmocka_unit_test(test_blur),           cmocka_unit_test(test_str_parse),
        cmocka_unit_test(test_menus),          cmocka_unit_test(test_valid),
        cmocka_unit_test(test_dist),           cmocka_unit_test(test_mutate_affine),
        cmocka_unit_test(test_mutate_pick),    cmocka_unit_test(test_mutate_deterministic),
        cmocka_unit_test(test_mutate_memo),
        cmocka_unit_test(test_random_kinds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
