/* The blur kinds of FL_XF_BLUR, as DeepTest's / NeuraL-Coverage's image_blur calls OpenCV:
 *   1 box 3x3, 2 box 4x4, 3 box 5x5, 9 box 6x6                 cv2.blur(img, (k, k))
 *   4 Gaussian 3x3, 5 Gaussian 5x5, 6 Gaussian 7x7             cv2.GaussianBlur(img, (k, k), 0)
 *   7 median 3, 8 median 5                                     cv2.medianBlur(img, k)
 *   10 bilateral d 9, sigmaColor 75, sigmaSpace 75             cv2.bilateralFilter(img, 9, 75, 75)
 *
 * Borders as OpenCV's defaults: BORDER_REFLECT_101 (gfedcb|abcdefgh|gfedcba) for box, Gaussian
 * and bilateral; BORDER_REPLICATE for the median (medianBlur's only mode). An even box kernel
 * is anchored at k/2 as OpenCV's (-1,-1) anchor is: 4x4 covers offsets -2..1, 6x6 -3..2.
 * Gaussian kernels with sigma 0 and k <= 7 are OpenCV's fixed table (small_gaussian_tab in
 * getGaussianKernel), not the sigma rule 0.3*((k-1)*0.5-1)+0.8: [1 2 1]/4, [1 4 6 4 1]/16,
 * [2 7 14 18 14 7 2]/64. Each output is computed directly from its footprint (no scratch
 * image, no allocation); rounding is fl_xform__u8's. */
#include <pthread.h>
#include <string.h>

#include "fuzz/xform_int.h"

static inline int refl101(int i, int n) {
    if (n == 1) return 0;
    while (i < 0 || i >= n) i = i < 0 ? -i : 2 * n - 2 - i;
    return i;
}

static inline int clampi(int i, int n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

/* The source rows of output row y for offsets lo..hi (at most 7), border applied once per
 * row; inside the image a column needs no border either (the `inner` test below). */
#define MAXK 7
static void rows_of(const uint8_t *s, int y, int lo, int hi, int h, int w, int replicate,
                    const uint8_t **row) {
    for (int dy = lo; dy <= hi; dy++)
        row[dy - lo] = s + (size_t)(replicate ? clampi(y + dy, h) : refl101(y + dy, h)) * w;
}

static void box(int k, const uint8_t *s, uint8_t *d, int h, int w) {
    int lo = -(k / 2), hi = k - 1 - k / 2;
    double scale = 1.0 / (k * k);
    const uint8_t *row[MAXK];
    for (int y = 0; y < h; y++) {
        rows_of(s, y, lo, hi, h, w, 0, row);
        for (int x = 0; x < w; x++) {
            int sum = 0;
            if (x + lo >= 0 && x + hi < w) {
                for (int j = 0; j < k; j++)
                    for (int dx = lo; dx <= hi; dx++) sum += row[j][x + dx];
            } else {
                for (int j = 0; j < k; j++)
                    for (int dx = lo; dx <= hi; dx++) sum += row[j][refl101(x + dx, w)];
            }
            d[(size_t)y * w + x] = fl_xform__u8(sum * scale);
        }
    }
}

static void gauss(int k, const uint8_t *s, uint8_t *d, int h, int w) {
    static const int g3[] = {1, 2, 1}, g5[] = {1, 4, 6, 4, 1}, g7[] = {2, 7, 14, 18, 14, 7, 2};
    const int *g = k == 3 ? g3 : k == 5 ? g5 : g7;
    int r = k / 2, one = k == 3 ? 4 : k == 5 ? 16 : 64;
    double scale = 1.0 / ((double)one * one); /* a power of two: exact */
    const uint8_t *row[MAXK];
    for (int y = 0; y < h; y++) {
        rows_of(s, y, -r, r, h, w, 0, row);
        for (int x = 0; x < w; x++) {
            const int inner = x - r >= 0 && x + r < w;
            int sum = 0;
            for (int j = 0; j < k; j++) {
                int rs = 0;
                if (inner)
                    for (int dx = -r; dx <= r; dx++) rs += g[dx + r] * row[j][x + dx];
                else
                    for (int dx = -r; dx <= r; dx++) rs += g[dx + r] * row[j][refl101(x + dx, w)];
                sum += g[j] * rs;
            }
            d[(size_t)y * w + x] = fl_xform__u8(sum * scale);
        }
    }
}

static void median(int k, const uint8_t *s, uint8_t *d, int h, int w) {
    int r = k / 2, n = k * k;
    uint8_t v[25];
    const uint8_t *row[MAXK];
    for (int y = 0; y < h; y++) {
        rows_of(s, y, -r, r, h, w, 1, row);
        for (int x = 0; x < w; x++) {
            int m = 0;
            for (int j = 0; j < k; j++)
                for (int dx = -r; dx <= r; dx++) {
                    uint8_t a = row[j][clampi(x + dx, w)];
                    int i = m++;
                    while (i > 0 && v[i - 1] > a) { /* insertion sort */
                        v[i] = v[i - 1];
                        i--;
                    }
                    v[i] = a;
                }
            d[(size_t)y * w + x] = v[n / 2];
        }
    }
}

/* bilateralFilter_8u: radius d/2 = 4, the taps with sqrt(i^2 + j^2) <= 4 (49 of 81), space
 * weight exp(-r^2 / (2 * 75^2)), colour weight exp(-D^2 / (2 * 75^2)) where D is the sum over
 * channels of |v - v0| (one weight for all channels of a tap), float weights and sums as
 * OpenCV's. */
#define BL_RADIUS 4
#define BL_SIGMA 75.0
#define BL_MAXC 4
static float bl_color[256 * BL_MAXC];
static float bl_space[(2 * BL_RADIUS + 1) * (2 * BL_RADIUS + 1)];
static int bl_dy[(2 * BL_RADIUS + 1) * (2 * BL_RADIUS + 1)];
static int bl_dx[(2 * BL_RADIUS + 1) * (2 * BL_RADIUS + 1)];
static int bl_n;
static pthread_once_t bl_once = PTHREAD_ONCE_INIT;

static void bl_init(void) {
    double coeff = -0.5 / (BL_SIGMA * BL_SIGMA);
    for (int i = 0; i < 256 * BL_MAXC; i++) bl_color[i] = (float)exp((double)i * i * coeff);
    for (int i = -BL_RADIUS; i <= BL_RADIUS; i++)
        for (int j = -BL_RADIUS; j <= BL_RADIUS; j++) {
            double r = sqrt((double)i * i + (double)j * j);
            if (r > BL_RADIUS) continue;
            bl_space[bl_n] = (float)exp(r * r * coeff);
            bl_dy[bl_n] = i;
            bl_dx[bl_n++] = j;
        }
}

/* c <= BL_MAXC */
static void bilateral(const uint8_t *s, uint8_t *d, int c, int h, int w) {
    pthread_once(&bl_once, bl_init);
    size_t plane = (size_t)h * w;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            size_t o0 = (size_t)y * w + x;
            float sum[BL_MAXC] = {0}, wsum = 0;
            for (int k = 0; k < bl_n; k++) {
                size_t o = (size_t)refl101(y + bl_dy[k], h) * w + refl101(x + bl_dx[k], w);
                int dist = 0;
                for (int ch = 0; ch < c; ch++) {
                    int diff = (int)s[ch * plane + o] - (int)s[ch * plane + o0];
                    dist += diff < 0 ? -diff : diff;
                }
                float wt = bl_space[k] * bl_color[dist];
                wsum += wt;
                for (int ch = 0; ch < c; ch++) sum[ch] += wt * s[ch * plane + o];
            }
            for (int ch = 0; ch < c; ch++)
                d[ch * plane + o0] = fl_xform__u8((double)(sum[ch] / wsum));
        }
}

void fl_xform__blur(int id, const uint8_t *src, uint8_t *dst, int c, int h, int w) {
    size_t plane = (size_t)h * w;
    if (id == 10) {
        if (c <= BL_MAXC) {
            bilateral(src, dst, c, h, w);
            return;
        }
        /* more than 4 channels: each channel filtered on its own */
        for (int ch = 0; ch < c; ch++) bilateral(src + ch * plane, dst + ch * plane, 1, h, w);
        return;
    }
    for (int ch = 0; ch < c; ch++) {
        const uint8_t *s = src + ch * plane;
        uint8_t *d = dst + ch * plane;
        switch (id) {
        case 1: box(3, s, d, h, w); break;
        case 2: box(4, s, d, h, w); break;
        case 3: box(5, s, d, h, w); break;
        case 9: box(6, s, d, h, w); break;
        case 4: gauss(3, s, d, h, w); break;
        case 5: gauss(5, s, d, h, w); break;
        case 6: gauss(7, s, d, h, w); break;
        case 7: median(3, s, d, h, w); break;
        case 8: median(5, s, d, h, w); break;
        default: memcpy(d, s, plane); break;
        }
    }
}
