/* Where a forward pass spends its time: each node timed alone over a few passes, with the
 * arithmetic of the ones that do most of it (convolutions, matrix products), so that a slow
 * layer shows as a low GFLOP/s beside a bare sgemm of this machine (fl_sgemm_gflops). What
 * `flare nn run --layer-times` prints. */
#include <stdlib.h>
#include <string.h>

#include "flare/model.h"

/* Multiply-adds x 2 of node n at its planned shapes; 0 for ops that are not products. */
double fl_node_flops(const fl_model *m, const fl_node *n) {
    const char *op = n->op->name;
    const fl_tensor *y = &m->values[n->out[0]].t;
    const fl_tensor *a = n->n_in > 0 && n->in[0] >= 0 ? &m->values[n->in[0]].t : NULL;
    const fl_tensor *w = n->n_in > 1 && n->in[1] >= 0 ? &m->values[n->in[1]].t : NULL;
    if (!a || !w || w->ndim < 2) return 0;
    if (!strcmp(op, "Conv") && w->ndim == 4) /* per output element: (C/g) * kh * kw taps */
        return 2.0 * (double)y->size * (double)(w->shape[1] * w->shape[2] * w->shape[3]);
    if (!strcmp(op, "ConvTranspose") && w->ndim == 4) /* per input element: (M/g) * kh * kw */
        return 2.0 * (double)a->size * (double)(w->shape[1] * w->shape[2] * w->shape[3]);
    if (!strcmp(op, "Gemm") || !strcmp(op, "MatMul")) { /* y [.., M, N], K = w's rows */
        int64_t k = w->shape[w->ndim - 2];
        if (!strcmp(op, "Gemm") && fl_node_attr_int(n, "transB", 0)) k = w->shape[1];
        return 2.0 * (double)y->size * (double)k;
    }
    return 0;
}

static int cmp_double(const void *p, const void *q) {
    double x = *(const double *)p, y = *(const double *)q;
    return (x > y) - (x < y);
}

fl_status fl_model_time_layers(fl_model *m, int n_inputs, const fl_tensor *inputs, int passes,
                               fl_timing *out, fl_err *e) {
    memset(out, 0, sizeof *out);
    if (passes < 1) passes = 1;
    /* the planning pass: shapes, buffers and first-touch page faults are not the layers' */
    fl_status st = fl_model_plan(m, n_inputs, inputs, e);
    if (st != FL_OK) return st;
    double *t = calloc((size_t)m->n_nodes * passes + 1, sizeof *t);
    out->secs = calloc((size_t)m->n_nodes + 1, sizeof *out->secs);
    out->flops = calloc((size_t)m->n_nodes + 1, sizeof *out->flops);
    if (!t || !out->secs || !out->flops) {
        free(t);
        fl_timing_free(out);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory timing the model");
    }
    /* node by node, as a planned forward pass runs them (its inputs are in place) */
    for (int p = 0; p < passes; p++)
        for (int i = 0; i < m->n_nodes; i++) {
            double t0 = fl_now();
            m->nodes[i].op->forward(m, &m->nodes[i]);
            t[(size_t)i * passes + p] = fl_now() - t0;
        }
    out->n = m->n_nodes;
    for (int i = 0; i < m->n_nodes; i++) { /* the median pass of each node */
        qsort(t + (size_t)i * passes, (size_t)passes, sizeof *t, cmp_double);
        out->secs[i] = t[(size_t)i * passes + passes / 2];
        out->flops[i] = fl_node_flops(m, &m->nodes[i]);
        out->total += out->secs[i];
    }
    free(t);
    return FL_OK;
}

void fl_timing_free(fl_timing *p) {
    free(p->secs);
    free(p->flops);
    memset(p, 0, sizeof *p);
}

int64_t fl_model_act_bytes(const fl_model *m) {
    int64_t b = 0;
    for (int i = 0; i < m->n_values; i++)
        if (m->values[i].kind == FL_VAL_ACT) b += m->values[i].t.size * (int64_t)sizeof(float);
    return b;
}
