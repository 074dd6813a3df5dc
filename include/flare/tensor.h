/* tensor.h — float32 tensors (row-major, NCHW for images) and the linear-algebra kernels
 * every op is built from.
 *
 * A tensor is a view: shape + a pointer. Who owns the data is decided by the container
 * (fl_model owns its activations and parameters; a dataset owns its images). Tensors made
 * with fl_tensor_alloc own their data and are released with fl_tensor_free.
 *
 * Integer tensors from ONNX (shapes, indices) are stored as floats: every integer flare
 * needs to read from them is far below 2^24, where float is exact.
 */
#ifndef FLARE_TENSOR_H
#define FLARE_TENSOR_H

#include "flare/flare.h"

#define FL_MAX_DIMS 8

typedef struct fl_tensor {
    int ndim;
    int64_t shape[FL_MAX_DIMS];
    int64_t size; /* product of shape (1 for a scalar, ndim == 0) */
    float *data;
} fl_tensor;

int64_t fl_shape_size(int ndim, const int64_t *shape);
/* Set ndim/shape/size without touching data. */
void fl_tensor_set_shape(fl_tensor *t, int ndim, const int64_t *shape);
/* Allocate zeroed, 64-byte aligned data for the given shape. */
fl_status fl_tensor_alloc(fl_tensor *t, int ndim, const int64_t *shape);
/* Make t an owned deep copy of src. */
fl_status fl_tensor_copy(fl_tensor *t, const fl_tensor *src);
void fl_tensor_free(fl_tensor *t);
int fl_tensor_same_shape(const fl_tensor *a, const fl_tensor *b);
/* "[64,1,28,28]" into buf; returns buf. */
const char *fl_shape_str(const fl_tensor *t, char *buf, size_t n);
/* Index of the first non-finite element, or -1. */
int64_t fl_tensor_find_nonfinite(const fl_tensor *t);

/* 64-byte aligned allocation helpers (NULL on failure; zeroed). */
void *fl_alloc(size_t bytes);
void fl_free(void *p);

/* ---- kernels ------------------------------------------------------------------------------- */
/* C[M,N] = alpha * op(A) * op(B) + beta * C, row-major; op(X) = X or X^T. The one place flare
 * calls cblas_sgemm. */
void fl_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc);
/* GFLOP/s of fl_sgemm on square n x n matrices at the current thread count (the median of
 * `reps` products after one untimed): the machine's floor a convolution is measured against. */
double fl_sgemm_gflops(int n, int reps);

/* 2-D convolution geometry for one image. */
typedef struct fl_conv2d_geom {
    int c, h, w;              /* input channels (per group), height, width */
    int kh, kw;               /* kernel */
    int sh, sw;               /* strides */
    int pt, pl, pb, pr;       /* pads: top, left, bottom, right */
    int dh, dw;               /* dilations */
    int oh, ow;               /* output height, width */
} fl_conv2d_geom;

/* cols[c*kh*kw, oh*ow] from img[c, h, w] (zero padding). */
void fl_im2col(float *cols, const float *img, const fl_conv2d_geom *g);
/* img[c, h, w] += fold of cols[c*kh*kw, oh*ow] (adjoint of im2col). */
void fl_col2im(float *img, const float *cols, const fl_conv2d_geom *g);
/* The same with cols rows ld floats apart (ld >= oh*ow): several images side by side in one
 * cols matrix, image j at column j*oh*ow. */
void fl_im2col_ld(float *cols, size_t ld, const float *img, const fl_conv2d_geom *g);
void fl_col2im_ld(float *img, const float *cols, size_t ld, const fl_conv2d_geom *g);

#endif
