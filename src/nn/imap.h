/* Internal: index maps, the kernel shared by the ops that only move elements along each
 * dimension independently — Pad, Slice, Split.
 *
 * An index map describes y[o_0..o_{r-1}] = x[src] with src = sum_d map[d][o_d], where
 * map[d][o] is the input element offset (index times stride) that output position o of dim d
 * reads, or -1 when every element in that slab is the fill value (constant padding). Because
 * the dims are independent, the map costs sum_d shape[d] entries instead of one per element,
 * and forward and backward are one walk over output rows. In the last dim, the longest
 * stretch that reads consecutive input elements (the unpadded middle, a step-1 slice) is
 * copied with memcpy; the rest goes element by element through the map. */
#ifndef FLARE_NN_IMAP_H
#define FLARE_NN_IMAP_H

#include "flare/model.h"

typedef struct fl_imap {
    int nd;                        /* rank of the output (>= 1; a 0-D output is planned as [1]) */
    int64_t shape[FL_MAX_DIMS];    /* output shape */
    int64_t *map[FL_MAX_DIMS];     /* map[d][0..shape[d]): input offset or -1 (fill) */
    int64_t run_lo, run_hi;        /* last dim: map[last][j] = map[last][run_lo] + j - run_lo */
    int64_t *buf;                  /* all maps, one allocation */
    int64_t cap;
} fl_imap;

/* Size the maps for an output of this shape (ndim 0 is treated as [1]); the caller then
 * writes map[d][o] as an input *index* along dim d (or -1) and calls fl_imap_finish with the
 * input's shape, which turns indices into offsets. */
fl_status fl_imap_plan(fl_imap *im, int ndim, const int64_t *out_shape, fl_err *e);
void fl_imap_finish(fl_imap *im, const int64_t *in_shape);
void fl_imap_free(fl_imap *im);
/* Plan and finish in one call for numpy broadcasting: x (rank x_ndim <= ndim, right-aligned,
 * each dim 1 or equal to the output's) read at every output position; a size-1 dim repeats. */
fl_status fl_imap_broadcast(fl_imap *im, int ndim, const int64_t *out_shape, int x_ndim,
                            const int64_t *x_shape, fl_err *e);

/* y = gather(x), fill where the map says -1. */
void fl_imap_forward(const fl_imap *im, const float *x, float *y, float fill);
/* dx += scatter(dy): an input element read by several outputs (reflect, edge) gets their sum.
 * Returns the sum of dy over the filled positions (the gradient of the fill value). */
double fl_imap_backward(const fl_imap *im, const float *dy, float *dx);

#endif
