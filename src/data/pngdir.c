/* Folders of PNG images: DIR/CLASS/NAME.png, classes = subfolder names in strcmp order, images
 * in each class in strcmp order too (so a load is reproducible whatever readdir returns).
 * A folder with PNGs and no subfolders is an unlabelled dataset.
 *
 * Two passes: the first reads only the PNG headers to check that every image has the same
 * size (naming the first one that does not) and to decide gray versus RGB — RGB if any image
 * has colour, gray images are then expanded; the second decodes into the dataset. libpng's
 * "simplified" API does all the conversions (palette, 16-bit, gray+alpha); transparent
 * pixels are composited onto black.
 */
#include <dirent.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "data/data_int.h"

typedef struct {
    char **v;
    int n, cap;
} strlist;

static int sl_push(strlist *l, const char *s) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        char **v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return 0;
        l->v = v;
        l->cap = cap;
    }
    if (!(l->v[l->n] = fl__strdup(s))) return 0;
    l->n++;
    return 1;
}

static void sl_free(strlist *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_png_name(const char *s) {
    size_t n = strlen(s);
    return n > 4 && !strcasecmp(s + n - 4, ".png");
}

/* Names in dir (no hidden ones): subfolders into dirs, paths of .png files appended to pngs; both
 * sorted (only the part this call added to pngs). */
static fl_status list_dir(const char *dir, strlist *dirs, strlist *pngs, fl_err *e) {
    DIR *dp = opendir(dir);
    if (!dp) return fl_fail(e, FL_ERR_IO, "%s: cannot open directory", dir);
    struct dirent *de;
    char path[4096];
    int start = pngs->n;
    fl_status st = FL_OK;
    while ((de = readdir(dp))) {
        if (de->d_name[0] == '.') continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path) {
            st = FL_ERR_ARG;
            break;
        }
        if (dirs && fl__is_dir(path)) {
            if (!sl_push(dirs, de->d_name)) st = FL_ERR_NOMEM;
        } else if (is_png_name(de->d_name) && fl__is_file(path)) {
            if (!sl_push(pngs, path)) st = FL_ERR_NOMEM;
        }
        if (st) break;
    }
    closedir(dp);
    if (st == FL_ERR_ARG) return fl_fail(e, st, "%s: a file name in it makes a path too long", dir);
    if (st) return fl_fail(e, st, "%s: out of memory listing the directory", dir);
    if (dirs && dirs->n > 1) qsort(dirs->v, (size_t)dirs->n, sizeof(char *), cmp_str);
    if (pngs->n - start > 1)
        qsort(pngs->v + start, (size_t)(pngs->n - start), sizeof(char *), cmp_str);
    return FL_OK;
}

fl_status fl__load_pngdir(const char *dir, const fl_scale *s, int64_t limit, fl_dataset **out,
                          fl_err *e) {
    strlist classes = {0}, files = {0};
    int32_t *labels = NULL;
    uint8_t *pix = NULL;
    fl_dataset *d = NULL;
    *out = NULL;
    fl_status st = list_dir(dir, &classes, &files, e);
    if (st != FL_OK) goto done;
    int labelled = classes.n > 0;
    if (labelled) {
        /* Top-level PNGs next to class folders would have no class: ignore them. */
        for (int i = 0; i < files.n; i++) free(files.v[i]);
        files.n = 0;
    }
    int64_t cap = 0;
    for (int k = 0; k < classes.n; k++) {
        char sub[4096];
        int before = files.n;
        if (snprintf(sub, sizeof sub, "%s/%s", dir, classes.v[k]) >= (int)sizeof sub) {
            st = fl_fail(e, FL_ERR_ARG, "%s: class folder name makes a path too long", dir);
            goto done;
        }
        if ((st = list_dir(sub, NULL, &files, e)) != FL_OK) goto done;
        if (files.n > cap) {
            int32_t *l = realloc(labels, (size_t)files.n * sizeof *l);
            if (!l) {
                st = fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", dir);
                goto done;
            }
            labels = l;
            cap = files.n;
        }
        for (int i = before; i < files.n; i++) labels[i] = k;
    }
    if (files.n == 0) {
        st = fl_fail(e, FL_ERR_NOTFOUND, "%s: no PNG images found (expected %s/CLASS/*.png or "
                     "%s/*.png)", dir, dir, dir);
        goto done;
    }
    int64_t n = files.n;
    if (limit > 0 && limit < n) n = limit;
    /* Pass 1: headers only. */
    int w = 0, h = 0, color = 0;
    for (int64_t i = 0; i < n; i++) {
        png_image im;
        memset(&im, 0, sizeof im);
        im.version = PNG_IMAGE_VERSION;
        if (!png_image_begin_read_from_file(&im, files.v[i])) {
            st = fl_fail(e, FL_ERR_FORMAT, "%s: not a readable PNG: %s", files.v[i], im.message);
            png_image_free(&im);
            goto done;
        }
        if (i == 0) {
            w = (int)im.width;
            h = (int)im.height;
        } else if ((int)im.width != w || (int)im.height != h) {
            st = fl_fail(e, FL_ERR_SHAPE, "%s: image is %ux%u but %s is %dx%d; all images in a "
                         "dataset must have the same size", files.v[i], im.width, im.height,
                         files.v[0], w, h);
            png_image_free(&im);
            goto done;
        }
        if (im.format & PNG_FORMAT_FLAG_COLOR) color = 1;
        png_image_free(&im);
    }
    int c = color ? 3 : 1;
    if ((st = fl__scale_check(s, c, dir, e)) != FL_OK) goto done;
    if ((st = fl__dataset_new_u8(n, c, h, w, s, NULL, &d, e)) != FL_OK) goto done;
    int64_t hw = (int64_t)h * w;
    if (!(pix = malloc((size_t)(hw * c)))) {
        st = fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", dir);
        goto done;
    }
    /* Pass 2: decode as 8-bit gray or RGB (interleaved), transpose into the CHW storage. */
    for (int64_t i = 0; i < n; i++) {
        png_image im;
        memset(&im, 0, sizeof im);
        im.version = PNG_IMAGE_VERSION;
        memset(pix, 0, (size_t)(hw * c));
        int ok = png_image_begin_read_from_file(&im, files.v[i]);
        if (ok && ((int)im.width != w || (int)im.height != h)) ok = 0; /* changed under us */
        if (ok) {
            im.format = color ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
            ok = png_image_finish_read(&im, NULL, pix, 0, NULL);
        }
        if (!ok) {
            st = fl_fail(e, FL_ERR_FORMAT, "%s: cannot decode PNG: %s", files.v[i],
                         im.message[0] ? im.message : "size changed");
            png_image_free(&im);
            goto done;
        }
        png_image_free(&im);
        uint8_t *chw = d->x8 + i * c * hw;
        for (int ch = 0; ch < c; ch++)
            for (int64_t k = 0; k < hw; k++) chw[ch * hw + k] = pix[k * c + ch];
        d->y[i] = labelled ? labels[i] : -1;
    }
    if (labelled && (st = fl__set_classes(d, classes.n, (const char *const *)classes.v, e)))
        goto done;
    if ((st = fl__finish_load(d, dir, NULL, dir, NULL, e)) != FL_OK) goto done;
    *out = d;
    d = NULL;
done:
    fl_dataset_free(d);
    sl_free(&classes);
    sl_free(&files);
    free(labels);
    free(pix);
    return st;
}
