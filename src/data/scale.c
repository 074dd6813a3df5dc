/* Pixel scaling: the map from stored 8-bit values (or [0,1] floats) to model inputs, and back.
 *
 * Every map is expressed as "first divide by 255, then apply an affine map per channel", so
 * float inputs in [0,1] and 8-bit inputs go through the same code and the inverse is exact
 * up to rounding.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_int.h"

/* The affine map v01 -> v01 * a + b for channel ch. */
static void affine(const fl_scale *s, int ch, float *a, float *b) {
    switch (s->kind) {
    case FL_SCALE_PM1: *a = 2.0f; *b = -1.0f; return;
    case FL_SCALE_NONE: *a = 255.0f; *b = 0.0f; return;
    case FL_SCALE_MEANSTD: {
        int k = s->n_ch == 3 ? ch : 0;
        *a = 1.0f / s->std[k];
        *b = -s->mean[k] / s->std[k];
        return;
    }
    case FL_SCALE_01:
    default: *a = 1.0f; *b = 0.0f; return;
    }
}

static int parse_floats(const char *p, float *v, int max) {
    int n = 0;
    while (*p) {
        char *end;
        double d = strtod(p, &end);
        if (end == p || n == max || !isfinite(d)) return -1;
        v[n++] = (float)d;
        p = end;
        if (*p == ',') {
            p++;
            if (!*p) return -1;
        } else if (*p) {
            return -1;
        }
    }
    return n;
}

fl_status fl_scale_parse(const char *s, fl_scale *out, fl_err *e) {
    memset(out, 0, sizeof *out);
    if (!s || !strcmp(s, "01") || !strcmp(s, "0,1")) {
        out->kind = FL_SCALE_01;
        return FL_OK;
    }
    if (!strcmp(s, "pm1") || !strcmp(s, "-1,1")) {
        out->kind = FL_SCALE_PM1;
        return FL_OK;
    }
    if (!strcmp(s, "none") || !strcmp(s, "raw")) {
        out->kind = FL_SCALE_NONE;
        return FL_OK;
    }
    if (!strncmp(s, "meanstd:", 8)) {
        float v[6];
        int n = parse_floats(s + 8, v, 6);
        if (n != 2 && n != 6)
            return fl_fail(e, FL_ERR_ARG,
                           "scale '%s': meanstd needs MEAN,STD or M1,M2,M3,S1,S2,S3", s);
        out->kind = FL_SCALE_MEANSTD;
        out->n_ch = n / 2;
        for (int i = 0; i < out->n_ch; i++) {
            out->mean[i] = v[i];
            out->std[i] = v[out->n_ch + i];
            if (!(out->std[i] > 0))
                return fl_fail(e, FL_ERR_ARG, "scale '%s': standard deviations must be > 0", s);
        }
        return FL_OK;
    }
    return fl_fail(e, FL_ERR_ARG,
                   "unknown scale '%s' (expected 01, pm1, none, meanstd:MEAN,STD or "
                   "meanstd:M1,M2,M3,S1,S2,S3)", s);
}

const char *fl_scale_str(const fl_scale *s, char *buf, size_t n) {
    if (!s || s->kind == FL_SCALE_01) snprintf(buf, n, "01");
    else if (s->kind == FL_SCALE_PM1) snprintf(buf, n, "pm1");
    else if (s->kind == FL_SCALE_NONE) snprintf(buf, n, "none");
    else if (s->n_ch == 3)
        snprintf(buf, n, "meanstd:%g,%g,%g,%g,%g,%g", s->mean[0], s->mean[1], s->mean[2],
                 s->std[0], s->std[1], s->std[2]);
    else snprintf(buf, n, "meanstd:%g,%g", s->mean[0], s->std[0]);
    return buf;
}

fl_status fl__scale_check(const fl_scale *s, int c, const char *name, fl_err *e) {
    if (s->kind == FL_SCALE_MEANSTD && s->n_ch != 1 && s->n_ch != c)
        return fl_fail(e, FL_ERR_ARG, "%s: scale gives mean/std for %d channels, images have %d",
                       name, s->n_ch, c);
    return FL_OK;
}

void fl_scale_lut(const fl_scale *s, int ch, float lut[256]) {
    float a, b;
    affine(s, ch, &a, &b);
    /* v/255*255 need not give back v exactly in float; raw values must be exact. */
    for (int v = 0; v < 256; v++)
        lut[v] = s->kind == FL_SCALE_NONE ? (float)v : (float)v / 255.0f * a + b;
}

void fl__scale_f32(const fl_scale *s, float *x, int64_t n, int c, int64_t hw) {
    if (s->kind == FL_SCALE_01 || s->kind == FL_SCALE_NONE) return;
    for (int ch = 0; ch < c; ch++) {
        float a, b;
        affine(s, ch, &a, &b);
        for (int64_t i = 0; i < n; i++) {
            float *q = x + (i * c + ch) * hw;
            for (int64_t k = 0; k < hw; k++) q[k] = q[k] * a + b;
        }
    }
}

void fl_scale_unapply(const fl_scale *s, float *x, int64_t n, int c, int64_t hw) {
    if (!s || s->kind == FL_SCALE_01) return;
    for (int ch = 0; ch < c; ch++) {
        float a, b;
        affine(s, ch, &a, &b);
        for (int64_t i = 0; i < n; i++) {
            float *q = x + (i * c + ch) * hw;
            for (int64_t k = 0; k < hw; k++) q[k] = (q[k] - b) / a;
        }
    }
}
