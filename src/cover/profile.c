/* Training profiles: per-neuron min, max, mean and std over a data set (DeepHunter's
 * profile), accumulated with Welford's algorithm in double precision, and their file format.
 *
 * File format (little-endian; docs/coverage.md):
 *     "FLPROFIL"  u32 version (2)  u32 n_layers  i64 total  i64 count
 *     n_layers x { u32 name_len, name bytes (no NUL), i64 width }
 *     f32 min[total]  f32 max[total]  f64 mean[total]  f64 std[total]
 *     u64 FNV-1a 64 hash of every byte before it
 * The layer names and widths let a profile refuse a model or layer set it was not made for;
 * the hash catches a truncated or damaged file that happens to have consistent sizes.
 * Version 1 is the same layout, but its hash started from a mistyped offset basis
 * (1469598103934665603, a digit short of FNV's): such files are still read, and checked with
 * that basis; new files are version 2. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cover_int.h"

#define PROFILE_MAGIC "FLPROFIL"
#define PROFILE_VERSION 2u
#define PROFILE_V1_BASIS 1469598103934665603ull /* version 1's checksum: see the top */

void fl_profile_free(fl_profile *p) {
    if (!p) return;
    for (int l = 0; l < p->n_layers; l++) free(p->name[l]);
    free(p->name);
    free(p->width);
    free(p->offset);
    free(p->min);
    free(p->max);
    free(p->mean);
    free(p->std);
    free(p->m2_);
    free(p);
}

/* An empty profile with n_layers layers (names/widths filled by the caller). */
static fl_profile *profile_alloc(int n_layers) {
    fl_profile *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_layers = n_layers;
    p->name = calloc((size_t)n_layers, sizeof(char *));
    p->width = calloc((size_t)n_layers, sizeof(int64_t));
    p->offset = calloc((size_t)n_layers, sizeof(int64_t));
    if (!p->name || !p->width || !p->offset) {
        fl_profile_free(p);
        return NULL;
    }
    return p;
}

/* Allocate the per-neuron arrays once total is known. */
static int profile_arrays(fl_profile *p) {
    size_t t = (size_t)p->total;
    p->min = malloc(sizeof(float) * t);
    p->max = malloc(sizeof(float) * t);
    p->mean = calloc(t, sizeof(double));
    p->std = calloc(t, sizeof(double));
    p->m2_ = calloc(t, sizeof(double));
    if (!p->min || !p->max || !p->mean || !p->std || !p->m2_) return 0;
    for (size_t j = 0; j < t; j++) {
        p->min[j] = INFINITY;
        p->max[j] = -INFINITY;
    }
    return 1;
}

fl_status fl_profile_new(const fl_layerset *ls, fl_profile **out, fl_err *e) {
    *out = NULL;
    fl_profile *p = profile_alloc(ls->n);
    if (!p) return fl_fail(e, FL_ERR_NOMEM, "out of memory for a profile");
    p->total = ls->total;
    for (int l = 0; l < ls->n; l++) {
        p->name[l] = strdup(ls->name[l]);
        p->width[l] = ls->width[l];
        p->offset[l] = ls->offset[l];
        if (!p->name[l]) {
            fl_profile_free(p);
            return fl_fail(e, FL_ERR_NOMEM, "out of memory for a profile");
        }
    }
    if (!profile_arrays(p)) {
        fl_profile_free(p);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory for a profile of %lld neurons",
                       (long long)ls->total);
    }
    *out = p;
    return FL_OK;
}

fl_status fl_profile_add(fl_profile *p, const float *neurons, int n, fl_err *e) {
    fl_status st = fl_cover__check_finite(neurons, n, p->total, p->name, p->offset, p->n_layers,
                                          "neuron value", e);
    if (st != FL_OK) return st;
    int64_t T = p->total;
    for (int i = 0; i < n; i++) {
        const float *x = neurons + (int64_t)i * T;
        double inv = 1.0 / (double)++p->count;
        for (int64_t j = 0; j < T; j++) {
            float v = x[j];
            if (v < p->min[j]) p->min[j] = v;
            if (v > p->max[j]) p->max[j] = v;
            double d = (double)v - p->mean[j];
            p->mean[j] += d * inv;
            p->m2_[j] += d * ((double)v - p->mean[j]);
        }
    }
    for (int64_t j = 0; j < T; j++)
        p->std[j] = p->count ? sqrt(fmax(p->m2_[j], 0.0) / (double)p->count) : 0.0;
    return FL_OK;
}

typedef struct {
    fl_profile *p;
    const fl_layerset *ls;
    fl_cover_view view;
    fl_progress_fn progress;
    void *user;
    int64_t total;
} stream_ctx;

static fl_status profile_batch(void *user, fl_model *m, const float *neurons, const float *logits,
                               int n_logits, int64_t start, int n, fl_err *e) {
    (void)neurons, (void)logits, (void)n_logits;
    stream_ctx *s = user;
    /* The coverage path's neuron values (fl_cover_view_fill), so a training input fed to a
     * criterion later lands exactly inside its profile bounds. */
    fl_status st = fl_cover_view_fill(&s->view, s->ls, m, 0, e);
    if (st == FL_OK) st = fl_profile_add(s->p, s->view.b.mean, n, e);
    if (st == FL_OK && s->progress) s->progress(s->user, start + n, s->total);
    return st;
}

fl_status fl_profile_compute(fl_model *m, const fl_layerset *ls, const fl_dataset *d, int batch,
                             fl_progress_fn progress, void *user, fl_profile **out, fl_err *e) {
    *out = NULL;
    if (d->n <= 0) return fl_fail(e, FL_ERR_ARG, "cannot profile on an empty data set");
    stream_ctx s = {.ls = ls, .progress = progress, .user = user, .total = d->n};
    fl_status st = fl_profile_new(ls, &s.p, e);
    if (st == FL_OK) st = fl_layerset_stream(m, NULL, d, batch, profile_batch, &s, e);
    fl_cover_view_free(&s.view);
    if (st != FL_OK) {
        fl_profile_free(s.p);
        return st;
    }
    *out = s.p;
    return FL_OK;
}

fl_status fl_profile_match(const fl_profile *p, const fl_layerset *ls, fl_err *e) {
    int n = p->n_layers < ls->n ? p->n_layers : ls->n;
    for (int l = 0; l < n; l++)
        if (strcmp(p->name[l], ls->name[l]) != 0 || p->width[l] != ls->width[l])
            return fl_fail(e, FL_ERR_ARG,
                           "profile does not fit the layer set: its layer %d is '%s' (%lld "
                           "neurons), the layer set's is '%s' (%lld); profile the same model "
                           "with the same --layers",
                           l, p->name[l], (long long)p->width[l], ls->name[l],
                           (long long)ls->width[l]);
    if (p->n_layers != ls->n)
        return fl_fail(e, FL_ERR_ARG,
                       "profile does not fit the layer set: it has %d layers, the layer set %d "
                       "(first missing: '%s'); profile the same model with the same --layers",
                       p->n_layers, ls->n,
                       p->n_layers > ls->n ? p->name[n] : ls->name[n]);
    return FL_OK;
}

/* ---- file format ------------------------------------------------------------------------- */
typedef struct {
    uint8_t *b;
    size_t n, cap;
} wbuf;

static int put(wbuf *w, const void *src, size_t n) {
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->n + n) cap *= 2;
        uint8_t *q = realloc(w->b, cap);
        if (!q) return 0;
        w->b = q, w->cap = cap;
    }
    memcpy(w->b + w->n, src, n);
    w->n += n;
    return 1;
}

fl_status fl_profile_save(const fl_profile *p, const char *path, fl_err *e) {
    wbuf w = {0};
    uint32_t ver = PROFILE_VERSION, nl = (uint32_t)p->n_layers;
    size_t T = (size_t)p->total;
    int ok = put(&w, PROFILE_MAGIC, 8) && put(&w, &ver, 4) && put(&w, &nl, 4) &&
             put(&w, &p->total, 8) && put(&w, &p->count, 8);
    for (int l = 0; ok && l < p->n_layers; l++) {
        uint32_t len = (uint32_t)strlen(p->name[l]);
        ok = put(&w, &len, 4) && put(&w, p->name[l], len) && put(&w, &p->width[l], 8);
    }
    ok = ok && put(&w, p->min, 4 * T) && put(&w, p->max, 4 * T) && put(&w, p->mean, 8 * T) &&
         put(&w, p->std, 8 * T);
    uint64_t h = ok ? fl_fnv1a(FL_FNV_BASIS, w.b, w.n) : 0;
    ok = ok && put(&w, &h, 8);
    fl_status st = ok ? fl_file_write_atomic(path, w.b, w.n, e)
                      : fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
    free(w.b);
    return st;
}

typedef struct {
    const uint8_t *b;
    size_t n, at;
} rbuf;

static int get(rbuf *r, void *dst, size_t n) {
    if (r->n - r->at < n) return 0;
    memcpy(dst, r->b + r->at, n);
    r->at += n;
    return 1;
}

/* An fl_parse_fn: the profile file in buf into *(fl_profile **)vout. */
static fl_status parse(const uint8_t *buf, size_t len, const char *path, void *vout, fl_err *e) {
    fl_profile **out = vout;
    rbuf r = {buf, len, 0};
    char magic[8];
    uint32_t ver, nl;
    int64_t total, count;
    if (!get(&r, magic, 8) || memcmp(magic, PROFILE_MAGIC, 8) != 0)
        return fl_fail(e, FL_ERR_FORMAT, "%s: not a flare profile (made by `flare nn profile`)",
                       path);
    if (!get(&r, &ver, 4) || !get(&r, &nl, 4) || !get(&r, &total, 8) || !get(&r, &count, 8))
        return fl_fail(e, FL_ERR_FORMAT, "%s: truncated profile header", path);
    if (ver != 1 && ver != PROFILE_VERSION)
        return fl_fail(e, FL_ERR_FORMAT,
                       "%s: profile format version %u, this flare reads 1 and %u", path, ver,
                       PROFILE_VERSION);
    /* Each layer takes at least 12 bytes and each neuron 24: bound the counts by the file
     * size before allocating anything. */
    if (nl == 0 || total <= 0 || count < 0)
        return fl_fail(e, FL_ERR_FORMAT, "%s: corrupted profile header (%u layers, %lld neurons)",
                       path, nl, (long long)total);
    if ((uint64_t)nl > len / 12 || (uint64_t)total > len / 24)
        return fl_fail(e, FL_ERR_FORMAT,
                       "%s: truncated or corrupted profile (%zu bytes cannot hold the %u layers "
                       "and %lld neurons of its header)",
                       path, len, nl, (long long)total);
    fl_profile *p = profile_alloc((int)nl);
    if (!p) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
    p->total = total;
    p->count = count;
    int64_t sum = 0;
    fl_status st = FL_OK;
    for (uint32_t l = 0; l < nl && st == FL_OK; l++) {
        uint32_t nlen;
        if (!get(&r, &nlen, 4) || nlen > r.n - r.at) {
            st = fl_fail(e, FL_ERR_FORMAT, "%s: truncated profile (layer table)", path);
            break;
        }
        p->name[l] = strndup((const char *)buf + r.at, nlen);
        r.at += nlen;
        if (!p->name[l]) st = fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
        else if (!get(&r, &p->width[l], 8))
            st = fl_fail(e, FL_ERR_FORMAT, "%s: truncated profile (layer table)", path);
        else if (p->width[l] <= 0 || p->width[l] > total - sum)
            st = fl_fail(e, FL_ERR_FORMAT, "%s: layer '%s' has %lld neurons of %lld", path,
                         p->name[l], (long long)p->width[l], (long long)total);
        p->offset[l] = sum;
        sum += p->width[l];
    }
    if (st == FL_OK && sum != total)
        st = fl_fail(e, FL_ERR_FORMAT, "%s: layer widths add up to %lld, header says %lld", path,
                     (long long)sum, (long long)total);
    /* The layer table fixes the size; then the hash catches damage inside. */
    size_t want = r.at + (size_t)total * 24 + 8;
    uint64_t stored = 0;
    if (st == FL_OK && len != want)
        st = fl_fail(e, FL_ERR_FORMAT, "%s: %s profile (%zu bytes, its header says %zu)", path,
                     len < want ? "truncated" : "overlong", len, want);
    if (st == FL_OK) memcpy(&stored, buf + len - 8, 8);
    if (st == FL_OK &&
        fl_fnv1a(ver == 1 ? PROFILE_V1_BASIS : FL_FNV_BASIS, buf, len - 8) != stored)
        st = fl_fail(e, FL_ERR_FORMAT, "%s: corrupted profile (checksum mismatch)", path);
    if (st == FL_OK && !profile_arrays(p))
        st = fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
    if (st == FL_OK) {
        size_t T = (size_t)total;
        get(&r, p->min, 4 * T), get(&r, p->max, 4 * T), get(&r, p->mean, 8 * T);
        get(&r, p->std, 8 * T);
        for (size_t j = 0; j < T && st == FL_OK; j++) {
            if (!(p->min[j] <= p->max[j]) || !isfinite(p->min[j]) || !isfinite(p->max[j]) ||
                !isfinite(p->mean[j]) || !(p->std[j] >= 0))
                st = fl_fail(e, FL_ERR_FORMAT, "%s: neuron %zu has an invalid profile", path, j);
            p->m2_[j] = p->std[j] * p->std[j] * (double)count;
        }
    }
    if (st != FL_OK) {
        fl_profile_free(p);
        return st;
    }
    *out = p;
    return FL_OK;
}

fl_status fl_profile_load(const char *path, fl_profile **out, fl_err *e) {
    *out = NULL;
    return fl_file_parse(path, parse, out, e);
}

char *fl_profile_layers(const fl_profile *p) {
    size_t n = 1;
    for (int l = 0; l < p->n_layers; l++) n += strlen(p->name[l]) + 1;
    char *s = malloc(n);
    if (!s) return NULL;
    s[0] = 0;
    for (int l = 0; l < p->n_layers; l++) {
        if (l) strcat(s, ",");
        strcat(s, p->name[l]);
    }
    return s;
}
