/* NC, neuron coverage, in four scalings. Definitions and sources in docs/coverage.md. Every
 * comparison is done in double on the float neuron values, with the reference tools'
 * formulas, so that counts match a numpy re-implementation exactly. */
#include <stdlib.h>
#include <string.h>

#include "cover_int.h"

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

/* The scaling of input i's layer l: scaled = (v - *lo) / *range. */
static void nc_scaling(const nc_params *p, const fl_layerset *ls, const fl_cover_batch *b,
                       int i, int l, const float *v, int64_t w, double *lo, double *range) {
    *lo = 0, *range = 1;
    if (p->mode == NC_DEEPXPLORE) {
        *lo = b->lmin[i * ls->n + l];
        *range = (double)b->lmax[i * ls->n + l] - *lo;
    } else if (p->mode == NC_CHANNEL || p->mode == NC_MEANABS) {
        float mn = v[0], mx = v[0];
        for (int64_t j = 1; j < w; j++) {
            mn = v[j] < mn ? v[j] : mn;
            mx = v[j] > mx ? v[j] : mx;
        }
        *lo = p->mode == NC_CHANNEL ? mn : 0;
        *range = (double)mx - *lo;
    }
}

/* Once most neurons are covered an input only needs looking at where bits are still open, so
 * the layer is walked 32 neurons at a time through the bitmap, and the scaling (a min-max pass
 * for channel and meanabs) is computed only for a layer that has an open neuron. */
static fl_status nc_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, fl_err *e) {
    (void)e;
    const nc_params *p = c->params;
    const fl_layerset *ls = c->ctx.ls;
    int64_t T = ls->total;
    for (int i = 0; i < b->n; i++) {
        int new = 0;
        for (int l = 0; l < ls->n; l++) {
            int64_t off = ls->offset[l], w = ls->width[l];
            const float *v = (p->mode == NC_MEANABS ? b->absmean : b->mean) + i * T + off;
            double lo = 0, range = 0;
            int scaled = 0;
            for (int64_t j0 = 0; j0 < w; j0 += 32) {
                int n = w - j0 < 32 ? (int)(w - j0) : 32;
                uint64_t open = ~fl_cover__bits(c, off + j0, n) & ((1ull << n) - 1);
                if (!open) continue;
                if (!scaled) nc_scaling(p, ls, b, i, l, v, w, &lo, &range), scaled = 1;
                /* A constant layer (zero range) scales to 0/0 in the reference tools: NaN,
                 * which is never above the threshold. */
                if (!(range > 0)) break;
                for (; open; open &= open - 1) {
                    int64_t j = j0 + __builtin_ctzll(open);
                    if (((double)v[j] - lo) / range > p->t) new |= fl_cover_hit(c, off + j);
                }
            }
        }
        added[i] = (uint8_t)new;
    }
    return FL_OK;
}

const fl_cover_ops fl_cover_nc = {"nc", "nc[:T[:deepxplore|channel|meanabs|none]]",
                                  FL_COVER_NEED_RANGE, nc_init, nc_update, NULL};
