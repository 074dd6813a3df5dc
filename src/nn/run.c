/* Running a model: planning, forward, backward, and the layer table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/model.h"

/* Give t a buffer for its (just set) shape: the one run.c allocated for it before (*buf,
 * *cap values) while it is large enough, so that the batch sizes of a fuzzing campaign (a
 * new one nearly every round) do not free and allocate every activation; a buffer that is
 * not the one recorded (set or freed elsewhere) is replaced. A reused buffer is not zeroed:
 * every op writes all of its output (a same-shape forward has always reused buffers). */
static fl_status ensure_buffer(fl_tensor *t, int64_t *cap, const float **buf) {
    if (t->data && t->data == *buf && t->size <= *cap) return FL_OK;
    fl_free(t->data);
    const int64_t n = t->size ? t->size : 1;
    t->data = fl_alloc((size_t)n * sizeof(float));
    *cap = t->data ? n : 0;
    *buf = t->data;
    return t->data ? FL_OK : FL_ERR_NOMEM;
}

static fl_status check_input(const fl_value *v, const fl_tensor *x, fl_err *e) {
    char want[128], got[128];
    int ok = v->decl_ndim == 0 || v->decl_ndim == x->ndim;
    for (int i = 0; ok && v->decl_ndim && i < x->ndim; i++)
        ok = v->decl_shape[i] <= 0 || v->decl_shape[i] == x->shape[i];
    if (!ok) {
        fl_tensor d = {0};
        fl_tensor_set_shape(&d, v->decl_ndim, v->decl_shape);
        return fl_fail(e, FL_ERR_SHAPE, "input '%s' expects shape %s (0 = any), got %s", v->name,
                       fl_shape_str(&d, want, sizeof want), fl_shape_str(x, got, sizeof got));
    }
    int64_t bad = fl_tensor_find_nonfinite(x);
    if (bad >= 0)
        return fl_fail(e, FL_ERR_NAN, "input '%s' has a non-finite value (%g) at flat index %lld",
                       v->name, (double)x->data[bad], (long long)bad);
    return FL_OK;
}

static fl_status run_nodes(fl_model *m, int plan, fl_err *e) {
    for (int i = 0; i < m->n_nodes; i++) {
        fl_node *n = &m->nodes[i];
        if (plan) {
            fl_status st = n->op->shape ? n->op->shape(m, n, e) : FL_OK;
            if (st != FL_OK) return st;
            for (int k = 0; k < n->n_out; k++) {
                fl_value *v = &m->values[n->out[k]];
                if (ensure_buffer(&v->t, &v->t_cap, &v->t_buf) != FL_OK)
                    return fl_fail(e, FL_ERR_NOMEM, "out of memory for '%s'", v->name);
            }
        }
        n->op->forward(m, n);
    }
    return FL_OK;
}

static fl_status forward(fl_model *m, int n, const fl_tensor *xs, fl_err *e);

/* An input or shape that does not fit the model is told with the model's file, when known:
 * the message is read by someone who may have several models at hand. */
fl_status fl_model_forward_multi(fl_model *m, int n, const fl_tensor *xs, fl_err *e) {
    fl_status st = forward(m, n, xs, e);
    if (st != FL_OK && m->path && e && st != FL_ERR_NOMEM) {
        char msg[sizeof e->msg];
        memcpy(msg, e->msg, sizeof msg);
        fl_fail(e, st, "%s: %s", m->path, msg);
    }
    return st;
}

static fl_status forward(fl_model *m, int n, const fl_tensor *xs, fl_err *e) {
    if (n != m->n_inputs)
        return fl_fail(e, FL_ERR_ARG, "model has %d inputs, %d given", m->n_inputs, n);
    int plan = !m->planned || m->planned_threads != fl_threads_get();
    for (int i = 0; i < n; i++) {
        fl_value *v = &m->values[m->inputs[i]];
        fl_status st = check_input(v, &xs[i], e);
        if (st != FL_OK) return st;
        if (!v->t.data || !fl_tensor_same_shape(&v->t, &xs[i])) plan = 1;
    }
    if (plan) {
        uint8_t *t = realloc(m->touched, (size_t)m->n_values + 1);
        if (!t) return fl_fail(e, FL_ERR_NOMEM, "out of memory planning the model");
        m->touched = t;
        for (int i = 0; i < n; i++) {
            fl_value *v = &m->values[m->inputs[i]];
            fl_tensor_set_shape(&v->t, xs[i].ndim, xs[i].shape);
            if (ensure_buffer(&v->t, &v->t_cap, &v->t_buf) != FL_OK)
                return fl_fail(e, FL_ERR_NOMEM, "out of memory for input '%s'", v->name);
        }
    }
    for (int i = 0; i < n; i++) {
        fl_value *v = &m->values[m->inputs[i]];
        memcpy(v->t.data, xs[i].data, (size_t)xs[i].size * sizeof(float));
    }
    m->planned = 0;
    m->planned_threads = fl_threads_get();
    fl_status st = run_nodes(m, plan, e);
    if (st == FL_OK) m->planned = 1;
    return st;
}

fl_status fl_model_forward(fl_model *m, const fl_tensor *x, fl_err *e) {
    return fl_model_forward_multi(m, 1, x, e);
}

fl_status fl_model_plan(fl_model *m, int n_inputs, const fl_tensor *inputs, fl_err *e) {
    m->planned = 0;
    return fl_model_forward_multi(m, n_inputs, inputs, e);
}

const fl_tensor *fl_model_output(const fl_model *m, int i) {
    return i >= 0 && i < m->n_outputs ? &m->values[m->outputs[i]].t : NULL;
}
const char *fl_model_input_name(const fl_model *m, int i) {
    return i >= 0 && i < m->n_inputs ? m->values[m->inputs[i]].name : NULL;
}
const char *fl_model_output_name(const fl_model *m, int i) {
    return i >= 0 && i < m->n_outputs ? m->values[m->outputs[i]].name : NULL;
}
const fl_tensor *fl_model_tensor(const fl_model *m, const char *name) {
    int v = fl_model_find(m, name);
    return v < 0 ? NULL : &m->values[v].t;
}
static void clear_if_untouched(fl_model *m, int v);

const fl_tensor *fl_model_grad(fl_model *m, const char *name) {
    int v = fl_model_find(m, name);
    if (v < 0 || !m->values[v].g.data) return NULL;
    if (m->values[v].kind != FL_VAL_PARAM && m->touched) clear_if_untouched(m, v);
    return &m->values[v].g;
}

/* ---- backward ------------------------------------------------------------------------------- */
static fl_status ensure_grad(fl_value *v) {
    fl_tensor_set_shape(&v->g, v->t.ndim, v->t.shape);
    return ensure_buffer(&v->g, &v->g_cap, &v->g_buf);
}

fl_status fl_model_want_param_grads(fl_model *m, int yes, fl_err *e) {
    m->param_grads = yes;
    for (int i = 0; i < m->n_values; i++) {
        fl_value *v = &m->values[i];
        if (v->kind != FL_VAL_PARAM) continue;
        if (!yes) {
            fl_tensor_free(&v->g);
        } else if (ensure_grad(v) != FL_OK) {
            return fl_fail(e, FL_ERR_NOMEM, "out of memory for the gradient of '%s'", v->name);
        } else {
            memset(v->g.data, 0, (size_t)v->g.size * sizeof(float));
        }
    }
    return FL_OK;
}

void fl_model_zero_param_grads(fl_model *m) {
    for (int i = 0; i < m->n_values; i++) {
        fl_value *v = &m->values[i];
        if (v->kind == FL_VAL_PARAM && v->g.data)
            memset(v->g.data, 0, (size_t)v->g.size * sizeof(float));
    }
}

/* Gradients are zeroed lazily: a value's gradient buffer is cleared the first time a backward
 * kernel asks for it (fl_gin) in this pass, so a backward pass touches only the part of the
 * graph between the inputs and the seeds instead of clearing every activation gradient. */
static void clear_if_untouched(fl_model *m, int v) {
    if (m->touched[v]) return;
    fl_tensor *g = &m->values[v].g;
    memset(g->data, 0, (size_t)g->size * sizeof(float));
    m->touched[v] = 1;
}

fl_status fl_model_backward_idx(fl_model *m, int n_seeds, const int *idx, const fl_tensor *seeds,
                                fl_err *e) {
    if (!m->planned) return fl_fail(e, FL_ERR_ARG, "backward called before forward");
    memset(m->touched, 0, (size_t)m->n_values);
    for (int i = 0; i < m->n_values; i++) {
        fl_value *v = &m->values[i];
        if (v->kind == FL_VAL_PARAM) {
            m->touched[i] = 1; /* accumulated across passes; cleared by zero_param_grads */
            continue;
        }
        int want = v->kind == FL_VAL_ACT || (v->kind == FL_VAL_INPUT && !m->skip_input_grad);
        if (want && ensure_grad(v) != FL_OK)
            return fl_fail(e, FL_ERR_NOMEM, "out of memory for the gradient of '%s'", v->name);
    }
    if (m->skip_input_grad)
        for (int i = 0; i < m->n_inputs; i++) fl_tensor_free(&m->values[m->inputs[i]].g);
    int last = -1;
    for (int s = 0; s < n_seeds; s++) {
        if (idx[s] < 0 || idx[s] >= m->n_values)
            return fl_fail(e, FL_ERR_NOTFOUND, "backward: no tensor with index %d", idx[s]);
        fl_value *v = &m->values[idx[s]];
        char a[128], b[128];
        if (!v->g.data || v->kind == FL_VAL_PARAM)
            return fl_fail(e, FL_ERR_ARG, "backward: '%s' is not an activation or input", v->name);
        if (!fl_tensor_same_shape(&v->g, &seeds[s]))
            return fl_fail(e, FL_ERR_SHAPE, "backward: seed for '%s' has shape %s, tensor has %s",
                           v->name, fl_shape_str(&seeds[s], a, sizeof a),
                           fl_shape_str(&v->t, b, sizeof b));
        clear_if_untouched(m, idx[s]);
        for (int64_t k = 0; k < v->g.size; k++) v->g.data[k] += seeds[s].data[k];
        if (v->producer > last) last = v->producer;
    }
    for (int i = last; i >= 0; i--) {
        fl_node *n = &m->nodes[i];
        int any = 0;
        for (int k = 0; k < n->n_out && !any; k++) any = m->touched[n->out[k]];
        if (!any || !n->op->backward) continue;
        for (int k = 0; k < n->n_out; k++) clear_if_untouched(m, n->out[k]);
        n->op->backward(m, n);
    }
    /* the input gradient is the result callers read: make it zero when nothing reached it */
    for (int i = 0; i < m->n_inputs; i++)
        if (m->values[m->inputs[i]].g.data) clear_if_untouched(m, m->inputs[i]);
    return FL_OK;
}

fl_status fl_model_backward(fl_model *m, int n_seeds, const char *const *names,
                            const fl_tensor *seeds, fl_err *e) {
    int idx[64];
    if (n_seeds > 64) return fl_fail(e, FL_ERR_ARG, "backward: at most 64 seeds");
    for (int s = 0; s < n_seeds; s++) {
        idx[s] = fl_model_find(m, names[s]);
        if (idx[s] < 0) return fl_fail(e, FL_ERR_NOTFOUND, "backward: no tensor named '%s'", names[s]);
    }
    return fl_model_backward_idx(m, n_seeds, idx, seeds, e);
}

/* ---- introspection ---------------------------------------------------------------------------- */
int64_t fl_model_param_count(const fl_model *m) {
    int64_t n = 0;
    for (int i = 0; i < m->n_values; i++)
        if (m->values[i].kind == FL_VAL_PARAM) n += m->values[i].t.size;
    return n;
}

int fl_model_layers(fl_model *m, fl_layer_info **out, fl_err *e) {
    *out = NULL;
    if (!m->planned) {
        /* plan for one example of the declared input shapes (free dims become 1) */
        fl_tensor xs[8] = {{0}};
        fl_status st = FL_OK;
        for (int i = 0; i < m->n_inputs && st == FL_OK; i++) {
            const fl_value *v = &m->values[m->inputs[i]];
            int64_t shp[FL_MAX_DIMS];
            for (int d = 0; d < v->decl_ndim; d++) shp[d] = v->decl_shape[d] > 0 ? v->decl_shape[d] : 1;
            st = fl_tensor_alloc(&xs[i], v->decl_ndim, shp);
        }
        if (st == FL_OK) st = fl_model_forward_multi(m, m->n_inputs, xs, e);
        else fl_fail(e, st, "out of memory planning the model");
        for (int i = 0; i < m->n_inputs; i++) fl_tensor_free(&xs[i]);
        if (st != FL_OK) return -1;
    }
    int count = 0;
    for (int i = 0; i < m->n_nodes; i++) count += m->nodes[i].n_out;
    fl_layer_info *L = calloc((size_t)count + 1, sizeof *L);
    if (!L) {
        fl_fail(e, FL_ERR_NOMEM, "out of memory");
        return -1;
    }
    int k = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const fl_node *n = &m->nodes[i];
        int64_t np = 0;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0 && m->values[n->in[j]].kind == FL_VAL_PARAM) np += m->values[n->in[j]].t.size;
        for (int j = 0; j < n->n_out; j++, k++) {
            const fl_value *v = &m->values[n->out[j]];
            L[k].name = v->name;
            L[k].node = n->name;
            L[k].op = n->op->name;
            L[k].ndim = v->t.ndim;
            memcpy(L[k].shape, v->t.shape, sizeof L[k].shape);
            L[k].n_params = j == 0 ? np : 0;
        }
    }
    *out = L;
    return count;
}
