/* IDC, importance-driven coverage (DeepImportance), as a coverage criterion (cover.h), and the
 * one-dimensional k-means and silhouette it is built on (definitions in lrp.h).
 *
 * Each important neuron is clustered on its own, so every clustering is one-dimensional. On
 * sorted values a k-means cluster is a run of consecutive values, which makes both steps
 * cheap and exact: Lloyd's assignment is k-1 binary searches for the midpoints between
 * centroids, and the silhouette of a point needs its summed distance to each run, which
 * prefix sums give in O(1) — O(n k) for what scikit-learn computes from all n^2 pairs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cover_int.h"
#include "flare/lrp.h"

#define IDC_MAX_M 10
#define KM_RESTARTS 10  /* scikit-learn's n_init before 1.4 */
#define KM_MAX_ITER 300 /* scikit-learn's max_iter */

/* ---- one-dimensional k-means --------------------------------------------------------------- */
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double unit(fl_rng *r) { return (double)(fl_rng_u64(r) >> 11) * 0x1.0p-53; }

/* First index in sorted x[0..n) whose value is > b. */
static int64_t above(const double *x, int64_t n, double b) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (x[mid] > b) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* Cluster runs of sorted x for ascending centroids c: cut[t]..cut[t+1] nearest to c[t]. */
static void cuts(const double *x, int64_t n, const double *c, int k, int64_t *cut) {
    cut[0] = 0;
    for (int t = 0; t + 1 < k; t++) cut[t + 1] = above(x, n, 0.5 * (c[t] + c[t + 1]));
    cut[k] = n;
}

/* k-means++ seeding (D^2 sampling) then Lloyd to convergence; returns the inertia and leaves
 * the ascending centroids in c and the runs in cut. S is the prefix sum of x. d is scratch. */
static double lloyd(const double *x, const double *S, int64_t n, int k, fl_rng *r, double *d,
                    double *c, int64_t *cut) {
    c[0] = x[fl_rng_below(r, (uint32_t)n)];
    for (int64_t i = 0; i < n; i++) d[i] = (x[i] - c[0]) * (x[i] - c[0]);
    for (int t = 1; t < k; t++) {
        double tot = 0;
        for (int64_t i = 0; i < n; i++) tot += d[i];
        double u = unit(r) * tot, acc = 0;
        int64_t pick = n - 1;
        for (int64_t i = 0; i < n; i++)
            if ((acc += d[i]) > u) {
                pick = i;
                break;
            }
        c[t] = x[pick];
        for (int64_t i = 0; i < n; i++) {
            double q = (x[i] - c[t]) * (x[i] - c[t]);
            if (q < d[i]) d[i] = q;
        }
    }
    qsort(c, (size_t)k, sizeof *c, cmp_double);
    int64_t prev[5] = {-1, -1, -1, -1, -1};
    for (int it = 0; it < KM_MAX_ITER; it++) {
        cuts(x, n, c, k, cut);
        if (!memcmp(prev, cut, sizeof(int64_t) * (size_t)(k + 1))) break;
        memcpy(prev, cut, sizeof(int64_t) * (size_t)(k + 1));
        for (int t = 0; t < k; t++) /* an empty run keeps its centroid */
            if (cut[t + 1] > cut[t]) c[t] = (S[cut[t + 1]] - S[cut[t]]) / (double)(cut[t + 1] - cut[t]);
    }
    double inertia = 0;
    for (int t = 0; t < k; t++)
        for (int64_t i = cut[t]; i < cut[t + 1]; i++) inertia += (x[i] - c[t]) * (x[i] - c[t]);
    return inertia;
}

/* Exact 1-D k-means: D[t][j] = min over i of D[t-1][i] + cost(x[i..j)), where the leftmost
 * best split i is non-decreasing in j (the cost satisfies the quadrangle inequality), so each
 * row is filled by divide and conquer over j with a shrinking range of i. */
typedef struct dp_ctx {
    const double *S, *Q;
    const double *prev;
    double *cur;
    int64_t *arg;
} dp_ctx;

static double run_cost(const dp_ctx *c, int64_t i, int64_t j) {
    double s = c->S[j] - c->S[i], q = c->Q[j] - c->Q[i];
    double v = q - s * s / (double)(j - i);
    return v > 0 ? v : 0;
}

static void dp_fill(const dp_ctx *c, int64_t jlo, int64_t jhi, int64_t ilo, int64_t ihi) {
    while (jlo <= jhi) {
        int64_t mid = jlo + (jhi - jlo) / 2, best_i = ilo, top = ihi < mid - 1 ? ihi : mid - 1;
        double best = INFINITY;
        for (int64_t i = ilo; i <= top; i++) {
            double v = c->prev[i] + run_cost(c, i, mid);
            if (v < best) best = v, best_i = i;
        }
        c->cur[mid] = best;
        c->arg[mid] = best_i;
        dp_fill(c, jlo, mid - 1, ilo, best_i); /* recurse on the left half, loop on the right */
        jlo = mid + 1;
        ilo = best_i;
    }
}

/* The optimal runs of sorted x for k clusters (cut[0..k]) and centroids; returns the inertia
 * or -1 when out of memory. */
static double exact(const double *x, const double *S, int64_t n, int k, double *c, int64_t *cut) {
    double *Q = malloc(sizeof(double) * (size_t)(n + 1));
    double *D = malloc(sizeof(double) * (size_t)(n + 1) * (size_t)(k + 1));
    int64_t *A = malloc(sizeof(int64_t) * (size_t)(n + 1) * (size_t)(k + 1));
    if (!Q || !D || !A) {
        free(Q), free(D), free(A);
        return -1;
    }
    Q[0] = 0;
    for (int64_t i = 0; i < n; i++) Q[i + 1] = Q[i] + x[i] * x[i];
    for (int64_t j = 0; j <= n; j++) D[j] = j == 0 ? 0 : INFINITY;
    for (int t = 1; t <= k; t++) {
        dp_ctx dc = {S, Q, D + (size_t)(t - 1) * (n + 1), D + (size_t)t * (n + 1),
                     A + (size_t)t * (n + 1)};
        for (int64_t j = 0; j < t; j++) dc.cur[j] = INFINITY;
        dp_fill(&dc, t, n, t - 1, n - 1);
    }
    cut[k] = n;
    for (int t = k; t > 0; t--) cut[t - 1] = A[(size_t)t * (n + 1) + cut[t]];
    double inertia = 0;
    for (int t = 0; t < k; t++) {
        c[t] = (S[cut[t + 1]] - S[cut[t]]) / (double)(cut[t + 1] - cut[t]);
        for (int64_t i = cut[t]; i < cut[t + 1]; i++) inertia += (x[i] - c[t]) * (x[i] - c[t]);
    }
    free(Q), free(D), free(A);
    return inertia;
}

static double silhouette_pref(const double *x, const double *S, int64_t n, const int64_t *cut,
                              int k) {
    double total = 0;
    for (int t = 0; t < k; t++) {
        int64_t l = cut[t], r = cut[t + 1], na = r - l;
        if (na <= 1) continue; /* a singleton's silhouette is 0 */
        for (int64_t i = l; i < r; i++) {
            double xi = x[i];
            double a = (xi * (double)(i - l) - (S[i] - S[l]) + (S[r] - S[i + 1]) -
                        xi * (double)(r - i - 1)) / (double)(na - 1);
            double b = INFINITY;
            for (int u = 0; u < k; u++) {
                int64_t l2 = cut[u], r2 = cut[u + 1], nb = r2 - l2;
                if (u == t || nb == 0) continue;
                double s = u < t ? xi * (double)nb - (S[r2] - S[l2]) : (S[r2] - S[l2]) - xi * (double)nb;
                if (s / (double)nb < b) b = s / (double)nb;
            }
            double mx = a > b ? a : b;
            if (isfinite(b) && mx > 0) total += (b - a) / mx;
        }
    }
    return total / (double)n;
}

static double *prefix(const double *x, int64_t n) {
    double *S = malloc(sizeof(double) * (size_t)(n + 1));
    if (!S) return NULL;
    S[0] = 0;
    for (int64_t i = 0; i < n; i++) S[i + 1] = S[i] + x[i];
    return S;
}

double fl_silhouette1d(const double *x, int64_t n, const int64_t *cut, int k) {
    double *S = prefix(x, n);
    if (!S) return NAN;
    double s = silhouette_pref(x, S, n, cut, k);
    free(S);
    return s;
}

fl_status fl_kmeans1d_fit(const float *v, int64_t n, int kmin, int kmax, fl_kmeans_method method,
                          uint64_t seed, fl_kmeans1d *out, fl_err *e) {
    memset(out, 0, sizeof *out);
    if (n < 1 || kmin < 1 || kmax > 4 || kmin > kmax || n > UINT32_MAX)
        return fl_fail(e, FL_ERR_ARG, "k-means: need 1 <= kmin <= kmax <= 4 and 1 <= n < 2^32");
    double *x = malloc(sizeof(double) * (size_t)n), *d = malloc(sizeof(double) * (size_t)n);
    double *S = NULL;
    if (!x || !d) goto nomem;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(v[i])) {
            free(x), free(d);
            return fl_fail(e, FL_ERR_NAN, "k-means: value %lld is not finite", (long long)i);
        }
        x[i] = v[i];
    }
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    if (!(S = prefix(x, n))) goto nomem;
    int distinct = 1;
    for (int64_t i = 1; i < n && distinct < 4; i++) distinct += x[i] != x[i - 1];
    if (kmax > distinct) kmax = distinct;
    if (kmin > kmax) kmin = kmax;
    fl_rng r;
    fl_rng_seed(&r, seed);
    out->silhouette = -INFINITY;
    for (int k = kmin; k <= kmax; k++) {
        double best_c[4] = {0}, c[4] = {0}, best_in = INFINITY;
        int64_t best_cut[5], cut[5];
        for (int run = 0; run < KM_RESTARTS; run++) {
            double in = method == FL_KMEANS_EXACT ? exact(x, S, n, k, c, cut)
                                                  : lloyd(x, S, n, k, &r, d, c, cut);
            if (in < 0) goto nomem;
            if (in < best_in) {
                best_in = in;
                memcpy(best_c, c, sizeof c);
                memcpy(best_cut, cut, sizeof cut);
            }
            if (k == 1 || method == FL_KMEANS_EXACT) break; /* no seed to vary */
        }
        double sil = k == 1 ? 0 : silhouette_pref(x, S, n, best_cut, k);
        if (sil > out->silhouette) {
            out->k = k;
            out->silhouette = sil;
            out->inertia = best_in;
            memcpy(out->centroid, best_c, sizeof best_c);
        }
    }
    free(x), free(d), free(S);
    return FL_OK;
nomem:
    free(x), free(d), free(S);
    return fl_fail(e, FL_ERR_NOMEM, "k-means: out of memory for %lld values", (long long)n);
}

int fl_kmeans1d_assign(const fl_kmeans1d *km, float v) {
    int best = 0;
    double bd = fabs((double)v - km->centroid[0]);
    for (int t = 1; t < km->k; t++) {
        double dd = fabs((double)v - km->centroid[t]);
        if (dd < bd) bd = dd, best = t;
    }
    return best;
}

/* ---- the criterion ---------------------------------------------------------------------------- */
typedef struct idc_params {
    int64_t off;                  /* the layer's first neuron in the flat vector */
    int m;                        /* important neurons */
    fl_kmeans_method method;
    int64_t neuron[IDC_MAX_M];    /* their indices in the layer, most relevant first */
    fl_kmeans1d km[IDC_MAX_M];
} idc_params;

typedef struct collect_ctx {
    const idc_params *p;
    int64_t total, n;
    float *vals; /* [m, n] */
} collect_ctx;

static fl_status collect(void *user, fl_model *m, const float *neurons, const float *logits,
                         int n_logits, int64_t start, int n, fl_err *e) {
    collect_ctx *c = user;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < c->p->m; j++)
            c->vals[j * c->n + start + i] = neurons[i * c->total + c->p->off + c->p->neuron[j]];
    return FL_OK;
}

static const double *g_rel; /* for qsort: ranking happens once per init */
static int by_rel(const void *a, const void *b) {
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    if (g_rel[i] != g_rel[j]) return g_rel[i] > g_rel[j] ? -1 : 1;
    return (i > j) - (i < j);
}

/* Pick the layer and its m most relevant neurons from the important-neurons file. */
static fl_status pick_neurons(fl_cover *c, const fl_cover_ctx *ctx, const fl_important *imp,
                              const char *layer, int64_t m, idc_params *p, int *li, fl_err *e) {
    const fl_layerset *ls = ctx->ls;
    *li = -1;
    if (layer) {
        for (int l = 0; l < ls->n && *li < 0; l++)
            if (!strcmp(ls->name[l], layer)) *li = l;
        if (*li < 0)
            return fl_fail(e, FL_ERR_NOTFOUND, "%s: layer '%s' is not in the layer set", c->spec,
                           layer);
    } else {
        int logits = ctx->m ? fl_lrp_logits(ctx->m) : -1;
        for (int l = ls->n - 1; l >= 0 && *li < 0; l--)
            if (ls->value[l] != logits && fl_important_layer_find(imp, ls->name[l])) *li = l;
        if (*li < 0)
            return fl_fail(e, FL_ERR_NOTFOUND,
                           "%s: no layer of the layer set (other than the logits) is in the "
                           "important-neurons file %s",
                           c->spec, ctx->aux);
    }
    const fl_important_layer *L = fl_important_layer_find(imp, ls->name[*li]);
    if (!L)
        return fl_fail(e, FL_ERR_NOTFOUND, "%s: layer '%s' is not in the important-neurons file %s",
                       c->spec, ls->name[*li], ctx->aux);
    if (L->width != ls->width[*li])
        return fl_fail(e, FL_ERR_SHAPE,
                       "%s: layer '%s' has %lld neurons, the important-neurons file %s says %lld "
                       "(another model?)",
                       c->spec, L->name, (long long)ls->width[*li], ctx->aux, (long long)L->width);
    int64_t *order = malloc(sizeof(int64_t) * (size_t)L->width);
    if (!order) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < L->width; i++) order[i] = i;
    g_rel = L->relevance;
    qsort(order, (size_t)L->width, sizeof *order, by_rel);
    p->m = (int)(m < L->width ? m : L->width);
    memcpy(p->neuron, order, sizeof(int64_t) * (size_t)p->m);
    free(order);
    p->off = ls->offset[*li];
    return FL_OK;
}

static fl_status idc_init(fl_cover *c, const fl_cover_ctx *ctx, const char *arg, fl_err *e) {
    char buf[512], *part[3];
    const char *layer = NULL;
    int np;
    int64_t m = 6;
    fl_kmeans_method method = FL_KMEANS_PP;
    fl_status st = fl_cover__args(c, arg, buf, sizeof buf, part, 3, &np, e);
    if (st == FL_OK && np >= 1) st = fl_cover__int(c, part[0], 1, IDC_MAX_M, &m, e);
    for (int i = 1; st == FL_OK && i < np; i++) { /* LAYER and METHOD, either order */
        if (!strcmp(part[i], "exact")) method = FL_KMEANS_EXACT;
        else if (!strcmp(part[i], "kmeans++")) method = FL_KMEANS_PP;
        else if (!layer) layer = part[i];
        else st = fl_fail(e, FL_ERR_ARG, "%s: '%s' is neither a layer nor a method (%s)", c->spec,
                          part[i], c->ops->usage);
    }
    if (st != FL_OK) return st;
    if (!ctx->aux)
        return fl_fail(e, FL_ERR_ARG,
                       "%s needs the important neurons of the model (a `flare nn lrp` file)", c->spec);
    if (!ctx->train || !ctx->m)
        return fl_fail(e, FL_ERR_ARG, "%s needs the model and its training set (to cluster)",
                       c->spec);
    fl_important *imp = NULL;
    st = fl_important_load(ctx->aux, &imp, e);
    if (st != FL_OK) return st;
    idc_params *p = calloc(1, sizeof *p);
    if (!p) {
        fl_important_free(imp);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    c->params = p;
    p->method = method;
    int li;
    st = pick_neurons(c, ctx, imp, layer, m, p, &li, e);
    fl_important_free(imp);
    if (st != FL_OK) return st;

    /* the training values of the important neurons, then one clustering per neuron */
    int64_t n = ctx->train->n;
    collect_ctx cc = {.p = p, .total = ctx->ls->total, .n = n};
    cc.vals = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1) * (size_t)p->m);
    if (!cc.vals) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    st = fl_layerset_stream(ctx->m, ctx->ls, ctx->train, 256, collect, &cc, e);
    int64_t items = 1;
    for (int j = 0; st == FL_OK && j < p->m; j++) {
        float *v = cc.vals + j * n;
        int64_t nz = 0;
        for (int64_t i = 0; i < n; i++) /* the reference leaves exact zeros out */
            if (v[i] != 0) v[nz++] = v[i];
        if (nz < 10) { /* the reference's threshold: one cluster, at 0 */
            p->km[j] = (fl_kmeans1d){.k = 1};
        } else {
            st = fl_kmeans1d_fit(v, nz, 2, 4, p->method, 0x1dcull + (uint64_t)p->neuron[j],
                                 &p->km[j], e);
        }
        items *= p->km[j].k;
        fl_log(2, "%s: neuron %lld of '%s': %lld non-zero training values, k = %d (silhouette %.4f)",
               c->spec, (long long)p->neuron[j], ctx->ls->name[li], (long long)nz, p->km[j].k,
               p->km[j].silhouette);
    }
    free(cc.vals);
    if (st != FL_OK) return st;
    return fl_cover_layout(c, 1, (const char *const *)&ctx->ls->name[li], &items, e);
}

static fl_status idc_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, fl_err *e) {
    const idc_params *p = c->params;
    int64_t total = c->ctx.ls->total;
    for (int i = 0; i < b->n; i++) {
        const float *v = b->mean + i * total + p->off;
        int64_t code = 0, mult = 1;
        for (int j = 0; j < p->m; j++) {
            code += mult * fl_kmeans1d_assign(&p->km[j], v[p->neuron[j]]);
            mult *= p->km[j].k;
        }
        if (fl_cover_hit(c, code)) added[i] = 1;
    }
    return FL_OK;
}

const fl_cover_ops fl_cover_idc = {
    .name = "idc",
    .usage = "idc[:M[:LAYER][:exact|kmeans++]] (M important neurons, 1..10, default 6; needs "
             "the important-neurons file and the training set)",
    .needs = 0,
    .init = idc_init,
    .update = idc_update,
    .free_params = NULL,
};
