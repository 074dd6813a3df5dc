/* Neuron-level criteria: NC (four scalings), KMNC, NBC and SNAC. Definitions and sources in
 * docs/coverage.md. Every comparison is done in double on the float neuron values, with the
 * reference tools' formulas, so that counts match a numpy re-implementation exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
            uint8_t *hit = c->hit + off;
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
                    if (!hit[j] && (double)v[j] > t) hit[j] = 1, c->covered++, new = 1;
            } else {
                for (int64_t j = 0; j < w; j++)
                    if (!hit[j] && ((double)v[j] - lo) / range > t)
                        hit[j] = 1, c->covered++, new = 1;
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
    double *lo, *hi; /* [total] KMNC: training min/max; NBC/SNAC: the σ-extended bounds */
    double *unit;    /* [total] KMNC section width (hi - lo) / k */
    int64_t *base;   /* [total] KMNC: first item of the neuron's sections, -1 when constant */
} bound_params;

static void bound_free(void *pp) {
    bound_params *p = pp;
    if (!p) return;
    free(p->lo), free(p->hi), free(p->unit), free(p->base);
    free(p);
}

typedef enum { B_KMNC, B_NBC, B_SNAC } bound_kind;

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
        p->lo = malloc(sizeof(double) * T);
        p->hi = malloc(sizeof(double) * T);
        if (kind == B_KMNC) {
            p->unit = malloc(sizeof(double) * T);
            p->base = malloc(sizeof(int64_t) * T);
        }
    }
    int64_t *items = malloc(sizeof(int64_t) * (size_t)ls->n);
    if (!p || !p->lo || !p->hi || (kind == B_KMNC && (!p->unit || !p->base)) || !items) {
        free(items);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory for '%s'", c->spec);
    }
    int64_t next = 0;
    for (int l = 0; l < ls->n; l++) {
        int64_t first = next;
        for (int64_t j = ls->offset[l]; j < ls->offset[l] + ls->width[l]; j++) {
            if (kind == B_KMNC) {
                p->lo[j] = pr->min[j];
                p->hi[j] = pr->max[j];
                p->unit[j] = (p->hi[j] - p->lo[j]) / (double)k;
                /* A neuron constant on the training set has no sections (DeepGauge's width
                 * (high - low) / k is 0): it is left out of KMNC's total. */
                p->base[j] = p->hi[j] > p->lo[j] ? next : -1;
                if (p->base[j] >= 0) next += k;
            } else {
                p->lo[j] = (double)pr->min[j] - sigma * pr->std[j];
                p->hi[j] = (double)pr->max[j] + sigma * pr->std[j];
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

static fl_status kmnc_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, fl_err *e) {
    (void)e;
    const bound_params *p = c->params;
    int64_t T = c->ctx.ls->total, k = p->k;
    for (int i = 0; i < b->n; i++) {
        const float *v = b->mean + i * T;
        int new = 0;
        for (int64_t j = 0; j < T; j++) {
            double x = v[j];
            if (p->base[j] < 0 || x < p->lo[j] || x > p->hi[j]) continue;
            /* DeepHunter's index: int((x - lo) / unit), the top edge folded into section k-1. */
            int64_t s = (int64_t)((x - p->lo[j]) / p->unit[j]);
            if (s >= k) s = k - 1;
            new |= fl_cover_hit(c, p->base[j] + s);
        }
        added[i] = (uint8_t)new;
    }
    return FL_OK;
}

/* NBC: items 2j (below lo) and 2j+1 (above hi); SNAC: item j (above hi). */
static fl_status corner_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, int both) {
    const bound_params *p = c->params;
    int64_t T = c->ctx.ls->total;
    for (int i = 0; i < b->n; i++) {
        const float *v = b->mean + i * T;
        int new = 0;
        for (int64_t j = 0; j < T; j++) {
            double x = v[j];
            if (x > p->hi[j]) new |= fl_cover_hit(c, both ? 2 * j + 1 : j);
            else if (both && x < p->lo[j]) new |= fl_cover_hit(c, 2 * j);
        }
        added[i] = (uint8_t)new;
    }
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
