/* ONNX export: fl_model -> ModelProto (IR version 8, the model's default-domain opset).
 *
 * What import read comes back out: node names, op types, attributes as stored, initializers
 * in their original element types (int64 shapes as int64), value names. Floats travel as
 * raw little-endian bytes, so a saved model reloads with bit-identical parameters and hence
 * bit-identical outputs.
 *
 * Graph inputs are written with their declared shapes, free dim 0 as the symbolic "N" (other
 * free dims "d<k>"). Outputs need shapes too: they are taken from the last plan, and a model
 * that was never run is planned for one example first (in inference mode, so no Dropout mask
 * or BatchNormalization statistic changes) — the only way save touches the model.
 *
 * All message memory comes from an arena released in one call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_int.h"

typedef struct saver {
    fl_arena a;
    const fl_model *m;
    int plan_batch; /* dim 0 of input 0 in the plan; -1 when unknown */
} saver;

static Onnx__ValueInfoProto *value_info(saver *S, int v, int ndim, const int64_t *shape,
                                        const uint8_t *free_dim) {
    fl_arena *a = &S->a;
    Onnx__ValueInfoProto *vi = fl_arena_alloc(a, sizeof *vi);
    Onnx__TypeProto *tp = fl_arena_alloc(a, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = fl_arena_alloc(a, sizeof *tt);
    if (!vi || !tp || !tt) return NULL;
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    vi->name = fl_arena_strdup(a, S->m->values[v].name);
    vi->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = S->m->values[v].onnx_dtype;
    if (ndim < 0) return vi; /* shape unknown */
    Onnx__TensorShapeProto *sp = fl_arena_alloc(a, sizeof *sp);
    Onnx__TensorShapeProto__Dimension **dims = fl_arena_alloc(a, sizeof *dims * (size_t)(ndim + 1));
    if (!sp || !dims) return vi;
    onnx__tensor_shape_proto__init(sp);
    sp->n_dim = (size_t)ndim;
    sp->dim = dims;
    tt->shape = sp;
    for (int d = 0; d < ndim; d++) {
        Onnx__TensorShapeProto__Dimension *dp = fl_arena_alloc(a, sizeof *dp);
        if (!dp) return vi;
        onnx__tensor_shape_proto__dimension__init(dp);
        dims[d] = dp;
        if (free_dim[d]) {
            char buf[16];
            snprintf(buf, sizeof buf, d == 0 ? "N" : "d%d", d);
            dp->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dp->dim_param = fl_arena_strdup(a, buf);
        } else {
            dp->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dp->dim_value = shape[d];
        }
    }
    return vi;
}

static Onnx__AttributeProto *attribute(saver *S, const fl_attr *at) {
    fl_arena *a = &S->a;
    Onnx__AttributeProto *ap = fl_arena_alloc(a, sizeof *ap);
    if (!ap) return NULL;
    onnx__attribute_proto__init(ap);
    ap->name = fl_arena_strdup(a, at->name);
    ap->has_type = 1;
    switch (at->type) {
    case FL_ATTR_INT:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        ap->has_i = 1;
        ap->i = at->i;
        break;
    case FL_ATTR_FLOAT:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        ap->has_f = 1;
        ap->f = at->f;
        break;
    case FL_ATTR_INTS:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        ap->n_ints = (size_t)at->n;
        ap->ints = fl_arena_alloc(a, sizeof(int64_t) * (size_t)(at->n + 1));
        if (ap->ints && at->n) memcpy(ap->ints, at->ints, sizeof(int64_t) * (size_t)at->n);
        break;
    case FL_ATTR_FLOATS:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
        ap->n_floats = (size_t)at->n;
        ap->floats = fl_arena_alloc(a, sizeof(float) * (size_t)(at->n + 1));
        if (ap->floats && at->n) memcpy(ap->floats, at->floats, sizeof(float) * (size_t)at->n);
        break;
    case FL_ATTR_STRING:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
        ap->has_s = 1;
        ap->s.data = (uint8_t *)fl_arena_strdup(a, at->s ? at->s : "");
        ap->s.len = at->s ? strlen(at->s) : 0;
        break;
    case FL_ATTR_TENSOR:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
        ap->t = fl_arena_alloc(a, sizeof *ap->t);
        if (ap->t) {
            onnx__tensor_proto__init(ap->t);
            fl_onnx_tensor_encode(a, ap->t, &at->t, at->t_dtype, NULL);
        }
        break;
    }
    return ap;
}

static Onnx__NodeProto *node(saver *S, const fl_node *n) {
    fl_arena *a = &S->a;
    const fl_model *m = S->m;
    Onnx__NodeProto *np = fl_arena_alloc(a, sizeof *np);
    if (!np) return NULL;
    onnx__node_proto__init(np);
    np->name = fl_arena_strdup(a, n->name);
    np->op_type = fl_arena_strdup(a, n->op->name);
    np->n_input = (size_t)n->n_in;
    np->input = fl_arena_alloc(a, sizeof(char *) * (size_t)(n->n_in + 1));
    for (int i = 0; np->input && i < n->n_in; i++)
        np->input[i] = fl_arena_strdup(a, n->in[i] >= 0 ? m->values[n->in[i]].name : "");
    np->n_output = (size_t)n->n_out;
    np->output = fl_arena_alloc(a, sizeof(char *) * (size_t)(n->n_out + 1));
    for (int i = 0; np->output && i < n->n_out; i++)
        np->output[i] = fl_arena_strdup(a, m->values[n->out[i]].name);
    np->n_attribute = (size_t)n->n_attr;
    np->attribute = fl_arena_alloc(a, sizeof(void *) * (size_t)(n->n_attr + 1));
    for (int i = 0; np->attribute && i < n->n_attr; i++) np->attribute[i] = attribute(S, &n->attr[i]);
    return np;
}

/* A model never run has no output shapes: plan it for one example of its declared inputs.
 * Returns the batch it is planned for, or -1 when it cannot be planned. */
static int ensure_planned(fl_model *m) {
    if (m->n_inputs == 0) return m->planned ? 1 : -1;
    if (!m->planned) {
        fl_tensor xs[8];
        memset(xs, 0, sizeof xs);
        int ok = 1;
        for (int i = 0; i < m->n_inputs && ok; i++) {
            const fl_value *v = &m->values[m->inputs[i]];
            int64_t shape[FL_MAX_DIMS];
            for (int d = 0; d < v->decl_ndim; d++) {
                shape[d] = v->decl_shape[d] > 0 ? v->decl_shape[d] : 1;
                ok &= v->decl_shape[d] > 0 || d == 0;
            }
            ok = ok && v->decl_ndim > 0 && fl_tensor_alloc(&xs[i], v->decl_ndim, shape) == FL_OK;
        }
        int training = m->training;
        m->training = 0;
        fl_err e;
        ok = ok && fl_model_forward_multi(m, m->n_inputs, xs, &e) == FL_OK;
        m->training = training;
        for (int i = 0; i < m->n_inputs; i++) fl_tensor_free(&xs[i]);
        if (!ok) return -1;
    }
    const fl_tensor *x = &m->values[m->inputs[0]].t;
    return x->ndim > 0 ? (int)x->shape[0] : -1;
}

fl_status fl_onnx_save_buffer(const fl_model *m, uint8_t **buf, size_t *len, fl_err *e) {
    *buf = NULL;
    *len = 0;
    saver S = {.m = m};
    fl_arena *a = &S.a;
    /* planning fills caches (activation buffers) only; the model's meaning is unchanged */
    S.plan_batch = ensure_planned((fl_model *)m);

    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    Onnx__OperatorSetIdProto *opsets[1] = {&opset};
    mp.has_ir_version = 1;
    mp.ir_version = 8;
    mp.producer_name = "flare";
    mp.producer_version = FLARE_VERSION;
    opset.domain = "";
    opset.has_version = 1;
    opset.version = m->opset;
    mp.n_opset_import = 1;
    mp.opset_import = opsets;
    mp.graph = &g;
    g.name = "flare";
    Onnx__StringStringEntryProto *props = fl_arena_alloc(a, sizeof *props * ((size_t)m->n_meta + 1));
    mp.metadata_props = fl_arena_alloc(a, sizeof(void *) * ((size_t)m->n_meta + 1));
    for (int i = 0; props && mp.metadata_props && i < m->n_meta; i++) {
        onnx__string_string_entry_proto__init(&props[i]);
        props[i].key = m->meta_key[i];
        props[i].value = m->meta_val[i];
        mp.metadata_props[mp.n_metadata_props++] = &props[i];
    }

    /* initializers: every parameter / constant that a node or the graph output reads */
    uint8_t *read = calloc((size_t)m->n_values + 1, 1);
    if (!read) return fl_fail(e, FL_ERR_NOMEM, "out of memory saving the model");
    for (int i = 0; i < m->n_nodes; i++)
        for (int k = 0; k < m->nodes[i].n_in; k++)
            if (m->nodes[i].in[k] >= 0) read[m->nodes[i].in[k]] = 1;
    for (int i = 0; i < m->n_outputs; i++) read[m->outputs[i]] = 1;
    g.initializer = fl_arena_alloc(a, sizeof(void *) * ((size_t)m->n_values + 1));
    for (int v = 0; g.initializer && v < m->n_values; v++) {
        const fl_value *x = &m->values[v];
        if (!read[v] || (x->kind != FL_VAL_PARAM && x->kind != FL_VAL_CONST)) continue;
        Onnx__TensorProto *tp = fl_arena_alloc(a, sizeof *tp);
        if (!tp) break;
        onnx__tensor_proto__init(tp);
        fl_onnx_tensor_encode(a, tp, &x->t, x->onnx_dtype, x->name);
        g.initializer[g.n_initializer++] = tp;
    }
    free(read);

    g.input = fl_arena_alloc(a, sizeof(void *) * 9);
    for (int i = 0; g.input && i < m->n_inputs; i++) {
        const fl_value *x = &m->values[m->inputs[i]];
        uint8_t free_dim[FL_MAX_DIMS];
        for (int d = 0; d < x->decl_ndim; d++) free_dim[d] = x->decl_shape[d] <= 0;
        g.input[g.n_input++] = value_info(&S, m->inputs[i], x->decl_ndim ? x->decl_ndim : -1,
                                          x->decl_shape, free_dim);
    }
    /* outputs: planned shapes; dim 0 follows the batch when input 0's batch is free */
    int batch_free = m->n_inputs > 0 && m->values[m->inputs[0]].decl_ndim > 0 &&
                     m->values[m->inputs[0]].decl_shape[0] <= 0;
    g.output = fl_arena_alloc(a, sizeof(void *) * 9);
    for (int i = 0; g.output && i < m->n_outputs; i++) {
        const fl_tensor *t = &m->values[m->outputs[i]].t;
        uint8_t free_dim[FL_MAX_DIMS] = {0};
        int known = S.plan_batch >= 0 && t->data;
        free_dim[0] = batch_free && t->ndim > 0 && t->shape[0] == S.plan_batch;
        g.output[g.n_output++] = value_info(&S, m->outputs[i], known ? t->ndim : -1, t->shape, free_dim);
    }

    g.node = fl_arena_alloc(a, sizeof(void *) * ((size_t)m->n_nodes + 1));
    for (int i = 0; g.node && i < m->n_nodes; i++) g.node[g.n_node++] = node(&S, &m->nodes[i]);

    fl_status st = FL_OK;
    if (a->failed || !g.initializer || !g.input || !g.output || !g.node) {
        st = fl_fail(e, FL_ERR_NOMEM, "out of memory saving the model");
    } else {
        *len = onnx__model_proto__get_packed_size(&mp);
        *buf = malloc(*len ? *len : 1);
        if (!*buf) st = fl_fail(e, FL_ERR_NOMEM, "out of memory saving the model (%zu bytes)", *len);
        else onnx__model_proto__pack(&mp, *buf);
    }
    fl_arena_free(a);
    return st;
}

fl_status fl_onnx_save(const fl_model *m, const char *path, fl_err *e) {
    uint8_t *buf;
    size_t len;
    fl_status st = fl_onnx_save_buffer(m, &buf, &len, e);
    if (st != FL_OK) {
        if (e) {
            char msg[sizeof e->msg];
            memcpy(msg, e->msg, sizeof msg);
            fl_fail(e, st, "%s: %s", path, msg);
        }
        return st;
    }
    st = fl_file_write_atomic(path, buf, len, e);
    free(buf);
    return st;
}
