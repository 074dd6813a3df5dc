/* Ops that make a tensor from a few numbers: ConstantOfShape and Range.
 *
 * Their output's shape depends on input *values* (ConstantOfShape's shape, Range's start,
 * limit and delta), which are read when the node is planned, like Reshape's shape
 * (op_shape.c): in the graphs torch exports they come from constants or a Shape chain, which
 * only change when the input shapes do, and then the model is re-planned. Neither op has a
 * gradient: backward stops at them. */
#include <math.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

typedef struct gen_state {
    float value; /* ConstantOfShape: the fill value */
} gen_state;

static fl_status gen_init(fl_node *n, const char *const *known, int n_in, fl_err *e) {
    fl_status st = fl_node_check_arity(n, n_in, n_in, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    if ((st = fl_node_check_present(n, n_in, e)) != FL_OK) return st;
    if (!(n->state = fl_alloc(sizeof(gen_state)))) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    return FL_OK;
}

/* ---- ConstantOfShape(shape) with attribute value: a one-element tensor, float 0 if absent -- */
static fl_status cos_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"value", NULL};
    fl_status st = gen_init(n, known, 1, e);
    if (st != FL_OK) return st;
    gen_state *s = n->state;
    const fl_attr *a = fl_node_attr(n, "value");
    m->values[n->out[0]].onnx_dtype = 1;
    if (!a) return FL_OK;
    if (a->type != FL_ATTR_TENSOR || a->t.size != 1 || !a->t.data)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (ConstantOfShape): value must be a tensor of "
                       "one element", n->name);
    s->value = a->t.data[0];
    m->values[n->out[0]].onnx_dtype = a->t_dtype;
    return FL_OK;
}

static fl_status cos_shape(fl_model *m, fl_node *n, fl_err *e) {
    int64_t shp[FL_MAX_DIMS];
    int nd;
    fl_status st = fl_node_read_ints(n, fl_in(m, n, 0), "shape", FL_MAX_DIMS, shp, &nd, e);
    if (st != FL_OK) return st;
    for (int d = 0; d < nd; d++)
        if (shp[d] < 0)
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (ConstantOfShape): shape[%d] = %lld is "
                           "negative", n->name, d, (long long)shp[d]);
    if ((st = fl_node_check_size(n, nd, shp, e)) != FL_OK) return st;
    fl_node_set_out_shape(m, n, 0, nd, shp);
    return FL_OK;
}

static void cos_forward(fl_model *m, fl_node *n) {
    fl_tensor *y = fl_out(m, n, 0);
    float v = ((gen_state *)n->state)->value;
    for (int64_t i = 0; i < y->size; i++) y->data[i] = v;
}

/* ---- Range(start, limit, delta): max(ceil((limit - start) / delta), 0) values ---------------- */
static fl_status range_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {NULL};
    fl_status st = gen_init(n, known, 3, e);
    if (st == FL_OK) m->values[n->out[0]].onnx_dtype = m->values[n->in[0]].onnx_dtype;
    return st;
}

static fl_status range_shape(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const what[] = {"start", "limit", "delta"};
    double v[3];
    for (int i = 0; i < 3; i++) {
        const fl_tensor *t = fl_in(m, n, i);
        if (t->size != 1 || t->ndim > 1)
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Range): %s must be a scalar", n->name,
                           what[i]);
        if (!t->data || !isfinite(t->data[0]))
            return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Range): %s has no finite value at "
                           "planning time", n->name, what[i]);
        v[i] = t->data[0];
    }
    if (v[2] == 0)
        return fl_fail(e, FL_ERR_ARG, "node '%s' (Range): delta is 0", n->name);
    double count = ceil((v[1] - v[0]) / v[2]);
    if (count > (double)((int64_t)1 << 31))
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Range): %.0f elements is too many", n->name,
                       count);
    int64_t len = count > 0 ? (int64_t)count : 0;
    fl_node_set_out_shape(m, n, 0, 1, &len);
    return FL_OK;
}

static void range_forward(fl_model *m, fl_node *n) {
    fl_tensor *y = fl_out(m, n, 0);
    double start = fl_in(m, n, 0)->data[0], delta = fl_in(m, n, 2)->data[0];
    for (int64_t i = 0; i < y->size; i++) y->data[i] = (float)(start + (double)i * delta);
}

static const fl_op op_constant_of_shape = {"ConstantOfShape", cos_init, cos_shape, cos_forward,
                                           NULL, NULL};
static const fl_op op_range = {"Range", range_init, range_shape, range_forward, NULL, NULL};

const fl_op *const fl_ops_generate[] = {&op_constant_of_shape, &op_range, NULL};
