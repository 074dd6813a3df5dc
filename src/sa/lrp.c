/* Layer-wise relevance propagation: a backward pass of its own over the model's nodes, reading
 * the activations the last forward pass left in m->values (see lrp.h for the rules).
 *
 * fl_lrp_new walks the graph backward from the explained value and turns every node on the
 * way into a "step" that knows which input gets relevance and which rule applies; anything
 * without a rule fails there, naming the node, before any data is touched. fl_lrp_run then
 * replays the steps in reverse topological order. Relevance buffers are kept per value and
 * accumulated with +=, so a value read by several nodes collects relevance from all of them.
 *
 * Linear layers are done with the same two GEMMs for every rule: a forward-direction product
 * gives the denominators z_j (the epsilon rule reuses the stored output instead), and the
 * transposed product spreads s_j = R_j / z_j back over the inputs; the input's relevance is
 * then x_i times that. Convolutions go through im2col / col2im one image at a time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flare/lrp.h"
#include "nn/op_conv.h"

enum { K_DENSE, K_CONV, K_MAXPOOL, K_AVGPOOL, K_GAP, K_PASS, K_BN, K_ADD, K_CONCAT, K_PAD };

typedef struct lrp_step {
    int node, kind;
    int x;              /* the input that receives relevance (K_ADD: both, see in[]) */
    int w;              /* K_DENSE / K_CONV: weight value; K_BN: scale */
    int tb;             /* K_DENSE: B is stored [N,K] */
    int groups;         /* K_CONV: group (depthwise: the channel count) */
    int axis;           /* K_CONCAT: the axis, normalised on the first run */
    int64_t pad0[FL_MAX_DIMS]; /* K_PAD: the leading pad of each axis (constant mode, >= 0) */
    float alpha;        /* K_DENSE: Gemm's alpha */
    float *wp, *wn;     /* z+: the positive and negative parts of alpha * W, W's layout */
    fl_window win;      /* pools and Conv */
    int ceil_mode, count_include_pad;
} lrp_step;

#define N_SCRATCH 8

struct fl_lrp {
    fl_model *m;
    fl_lrp_opts o;
    int explained;
    int n_steps;
    lrp_step *steps;   /* reverse topological order */
    uint8_t *need;     /* per value: on the explained path */
    fl_tensor *rel;    /* per value: relevance (allocated for needed values on run) */
    int ran;
    float *scr[N_SCRATCH];
    size_t cap[N_SCRATCH];
};

static const char *const rule_names[] = {"epsilon", "zplus"};

fl_status fl_lrp_rule_parse(const char *s, fl_lrp_rule *out, fl_err *e) {
    if (!strcmp(s, "epsilon") || !strcmp(s, "eps")) *out = FL_LRP_EPSILON;
    else if (!strcmp(s, "zplus") || !strcmp(s, "z+")) *out = FL_LRP_ZPLUS;
    else return fl_fail(e, FL_ERR_ARG, "unknown LRP rule '%s' (expected epsilon or zplus)", s);
    return FL_OK;
}

const char *fl_lrp_rule_name(fl_lrp_rule r) {
    return (unsigned)r < 2 ? rule_names[r] : "?";
}

void fl_lrp_opts_default(fl_lrp_opts *o) {
    o->rule = FL_LRP_EPSILON;
    o->eps = 1e-7f;
}

void fl_lrp_free(fl_lrp *l) {
    if (!l) return;
    for (int i = 0; i < l->n_steps; i++) {
        free(l->steps[i].wp);
        free(l->steps[i].wn);
    }
    if (l->rel)
        for (int v = 0; v < l->m->n_values; v++) fl_tensor_free(&l->rel[v]);
    for (int i = 0; i < N_SCRATCH; i++) fl_free(l->scr[i]);
    free(l->steps);
    free(l->need);
    free(l->rel);
    free(l);
}

/* ---- planning ------------------------------------------------------------------------------ */
static int is_data(const fl_model *m, int v) {
    return v >= 0 && (m->values[v].kind == FL_VAL_ACT || m->values[v].kind == FL_VAL_INPUT);
}

static int is_weight(const fl_model *m, int v) {
    return v >= 0 && (m->values[v].kind == FL_VAL_PARAM || m->values[v].kind == FL_VAL_CONST);
}

static fl_status unsupported(const fl_node *n, const char *why, fl_err *e) {
    return fl_fail(e, FL_ERR_UNSUPPORTED,
                   "LRP: node '%s' (%s) is on the path to the explained logits and %s", n->name,
                   n->op->name, why);
}

static fl_status split_weights(fl_lrp *l, lrp_step *s, fl_err *e) {
    const fl_tensor *w = &l->m->values[s->w].t;
    s->wp = malloc(sizeof(float) * (size_t)(w->size ? w->size : 1));
    s->wn = malloc(sizeof(float) * (size_t)(w->size ? w->size : 1));
    if (!s->wp || !s->wn) return fl_fail(e, FL_ERR_NOMEM, "LRP: out of memory for weights");
    for (int64_t i = 0; i < w->size; i++) {
        float v = s->alpha * w->data[i];
        s->wp[i] = v > 0 ? v : 0;
        s->wn[i] = v < 0 ? v : 0;
    }
    return FL_OK;
}

/* Pad: only the constant mode with pads >= 0 (torch's zero frame before AvgPool2d) has a
 * rule: the frame is constant, like a bias, and the input's values pass relevance through
 * unchanged. The pads are the attribute (opset < 11) or input 1 with the optional axes of
 * input 3 (opset 18), constants in both. */
static fl_status plan_pad(const fl_model *m, const fl_node *n, lrp_step *s, fl_err *e) {
    const fl_attr *mode = fl_node_attr(n, "mode");
    if (mode && mode->s && strcmp(mode->s, "constant"))
        return unsupported(n, "pads by reflecting or repeating values (only constant mode has a rule)", e);
    const int rank = m->values[n->in[0]].t.ndim;
    int64_t pads[2 * FL_MAX_DIMS] = {0}, axes[FL_MAX_DIMS];
    int np = 0, na = rank;
    const fl_attr *pa = fl_node_attr(n, "pads");
    if (pa) {
        np = pa->n;
        for (int i = 0; i < np && i < 2 * FL_MAX_DIMS; i++) pads[i] = pa->ints[i];
    } else if (n->n_in > 1 && is_weight(m, n->in[1])) {
        const fl_tensor *t = &m->values[n->in[1]].t;
        np = (int)t->size;
        for (int i = 0; i < np && i < 2 * FL_MAX_DIMS; i++) pads[i] = (int64_t)t->data[i];
    } else {
        return unsupported(n, "has pads computed from activations", e);
    }
    for (int i = 0; i < rank; i++) axes[i] = i;
    if (n->n_in > 3 && n->in[3] >= 0) {
        if (!is_weight(m, n->in[3])) return unsupported(n, "has axes computed from activations", e);
        const fl_tensor *t = &m->values[n->in[3]].t;
        na = (int)t->size;
        for (int i = 0; i < na && i < FL_MAX_DIMS; i++)
            axes[i] = (int64_t)t->data[i] < 0 ? (int64_t)t->data[i] + rank : (int64_t)t->data[i];
    }
    if (rank > FL_MAX_DIMS || na > rank || np != 2 * na)
        return unsupported(n, "has pads LRP does not understand", e);
    for (int i = 0; i < na; i++) {
        if (axes[i] < 0 || axes[i] >= rank) return unsupported(n, "has an axis out of range", e);
        if (pads[i] < 0 || pads[i + na] < 0) return unsupported(n, "crops (negative pads)", e);
        s->pad0[axes[i]] = pads[i];
    }
    return FL_OK;
}

/* Turn node n (whose output is needed) into a step; mark the inputs that get relevance. */
static fl_status plan_node(fl_lrp *l, int ni, lrp_step *s, fl_err *e) {
    fl_model *m = l->m;
    fl_node *n = &m->nodes[ni];
    const char *op = n->op->name;
    memset(s, 0, sizeof *s);
    s->node = ni;
    s->x = n->in[0];
    s->alpha = 1;
    fl_status st = FL_OK;
    if (!strcmp(op, "Gemm") || !strcmp(op, "MatMul")) {
        s->kind = K_DENSE;
        s->w = n->in[1];
        if (!is_data(m, n->in[0]) || !is_weight(m, n->in[1]))
            return unsupported(n, "has no rule unless input A is an activation and B a weight",
                               e);
        if (!strcmp(op, "Gemm")) {
            if (fl_node_attr_int(n, "transA", 0)) return unsupported(n, "has transA = 1", e);
            if (n->n_in > 2 && is_data(m, n->in[2]))
                return unsupported(n, "adds an activation as C", e);
            s->tb = fl_node_attr_int(n, "transB", 0) != 0;
            s->alpha = fl_node_attr_float(n, "alpha", 1.0f);
        }
        if (m->values[s->w].t.ndim != 2) return unsupported(n, "has a weight that is not 2-D", e);
    } else if (!strcmp(op, "Conv")) {
        s->kind = K_CONV;
        s->w = n->in[1];
        if (!is_weight(m, s->w)) return unsupported(n, "has activations as weights", e);
        int64_t groups = fl_node_attr_int(n, "group", 1);
        if (groups < 1 || groups > (1 << 20)) return unsupported(n, "has a bad group", e);
        s->groups = (int)groups;
        if (m->values[s->w].t.ndim != 4) return unsupported(n, "is not a 2-D convolution", e);
        st = fl_window_parse(n, &s->win, e);
    } else if (!strcmp(op, "MaxPool") || !strcmp(op, "AveragePool")) {
        s->kind = op[0] == 'M' ? K_MAXPOOL : K_AVGPOOL;
        st = fl_window_parse(n, &s->win, e);
        s->ceil_mode = fl_node_attr_int(n, "ceil_mode", 0) != 0;
        s->count_include_pad = fl_node_attr_int(n, "count_include_pad", 0) != 0;
    } else if (!strcmp(op, "GlobalAveragePool")) {
        s->kind = K_GAP;
    } else if (!strcmp(op, "BatchNormalization")) {
        s->kind = K_BN;
        s->w = n->in[1];
        for (int i = 1; i < 5; i++)
            if (!is_weight(m, n->in[i])) return unsupported(n, "has activations as parameters", e);
    } else if (!strcmp(op, "Add")) {
        s->kind = K_ADD;
        s->x = -1;
        for (int i = 0; i < 2; i++)
            if (is_data(m, n->in[i])) l->need[n->in[i]] = 1;
        return FL_OK;
    } else if (!strcmp(op, "Pad")) {
        s->kind = K_PAD;
        st = plan_pad(m, n, s, e);
    } else if (!strcmp(op, "Concat")) {
        s->kind = K_CONCAT;
        s->x = -1;
        s->axis = (int)fl_node_attr_int(n, "axis", 0);
        for (int i = 0; i < n->n_in; i++)
            if (is_data(m, n->in[i])) l->need[n->in[i]] = 1;
        return FL_OK;
    } else if (!strcmp(op, "Relu") || !strcmp(op, "Identity") || !strcmp(op, "Dropout") ||
               !strcmp(op, "Flatten") || !strcmp(op, "Reshape") || !strcmp(op, "Squeeze") ||
               !strcmp(op, "Unsqueeze")) {
        s->kind = K_PASS;
    } else {
        return unsupported(n, "has no relevance rule (supported: Gemm, MatMul, Conv, MaxPool, "
                              "AveragePool, GlobalAveragePool, BatchNormalization, Add, Concat, "
                              "Pad, Relu, Identity, Dropout, Flatten, Reshape, Squeeze, "
                              "Unsqueeze)",
                           e);
    }
    if (st != FL_OK) return st;
    if (is_data(m, s->x)) l->need[s->x] = 1;
    if ((s->kind == K_DENSE || s->kind == K_CONV) && l->o.rule == FL_LRP_ZPLUS)
        return split_weights(l, s, e);
    return FL_OK;
}

int fl_lrp_logits(const fl_model *m) {
    int v = m->outputs[0];
    while (m->values[v].producer >= 0) {
        const fl_node *p = &m->nodes[m->values[v].producer];
        if (strcmp(p->op->name, "Softmax") && strcmp(p->op->name, "LogSoftmax")) break;
        v = p->in[0];
    }
    return v;
}

fl_status fl_lrp_new(fl_model *m, const fl_lrp_opts *o, fl_lrp **out, fl_err *e) {
    *out = NULL;
    if (m->n_outputs < 1) return fl_fail(e, FL_ERR_ARG, "LRP: the model has no output");
    if (!(o->eps >= 0) || !isfinite(o->eps))
        return fl_fail(e, FL_ERR_ARG, "LRP: epsilon must be finite and >= 0");
    if (o->rule != FL_LRP_EPSILON && o->rule != FL_LRP_ZPLUS)
        return fl_fail(e, FL_ERR_ARG, "LRP: unknown rule %d", (int)o->rule);
    fl_lrp *l = calloc(1, sizeof *l);
    if (!l) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    l->m = m;
    l->o = *o;
    l->need = calloc((size_t)m->n_values, 1);
    l->rel = calloc((size_t)m->n_values, sizeof(fl_tensor));
    l->steps = calloc((size_t)m->n_nodes + 1, sizeof(lrp_step));
    if (!l->need || !l->rel || !l->steps) {
        fl_lrp_free(l);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    int v = fl_lrp_logits(m);
    l->explained = v;
    l->need[v] = 1;
    fl_status st = FL_OK;
    for (int i = m->n_nodes - 1; i >= 0 && st == FL_OK; i--) {
        const fl_node *n = &m->nodes[i];
        int needed = 0;
        for (int k = 0; k < n->n_out; k++) needed |= l->need[n->out[k]];
        if (needed) st = plan_node(l, i, &l->steps[l->n_steps++], e);
    }
    if (st != FL_OK) {
        fl_lrp_free(l);
        return st;
    }
    *out = l;
    return FL_OK;
}

/* ---- helpers ------------------------------------------------------------------------------- */
static inline float stab(float z, float eps) { return z >= 0 ? z + eps : z - eps; }

static float *scratch(fl_lrp *l, int i, size_t n) {
    if (n > l->cap[i]) {
        fl_free(l->scr[i]);
        l->scr[i] = fl_alloc((n ? n : 1) * sizeof(float));
        l->cap[i] = l->scr[i] ? n : 0;
    }
    return l->scr[i];
}

#define NEED_SCRATCH(p) \
    if (!(p)) return fl_fail(e, FL_ERR_NOMEM, "LRP: out of memory for scratch")

static void split_sign(const float *x, float *xp, float *xn, int64_t n, int *any_neg) {
    int neg = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        xp[i] = v > 0 ? v : 0;
        xn[i] = v < 0 ? v : 0;
        neg |= v < 0;
    }
    *any_neg = neg;
}

/* S = R / (Z + eps * sign(Z)), sign(0) = +1, or R / (Z + eps) for z+ (Z >= 0 there).
 * S may be z (in place). */
static void divide(float *S, const float *r, const float *z, int64_t n, float eps, int zplus) {
    if (zplus)
        for (int64_t i = 0; i < n; i++) S[i] = r[i] / (z[i] + eps);
    else
        for (int64_t i = 0; i < n; i++) S[i] = r[i] / (z[i] + (z[i] >= 0 ? eps : -eps));
}

/* ---- linear layers -------------------------------------------------------------------------- */
/* Gemm / MatMul: X [M,K], op(B) [K,N], Y [M,N]. */
static fl_status step_dense(fl_lrp *l, const lrp_step *s, fl_err *e) {
    fl_model *m = l->m;
    const fl_node *n = &m->nodes[s->node];
    const fl_tensor *X = &m->values[s->x].t, *Y = &m->values[n->out[0]].t;
    const fl_tensor *B = &m->values[s->w].t, *R = &l->rel[n->out[0]];
    if (X->ndim != 2) return unsupported(n, "has an input that is not 2-D", e);
    int M = (int)X->shape[0], K = (int)X->shape[1], N = (int)Y->shape[1];
    int ldb = s->tb ? K : N;
    float *RX = l->rel[s->x].data;
    float *S = scratch(l, 0, (size_t)M * N), *G = scratch(l, 1, (size_t)M * K);
    NEED_SCRATCH(S && G);
    if (l->o.rule == FL_LRP_EPSILON) {
        divide(S, R->data, Y->data, (int64_t)M * N, l->o.eps, 0);
        fl_sgemm(0, !s->tb, M, K, N, s->alpha, S, N, B->data, ldb, 0, G, K);
        for (int64_t i = 0; i < (int64_t)M * K; i++) RX[i] += X->data[i] * G[i];
        return FL_OK;
    }
    float *Xp = scratch(l, 2, (size_t)M * K), *Xn = scratch(l, 3, (size_t)M * K);
    NEED_SCRATCH(Xp && Xn);
    int neg;
    split_sign(X->data, Xp, Xn, (int64_t)M * K, &neg);
    fl_sgemm(0, s->tb, M, N, K, 1, Xp, K, s->wp, ldb, 0, S, N);
    if (neg) fl_sgemm(0, s->tb, M, N, K, 1, Xn, K, s->wn, ldb, 1, S, N);
    divide(S, R->data, S, (int64_t)M * N, l->o.eps, 1);
    fl_sgemm(0, !s->tb, M, K, N, 1, S, N, s->wp, ldb, 0, G, K);
    for (int64_t i = 0; i < (int64_t)M * K; i++) RX[i] += Xp[i] * G[i];
    if (neg) {
        fl_sgemm(0, !s->tb, M, K, N, 1, S, N, s->wn, ldb, 0, G, K);
        for (int64_t i = 0; i < (int64_t)M * K; i++) RX[i] += Xn[i] * G[i];
    }
    return FL_OK;
}

/* The geometry of a window op over X [N,C,H,W] (kernel from W for Conv). */
static fl_status window_geom(const fl_node *n, const lrp_step *s, const fl_tensor *X, int kh,
                             int kw, int ceil_mode, fl_conv2d_geom *g, fl_err *e) {
    int64_t oh, ow, pt, pb, pl, pr;
    fl_status st = fl_window_out(n, &s->win, 0, X->shape[2], kh, ceil_mode, &oh, &pt, &pb, e);
    if (st == FL_OK) st = fl_window_out(n, &s->win, 1, X->shape[3], kw, ceil_mode, &ow, &pl, &pr, e);
    if (st != FL_OK) return st;
    *g = (fl_conv2d_geom){.c = (int)X->shape[1], .h = (int)X->shape[2], .w = (int)X->shape[3],
                          .kh = kh, .kw = kw, .sh = (int)s->win.stride[0],
                          .sw = (int)s->win.stride[1], .pt = (int)pt, .pl = (int)pl,
                          .pb = (int)pb, .pr = (int)pr, .dh = (int)s->win.dil[0],
                          .dw = (int)s->win.dil[1], .oh = (int)oh, .ow = (int)ow};
    return FL_OK;
}

/* Conv: X [N,C,H,W], W [O,C/G,kh,kw], Y [N,O,oh,ow] in G groups (group g maps input channels
 * [g C/G, (g+1) C/G) to outputs [g O/G, (g+1) O/G) with weights rows [g O/G, (g+1) O/G)).
 * Per image and group, cols = im2col(X_g) [C/G*kh*kw, P] and Z_g = W_g cols, so the
 * transposed product is col2im(W_g^T S_g): each group is a linear layer of its own, which is
 * what a dense convolution with zero weights outside the groups' blocks computes
 * (test_lrp_grouped). Images are independent: they are spread over the thread pool, each
 * thread with its own slice of scratch. */
typedef struct conv_job {
    const fl_lrp *l;
    const lrp_step *s;
    const float *X, *Y, *W, *R;
    float *RX, *scr;
    fl_conv2d_geom g; /* of one group: g.c = C/G */
    int O, CK, P, G;  /* O, CK: of one group */
    int64_t img;      /* floats of one group of one image */
    size_t per_thread; /* floats of scratch per thread */
} conv_job;

/* Group k of image b: x, y, r, rx its slices; S, cols, G, Xp, Xn the thread's scratch. */
static void conv_group(const conv_job *j, int k, const float *x, const float *y, const float *r,
                       float *rx, float *S, float *cols, float *G, float *Xp, float *Xn) {
    const lrp_step *s = j->s;
    const int O = j->O, CK = j->CK, P = j->P, zplus = j->l->o.rule == FL_LRP_ZPLUS;
    const int64_t img = j->img, op = (int64_t)O * P, woff = (int64_t)k * O * CK;
    int any = 0;
    for (int64_t i = 0; i < op && !any; i++) any = r[i] != 0;
    if (!any) return; /* an input that is not explained (or relevance died out) */
    int neg = 0;
    if (zplus) {
        split_sign(x, Xp, Xn, img, &neg);
        fl_im2col(cols, Xp, &j->g);
        fl_sgemm(0, 0, O, P, CK, 1, s->wp + woff, CK, cols, P, 0, S, P);
        if (neg) {
            fl_im2col(cols, Xn, &j->g);
            fl_sgemm(0, 0, O, P, CK, 1, s->wn + woff, CK, cols, P, 1, S, P);
        }
        divide(S, r, S, op, j->l->o.eps, 1);
    } else {
        divide(S, r, y, op, j->l->o.eps, 0);
    }
    for (int pass = 0; pass < 1 + neg; pass++) {
        const float *w = (!zplus ? j->W : pass ? s->wn : s->wp) + woff;
        const float *xs = !zplus ? x : pass ? Xn : Xp;
        fl_sgemm(1, 0, CK, P, O, 1, w, CK, S, P, 0, cols, P);
        memset(G, 0, sizeof(float) * (size_t)img);
        fl_col2im(G, cols, &j->g);
        for (int64_t i = 0; i < img; i++) rx[i] += xs[i] * G[i];
    }
}

static void conv_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    const conv_job *j = ctx;
    const int64_t img = j->img, op = (int64_t)j->O * j->P;
    float *S = j->scr + (size_t)tid * j->per_thread, *cols = S + op, *G = cols + (int64_t)j->CK * j->P;
    float *Xp = G + img, *Xn = Xp + img;
    for (int64_t b = lo; b < hi; b++)
        for (int k = 0; k < j->G; k++) {
            int64_t gi = b * j->G + k; /* group k of image b: its input and output slices */
            conv_group(j, k, j->X + gi * img, j->Y + gi * op, j->R + gi * op, j->RX + gi * img,
                       S, cols, G, Xp, Xn);
        }
}

static fl_status step_conv(fl_lrp *l, const lrp_step *s, fl_err *e) {
    fl_model *m = l->m;
    const fl_node *n = &m->nodes[s->node];
    const fl_tensor *X = &m->values[s->x].t, *Y = &m->values[n->out[0]].t;
    const fl_tensor *W = &m->values[s->w].t;
    conv_job j = {.l = l, .s = s, .X = X->data, .Y = Y->data, .W = W->data,
                  .R = l->rel[n->out[0]].data, .RX = l->rel[s->x].data, .G = s->groups};
    if (X->ndim != 4 || X->shape[1] % j.G || W->shape[0] % j.G)
        return unsupported(n, "has shapes LRP does not understand", e);
    fl_tensor Xg = *X; /* one group's channels: the geometry of its im2col */
    Xg.shape[1] = X->shape[1] / j.G;
    fl_status st = window_geom(n, s, &Xg, (int)W->shape[2], (int)W->shape[3], 0, &j.g, e);
    if (st != FL_OK) return st;
    j.O = (int)(W->shape[0] / j.G);
    j.CK = (int)(W->shape[1] * W->shape[2] * W->shape[3]);
    j.P = j.g.oh * j.g.ow;
    j.img = Xg.shape[1] * X->shape[2] * X->shape[3];
    if (W->shape[1] != Xg.shape[1] || Y->shape[1] != W->shape[0] ||
        (int64_t)j.P * W->shape[0] * X->shape[0] != Y->size)
        return unsupported(n, "has shapes LRP does not understand", e);
    j.per_thread = (size_t)j.O * j.P + (size_t)j.CK * j.P + 3 * (size_t)j.img;
    j.per_thread = (j.per_thread + 15) & ~(size_t)15; /* 64-byte aligned slices */
    j.scr = scratch(l, 0, j.per_thread * (size_t)fl_parallel_slots());
    NEED_SCRATCH(j.scr);
    fl_parallel_for(X->shape[0], conv_range, &j);
    return FL_OK;
}

/* ---- pooling ---------------------------------------------------------------------------------- */
/* Offsets k in [0, kn) whose position start + k*d lies in [lo, hi). */
static void krange(int start, int kn, int d, int lo, int hi, int *k0, int *k1) {
    int a = 0, b = kn;
    while (a < b && start + a * d < lo) a++;
    while (b > a && start + (b - 1) * d >= hi) b--;
    *k0 = a;
    *k1 = b;
}

typedef struct pool_job {
    const fl_lrp *l;
    const lrp_step *s;
    const float *X, *Y, *R;
    float *RX;
    fl_conv2d_geom g;
} pool_job;

static void pool_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    const pool_job *j = ctx;
    const fl_conv2d_geom g = j->g;
    const int64_t plane = (int64_t)g.h * g.w, oplane = (int64_t)g.oh * g.ow;
    const int zplus = j->l->o.rule == FL_LRP_ZPLUS, maxpool = j->s->kind == K_MAXPOOL;
    const float eps = j->l->o.eps;
    for (int64_t p = lo; p < hi; p++) {
        const float *x = j->X + p * plane, *y = j->Y + p * oplane, *r = j->R + p * oplane;
        float *rx = j->RX + p * plane;
        for (int oy = 0; oy < g.oh; oy++)
            for (int ox = 0; ox < g.ow; ox++) {
                float ro = r[oy * g.ow + ox];
                if (ro == 0) continue;
                int hs = oy * g.sh - g.pt, ws = ox * g.sw - g.pl, i0, i1, j0, j1;
                krange(hs, g.kh, g.dh, 0, g.h, &i0, &i1);
                krange(ws, g.kw, g.dw, 0, g.w, &j0, &j1);
                if (i0 >= i1 || j0 >= j1) continue; /* a window over padding only */
                if (maxpool) { /* winner takes all: the first maximum */
                    int arg = (hs + i0 * g.dh) * g.w + ws + j0 * g.dw;
                    for (int i = i0; i < i1; i++)
                        for (int jj = j0; jj < j1; jj++) {
                            int at = (hs + i * g.dh) * g.w + ws + jj * g.dw;
                            if (x[at] > x[arg]) arg = at;
                        }
                    rx[arg] += ro;
                    continue;
                }
                int div = (i1 - i0) * (j1 - j0);
                if (j->s->count_include_pad) {
                    int a0, a1, b0, b1;
                    krange(hs, g.kh, g.dh, -g.pt, g.h + g.pb, &a0, &a1);
                    krange(ws, g.kw, g.dw, -g.pl, g.w + g.pr, &b0, &b1);
                    div = (a1 - a0) * (b1 - b0);
                }
                float f;
                if (!zplus) {
                    f = ro / stab(y[oy * g.ow + ox], eps) / (float)div;
                } else {
                    float z = 0;
                    for (int i = i0; i < i1; i++)
                        for (int jj = j0; jj < j1; jj++) {
                            float v = x[(hs + i * g.dh) * g.w + ws + jj * g.dw];
                            z += v > 0 ? v : 0;
                        }
                    f = ro / (z / (float)div + eps) / (float)div;
                }
                for (int i = i0; i < i1; i++)
                    for (int jj = j0; jj < j1; jj++) {
                        int at = (hs + i * g.dh) * g.w + ws + jj * g.dw;
                        float v = x[at];
                        rx[at] += (zplus && v < 0 ? 0 : v) * f;
                    }
            }
    }
}

static fl_status step_pool(fl_lrp *l, const lrp_step *s, fl_err *e) {
    fl_model *m = l->m;
    const fl_node *n = &m->nodes[s->node];
    const fl_tensor *X = &m->values[s->x].t, *Y = &m->values[n->out[0]].t;
    pool_job j = {.l = l, .s = s, .X = X->data, .Y = Y->data, .R = l->rel[n->out[0]].data,
                  .RX = l->rel[s->x].data};
    fl_status st = window_geom(n, s, X, (int)s->win.kernel[0], (int)s->win.kernel[1],
                               s->ceil_mode, &j.g, e);
    if (st != FL_OK) return st;
    int64_t planes = X->shape[0] * X->shape[1];
    if (Y->size != planes * j.g.oh * j.g.ow)
        return unsupported(n, "has shapes LRP does not understand", e);
    fl_parallel_for(planes, pool_range, &j);
    return FL_OK;
}

static fl_status step_gap(fl_lrp *l, const lrp_step *s) {
    fl_model *m = l->m;
    const fl_node *n = &m->nodes[s->node];
    const fl_tensor *X = &m->values[s->x].t, *Y = &m->values[n->out[0]].t;
    const float *R = l->rel[n->out[0]].data;
    int64_t planes = X->shape[0] * X->shape[1], hw = X->size / (planes ? planes : 1);
    int zplus = l->o.rule == FL_LRP_ZPLUS;
    for (int64_t p = 0; p < planes; p++) {
        if (R[p] == 0) continue;
        const float *x = X->data + p * hw;
        float *rx = l->rel[s->x].data + p * hw, f;
        if (!zplus) {
            f = R[p] / stab(Y->data[p], l->o.eps) / (float)hw;
        } else {
            double z = 0;
            for (int64_t i = 0; i < hw; i++) z += x[i] > 0 ? x[i] : 0;
            f = R[p] / ((float)(z / (double)hw) + l->o.eps) / (float)hw;
        }
        for (int64_t i = 0; i < hw; i++) rx[i] += (zplus && x[i] < 0 ? 0 : x[i]) * f;
    }
    return FL_OK;
}

/* ---- element-wise ----------------------------------------------------------------------------- */
static fl_status step_bn(fl_lrp *l, const lrp_step *s) {
    fl_model *m = l->m;
    const fl_node *n = &m->nodes[s->node];
    const fl_tensor *X = &m->values[s->x].t, *Y = &m->values[n->out[0]].t;
    const float *scale = m->values[n->in[1]].t.data, *var = m->values[n->in[4]].t.data;
    const float *R = l->rel[n->out[0]].data;
    float bn_eps = fl_node_attr_float(n, "epsilon", 1e-5f), eps = l->o.eps;
    int64_t N = X->shape[0], C = X->ndim > 1 ? X->shape[1] : 1, hw = N * C > 0 ? X->size / (N * C) : 1;
    float *RX = l->rel[s->x].data;
    for (int64_t b = 0; b < N; b++)
        for (int64_t c = 0; c < C; c++) {
            float a = scale[c] / sqrtf(var[c] + bn_eps);
            int64_t o = (b * C + c) * hw;
            for (int64_t i = o; i < o + hw; i++) {
                if (R[i] == 0) continue;
                float z = a * X->data[i];
                if (l->o.rule == FL_LRP_EPSILON) RX[i] += z / stab(Y->data[i], eps) * R[i];
                else if (z > 0) RX[i] += z / (z + eps) * R[i];
            }
        }
    return FL_OK;
}

static fl_status step_add(fl_lrp *l, const lrp_step *s, fl_err *e) {
    fl_model *m = l->m;
    const fl_node *n = &m->nodes[s->node];
    const fl_tensor *Y = &m->values[n->out[0]].t;
    const float *R = l->rel[n->out[0]].data;
    const float *xs[2] = {NULL, NULL};
    float *rs[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        int v = n->in[k];
        if (!is_data(m, v)) continue;
        if (m->values[v].t.size != Y->size)
            return unsupported(n, "broadcasts an activation (relevance cannot be split)", e);
        xs[k] = m->values[v].t.data;
        rs[k] = l->rel[v].data;
    }
    for (int64_t i = 0; i < Y->size; i++) {
        if (R[i] == 0) continue;
        float den;
        if (l->o.rule == FL_LRP_EPSILON) {
            den = stab(Y->data[i], l->o.eps);
        } else {
            den = l->o.eps;
            for (int k = 0; k < 2; k++)
                if (xs[k] && xs[k][i] > 0) den += xs[k][i];
        }
        for (int k = 0; k < 2; k++) {
            if (!xs[k]) continue;
            float v = xs[k][i];
            if (l->o.rule == FL_LRP_ZPLUS && v < 0) v = 0;
            rs[k][i] += v / den * R[i];
        }
    }
    return FL_OK;
}

/* Concat: each activation input gets back the slab of the output's relevance it filled (a
 * constant input's slab is dropped, like a bias's share). Conserves exactly. */
static fl_status step_concat(fl_lrp *l, const lrp_step *s, fl_err *e) {
    fl_model *m = l->m;
    const fl_node *n = &m->nodes[s->node];
    const fl_tensor *Y = &m->values[n->out[0]].t;
    int ax = s->axis < 0 ? s->axis + Y->ndim : s->axis;
    if (ax < 0 || ax >= Y->ndim) return unsupported(n, "has an axis out of range", e);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++) outer *= Y->shape[d];
    for (int d = ax + 1; d < Y->ndim; d++) inner *= Y->shape[d];
    const int64_t row = Y->shape[ax] * inner;
    const float *R = l->rel[n->out[0]].data;
    int64_t at = 0; /* where input k's slab starts in each output row */
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        const fl_tensor *x = &m->values[n->in[k]].t;
        const int64_t len = x->ndim == Y->ndim ? x->shape[ax] * inner : 0;
        if (is_data(m, n->in[k])) {
            float *rx = l->rel[n->in[k]].data;
            for (int64_t o = 0; o < outer; o++)
                for (int64_t i = 0; i < len; i++) rx[o * len + i] += R[o * row + at + i];
        }
        at += len;
    }
    if (at != row) return unsupported(n, "has shapes LRP does not understand", e);
    return FL_OK;
}

/* Pad (constant): the input's positions take the relevance of theirs in the output. */
static fl_status step_pad(fl_lrp *l, const lrp_step *s, fl_err *e) {
    fl_model *m = l->m;
    const fl_node *n = &m->nodes[s->node];
    const fl_tensor *X = &m->values[s->x].t, *Y = &m->values[n->out[0]].t;
    if (X->ndim != Y->ndim) return unsupported(n, "has shapes LRP does not understand", e);
    int64_t ystride[FL_MAX_DIMS], idx[FL_MAX_DIMS] = {0}, base = 0;
    for (int d = X->ndim - 1, st = 1; d >= 0; d--) {
        ystride[d] = st, st *= (int)Y->shape[d];
        if (X->shape[d] + s->pad0[d] > Y->shape[d])
            return unsupported(n, "has shapes LRP does not understand", e);
        base += s->pad0[d] * ystride[d];
    }
    const float *R = l->rel[n->out[0]].data;
    float *rx = l->rel[s->x].data;
    for (int64_t i = 0; i < X->size; i++) { /* idx: X's index of element i */
        int64_t at = base;
        for (int d = 0; d < X->ndim; d++) at += idx[d] * ystride[d];
        rx[i] += R[at];
        for (int d = X->ndim - 1; d >= 0 && ++idx[d] == X->shape[d]; d--) idx[d] = 0;
    }
    return FL_OK;
}

/* ---- running ---------------------------------------------------------------------------------- */
fl_status fl_lrp_run(fl_lrp *l, const int32_t *target, fl_err *e) {
    fl_model *m = l->m;
    if (m->training)
        return fl_fail(e, FL_ERR_ARG, "LRP explains eval-mode forward passes (m->training is set)");
    const fl_tensor *Y = &m->values[l->explained].t;
    if (!Y->data || Y->ndim != 2)
        return fl_fail(e, FL_ERR_SHAPE,
                       "LRP: the explained value '%s' must be [N, K] logits after a forward pass",
                       m->values[l->explained].name);
    for (int v = 0; v < m->n_values; v++) {
        if (!l->need[v]) continue;
        fl_tensor *r = &l->rel[v];
        const fl_tensor *t = &m->values[v].t;
        if (!t->data) return fl_fail(e, FL_ERR_ARG, "LRP: run the model forward first");
        if (!fl_tensor_same_shape(r, t) || !r->data) {
            fl_tensor_free(r);
            if (fl_tensor_alloc(r, t->ndim, t->shape) != FL_OK)
                return fl_fail(e, FL_ERR_NOMEM, "LRP: out of memory for relevance of '%s'",
                               m->values[v].name);
        } else {
            memset(r->data, 0, sizeof(float) * (size_t)r->size);
        }
    }
    int64_t N = Y->shape[0], K = Y->shape[1];
    float *R0 = l->rel[l->explained].data;
    for (int64_t b = 0; b < N; b++) {
        const float *y = Y->data + b * K;
        int64_t t = 0;
        if (target) {
            t = target[b];
            if (t < 0) continue;
            if (t >= K)
                return fl_fail(e, FL_ERR_ARG, "LRP: target %lld of input %lld is not below %lld",
                               (long long)t, (long long)b, (long long)K);
        } else {
            for (int64_t k = 1; k < K; k++)
                if (y[k] > y[t]) t = k;
        }
        R0[b * K + t] = y[t];
    }
    fl_status st = FL_OK;
    for (int i = 0; i < l->n_steps && st == FL_OK; i++) {
        const lrp_step *s = &l->steps[i];
        const fl_node *n = &m->nodes[s->node];
        switch (s->kind) {
        case K_DENSE: st = step_dense(l, s, e); break;
        case K_CONV: st = step_conv(l, s, e); break;
        case K_MAXPOOL:
        case K_AVGPOOL: st = step_pool(l, s, e); break;
        case K_GAP: st = step_gap(l, s); break;
        case K_BN: st = step_bn(l, s); break;
        case K_ADD: st = step_add(l, s, e); break;
        case K_CONCAT: st = step_concat(l, s, e); break;
        case K_PAD: st = step_pad(l, s, e); break;
        default: { /* K_PASS */
            if (!is_data(m, s->x)) break;
            const fl_tensor *r = &l->rel[n->out[0]];
            float *rx = l->rel[s->x].data;
            if (l->rel[s->x].size != r->size)
                return unsupported(n, "changes the number of elements", e);
            for (int64_t j = 0; j < r->size; j++) rx[j] += r->data[j];
        }
        }
    }
    l->ran = st == FL_OK;
    return st;
}

const fl_tensor *fl_lrp_relevance_idx(const fl_lrp *l, int v) {
    if (!l->ran || v < 0 || v >= l->m->n_values || !l->need[v]) return NULL;
    return &l->rel[v];
}

const fl_tensor *fl_lrp_relevance(const fl_lrp *l, const char *name) {
    return fl_lrp_relevance_idx(l, fl_model_find(l->m, name));
}

const char *fl_lrp_explained(const fl_lrp *l) { return l->m->values[l->explained].name; }
