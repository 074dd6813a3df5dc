/* fl_model: building the graph, planning buffers, forward and backward passes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

fl_model *fl_model_new(void) {
    fl_model *m = calloc(1, sizeof *m);
    if (m) {
        m->opset = 13;
        fl_rng_seed(&m->rng, 1);
    }
    return m;
}

static void attr_release(fl_attr *a) {
    free(a->name);
    free(a->ints);
    free(a->floats);
    free(a->s);
    fl_tensor_free(&a->t);
}

void fl_model_free(fl_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_nodes; i++) {
        fl_node *n = &m->nodes[i];
        if (n->op && n->op->free_state)
            n->op->free_state(n);
        else
            fl_free(n->state);
        for (int a = 0; a < n->n_attr; a++) attr_release(&n->attr[a]);
        free(n->attr);
        free(n->in);
        free(n->out);
        free(n->name);
    }
    for (int i = 0; i < m->n_values; i++) {
        free(m->values[i].name);
        fl_tensor_free(&m->values[i].t);
        fl_tensor_free(&m->values[i].g);
    }
    free(m->values);
    free(m->nodes);
    free(m->touched);
    free(m->producer_name);
    free(m->path);
    for (int i = 0; i < 8; i++)
        for (int d = 0; d < FL_MAX_DIMS; d++) {
            free(m->input_dim_name[i][d]);
            free(m->output_dim_name[i][d]);
        }
    for (int i = 0; i < m->n_meta; i++) free(m->meta_key[i]), free(m->meta_val[i]);
    free(m->meta_key);
    free(m->meta_val);
    free(m);
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

const char *fl_model_meta_get(const fl_model *m, const char *key) {
    for (int i = 0; i < m->n_meta; i++)
        if (!strcmp(m->meta_key[i], key)) return m->meta_val[i];
    return NULL;
}

fl_status fl_model_meta_set(fl_model *m, const char *key, const char *value, fl_err *e) {
    char *v = dup_str(value);
    if (!v) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    for (int i = 0; i < m->n_meta; i++)
        if (!strcmp(m->meta_key[i], key)) {
            free(m->meta_val[i]);
            m->meta_val[i] = v;
            return FL_OK;
        }
    char *k = dup_str(key);
    char **ks = realloc(m->meta_key, sizeof(char *) * (size_t)(m->n_meta + 1));
    if (ks) m->meta_key = ks;
    char **vs = ks ? realloc(m->meta_val, sizeof(char *) * (size_t)(m->n_meta + 1)) : NULL;
    if (vs) m->meta_val = vs;
    if (!k || !vs) {
        free(k);
        free(v);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    m->meta_key[m->n_meta] = k;
    m->meta_val[m->n_meta++] = v;
    return FL_OK;
}

int fl_model_find(const fl_model *m, const char *name) {
    for (int i = 0; i < m->n_values; i++)
        if (strcmp(m->values[i].name, name) == 0) return i;
    return -1;
}

static int add_value(fl_model *m, const char *name, fl_value_kind kind, fl_tensor *t, int take,
                     fl_err *e);

int fl_model_add_value(fl_model *m, const char *name, fl_value_kind kind, const fl_tensor *t,
                       fl_err *e) {
    return add_value(m, name, kind, (fl_tensor *)t, 0, e);
}

int fl_model_add_value_take(fl_model *m, const char *name, fl_value_kind kind, fl_tensor *t,
                            fl_err *e) {
    int v = add_value(m, name, kind, t, 1, e);
    if (v < 0) fl_tensor_free(t);
    return v;
}

/* take: t's buffer becomes the value's (t->data is cleared) instead of being copied */
static int add_value(fl_model *m, const char *name, fl_value_kind kind, fl_tensor *t, int take,
                     fl_err *e) {
    if (fl_model_find(m, name) >= 0) {
        fl_fail(e, FL_ERR_FORMAT, "duplicate tensor name '%s'", name);
        return -1;
    }
    if (m->n_values == m->cap_values) {
        int cap = m->cap_values ? 2 * m->cap_values : 64;
        fl_value *v = realloc(m->values, (size_t)cap * sizeof *v);
        if (!v) goto nomem;
        m->values = v;
        m->cap_values = cap;
    }
    fl_value *v = &m->values[m->n_values];
    memset(v, 0, sizeof *v);
    v->name = dup_str(name);
    if (!v->name) goto nomem;
    v->kind = kind;
    v->onnx_dtype = 1;
    v->producer = -1;
    if (t) {
        if (kind == FL_VAL_INPUT) {
            v->decl_ndim = t->ndim;
            memcpy(v->decl_shape, t->shape, sizeof v->decl_shape);
        } else if (take) {
            v->t = *t;
            t->data = NULL;
        } else if (fl_tensor_copy(&v->t, t) != FL_OK) {
            free(v->name);
            goto nomem;
        }
    }
    m->planned = 0;
    return m->n_values++;
nomem:
    fl_fail(e, FL_ERR_NOMEM, "out of memory adding tensor '%s'", name);
    return -1;
}

static fl_status attr_copy(fl_attr *dst, const fl_attr *src) {
    memset(dst, 0, sizeof *dst);
    dst->name = dup_str(src->name);
    dst->type = src->type;
    dst->i = src->i;
    dst->f = src->f;
    dst->n = src->n;
    dst->t_dtype = src->t_dtype;
    if (!dst->name) return FL_ERR_NOMEM;
    if (src->ints && src->n) {
        if (!(dst->ints = malloc((size_t)src->n * sizeof(int64_t)))) return FL_ERR_NOMEM;
        memcpy(dst->ints, src->ints, (size_t)src->n * sizeof(int64_t));
    }
    if (src->floats && src->n) {
        if (!(dst->floats = malloc((size_t)src->n * sizeof(float)))) return FL_ERR_NOMEM;
        memcpy(dst->floats, src->floats, (size_t)src->n * sizeof(float));
    }
    if (src->s && !(dst->s = dup_str(src->s))) return FL_ERR_NOMEM;
    if (src->type == FL_ATTR_TENSOR && src->t.data) return fl_tensor_copy(&dst->t, &src->t);
    if (src->type == FL_ATTR_TENSOR) fl_tensor_set_shape(&dst->t, src->t.ndim, src->t.shape);
    return FL_OK;
}

fl_status fl_model_add_node(fl_model *m, const char *op_type, const char *name, int n_in,
                            const int *in, int n_out, const int *out, int n_attr,
                            const fl_attr *attr, fl_err *e) {
    const fl_op *op = fl_op_find(op_type);
    if (!op) return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s': unsupported operator %s", name, op_type);
    for (int i = 0; i < n_in; i++)
        if (in[i] < -1 || in[i] >= m->n_values)
            return fl_fail(e, FL_ERR_ARG, "node '%s': bad input index %d", name, in[i]);
    for (int i = 0; i < n_out; i++) {
        if (out[i] < 0 || out[i] >= m->n_values)
            return fl_fail(e, FL_ERR_ARG, "node '%s': bad output index %d", name, out[i]);
        if (m->values[out[i]].producer >= 0 || m->values[out[i]].kind != FL_VAL_ACT)
            return fl_fail(e, FL_ERR_FORMAT, "node '%s': output '%s' is written twice", name,
                           m->values[out[i]].name);
    }
    if (m->n_nodes == m->cap_nodes) {
        int cap = m->cap_nodes ? 2 * m->cap_nodes : 32;
        fl_node *nn = realloc(m->nodes, (size_t)cap * sizeof *nn);
        if (!nn) return fl_fail(e, FL_ERR_NOMEM, "out of memory adding node '%s'", name);
        m->nodes = nn;
        m->cap_nodes = cap;
    }
    fl_node *n = &m->nodes[m->n_nodes];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->name = dup_str(name);
    n->n_in = n_in;
    n->n_out = n_out;
    n->in = malloc(sizeof(int) * (size_t)(n_in ? n_in : 1));
    n->out = malloc(sizeof(int) * (size_t)(n_out ? n_out : 1));
    n->attr = calloc((size_t)(n_attr ? n_attr : 1), sizeof(fl_attr));
    int ok = n->name && n->in && n->out && n->attr;
    if (ok) {
        memcpy(n->in, in, sizeof(int) * (size_t)n_in);
        memcpy(n->out, out, sizeof(int) * (size_t)n_out);
        for (int a = 0; a < n_attr && ok; a++, n->n_attr++)
            ok = attr_copy(&n->attr[a], &attr[a]) == FL_OK;
    }
    m->n_nodes++; /* from here on fl_model_free releases the node */
    if (!ok) {
        n->op = NULL;
        return fl_fail(e, FL_ERR_NOMEM, "out of memory adding node '%s'", name);
    }
    for (int i = 0; i < n_out; i++) m->values[out[i]].producer = m->n_nodes - 1;
    m->planned = 0;
    return op->init ? op->init(m, n, e) : FL_OK;
}

int fl_model_add_op(fl_model *m, const char *op_type, const char *name, int n_in, const int *in,
                    int n_attr, const fl_attr *attr, fl_err *e) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s_output_0", name);
    int out = fl_model_add_value(m, buf, FL_VAL_ACT, NULL, e);
    if (out < 0) return -1;
    if (fl_model_add_node(m, op_type, name, n_in, in, 1, &out, n_attr, attr, e) != FL_OK)
        return -1;
    return out;
}

fl_status fl_model_set_io(fl_model *m, int n_inputs, const int *inputs, int n_outputs,
                          const int *outputs, fl_err *e) {
    if (n_inputs > 8 || n_outputs > 8)
        return fl_fail(e, FL_ERR_UNSUPPORTED, "at most 8 graph inputs and 8 outputs");
    for (int i = 0; i < n_inputs; i++) m->inputs[i] = inputs[i];
    for (int i = 0; i < n_outputs; i++) m->outputs[i] = outputs[i];
    m->n_inputs = n_inputs;
    m->n_outputs = n_outputs;
    return FL_OK;
}

/* Kahn's algorithm over the producer links; fails on cycles and on inputs nobody makes. */
fl_status fl_model_finish(fl_model *m, fl_err *e) {
    int nn = m->n_nodes;
    int *indeg = calloc((size_t)nn + 1, sizeof(int));
    int *order = calloc((size_t)nn + 1, sizeof(int));
    uint8_t *done = calloc((size_t)m->n_values + 1, 1);
    fl_node *sorted = malloc(sizeof(fl_node) * ((size_t)nn + 1));
    fl_status st = FL_OK;
    if (!indeg || !order || !done || !sorted) {
        st = fl_fail(e, FL_ERR_NOMEM, "out of memory sorting the graph");
        goto out;
    }
    for (int v = 0; v < m->n_values; v++)
        done[v] = m->values[v].kind != FL_VAL_ACT;
    for (int i = 0; i < nn; i++) {
        fl_node *n = &m->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v < 0) continue;
            if (m->values[v].kind == FL_VAL_ACT && m->values[v].producer < 0) {
                st = fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): input '%s' is never computed",
                             n->name, n->op->name, m->values[v].name);
                goto out;
            }
        }
    }
    int k = 0;
    uint8_t *emitted = calloc((size_t)nn + 1, 1);
    if (!emitted) {
        st = fl_fail(e, FL_ERR_NOMEM, "out of memory sorting the graph");
        goto out;
    }
    /* nodes are few (hundreds): a quadratic scan keeps this simple and stable (ties keep the
     * file's order, so exported graphs look like the imported ones) */
    for (int progress = 1; progress && k < nn;) {
        progress = 0;
        for (int i = 0; i < nn; i++) {
            if (emitted[i]) continue;
            fl_node *n = &m->nodes[i];
            int ready = 1;
            for (int j = 0; j < n->n_in && ready; j++)
                ready = n->in[j] < 0 || done[n->in[j]];
            if (!ready) continue;
            emitted[i] = 1;
            order[k++] = i;
            for (int j = 0; j < n->n_out; j++) done[n->out[j]] = 1;
            progress = 1;
        }
    }
    free(emitted);
    if (k < nn) {
        st = fl_fail(e, FL_ERR_FORMAT, "the graph has a cycle");
        goto out;
    }
    for (int i = 0; i < nn; i++) sorted[i] = m->nodes[order[i]];
    if (nn) memcpy(m->nodes, sorted, sizeof(fl_node) * (size_t)nn);
    for (int i = 0; i < nn; i++)
        for (int j = 0; j < m->nodes[i].n_out; j++) m->values[m->nodes[i].out[j]].producer = i;
    for (int i = 0; i < m->n_outputs; i++) {
        int v = m->outputs[i];
        if (m->values[v].kind == FL_VAL_ACT && m->values[v].producer < 0) {
            st = fl_fail(e, FL_ERR_FORMAT, "graph output '%s' is never computed",
                         m->values[v].name);
            goto out;
        }
    }
    m->planned = 0;
out:
    free(indeg);
    free(order);
    free(done);
    free(sorted);
    return st;
}

/* ---- attributes ------------------------------------------------------------------------------ */
fl_attr fl_attr_int(const char *name, int64_t v) {
    return (fl_attr){.name = (char *)name, .type = FL_ATTR_INT, .i = v};
}
fl_attr fl_attr_float(const char *name, float v) {
    return (fl_attr){.name = (char *)name, .type = FL_ATTR_FLOAT, .f = v};
}
fl_attr fl_attr_ints(const char *name, int n, int64_t *v) {
    return (fl_attr){.name = (char *)name, .type = FL_ATTR_INTS, .n = n, .ints = v};
}

const fl_attr *fl_node_attr(const fl_node *n, const char *name) {
    for (int i = 0; i < n->n_attr; i++)
        if (strcmp(n->attr[i].name, name) == 0) return &n->attr[i];
    return NULL;
}

int64_t fl_node_attr_int(const fl_node *n, const char *name, int64_t dflt) {
    const fl_attr *a = fl_node_attr(n, name);
    return a && a->type == FL_ATTR_INT ? a->i : dflt;
}

float fl_node_attr_float(const fl_node *n, const char *name, float dflt) {
    const fl_attr *a = fl_node_attr(n, name);
    return a && a->type == FL_ATTR_FLOAT ? a->f : dflt;
}

fl_status fl_node_check_attrs(const fl_node *n, const char *const *known, fl_err *e) {
    for (int i = 0; i < n->n_attr; i++) {
        int ok = 0;
        for (const char *const *k = known; *k && !ok; k++) ok = strcmp(*k, n->attr[i].name) == 0;
        if (!ok)
            return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (%s): unsupported attribute '%s'",
                           n->name, n->op->name, n->attr[i].name);
    }
    return FL_OK;
}

fl_status fl_node_check_arity(const fl_node *n, int min_in, int max_in, int min_out, int max_out,
                              fl_err *e) {
    if (n->n_in < min_in || n->n_in > max_in)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): expects %d..%d inputs, has %d", n->name,
                       n->op->name, min_in, max_in, n->n_in);
    for (int i = 0; i < min_in; i++)
        if (n->in[i] < 0)
            return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): required input %d is missing",
                           n->name, n->op->name, i);
    if (n->n_out < min_out || n->n_out > max_out)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): expects %d..%d outputs, has %d",
                       n->name, n->op->name, min_out, max_out, n->n_out);
    return FL_OK;
}

fl_status fl_node_check_present(const fl_node *n, int count, fl_err *e) {
    for (int i = 0; i < count && i < n->n_in; i++)
        if (n->in[i] < 0)
            return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): input %d is missing", n->name,
                           n->op->name, i);
    return FL_OK;
}

void fl_node_set_out_shape(fl_model *m, fl_node *n, int i, int ndim, const int64_t *shape) {
    fl_tensor_set_shape(&m->values[n->out[i]].t, ndim, shape);
}

fl_tensor *fl_in(fl_model *m, fl_node *n, int i) {
    return i < n->n_in && n->in[i] >= 0 ? &m->values[n->in[i]].t : NULL;
}
fl_tensor *fl_out(fl_model *m, fl_node *n, int i) { return &m->values[n->out[i]].t; }
fl_tensor *fl_gin_fresh(fl_model *m, fl_node *n, int i, int *fresh) {
    *fresh = 0;
    if (i >= n->n_in || n->in[i] < 0) return NULL;
    fl_value *v = &m->values[n->in[i]];
    if (!v->g.data) return NULL;
    *fresh = !m->touched[n->in[i]];
    m->touched[n->in[i]] = 1;
    return &v->g;
}

fl_tensor *fl_gin(fl_model *m, fl_node *n, int i) {
    int fresh;
    fl_tensor *g = fl_gin_fresh(m, n, i, &fresh);
    /* first gradient into this value in this pass: start from zero */
    if (fresh) memset(g->data, 0, (size_t)g->size * sizeof(float));
    return g;
}
fl_tensor *fl_gout(fl_model *m, fl_node *n, int i) { return &m->values[n->out[i]].g; }
