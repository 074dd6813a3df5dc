/* data.h — datasets in, images out.
 *
 * flare tests networks on image datasets. This module turns a short *spec string* into an
 * in-memory dataset of images in NCHW layout plus integer labels, handed out as batches of
 * scaled floats, and writes images back out as PNG files (single images, or labelled grids
 * for reports).
 *
 * Quick tour
 * ----------
 *     fl_scale sc;
 *     fl_err e;
 *     fl_dataset *d;
 *     if (fl_scale_parse("01", &sc, &e) != FL_OK ||
 *         fl_dataset_load("fashion-mnist:test", &sc, 0, &d, &e) != FL_OK) {
 *         fprintf(stderr, "%s\n", e.msg);          // names the file and what is wrong
 *         return 1;
 *     }
 *     // d->n == 10000, d->c == 1, d->h == d->w == 28, d->x8 holds the [n,1,28,28] pixels,
 *     // d->y[i] in 0..9, d->class_names[d->y[i]] == "Ankle boot", ...
 *     int64_t idx[2] = {0, 42};
 *     fl_tensor batch = {0};                       // data == NULL: gather allocates [2,1,28,28]
 *     fl_dataset_gather(d, idx, 2, &batch, NULL, &e);   // floats in [0,1]
 *     fl_image_grid_write("grid.png", batch.data, 2, 1, 28, 28, 2, NULL, &e);
 *     fl_tensor_free(&batch);
 *     fl_dataset_free(d);
 *
 * Spec strings (docs/data.md has the long version)
 * ------------------------------------------------
 *     fashion-mnist[:train|test]   /usr/share/datasets/fashion-mnist (Debian package
 *                                  dataset-fashion-mnist); no split means train
 *     mnist[:train|test]           /usr/share/datasets/mnist
 *     idx:IMAGES[,LABELS]          IDX files, raw or .gz (images idx3 uint8, labels idx1 uint8)
 *     PATH-idx3-ubyte[.gz]         same; labels taken from the sister "-labels-idx1-ubyte" file
 *     cifar10:DIR[:train|test]     CIFAR-10 binary batches in DIR (or DIR/cifar-10-batches-bin)
 *     PATH.bin                     one CIFAR-10 batch file
 *     npy:X.npy[,Y.npy]            X float32/uint8 [n,c,h,w] or [n,h,w]; Y integer [n]
 *     PATH.npy                     same; Y from the sister file when PATH ends in "x.npy"
 *     DIR                          folder of PNGs: one subfolder per class (sorted names are
 *                                  the classes), or PNGs directly in DIR (unlabelled)
 *
 * Scaling
 * -------
 * Stored pixels are 8-bit. They become floats by one of: [0,1] (v/255, the default), [-1,1]
 * (v/127.5-1), per-channel mean/std ((v/255-mean)/std), or none (raw 0..255). Float32 NPY
 * input is taken to be already in [0,1]: it is used as-is unless a scale is asked for, in
 * which case the same map is applied to it as to v/255.
 *
 * Storage
 * -------
 * 8-bit sources (IDX, CIFAR-10, PNG folders, uint8 NPY) stay 8-bit in memory: d->x8 holds the
 * raw pixels and the scale is applied only when samples are copied out (fl_dataset_gather,
 * fl_dataset_batch), through a 256-entry table per channel. Fashion-MNIST's training set is
 * then 47 MB instead of 188 MB of floats. Float sources (float32 NPY, fl_dataset_new) are
 * stored as scaled floats in d->x. Code that wants the whole float array at once calls
 * fl_dataset_to_float first.
 */
#ifndef FLARE_DATA_H
#define FLARE_DATA_H

#include "flare/tensor.h"

/* ---- scaling ------------------------------------------------------------------------------ */
typedef enum fl_scale_kind {
    FL_SCALE_01,      /* v/255 in [0,1] (default) */
    FL_SCALE_PM1,     /* v/127.5-1 in [-1,1] */
    FL_SCALE_MEANSTD, /* (v/255-mean[c])/std[c] */
    FL_SCALE_NONE     /* raw 0..255 */
} fl_scale_kind;

typedef struct fl_scale {
    fl_scale_kind kind;
    int n_ch;          /* FL_SCALE_MEANSTD: 1 (broadcast to every channel) or 3 */
    float mean[3], std[3];
} fl_scale;

/* "01", "pm1", "none", "meanstd:MEAN,STD" or "meanstd:M1,M2,M3,S1,S2,S3" (stds > 0). */
fl_status fl_scale_parse(const char *s, fl_scale *out, fl_err *e);
/* The inverse of fl_scale_parse, e.g. "meanstd:0.286,0.353"; returns buf. */
const char *fl_scale_str(const fl_scale *s, char *buf, size_t n);
/* lut[v] = the scaled float of 8-bit value v in channel ch (0 for a one-channel scale): how
 * pixels become model inputs. */
void fl_scale_lut(const fl_scale *s, int ch, float lut[256]);
/* Map scaled values back to [0,1] (8-bit value / 255) in place; x is [n,c,hw]. s == NULL
 * means [0,1] already. Used to turn model inputs back into pictures. */
void fl_scale_unapply(const fl_scale *s, float *x, int64_t n, int c, int64_t hw);

/* ---- datasets ----------------------------------------------------------------------------- */
typedef struct fl_dataset {
    int64_t n;           /* number of samples */
    int c, h, w;         /* channels (1 or 3 for images), height, width */
    /* The images, [n,c,h,w]. Invariant: exactly one of x and x8 is non-NULL, and it is the
     * storage. Read samples through fl_dataset_gather / fl_dataset_batch, which handle both. */
    float *x;            /* scaled floats (fl_alloc'd), or NULL for 8-bit storage */
    uint8_t *x8;         /* raw 8-bit pixels before scaling (malloc'd), or NULL */
    int32_t *y;          /* n labels; -1 where a sample has none */
    int has_labels;      /* 0: every y is -1 */
    int n_classes;       /* known classes (0 if unlabelled); labels are in [0, n_classes) */
    char **class_names;  /* n_classes names (decimal "0".."9" when the format has none) */
    char *source;        /* the resolved spec, e.g. "idx:/usr/.../t10k-images-idx3-ubyte.gz,..." */
    fl_scale scale;      /* how floats are made from the stored values */
    /* x8 storage: lut[r][v] is the scaled float of pixel value v, row r = channel for a
     * 3-channel mean/std scale, else 0. Filled from `scale` when the dataset is loaded. */
    float lut[3][256];
} fl_dataset;

/* Load a dataset from a spec (see above). scale NULL = [0,1] for 8-bit data and as-is for
 * float data; limit > 0 keeps only the first limit samples (in file / sorted-name order). */
fl_status fl_dataset_load(const char *spec, const fl_scale *scale, int64_t limit,
                          fl_dataset **out, fl_err *e);
/* An empty dataset with float storage (zeroed x, x8 NULL) and all labels -1, for code that
 * builds one itself. */
fl_status fl_dataset_new(int64_t n, int c, int h, int w, fl_dataset **out, fl_err *e);
void fl_dataset_free(fl_dataset *d);
/* A new dataset of the samples idx[0..n-1] of d, in that order: same storage kind, scale,
 * labels and class names. */
fl_status fl_dataset_subset(const fl_dataset *d, const int64_t *idx, int64_t n, fl_dataset **out,
                            fl_err *e);

/* Copy samples idx[0..n-1] as scaled floats into x and (if y != NULL) their labels into
 * y[0..n-1]. If x->data is NULL, x is allocated as [n,c,h,w] (release with fl_tensor_free);
 * otherwise x must already have exactly that shape. Indices out of range are an FL_ERR_ARG. */
fl_status fl_dataset_gather(const fl_dataset *d, const int64_t *idx, int64_t n, fl_tensor *x,
                            int32_t *y, fl_err *e);
/* Copy samples start..start+n-1 as scaled floats into x; x as for fl_dataset_gather. The
 * range must lie inside the dataset (FL_ERR_ARG otherwise). Labels are d->y + start. */
fl_status fl_dataset_batch(const fl_dataset *d, int64_t start, int64_t n, fl_tensor *x,
                           fl_err *e);
/* Switch d to float storage: scale x8 into a new x and free x8 (x8 is NULL afterwards; the
 * 8-bit pixels are gone). A no-op for float storage. Costs 4 bytes per pixel for good, so
 * only for code that needs the whole array; batch-wise code should gather instead. */
fl_status fl_dataset_to_float(fl_dataset *d, fl_err *e);
/* A [n,c,h,w] view of samples start..start+n-1 (no copy; clamped to the dataset). Float
 * storage only: for 8-bit storage (d->x == NULL) it returns an empty tensor, data NULL and
 * ndim 0 — use fl_dataset_batch, or fl_dataset_to_float first. */
fl_tensor fl_dataset_view(const fl_dataset *d, int64_t start, int64_t n);

/* ---- IDX (MNIST family) ------------------------------------------------------------------- */
typedef struct fl_idx {
    int ndim;
    int64_t dims[FL_MAX_DIMS];
    int64_t count;  /* product of dims */
    uint8_t *data;  /* count bytes (only the unsigned-byte IDX type 0x08 is supported) */
} fl_idx;

/* Parse an in-memory IDX file; name is used in error messages. Copies the data. */
fl_status fl_idx_parse(const uint8_t *buf, size_t len, const char *name, fl_idx *out, fl_err *e);
fl_status fl_idx_read(const char *path, fl_idx *out, fl_err *e); /* raw or .gz */
/* Write an unsigned-byte IDX file, gzip-compressed when path ends in ".gz"; atomic. */
fl_status fl_idx_write(const char *path, int ndim, const int64_t *dims, const uint8_t *data,
                       fl_err *e);
void fl_idx_free(fl_idx *a);

/* ---- NPY ---------------------------------------------------------------------------------- */
typedef enum fl_dtype { FL_DT_F32, FL_DT_U8, FL_DT_I32, FL_DT_I64 } fl_dtype;
size_t fl_dtype_size(fl_dtype dt);
const char *fl_dtype_name(fl_dtype dt); /* "float32", "uint8", ... */

typedef struct fl_npy {
    fl_dtype dtype;
    int ndim;
    int64_t shape[FL_MAX_DIMS];
    int64_t count;  /* product of shape */
    void *data;     /* count elements, C order, native (little-endian) byte order; fl_alloc'd */
} fl_npy;

/* Parse an in-memory .npy file (versions 1-3, C order, little-endian float32 / uint8 / int32 /
 * int64). Anything else is a clear FL_ERR_UNSUPPORTED or FL_ERR_FORMAT naming `name`. */
fl_status fl_npy_parse(const uint8_t *buf, size_t len, const char *name, fl_npy *out, fl_err *e);
fl_status fl_npy_read(const char *path, fl_npy *out, fl_err *e); /* also reads .npy.gz */
/* Read any supported dtype converted to float32 (t is allocated; fl_tensor_free it). */
fl_status fl_npy_read_tensor(const char *path, fl_tensor *t, fl_err *e);
/* Write a version 1.0 .npy file atomically. */
fl_status fl_npy_write(const char *path, fl_dtype dt, int ndim, const int64_t *shape,
                       const void *data, fl_err *e);
fl_status fl_npy_write_tensor(const char *path, const fl_tensor *t, fl_err *e);
void fl_npy_free(fl_npy *a);

/* ---- PNG output --------------------------------------------------------------------------- */
/* Write one image img[c,h,w] (c = 1 gray or 3 RGB) as an 8-bit PNG, mapping lo..hi to 0..255
 * (values outside are clamped, NaN becomes 0). Atomic (tmp file + rename). */
fl_status fl_png_write(const char *path, const float *img, int c, int h, int w, float lo,
                       float hi, fl_err *e);
/* A grid of n images imgs[n,c,h,w] with values in [0,1], cols per row. With labels (n short
 * strings, NULL entries allowed; '\n' starts a second line) each tile gets its label drawn
 * under it in a built-in 5x7 font; small images are enlarged by an integer factor so the
 * text fits. Atomic. */
fl_status fl_image_grid_write(const char *path, const float *imgs, int n, int c, int h, int w,
                              int cols, const char *const *labels, fl_err *e);
/* The label every flare grid gives image `index` of d (nn sa, nn select): three lines,
 * "#INDEX" followed by extra when not NULL (e.g. a score), the true class's name ("?" when d
 * is unlabelled), and "->" with the name of the predicted class `pred` (its number when d
 * names no classes). Written to buf (n bytes, cut if longer). */
void fl_grid_label(const fl_dataset *d, int64_t index, int pred, const char *extra, char *buf,
                   size_t n);
/* Same, for images scaled with `scale` (mapped back to [0,1] first; NULL = [0,1]). */
fl_status fl_image_grid_write_scaled(const char *path, const float *imgs, int n, int c, int h,
                                     int w, int cols, const char *const *labels,
                                     const fl_scale *scale, fl_err *e);

#endif
