/* The neuron tables of the gradient strategies and the seeds of their backward passes.
 *
 * DLFuzz and DeepXplore both keep, per model, a table of "how often was each neuron covered"
 * (DLFuzz's model_layer_times; DeepXplore's dict of booleans) over every layer but the input
 * and flatten, with a neuron's value scaled by the min and max of its layer for the input at
 * hand. The tables pick the neurons whose values the objective raises; they are separate from
 * the campaign's guide criterion, which may be anything `nn cover` knows.
 *
 * DLFuzz's selection strategies (utils.py, neuron_selection), k split evenly between them:
 *   often      k/s neurons drawn without replacement, p proportional to times covered;
 *   rarely     p proportional to max(times) - times;
 *   weight     among the 10 % of neurons with the largest positive mean incoming weight;
 *   threshold  up to k/(2s) neurons whose scaled value is in (t, t + 0.25), raised, and up to
 *              the rest in (t - 0.2, t), lowered (the released code's sign), conv layers only;
 *   none       k uncovered neurons drawn uniformly (any neuron once all are covered).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flare/lrp.h" /* fl_lrp_logits */
#include "fuzz/grad.h"

fl_status fz_nsel_parse(const char *s, unsigned *out, fl_err *e) {
    static const char *const names[] = {"often", "rarely", "weight", "threshold"};
    *out = 0;
    const char *p = s;
    while (*p) {
        size_t len = strcspn(p, ",");
        int found = 0;
        for (int i = 0; i < 4; i++)
            if (len == strlen(names[i]) && !strncmp(p, names[i], len)) *out |= 1u << i, found = 1;
        if (!found)
            return fl_fail(e, FL_ERR_ARG,
                           "--neuron-select %s: '%.*s' is not one of often, rarely, weight, "
                           "threshold",
                           s, (int)len, p);
        p += len + (p[len] == ',');
    }
    return FL_OK;
}

/* The node whose weights make value v: v's producer, or through ops that keep channels
 * (activations, BatchNormalization) the Conv / Gemm / MatMul before them; -1 if none. */
static int weight_node(const fl_model *m, int v) {
    static const char *const pass[] = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Elu", "Selu",
                                       "BatchNormalization", "Clip", "Softplus", NULL};
    for (int hop = 0; hop < 4 && v >= 0; hop++) {
        int p = m->values[v].producer;
        if (p < 0) return -1;
        const char *op = m->nodes[p].op->name;
        if (!strcmp(op, "Conv") || !strcmp(op, "Gemm") || !strcmp(op, "MatMul")) return p;
        int ok = 0;
        for (int i = 0; pass[i]; i++) ok |= !strcmp(op, pass[i]);
        if (!ok) return -1;
        v = m->nodes[p].in[0];
    }
    return -1;
}

typedef struct {
    int64_t idx;
    double w;
} wneuron;

static int by_weight_desc(const void *a, const void *b) {
    const wneuron *x = a, *y = b;
    return x->w != y->w ? (x->w > y->w ? -1 : 1) : (x->idx > y->idx) - (x->idx < y->idx);
}

/* DLFuzz's neuron_select_high_weight: the mean weight into each output channel / unit. */
static fl_status top_weights(fz_ntab *t, fl_err *e) {
    const fl_layerset *ls = t->ls;
    wneuron *all = malloc(sizeof *all * (size_t)(ls->total ? ls->total : 1));
    if (!all) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    int64_t n = 0;
    for (int l = 0; l < ls->n; l++) {
        int p = weight_node(t->m, ls->value[l]);
        if (p < 0) continue;
        const fl_node *nd = &t->m->nodes[p];
        const fl_tensor *w = &t->m->values[nd->in[1]].t;
        if (nd->n_in < 2 || !w->data || w->ndim < 2) continue;
        int trans_b = !strcmp(nd->op->name, "Gemm") && fl_node_attr_int(nd, "transB", 0);
        /* Conv W [out, in, kh, kw] and Gemm transB W [out, in]: rows; MatMul / Gemm W [in, out] */
        int rows = !strcmp(nd->op->name, "Conv") || trans_b;
        int64_t out = rows ? w->shape[0] : w->shape[w->ndim - 1];
        if (out != ls->width[l]) continue;
        int64_t per = w->size / out;
        for (int64_t j = 0; j < out; j++) {
            double s = 0;
            for (int64_t k = 0; k < per; k++) s += rows ? w->data[j * per + k] : w->data[k * out + j];
            if (s / (double)per > 0) all[n++] = (wneuron){ls->offset[l] + j, s / (double)per};
        }
    }
    qsort(all, (size_t)n, sizeof *all, by_weight_desc);
    int64_t keep = (int64_t)(0.1 * (double)ls->total);
    if (keep > n) keep = n;
    t->top_weight = malloc(sizeof(int64_t) * (size_t)(keep ? keep : 1));
    if (!t->top_weight) return free(all), fl_fail(e, FL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < keep; i++) t->top_weight[i] = all[i].idx;
    t->n_top_weight = keep;
    free(all);
    return FL_OK;
}

fl_status fz_ntab_init(fz_ntab *t, fl_model *m, fl_err *e) {
    memset(t, 0, sizeof *t);
    t->m = m;
    t->logits = fl_lrp_logits(m);
    fl_status st = fl_layerset_make(m, "all", &t->ls, e);
    if (st) return st;
    t->times = calloc((size_t)t->ls->total, sizeof *t->times);
    if (!t->times) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    return top_weights(t, e);
}

void fz_ntab_free(fz_ntab *t) {
    fl_layerset_free(t->ls);
    fl_cover_view_free(&t->view);
    free(t->times);
    free(t->scaled);
    free(t->top_weight);
    fz_seeds_free(&t->seeds);
    memset(t, 0, sizeof *t);
}

fl_status fz_ntab_scaled(fz_ntab *t, int rows, fl_err *e) {
    const fl_layerset *ls = t->ls;
    fl_status st = fl_cover_view_fill(&t->view, ls, t->m, FL_COVER_NEED_RANGE, e);
    if (st) return st;
    int64_t need = (int64_t)rows * ls->total;
    if (need > t->scaled_cap) {
        float *p = realloc(t->scaled, sizeof(float) * (size_t)need);
        if (!p) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        t->scaled = p;
        t->scaled_cap = need;
    }
    const fl_cover_batch *b = &t->view.b;
    for (int r = 0; r < rows; r++)
        for (int l = 0; l < ls->n; l++) {
            double lo = b->lmin[r * ls->n + l], hi = b->lmax[r * ls->n + l];
            const float *v = b->mean + (int64_t)r * ls->total + ls->offset[l];
            float *o = t->scaled + (int64_t)r * ls->total + ls->offset[l];
            for (int64_t j = 0; j < ls->width[l]; j++)
                o[j] = hi > lo ? (float)((v[j] - lo) / (hi - lo)) : 0.0f;
        }
    return FL_OK;
}

void fz_ntab_count(fz_ntab *t, int r, double thr) {
    const float *s = t->scaled + (int64_t)r * t->ls->total;
    for (int64_t j = 0; j < t->ls->total; j++) t->times[j] += s[j] > thr;
}

static void add(fz_lane *l, int64_t idx, float sign, int model) {
    if (l->n_neur >= FZ_MAX_NEURONS) return;
    l->neur[l->n_neur] = idx;
    l->nsign[l->n_neur] = sign;
    l->nmodel[l->n_neur] = (int8_t)model;
    l->n_neur++;
}

/* k draws without replacement from weights w[n] (zeros never drawn); fewer when fewer are
 * positive. */
static void draw(const double *w, int64_t n, int k, fl_rng *rng, fz_lane *l, int model,
                 uint8_t *taken) {
    for (int d = 0; d < k; d++) {
        double tot = 0;
        for (int64_t j = 0; j < n; j++) tot += taken[j] ? 0 : w[j];
        if (tot <= 0) return;
        double u = fl_rng_uniform(rng) * tot;
        int64_t j = 0;
        for (; j < n - 1; j++) {
            double wj = taken[j] ? 0 : w[j];
            if (u < wj) break;
            u -= wj;
        }
        while (j > 0 && (taken[j] || w[j] <= 0)) j--; /* rounding at the end */
        if (taken[j] || w[j] <= 0) return;
        taken[j] = 1;
        add(l, j, 1, model);
    }
}

void fz_ntab_select(fz_ntab *t, unsigned sel, int k, double thr, int r, fl_rng *rng,
                    fz_lane *l, int model) {
    const int64_t n = t->ls->total;
    double *w = malloc(sizeof(double) * (size_t)n);
    uint8_t *taken = calloc((size_t)n, 1);
    if (!w || !taken) { /* out of memory: no neuron term this time (the logits still guide) */
        free(w);
        free(taken);
        return;
    }
    int strategies = __builtin_popcount(sel);
    int each = strategies ? k / strategies : k;
    if (each < 1) each = 1;
    int64_t times_total = 0, times_max = 0;
    for (int64_t j = 0; j < n; j++) {
        times_total += t->times[j];
        if (t->times[j] > times_max) times_max = t->times[j];
    }
    /* "often" and "rarely" fall back to one random uncovered neuron while nothing is covered */
    if (!sel || ((sel & (FZ_NSEL_OFTEN | FZ_NSEL_RARELY)) && times_total == 0)) {
        int want = sel ? 1 : k, any = 0;
        for (int64_t j = 0; j < n; j++) any |= t->times[j] == 0;
        for (int64_t j = 0; j < n; j++) w[j] = !any || t->times[j] == 0;
        draw(w, n, want, rng, l, model, taken);
        sel = 0;
    }
    if (sel & FZ_NSEL_OFTEN) {
        for (int64_t j = 0; j < n; j++) w[j] = (double)t->times[j];
        draw(w, n, each, rng, l, model, taken);
    }
    if (sel & FZ_NSEL_RARELY) {
        for (int64_t j = 0; j < n; j++) w[j] = (double)(times_max - t->times[j]);
        draw(w, n, each, rng, l, model, taken);
    }
    if (sel & FZ_NSEL_WEIGHT) {
        for (int64_t j = 0; j < n; j++) w[j] = 0;
        for (int64_t i = 0; i < t->n_top_weight; i++) w[t->top_weight[i]] = 1;
        draw(w, n, each, rng, l, model, taken);
    }
    if (sel & FZ_NSEL_THRESHOLD) {
        const float *s = t->scaled + (int64_t)r * n;
        int above = each / 2, below = each - above;
        for (int li = 0; li < t->ls->n; li++) {
            if (t->m->values[t->ls->value[li]].t.ndim != 4) continue; /* dense layers excluded */
            for (int64_t j = t->ls->offset[li]; j < t->ls->offset[li] + t->ls->width[li]; j++) {
                if (s[j] > thr && s[j] < thr + 0.25 && above > 0) add(l, j, 1, model), above--;
                else if (s[j] < thr && s[j] > thr - 0.2 && below > 0) add(l, j, -1, model), below--;
            }
        }
    }
    free(w);
    free(taken);
}

/* ---- backward seeds ---------------------------------------------------------------------------- */
void fz_seeds_begin(fz_seeds *s) {
    s->n = 0;
    memset(s->used, 0, sizeof s->used);
}

fl_tensor *fz_seed_get(fz_seeds *s, fl_model *m, int vidx) {
    const fl_tensor *v = &m->values[vidx].t;
    int k = 0;
    while (k < s->n_slots && s->idx[k] != vidx) k++;
    if (k == s->n_slots) {
        if (k == FZ_MAX_SEEDS) return NULL;
        s->idx[k] = vidx;
        memset(&s->t[k], 0, sizeof s->t[k]);
        s->n_slots++;
    }
    fl_tensor *t = &s->t[k];
    if (!s->used[k]) {
        if (!fl_tensor_same_shape(t, v)) {
            fl_tensor_free(t);
            if (fl_tensor_alloc(t, v->ndim, v->shape)) return NULL;
        }
        memset(t->data, 0, sizeof(float) * (size_t)t->size);
        s->used[k] = 1;
        s->pass_idx[s->n] = vidx;
        s->pass_t[s->n] = *t;
        s->n++;
    }
    return t;
}

fl_status fz_seeds_backward(fz_seeds *s, fl_model *m, fl_err *e) {
    return fl_model_backward_idx(m, s->n, s->pass_idx, s->pass_t, e);
}

void fz_seeds_free(fz_seeds *s) {
    for (int k = 0; k < s->n_slots; k++) fl_tensor_free(&s->t[k]);
    memset(s, 0, sizeof *s);
}
