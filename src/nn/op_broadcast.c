/* Ops that repeat elements: Expand, Tile, Where.
 *
 * Each input is read through an index map (imap.h): Expand broadcasts x to the requested
 * shape (numpy rules in both directions: a 1 in the shape keeps x's dim), Tile reads output
 * position o of dim d from o mod x's dim. Backward scatters dy through the same map, which
 * sums the gradient of every repeated element. Where gathers its three broadcast inputs and
 * picks; its gradient goes to X where the condition holds and to Y elsewhere (the condition
 * is not differentiable).
 *
 * Expand's shape and Tile's repeats are read when the node is planned, like Reshape's shape
 * (op_shape.c), so they may be computed from a Shape chain. */
#include <stdio.h>
#include <string.h>

#include "flare/model.h"
#include "nn/imap.h"
#include "nn/ops.h"

typedef struct rep_state {
    fl_imap im[3];
    float *cond, *tmp; /* Where: gathered condition and scratch, [output size] each */
    int64_t cap;
} rep_state;

static void rep_free(fl_node *n) {
    rep_state *s = n->state;
    for (int i = 0; s && i < 3; i++) fl_imap_free(&s->im[i]);
    if (s) fl_free(s->cond);
    fl_free(s);
}

static fl_status rep_init(fl_model *m, fl_node *n, int n_in, fl_err *e) {
    static const char *const known[] = {NULL};
    fl_status st = fl_node_check_arity(n, n_in, n_in, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    if ((st = fl_node_check_present(n, n_in, e)) != FL_OK) return st;
    if (!(n->state = fl_alloc(sizeof(rep_state)))) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    /* the data keeps its element type (Where: X's) */
    m->values[n->out[0]].onnx_dtype = m->values[n->in[n_in == 3 ? 1 : 0]].onnx_dtype;
    return FL_OK;
}

/* y = x through the map; dx += dy scattered back. */
static void map_forward(fl_model *m, fl_node *n) {
    rep_state *s = n->state;
    fl_imap_forward(&s->im[0], fl_in(m, n, 0)->data, fl_out(m, n, 0)->data, 0);
}
static void map_backward(fl_model *m, fl_node *n) {
    fl_tensor *dx = fl_gin(m, n, 0);
    if (dx) fl_imap_backward(&((rep_state *)n->state)->im[0], fl_gout(m, n, 0)->data, dx->data);
}

/* ---- Expand(input, shape) ------------------------------------------------------------------- */
static fl_status expand_init(fl_model *m, fl_node *n, fl_err *e) { return rep_init(m, n, 2, e); }

static fl_status expand_shape(fl_model *m, fl_node *n, fl_err *e) {
    const fl_tensor *x = fl_in(m, n, 0);
    int64_t req[FL_MAX_DIMS], ys[FL_MAX_DIMS];
    int nd, r = 0;
    fl_status st = fl_node_read_ints(n, fl_in(m, n, 1), "shape", FL_MAX_DIMS, req, &nd, e);
    if (st != FL_OK) return st;
    for (int d = 0; d < nd; d++)
        if (req[d] < 0)
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Expand): shape[%d] = %lld is negative",
                           n->name, d, (long long)req[d]);
    char a[128];
    if (!fl_broadcast_shape(ys, &r, x->ndim, x->shape) || !fl_broadcast_shape(ys, &r, nd, req)) {
        char b[128] = "[";
        for (int d = 0; d < nd; d++)
            snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? "," : "",
                     (long long)req[d]);
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Expand): input %s does not broadcast to %s]",
                       n->name, fl_shape_str(x, a, sizeof a), b);
    }
    if ((st = fl_node_check_size(n, r, ys, e)) != FL_OK) return st;
    fl_node_set_out_shape(m, n, 0, r, ys);
    return fl_imap_broadcast(&((rep_state *)n->state)->im[0], r, ys, x->ndim, x->shape, e);
}

/* ---- Tile(input, repeats) ------------------------------------------------------------------- */
static fl_status tile_init(fl_model *m, fl_node *n, fl_err *e) { return rep_init(m, n, 2, e); }

static fl_status tile_shape(fl_model *m, fl_node *n, fl_err *e) {
    const fl_tensor *x = fl_in(m, n, 0);
    int64_t rep[FL_MAX_DIMS], ys[FL_MAX_DIMS];
    int nd;
    fl_status st = fl_node_read_ints(n, fl_in(m, n, 1), "repeats", FL_MAX_DIMS, rep, &nd, e);
    if (st != FL_OK) return st;
    if (nd != x->ndim)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Tile): %d repeats for an input of rank %d",
                       n->name, nd, x->ndim);
    for (int d = 0; d < nd; d++) {
        if (rep[d] < 0)
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Tile): repeats[%d] = %lld is negative",
                           n->name, d, (long long)rep[d]);
        if (__builtin_mul_overflow(x->shape[d], rep[d], &ys[d]))
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Tile): the output is too large", n->name);
    }
    if ((st = fl_node_check_size(n, nd, ys, e)) != FL_OK) return st;
    fl_node_set_out_shape(m, n, 0, nd, ys);
    fl_imap *im = &((rep_state *)n->state)->im[0];
    if ((st = fl_imap_plan(im, nd, ys, e)) != FL_OK) return st;
    for (int d = 0; d < nd; d++)
        for (int64_t o = 0; o < ys[d]; o++) im->map[d][o] = o % x->shape[d];
    fl_imap_finish(im, x->shape);
    return FL_OK;
}

/* ---- Where(condition, X, Y) ------------------------------------------------------------------ */
static fl_status where_init(fl_model *m, fl_node *n, fl_err *e) { return rep_init(m, n, 3, e); }

static fl_status where_shape(fl_model *m, fl_node *n, fl_err *e) {
    rep_state *s = n->state;
    int64_t ys[FL_MAX_DIMS];
    int r = 0;
    for (int i = 0; i < 3; i++) {
        const fl_tensor *x = fl_in(m, n, i);
        if (!fl_broadcast_shape(ys, &r, x->ndim, x->shape)) {
            char a[128];
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Where): input %d of shape %s does not "
                           "broadcast with the others", n->name, i, fl_shape_str(x, a, sizeof a));
        }
    }
    fl_node_set_out_shape(m, n, 0, r, ys);
    for (int i = 0; i < 3; i++) {
        const fl_tensor *x = fl_in(m, n, i);
        fl_status st = fl_imap_broadcast(&s->im[i], r, ys, x->ndim, x->shape, e);
        if (st != FL_OK) return st;
    }
    int64_t size = fl_shape_size(r, ys);
    if (s->cap < size || !s->cond) {
        fl_free(s->cond);
        s->cap = 0;
        if (!(s->cond = fl_alloc(sizeof(float) * 2 * (size_t)(size ? size : 1))))
            return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        s->cap = size;
    }
    s->tmp = s->cond + s->cap;
    return FL_OK;
}

static void where_forward(fl_model *m, fl_node *n) {
    rep_state *s = n->state;
    fl_tensor *yt = fl_out(m, n, 0);
    float *y = yt->data;
    fl_imap_forward(&s->im[0], fl_in(m, n, 0)->data, s->cond, 0);
    fl_imap_forward(&s->im[1], fl_in(m, n, 1)->data, y, 0);
    fl_imap_forward(&s->im[2], fl_in(m, n, 2)->data, s->tmp, 0);
    for (int64_t j = 0; j < yt->size; j++)
        if (s->cond[j] == 0) y[j] = s->tmp[j];
}

/* uses the condition gathered by the forward pass */
static void where_backward(fl_model *m, fl_node *n) {
    rep_state *s = n->state;
    const float *dy = fl_gout(m, n, 0)->data;
    int64_t size = fl_out(m, n, 0)->size;
    for (int i = 1; i < 3; i++) {
        fl_tensor *dx = fl_gin(m, n, i);
        if (!dx) continue;
        for (int64_t j = 0; j < size; j++) s->tmp[j] = (s->cond[j] != 0) == (i == 1) ? dy[j] : 0;
        fl_imap_backward(&s->im[i], s->tmp, dx->data);
    }
}

static const fl_op op_expand = {"Expand", expand_init, expand_shape, map_forward, map_backward,
                                rep_free};
static const fl_op op_tile = {"Tile", tile_init, tile_shape, map_forward, map_backward, rep_free};
static const fl_op op_where = {"Where", where_init, where_shape, where_forward, where_backward,
                               rep_free};

const fl_op *const fl_ops_broadcast[] = {&op_expand, &op_tile, &op_where, NULL};
