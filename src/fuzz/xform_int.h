/* Internals of the image transformations (src/fuzz/xform*.c; not part of the public API). */
#ifndef FLARE_XFORM_INT_H
#define FLARE_XFORM_INT_H

#include <math.h>
#include <stdint.h>

/* Round to nearest (ties to even, like OpenCV's cvRound / saturate_cast) and clip to 0..255;
 * NaN gives 0. */
static inline uint8_t fl_xform__u8(double v) {
    if (!(v > 0)) return 0;
    if (v >= 255) return 255;
    return (uint8_t)rint(v);
}

/* The blur kinds 1..10 (src/fuzz/xform_blur.c); any other id copies src. */
void fl_xform__blur(int id, const uint8_t *src, uint8_t *dst, int c, int h, int w);

#endif
