/* Neuron-level criteria: NC (four scalings), KMNC, NBC and SNAC. Definitions and sources in
 * docs/coverage.md. Every comparison is done in double on the float neuron values, with the
 * reference tools' formulas, so that counts match a numpy re-implementation exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/simd.h"
#include "cover_int.h"

/* ---- NC --------------------------------------------------------------------------------------- */
typedef enum { NC_DEEPXPLORE = 0, NC_CHANNEL, NC_MEANABS, NC_NONE } nc_mode;
static const char *const nc_modes[] = {"deepxplore", "channel", "meanabs", "none", NULL};

typedef struct {
    double t;
    nc_mode mode;
} nc_params;

static fl_status nc_init(fl_cover *c, const fl_cover_ctx *ctx, const char *arg, fl_err *e) {
    char buf[128], *part[2];
    int n;
    nc_params *p = calloc(1, sizeof *p);
    if (!p) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    c->params = p;
    p->t = 0.5;
    p->mode = NC_DEEPXPLORE;
    fl_status st = fl_cover__args(c, arg, buf, sizeof buf, part, 2, &n, e);
    if (st == FL_OK && n >= 1) st = fl_cover__num(c, part[0], -1e30, 1e30, &p->t, e);
    if (st == FL_OK && n >= 2) {
        int k = 0;
        while (nc_modes[k] && strcmp(nc_modes[k], part[1]) != 0) k++;
        if (!nc_modes[k])
            return fl_fail(e, FL_ERR_ARG,
                           "coverage criterion '%s': unknown scaling '%s' (deepxplore, channel, "
                           "meanabs or none)",
                           c->spec, part[1]);
        p->mode = (nc_mode)k;
    }
    if (st != FL_OK) return st;
    c->needs = p->mode == NC_DEEPXPLORE ? FL_COVER_NEED_RANGE
               : p->mode == NC_MEANABS  ? FL_COVER_NEED_ABSMEAN
                                        : 0;
    return fl_cover_layout(c, ctx->ls->n, FL_LAYER_NAMES(ctx->ls), ctx->ls->width, e);
}

static fl_status nc_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, fl_err *e) {
    (void)e;
    const nc_params *p = c->params;
    const fl_layerset *ls = c->ctx.ls;
    int64_t T = ls->total;
    double t = p->t;
    for (int i = 0; i < b->n; i++) {
        int new = 0;
        for (int l = 0; l < ls->n; l++) {
            int64_t off = ls->offset[l], w = ls->width[l];
            const float *v = (p->mode == NC_MEANABS ? b->absmean : b->mean) + i * T + off;
            double lo = 0, range = 1; /* scaled = (v - lo) / range */
            if (p->mode == NC_DEEPXPLORE) {
                lo = b->lmin[i * ls->n + l];
                range = (double)b->lmax[i * ls->n + l] - lo;
            } else if (p->mode == NC_CHANNEL || p->mode == NC_MEANABS) {
                float mn = v[0], mx = v[0];
                for (int64_t j = 1; j < w; j++) {
                    mn = v[j] < mn ? v[j] : mn;
                    mx = v[j] > mx ? v[j] : mx;
                }
                lo = p->mode == NC_CHANNEL ? mn : 0;
                range = (double)mx - lo;
            }
            /* A constant layer (zero range) scales to 0/0 in the reference tools: NaN, which
             * is never above the threshold. */
            if (!(range > 0)) continue;
            if (p->mode == NC_NONE) {
                for (int64_t j = 0; j < w; j++)
                    if (!fl_cover_is_hit(c, off + j) && (double)v[j] > t)
                        new |= fl_cover_hit(c, off + j);
            } else {
                for (int64_t j = 0; j < w; j++)
                    if (!fl_cover_is_hit(c, off + j) && ((double)v[j] - lo) / range > t)
                        new |= fl_cover_hit(c, off + j);
            }
        }
        added[i] = (uint8_t)new;
    }
    return FL_OK;
}

const fl_cover_ops fl_cover_nc = {"nc", "nc[:T[:deepxplore|channel|meanabs|none]]",
                                  FL_COVER_NEED_RANGE, nc_init, nc_update, NULL};

/* ---- profile-based: KMNC, NBC, SNAC ------------------------------------------------------------ */
typedef struct {
    int64_t k;
    double *lo, *hi; /* [total] KMNC: training min/max (+inf/-inf for a constant neuron, which
                        no value falls between) */
    double *unit;    /* [total] KMNC section width (hi - lo) / k (1 for a constant neuron) */
    int64_t *base;   /* [total] KMNC: first item of the neuron's sections */
    float *lof, *hif; /* [total] NBC/SNAC: the σ-extended bounds as floats, rounded inwards so
                         that for a float x, x < lof <=> x < lo and x > hif <=> x > hi */
} bound_params;

static void bound_free(void *pp) {
    bound_params *p = pp;
    if (!p) return;
    free(p->lo), free(p->hi), free(p->unit), free(p->base), free(p->lof), free(p->hif);
    free(p);
}

typedef enum { B_KMNC, B_NBC, B_SNAC } bound_kind;

/* The largest float <= v / the smallest float >= v. */
static float float_down(double v) {
    float f = (float)v;
    return (double)f > v ? nextafterf(f, -INFINITY) : f;
}
static float float_up(double v) {
    float f = (float)v;
    return (double)f < v ? nextafterf(f, INFINITY) : f;
}

static fl_status bound_init(fl_cover *c, const fl_cover_ctx *ctx, const char *arg,
                            bound_kind kind, fl_err *e) {
    const fl_layerset *ls = ctx->ls;
    const fl_profile *pr = ctx->profile;
    char buf[64], *part[1];
    int n;
    double sigma = 0;
    int64_t k = 1000;
    fl_status st = fl_cover__args(c, arg, buf, sizeof buf, part, 1, &n, e);
    if (st == FL_OK && n == 1)
        st = kind == B_KMNC ? fl_cover__int(c, part[0], 1, 1000000000, &k, e)
                            : fl_cover__num(c, part[0], 0, 1e6, &sigma, e);
    if (st != FL_OK) return st;
    if (!pr)
        return fl_fail(e, FL_ERR_ARG,
                       "coverage criterion '%s' needs a training profile (`flare nn profile`, "
                       "then --profile)",
                       c->spec);
    st = fl_profile_match(pr, ls, e);
    if (st != FL_OK) return st;
    if (pr->count <= 0)
        return fl_fail(e, FL_ERR_ARG, "coverage criterion '%s': the profile has seen no input",
                       c->spec);
    size_t T = (size_t)ls->total;
    bound_params *p = calloc(1, sizeof *p);
    if (p) {
        c->params = p;
        p->k = k;
        if (kind == B_KMNC) {
            p->lo = malloc(sizeof(double) * T);
            p->hi = malloc(sizeof(double) * T);
            p->unit = malloc(sizeof(double) * T);
            p->base = malloc(sizeof(int64_t) * T);
        } else {
            p->lof = malloc(sizeof(float) * T);
            p->hif = malloc(sizeof(float) * T);
        }
    }
    int64_t *items = malloc(sizeof(int64_t) * (size_t)ls->n);
    if (!p || !items ||
        (kind == B_KMNC ? !p->lo || !p->hi || !p->unit || !p->base : !p->lof || !p->hif) ||
        (kind == B_KMNC && fl_cover_scratch(c, sizeof(int32_t) * T, e) != FL_OK)) {
        free(items);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory for '%s'", c->spec);
    }
    int64_t next = 0;
    for (int l = 0; l < ls->n; l++) {
        int64_t first = next;
        for (int64_t j = ls->offset[l]; j < ls->offset[l] + ls->width[l]; j++) {
            if (kind == B_KMNC) {
                /* A neuron constant on the training set has no sections (DeepGauge's width
                 * (high - low) / k is 0): it is left out of KMNC's total. */
                int varies = pr->max[j] > pr->min[j];
                p->lo[j] = varies ? pr->min[j] : INFINITY;
                p->hi[j] = varies ? pr->max[j] : -INFINITY;
                p->unit[j] = varies ? ((double)pr->max[j] - pr->min[j]) / (double)k : 1;
                p->base[j] = next;
                if (varies) next += k;
            } else {
                p->lof[j] = float_up((double)pr->min[j] - sigma * pr->std[j]);
                p->hif[j] = float_down((double)pr->max[j] + sigma * pr->std[j]);
            }
        }
        items[l] = kind == B_KMNC ? next - first : ls->width[l] * (kind == B_NBC ? 2 : 1);
    }
    st = fl_cover_layout(c, ls->n, FL_LAYER_NAMES(ls), items, e);
    free(items);
    return st;
}

static fl_status kmnc_init(fl_cover *c, const fl_cover_ctx *x, const char *a, fl_err *e) {
    return bound_init(c, x, a, B_KMNC, e);
}
static fl_status nbc_init(fl_cover *c, const fl_cover_ctx *x, const char *a, fl_err *e) {
    return bound_init(c, x, a, B_NBC, e);
}
static fl_status snac_init(fl_cover *c, const fl_cover_ctx *x, const char *a, fl_err *e) {
    return bound_init(c, x, a, B_SNAC, e);
}

/* sec[j] = the section of x[j], or -1 outside [lo, hi]. DeepHunter's index: int((x - lo) /
 * unit), the top edge folded into section k-1. Four neurons at a time in GCC vectors (the
 * same double arithmetic as the scalar tail: subtraction, division, truncation). */
typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4l __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

FL_HOT_CLONES
static void kmnc_sections(const float *x, const double *lo, const double *hi, const double *unit,
                          int64_t T, int32_t k, int32_t *sec) {
    int64_t j = 0;
    v4i top = {k - 1, k - 1, k - 1, k - 1};
    for (; j + 4 <= T; j += 4) {
        v4f xf;
        v4d l, h, u;
        memcpy(&xf, x + j, sizeof xf);
        memcpy(&l, lo + j, sizeof l);
        memcpy(&h, hi + j, sizeof h);
        memcpy(&u, unit + j, sizeof u);
        v4d v = __builtin_convertvector(xf, v4d);
        v4d q = (v - l) / u;
        v4l in = (v >= l) & (v <= h);
        q = (v4d)((v4l)q & in); /* 0.0 outside, so the conversion below is defined */
        v4i s = __builtin_convertvector(q, v4i);
        v4i over = s > top;
        s = (s & ~over) | (top & over);
        v4i in32 = __builtin_convertvector(in, v4i);
        s = s | ~in32;
        memcpy(sec + j, &s, sizeof s);
    }
    for (; j < T; j++) {
        double v = x[j];
        int in = v >= lo[j] && v <= hi[j];
        int32_t s = in ? (int32_t)((v - lo[j]) / unit[j]) : -1;
        sec[j] = s < k - 1 ? s : k - 1;
    }
}

static fl_status kmnc_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, fl_err *e) {
    (void)e;
    const bound_params *p = c->params;
    int64_t T = c->ctx.ls->total;
    int32_t *sec = c->scratch;
    for (int i = 0; i < b->n; i++) {
        kmnc_sections(b->mean + i * T, p->lo, p->hi, p->unit, T, (int32_t)p->k, sec);
        int new = 0;
        for (int64_t j = 0; j < T; j++)
            if (sec[j] >= 0) new |= fl_cover_hit(c, p->base[j] + sec[j]);
        added[i] = (uint8_t)new;
    }
    return FL_OK;
}

/* NBC: items 2j (below lo) and 2j+1 (above hi); SNAC: item j (above hi). Almost every value
 * lies inside its bounds, so the loop tests eight values at once in float and looks at single
 * values only in a block where one is outside. */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

FL_HOT_CLONES
static int corner_row(fl_cover *c, const float *v, const float *lo, const float *hi, int64_t T,
                      int both) {
    int new = 0;
    for (int64_t j0 = 0; j0 < T; j0 += 8) {
        if (j0 + 8 <= T) {
            v8f x, l, h;
            memcpy(&x, v + j0, sizeof x), memcpy(&l, lo + j0, sizeof l), memcpy(&h, hi + j0, sizeof h);
            v8i out = (x > h) | (both ? x < l : (v8i){0});
            uint64_t any[4];
            memcpy(any, &out, sizeof any);
            if (!(any[0] | any[1] | any[2] | any[3])) continue;
        }
        for (int64_t j = j0; j < T && j < j0 + 8; j++) {
            float x = v[j];
            if (!((x > hi[j]) | (both & (x < lo[j])))) continue;
            new |= fl_cover_hit(c, !both ? j : x > hi[j] ? 2 * j + 1 : 2 * j);
        }
    }
    return new;
}

static fl_status corner_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, int both) {
    const bound_params *p = c->params;
    int64_t T = c->ctx.ls->total;
    for (int i = 0; i < b->n; i++)
        added[i] = (uint8_t)corner_row(c, b->mean + i * T, p->lof, p->hif, T, both);
    return FL_OK;
}

static fl_status nbc_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, fl_err *e) {
    (void)e;
    return corner_update(c, b, added, 1);
}
static fl_status snac_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, fl_err *e) {
    (void)e;
    return corner_update(c, b, added, 0);
}

const fl_cover_ops fl_cover_kmnc = {"kmnc", "kmnc[:K]", 0, kmnc_init, kmnc_update, bound_free};
const fl_cover_ops fl_cover_nbc = {"nbc", "nbc[:SIGMA]", 0, nbc_init, nbc_update, bound_free};
const fl_cover_ops fl_cover_snac = {"snac", "snac[:SIGMA]", 0, snac_init, snac_update,
                                    bound_free};
