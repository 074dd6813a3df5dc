/* data_int.h — helpers shared by the files of the data module; not part of the public API.
 *
 * Every format loader ends the same way: it has n images of c x h x w 8-bit (or float)
 * pixels and maybe labels, and wants an fl_dataset: 8-bit pixels kept as they are (x8, with
 * the scale's lookup tables), floats scaled in place (x). object.c owns the dataset object
 * and scale.c the scaling rules, so each lives in one place.
 */
#ifndef FLARE_DATA_INT_H
#define FLARE_DATA_INT_H

#include "flare/data.h"

/* Largest image dimension and sample count accepted from any header. They are far above any
 * real dataset and keep every later product (n*c*h*w*4 bytes) well inside int64_t/size_t. */
#define FL_DATA_MAX_DIM ((int64_t)1 << 16)
#define FL_DATA_MAX_N ((int64_t)1 << 31)
/* Largest payload (bytes) any header may announce before we refuse to allocate it. */
#define FL_DATA_MAX_BYTES ((int64_t)1 << 36)

int fl__ends_with(const char *s, const char *suffix);
char *fl__strdup(const char *s);
int fl__is_dir(const char *path);
int fl__is_file(const char *path);

/* Multiply a*b into *out unless it overflows int64 or passes `cap`; returns 0 on failure. */
int fl__mul_checked(int64_t a, int64_t b, int64_t cap, int64_t *out);

/* Scale floats already in [0,1] in place (FL_SCALE_01 and _NONE leave them as they are). */
void fl__scale_f32(const fl_scale *s, float *x, int64_t n, int c, int64_t hw);
/* Check that a mean/std scale fits c channels. */
fl_status fl__scale_check(const fl_scale *s, int c, const char *name, fl_err *e);

/* A dataset with 8-bit storage: x8 = pixels ([n,c,h,w], malloc'd; adopted, and freed even
 * on failure) or, when pixels is NULL, a fresh zeroed buffer; scale s and its lookup tables
 * set; all labels -1. */
fl_status fl__dataset_new_u8(int64_t n, int c, int h, int w, const fl_scale *s, uint8_t *pixels,
                             fl_dataset **out, fl_err *e);
/* fl__dataset_new_u8 over the first n of the `have` images in *pixels (the tail cut off: a
 * --limit); *pixels is NULL afterwards, adopted or freed. */
fl_status fl__dataset_adopt_u8(int64_t have, int64_t n, int c, int h, int w, const fl_scale *s,
                               uint8_t **pixels, fl_dataset **out, fl_err *e);

/* Give d n_classes names: `names` if not NULL, else "0", "1", ... */
fl_status fl__set_classes(fl_dataset *d, int n_classes, const char *const *names, fl_err *e);
/* d->source = "kind:first[,second]" (just first when kind is NULL). */
fl_status fl__set_source(fl_dataset *d, const char *kind, const char *first, const char *second,
                         fl_err *e);
/* The end of every format loader: set has_labels/n_classes from d->y (max label + 1) with
 * decimal names, unless the caller already set n_classes (labels must be -1 or in [0, 65536);
 * an error names labels_name), then fl__set_source. */
fl_status fl__finish_load(fl_dataset *d, const char *labels_name, const char *kind,
                          const char *first, const char *second, fl_err *e);

/* Format loaders: each fills a fresh dataset (scale already resolved, never NULL). */
fl_status fl__load_idx(const char *images, const char *labels, const fl_scale *s,
                       int64_t limit, fl_dataset **out, fl_err *e);
fl_status fl__load_cifar(const char *const *files, int n_files, const fl_scale *s,
                         int64_t limit, fl_dataset **out, fl_err *e);
fl_status fl__load_npy(const char *xpath, const char *ypath, const fl_scale *s, int scale_given,
                       int64_t limit, fl_dataset **out, fl_err *e);
fl_status fl__load_pngdir(const char *dir, const fl_scale *s, int64_t limit, fl_dataset **out,
                          fl_err *e);

/* The 5x7 glyph of ch: 7 rows of 5 bits, MSB leftmost (font.c). */
void fl__glyph(unsigned char ch, uint8_t rows[7]);

/* gzip-compress buf into a malloc'd buffer (for .gz outputs). */
fl_status fl__gzip(const uint8_t *buf, size_t len, const char *name, uint8_t **out,
                   size_t *out_len, fl_err *e);

#endif
