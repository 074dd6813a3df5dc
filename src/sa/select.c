/* Seed selection (select.h): the scores (DeepGini, RobOT's first-order loss, DeepSA's LSAv /
 * DSAv), the index selections built on them, and writing the chosen seeds out. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flare/sa.h"
#include "flare/select.h"

static const char *const names[FL_SEL_COUNT_] = {"random",  "gini",    "best",    "kmst",
                                                 "st-dall", "st-lall", "st-dper", "st-lper"};

fl_status fl_select_strategy_parse(const char *s, fl_select_strategy *out, fl_err *e) {
    for (int i = 0; i < FL_SEL_COUNT_; i++)
        if (!strcmp(s, names[i])) {
            *out = (fl_select_strategy)i;
            return FL_OK;
        }
    return fl_fail(e, FL_ERR_ARG,
                   "unknown selection strategy '%s' (expected random, gini, best, kmst, st-dall, "
                   "st-lall, st-dper or st-lper)",
                   s);
}

const char *fl_select_strategy_name(fl_select_strategy s) {
    return (unsigned)s < FL_SEL_COUNT_ ? names[s] : "?";
}

void fl_select_opts_default(fl_select_opts *o) {
    memset(o, 0, sizeof *o);
    o->strategy = FL_SEL_RANDOM;
    o->n = 100;
    o->seed = 1;
    o->sections = 4;
    o->fol = FL_FOL_LINF;
    o->fol_eps = 0.3;
}

void fl_selection_free(fl_selection *s) {
    if (!s) return;
    free(s->index);
    free(s->score);
    free(s->pred);
    free(s);
}

/* ---- scores ------------------------------------------------------------------------------------ */
void fl_gini(const float *logits, int64_t n, int K, double *out) {
    for (int64_t i = 0; i < n; i++) {
        const float *z = logits + i * K;
        double mx = z[0], s = 0, s2 = 0;
        for (int k = 1; k < K; k++) mx = z[k] > mx ? z[k] : mx;
        for (int k = 0; k < K; k++) s += exp(z[k] - mx);
        for (int k = 0; k < K; k++) {
            double p = exp(z[k] - mx) / s;
            s2 += p * p;
        }
        out[i] = 1 - s2;
    }
}

fl_status fl_fol(fl_model *m, const fl_tensor *x, const int32_t *y, fl_fol_norm norm, double eps,
                 double *out, fl_err *e) {
    int saved_training = m->training, saved_skip = m->skip_input_grad;
    m->training = 0;
    m->skip_input_grad = 0;
    fl_tensor seed = {0};
    fl_status st = fl_model_forward(m, x, e);
    int L = fl_lrp_logits(m);
    const fl_tensor *z = &m->values[L].t;
    int64_t n = x->shape[0];
    if (st == FL_OK && (z->ndim != 2 || z->shape[0] != n))
        st = fl_fail(e, FL_ERR_SHAPE, "FOL: the logits '%s' are not [N, K]", m->values[L].name);
    if (st == FL_OK) st = fl_tensor_alloc(&seed, 2, z->shape);
    int K = st == FL_OK ? (int)z->shape[1] : 0;
    /* d CE / d logits of each input's own loss (not the batch mean): softmax - onehot */
    for (int64_t i = 0; st == FL_OK && i < n; i++) {
        if (y[i] < 0 || y[i] >= K) {
            st = fl_fail(e, FL_ERR_ARG, "FOL: label %d of input %lld is not a class of the %d logits",
                         (int)y[i], (long long)i, K);
            break;
        }
        const float *zi = z->data + i * K;
        float *g = seed.data + i * K;
        double mx = zi[0], s = 0;
        for (int k = 1; k < K; k++) mx = zi[k] > mx ? zi[k] : mx;
        for (int k = 0; k < K; k++) s += exp(zi[k] - mx);
        for (int k = 0; k < K; k++) g[k] = (float)(exp(zi[k] - mx) / s) - (k == y[i]);
    }
    if (st == FL_OK) st = fl_model_backward_idx(m, 1, &L, &seed, e);
    const fl_tensor *g = st == FL_OK ? fl_model_grad(m, fl_model_input_name(m, 0)) : NULL;
    if (st == FL_OK && !g) st = fl_fail(e, FL_ERR_ARG, "FOL: no gradient reached the input");
    for (int64_t i = 0; st == FL_OK && i < n; i++) {
        int64_t per = g->size / n;
        const float *gi = g->data + i * per;
        double s = 0;
        for (int64_t j = 0; j < per; j++) s += norm == FL_FOL_LINF ? fabs(gi[j]) : (double)gi[j] * gi[j];
        out[i] = norm == FL_FOL_LINF ? eps * s : sqrt(s);
    }
    fl_tensor_free(&seed);
    m->training = saved_training;
    m->skip_input_grad = saved_skip;
    return st;
}

/* ---- index selections ----------------------------------------------------------------------- */
typedef struct {
    const double *s;
    int desc;
} order_ctx;

static int by_score(const void *a, const void *b, void *arg) {
    const order_ctx *c = arg;
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    double x = c->s[i], y = c->s[j];
    if (x != y) return (c->desc ? x > y : x < y) ? -1 : 1;
    return (i > j) - (i < j);
}

/* The indices with a non-NaN score (and cls >= 0 when cls is given), sorted; returns count. */
static int64_t ranked(const double *s, const int32_t *cls, int64_t n, int desc, int64_t *out) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(s[i]) && (!cls || cls[i] >= 0)) out[m++] = i;
    order_ctx c = {s, desc};
    qsort_r(out, (size_t)m, sizeof *out, by_score, &c);
    return m;
}

int64_t fl_select_top(const double *scores, int64_t n, int64_t k, int desc, int64_t *idx) {
    int64_t *all = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!all) return -1;
    int64_t m = ranked(scores, NULL, n, desc, all);
    if (k > m) k = m;
    memcpy(idx, all, sizeof(int64_t) * (size_t)k);
    free(all);
    return k;
}

int64_t fl_select_best(const double *scores, int64_t n, int64_t k, int64_t *idx) {
    int64_t *asc = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!asc) return -1;
    int64_t m = ranked(scores, NULL, n, 0, asc);
    int64_t lo = k / 2 < m ? k / 2 : m, hi = k - k / 2 < m - lo ? k - k / 2 : m - lo;
    memcpy(idx, asc, sizeof(int64_t) * (size_t)lo);
    for (int64_t j = 0; j < hi; j++) idx[lo + j] = asc[m - 1 - j];
    free(asc);
    return lo + hi;
}

/* Move a uniformly drawn element of v[from..n) to v[from] (one step of Fisher-Yates). */
static void draw_to(fl_rng *r, int64_t *v, int64_t from, int64_t n) {
    int64_t j = from + (int64_t)fl_rng_below(r, (uint32_t)(n - from));
    int64_t t = v[from];
    v[from] = v[j];
    v[j] = t;
}

int64_t fl_select_kmst(const double *scores, int64_t n, int64_t k, int sections, fl_rng *r,
                       int64_t *idx) {
    if (sections < 1) sections = 1;
    int64_t *pool = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    int64_t *sec_n = calloc((size_t)sections + 1, sizeof(int64_t));
    uint8_t *taken = calloc((size_t)(n ? n : 1), 1);
    if (!pool || !sec_n || !taken) {
        free(pool), free(sec_n), free(taken);
        return -1;
    }
    double mx = 0;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(scores[i]) && scores[i] > mx) mx = scores[i];
    /* section of each eligible input: [t*w, (t+1)*w), w = max/sections; the maximum itself
     * goes to the last section (RobOT's strict < leaves it out of every section) */
    for (int64_t i = 0; i < n; i++) {
        if (isnan(scores[i])) continue;
        int t = mx > 0 ? (int)(scores[i] / (mx / sections)) : 0;
        sec_n[(t < 0 ? 0 : t >= sections ? sections - 1 : t) + 1]++;
        m++;
    }
    for (int t = 0; t < sections; t++) sec_n[t + 1] += sec_n[t]; /* start of each section */
    int64_t *fill = calloc((size_t)sections, sizeof(int64_t));
    if (!fill) {
        free(pool), free(sec_n), free(taken);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) { /* counting sort: each section in index order */
        if (isnan(scores[i])) continue;
        int t = mx > 0 ? (int)(scores[i] / (mx / sections)) : 0;
        t = t < 0 ? 0 : t >= sections ? sections - 1 : t;
        pool[sec_n[t] + fill[t]++] = i;
    }
    if (k > m) k = m;
    int64_t got = 0;
    for (int t = 0; t < sections; t++) {
        int64_t want = k / sections + (t < k % sections), lo = sec_n[t], cnt = sec_n[t + 1] - lo;
        for (int64_t j = 0; j < want && j < cnt; j++) {
            draw_to(r, pool + lo, j, cnt);
            idx[got++] = pool[lo + j];
            taken[pool[lo + j]] = 1;
        }
    }
    /* sections short of their share: the rest at random from the inputs not chosen yet */
    int64_t rest = 0;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(scores[i]) && !taken[i]) pool[rest++] = i;
    for (int64_t j = 0; got < k; j++) {
        draw_to(r, pool, j, rest);
        idx[got++] = pool[j];
    }
    free(pool), free(sec_n), free(taken), free(fill);
    return got;
}

int64_t fl_select_per_class(const double *scores, const int32_t *cls, int64_t n, int K, int64_t k,
                            int64_t *idx) {
    int64_t *desc = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    uint8_t *taken = calloc((size_t)(n ? n : 1), 1);
    if (!desc || !taken || K < 1) {
        free(desc), free(taken);
        return -1;
    }
    int64_t m = ranked(scores, cls, n, 1, desc), got = 0;
    if (k > m) k = m;
    for (int c = 0; c < K; c++) {
        int64_t want = k / K + (c < k % K);
        for (int64_t j = 0; j < m && want > 0; j++)
            if (cls[desc[j]] == c) {
                idx[got++] = desc[j];
                taken[desc[j]] = 1;
                want--;
            }
    }
    for (int64_t j = 0; j < m && got < k; j++)
        if (!taken[desc[j]]) idx[got++] = desc[j];
    free(desc), free(taken);
    return got;
}

/* ---- scoring a test set ------------------------------------------------------------------------ */
typedef struct score_ctx {
    fl_select_strategy strategy;
    const fl_select_opts *o;
    double *score;
    int32_t *pred;
    const int32_t *labels;
} score_ctx;

/* One pass of the model (eval mode) over the test set: predictions, and gini or FOL scores. */
static fl_status score_pass(fl_model *m, const fl_dataset *d, score_ctx *c, fl_err *e) {
    int batch = c->o->batch > 0 ? c->o->batch : 256;
    if (batch > d->n) batch = (int)d->n;
    int saved = m->training;
    m->training = 0;
    fl_tensor x = {0};
    fl_status st = fl_dataset_batch(d, 0, batch, &x, e);
    int fol = c->strategy == FL_SEL_BEST || c->strategy == FL_SEL_KMST;
    for (int64_t start = 0; st == FL_OK && start < d->n; start += batch) {
        int n = (int)(d->n - start < batch ? d->n - start : batch);
        fl_tensor_set_shape(&x, 4, (int64_t[]){n, d->c, d->h, d->w});
        st = fl_dataset_batch(d, start, n, &x, e);
        if (st != FL_OK) break;
        if (fol) st = fl_fol(m, &x, d->y + start, c->o->fol, c->o->fol_eps, c->score + start, e);
        else st = fl_model_forward(m, &x, e);
        if (st != FL_OK) break;
        const fl_tensor *z = &m->values[fl_lrp_logits(m)].t;
        int K = (int)(z->size / n);
        for (int i = 0; i < n; i++) {
            const float *zi = z->data + (int64_t)i * K;
            int p = 0;
            for (int k = 1; k < K; k++)
                if (zi[k] > zi[p]) p = k;
            c->pred[start + i] = p;
        }
        if (c->strategy == FL_SEL_GINI) fl_gini(z->data, n, K, c->score + start);
    }
    m->training = saved;
    fl_tensor_free(&x);
    return st;
}

/* The default ST-* layer: the last layer of the important-neurons file (in model order, as
 * written) that is in the model and is not the logits. */
static const char *default_layer(const fl_model *m, const fl_important *imp) {
    int logits = fl_lrp_logits(m);
    for (int i = imp->n_layers - 1; i >= 0; i--) {
        int v = fl_model_find(m, imp->layers[i].name);
        if (v >= 0 && v != logits) return imp->layers[i].name;
    }
    return NULL;
}

/* LSAv / DSAv of every test input against the training set, restricted to the important
 * neurons of the chosen layers. */
static fl_status sa_pass(fl_model *m, const fl_dataset *test, score_ctx *c, fl_err *e) {
    const fl_select_opts *o = c->o;
    if (!o->important || !o->train)
        return fl_fail(e, FL_ERR_ARG, "%s needs the important neurons (`flare nn lrp`) and the "
                       "training set", fl_select_strategy_name(c->strategy));
    const char *layers = o->layers ? o->layers : default_layer(m, o->important);
    if (!layers)
        return fl_fail(e, FL_ERR_NOTFOUND, "no layer of the important-neurons file (other than "
                       "the logits) is in the model");
    fl_layerset *ls = NULL;
    float *tr = NULL, *te = NULL;
    int32_t *tr_pred = NULL, *te_pred = NULL;
    int64_t *sub = NULL, n_sub = 0, dim = 0, dim2 = 0;
    fl_sa *sa = NULL;
    fl_status st = fl_layerset_make(m, layers, &ls, e);
    if (st == FL_OK) st = fl_important_subset(o->important, ls, &sub, &n_sub, e);
    if (st == FL_OK) st = fl_sa_traces(m, layers, o->train, o->batch, &tr, &tr_pred, &dim, e);
    if (st == FL_OK) st = fl_sa_traces(m, layers, test, o->batch, &te, &te_pred, &dim2, e);
    if (st == FL_OK) {
        fl_sa_opts so;
        int lsa = c->strategy == FL_SEL_ST_LALL || c->strategy == FL_SEL_ST_LPER;
        fl_sa_opts_init(&so, lsa ? FL_SA_LSA : FL_SA_DSA);
        so.neurons = sub;
        so.n_neurons = n_sub;
        so.n_classes = test->n_classes;
        st = fl_sa_new(tr, tr_pred, o->train->n, dim, &so, &sa, e);
    }
    if (st == FL_OK) st = fl_sa_score(sa, te, te_pred, test->n, c->score, e);
    if (st == FL_OK) memcpy(c->pred, te_pred, sizeof(int32_t) * (size_t)test->n);
    fl_sa_free(sa);
    free(tr), free(te), free(tr_pred), free(te_pred), free(sub);
    fl_layerset_free(ls);
    return st;
}

fl_status fl_select(fl_model *m, const fl_dataset *test, const fl_select_opts *o,
                    fl_selection **out, fl_err *e) {
    *out = NULL;
    fl_select_strategy s = o->strategy;
    int st_kind = s >= FL_SEL_ST_DALL && s < FL_SEL_COUNT_;
    if ((unsigned)s >= FL_SEL_COUNT_) return fl_fail(e, FL_ERR_ARG, "unknown strategy %d", (int)s);
    if (o->n < 1) return fl_fail(e, FL_ERR_ARG, "select: asked for %lld seeds", (long long)o->n);
    if (test->n < 1) return fl_fail(e, FL_ERR_ARG, "select: the test set is empty");
    if ((s == FL_SEL_BEST || s == FL_SEL_KMST || st_kind) && !test->has_labels)
        return fl_fail(e, FL_ERR_ARG, "select: %s needs a labelled test set (%s has no labels)",
                       fl_select_strategy_name(s), test->source ? test->source : "the data");
    fl_selection *r = calloc(1, sizeof *r);
    int64_t N = test->n, k = o->n < N ? o->n : N;
    double *score = malloc(sizeof(double) * (size_t)N);
    int32_t *pred = malloc(sizeof(int32_t) * (size_t)N), *cls = NULL;
    fl_status st = r && score && pred ? FL_OK : fl_fail(e, FL_ERR_NOMEM, "out of memory");
    if (st == FL_OK) {
        r->strategy = s;
        r->index = malloc(sizeof(int64_t) * (size_t)k);
        if (!r->index) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    score_ctx c = {.strategy = s, .o = o, .score = score, .pred = pred};
    if (st == FL_OK) st = st_kind ? sa_pass(m, test, &c, e) : score_pass(m, test, &c, e);
    fl_rng rng;
    fl_rng_seed(&rng, o->seed);
    int64_t got = 0;
    if (st == FL_OK && st_kind) { /* only the correctly classified take part */
        cls = malloc(sizeof(int32_t) * (size_t)N);
        if (!cls) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; st == FL_OK && i < N; i++) {
            int ok = pred[i] == test->y[i] && !isnan(score[i]);
            cls[i] = ok ? pred[i] : -1;
            r->eligible += ok;
            if (!ok) score[i] = NAN;
        }
        if (st == FL_OK && r->eligible == 0)
            st = fl_fail(e, FL_ERR_ARG, "select: no test input is classified correctly (with a "
                         "finite surprise), so %s has nothing to choose from",
                         fl_select_strategy_name(s));
    } else if (st == FL_OK) {
        r->eligible = N;
    }
    if (st == FL_OK) {
        switch (s) {
        case FL_SEL_RANDOM: {
            int64_t *all = malloc(sizeof(int64_t) * (size_t)N);
            if (!all) {
                st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
                break;
            }
            for (int64_t i = 0; i < N; i++) all[i] = i, score[i] = NAN;
            for (int64_t j = 0; j < k; j++) draw_to(&rng, all, j, N);
            memcpy(r->index, all, sizeof(int64_t) * (size_t)k);
            free(all);
            got = k;
            break;
        }
        case FL_SEL_GINI: got = fl_select_top(score, N, k, 1, r->index); break;
        case FL_SEL_BEST: got = fl_select_best(score, N, k, r->index); break;
        case FL_SEL_KMST: got = fl_select_kmst(score, N, k, o->sections, &rng, r->index); break;
        case FL_SEL_ST_DALL:
        case FL_SEL_ST_LALL: got = fl_select_top(score, N, k, 1, r->index); break;
        default:
            got = fl_select_per_class(score, cls, N, test->n_classes > 0 ? test->n_classes : 1, k,
                                      r->index);
        }
        if (st == FL_OK && got < 0) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    if (st == FL_OK) {
        r->n = got;
        r->score = malloc(sizeof(double) * (size_t)(got ? got : 1));
        r->pred = malloc(sizeof(int32_t) * (size_t)(got ? got : 1));
        if (!r->score || !r->pred) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
        for (int64_t j = 0; st == FL_OK && j < got; j++) {
            r->score[j] = score[r->index[j]];
            r->pred[j] = pred[r->index[j]];
        }
    }
    free(score), free(pred), free(cls);
    if (st != FL_OK) {
        fl_selection_free(r);
        return st;
    }
    *out = r;
    return FL_OK;
}

/* ---- output ----------------------------------------------------------------------------------- */
/* path with its ".npy" (if any) replaced by suffix; malloc'd. */
static char *sister(const char *path, const char *suffix) {
    size_t n = strlen(path);
    if (n >= 4 && !strcmp(path + n - 4, ".npy")) n -= 4;
    char *s = malloc(n + strlen(suffix) + 1);
    if (s) {
        memcpy(s, path, n);
        strcpy(s + n, suffix);
    }
    return s;
}

fl_status fl_selection_save(const fl_selection *s, const fl_dataset *test, const char *images_path,
                            fl_err *e) {
    if (s->n < 1) return fl_fail(e, FL_ERR_ARG, "%s: no seeds to write", images_path);
    fl_tensor x = {0};
    char *idx_path = sister(images_path, ".idx.npy"), *png = sister(images_path, ".png");
    char **labels = calloc((size_t)s->n, sizeof(char *));
    fl_status st = idx_path && png && labels ? FL_OK : fl_fail(e, FL_ERR_NOMEM, "out of memory");
    if (st == FL_OK) st = fl_dataset_gather(test, s->index, s->n, &x, NULL, e);
    if (st == FL_OK) st = fl_npy_write_tensor(images_path, &x, e);
    int images_written = st == FL_OK, idx_written = 0;
    if (st == FL_OK)
        st = fl_npy_write(idx_path, FL_DT_I64, 1, (int64_t[]){s->n}, s->index, e);
    idx_written = images_written && st == FL_OK;
    for (int64_t j = 0; st == FL_OK && j < s->n; j++) {
        char buf[160];
        fl_grid_label(test, s->index[j], s->pred[j], NULL, buf, sizeof buf);
        if (!(labels[j] = strdup(buf))) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    if (st == FL_OK)
        st = fl_image_grid_write_scaled(png, x.data, (int)s->n, test->c, test->h, test->w,
                                        s->n < 10 ? (int)s->n : 10, (const char *const *)labels,
                                        &test->scale, e);
    if (st != FL_OK && idx_path && png) { /* the three files or none (each written atomically) */
        if (images_written) unlink(images_path);
        if (idx_written) unlink(idx_path);
    }
    for (int64_t j = 0; labels && j < s->n; j++) free(labels[j]);
    free(labels), free(idx_path), free(png);
    fl_tensor_free(&x);
    return st;
}
