/* Retraining on found failures (RobOT's evaluation: robustness gained for accuracy kept).
 *
 * The failures of one or more campaign folders (failures/<true>-<pred>/ JSON files with their
 * .npy, labelled with their seed's label) are split by finding: the first and min examples
 * of one (class pair, root) land on the same side, so the held-out failures are not near
 * copies of training ones. The model is fine-tuned on the training set plus the training
 * failures; accuracy on the clean test set and on the held-out failures is measured before
 * and after.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz/fuzz_int.h"

void fl_retrain_opts_default(fl_retrain_opts *o) {
    memset(o, 0, sizeof *o);
    o->holdout = 0.3;
    o->epochs = 1;
    o->batch = 64;
    o->lr = 1e-4f;
    o->seed = 1;
}

typedef struct fset {
    int64_t n, cap, per;
    float *x;
    int32_t *y;
    uint64_t *group;
} fset;

static fl_status add_one(fset *fs, const char *dir, const char *name, int K, fl_err *e) {
    char path[8192];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return fl_fail(e, FL_ERR_ARG, "%s/%s: path too long", dir, name);
    cJSON *j = fz_json_read(path, e);
    if (!j) return e ? e->status : FL_ERR_FORMAT;
    fl_status st;
    const cJSON *lab = cJSON_GetObjectItemCaseSensitive(j, "label"),
                *root = cJSON_GetObjectItemCaseSensitive(j, "root");
    if (!cJSON_IsNumber(lab) || lab->valuedouble < 0 || lab->valuedouble >= K) {
        cJSON_Delete(j);
        return fl_fail(e, FL_ERR_FORMAT, "%s: no label in [0, %d)", path, K);
    }
    int32_t label = (int32_t)lab->valuedouble;
    uint64_t g = fl_fnv1a(FL_FNV_BASIS ^ (uint64_t)(cJSON_IsNumber(root) ? root->valuedouble : 0),
                          dir, strlen(dir));
    cJSON_Delete(j);
    strcpy(path + strlen(path) - 5, ".npy");
    fl_tensor t = {0};
    if ((st = fl_npy_read_tensor(path, &t, e))) return st;
    if (t.size != fs->per) {
        fl_tensor_free(&t);
        return fl_fail(e, FL_ERR_SHAPE, "%s: %lld values, the training images have %lld", path,
                       (long long)t.size, (long long)fs->per);
    }
    if (fs->n == fs->cap) {
        int64_t c = fs->cap ? fs->cap * 2 : 256;
        float *x = realloc(fs->x, sizeof(float) * (size_t)(c * fs->per));
        int32_t *y = x ? realloc(fs->y, sizeof(int32_t) * (size_t)c) : NULL;
        uint64_t *gr = y ? realloc(fs->group, sizeof(uint64_t) * (size_t)c) : NULL;
        if (x) fs->x = x;
        if (y) fs->y = y;
        if (gr) fs->group = gr;
        if (!gr) return fl_tensor_free(&t), fl_fail(e, FL_ERR_NOMEM, "out of memory");
        fs->cap = c;
    }
    memcpy(fs->x + fs->n * fs->per, t.data, sizeof(float) * (size_t)fs->per);
    fs->y[fs->n] = label;
    fs->group[fs->n++] = g;
    fl_tensor_free(&t);
    return FL_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every failure under path (a campaign folder or its failures/), in name order. */
static fl_status collect(fset *fs, const char *path, int K, fl_err *e) {
    char top[4096];
    struct stat sb;
    snprintf(top, sizeof top, "%s/failures", path);
    if (stat(top, &sb) || !S_ISDIR(sb.st_mode)) snprintf(top, sizeof top, "%s", path);
    DIR *d = opendir(top);
    if (!d) return fl_fail(e, FL_ERR_NOTFOUND, "--extra %s: no such folder", path);
    char *names[4096];
    int nd = 0;
    struct dirent *de;
    while ((de = readdir(d)) && nd < 4096)
        if (de->d_name[0] != '.') names[nd++] = strdup(de->d_name);
    closedir(d);
    qsort(names, (size_t)nd, sizeof *names, cmp_str);
    int64_t before = fs->n;
    fl_status st = FL_OK;
    for (int i = 0; i < nd; i++) {
        char sub[8192];
        if (snprintf(sub, sizeof sub, "%s/%s", top, names[i]) >= (int)sizeof sub) sub[0] = 0;
        DIR *d2 = opendir(sub);
        char *files[8192];
        int nf = 0;
        while (d2 && (de = readdir(d2)) && nf < 8192) {
            size_t k = strlen(de->d_name);
            if (k > 5 && !strcmp(de->d_name + k - 5, ".json") && !strstr(de->d_name, ".tmp."))
                files[nf++] = strdup(de->d_name);
        }
        if (d2) closedir(d2);
        qsort(files, (size_t)nf, sizeof *files, cmp_str);
        for (int k = 0; k < nf; k++) {
            if (!st) st = add_one(fs, sub, files[k], K, e);
            free(files[k]);
        }
        free(names[i]);
    }
    if (!st && fs->n == before)
        st = fl_fail(e, FL_ERR_NOTFOUND, "--extra %s: no failures (failures/<true>-<pred>/*.json)", path);
    return st;
}

/* A labelled float dataset of rows idx of fs (n_classes K). */
static fl_status rows_dataset(const fset *fs, const uint8_t *take, uint8_t want, int c, int h,
                              int w, int K, fl_dataset **out, fl_err *e) {
    int64_t n = 0;
    for (int64_t i = 0; i < fs->n; i++) n += take[i] == want;
    fl_status st = fl_dataset_new(n, c, h, w, out, e);
    if (st) return st;
    int64_t k = 0;
    for (int64_t i = 0; i < fs->n; i++)
        if (take[i] == want) {
            memcpy((*out)->x + k * fs->per, fs->x + i * fs->per, sizeof(float) * (size_t)fs->per);
            (*out)->y[k++] = fs->y[i];
        }
    (*out)->has_labels = 1;
    (*out)->n_classes = K;
    return FL_OK;
}

static double accuracy(fl_model *m, const fl_dataset *d, fl_err *e, fl_status *st) {
    if (*st || d->n == 0) return 0;
    fl_eval_result r;
    if ((*st = fl_eval(m, d, 256, &r, e))) return 0;
    double a = r.accuracy;
    fl_eval_result_free(&r);
    return a;
}

fl_status fl_retrain(fl_model *m, const fl_dataset *train, const fl_dataset *test,
                     const fl_retrain_opts *o, fl_retrain_result *r, fl_err *e) {
    memset(r, 0, sizeof *r);
    const int K = train->n_classes;
    fset fs = {.per = (int64_t)train->c * train->h * train->w};
    fl_status st = FL_OK;
    for (int i = 0; !st && i < o->n_extra; i++) st = collect(&fs, o->extra[i], K, e);
    if (!st && !o->n_extra) st = fl_fail(e, FL_ERR_ARG, "retraining needs failures (--extra)");
    uint8_t *held = st ? NULL : calloc((size_t)fs.n, 1);
    fl_dataset *hold = NULL, *tr_f = NULL, *all = NULL;
    if (!st && !held) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !st && i < fs.n; i++) {
        fl_rng g;
        fl_rng_seed(&g, o->seed ^ fs.group[i]);
        held[i] = fl_rng_uniform(&g) < o->holdout;
        r->n_holdout += held[i];
    }
    r->n_failures = fs.n;
    r->n_train_failures = fs.n - r->n_holdout;
    if (!st) st = rows_dataset(&fs, held, 1, train->c, train->h, train->w, K, &hold, e);
    if (!st) st = rows_dataset(&fs, held, 0, train->c, train->h, train->w, K, &tr_f, e);
    r->clean_before = accuracy(m, test, e, &st);
    r->holdout_before = accuracy(m, hold, e, &st);
    /* the training set with the training failures after it */
    if (!st) st = fl_dataset_new(train->n + tr_f->n, train->c, train->h, train->w, &all, e);
    for (int64_t s = 0; !st && s < train->n; s += 4096) {
        int64_t nb = train->n - s < 4096 ? train->n - s : 4096;
        fl_tensor v = {0};
        int64_t shape[4] = {nb, train->c, train->h, train->w};
        fl_tensor_set_shape(&v, 4, shape);
        v.data = all->x + s * fs.per;
        st = fl_dataset_batch(train, s, nb, &v, e);
        memcpy(all->y + s, train->y + s, sizeof(int32_t) * (size_t)nb);
    }
    if (!st) {
        memcpy(all->x + train->n * fs.per, tr_f->x, sizeof(float) * (size_t)(tr_f->n * fs.per));
        memcpy(all->y + train->n, tr_f->y, sizeof(int32_t) * (size_t)tr_f->n);
        all->has_labels = 1;
        all->n_classes = K;
        fl_train_opts to;
        fl_train_opts_default(&to);
        to.epochs = o->epochs;
        to.batch = o->batch;
        to.lr = o->lr;
        to.lr_decay = 1;
        to.seed = o->seed;
        to.on_epoch = o->on_epoch;
        to.user = o->user;
        st = fl_train(m, all, NULL, &to, e);
    }
    r->clean_after = accuracy(m, test, e, &st);
    r->holdout_after = accuracy(m, hold, e, &st);
    free(held);
    free(fs.x);
    free(fs.y);
    free(fs.group);
    fl_dataset_free(hold);
    fl_dataset_free(tr_f);
    fl_dataset_free(all);
    return st;
}
