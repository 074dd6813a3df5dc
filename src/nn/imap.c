/* Index maps (see imap.h): planning, and the row walk shared by forward and backward. */
#include <string.h>

#include "nn/imap.h"

fl_status fl_imap_plan(fl_imap *im, int ndim, const int64_t *out_shape, fl_err *e) {
    int64_t one = 1, total = 0;
    if (ndim == 0) {
        ndim = 1;
        out_shape = &one;
    }
    for (int d = 0; d < ndim; d++) total += out_shape[d];
    if (total + 1 > im->cap) {
        fl_free(im->buf);
        im->cap = 0;
        if (!(im->buf = fl_alloc(sizeof(int64_t) * (size_t)(total + 1))))
            return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        im->cap = total + 1;
    }
    im->nd = ndim;
    int64_t *p = im->buf;
    for (int d = 0; d < ndim; d++) {
        im->shape[d] = out_shape[d];
        im->map[d] = p;
        p += out_shape[d];
    }
    if (ndim == 1 && out_shape == &one) im->map[0][0] = 0;
    return FL_OK;
}

void fl_imap_finish(fl_imap *im, const int64_t *in_shape) {
    int last = im->nd - 1;
    int64_t stride = 1;
    for (int d = last; d >= 0; d--) {
        if (d < last) stride *= in_shape[d + 1];
        for (int64_t o = 0; o < im->shape[d]; o++)
            if (im->map[d][o] >= 0) im->map[d][o] *= stride;
    }
    /* the longest run of consecutive reads in the last dim */
    const int64_t *ml = im->map[last];
    int64_t len = im->shape[last];
    im->run_lo = im->run_hi = 0;
    for (int64_t j = 0; j < len;) {
        if (ml[j] < 0) {
            j++;
            continue;
        }
        int64_t k = j + 1;
        while (k < len && ml[k] == ml[k - 1] + 1) k++;
        if (k - j > im->run_hi - im->run_lo) im->run_lo = j, im->run_hi = k;
        j = k;
    }
}

fl_status fl_imap_broadcast(fl_imap *im, int ndim, const int64_t *out_shape, int x_ndim,
                            const int64_t *x_shape, fl_err *e) {
    fl_status st = fl_imap_plan(im, ndim, out_shape, e);
    if (st != FL_OK) return st;
    int64_t al[FL_MAX_DIMS] = {1};
    for (int d = 0; d < ndim; d++) {
        al[d] = d < ndim - x_ndim ? 1 : x_shape[d - (ndim - x_ndim)];
        for (int64_t o = 0; o < out_shape[d]; o++) im->map[d][o] = al[d] == 1 ? 0 : o;
    }
    fl_imap_finish(im, al);
    return FL_OK;
}

void fl_imap_free(fl_imap *im) {
    fl_free(im->buf);
    memset(im, 0, sizeof *im);
}

/* Call row(ctx, r, base) for every output row r (all dims but the last), with base the input
 * offset of its outer dims, or -1 when one of them is filled. */
typedef struct walk {
    const fl_imap *im;
    const float *x, *dy;
    float *y, *dx;
    float fill;
    double fill_grad;
} walk;

static void row_forward(walk *w, int64_t r, int64_t base) {
    const fl_imap *im = w->im;
    int64_t len = im->shape[im->nd - 1];
    const int64_t *ml = im->map[im->nd - 1];
    float *y = w->y + r * len;
    if (base < 0) {
        for (int64_t j = 0; j < len; j++) y[j] = w->fill;
        return;
    }
    const float *x = w->x + base;
    for (int64_t j = 0; j < im->run_lo; j++) y[j] = ml[j] < 0 ? w->fill : x[ml[j]];
    if (im->run_hi > im->run_lo)
        memcpy(y + im->run_lo, x + ml[im->run_lo], sizeof(float) * (size_t)(im->run_hi - im->run_lo));
    for (int64_t j = im->run_hi; j < len; j++) y[j] = ml[j] < 0 ? w->fill : x[ml[j]];
}

static void row_backward(walk *w, int64_t r, int64_t base) {
    const fl_imap *im = w->im;
    int64_t len = im->shape[im->nd - 1];
    const int64_t *ml = im->map[im->nd - 1];
    const float *dy = w->dy + r * len;
    double fg = 0;
    if (base < 0) {
        for (int64_t j = 0; j < len; j++) fg += dy[j];
        w->fill_grad += fg;
        return;
    }
    float *dx = w->dx ? w->dx + base : NULL;
    for (int64_t j = 0; j < len; j++) {
        if (ml[j] < 0) fg += dy[j];
        else if (dx) dx[ml[j]] += dy[j];
    }
    w->fill_grad += fg;
}

static void walk_rows(walk *w, void (*row)(walk *, int64_t, int64_t)) {
    const fl_imap *im = w->im;
    int last = im->nd - 1;
    int64_t rows = 1, idx[FL_MAX_DIMS] = {0};
    for (int d = 0; d < last; d++) rows *= im->shape[d];
    if (rows == 0 || im->shape[last] == 0) return;
    for (int64_t r = 0; r < rows; r++) {
        int64_t base = 0;
        for (int d = 0; d < last && base >= 0; d++) {
            int64_t v = im->map[d][idx[d]];
            base = v < 0 ? -1 : base + v;
        }
        row(w, r, base);
        for (int d = last - 1; d >= 0; d--) {
            if (++idx[d] < im->shape[d]) break;
            idx[d] = 0;
        }
    }
}

void fl_imap_forward(const fl_imap *im, const float *x, float *y, float fill) {
    walk w = {.im = im, .x = x, .y = y, .fill = fill};
    walk_rows(&w, row_forward);
}

double fl_imap_backward(const fl_imap *im, const float *dy, float *dx) {
    walk w = {.im = im, .dy = dy, .dx = dx};
    walk_rows(&w, row_backward);
    return w.fill_grad;
}
