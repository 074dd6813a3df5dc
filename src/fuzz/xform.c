/* DeepHunter's image transformations on 8-bit [c,h,w] images, their text form, the two
 * presets' parameter menus, the validity constraint and Mutate(I). docs/nn-fuzz.md
 * ("Transformations") lists every kind and where flare departs from OpenCV / DeepHunter /
 * NeuraL-Coverage. Nothing here allocates except fl_xform_menu_make. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/fuzz.h"
#include "fuzz/xform_int.h"

static const char *const k_names[FL_XF_COUNT_] = {
    "translate", "scale", "shear", "rotate", "contrast",
    "brightness", "blur", "pixel", "noise", "gauss",
};

const char *fl_xform_name(fl_xform_kind k) {
    return (unsigned)k < FL_XF_COUNT_ ? k_names[k] : "?";
}

/* translate and noise carry two numbers, the others one */
static int two_params(fl_xform_kind k) { return k == FL_XF_TRANSLATE || k == FL_XF_NOISE; }

/* The shortest of %.6g / %.9g that reads back as the same float. */
static void fmt_num(float v, char *buf, size_t n) {
    snprintf(buf, n, "%.6g", (double)v);
    if (strtof(buf, NULL) != v) snprintf(buf, n, "%.9g", (double)v);
}

const char *fl_xform_str(const fl_xform *t, char *buf, size_t n) {
    if (!buf || n == 0) return buf;
    char a[32], b[32];
    fmt_num(t->p, a, sizeof a);
    if (two_params(t->kind)) {
        fmt_num(t->p2, b, sizeof b);
        snprintf(buf, n, "%s:%s,%s", fl_xform_name(t->kind), a, b);
    } else {
        snprintf(buf, n, "%s:%s", fl_xform_name(t->kind), a);
    }
    return buf;
}

fl_status fl_xform_parse(const char *s, fl_xform *out, fl_err *e) {
    if (!s) return fl_fail(e, FL_ERR_ARG, "transformation: NULL");
    const char *colon = strchr(s, ':');
    if (!colon)
        return fl_fail(e, FL_ERR_ARG, "transformation '%s': expected NAME:VALUE", s);
    size_t len = (size_t)(colon - s);
    int kind = -1;
    for (int k = 0; k < FL_XF_COUNT_; k++)
        if (strlen(k_names[k]) == len && strncmp(s, k_names[k], len) == 0) kind = k;
    if (kind < 0)
        return fl_fail(e, FL_ERR_ARG,
                       "transformation '%s': unknown name (translate, scale, shear, rotate, "
                       "contrast, brightness, blur, pixel, noise, gauss)", s);
    double v[2] = {0, 0};
    int want = two_params((fl_xform_kind)kind) ? 2 : 1;
    const char *p = colon + 1;
    for (int i = 0; i < want; i++) {
        char *end;
        errno = 0;
        v[i] = strtod(p, &end);
        if (end == p || errno == ERANGE || !isfinite(v[i]) || fabs(v[i]) > 3.0e38)
            return fl_fail(e, FL_ERR_ARG, "transformation '%s': value %d is not a finite number",
                           s, i + 1);
        p = end;
        if (i + 1 < want) {
            if (*p != ',')
                return fl_fail(e, FL_ERR_ARG, "transformation '%s': %s takes two values (A,B)",
                               s, k_names[kind]);
            p++;
        }
    }
    if (*p)
        return fl_fail(e, FL_ERR_ARG, "transformation '%s': unexpected '%s' after the value%s",
                       s, p, want == 2 ? "s" : "");
    const char *bad = NULL;
    switch ((fl_xform_kind)kind) {
    case FL_XF_SCALE: if (!(v[0] > 0)) bad = "the factor must be > 0"; break;
    case FL_XF_BLUR: if (!fl_whole(v[0], 1, 10)) bad = "the kernel id must be 1..10"; break;
    case FL_XF_PIXEL: if (!fl_whole(v[0], 0, 1e9)) bad = "the pixel count must be 0..1e9"; break;
    case FL_XF_NOISE:
        if (!fl_whole(v[0], 1, 3)) bad = "the noise kind must be 1, 2 or 3";
        else if (v[1] < 0) bad = "sigma / ratio must be >= 0";
        else if (v[0] == 2 && v[1] > 1) bad = "the salt-and-pepper ratio must be 0..1";
        break;
    case FL_XF_GAUSS: if (v[0] < 0) bad = "sigma must be >= 0"; break;
    default: break;
    }
    if (bad) return fl_fail(e, FL_ERR_ARG, "transformation '%s': %s", s, bad);
    out->kind = (fl_xform_kind)kind;
    out->p = (float)v[0];
    out->p2 = want == 2 ? (float)v[1] : 0.0f;
    return FL_OK;
}

/* ---- affine: dst(x, y) = src(A (x, y) + b), bilinear, zero outside ------------------------
 * Pixel centres sit at integer coordinates; the centre of rotation, scale and shear is the
 * image's centre ((w-1)/2, (h-1)/2). A neighbour outside the image counts as 0, as
 * warpAffine's BORDER_CONSTANT does. */
typedef struct affine_map {
    double a00, a01, b0, a10, a11, b1;
} affine_map;

static double snap(double v) {
    double r = nearbyint(v);
    return fabs(v - r) < 1e-9 ? r : v;
}

static void warp(const affine_map *m, const uint8_t *src, uint8_t *dst, int c, int h, int w) {
    size_t plane = (size_t)h * w;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            size_t o = (size_t)y * w + x;
            double fx = snap(m->a00 * x + m->a01 * y + m->b0);
            double fy = snap(m->a10 * x + m->a11 * y + m->b1);
            if (!(fx > -1.0 && fx < (double)w && fy > -1.0 && fy < (double)h)) {
                for (int ch = 0; ch < c; ch++) dst[ch * plane + o] = 0;
                continue;
            }
            int x0 = (int)floor(fx), y0 = (int)floor(fy);
            double ax = fx - x0, ay = fy - y0;
            double wt[4] = {(1 - ax) * (1 - ay), ax * (1 - ay), (1 - ax) * ay, ax * ay};
            int ok[4] = {x0 >= 0 && y0 >= 0, x0 + 1 < w && y0 >= 0, x0 >= 0 && y0 + 1 < h,
                         x0 + 1 < w && y0 + 1 < h};
            /* the 4 neighbours are base, base + 1, base + w, base + w + 1; read where ok[] */
            ptrdiff_t base = (ptrdiff_t)y0 * w + x0;
            for (int ch = 0; ch < c; ch++) {
                const uint8_t *s = src + ch * plane;
                double v = 0;
                if (ok[0]) v += wt[0] * s[base];
                if (ok[1]) v += wt[1] * s[base + 1];
                if (ok[2]) v += wt[2] * s[base + w];
                if (ok[3]) v += wt[3] * s[base + w + 1];
                dst[ch * plane + o] = fl_xform__u8(v);
            }
        }
}

/* sin and cos of an angle in degrees, exact at multiples of 90 */
static void sincos_deg(double deg, double *s, double *c) {
    double q = deg / 90.0;
    if (q == floor(q) && fabs(q) < 1e9) {
        static const double S[4] = {0, 1, 0, -1}, C[4] = {1, 0, -1, 0};
        int i = (int)fmod(q, 4.0);
        if (i < 0) i += 4;
        *s = S[i];
        *c = C[i];
        return;
    }
    double r = deg * (3.14159265358979323846 / 180.0);
    *s = sin(r);
    *c = cos(r);
}

static void affine_of(const fl_xform *t, int h, int w, affine_map *m) {
    double cx = (w - 1) * 0.5, cy = (h - 1) * 0.5;
    *m = (affine_map){1, 0, 0, 0, 1, 0};
    switch (t->kind) {
    case FL_XF_TRANSLATE: /* dst(x, y) = src(x - dx, y - dy) */
        m->b0 = -(double)t->p;
        m->b1 = -(double)t->p2;
        break;
    case FL_XF_SCALE: { /* src = (dst - centre) / s + centre */
        double inv = 1.0 / t->p;
        m->a00 = m->a11 = inv;
        m->b0 = cx - cx * inv;
        m->b1 = cy - cy * inv;
        break;
    }
    case FL_XF_SHEAR: /* src_x = x + p (y - cy): DeepHunter's M = [[1, -p, 0], [0, 1, 0]] */
        m->a01 = t->p;
        m->b0 = -(double)t->p * cy;
        break;
    case FL_XF_ROTATE: { /* the inverse of getRotationMatrix2D(centre, p, 1) */
        double s, c;
        sincos_deg(t->p, &s, &c);
        m->a00 = c;
        m->a01 = -s;
        m->b0 = cx - c * cx + s * cy;
        m->a10 = s;
        m->a11 = c;
        m->b1 = cy - s * cx - c * cy;
        break;
    }
    default: break;
    }
}

/* ---- apply ------------------------------------------------------------------------------- */
/* The kinds whose every value depends on its own source value only (and, for the random ones,
 * on one normal draw per value, in order). */
static int pointwise(const fl_xform *t) {
    switch (t->kind) {
    case FL_XF_CONTRAST:
    case FL_XF_BRIGHTNESS:
    case FL_XF_GAUSS: return 1;
    case FL_XF_NOISE: return t->p == 1 || t->p == 3;
    default: return 0;
    }
}

/* One value of a pointwise kind. */
static inline uint8_t point(fl_xform_kind k, double p, double p2, uint8_t v, fl_rng *r) {
    switch (k) {
    case FL_XF_CONTRAST: return fl_xform__u8(v * p);
    case FL_XF_BRIGHTNESS: return fl_xform__u8(v + p);
    case FL_XF_GAUSS: return fl_xform__u8(v + p * fl_rng_normal(r));
    default: /* noise 1 and 3 */
        return fl_xform__u8(p == 1 ? v + p2 * fl_rng_normal(r) : v + v * p2 * fl_rng_normal(r));
    }
}

void fl_xform_apply(const fl_xform *t, const uint8_t *src, uint8_t *dst, int c, int h, int w,
                    fl_rng *r) {
    if (c <= 0 || h <= 0 || w <= 0) return;
    size_t plane = (size_t)h * w, n = plane * (size_t)c;
    double p = t->p, p2 = t->p2;
    switch (t->kind) {
    case FL_XF_TRANSLATE:
    case FL_XF_SCALE:
    case FL_XF_SHEAR:
    case FL_XF_ROTATE: {
        if (t->kind == FL_XF_SCALE && !(p > 0)) break;
        affine_map m;
        affine_of(t, h, w, &m);
        warp(&m, src, dst, c, h, w);
        return;
    }
    case FL_XF_CONTRAST:
    case FL_XF_BRIGHTNESS:
    case FL_XF_GAUSS:
        for (size_t i = 0; i < n; i++) dst[i] = point(t->kind, p, p2, src[i], r);
        return;
    case FL_XF_BLUR:
        fl_xform__blur(p == floor(p) && p >= 1 && p <= 10 ? (int)p : 0, src, dst, c, h, w);
        return;
    case FL_XF_PIXEL: {
        memcpy(dst, src, n);
        if (!(p >= 1) || plane > UINT32_MAX) return;
        int64_t k = p > 1e9 ? (int64_t)1e9 : (int64_t)p;
        for (int64_t i = 0; i < k; i++) {
            size_t pos = fl_rng_below(r, (uint32_t)plane);
            for (int ch = 0; ch < c; ch++) dst[ch * plane + pos] = (uint8_t)fl_rng_below(r, 256);
        }
        return;
    }
    case FL_XF_NOISE:
        if (p == 1 || p == 3) {
            for (size_t i = 0; i < n; i++) dst[i] = point(t->kind, p, p2, src[i], r);
            return;
        }
        if (p == 2) {
            memcpy(dst, src, n);
            if (!(p2 > 0) || plane > UINT32_MAX) return;
            /* ceil(ratio * pixels / 2) of each, as DeepHunter's ceil(amount * size * 0.5);
             * the slack keeps a float ratio such as 0.1f (0.10000000149) from adding one */
            double x = (p2 > 1 ? 1 : p2) * (double)plane * 0.5, half = ceil(x - 1e-6 * x);
            for (int pass = 0; pass < 2; pass++) { /* salt 255, then pepper 0 */
                uint8_t v = pass == 0 ? 255 : 0;
                for (int64_t i = 0; i < (int64_t)half; i++) {
                    size_t pos = fl_rng_below(r, (uint32_t)plane);
                    for (int ch = 0; ch < c; ch++) dst[ch * plane + pos] = v;
                }
            }
            return;
        }
        break;
    default: break;
    }
    memcpy(dst, src, n); /* unknown kind or parameter: identity */
}

/* ---- menus ------------------------------------------------------------------------------- */
#define DH_N (6 + 5 + 12 + 100 + 8 + 40 + 9 + 9 + 3)
#define NLC_N (7 + 4 + 60 + 7 + 7 + 10)

static void put(fl_xform *v, int *n, fl_xform_kind k, double p, double p2) {
    v[*n] = (fl_xform){k, (float)p, (float)p2};
    (*n)++;
}

fl_status fl_xform_menu_make(fl_fuzz_preset preset, fl_xform_menu *out, fl_err *e) {
    memset(out, 0, sizeof *out);
    int cap = preset == FL_PRESET_DEEPHUNTER ? DH_N : preset == FL_PRESET_NLC ? NLC_N : 0;
    if (!cap) return fl_fail(e, FL_ERR_ARG, "transformation menu: unknown preset %d", (int)preset);
    fl_xform *v = malloc(sizeof *v * (size_t)cap);
    if (!v) return fl_fail(e, FL_ERR_NOMEM, "transformation menu: out of memory");
    int n = 0, na;
    if (preset == FL_PRESET_DEEPHUNTER) {
        /* DeepHunter's mutators.py: params lists, same translation on both axes */
        for (int k = -3; k < 3; k++) put(v, &n, FL_XF_TRANSLATE, k, k);
        for (int k = 7; k < 12; k++) put(v, &n, FL_XF_SCALE, k / 10.0, 0);
        for (int k = -6; k < 6; k++) put(v, &n, FL_XF_SHEAR, k / 10.0, 0);
        for (int k = -50; k < 50; k++) put(v, &n, FL_XF_ROTATE, k, 0);
        na = n;
        for (int k = 5; k < 13; k++) put(v, &n, FL_XF_CONTRAST, k / 10.0, 0);
        for (int k = -20; k < 20; k++) put(v, &n, FL_XF_BRIGHTNESS, k, 0);
        for (int k = 1; k < 10; k++) put(v, &n, FL_XF_BLUR, k, 0);
        for (int k = 1; k < 10; k++) put(v, &n, FL_XF_PIXEL, k, 0);
        put(v, &n, FL_XF_NOISE, 1, 0.316228); /* var 0.1: sigma sqrt(0.1) */
        put(v, &n, FL_XF_NOISE, 2, 0.004);    /* amount 0.004, half salt, half pepper */
        put(v, &n, FL_XF_NOISE, 3, 1);        /* v + v * randn */
        out->by_kind = 1;                     /* random.sample(classes), then a parameter */
    } else {
        /* NeuraL-Coverage's fuzz.py: G = translation + scale + rotation, P = contrast +
         * brightness + blur (shear commented out, no noise, no pixel change) */
        static const int tr[7][2] = {{-5, -5}, {-5, 0}, {0, -5}, {0, 0}, {5, 0}, {0, 5}, {5, 5}};
        for (int k = 0; k < 7; k++) put(v, &n, FL_XF_TRANSLATE, tr[k][0], tr[k][1]);
        for (int k = 0; k < 4; k++) put(v, &n, FL_XF_SCALE, (80 + 5 * k) / 100.0, 0);
        for (int k = -30; k < 30; k++) put(v, &n, FL_XF_ROTATE, k, 0);
        na = n;
        for (int k = 0; k < 7; k++) put(v, &n, FL_XF_CONTRAST, (8 + 2 * k) / 10.0, 0);
        for (int k = 0; k < 7; k++) put(v, &n, FL_XF_BRIGHTNESS, 10 + 10 * k, 0);
        for (int k = 1; k <= 10; k++) put(v, &n, FL_XF_BLUR, k, 0);
        out->by_kind = 0; /* randomPick: uniform over the flat list */
    }
    out->v = v;
    out->n = n;
    out->n_affine = na;
    return FL_OK;
}

void fl_xform_menu_free(fl_xform_menu *m) {
    if (!m) return;
    free(m->v);
    memset(m, 0, sizeof *m);
}

/* ---- validity, mutate, distances --------------------------------------------------------- */
static int64_t valid_size(const uint8_t *i0, int64_t n, int nonzero_size) {
    if (!nonzero_size) return n;
    int64_t size = 0;
    for (int64_t i = 0; i < n; i++) size += i0[i] != 0;
    return size;
}

/* The constraint with its size known. It stops at the first value that makes x invalid for
 * sure: L0 has reached alpha * size and L-inf is past beta * 255 (with a hair of slack so
 * that "exactly beta * 255", 0.2 * 255 = 51, is inside). */
static int valid_sized(const uint8_t *i0, const uint8_t *x, int64_t n, int64_t size,
                       double alpha, double beta) {
    const double l0_max = alpha * (double)size, linf_max = beta * 255.0 + 1e-9;
    int64_t l0 = 0;
    int linf = 0;
    for (int64_t i = 0; i < n; i++) {
        int d = (int)x[i] - (int)i0[i];
        if (d < 0) d = -d;
        if (!d) continue;
        l0++;
        if (d > linf) linf = d;
        if ((double)linf > linf_max && (double)l0 >= l0_max) return 0;
    }
    if ((double)l0 < l0_max) return 1; /* L-inf <= 255 always holds */
    return (double)linf <= linf_max;
}

int fl_fuzz_valid(const uint8_t *i0, const uint8_t *x, int64_t n, double alpha, double beta,
                  int nonzero_size) {
    return valid_sized(i0, x, n, valid_size(i0, n, nonzero_size), alpha, beta);
}

/* out = t(img) for a pointwise t, checked against i0 as it is made: 1 when valid. An invalid
 * result is known before the last value when L0 and L-inf are both past their bounds; then
 * the rest of out is not computed, but the random draws it would have made are still taken
 * (two 64-bit draws per normal), so the stream goes on as after a full apply. */
static int pointwise_valid(const fl_xform *t, const uint8_t *img, const uint8_t *i0,
                           uint8_t *out, int64_t n, int64_t size, double alpha, double beta,
                           fl_rng *r) {
    const double l0_max = alpha * (double)size, linf_max = beta * 255.0 + 1e-9;
    const double p = t->p, p2 = t->p2;
    const int random = t->kind != FL_XF_CONTRAST && t->kind != FL_XF_BRIGHTNESS;
    int64_t l0 = 0;
    int linf = 0;
    for (int64_t i = 0; i < n; i++) {
        out[i] = point(t->kind, p, p2, img[i], r);
        int d = (int)out[i] - (int)i0[i];
        if (d < 0) d = -d;
        if (!d) continue;
        l0++;
        if (d > linf) linf = d;
        if ((double)linf > linf_max && (double)l0 >= l0_max) {
            for (int64_t j = i + 1; random && j < n; j++) {
                fl_rng_u64(r);
                fl_rng_u64(r);
            }
            return 0;
        }
    }
    if ((double)l0 < l0_max) return 1;
    return (double)linf <= linf_max;
}

void fl_fuzz_memo_init(fl_fuzz_memo *m, const uint8_t *img, const uint8_t *i0, int64_t n,
                       int nonzero_size) {
    memset(m, 0, sizeof *m);
    m->img = img;
    m->i0 = i0;
    m->same = img == i0 || memcmp(img, i0, (size_t)n) == 0;
    m->size = valid_size(i0, n, nonzero_size);
}

/* The kinds whose image depends on the source only (fl_xform_apply draws nothing). */
static int draws(fl_xform_kind k) {
    return k == FL_XF_PIXEL || k == FL_XF_NOISE || k == FL_XF_GAUSS;
}

/* The allowed part [lo, n) of a menu, by kind: how many entries each kind has there and,
 * when they sit side by side (as in the presets' menus), where they start. Made once per
 * Mutate call, so that a pick does not walk the menu. */
typedef struct menu_kinds {
    unsigned kinds;              /* bit k: kind k is allowed */
    int n_kinds;
    int count[FL_XF_COUNT_];     /* entries of each kind */
    int first[FL_XF_COUNT_];     /* the first of them */
    uint8_t run[FL_XF_COUNT_];   /* they are first .. first + count - 1 */
} menu_kinds;

static void menu_kinds_of(const fl_xform_menu *m, int lo, menu_kinds *mk) {
    memset(mk, 0, sizeof *mk);
    for (int i = lo; i < m->n; i++) {
        unsigned k = (unsigned)m->v[i].kind;
        if (k >= FL_XF_COUNT_) continue;
        if (!mk->count[k]) {
            mk->first[k] = i;
            mk->run[k] = 1;
        } else if (mk->first[k] + mk->count[k] != i) {
            mk->run[k] = 0;
        }
        mk->count[k]++;
        mk->kinds |= 1u << k;
    }
    mk->n_kinds = __builtin_popcount(mk->kinds);
}

/* Entry of the menu range [lo, n) chosen as the menu says (see fl_xform_menu.by_kind). */
static int pick(const fl_xform_menu *m, int lo, const menu_kinds *mk, fl_rng *r) {
    if (!m->by_kind || mk->n_kinds <= 0) return lo + (int)fl_rng_below(r, (uint32_t)(m->n - lo));
    int kk = (int)fl_rng_below(r, (uint32_t)mk->n_kinds), kind = 0;
    for (kind = 0; kind < FL_XF_COUNT_; kind++)
        if ((mk->kinds >> kind) & 1u) {
            if (kk == 0) break;
            kk--;
        }
    int j = (int)fl_rng_below(r, (uint32_t)mk->count[kind]);
    if (mk->run[kind]) return mk->first[kind] + j;
    for (int i = lo; i < m->n; i++)
        if ((int)m->v[i].kind == kind && j-- == 0) return i;
    return m->n - 1; /* not reached */
}

int fl_fuzz_mutate(const fl_xform_menu *menu, const uint8_t *img, const uint8_t *i0,
                   int c, int h, int w, int *affine_used, double alpha, double beta,
                   int nonzero_size, int try_num, fl_rng *r, uint8_t *out, uint8_t *new_i0,
                   fl_xform *used, fl_fuzz_memo *memo) {
    int lo = *affine_used ? menu->n_affine : 0;
    if (!menu->v || lo < 0 || lo >= menu->n || try_num <= 0) return 0;
    int64_t n = (int64_t)c * h * w;
    fl_fuzz_memo own;
    if (!memo || memo->img != img || memo->i0 != i0) {
        fl_fuzz_memo_init(&own, img, i0, n, nonzero_size);
        memo = &own;
    }
    menu_kinds mk;
    menu_kinds_of(menu, lo, &mk);
    for (int t = 0; t < try_num; t++) {
        const int at = pick(menu, lo, &mk, r);
        const fl_xform *x = &menu->v[at];
        int affine = fl_xform_is_affine(x->kind);
        if (affine && *affine_used) continue; /* a malformed menu: an affine entry after n_affine */
        const int known = at < 256 && !draws(x->kind);
        if (known && (memo->bad[at >> 6] >> (at & 63) & 1u)) continue;
        int ok;
        if (pointwise(x)) { /* never affine */
            ok = pointwise_valid(x, img, i0, out, n, memo->size, alpha, beta, r);
        } else {
            fl_xform_apply(x, img, out, c, h, w, r);
            /* An affine pick moves the reference with the image: the mutant is checked
             * against t(I0), so the constraint bounds the pixel-level change the lineage
             * carries, not the geometry (DeepHunter's released mutate_one does not check
             * affine picks at all). When img is I0, t(I0) is the mutant itself. */
            const uint8_t *ref = i0;
            if (affine) {
                if (memo->same) memcpy(new_i0, out, (size_t)n);
                else fl_xform_apply(x, i0, new_i0, c, h, w, r); /* deterministic: r unused */
                ref = new_i0;
            }
            ok = valid_sized(ref, out, n, memo->size, alpha, beta);
        }
        if (!ok) {
            if (known) memo->bad[at >> 6] |= 1ull << (at & 63);
            continue;
        }
        if (affine) *affine_used = 1;
        if (used) *used = *x;
        return 1;
    }
    return 0;
}

void fl_fuzz_dist(const uint8_t *a, const uint8_t *b, int64_t n, double *l0, double *l2,
                  double *linf) {
    int64_t c0 = 0, s2 = 0;
    int mx = 0;
    for (int64_t i = 0; i < n; i++) {
        int d = (int)a[i] - (int)b[i];
        if (d < 0) d = -d;
        c0 += d != 0;
        s2 += (int64_t)d * d;
        if (d > mx) mx = d;
    }
    if (l0) *l0 = (double)c0;
    if (l2) *l2 = sqrt((double)s2) / 255.0;
    if (linf) *linf = mx / 255.0;
}
