/* PNG output: single images and labelled grids.
 *
 * Everything is rendered into an 8-bit interleaved buffer first, encoded in memory with
 * libpng's simplified API, and written with fl_file_write_atomic, so a crash or a full disk
 * never leaves a half-written PNG where a report expects a picture.
 */
#include <math.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_int.h"

#define GAP 2         /* pixels between tiles and around the grid */
#define CELL_W 6      /* glyph advance: 5 pixels + 1 of spacing */
#define LINE_H 9      /* line advance: 7 pixels + 2 of spacing */
#define MAX_LINES 3   /* label lines drawn per tile */
#define MAX_SIDE (1 << 15)

static uint8_t to_u8(float v, float lo, float hi) {
    float t = (v - lo) / (hi - lo) * 255.0f;
    if (!(t > 0.0f)) return 0; /* also NaN */
    if (t >= 255.0f) return 255;
    return (uint8_t)lrintf(t);
}

/* Encode pix[h][w][c] (c = 1 or 3) and write it atomically. */
static fl_status write_u8(const char *path, const uint8_t *pix, int c, int h, int w, fl_err *e) {
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)w;
    im.height = (png_uint_32)h;
    im.format = c == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    png_alloc_size_t size = 0;
    if (!png_image_write_get_memory_size(im, size, 0, pix, 0, NULL)) {
        fl_status st = fl_fail(e, FL_ERR_IO, "%s: PNG encoding failed: %s", path, im.message);
        png_image_free(&im);
        return st;
    }
    uint8_t *mem = malloc(size);
    if (!mem) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
    if (!png_image_write_to_memory(&im, mem, &size, 0, pix, 0, NULL)) {
        free(mem);
        fl_status st = fl_fail(e, FL_ERR_IO, "%s: PNG encoding failed: %s", path, im.message);
        png_image_free(&im);
        return st;
    }
    fl_status st = fl_file_write_atomic(path, mem, size, e);
    free(mem);
    return st;
}

fl_status fl_png_write(const char *path, const float *img, int c, int h, int w, float lo,
                       float hi, fl_err *e) {
    if (c != 1 && c != 3)
        return fl_fail(e, FL_ERR_ARG, "%s: PNG needs 1 (gray) or 3 (RGB) channels, not %d", path,
                       c);
    if (h < 1 || w < 1 || h > MAX_SIDE || w > MAX_SIDE)
        return fl_fail(e, FL_ERR_ARG, "%s: bad image size %dx%d", path, w, h);
    if (!(hi > lo) || !isfinite(lo) || !isfinite(hi))
        return fl_fail(e, FL_ERR_ARG, "%s: bad value range [%g, %g]", path, lo, hi);
    size_t hw = (size_t)h * (size_t)w;
    uint8_t *pix = malloc(hw * (size_t)c);
    if (!pix) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
    for (int ch = 0; ch < c; ch++)
        for (size_t k = 0; k < hw; k++)
            pix[k * (size_t)c + (size_t)ch] = to_u8(img[(size_t)ch * hw + k], lo, hi);
    fl_status st = write_u8(path, pix, c, h, w, e);
    free(pix);
    return st;
}

/* Draw text (up to MAX_LINES lines) in black into the box [x0,x0+bw) x [y0, ...) of pix. */
static void draw_text(uint8_t *pix, int c, int W, int x0, int y0, int bw, const char *text) {
    int line = 0, col = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p && line < MAX_LINES; p++) {
        if (*p == '\n') {
            line++;
            col = 0;
            continue;
        }
        if ((*p & 0xC0) == 0x80) continue; /* UTF-8 continuation: one box per character */
        int gx = x0 + col * CELL_W, gy = y0 + line * LINE_H;
        col++;
        if (gx + 5 > x0 + bw) continue; /* clip at the tile edge */
        uint8_t rows[7];
        fl__glyph(*p, rows);
        for (int r = 0; r < 7; r++)
            for (int b = 0; b < 5; b++)
                if (rows[r] & (0x10 >> b))
                    for (int ch = 0; ch < c; ch++)
                        pix[((size_t)(gy + r) * (size_t)W + (size_t)(gx + b)) * (size_t)c +
                            (size_t)ch] = 0;
    }
}

static int count_lines(const char *s) {
    int n = 1;
    for (; *s; s++) n += *s == '\n';
    return n < MAX_LINES ? n : MAX_LINES;
}

fl_status fl_image_grid_write(const char *path, const float *imgs, int n, int c, int h, int w,
                              int cols, const char *const *labels, fl_err *e) {
    if (c != 1 && c != 3)
        return fl_fail(e, FL_ERR_ARG, "%s: grid images need 1 or 3 channels, not %d", path, c);
    if (n < 1 || h < 1 || w < 1 || h > MAX_SIDE || w > MAX_SIDE)
        return fl_fail(e, FL_ERR_ARG, "%s: bad grid of %d images of %dx%d", path, n, w, h);
    if (cols <= 0) /* auto: roughly square */
        for (cols = 1; (int64_t)cols * cols < n; cols++) {}
    if (cols > n) cols = n;
    int rows = (n + cols - 1) / cols, lines = 0;
    for (int i = 0; labels && i < n; i++)
        if (labels[i] && count_lines(labels[i]) > lines) lines = count_lines(labels[i]);
    /* With labels, enlarge small tiles so about ten characters fit under each. */
    int zoom = 1;
    if (lines)
        while (w * zoom < 10 * CELL_W && zoom < 8) zoom++;
    int tw = w * zoom, th = h * zoom, lab_h = lines ? lines * LINE_H + 1 : 0;
    int64_t W = (int64_t)cols * (tw + GAP) + GAP, H = (int64_t)rows * (th + lab_h + GAP) + GAP;
    if (W > MAX_SIDE || H > MAX_SIDE || W * H * c > ((int64_t)1 << 30))
        return fl_fail(e, FL_ERR_ARG, "%s: grid of %lldx%lld pixels is too large; use fewer "
                       "images or columns", path, (long long)W, (long long)H);
    uint8_t *pix = malloc((size_t)(W * H * c));
    if (!pix) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
    memset(pix, 255, (size_t)(W * H * c)); /* white background, black text */
    size_t hw = (size_t)h * (size_t)w;
    for (int i = 0; i < n; i++) {
        int x0 = GAP + (i % cols) * (tw + GAP), y0 = GAP + (i / cols) * (th + lab_h + GAP);
        const float *img = imgs + (size_t)i * (size_t)c * hw;
        for (int y = 0; y < th; y++)
            for (int x = 0; x < tw; x++)
                for (int ch = 0; ch < c; ch++)
                    pix[((size_t)(y0 + y) * (size_t)W + (size_t)(x0 + x)) * (size_t)c +
                        (size_t)ch] =
                        to_u8(img[(size_t)ch * hw + (size_t)(y / zoom) * (size_t)w +
                                  (size_t)(x / zoom)], 0.0f, 1.0f);
        if (lines && labels[i]) draw_text(pix, c, (int)W, x0, y0 + th + 1, tw, labels[i]);
    }
    fl_status st = write_u8(path, pix, c, (int)H, (int)W, e);
    free(pix);
    return st;
}

/* A class's name, or its number when the dataset has no names for it. */
static const char *class_text(const fl_dataset *d, int k, char *buf, size_t n) {
    if (k < 0) return "?";
    if (k < d->n_classes && d->class_names && d->class_names[k]) return d->class_names[k];
    snprintf(buf, n, "%d", k);
    return buf;
}

void fl_grid_label(const fl_dataset *d, int64_t index, int pred, const char *extra, char *buf,
                   size_t n) {
    char tb[16], pb[16];
    int y = d->y && index >= 0 && index < d->n ? d->y[index] : -1;
    snprintf(buf, n, "#%lld%s%s\n%s\n->%s", (long long)index, extra ? " " : "", extra ? extra : "",
             class_text(d, y, tb, sizeof tb), class_text(d, pred, pb, sizeof pb));
}

fl_status fl_image_grid_write_scaled(const char *path, const float *imgs, int n, int c, int h,
                                     int w, int cols, const char *const *labels,
                                     const fl_scale *scale, fl_err *e) {
    if (!scale || scale->kind == FL_SCALE_01)
        return fl_image_grid_write(path, imgs, n, c, h, w, cols, labels, e);
    if (n < 1 || c < 1 || h < 1 || w < 1 || h > MAX_SIDE || w > MAX_SIDE || c > 3)
        return fl_fail(e, FL_ERR_ARG, "%s: bad grid of %d images of %dx%dx%d", path, n, c, w, h);
    size_t count = (size_t)n * (size_t)c * (size_t)h * (size_t)w;
    float *tmp = malloc(count * sizeof(float));
    if (!tmp) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
    memcpy(tmp, imgs, count * sizeof(float));
    fl_scale_unapply(scale, tmp, n, c, (int64_t)h * w);
    fl_status st = fl_image_grid_write(path, tmp, n, c, h, w, cols, labels, e);
    free(tmp);
    return st;
}
