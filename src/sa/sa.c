/* Surprise adequacy: options, building an fl_sa from training traces (validation, grouping by
 * class, neuron subset, variance threshold), scoring dispatch, and trace collection from a
 * model. The kernels live in sa_gauss.c (MDSA, the Gaussian pieces), sa_lsa.c (LSA) and
 * sa_nn.c (DSA). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sa/sa_int.h"

void fl_sa_opts_init(fl_sa_opts *o, fl_sa_kind kind) {
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->var_threshold = 1e-5;
    o->dsa_variant = FL_DSA_KIM;
}

static const char *const kind_names[] = {"lsa", "dsa", "mdsa"};

const char *fl_sa_kind_name(fl_sa_kind k) {
    return (unsigned)k < 3 ? kind_names[k] : "?";
}

fl_status fl_sa_kind_parse(const char *s, fl_sa_kind *out, fl_err *e) {
    for (int k = 0; k < 3; k++)
        if (!strcmp(s, kind_names[k])) {
            *out = (fl_sa_kind)k;
            return FL_OK;
        }
    return fl_fail(e, FL_ERR_ARG, "unknown surprise adequacy kind '%s' (lsa, dsa or mdsa)", s);
}

void fl_sa_free(fl_sa *sa) {
    if (!sa) return;
    free(sa->cols);
    free(sa->start);
    free(sa->rank);
    fl_free(sa->raw);
    fl_free(sa->xg);
    free(sa->xn);
    fl_free(sa->xd);
    free(sa->gmean);
    free(sa->mu);
    free(sa->W);
    free(sa->lognorm);
    free(sa->nb);
    free(sa);
}

int64_t fl_sa_dim(const fl_sa *sa) { return sa->dim; }
int64_t fl_sa_kept(const fl_sa *sa) { return sa->d; }
int fl_sa_n_classes(const fl_sa *sa) { return sa->C; }
int64_t fl_sa_absent(const fl_sa *sa) { return sa->absent; }
int64_t fl_sa_class_count(const fl_sa *sa, int c) {
    return c >= 0 && c < sa->C ? sa->start[c + 1] - sa->start[c] : 0;
}

/* The first non-finite value of rows x[n, dim], as row and column; 0 if none. */
static int find_nonfinite(const float *x, int64_t n, int64_t dim, int64_t *row, int64_t *col) {
    for (int64_t i = 0; i < n * dim; i++)
        if (!isfinite(x[i])) {
            *row = i / dim;
            *col = i % dim;
            return 1;
        }
    return 0;
}

/* Drop (from sa->cols) every column whose variance in some class is below the threshold.
 * Variances (ddof 0, like np.var) in double, in one sequential pass over the traces with
 * per-class shifted sums: with the class's first trace as the shift s,
 * sum (x - s)^2 / n - (sum (x - s) / n)^2 loses nothing that matters for a threshold decision
 * even when the mean is far larger than the spread. */
static fl_status drop_low_variance(fl_sa *sa, const float *train, const int32_t *pred,
                                   fl_err *e) {
    double thr = sa->o.var_threshold;
    if (!(thr > 0)) return FL_OK;
    int64_t d = sa->d, kept = 0, worst_c = -1, C = sa->C;
    double *acc = calloc((size_t)(3 * C * d), sizeof(double));
    uint8_t *drop = calloc((size_t)d, 1), *seen = calloc((size_t)C, 1);
    if (!acc || !drop || !seen) {
        free(acc);
        free(drop);
        free(seen);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory for neuron variances");
    }
    for (int64_t i = 0; i < sa->n; i++) {
        const float *x = train + i * sa->dim;
        double *shift = acc + 3 * pred[i] * d, *s1 = shift + d, *s2 = s1 + d;
        if (!seen[pred[i]]) {
            seen[pred[i]] = 1;
            for (int64_t j = 0; j < d; j++) shift[j] = x[sa->cols[j]];
        }
        for (int64_t j = 0; j < d; j++) {
            double t = x[sa->cols[j]] - shift[j];
            s1[j] += t;
            s2[j] += t * t;
        }
    }
    for (int c = 0; c < C; c++) {
        double nc = (double)(sa->start[c + 1] - sa->start[c]), *s1 = acc + 3 * c * d + d,
               *s2 = s1 + d;
        for (int64_t j = 0; nc > 0 && j < d; j++) {
            double m = s1[j] / nc, var = s2[j] / nc - m * m;
            if (var < thr && !drop[j]) {
                drop[j] = 1;
                if (worst_c < 0) worst_c = c;
            }
        }
    }
    free(seen);
    for (int64_t j = 0; j < d; j++)
        if (!drop[j]) sa->cols[kept++] = sa->cols[j];
    free(acc);
    free(drop);
    if (kept == 0)
        return fl_fail(e, FL_ERR_DATA,
                       "all %lld neurons have a variance below the threshold %g in some class "
                       "(e.g. class %lld): nothing left to estimate a density on; lower the "
                       "threshold (--var-threshold) or use another layer",
                       (long long)d, thr, (long long)worst_c);
    if (kept < d)
        fl_log(2, "sa: %lld of %lld neurons dropped (variance < %g in some class)\n",
               (long long)(d - kept), (long long)d, thr);
    sa->d = kept;
    return FL_OK;
}

fl_status fl_sa_new(const float *train, const int32_t *pred, int64_t n, int64_t dim,
                    const fl_sa_opts *o, fl_sa **out, fl_err *e) {
    *out = NULL;
    if (n <= 0) return fl_fail(e, FL_ERR_ARG, "surprise adequacy needs training traces (got none)");
    if (dim <= 0)
        return fl_fail(e, FL_ERR_ARG, "training traces have no neurons (width %lld)",
                       (long long)dim);
    if (o->kind != FL_SA_LSA && o->kind != FL_SA_DSA && o->kind != FL_SA_MDSA)
        return fl_fail(e, FL_ERR_ARG, "unknown surprise adequacy kind %d", (int)o->kind);
    if (o->neurons && o->n_neurons <= 0)
        return fl_fail(e, FL_ERR_ARG, "neuron subset is empty");
    for (int64_t j = 0; o->neurons && j < o->n_neurons; j++)
        if (o->neurons[j] < 0 || o->neurons[j] >= dim)
            return fl_fail(e, FL_ERR_ARG, "neuron index %lld (entry %lld of the subset) is outside "
                           "the traces' %lld neurons", (long long)o->neurons[j], (long long)j,
                           (long long)dim);
    int64_t row, col;
    if (find_nonfinite(train, n, dim, &row, &col))
        return fl_fail(e, FL_ERR_NAN, "training trace %lld has a non-finite value (%g) at neuron "
                       "%lld", (long long)row, (double)train[row * dim + col], (long long)col);
    int C = o->n_classes;
    for (int64_t i = 0; i < n; i++) {
        if (pred[i] < 0)
            return fl_fail(e, FL_ERR_ARG, "training prediction %lld is negative (%d)",
                           (long long)i, (int)pred[i]);
        if (o->n_classes > 0 && pred[i] >= o->n_classes)
            return fl_fail(e, FL_ERR_ARG, "training prediction %lld is class %d, but there are "
                           "%d classes", (long long)i, (int)pred[i], o->n_classes);
        if (o->n_classes <= 0 && pred[i] + 1 > C) C = pred[i] + 1;
    }

    fl_sa *sa = calloc(1, sizeof *sa);
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)n);
    fl_status st = FL_OK;
    if (!sa || !perm) goto oom;
    sa->o = *o;
    sa->o.neurons = NULL; /* not kept: sa->cols holds what is used */
    sa->dim = dim;
    sa->n = n;
    sa->C = C;
    sa->d = o->neurons ? o->n_neurons : dim;
    sa->cols = malloc(sizeof(int64_t) * (size_t)sa->d);
    sa->start = calloc((size_t)C + 1, sizeof(int64_t));
    if (!sa->cols || !sa->start) goto oom;
    for (int64_t j = 0; j < sa->d; j++) sa->cols[j] = o->neurons ? o->neurons[j] : j;

    /* Stable counting sort by class: perm[r] = original index of sorted row r. */
    for (int64_t i = 0; i < n; i++) sa->start[pred[i] + 1]++;
    for (int c = 0; c < C; c++) sa->start[c + 1] += sa->start[c];
    {
        int64_t *next = malloc(sizeof(int64_t) * (size_t)C);
        if (!next) goto oom;
        memcpy(next, sa->start, sizeof(int64_t) * (size_t)C);
        for (int64_t i = 0; i < n; i++) perm[next[pred[i]]++] = i;
        free(next);
    }
    int present = 0;
    for (int c = 0; c < C; c++) present += sa->start[c + 1] > sa->start[c];

    if (o->kind != FL_SA_DSA && (st = drop_low_variance(sa, train, pred, e)) != FL_OK) goto fail;
    if (o->kind == FL_SA_DSA && present < 2) {
        st = fl_fail(e, FL_ERR_DATA, "DSA needs training traces of at least two classes (all %lld "
                     "are predicted as one class)", (long long)n);
        goto fail;
    }
    sa->raw = fl_alloc(sizeof(float) * (size_t)(n * sa->d));
    sa->rank = malloc(sizeof(int64_t) * (size_t)n);
    if (!sa->raw || !sa->rank) goto oom;
    for (int64_t r = 0; r < n; r++) sa->rank[perm[r]] = r;
    for (int64_t i = 0; i < n; i++) { /* read in order, scatter to the sorted rows */
        float *dst = sa->raw + sa->rank[i] * sa->d;
        const float *src = train + i * dim;
        for (int64_t j = 0; j < sa->d; j++) dst[j] = src[sa->cols[j]];
    }
    free(perm);
    perm = NULL;
    st = o->kind == FL_SA_DSA ? fl__sa_dsa_build(sa, e) : fl__sa_gauss_build(sa, e);
    if (st != FL_OK) goto fail;
    *out = sa;
    return FL_OK;
oom:
    st = fl_fail(e, FL_ERR_NOMEM, "out of memory for %lld training traces of %lld neurons",
                 (long long)n, (long long)dim);
fail:
    free(perm);
    fl_sa_free(sa);
    return st;
}

/* Inputs are scored per predicted class in chunks of at most this many. */
#define SA_CHUNK 8192

static fl_status score_class(fl_sa *sa, const float *q, int64_t m, int c, const int64_t *self,
                             double *out, fl_err *e) {
    switch (sa->o.kind) {
    case FL_SA_LSA: return fl__sa_lsa_score(sa, q, m, c, self, out, e);
    case FL_SA_MDSA: return fl__sa_mdsa_score(sa, q, m, c, out, e);
    default: return fl__sa_dsa_score(sa, q, m, c, self, out, e);
    }
}

fl_status fl_sa_score(fl_sa *sa, const float *x, const int32_t *pred, int64_t n, double *out,
                      fl_err *e) {
    sa->absent = 0;
    if (n <= 0) return FL_OK;
    int64_t row, col;
    if (find_nonfinite(x, n, sa->dim, &row, &col))
        return fl_fail(e, FL_ERR_NAN, "trace %lld has a non-finite value (%g) at neuron %lld",
                       (long long)row, (double)x[row * sa->dim + col], (long long)col);
    for (int64_t i = 0; i < n; i++)
        if (pred[i] < 0)
            return fl_fail(e, FL_ERR_ARG, "prediction %lld is negative (%d)", (long long)i,
                           (int)pred[i]);
    int C = sa->C;
    int64_t *cnt = calloc((size_t)C + 1, sizeof(int64_t)), *order = malloc(sizeof(int64_t) * (size_t)n);
    int64_t chunk = n < SA_CHUNK ? n : SA_CHUNK;
    float *q = malloc(sizeof(float) * (size_t)(chunk * sa->d));
    double *r = malloc(sizeof(double) * (size_t)chunk);
    fl_status st = FL_OK;
    if (!cnt || !order || !q || !r) {
        st = fl_fail(e, FL_ERR_NOMEM, "out of memory scoring %lld traces", (long long)n);
        goto out;
    }
    /* Group the inputs by class; absent classes score NaN. */
    for (int64_t i = 0; i < n; i++) {
        int c = pred[i];
        if (c >= C || sa->start[c + 1] == sa->start[c]) {
            out[i] = NAN;
            sa->absent++;
            continue;
        }
        cnt[c + 1]++;
    }
    for (int c = 0; c < C; c++) cnt[c + 1] += cnt[c];
    for (int64_t i = 0; i < n; i++) {
        int c = pred[i];
        if (c < C && sa->start[c + 1] > sa->start[c]) order[cnt[c]++] = i;
    }
    /* cnt[c] is now the end of class c's run in order[]; runs start at cnt[c-1]. */
    for (int c = 0; c < C && st == FL_OK; c++) {
        int64_t lo = c ? cnt[c - 1] : 0, hi = cnt[c];
        for (int64_t s = lo; s < hi && st == FL_OK; s += chunk) {
            int64_t m = hi - s < chunk ? hi - s : chunk;
            for (int64_t k = 0; k < m; k++)
                for (int64_t j = 0; j < sa->d; j++)
                    q[k * sa->d + j] = x[order[s + k] * sa->dim + sa->cols[j]];
            st = score_class(sa, q, m, c, NULL, r, e);
            for (int64_t k = 0; k < m && st == FL_OK; k++) out[order[s + k]] = r[k];
        }
    }
    if (st == FL_OK && sa->absent)
        fl_log(1, "sa: %lld of %lld inputs are predicted as a class without training traces; "
               "their SA is NaN\n", (long long)sa->absent, (long long)n);
out:
    free(cnt);
    free(order);
    free(q);
    free(r);
    return st;
}

fl_status fl_sa_score_train(fl_sa *sa, const int64_t *idx, int64_t n, double *out, fl_err *e) {
    sa->absent = 0;
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= sa->n)
            return fl_fail(e, FL_ERR_ARG, "training trace index %lld is outside [0, %lld)",
                           (long long)idx[i], (long long)sa->n);
    /* Sorted rows are grouped by class already: sort the requested rows, score runs. */
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)(n ? n : 1)), *pos = NULL;
    float *q = NULL;
    double *r = NULL;
    int64_t chunk = n < SA_CHUNK ? n : SA_CHUNK;
    fl_status st = FL_OK;
    if (rows) {
        pos = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        q = malloc(sizeof(float) * (size_t)((chunk ? chunk : 1) * sa->d));
        r = malloc(sizeof(double) * (size_t)(chunk ? chunk : 1));
    }
    if (!rows || !pos || !q || !r) {
        st = fl_fail(e, FL_ERR_NOMEM, "out of memory scoring %lld training traces", (long long)n);
        goto out;
    }
    /* Counting sort of the requested traces by class (the class of sorted row `row` is the k
     * with start[k] <= row < start[k+1]). */
    int64_t *cnt = calloc((size_t)sa->C + 1, sizeof(int64_t));
    if (!cnt) {
        st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t i = 0; i < n; i++) {
            int64_t row = sa->rank[idx[i]];
            int lo = 0, hi = sa->C;
            while (hi - lo > 1) {
                int mid = (lo + hi) / 2;
                if (sa->start[mid] <= row) lo = mid; else hi = mid;
            }
            if (pass == 0) {
                cnt[lo + 1]++;
            } else {
                pos[cnt[lo]] = i;
                rows[cnt[lo]++] = row;
            }
        }
        for (int k = 0; pass == 0 && k < sa->C; k++) cnt[k + 1] += cnt[k];
    }
    for (int k = 0; k < sa->C && st == FL_OK; k++) {
        int64_t lo = k ? cnt[k - 1] : 0, hi = cnt[k];
        for (int64_t s = lo; s < hi && st == FL_OK; s += chunk) {
            int64_t m = hi - s < chunk ? hi - s : chunk;
            for (int64_t j = 0; j < m; j++)
                memcpy(q + j * sa->d, sa->raw + rows[s + j] * sa->d, sizeof(float) * (size_t)sa->d);
            st = score_class(sa, q, m, k, rows + s, r, e);
            for (int64_t j = 0; j < m && st == FL_OK; j++) out[pos[s + j]] = r[j];
        }
    }
    free(cnt);
out:
    free(rows);
    free(pos);
    free(q);
    free(r);
    return st;
}

/* ---- traces from a model ---------------------------------------------------------------- */
typedef struct trace_ctx {
    float *traces;
    int32_t *pred;
    int64_t dim;
} trace_ctx;

static fl_status trace_cb(void *user, fl_model *m, const float *neurons, const float *logits,
                          int n_logits, int64_t start, int n, fl_err *e) {
    (void)m;
    (void)e;
    trace_ctx *t = user;
    memcpy(t->traces + start * t->dim, neurons, sizeof(float) * (size_t)(n * t->dim));
    for (int i = 0; i < n; i++) {
        const float *l = logits + (int64_t)i * n_logits;
        int best = 0;
        for (int k = 1; k < n_logits; k++)
            if (l[k] > l[best]) best = k;
        t->pred[start + i] = best;
    }
    return FL_OK;
}

fl_status fl_sa_traces(fl_model *m, const char *layers, const fl_dataset *d, int batch,
                       float **traces, int32_t **pred, int64_t *dim, fl_err *e) {
    *traces = NULL;
    *pred = NULL;
    *dim = 0;
    if (d->n <= 0) return fl_fail(e, FL_ERR_ARG, "dataset %s is empty", d->source ? d->source : "");
    fl_layerset *ls;
    fl_status st = fl_layerset_make(m, layers, &ls, e);
    if (st != FL_OK) return st;
    trace_ctx t = {malloc(sizeof(float) * (size_t)(d->n * ls->total)),
                   malloc(sizeof(int32_t) * (size_t)d->n), ls->total};
    if (!t.traces || !t.pred)
        st = fl_fail(e, FL_ERR_NOMEM, "out of memory for %lld traces of %lld neurons",
                     (long long)d->n, (long long)ls->total);
    else
        st = fl_layerset_stream(m, ls, d, batch, trace_cb, &t, e);
    fl_layerset_free(ls);
    if (st != FL_OK) {
        free(t.traces);
        free(t.pred);
        return st;
    }
    *traces = t.traces;
    *pred = t.pred;
    *dim = t.dim;
    return FL_OK;
}
