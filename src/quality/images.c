/* The image sets IS and FID are computed on: a `flare nn fuzz` folder of .npy model inputs
 * (failures/<true>-<pred>/NAME.npy or queue/NAME.npy, docs/nn-fuzz.md) or any dataset spec. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "flare/quality.h"

typedef struct {
    char **v;
    int64_t n, cap;
} names;

static void names_free(names *l) {
    for (int64_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int names_push(names *l, const char *s) {
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 64;
        char **v = realloc(l->v, sizeof *v * (size_t)cap);
        if (!v) return 0;
        l->v = v;
        l->cap = cap;
    }
    return (l->v[l->n] = strdup(s)) ? (l->n++, 1) : 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_dir(const char *p) {
    struct stat s;
    return stat(p, &s) == 0 && S_ISDIR(s.st_mode);
}

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n > k && !strcmp(s + n - k, tail);
}

/* Paths of the .npy files in dir, and with `deep` of those one folder further down, sorted
 * by path (so a load is the same whatever readdir returns). Half-written files of an atomic
 * write (NAME.tmp.PID) do not end in .npy and are skipped with the hidden ones. */
static fl_status list_npy(const char *dir, int deep, names *out, fl_err *e) {
    DIR *dp = opendir(dir);
    if (!dp) return fl_fail(e, FL_ERR_IO, "%s: cannot open the folder", dir);
    struct dirent *de;
    char path[4096];
    fl_status st = FL_OK;
    while (!st && (de = readdir(dp))) {
        if (de->d_name[0] == '.') continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path)
            st = fl_fail(e, FL_ERR_ARG, "%s/%s: path too long", dir, de->d_name);
        else if (ends_with(de->d_name, ".npy") && !is_dir(path)) {
            if (!names_push(out, path)) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
        } else if (deep && is_dir(path)) {
            st = list_npy(path, 0, out, e);
        }
    }
    closedir(dp);
    if (!st && out->n > 1) qsort(out->v, (size_t)out->n, sizeof *out->v, cmp_str);
    return st;
}

/* Image i of the set from path: float32 [1,c,h,w] or [c,h,w], the shape of the first one. */
static fl_status read_one(const char *path, int64_t i, fl_dataset **d, fl_err *e,
                          int64_t n) {
    fl_tensor t = {0};
    char shp[96];
    fl_status st = fl_npy_read_tensor(path, &t, e);
    if (st != FL_OK) return st;
    int lead = t.ndim == 4 && t.shape[0] == 1;
    if (!lead && t.ndim != 3) {
        st = fl_fail(e, FL_ERR_SHAPE, "%s: an image must be [1,c,h,w] or [c,h,w]; the file holds %s",
                     path, fl_shape_str(&t, shp, sizeof shp));
        goto out;
    }
    const int64_t *chw = t.shape + lead;
    if (!*d) {
        if (chw[0] > 4 || chw[1] > 65536 || chw[2] > 65536) {
            st = fl_fail(e, FL_ERR_SHAPE, "%s: %s is not an image", path,
                         fl_shape_str(&t, shp, sizeof shp));
            goto out;
        }
        if ((st = fl_dataset_new(n, (int)chw[0], (int)chw[1], (int)chw[2], d, e)) != FL_OK) goto out;
    } else if (chw[0] != (*d)->c || chw[1] != (*d)->h || chw[2] != (*d)->w) {
        st = fl_fail(e, FL_ERR_SHAPE, "%s: %s, but the first image of the folder is [%d,%d,%d]",
                     path, fl_shape_str(&t, shp, sizeof shp), (*d)->c, (*d)->h, (*d)->w);
        goto out;
    }
    int64_t bad = fl_tensor_find_nonfinite(&t);
    if (bad >= 0) {
        st = fl_fail(e, FL_ERR_NAN, "%s: value %lld is %g", path, (long long)bad,
                     (double)t.data[bad]);
        goto out;
    }
    memcpy((*d)->x + i * t.size, t.data, sizeof(float) * (size_t)t.size);
out:
    fl_tensor_free(&t);
    return st;
}

static fl_status load_npy_folder(const char *dir, const names *files, int64_t limit,
                                 fl_dataset **out, fl_err *e) {
    int64_t n = limit > 0 && limit < files->n ? limit : files->n;
    fl_dataset *d = NULL;
    fl_status st = FL_OK;
    for (int64_t i = 0; i < n && !st; i++) st = read_one(files->v[i], i, &d, e, n);
    if (!st && !(d->source = strdup(dir))) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    if (st) {
        fl_dataset_free(d);
        d = NULL;
    }
    *out = d;
    return st;
}

fl_status fl_quality_images_load(const char *spec, const fl_scale *scale, int64_t limit,
                                 fl_dataset **out, fl_err *e) {
    *out = NULL;
    if (!is_dir(spec)) return fl_dataset_load(spec, scale, limit, out, e);
    char p[4096];
    snprintf(p, sizeof p, "%s/fuzzer_stats", spec);
    struct stat s;
    if (stat(p, &s) == 0)
        return fl_fail(e, FL_ERR_ARG, "%s is a campaign folder: name its failures (%s/failures) or "
                       "its queue (%s/queue)", spec, spec, spec);
    names files = {0};
    fl_status st = list_npy(spec, 1, &files, e);
    if (st == FL_OK && files.n == 0) {
        st = fl_dataset_load(spec, scale, limit, out, e); /* a PNG folder */
        if (st != FL_OK && e) { /* an empty failures/ lands here too: say what else was looked for */
            char msg[sizeof e->msg];
            snprintf(msg, sizeof msg, "%s", e->msg);
            fl_fail(e, st, "%s; nor any .npy model inputs of a campaign's failures/ or queue/", msg);
        }
    } else if (st == FL_OK)
        st = load_npy_folder(spec, &files, limit, out, e);
    names_free(&files);
    return st;
}
