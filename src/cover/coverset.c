/* Neuron values of a batch, read from a model after its forward pass (fl_cover_view), and
 * sets of criteria updated together (fl_coverset).
 *
 * The view is the hot loop of coverage: it reads every float of every layer of the batch
 * once (for LeNet-5's "all" layer set, ~10 500 floats per input), so it is written to
 * vectorise: eight independent float accumulators per channel (SSE2 without -ffast-math
 * cannot reassociate one accumulator), summed into a double at the end. Channel means
 * therefore differ from fl_layerset_neurons (one double accumulator) in the last bits; the
 * profile is computed through this same view, so profile bounds and coverage agree. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cover_int.h"

#define LANES 8

/* Sum of x[0..n). */
static double sum8(const float *x, int64_t n) {
    float a[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int k = 0; k < LANES; k++) a[k] += x[i + k];
    double s = 0;
    for (int k = 0; k < LANES; k++) s += a[k];
    for (; i < n; i++) s += x[i];
    return s;
}

/* Sum, sum of |x|, min and max of x[0..n), n >= 1. */
static void stats8(const float *x, int64_t n, double *sum, double *asum, float *mn, float *mx) {
    float a[LANES] = {0}, b[LANES] = {0}, lo[LANES], hi[LANES];
    for (int k = 0; k < LANES; k++) lo[k] = hi[k] = x[0];
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int k = 0; k < LANES; k++) {
            float v = x[i + k];
            a[k] += v;
            b[k] += fabsf(v);
            lo[k] = v < lo[k] ? v : lo[k];
            hi[k] = v > hi[k] ? v : hi[k];
        }
    double s = 0, t = 0;
    float l = lo[0], h = hi[0];
    for (int k = 0; k < LANES; k++) {
        s += a[k], t += b[k];
        l = lo[k] < l ? lo[k] : l;
        h = hi[k] > h ? hi[k] : h;
    }
    for (; i < n; i++) {
        s += x[i], t += fabsf(x[i]);
        l = x[i] < l ? x[i] : l;
        h = x[i] > h ? x[i] : h;
    }
    *sum = s, *asum = t, *mn = l, *mx = h;
}

void fl_cover_view_free(fl_cover_view *v) {
    free(v->mean), free(v->absmean), free(v->lmin), free(v->lmax);
    memset(v, 0, sizeof *v);
}

static int grow(float **p, int64_t n) {
    float *q = realloc(*p, sizeof(float) * (size_t)(n ? n : 1));
    if (!q) return 0;
    *p = q;
    return 1;
}

fl_status fl_cover_view_fill(fl_cover_view *v, const fl_layerset *ls, const fl_model *m,
                             unsigned needs, fl_err *e) {
    const fl_tensor *t0 = &m->values[ls->value[0]].t;
    if (!t0->data || t0->ndim < 2)
        return fl_fail(e, FL_ERR_ARG, "layer '%s' has no value: run the model forward first",
                       ls->name[0]);
    int64_t N = t0->shape[0], T = ls->total;
    if (N > v->cap) {
        if (!grow(&v->mean, N * T) || !grow(&v->absmean, N * T) || !grow(&v->lmin, N * ls->n) ||
            !grow(&v->lmax, N * ls->n))
            return fl_fail(e, FL_ERR_NOMEM, "out of memory for neuron values of %lld inputs",
                           (long long)N);
        v->cap = N;
    }
    int full = (needs & (FL_COVER_NEED_ABSMEAN | FL_COVER_NEED_RANGE)) != 0;
    for (int l = 0; l < ls->n; l++) {
        const fl_tensor *t = &m->values[ls->value[l]].t;
        int64_t C = t->shape[1], hw = t->ndim == 4 ? t->shape[2] * t->shape[3] : 1;
        if (!t->data || t->shape[0] != N || C != ls->width[l])
            return fl_fail(e, FL_ERR_SHAPE,
                           "layer '%s' does not hold %lld inputs of %lld neurons: run the "
                           "model forward first",
                           ls->name[l], (long long)N, (long long)ls->width[l]);
        for (int64_t b = 0; b < N; b++) {
            float *o = v->mean + b * T + ls->offset[l], *oa = v->absmean + b * T + ls->offset[l];
            const float *x = t->data + b * C * hw;
            float lmin = x[0], lmax = x[0];
            for (int64_t c = 0; c < C; c++, x += hw) {
                if (!full) {
                    o[c] = hw == 1 ? x[0] : (float)(sum8(x, hw) / (double)hw);
                    continue;
                }
                double s, a;
                float lo, hi;
                stats8(x, hw, &s, &a, &lo, &hi);
                o[c] = (float)(s / (double)hw);
                oa[c] = (float)(a / (double)hw);
                lmin = lo < lmin ? lo : lmin;
                lmax = hi > lmax ? hi : lmax;
            }
            v->lmin[b * ls->n + l] = lmin;
            v->lmax[b * ls->n + l] = lmax;
        }
    }
    v->b = (fl_cover_batch){.n = (int)N,
                            .mean = v->mean,
                            .absmean = full ? v->absmean : NULL,
                            .lmin = full ? v->lmin : NULL,
                            .lmax = full ? v->lmax : NULL,
                            .m = m};
    return fl_cover__check_finite(v->mean, (int)N, T, ls->name, ls->offset, ls->n,
                                  "neuron value", e);
}

/* ---- sets of criteria ------------------------------------------------------------------------ */
void fl_coverset_free(fl_coverset *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) fl_cover_free(s->c[i]);
    free(s->c);
    free(s->tmp);
    fl_cover_view_free(&s->view);
    free(s);
}

fl_status fl_coverset_new(const fl_cover_ctx *ctx, const char *spec, fl_coverset **out,
                          fl_err *e) {
    *out = NULL;
    fl_coverset *s = calloc(1, sizeof *s);
    char *copy = strdup(spec);
    size_t max = 1;
    for (const char *p = spec; *p; p++) max += *p == ',';
    if (s) s->c = calloc(max, sizeof(fl_cover *));
    if (!s || !copy || !s->c) {
        free(copy);
        fl_coverset_free(s);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    fl_status st = FL_OK;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && st == FL_OK;
         tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        for (int i = 0; i < s->n && st == FL_OK; i++)
            if (strcmp(s->c[i]->spec, tok) == 0)
                st = fl_fail(e, FL_ERR_ARG, "criterion '%s' is listed twice in '%s'", tok, spec);
        if (st == FL_OK) st = fl_cover_new(ctx, tok, &s->c[s->n], e);
        if (st == FL_OK) s->needs |= s->c[s->n++]->needs;
    }
    if (st == FL_OK && s->n == 0)
        st = fl_fail(e, FL_ERR_ARG, "no coverage criterion in '%s'", spec);
    free(copy);
    if (st != FL_OK) {
        fl_coverset_free(s);
        return st;
    }
    *out = s;
    return FL_OK;
}

/* Update every criterion; the batch has been checked. */
static fl_status update_all(fl_coverset *s, const fl_cover_batch *b, uint8_t *added, fl_err *e) {
    if (b->n > s->tmp_cap) {
        uint8_t *t = realloc(s->tmp, (size_t)b->n);
        if (!t) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        s->tmp = t, s->tmp_cap = b->n;
    }
    if (added && b->n > 0) memset(added, 0, (size_t)b->n);
    for (int i = 0; i < s->n; i++) {
        fl_status st = fl_cover__update(s->c[i], b, s->tmp, NULL, e);
        if (st != FL_OK) return st;
        if (added)
            for (int k = 0; k < b->n; k++) added[k] |= s->tmp[k];
    }
    return FL_OK;
}

fl_status fl_coverset_update(fl_coverset *s, const fl_cover_batch *b, uint8_t *added,
                             fl_err *e) {
    fl_status st = fl_cover__check_batch(s->c[0]->ctx.ls, b, s->needs, "coverage", e);
    return st != FL_OK ? st : update_all(s, b, added, e);
}

fl_status fl_coverset_update_model(fl_coverset *s, const fl_model *m, uint8_t *added,
                                   fl_err *e) {
    fl_status st = fl_cover_view_fill(&s->view, s->c[0]->ctx.ls, m, s->needs, e);
    return st != FL_OK ? st : update_all(s, &s->view.b, added, e);
}
