/* Conv, ConvTranspose, MaxPool, AveragePool, GlobalAveragePool: forward against naive
 * direct loops written here, known values from the ONNX operator docs, finite-difference
 * gradients for every attribute combination, and the errors for what is not supported. */
#include "testutil.h"

#include "nn/op_conv.h"

/* One test case. Pads are given explicitly (auto_pad NULL) or resolved by resolve_*() below,
 * which also fill in the output size. */
typedef struct cfg {
    int n, c, h, w;    /* input */
    int m;             /* output channels (conv); ignored by pools */
    int kh, kw, sh, sw, dh, dw;
    int pt, pl, pb, pr;
    int group, bias;
    const char *auto_pad;
    int ceil, include_pad; /* pools */
    int oph, opw;      /* ConvTranspose output_padding */
    int osh, osw;      /* ConvTranspose output_shape (0: not given) */
    int oh, ow;        /* resolved */
} cfg;

/* The node attributes of a cfg; storage for the lists lives here. */
typedef struct attrs {
    int64_t k[2], s[2], d[2], p[4], op[2], os[2];
    fl_attr a[12];
    int n;
} attrs;

static void make_attrs(attrs *A, const cfg *c, const char *op) {
    int conv = strcmp(op, "Conv") == 0, convt = strcmp(op, "ConvTranspose") == 0;
    A->n = 0;
    A->k[0] = c->kh, A->k[1] = c->kw, A->s[0] = c->sh, A->s[1] = c->sw;
    A->d[0] = c->dh, A->d[1] = c->dw;
    A->p[0] = c->pt, A->p[1] = c->pl, A->p[2] = c->pb, A->p[3] = c->pr;
    A->op[0] = c->oph, A->op[1] = c->opw, A->os[0] = c->osh, A->os[1] = c->osw;
    A->a[A->n++] = fl_attr_ints("kernel_shape", 2, A->k);
    A->a[A->n++] = fl_attr_ints("strides", 2, A->s);
    if (strcmp(op, "AveragePool") != 0 || c->dh != 1 || c->dw != 1)
        A->a[A->n++] = fl_attr_ints("dilations", 2, A->d);
    if (c->auto_pad)
        A->a[A->n++] = (fl_attr){.name = "auto_pad", .type = FL_ATTR_STRING, .s = (char *)c->auto_pad};
    else
        A->a[A->n++] = fl_attr_ints("pads", 4, A->p);
    if (conv || convt) A->a[A->n++] = fl_attr_int("group", c->group);
    if (!conv && !convt) A->a[A->n++] = fl_attr_int("ceil_mode", c->ceil);
    if (strcmp(op, "AveragePool") == 0) A->a[A->n++] = fl_attr_int("count_include_pad", c->include_pad);
    if (convt && (c->oph || c->opw)) A->a[A->n++] = fl_attr_ints("output_padding", 2, A->op);
    if (convt && c->osh) A->a[A->n++] = fl_attr_ints("output_shape", 2, A->os);
}

/* Conv / pool output size and pads, from the ONNX spec's formulas. */
static void resolve_1(int in, int k, int s, int d, const char *ap, int ceil, int *pb, int *pe,
                      int *out) {
    int dk = (k - 1) * d + 1;
    if (ap && strncmp(ap, "SAME", 4) == 0) {
        *out = (in + s - 1) / s;
        int total = (*out - 1) * s + dk - in;
        if (total < 0) total = 0;
        *pb = strcmp(ap, "SAME_UPPER") == 0 ? total / 2 : total - total / 2;
        *pe = total - *pb;
        return;
    }
    if (ap) *pb = *pe = 0; /* VALID */
    int span = in + *pb + *pe - dk;
    *out = (ceil ? (span + s - 1) / s : span / s) + 1;
    if (ceil && (*out - 1) * s >= in + *pb) (*out)--;
}

static void resolve_conv(cfg *c) {
    resolve_1(c->h, c->kh, c->sh, c->dh, c->auto_pad, c->ceil, &c->pt, &c->pb, &c->oh);
    resolve_1(c->w, c->kw, c->sw, c->dw, c->auto_pad, c->ceil, &c->pl, &c->pr, &c->ow);
}

static void resolve_convt_1(int in, int k, int s, int d, int op, int os, const char *ap, int *pb,
                            int *pe, int *out) {
    int full = s * (in - 1) + op + (k - 1) * d + 1;
    if (os || (ap && strncmp(ap, "SAME", 4) == 0)) {
        *out = os ? os : in * s;
        int total = full > *out ? full - *out : 0;
        *pb = ap && strcmp(ap, "SAME_UPPER") == 0 ? total / 2 : total - total / 2;
        return;
    }
    if (ap) *pb = *pe = 0;
    *out = full - *pb - *pe;
}

static void resolve_convt(cfg *c) {
    resolve_convt_1(c->h, c->kh, c->sh, c->dh, c->oph, c->osh, c->auto_pad, &c->pt, &c->pb, &c->oh);
    resolve_convt_1(c->w, c->kw, c->sw, c->dw, c->opw, c->osw, c->auto_pad, &c->pl, &c->pr, &c->ow);
}

/* ---- naive references ------------------------------------------------------------------------ */
#define AT(t, a, b, c_, d) ((t)->data[(((int64_t)(a) * (t)->shape[1] + (b)) * (t)->shape[2] + (c_)) * (t)->shape[3] + (d)])

static void ref_conv(const cfg *c, const fl_tensor *x, const fl_tensor *w, const fl_tensor *b, fl_tensor *y) {
    int cg = c->c / c->group, mg = c->m / c->group;
    for (int n = 0; n < c->n; n++)
        for (int m = 0; m < c->m; m++)
            for (int oy = 0; oy < c->oh; oy++)
                for (int ox = 0; ox < c->ow; ox++) {
                    double s = b ? b->data[m] : 0;
                    for (int ci = 0; ci < cg; ci++)
                        for (int ki = 0; ki < c->kh; ki++)
                            for (int kj = 0; kj < c->kw; kj++) {
                                int iy = oy * c->sh - c->pt + ki * c->dh, ix = ox * c->sw - c->pl + kj * c->dw;
                                if (iy < 0 || iy >= c->h || ix < 0 || ix >= c->w) continue;
                                s += AT(x, n, m / mg * cg + ci, iy, ix) * AT(w, m, ci, ki, kj);
                            }
                    AT(y, n, m, oy, ox) = (float)s;
                }
}

/* ConvTranspose as the scatter its definition is: every input pixel adds its kernel-weighted
 * copy at stride offsets, shifted up-left by the begin pads. */
static void ref_convt(const cfg *c, const fl_tensor *x, const fl_tensor *w, const fl_tensor *b, fl_tensor *y) {
    int cg = c->c / c->group, mg = c->m / c->group;
    for (int64_t i = 0; i < y->size; i++) y->data[i] = 0;
    for (int n = 0; n < c->n; n++)
        for (int ci = 0; ci < c->c; ci++)
            for (int iy = 0; iy < c->h; iy++)
                for (int ix = 0; ix < c->w; ix++)
                    for (int mo = 0; mo < mg; mo++)
                        for (int ki = 0; ki < c->kh; ki++)
                            for (int kj = 0; kj < c->kw; kj++) {
                                int oy = iy * c->sh - c->pt + ki * c->dh, ox = ix * c->sw - c->pl + kj * c->dw;
                                if (oy < 0 || oy >= c->oh || ox < 0 || ox >= c->ow) continue;
                                AT(y, n, ci / cg * mg + mo, oy, ox) += AT(x, n, ci, iy, ix) * AT(w, ci, mo, ki, kj);
                            }
    if (b)
        for (int n = 0; n < c->n; n++)
            for (int m = 0; m < c->m; m++)
                for (int k = 0; k < c->oh * c->ow; k++) y->data[((int64_t)n * c->m + m) * c->oh * c->ow + k] += b->data[m];
}

static void ref_pool(const cfg *c, int max, const fl_tensor *x, fl_tensor *y) {
    for (int n = 0; n < c->n; n++)
        for (int ch = 0; ch < c->c; ch++)
            for (int oy = 0; oy < c->oh; oy++)
                for (int ox = 0; ox < c->ow; ox++) {
                    double s = 0, best = -INFINITY;
                    int cnt = 0, cnt_pad = 0;
                    for (int ki = 0; ki < c->kh; ki++)
                        for (int kj = 0; kj < c->kw; kj++) {
                            int iy = oy * c->sh - c->pt + ki * c->dh, ix = ox * c->sw - c->pl + kj * c->dw;
                            if (iy >= -c->pt && iy < c->h + c->pb && ix >= -c->pl && ix < c->w + c->pr) cnt_pad++;
                            if (iy < 0 || iy >= c->h || ix < 0 || ix >= c->w) continue;
                            double v = AT(x, n, ch, iy, ix);
                            s += v, cnt++;
                            if (v > best) best = v;
                        }
                    AT(y, n, ch, oy, ox) = (float)(max ? best : s / (c->include_pad ? cnt_pad : cnt));
                }
}

/* ---- running one node --------------------------------------------------------------------------- */
static fl_rng rng;

static fl_tensor t4(int a, int b, int c, int d, float lo, float hi) {
    int64_t s[4] = {a, b, c, d};
    return tu_tensor(4, s, &rng, lo, hi);
}

/* Output 0 of op over ins (all graph inputs but the parameters W, B), as an owned copy. */
static fl_tensor run1(const char *op, int n_in, fl_tensor *ins, const fl_value_kind *kinds,
                      const attrs *A) {
    fl_model *m = tu_single_node(op, n_in, ins, kinds, 1, A->n, A->a);
    tu_forward(m, n_in, ins, kinds);
    fl_tensor y = {0};
    assert_int_equal(fl_tensor_copy(&y, fl_model_output(m, 0)), FL_OK);
    fl_model_free(m);
    return y;
}

static void assert_close(const fl_tensor *got, const fl_tensor *want, float tol, const char *what) {
    char a[64], b[64];
    if (!fl_tensor_same_shape(got, want))
        fail_msg("%s: shape %s, expected %s", what, fl_shape_str(got, a, sizeof a), fl_shape_str(want, b, sizeof b));
    for (int64_t i = 0; i < got->size; i++)
        if (fabsf(got->data[i] - want->data[i]) > tol * fmaxf(1.0f, fabsf(want->data[i])))
            fail_msg("%s: [%lld] = %g, expected %g", what, (long long)i, got->data[i], want->data[i]);
}

/* Conv / ConvTranspose: forward against the reference (with the default chunking and with
 * chunks of a few images, so that multi-image and single-image chunks both run), then the
 * gradient check for X, W and B. */
static void check_conv(cfg c, int transpose) {
    const char *op = transpose ? "ConvTranspose" : "Conv";
    if (transpose) resolve_convt(&c); else resolve_conv(&c);
    attrs A;
    make_attrs(&A, &c, op);
    fl_tensor ins[3];
    ins[0] = t4(c.n, c.c, c.h, c.w, -1, 1);
    ins[1] = transpose ? t4(c.c, c.m / c.group, c.kh, c.kw, -1, 1) : t4(c.m, c.c / c.group, c.kh, c.kw, -1, 1);
    int64_t bs = c.m;
    ins[2] = c.bias ? tu_tensor(1, &bs, &rng, -1, 1) : (fl_tensor){0};
    fl_value_kind kinds[3] = {FL_VAL_INPUT, FL_VAL_PARAM, c.bias ? FL_VAL_PARAM : FL_VAL_CONST};
    int n_in = c.bias ? 3 : 2;
    fl_tensor want = t4(c.n, c.m, c.oh, c.ow, 0, 0);
    if (transpose)
        ref_convt(&c, &ins[0], &ins[1], c.bias ? &ins[2] : NULL, &want);
    else
        ref_conv(&c, &ins[0], &ins[1], c.bias ? &ins[2] : NULL, &want);
    size_t budget = fl_conv_cols_budget;
    for (int pass = 0; pass < 2; pass++) {
        /* pass 1: room for about 2 images' columns per chunk */
        size_t per = transpose ? (size_t)c.m * c.kh * c.kw * c.h * c.w
                               : (size_t)c.c * c.kh * c.kw * c.oh * c.ow;
        fl_conv_cols_budget = pass ? 2 * per + 1 : budget;
        fl_tensor y = run1(op, n_in, ins, kinds, &A);
        assert_close(&y, &want, 1e-4f, op);
        fl_tensor_free(&y);
        tu_gradcheck(op, n_in, ins, kinds, A.n, A.a, 1e-2f, 2e-3f);
    }
    fl_conv_cols_budget = budget;
    for (int i = 0; i < 3; i++) fl_tensor_free(&ins[i]);
    fl_tensor_free(&want);
}

/* Fields left 0 that cannot be 0 get defaults: a 2x2x6x5 input, 3 output channels, a 3x3
 * kernel (2x2 stride 2 and a 6x7 input for pools), stride, dilation and group 1. */
static cfg dflt(cfg c, int pool) {
#define D(f, v) if (!c.f) c.f = v
    D(n, 2); D(c, 2); D(h, 6); D(w, pool ? 7 : 5); D(m, 3);
    D(kh, pool ? 2 : 3); D(kw, pool ? 2 : 3); D(sh, pool ? 2 : 1); D(sw, pool ? 2 : 1);
    D(dh, 1); D(dw, 1); D(group, 1);
#undef D
    return c;
}
#define CONV(...) dflt((cfg){__VA_ARGS__}, 0)

static void test_conv(void **state) {
    const cfg cases[] = {
        CONV(.bias = 1),
        CONV(.n = 5, .pt = 1, .pl = 1, .pb = 1, .pr = 1),                 /* 5 images: 3 chunks */
        CONV(.sh = 2, .sw = 2, .pt = 1, .pl = 0, .pb = 2, .pr = 1, .bias = 1), /* asymmetric */
        CONV(.h = 7, .w = 8, .dh = 2, .dw = 2, .pt = 2, .pl = 1, .pb = 0, .pr = 2),
        CONV(.c = 4, .m = 6, .group = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .bias = 1),
        CONV(.c = 3, .m = 3, .group = 3, .sh = 2, .sw = 1, .pt = 1, .pl = 1, .pb = 1, .pr = 1), /* depthwise */
        CONV(.c = 4, .m = 4, .group = 4, .sh = 2, .sw = 2, .pt = 1, .pl = 2, .pb = 0, .pr = 1, .bias = 1),
        CONV(.c = 2, .m = 2, .group = 2, .dh = 2, .dw = 2, .pt = 2, .pl = 2, .pb = 2, .pr = 2, .bias = 1),
        /* depthwise as EfficientNet has it: 5x5 stride 2 (4 phases), and a 2x2 plane */
        CONV(.c = 3, .m = 3, .group = 3, .h = 9, .w = 8, .kh = 5, .kw = 5, .sh = 2, .sw = 2,
             .pt = 2, .pl = 2, .pb = 2, .pr = 2, .bias = 1),
        CONV(.c = 2, .m = 2, .group = 2, .h = 2, .w = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1),
        /* depthwise planes too large for the phase buffers: the row loops */
        CONV(.n = 1, .c = 2, .m = 2, .group = 2, .h = 66, .w = 67, .pt = 1, .pl = 1, .pb = 1,
             .pr = 1, .bias = 1),
        CONV(.n = 1, .c = 2, .m = 2, .group = 2, .h = 95, .w = 90, .sh = 2, .sw = 2, .pt = 1,
             .pl = 0, .pb = 1, .pr = 1),
        CONV(.c = 2, .m = 4, .group = 2, .kh = 2, .kw = 3, .auto_pad = "SAME_UPPER", .sh = 2, .sw = 2),
        CONV(.kh = 2, .kw = 2, .auto_pad = "SAME_LOWER", .bias = 1),
        CONV(.kh = 2, .kw = 3, .auto_pad = "VALID", .sh = 2, .sw = 1),
        CONV(.kh = 1, .kw = 1, .bias = 1),             /* 1x1 of small images: im2col */
        CONV(.h = 16, .w = 17, .kh = 1, .kw = 1, .bias = 1),            /* direct (no im2col) */
        CONV(.c = 4, .m = 2, .group = 2, .h = 16, .w = 16, .kh = 1, .kw = 1), /* direct, grouped */
        CONV(.kh = 1, .kw = 1, .sh = 2, .sw = 2),                       /* 1x1 strided: im2col */
        CONV(.n = 1, .h = 3, .w = 4, .kh = 3, .kw = 4),        /* kernel == image */
        /* lowered, stride 1 without padding (36 taps: not the small direct path) */
        CONV(.c = 4, .m = 3, .h = 7, .w = 9, .bias = 1),
        CONV(.c = 4, .m = 3, .h = 10, .w = 10), /* output rows of 8 (one vector each) */
        /* the small direct path with a full vector block and a short map block (7 maps) */
        CONV(.c = 1, .m = 7, .h = 12, .w = 13, .kh = 5, .kw = 5, .bias = 1),
        CONV(.m = 1, .h = 9, .w = 11, .bias = 1), /* one map: the blocks repeat it */
        /* the strided folds (conv_lower.c): DCGAN's 4x4 stride 2 pad 1, odd sides, stride 3
         * and 4 with padding on one side, and stride 5 (the generic path) */
        CONV(.n = 3, .h = 8, .w = 8, .kh = 4, .kw = 4, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .bias = 1),
        CONV(.h = 9, .w = 7, .kh = 4, .kw = 4, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1),
        CONV(.h = 10, .w = 11, .kh = 3, .kw = 5, .sh = 1, .sw = 3, .pt = 0, .pl = 2, .pb = 0, .pr = 0),
        CONV(.h = 9, .w = 13, .kh = 2, .kw = 3, .sh = 4, .sw = 4, .pl = 1, .pr = 3),
        CONV(.h = 9, .w = 13, .kh = 3, .kw = 3, .sh = 5, .sw = 5, .pl = 1, .pr = 1),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_conv(cases[i], 0);
}

/* Winograd (conv_wino.c) against the double-precision reference, with each tile side forced
 * (and once chosen by the planner), on ragged edges (outputs not a multiple of the tile: 13x11,
 * 7x5, 2x2), pads 0, 1 and asymmetric, channel counts off multiples of 8, batch 1 and 3, with
 * and without bias, on 1 and 2 threads; fl_conv_algo says the node took the Winograd path.
 * Tolerance, relative to the output's largest magnitude: the fp32 rounding of a Winograd sum
 * of C*9 products is amplified by the transforms, whose entries reach 1 (F(2,3)) and 8 / 5 /
 * 1/24 (F(4,3)); measured max error here 2.4e-7 (F(2,3)) and 4e-6 (F(4,3)) of the scale, so
 * 1e-5 and 1e-4 leave an order of magnitude and still catch a wrong coefficient (which errs
 * by a sizeable fraction of the scale). */
static double wino_err(const fl_tensor *got, const fl_tensor *want) {
    double scale = 0, diff = 0;
    for (int64_t i = 0; i < want->size; i++) scale = fmax(scale, fabs(want->data[i]));
    for (int64_t i = 0; i < want->size; i++) diff = fmax(diff, fabs((double)got->data[i] - want->data[i]));
    return diff / scale;
}

static void check_wino(cfg c, int force, int threads) {
    resolve_conv(&c);
    attrs A;
    make_attrs(&A, &c, "Conv");
    fl_tensor ins[3];
    ins[0] = t4(c.n, c.c, c.h, c.w, -1, 1);
    ins[1] = t4(c.m, c.c, 3, 3, -1, 1);
    int64_t bs = c.m;
    ins[2] = c.bias ? tu_tensor(1, &bs, &rng, -1, 1) : (fl_tensor){0};
    fl_value_kind kinds[3] = {FL_VAL_INPUT, FL_VAL_PARAM, c.bias ? FL_VAL_PARAM : FL_VAL_CONST};
    int n_in = c.bias ? 3 : 2;
    fl_tensor want = t4(c.n, c.m, c.oh, c.ow, 0, 0);
    ref_conv(&c, &ins[0], &ins[1], c.bias ? &ins[2] : NULL, &want);
    int saved_threads = fl_threads_get(), saved_force = fl_conv_wino_force;
    fl_threads_set(threads);
    fl_conv_wino_force = force;
    fl_model *m = tu_single_node("Conv", n_in, ins, kinds, 1, A.n, A.a);
    tu_forward(m, n_in, ins, kinds);
    int tile = 0;
    assert_int_equal(fl_conv_algo(&m->nodes[0], &tile), 'w');
    if (force > 0) assert_int_equal(tile, force);
    double tol = tile == 2 ? 1e-5 : 1e-4, err = wino_err(fl_model_output(m, 0), &want);
    print_message("winograd F(%d,3) %dx%dx%dx%d -> %d maps %dx%d pads %d%d%d%d bias %d, %d threads: "
                  "max err %.1e of the scale\n", tile, c.n, c.c, c.h, c.w, c.m, c.oh, c.ow, c.pt,
                  c.pl, c.pb, c.pr, c.bias, threads, err);
    assert_true(err <= tol);
    /* weights edited in place between passes (as a mutation or tu_gradcheck does): the
     * transformed weights must follow */
    fl_tensor *w = &m->values[fl_model_find(m, "in1")].t;
    for (int64_t i = 0; i < w->size; i += 7) w->data[i] = -w->data[i];
    fl_tensor w2 = {0};
    assert_int_equal(fl_tensor_copy(&w2, w), FL_OK);
    ref_conv(&c, &ins[0], &w2, c.bias ? &ins[2] : NULL, &want);
    tu_forward(m, n_in, ins, kinds);
    assert_int_equal(fl_conv_algo(&m->nodes[0], NULL), 'w');
    assert_true(wino_err(fl_model_output(m, 0), &want) <= tol);
    fl_model_free(m);
    fl_tensor_free(&w2);
    fl_conv_wino_force = saved_force;
    fl_threads_set(saved_threads);
    for (int i = 0; i < 3; i++) fl_tensor_free(&ins[i]);
    fl_tensor_free(&want);
}

static void test_conv_winograd(void **state) {
    const cfg cases[] = {
        CONV(.n = 1, .c = 5, .m = 7, .h = 13, .w = 11, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .bias = 1),
        CONV(.n = 3, .c = 19, .m = 10, .h = 15, .w = 13), /* pad 0: 13x11 outputs */
        CONV(.n = 3, .c = 9, .m = 17, .h = 7, .w = 6, .pt = 1, .pl = 0, .pb = 0, .pr = 1, .bias = 1),
        CONV(.n = 1, .c = 16, .m = 8, .h = 4, .w = 4), /* 2x2 outputs: one ragged F(4,3) tile */
        CONV(.n = 2, .c = 24, .m = 33, .h = 17, .w = 20, .pt = 1, .pl = 1, .pb = 1, .pr = 1),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int force = 2; force <= 4; force += 2)
            for (int threads = 1; threads <= 2; threads++) check_wino(cases[i], force, threads);
    /* the planner's own choice on a shape it takes (32 channels, 3 images of 20x20) */
    check_wino(CONV(.n = 3, .c = 32, .m = 32, .h = 20, .w = 20, .pt = 1, .pl = 1, .pb = 1, .pr = 1,
                    .bias = 1), -1, 2);
    /* a model planned for training never takes it (the backward pass wants the columns) */
    {
        int saved = fl_conv_wino_force;
        fl_conv_wino_force = 4;
        cfg c = CONV(.n = 1, .c = 16, .m = 16, .h = 12, .w = 12, .pt = 1, .pl = 1, .pb = 1, .pr = 1);
        resolve_conv(&c);
        attrs A;
        make_attrs(&A, &c, "Conv");
        fl_tensor ins[2] = {t4(1, 16, 12, 12, -1, 1), t4(16, 16, 3, 3, -1, 1)};
        fl_value_kind kinds[2] = {FL_VAL_INPUT, FL_VAL_PARAM};
        fl_model *m = tu_single_node("Conv", 2, ins, kinds, 1, A.n, A.a);
        m->training = 1;
        tu_forward(m, 2, ins, kinds);
        assert_int_equal(fl_conv_algo(&m->nodes[0], NULL), 'l');
        fl_model_free(m);
        /* and gradients of an inference pass that took it are the lowered path's (the weight
         * gradient cannot reuse columns Winograd never made; the finite differences edit W
         * in place, so the transformed weights must follow every change) */
        tu_gradcheck("Conv", 2, ins, kinds, A.n, A.a, 1e-2f, 2e-3f);
        fl_conv_wino_force = saved;
        for (int i = 0; i < 2; i++) fl_tensor_free(&ins[i]);
    }
}

static void test_convtranspose(void **state) {
    const cfg cases[] = {
        CONV(.bias = 1),
        CONV(.n = 5, .sh = 2, .sw = 2, .oph = 1, .opw = 1),             /* stride 2 + output_padding */
        CONV(.sh = 3, .sw = 2, .pt = 1, .pl = 2, .pb = 1, .pr = 0, .bias = 1),
        CONV(.kh = 2, .kw = 2, .dh = 2, .dw = 2),
        CONV(.c = 4, .m = 6, .group = 2, .sh = 2, .sw = 1, .bias = 1),
        CONV(.c = 3, .m = 3, .group = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1), /* depthwise */
        CONV(.sh = 3, .sw = 2, .osh = 19, .osw = 12),                   /* output_shape, padded end */
        CONV(.sh = 2, .sw = 2, .osh = 10, .osw = 9),                    /* output_shape, cropped */
        CONV(.sh = 2, .sw = 2, .auto_pad = "SAME_UPPER"),
        CONV(.sh = 2, .sw = 2, .auto_pad = "SAME_LOWER", .bias = 1),
        CONV(.kh = 1, .kw = 1, .bias = 1),                              /* 1x1, small: col2im */
        CONV(.h = 16, .w = 16, .kh = 1, .kw = 1, .bias = 1),            /* direct */
        /* the strided folds: FuzzGAN's generator upsampling (4x4 stride 2 pad 1), stride 3 */
        CONV(.n = 3, .c = 3, .m = 2, .h = 4, .w = 4, .kh = 4, .kw = 4, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .bias = 1),
        CONV(.h = 3, .w = 5, .kh = 4, .kw = 4, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .oph = 1, .opw = 1),
        CONV(.h = 4, .w = 3, .kh = 2, .kw = 5, .sh = 1, .sw = 3, .pl = 2, .pr = 1),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_conv(cases[i], 1);
}

/* The examples of the ONNX Conv / ConvTranspose docs: x = 0..24 (0..8), W = ones. */
static void test_conv_known_values(void **state) {
    fl_tensor ins[2] = {t4(1, 1, 5, 5, 0, 0), t4(1, 1, 3, 3, 0, 0)};
    for (int i = 0; i < 25; i++) ins[0].data[i] = (float)i;
    for (int i = 0; i < 9; i++) ins[1].data[i] = 1;
    fl_value_kind kinds[2] = {FL_VAL_INPUT, FL_VAL_PARAM};
    cfg c = CONV(.n = 1, .c = 1, .m = 1, .h = 5, .w = 5, .pt = 1, .pl = 1, .pb = 1, .pr = 1);
    attrs A;
    make_attrs(&A, &c, "Conv");
    fl_tensor y = run1("Conv", 2, ins, kinds, &A);
    const float padded[25] = {12, 21, 27, 33, 24, 33, 54, 63, 72, 51, 63, 99, 108, 117, 81,
                              93, 144, 153, 162, 111, 72, 111, 117, 123, 84};
    for (int i = 0; i < 25; i++) assert_float_equal(y.data[i], padded[i], 0);
    fl_tensor_free(&y);
    c.sh = c.sw = 2; /* test_conv_with_strides_padding: 7x5 input */
    fl_tensor_free(&ins[0]);
    ins[0] = t4(1, 1, 7, 5, 0, 0);
    for (int i = 0; i < 35; i++) ins[0].data[i] = (float)i;
    make_attrs(&A, &c, "Conv");
    y = run1("Conv", 2, ins, kinds, &A);
    const float strided[12] = {12, 27, 24, 63, 108, 81, 123, 198, 141, 112, 177, 124};
    assert_int_equal(y.shape[2], 4);
    assert_int_equal(y.shape[3], 3);
    for (int i = 0; i < 12; i++) assert_float_equal(y.data[i], strided[i], 0);
    fl_tensor_free(&y);
    fl_tensor_free(&ins[0]);
    fl_tensor_free(&ins[1]);

    ins[0] = t4(1, 1, 3, 3, 0, 0);
    ins[1] = t4(1, 2, 3, 3, 0, 0);
    for (int i = 0; i < 9; i++) ins[0].data[i] = (float)i;
    for (int i = 0; i < 18; i++) ins[1].data[i] = 1;
    A.n = 0;
    y = run1("ConvTranspose", 2, ins, kinds, &A);
    const float convt[25] = {0, 1, 3, 3, 2, 3, 8, 15, 12, 7, 9, 21, 36, 27, 15,
                             9, 20, 33, 24, 13, 6, 13, 21, 15, 8};
    assert_int_equal(y.shape[1], 2);
    for (int i = 0; i < 50; i++) assert_float_equal(y.data[i], convt[i % 25], 0);
    fl_tensor_free(&y);
    fl_tensor_free(&ins[0]);
    fl_tensor_free(&ins[1]);
}

/* Parameter gradients alone (the input's skipped, as when training a first layer) must equal
 * those of a full backward pass, also when backward runs twice after one forward: the weight
 * gradient must not trust im2col columns that no longer match. */
static void test_param_grads_only(void **state) {
    for (int variant = 0; variant < 4; variant++) {
        int transpose = variant & 1, chunked = variant >> 1;
        const char *op = transpose ? "ConvTranspose" : "Conv";
        cfg c = CONV(.n = 5, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .bias = 1);
        attrs A;
        make_attrs(&A, &c, op);
        int64_t bs = c.m;
        fl_tensor ins[3] = {t4(5, 2, 6, 5, -1, 1),
                            transpose ? t4(2, c.m, 3, 3, -1, 1) : t4(c.m, 2, 3, 3, -1, 1),
                            tu_tensor(1, &bs, &rng, -1, 1)};
        fl_value_kind kinds[3] = {FL_VAL_INPUT, FL_VAL_PARAM, FL_VAL_PARAM};
        size_t budget = fl_conv_cols_budget;
        if (chunked) fl_conv_cols_budget = 200; /* several chunks */
        float *dw[2] = {0};
        for (int skip = 0; skip < 2; skip++) {
            fl_err e = {0};
            fl_model *m = tu_single_node(op, 3, ins, kinds, 1, A.n, A.a);
            m->skip_input_grad = skip;
            assert_int_equal(fl_model_want_param_grads(m, 1, &e), FL_OK);
            tu_forward(m, 3, ins, kinds);
            const fl_tensor *y = fl_model_output(m, 0);
            fl_tensor seed = tu_tensor(y->ndim, y->shape, NULL, 0, 0);
            int out = m->outputs[0];
            for (int rep = 0; rep < 2; rep++) { /* a different seed each time */
                for (int64_t i = 0; i < seed.size; i++) seed.data[i] = (float)((i + rep) % 7) - 3;
                fl_model_zero_param_grads(m);
                assert_int_equal(fl_model_backward_idx(m, 1, &out, &seed, &e), FL_OK);
            }
            const fl_tensor *g = fl_model_grad(m, "in1");
            assert_non_null(g);
            dw[skip] = malloc((size_t)g->size * sizeof(float));
            memcpy(dw[skip], g->data, (size_t)g->size * sizeof(float));
            assert_true(skip ? fl_model_grad(m, "in0") == NULL : fl_model_grad(m, "in0") != NULL);
            fl_tensor_free(&seed);
            fl_model_free(m);
        }
        for (int64_t i = 0; i < ins[1].size; i++) assert_float_equal(dw[0][i], dw[1][i], 1e-4);
        fl_conv_cols_budget = budget;
        free(dw[0]);
        free(dw[1]);
        for (int i = 0; i < 3; i++) fl_tensor_free(&ins[i]);
    }
}

/* ---- pools ------------------------------------------------------------------------------------------ */
/* Distinct values 0.05 apart, so no max is tied and a 1e-2 finite-difference step never changes
 * which element wins. */
static void fill_distinct(fl_tensor *x) {
    int64_t *perm = malloc((size_t)x->size * sizeof(int64_t));
    for (int64_t i = 0; i < x->size; i++) perm[i] = i;
    fl_rng_shuffle(&rng, perm, x->size);
    for (int64_t i = 0; i < x->size; i++) x->data[i] = (float)(perm[i] - x->size / 2) * 0.05f;
    free(perm);
}

static void check_pool(cfg c, const char *op) {
    int max = strcmp(op, "MaxPool") == 0;
    resolve_conv(&c);
    attrs A;
    make_attrs(&A, &c, op);
    fl_tensor x = t4(c.n, c.c, c.h, c.w, -1, 1);
    if (max) fill_distinct(&x);
    fl_value_kind k = FL_VAL_INPUT;
    fl_tensor want = t4(c.n, c.c, c.oh, c.ow, 0, 0);
    ref_pool(&c, max, &x, &want);
    fl_tensor y = run1(op, 1, &x, &k, &A);
    assert_close(&y, &want, 1e-5f, op);
    tu_gradcheck(op, 1, &x, &k, A.n, A.a, 1e-2f, 2e-3f);
    fl_tensor_free(&y);
    fl_tensor_free(&want);
    fl_tensor_free(&x);
}

#define POOL(...) dflt((cfg){__VA_ARGS__}, 1)

static void test_pools(void **state) {
    const cfg cases[] = {
        POOL(.n = 2),
        POOL(.kh = 3, .kw = 3, .sh = 1, .sw = 1),
        POOL(.kh = 3, .kw = 3, .ceil = 1),                              /* ceil: extra column */
        POOL(.h = 5, .w = 5, .ceil = 1, .pt = 1, .pl = 1, .pb = 1, .pr = 1), /* last window dropped */
        POOL(.kh = 3, .kw = 2, .pt = 1, .pl = 0, .pb = 2, .pr = 1),     /* asymmetric pads */
        POOL(.kh = 3, .kw = 3, .sh = 1, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .include_pad = 1),
        POOL(.kh = 3, .kw = 3, .ceil = 1, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .include_pad = 1),
        POOL(.kh = 3, .kw = 2, .auto_pad = "SAME_UPPER"),
        POOL(.kh = 3, .kw = 2, .sh = 1, .sw = 1, .auto_pad = "SAME_LOWER", .include_pad = 1),
        POOL(.kh = 3, .kw = 3, .auto_pad = "VALID"),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_pool(cases[i], "MaxPool");
        check_pool(cases[i], "AveragePool");
    }
    check_pool(POOL(.kh = 2, .kw = 2, .sh = 1, .sw = 1, .dh = 2, .dw = 2), "MaxPool");
    check_pool(POOL(.kh = 2, .kw = 3, .dh = 2, .dw = 2, .pt = 1, .pl = 2, .pb = 1), "MaxPool");
}

/* ONNX docs: 5x5 input 1..25, 5x5 window, pads 2: Y and the Indices output. */
static void test_maxpool_indices(void **state) {
    fl_tensor x = t4(1, 1, 5, 5, 0, 0);
    for (int i = 0; i < 25; i++) x.data[i] = (float)(i + 1);
    int64_t k[2] = {5, 5}, p[4] = {2, 2, 2, 2};
    fl_attr a[2] = {fl_attr_ints("kernel_shape", 2, k), fl_attr_ints("pads", 4, p)};
    fl_value_kind kind = FL_VAL_INPUT;
    fl_model *m = tu_single_node("MaxPool", 1, &x, &kind, 2, 2, a);
    tu_forward(m, 1, &x, &kind);
    const float want[25] = {13, 14, 15, 15, 15, 18, 19, 20, 20, 20, 23, 24, 25,
                            25, 25, 23, 24, 25, 25, 25, 23, 24, 25, 25, 25};
    for (int i = 0; i < 25; i++) {
        assert_float_equal(fl_model_output(m, 0)->data[i], want[i], 0);
        assert_float_equal(fl_model_output(m, 1)->data[i], want[i] - 1, 0);
    }
    assert_int_equal(m->values[m->outputs[1]].onnx_dtype, 7);
    fl_model_free(m);
    fl_tensor_free(&x);
}

static void test_global_average_pool(void **state) {
    fl_tensor x = t4(2, 3, 4, 5, -1, 1);
    fl_value_kind k = FL_VAL_INPUT;
    attrs A = {.n = 0};
    fl_tensor y = run1("GlobalAveragePool", 1, &x, &k, &A);
    assert_int_equal(y.ndim, 4);
    assert_int_equal(y.shape[1], 3);
    assert_int_equal(y.shape[2], 1);
    for (int p = 0; p < 6; p++) {
        double s = 0;
        for (int i = 0; i < 20; i++) s += x.data[p * 20 + i];
        assert_float_equal(y.data[p], s / 20, 1e-5);
    }
    tu_gradcheck("GlobalAveragePool", 1, &x, &k, 0, NULL, 1e-2f, 2e-3f);
    fl_tensor_free(&y);
    fl_tensor_free(&x);
}

/* ---- errors --------------------------------------------------------------------------------------- */
static fl_status try_op(const char *op, fl_tensor *x, fl_tensor *w, int n_attr, fl_attr *attr, fl_err *e) {
    fl_model *m = fl_model_new();
    int in[2], out;
    in[0] = fl_model_add_value(m, "x", FL_VAL_INPUT, x, e);
    in[1] = w ? fl_model_add_value(m, "w", FL_VAL_PARAM, w, e) : -1;
    out = fl_model_add_value(m, "y", FL_VAL_ACT, NULL, e);
    fl_status st = fl_model_add_node(m, op, "the_node", w ? 2 : 1, in, 1, &out, n_attr, attr, e);
    if (st == FL_OK) st = fl_model_set_io(m, 1, in, 1, &out, e);
    if (st == FL_OK) st = fl_model_finish(m, e);
    if (st == FL_OK) st = fl_model_forward(m, x, e);
    fl_model_free(m);
    return st;
}

static void expect_error(fl_status got, fl_status want, const fl_err *e, const char *needle) {
    assert_int_equal(got, want);
    if (!strstr(e->msg, "the_node") || !strstr(e->msg, needle))
        fail_msg("error message '%s' lacks 'the_node' or '%s'", e->msg, needle);
}

static void test_errors(void **state) {
    fl_err e = {0};
    int64_t s3[3] = {1, 2, 8}, w3[3] = {3, 2, 3};
    fl_tensor x3 = tu_tensor(3, s3, &rng, -1, 1), w3t = tu_tensor(3, w3, &rng, -1, 1);
    fl_tensor x4 = t4(1, 2, 6, 6, -1, 1), w4 = t4(3, 2, 3, 3, -1, 1);
    int64_t k1[1] = {2}, k3[3] = {2, 2, 2}, k2[2] = {2, 2};
    fl_attr a;
    /* 1-D data, attributes absent: found when shapes are planned */
    expect_error(try_op("Conv", &x3, &w3t, 0, NULL, &e), FL_ERR_UNSUPPORTED, &e, "only 2-D");
    expect_error(try_op("ConvTranspose", &x3, &w3t, 0, NULL, &e), FL_ERR_UNSUPPORTED, &e, "only 2-D");
    /* 1-D / 3-D attributes: found at init */
    a = fl_attr_ints("kernel_shape", 1, k1);
    expect_error(try_op("MaxPool", &x3, NULL, 1, &a, &e), FL_ERR_UNSUPPORTED, &e, "only 2-D");
    a = fl_attr_ints("kernel_shape", 3, k3);
    expect_error(try_op("AveragePool", &x4, NULL, 1, &a, &e), FL_ERR_UNSUPPORTED, &e, "only 2-D");
    a = fl_attr_ints("strides", 3, k3);
    expect_error(try_op("Conv", &x4, &w4, 1, &a, &e), FL_ERR_UNSUPPORTED, &e, "only 2-D");
    a = fl_attr_ints("kernel_shape", 2, k2);
    expect_error(try_op("MaxPool", &x3, NULL, 1, &a, &e), FL_ERR_UNSUPPORTED, &e, "only 2-D");
    /* bad values */
    expect_error(try_op("MaxPool", &x4, NULL, 0, NULL, &e), FL_ERR_FORMAT, &e, "kernel_shape");
    a = (fl_attr){.name = "auto_pad", .type = FL_ATTR_STRING, .s = "SAME"};
    expect_error(try_op("Conv", &x4, &w4, 1, &a, &e), FL_ERR_FORMAT, &e, "SAME");
    a = fl_attr_int("group", 2); /* W [3,2,...] with group 2 needs C = 4 and M even */
    expect_error(try_op("Conv", &x4, &w4, 1, &a, &e), FL_ERR_SHAPE, &e, "group 2");
    fl_attr so[2] = {fl_attr_ints("kernel_shape", 2, k2), fl_attr_int("storage_order", 2)};
    expect_error(try_op("MaxPool", &x4, NULL, 2, so, &e), FL_ERR_FORMAT, &e, "storage_order");
    a = fl_attr_int("bogus", 2);
    expect_error(try_op("Conv", &x4, &w4, 1, &a, &e), FL_ERR_UNSUPPORTED, &e, "bogus");
    int64_t big[2] = {7, 7};
    a = fl_attr_ints("kernel_shape", 2, big); /* window larger than the image */
    expect_error(try_op("AveragePool", &x4, NULL, 1, &a, &e), FL_ERR_SHAPE, &e, "too small");
    fl_tensor_free(&x3);
    fl_tensor_free(&w3t);
    fl_tensor_free(&x4);
    fl_tensor_free(&w4);
}

/* The strided col2im (conv_lower.c) against the generic one (src/tensor/kernels.c): written
 * when clearing (nothing of what was there survives), added otherwise; the sums in another
 * order, so within rounding. */
static void test_strided_fold(void **state) {
    (void)state;
    /* 3 images [2, 9, 7] <- Z [3, 5, 5x4], 4x4 stride 2 pad 1 */
    fl_conv2d_geom g = {.c = 2, .h = 9, .w = 7, .kh = 4, .kw = 4, .sh = 2, .sw = 2,
                        .pt = 1, .pl = 1, .pb = 1, .pr = 1, .dh = 1, .dw = 1, .oh = 5, .ow = 4};
    const int n = 3, zc = 5, k = g.c * g.kh * g.kw, p = g.oh * g.ow, img = g.c * g.h * g.w;
    fl_node node = {.name = "t"};
    fl_lowered L = {0};
    fl_err e = {0};
    assert_int_equal(fl_lowered_plan(&L, &node, n, g.c, zc, 1, &g, 1, &e), FL_OK);
    fl_tensor W = t4(1, 1, zc, k, -1, 1), Z = t4(n, zc, g.oh, g.ow, -1, 1);
    fl_tensor I = t4(n, g.c, g.h, g.w, 5, 6), I2 = t4(n, g.c, g.h, g.w, 0, 0);
    fl_tensor want = t4(n, g.c, g.h, g.w, 0, 0), cols = t4(1, 1, k, p, 0, 0);
    fl_lowered_adjoint(&L, W.data, Z.data, I.data, 1); /* I's 5..6 must not survive */
    for (int j = 0; j < n; j++) {
        fl_sgemm(1, 0, k, p, zc, 1.0f, W.data, k, Z.data + (size_t)j * zc * p, p, 0.0f, cols.data, p);
        fl_col2im_ld(want.data + (size_t)j * img, cols.data, (size_t)p, &g);
    }
    for (int64_t i = 0; i < I.size; i++) assert_float_equal(I.data[i], want.data[i], 1e-5);
    memcpy(I2.data, I.data, sizeof(float) * (size_t)I.size);
    fl_lowered_adjoint(&L, W.data, Z.data, I2.data, 0);
    for (int64_t i = 0; i < I.size; i++) assert_float_equal(I2.data[i], 2 * I.data[i], 1e-5);
    fl_lowered_free(&L);
    fl_tensor *all[] = {&W, &Z, &I, &I2, &want, &cols};
    for (int i = 0; i < 6; i++) fl_tensor_free(all[i]);
}

int main(void) {
    fl_rng_seed(&rng, 42);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_conv_winograd),
        cmocka_unit_test(test_convtranspose),
        cmocka_unit_test(test_strided_fold),
        cmocka_unit_test(test_conv_known_values),
        cmocka_unit_test(test_param_grads_only),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_maxpool_indices),
        cmocka_unit_test(test_global_average_pool),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
