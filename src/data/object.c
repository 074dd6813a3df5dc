/* The fl_dataset object (new, free, class names, source, labels) and the small helpers that
 * every format loader shares; dataset.c and the loaders (idx.c, cifar.c, npy.c, pngdir.c)
 * build on it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/data_int.h"

/* ---- small helpers shared by the module ------------------------------------------------- */
int fl__ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

char *fl__strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

int fl__is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int fl__is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int fl__mul_checked(int64_t a, int64_t b, int64_t cap, int64_t *out) {
    if (a < 0 || b < 0) return 0;
    if (a != 0 && b > cap / a) return 0;
    *out = a * b;
    return 1;
}

/* ---- the dataset object ---------------------------------------------------------------- */
/* The shell of a dataset: checked sizes, labels all -1, no image storage yet. *pixels gets
 * n*c*h*w. The bound keeps 4-byte floats of every accepted dataset addressable. */
static fl_status dataset_shell(int64_t n, int c, int h, int w, int64_t *pixels,
                               fl_dataset **out, fl_err *e) {
    *out = NULL;
    int64_t chw;
    if (n < 0 || c <= 0 || h <= 0 || w <= 0 || n > FL_DATA_MAX_N || h > FL_DATA_MAX_DIM ||
        w > FL_DATA_MAX_DIM || c > FL_DATA_MAX_DIM || !fl__mul_checked(c, (int64_t)h * w,
        FL_DATA_MAX_BYTES, &chw) || !fl__mul_checked(n, chw, FL_DATA_MAX_BYTES / 4, pixels))
        return fl_fail(e, FL_ERR_ARG, "dataset of %lld x %d x %d x %d images is out of range",
                       (long long)n, c, h, w);
    fl_dataset *d = calloc(1, sizeof *d);
    if (!d) return fl_fail(e, FL_ERR_NOMEM, "out of memory for a dataset");
    d->n = n;
    d->c = c;
    d->h = h;
    d->w = w;
    d->scale.kind = FL_SCALE_01;
    if (!(d->y = malloc((size_t)(n ? n : 1) * sizeof(int32_t)))) {
        free(d);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory for %lld labels", (long long)n);
    }
    for (int64_t i = 0; i < n; i++) d->y[i] = -1;
    *out = d;
    return FL_OK;
}

fl_status fl_dataset_new(int64_t n, int c, int h, int w, fl_dataset **out, fl_err *e) {
    int64_t total;
    fl_status st = dataset_shell(n, c, h, w, &total, out, e);
    if (st != FL_OK) return st;
    if (!((*out)->x = fl_alloc((size_t)total * sizeof(float)))) {
        fl_dataset_free(*out);
        *out = NULL;
        return fl_fail(e, FL_ERR_NOMEM, "out of memory for %lld images of %dx%dx%d",
                       (long long)n, c, h, w);
    }
    return FL_OK;
}

fl_status fl__dataset_new_u8(int64_t n, int c, int h, int w, const fl_scale *s, uint8_t *pixels,
                             fl_dataset **out, fl_err *e) {
    int64_t total;
    fl_status st = dataset_shell(n, c, h, w, &total, out, e);
    if (st != FL_OK) {
        free(pixels);
        return st;
    }
    fl_dataset *d = *out;
    d->x8 = pixels ? pixels : calloc((size_t)(total ? total : 1), 1);
    if (!d->x8) {
        fl_dataset_free(d);
        *out = NULL;
        return fl_fail(e, FL_ERR_NOMEM, "out of memory for %lld images of %dx%dx%d",
                       (long long)n, c, h, w);
    }
    d->scale = *s;
    for (int r = 0; r < 3; r++) fl_scale_lut(s, r, d->lut[r]);
    return FL_OK;
}

void fl_dataset_free(fl_dataset *d) {
    if (!d) return;
    fl_free(d->x);
    free(d->x8);
    free(d->y);
    if (d->class_names)
        for (int i = 0; i < d->n_classes; i++) free(d->class_names[i]);
    free(d->class_names);
    free(d->source);
    free(d);
}

fl_status fl__set_classes(fl_dataset *d, int n_classes, const char *const *names, fl_err *e) {
    if (d->class_names)
        for (int i = 0; i < d->n_classes; i++) free(d->class_names[i]);
    free(d->class_names);
    d->class_names = NULL;
    d->n_classes = 0;
    if (n_classes <= 0) return FL_OK;
    d->class_names = calloc((size_t)n_classes, sizeof(char *));
    if (!d->class_names) return fl_fail(e, FL_ERR_NOMEM, "out of memory for class names");
    d->n_classes = n_classes;
    for (int i = 0; i < n_classes; i++) {
        char num[16];
        snprintf(num, sizeof num, "%d", i);
        d->class_names[i] = fl__strdup(names && names[i] ? names[i] : num);
        if (!d->class_names[i]) return fl_fail(e, FL_ERR_NOMEM, "out of memory for class names");
    }
    return FL_OK;
}

fl_status fl__set_source(fl_dataset *d, const char *kind, const char *first, const char *second,
                         fl_err *e) {
    size_t n = (kind ? strlen(kind) + 1 : 0) + strlen(first) + (second ? strlen(second) + 1 : 0) + 1;
    char *s = malloc(n);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    snprintf(s, n, "%s%s%s%s%s", kind ? kind : "", kind ? ":" : "", first, second ? "," : "",
             second ? second : "");
    free(d->source);
    d->source = s;
    return FL_OK;
}

static fl_status finish_labels(fl_dataset *d, const char *name, fl_err *e) {
    int32_t max = -1;
    for (int64_t i = 0; i < d->n; i++) {
        if (d->y[i] < -1 || d->y[i] >= 65536)
            return fl_fail(e, FL_ERR_FORMAT, "%s: label %ld of sample %lld is out of range "
                           "(expected -1 or 0..65535)", name, (long)d->y[i], (long long)i);
        if (d->y[i] > max) max = d->y[i];
    }
    d->has_labels = max >= 0;
    if (d->n_classes > 0) {
        if (max >= d->n_classes)
            return fl_fail(e, FL_ERR_FORMAT, "%s: label %ld but the dataset has %d classes",
                           name, (long)max, d->n_classes);
        return FL_OK;
    }
    return fl__set_classes(d, max + 1, NULL, e);
}

fl_status fl__finish_load(fl_dataset *d, const char *labels_name, const char *kind,
                          const char *first, const char *second, fl_err *e) {
    fl_status st = finish_labels(d, labels_name, e);
    return st ? st : fl__set_source(d, kind, first, second, e);
}

fl_status fl__dataset_adopt_u8(int64_t have, int64_t n, int c, int h, int w, const fl_scale *s,
                               uint8_t **pixels, fl_dataset **out, fl_err *e) {
    if (n < have) { /* a shrinking realloc that fails leaves the buffer as it was: keep it */
        uint8_t *p = realloc(*pixels, n ? (size_t)(n * c * h * w) : 1);
        if (p) *pixels = p;
    }
    uint8_t *px = *pixels;
    *pixels = NULL; /* adopted by the dataset, or freed on failure */
    return fl__dataset_new_u8(n, c, h, w, s, px, out, e);
}
