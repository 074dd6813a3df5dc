/* What the oracles found, de-duplicated by (oracle, seed class, predicted class, lineage root),
 * and the files of each finding (docs/nn-fuzz.md):
 *
 *     failures/<true>-<pred>/root:NNNNNN,first.{npy,png,pair.png,json}   the first example
 *     failures/<true>-<pred>/root:NNNNNN,min.{...}                        the closest to its seed
 *
 * <true>-nan holds non-finite outputs, <true>-<pred>-vs-<pred2> disagreements with --model2.
 * The table is small (one row per finding), kept in memory with an open-addressing index, and
 * rebuilt from the JSON files on resume.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_int.h"

static const char *const oracle_names[] = {"misclassification", "disagreement", "nonfinite"};

static uint64_t key_hash(int oracle, int32_t label, int32_t pred, int32_t pred2, int64_t root) {
    uint64_t h = (uint64_t)root * 0x9e3779b97f4a7c15ull;
    h ^= ((uint64_t)(uint32_t)label << 32 | (uint32_t)pred) * 0xbf58476d1ce4e5b9ull;
    h ^= ((uint64_t)(uint32_t)pred2 << 8 | (unsigned)oracle) * 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

typedef struct fkey {
    const fz_finding *f; /* the table's records */
    int oracle;
    int32_t label, pred, pred2;
    int64_t root;
} fkey;

static int same(const void *ctx, int64_t i) {
    const fkey *k = ctx;
    const fz_finding *f = &k->f[i];
    return f->oracle == k->oracle && f->label == k->label && f->pred == k->pred &&
           f->pred2 == k->pred2 && f->root == k->root;
}

/* The finding with this key, created (seen 0, min_l2 +inf) when absent. */
static fz_finding *lookup(fz_findings *fs, int oracle, int32_t label, int32_t pred, int32_t pred2,
                          int64_t root, int *created, fl_err *e) {
    *created = 0;
    if (!fl_index_reserve(&fs->ix, fs->n + 1))
        return fl_fail(e, FL_ERR_NOMEM, "out of memory"), NULL;
    uint64_t h = key_hash(oracle, label, pred, pred2, root);
    fkey k = {fs->f, oracle, label, pred, pred2, root};
    int64_t at, i = fl_index_find(&fs->ix, h, same, &k, &at);
    if (i >= 0) return &fs->f[i];
    if (fs->n == fs->cap) {
        int64_t c = fs->cap ? fs->cap * 2 : 256;
        fz_finding *p = realloc(fs->f, sizeof *p * (size_t)c);
        if (!p) return fl_fail(e, FL_ERR_NOMEM, "out of memory"), NULL;
        fs->f = p;
        fs->cap = c;
    }
    fz_finding *f = &fs->f[fs->n];
    *f = (fz_finding){oracle, label, pred, pred2, root, 0, INFINITY, -1};
    fl_index_put(&fs->ix, at, h, fs->n++);
    fs->by_oracle[oracle]++;
    *created = 1;
    return f;
}

void fz_findings_free(fz_findings *fs) {
    for (int64_t i = 0; i < fs->n_pend; i++) free(fs->pend[i].px), free(fs->pend[i].input);
    free(fs->pend);
    free(fs->f);
    fl_index_free(&fs->ix);
    memset(fs, 0, sizeof *fs);
}

static void dir_name(char *buf, size_t n, int oracle, int32_t label, int32_t pred, int32_t pred2) {
    if (oracle == FZ_OR_NONFINITE) snprintf(buf, n, "%d-nan", label);
    else if (oracle == FZ_OR_DISAGREE) snprintf(buf, n, "%d-%d-vs-%d", label, pred, pred2);
    else snprintf(buf, n, "%d-%d", label, pred);
}

static const char *class_name(const fz_campaign *cp, int32_t k) {
    return k >= 0 && k < cp->n_classes ? cp->class_names[k] : "NaN";
}

/* The seed next to the mutant, labelled, as path. */
static fl_status write_pair(const fz_campaign *cp, const char *path, const uint8_t *seed,
                            const uint8_t *mut, const fz_verdict *v, fl_err *e) {
    float *img = malloc(sizeof(float) * (size_t)(2 * cp->n));
    if (!img) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < cp->n; i++) {
        img[i] = seed[i] / 255.0f;
        img[cp->n + i] = mut[i] / 255.0f;
    }
    char l0[96], l1[96];
    snprintf(l0, sizeof l0, "seed\n%s", class_name(cp, v->label));
    if (v->oracle == FZ_OR_NONFINITE) snprintf(l1, sizeof l1, "mutant\nNaN");
    else snprintf(l1, sizeof l1, "%s\n%.2f", class_name(cp, v->pred), v->confidence);
    const char *labels[2] = {l0, l1};
    fl_status st = fl_image_grid_write(path, img, 2, cp->c, cp->h, cp->w, 2, labels, e);
    free(img);
    return st;
}

static fl_status write_files(fz_campaign *cp, const fz_failure *f, const fz_finding *fd,
                             const char *kind, double l0, double l2, double linf, fl_err *e) {
    char dir[64], rel[160], path[4096];
    dir_name(dir, sizeof dir, f->v->oracle, f->v->label, f->v->pred, f->v->pred2);
    snprintf(rel, sizeof rel, "failures/%s", dir);
    fl_status st;
    if ((st = fz_path(path, sizeof path, cp->o->out_dir, rel, e)) || (st = fl_mkdirs(path, e)))
        return st;
    size_t base = strlen(path);
    snprintf(path + base, sizeof path - base, "/root:%06lld,%s.npy", (long long)f->root->id, kind);
    size_t stem = strlen(path) - 4;
    int64_t shape[4] = {1, cp->c, cp->h, cp->w};
    if ((st = fl_npy_write(path, FL_DT_F32, 4, shape, f->input, e))) return st;
    strcpy(path + stem, ".png");
    {
        float *img = malloc(sizeof(float) * (size_t)cp->n);
        if (!img) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; i < cp->n; i++) img[i] = f->px[i];
        st = fl_png_write(path, img, cp->c, cp->h, cp->w, 0, 255, e);
        free(img);
        if (st) return st;
    }
    strcpy(path + stem, ".pair.png"); /* a generated case has no seed to stand beside */
    if (cp->o->strategy != FL_FUZZ_FUZZGAN &&
        (st = write_pair(cp, path, f->root->px, f->px, f->v, e)))
        return st;

    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "kind", kind);
    cJSON_AddStringToObject(j, "oracle", oracle_names[f->v->oracle]);
    cJSON_AddNumberToObject(j, "id", (double)f->exec);
    cJSON_AddNumberToObject(j, "root", (double)f->root->id);
    cJSON_AddNumberToObject(j, "src", (double)f->parent->id);
    cJSON_AddNumberToObject(j, "seed_index", (double)f->root->seed_index);
    cJSON_AddNumberToObject(j, "label", f->v->label);
    cJSON_AddStringToObject(j, "label_name", class_name(cp, f->v->label));
    if (f->v->pred >= 0) {
        cJSON_AddNumberToObject(j, "pred", f->v->pred);
        cJSON_AddStringToObject(j, "pred_name", class_name(cp, f->v->pred));
        cJSON_AddNumberToObject(j, "confidence", f->v->confidence);
    } else {
        cJSON_AddNullToObject(j, "pred");
        cJSON_AddStringToObject(j, "pred_name", "NaN");
    }
    if (f->v->pred2 >= 0) cJSON_AddNumberToObject(j, "pred2", f->v->pred2);
    cJSON *ops = cJSON_AddArrayToObject(j, "ops");
    char buf[64];
    for (const char *s = f->parent->ops; s && *s;) {
        size_t k = strcspn(s, " ");
        if (k && k < sizeof buf) {
            memcpy(buf, s, k);
            buf[k] = 0;
            cJSON_AddItemToArray(ops, cJSON_CreateString(buf));
        }
        s += k + (s[k] == ' ');
    }
    cJSON_AddItemToArray(ops, cJSON_CreateString(f->last_op));
    cJSON_AddNumberToObject(j, "l0", l0);
    cJSON_AddNumberToObject(j, "l2", l2);
    cJSON_AddNumberToObject(j, "linf", linf);
    cJSON_AddNumberToObject(j, "exec", (double)f->exec);
    cJSON_AddNumberToObject(j, "time", f->time);
    cJSON_AddNumberToObject(j, "seen", (double)fd->seen);
    strcpy(path + stem, ".json");
    return fz_json_write(path, j, 1, e);
}

/* Keep f as finding k's closest example until the next flush (replacing a pending one). */
static fl_status defer_min(fz_campaign *cp, const fz_failure *f, int64_t k, double l0, double l2,
                           double linf, fl_err *e) {
    fz_findings *fs = &cp->fs;
    fz_pending *p;
    if (fs->f[k].pending >= 0) {
        p = &fs->pend[fs->f[k].pending];
    } else {
        if (fs->n_pend == fs->cap_pend) {
            int64_t c = fs->cap_pend ? 2 * fs->cap_pend : 64;
            fz_pending *q = realloc(fs->pend, sizeof *q * (size_t)c);
            if (!q) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
            fs->pend = q;
            fs->cap_pend = c;
        }
        p = &fs->pend[fs->n_pend];
        p->px = malloc((size_t)cp->n);
        p->input = malloc(sizeof(float) * (size_t)cp->n);
        if (!p->px || !p->input) {
            free(p->px);
            free(p->input);
            return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        }
        fs->f[k].pending = fs->n_pend++;
    }
    p->finding = k;
    p->v = *f->v;
    p->parent = f->parent->id;
    p->root = f->root->id;
    p->exec = f->exec;
    p->time = f->time;
    p->l0 = l0, p->l2 = l2, p->linf = linf;
    memcpy(p->px, f->px, (size_t)cp->n);
    memcpy(p->input, f->input, sizeof(float) * (size_t)cp->n);
    snprintf(p->op, sizeof p->op, "%s", f->last_op);
    return FL_OK;
}

fl_status fz_findings_add(fz_campaign *cp, const fz_failure *f, int *is_new, fl_err *e) {
    const fz_verdict *v = f->v;
    cp->fs.total++;
    /* model2's class is part of a disagreement's identity only: a misclassification is the
     * same finding whatever the second model said */
    int32_t key2 = v->oracle == FZ_OR_DISAGREE ? v->pred2 : -1;
    fz_finding *fd = lookup(&cp->fs, v->oracle, v->label, v->pred, key2, f->root->id, is_new, e);
    if (!fd) return e ? e->status : FL_ERR_NOMEM;
    fd->seen++;
    double l0, l2, linf;
    fl_fuzz_dist(f->root->px, f->px, cp->n, &l0, &l2, &linf);
    fl_status st = FL_OK;
    if (*is_new) st = write_files(cp, f, fd, "first", l0, l2, linf, e);
    /* a generated case (fuzzgan) is its own root: no seed to be close to, no "min" file */
    if (!st && l2 < fd->min_l2 && cp->o->strategy != FL_FUZZ_FUZZGAN) {
        fd->min_l2 = l2;
        st = defer_min(cp, f, fd - cp->fs.f, l0, l2, linf, e);
    }
    return st;
}

fl_status fz_findings_flush(fz_campaign *cp, fl_err *e) {
    fz_findings *fs = &cp->fs;
    fl_status st = FL_OK;
    for (int64_t i = 0; i < fs->n_pend; i++) {
        fz_pending *p = &fs->pend[i];
        fz_finding *fd = &fs->f[p->finding];
        fz_failure f = {&p->v, &cp->q.e[p->parent], &cp->q.e[p->root], p->px, p->input, p->op,
                        p->exec, p->time};
        if (!st) st = write_files(cp, &f, fd, "min", p->l0, p->l2, p->linf, e);
        fd->pending = -1;
        free(p->px);
        free(p->input);
    }
    fs->n_pend = 0;
    return st;
}

/* ---- resume and the grid ------------------------------------------------------------------- */
/* Member k as an int32; dflt when absent or not a whole number in range (-1 marks it bad). */
static int32_t json_int(const cJSON *j, const char *k, int32_t dflt) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, k);
    return cJSON_IsNumber(x) && fl_whole(x->valuedouble, -1, INT32_MAX) ? (int32_t)x->valuedouble
                                                                         : dflt;
}

static fl_status load_one(fz_campaign *cp, const char *path, fl_err *e) {
    cJSON *j = fz_json_read(path, e);
    if (!j) return e ? e->status : FL_ERR_FORMAT;
    const cJSON *orc = cJSON_GetObjectItemCaseSensitive(j, "oracle");
    int oracle = -1;
    for (int k = 0; k < 3 && cJSON_IsString(orc); k++)
        if (!strcmp(orc->valuestring, oracle_names[k])) oracle = k;
    int64_t root = json_int(j, "root", -1);
    /* a finding's root is a seed, or for fuzzgan the generated case itself */
    const int64_t roots = cp->o->strategy == FL_FUZZ_FUZZGAN ? cp->q.n : cp->q.n_seeds;
    if (!j || oracle < 0 || root < 0 || root >= roots) {
        cJSON_Delete(j);
        return fl_fail(e, FL_ERR_FORMAT, "%s: not a failure record of this campaign", path);
    }
    int created;
    fz_finding *fd = lookup(&cp->fs, oracle, json_int(j, "label", -1), json_int(j, "pred", -1),
                            oracle == FZ_OR_DISAGREE ? json_int(j, "pred2", -1) : -1, root,
                            &created, e);
    if (fd) {
        int64_t seen = json_int(j, "seen", 1);
        if (seen > fd->seen) fd->seen = seen;
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
        const cJSON *l2 = cJSON_GetObjectItemCaseSensitive(j, "l2");
        if (cJSON_IsString(kind) && !strcmp(kind->valuestring, "min") && cJSON_IsNumber(l2))
            fd->min_l2 = l2->valuedouble;
    }
    cJSON_Delete(j);
    return fd ? FL_OK : (e ? e->status : FL_ERR_NOMEM);
}

fl_status fz_findings_load(fz_campaign *cp, fl_err *e) {
    char top[4096], sub[4096], file[4096];
    fl_status st = fz_path(top, sizeof top, cp->o->out_dir, "failures", e);
    if (st) return st;
    DIR *d = opendir(top);
    if (!d) return FL_OK;
    struct dirent *de;
    while (!st && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        if (snprintf(sub, sizeof sub, "%s/%s", top, de->d_name) >= (int)sizeof sub) continue;
        DIR *d2 = opendir(sub);
        if (!d2) continue;
        struct dirent *f;
        while (!st && (f = readdir(d2))) {
            size_t k = strlen(f->d_name);
            if (k < 6 || strcmp(f->d_name + k - 5, ".json") || strstr(f->d_name, ".tmp.")) continue;
            if (snprintf(file, sizeof file, "%s/%s", sub, f->d_name) >= (int)sizeof file) continue;
            st = load_one(cp, file, e);
        }
        closedir(d2);
    }
    closedir(d);
    /* fuzzer_stats may lag the files (a killed campaign): never fewer failures than findings */
    if (cp->fs.total < cp->fs.n) cp->fs.total = cp->fs.n;
    return st;
}

/* Generated cases (fuzzgan) have no seed: one tile each, labelled class > prediction. */
fl_status fz_findings_grid(fz_campaign *cp, fl_err *e) {
    enum { MAX = 50 };
    const int per = cp->o->strategy == FL_FUZZ_FUZZGAN ? 1 : 2; /* tiles per finding */
    int n = cp->fs.n < MAX ? (int)cp->fs.n : MAX;
    char path[4096];
    fl_status st = fz_path(path, sizeof path, cp->o->out_dir, "failures.png", e);
    if (st || n == 0) return st;
    float *img = calloc((size_t)(per * n) * (size_t)cp->n, sizeof(float));
    char (*lab)[96] = calloc((size_t)(per * n), sizeof *lab);
    const char **labels = calloc((size_t)(per * n), sizeof *labels);
    if (!img || !lab || !labels) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < n; i++) {
        const fz_finding *fd = &cp->fs.f[i];
        char dir[64], npy[4096];
        dir_name(dir, sizeof dir, fd->oracle, fd->label, fd->pred, fd->pred2);
        snprintf(npy, sizeof npy, "%s/failures/%s/root:%06lld,first.npy", cp->o->out_dir, dir,
                 (long long)fd->root);
        fl_tensor t = {0};
        float *seed = img + (int64_t)(per * i) * cp->n, *mut = seed + (per - 1) * cp->n;
        for (int64_t k = 0; per == 2 && k < cp->n; k++) seed[k] = cp->q.e[fd->root].px[k] / 255.0f;
        if (fl_npy_read_tensor(npy, &t, NULL) == FL_OK && t.size == cp->n) {
            memcpy(mut, t.data, sizeof(float) * (size_t)cp->n);
            fl_scale_unapply(&cp->scale, mut, 1, cp->c, (int64_t)cp->h * cp->w);
        }
        fl_tensor_free(&t);
        char *l0 = lab[per * i], *l1 = lab[per * i + per - 1];
        if (per == 2) snprintf(l0, sizeof lab[0], "#%lld\n%s", (long long)fd->root,
                               class_name(cp, fd->label));
        if (fd->oracle == FZ_OR_DISAGREE)
            snprintf(l1, sizeof lab[0], "%s\nmodel2 %s", class_name(cp, fd->pred),
                     class_name(cp, fd->pred2));
        else if (per == 1)
            snprintf(l1, sizeof lab[0], "%.12s\n>%.12s", class_name(cp, fd->label),
                     fd->oracle == FZ_OR_NONFINITE ? "non-finite" : class_name(cp, fd->pred));
        else
            snprintf(l1, sizeof lab[0], "%s\n%s", class_name(cp, fd->pred),
                     fd->oracle == FZ_OR_NONFINITE ? "non-finite" : "");
        labels[per * i] = lab[per * i];
        labels[per * i + per - 1] = lab[per * i + per - 1];
    }
    if (!st) st = fl_image_grid_write(path, img, per * n, cp->c, cp->h, cp->w, 10, labels, e);
    free(img);
    free(lab);
    free(labels);
    return st;
}
