/* Datasets: batch access, subsets, and the spec strings that name a dataset (the fl_dataset
 * object itself, which every format loader builds, is in object.c).
 *
 * Spec resolution is deliberately dumb and explicit: a prefix ("idx:", "npy:", "cifar10:")
 * or a well-known name picks the format; otherwise the shape of the path does (file suffix,
 * or a directory). No format sniffing by content, so a spec always means one thing and the
 * error for a bad one can list exactly what is accepted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_int.h"

#define SPEC_FORMS                                                                            \
    "accepted forms: fashion-mnist[:train|test], mnist[:train|test], idx:IMAGES[,LABELS], "   \
    "PATH-idx3-ubyte[.gz], cifar10:DIR[:train|test], PATH.bin (CIFAR-10 batch), "             \
    "npy:X.npy[,Y.npy], PATH.npy, or a directory of PNGs (one subfolder per class)"

static const char *const fashion_names[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress",
                                              "Coat",        "Sandal",  "Shirt",    "Sneaker",
                                              "Bag",         "Ankle boot"};

/* ---- batches ----------------------------------------------------------------------------- */
/* Sample i as floats into dst[c,h,w]: a copy for float storage, a table lookup per pixel for
 * 8-bit storage. The table row is per channel only for a 3-channel mean/std scale (the only
 * map that differs between channels; loaders check c == 3 for it). */
static void sample_to_float(const fl_dataset *d, int64_t i, float *dst) {
    size_t hw = (size_t)d->h * (size_t)d->w, chw = (size_t)d->c * hw;
    if (d->x) {
        memcpy(dst, d->x + (size_t)i * chw, chw * sizeof(float));
        return;
    }
    int per_ch = d->scale.kind == FL_SCALE_MEANSTD && d->scale.n_ch == 3;
    const uint8_t *src = d->x8 + (size_t)i * chw;
    for (int ch = 0; ch < d->c; ch++) {
        const float *lut = d->lut[per_ch && ch < 3 ? ch : 0];
        const uint8_t *p = src + (size_t)ch * hw;
        float *q = dst + (size_t)ch * hw;
        for (size_t k = 0; k < hw; k++) q[k] = lut[p[k]];
    }
}

/* Make x a [n,c,h,w] batch: allocate it if x->data is NULL, else check its shape. */
static fl_status batch_tensor(const fl_dataset *d, int64_t n, fl_tensor *x, const char *what,
                              fl_err *e) {
    int64_t shape[4] = {n, d->c, d->h, d->w};
    if (!x->data) {
        if (fl_tensor_alloc(x, 4, shape) != FL_OK)
            return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory for %lld images", what,
                           (long long)n);
    } else if (x->ndim != 4 || x->shape[0] != n || x->shape[1] != d->c ||
               x->shape[2] != d->h || x->shape[3] != d->w) {
        char got[96];
        return fl_fail(e, FL_ERR_SHAPE, "%s: batch tensor is %s, expected [%lld,%d,%d,%d]", what,
                       fl_shape_str(x, got, sizeof got), (long long)n, d->c, d->h, d->w);
    }
    return FL_OK;
}

fl_status fl_dataset_gather(const fl_dataset *d, const int64_t *idx, int64_t n, fl_tensor *x,
                            int32_t *y, fl_err *e) {
    if (n < 0) return fl_fail(e, FL_ERR_ARG, "gather: negative count %lld", (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= d->n)
            return fl_fail(e, FL_ERR_ARG, "gather: index %lld out of range (dataset %s has %lld "
                           "samples)", (long long)idx[i], d->source ? d->source : "?",
                           (long long)d->n);
    fl_status st = batch_tensor(d, n, x, "gather", e);
    if (st != FL_OK) return st;
    size_t chw = (size_t)d->c * (size_t)d->h * (size_t)d->w;
    for (int64_t i = 0; i < n; i++) {
        sample_to_float(d, idx[i], x->data + (size_t)i * chw);
        if (y) y[i] = d->y[idx[i]];
    }
    return FL_OK;
}

fl_status fl_dataset_batch(const fl_dataset *d, int64_t start, int64_t n, fl_tensor *x,
                           fl_err *e) {
    if (start < 0 || n < 0 || start > d->n || n > d->n - start)
        return fl_fail(e, FL_ERR_ARG, "batch: samples %lld..%lld are out of range (dataset %s "
                       "has %lld samples)", (long long)start, (long long)(start + n - 1),
                       d->source ? d->source : "?", (long long)d->n);
    fl_status st = batch_tensor(d, n, x, "batch", e);
    if (st != FL_OK) return st;
    size_t chw = (size_t)d->c * (size_t)d->h * (size_t)d->w;
    for (int64_t i = 0; i < n; i++) sample_to_float(d, start + i, x->data + (size_t)i * chw);
    return FL_OK;
}

fl_status fl_dataset_to_float(fl_dataset *d, fl_err *e) {
    if (d->x) return FL_OK;
    size_t total = (size_t)d->n * (size_t)d->c * (size_t)d->h * (size_t)d->w;
    float *x = fl_alloc(total * sizeof(float));
    if (!x)
        return fl_fail(e, FL_ERR_NOMEM, "dataset %s: out of memory for %lld float images "
                       "(%zu MB)", d->source ? d->source : "?", (long long)d->n,
                       total * sizeof(float) >> 20);
    size_t chw = (size_t)d->c * (size_t)d->h * (size_t)d->w;
    for (int64_t i = 0; i < d->n; i++) sample_to_float(d, i, x + (size_t)i * chw);
    free(d->x8);
    d->x8 = NULL;
    d->x = x;
    return FL_OK;
}

fl_tensor fl_dataset_view(const fl_dataset *d, int64_t start, int64_t n) {
    fl_tensor t;
    memset(&t, 0, sizeof t);
    if (!d->x) return t; /* 8-bit storage has no floats to point at */
    if (start < 0) start = 0;
    if (start > d->n) start = d->n;
    if (n < 0 || n > d->n - start) n = d->n - start;
    int64_t shape[4] = {n, d->c, d->h, d->w};
    fl_tensor_set_shape(&t, 4, shape);
    t.data = d->x + start * d->c * d->h * d->w;
    return t;
}

/* ---- spec resolution --------------------------------------------------------------------- */
/* fashion-mnist / mnist: the four standard file names under a fixed directory. */
static fl_status load_named(const char *spec, const char *name, const char *split,
                            const fl_scale *s, int64_t limit, fl_dataset **out, fl_err *e) {
    int fashion = !strcmp(name, "fashion-mnist");
    const char *dir = fashion ? "/usr/share/datasets/fashion-mnist" : "/usr/share/datasets/mnist";
    const char *pre;
    if (!split || !*split || !strcmp(split, "train")) pre = "train";
    else if (!strcmp(split, "test") || !strcmp(split, "t10k")) pre = "t10k";
    else
        return fl_fail(e, FL_ERR_ARG, "dataset '%s': unknown split '%s' (expected train or test)",
                       spec, split);
    if (!fl__is_dir(dir)) {
        if (fashion)
            return fl_fail(e, FL_ERR_NOTFOUND, "dataset '%s': %s not found; install the Debian "
                           "package dataset-fashion-mnist (apt-get install dataset-fashion-mnist)",
                           spec, dir);
        return fl_fail(e, FL_ERR_NOTFOUND, "dataset '%s': %s not found; put the MNIST IDX files "
                       "(train-images-idx3-ubyte.gz, ...) there or use idx:IMAGES,LABELS", spec,
                       dir);
    }
    char img[512], lab[512];
    snprintf(img, sizeof img, "%s/%s-images-idx3-ubyte.gz", dir, pre);
    snprintf(lab, sizeof lab, "%s/%s-labels-idx1-ubyte.gz", dir, pre);
    if (!fl__is_file(img)) img[strlen(img) - 3] = 0; /* accept uncompressed copies too */
    if (!fl__is_file(lab)) lab[strlen(lab) - 3] = 0;
    if (!fl__is_file(img) || !fl__is_file(lab))
        return fl_fail(e, FL_ERR_NOTFOUND, "dataset '%s': %s or %s missing%s", spec, img, lab,
                       fashion ? "; reinstall the package dataset-fashion-mnist" : "");
    fl_status st = fl__load_idx(img, lab, s, limit, out, e);
    if (st == FL_OK && fashion) st = fl__set_classes(*out, 10, fashion_names, e);
    return st;
}

/* Sister label file of an images file: "...-images-idx3-ubyte[.gz]" -> "...-labels-idx1-ubyte",
 * with or without ".gz". Returns 1 and fills buf if one exists. */
static int idx_sister(const char *images, char *buf, size_t n) {
    const char *key = "images-idx3-ubyte";
    const char *p = strstr(images, key);
    if (!p || strlen(images) + 8 >= n) return 0;
    size_t pre = (size_t)(p - images);
    const char *tails[2] = {".gz", ""};
    for (int i = 0; i < 2; i++) {
        snprintf(buf, n, "%.*slabels-idx1-ubyte%s", (int)pre, images, tails[i]);
        if (fl__is_file(buf)) return 1;
    }
    return 0;
}

/* cifar10:DIR[:split] -> the batch files of that split. */
static fl_status load_cifar_dir(const char *spec, const char *arg, const fl_scale *s,
                                int64_t limit, fl_dataset **out, fl_err *e) {
    char dir[512], split[16] = "train";
    const char *colon = strrchr(arg, ':');
    if (colon && (!strcmp(colon + 1, "train") || !strcmp(colon + 1, "test"))) {
        snprintf(split, sizeof split, "%s", colon + 1);
        snprintf(dir, sizeof dir, "%.*s", (int)(colon - arg), arg);
    } else {
        snprintf(dir, sizeof dir, "%s", arg);
    }
    char sub[600];
    snprintf(sub, sizeof sub, "%s/cifar-10-batches-bin", dir);
    const char *base = fl__is_dir(sub) ? sub : dir;
    if (!fl__is_dir(base))
        return fl_fail(e, FL_ERR_NOTFOUND, "dataset '%s': directory %s not found", spec, dir);
    char paths[5][700];
    const char *files[5];
    int nf = 0;
    if (!strcmp(split, "test")) {
        snprintf(paths[0], sizeof paths[0], "%s/test_batch.bin", base);
        if (fl__is_file(paths[0])) files[nf++] = paths[0];
    } else {
        for (int i = 1; i <= 5; i++) {
            snprintf(paths[nf], sizeof paths[nf], "%s/data_batch_%d.bin", base, i);
            if (fl__is_file(paths[nf])) files[nf] = paths[nf], nf++;
        }
    }
    if (nf == 0)
        return fl_fail(e, FL_ERR_NOTFOUND, "dataset '%s': no %s in %s", spec,
                       strcmp(split, "test") ? "data_batch_1..5.bin" : "test_batch.bin", base);
    return fl__load_cifar(files, nf, s, limit, out, e);
}

/* "X[,Y]" split at the last comma (paths with commas are then not expressible; fine). */
static void split_pair(const char *arg, char *a, size_t na, char *b, size_t nb) {
    const char *comma = strrchr(arg, ',');
    b[0] = 0;
    if (comma) {
        snprintf(a, na, "%.*s", (int)(comma - arg), arg);
        snprintf(b, nb, "%s", comma + 1);
    } else {
        snprintf(a, na, "%s", arg);
    }
}

static fl_status dispatch(const char *spec, const fl_scale *s, int scale_given, int64_t limit,
                          fl_dataset **out, fl_err *e) {
    char a[1024], b[1024];
    if (strlen(spec) >= sizeof a - 16)
        return fl_fail(e, FL_ERR_ARG, "dataset spec is too long (%zu characters)", strlen(spec));
    const char *names[2] = {"fashion-mnist", "mnist"};
    for (int i = 0; i < 2; i++) {
        size_t k = strlen(names[i]);
        if (!strncmp(spec, names[i], k) && (spec[k] == 0 || spec[k] == ':'))
            return load_named(spec, names[i], spec[k] ? spec + k + 1 : NULL, s, limit, out, e);
    }
    if (!strncmp(spec, "idx:", 4)) {
        split_pair(spec + 4, a, sizeof a, b, sizeof b);
        return fl__load_idx(a, b[0] ? b : NULL, s, limit, out, e);
    }
    if (!strncmp(spec, "npy:", 4)) {
        split_pair(spec + 4, a, sizeof a, b, sizeof b);
        return fl__load_npy(a, b[0] ? b : NULL, s, scale_given, limit, out, e);
    }
    if (!strncmp(spec, "cifar10:", 8)) return load_cifar_dir(spec, spec + 8, s, limit, out, e);
    if (fl__ends_with(spec, "-idx3-ubyte") || fl__ends_with(spec, "-idx3-ubyte.gz"))
        return fl__load_idx(spec, idx_sister(spec, b, sizeof b) ? b : NULL, s, limit, out, e);
    if (fl__ends_with(spec, ".bin")) return fl__load_cifar(&spec, 1, s, limit, out, e);
    if (fl__ends_with(spec, ".npy") || fl__ends_with(spec, ".npy.gz")) {
        /* "...x.npy" has labels in "...y.npy" when that file exists. */
        snprintf(b, sizeof b, "%s", spec);
        char *dot = strstr(b, ".npy");
        const char *ypath = NULL;
        if (dot > b && (dot[-1] == 'x' || dot[-1] == 'X')) {
            dot[-1] = dot[-1] == 'x' ? 'y' : 'Y';
            if (fl__is_file(b)) ypath = b;
        }
        return fl__load_npy(spec, ypath, s, scale_given, limit, out, e);
    }
    if (fl__is_dir(spec)) return fl__load_pngdir(spec, s, limit, out, e);
    if (!fl__is_file(spec) && strchr(spec, '/'))
        return fl_fail(e, FL_ERR_NOTFOUND, "dataset '%s': no such file or directory; " SPEC_FORMS,
                       spec);
    return fl_fail(e, FL_ERR_ARG, "unknown dataset spec '%s'; " SPEC_FORMS, spec);
}

fl_status fl_dataset_load(const char *spec, const fl_scale *scale, int64_t limit,
                          fl_dataset **out, fl_err *e) {
    *out = NULL;
    if (!spec || !*spec) return fl_fail(e, FL_ERR_ARG, "empty dataset spec; " SPEC_FORMS);
    if (limit < 0) return fl_fail(e, FL_ERR_ARG, "dataset '%s': negative limit", spec);
    fl_scale s01 = {.kind = FL_SCALE_01};
    const fl_scale *s = scale ? scale : &s01;
    fl_dataset *d = NULL;
    fl_status st = dispatch(spec, s, scale != NULL, limit, &d, e);
    if (st != FL_OK) {
        fl_dataset_free(d);
        return st;
    }
    d->scale = *s;
    if (!d->source && !(d->source = fl__strdup(spec))) {
        fl_dataset_free(d);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    *out = d;
    return FL_OK;
}

fl_status fl_dataset_subset(const fl_dataset *d, const int64_t *idx, int64_t n, fl_dataset **out,
                            fl_err *e) {
    *out = NULL;
    const int64_t per = (int64_t)d->c * d->h * d->w;
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= d->n)
            return fl_fail(e, FL_ERR_ARG, "subset: index %lld outside [0, %lld)",
                           (long long)idx[i], (long long)d->n);
    fl_dataset *s = NULL;
    fl_status st = d->x8 ? fl__dataset_new_u8(n, d->c, d->h, d->w, &d->scale, NULL, &s, e)
                         : fl_dataset_new(n, d->c, d->h, d->w, &s, e);
    if (st) return st;
    s->scale = d->scale;
    memcpy(s->lut, d->lut, sizeof s->lut);
    for (int64_t i = 0; i < n; i++) {
        if (d->x8) memcpy(s->x8 + i * per, d->x8 + idx[i] * per, (size_t)per);
        else memcpy(s->x + i * per, d->x + idx[i] * per, sizeof(float) * (size_t)per);
        s->y[i] = d->y[idx[i]];
    }
    s->has_labels = d->has_labels;
    if (!(st = fl__set_classes(s, d->n_classes, (const char *const *)d->class_names, e)) &&
        d->source)
        st = fl__set_source(s, "subset", d->source, NULL, e);
    if (st) {
        fl_dataset_free(s);
        return st;
    }
    *out = s;
    return FL_OK;
}
