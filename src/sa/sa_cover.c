/* LSC and DSC as coverage criteria (cover.h): surprise coverage measured incrementally, batch
 * after batch, next to the structural criteria of `flare nn cover`.
 *
 *   lsc[:K[:LAYER[:LOWER:UPPER]]]     dsc[:K[:LAYER[:LOWER:UPPER]]]
 *
 * K buckets (default 1000, sadl's n_bucket) over [LOWER, UPPER] of the LSA / DSA (Kim) of each
 * input, against the training traces of LAYER (a layer of the layer set; default: its last
 * layer other than the logits and the model's outputs), built once from ctx->train when the
 * criterion is made. Buckets follow sadl's get_sc (FL_SC_SADL): np.digitize over
 * np.linspace(LOWER, UPPER, K), which has K + 1 possible buckets (below LOWER, K - 1
 * intervals, at or above UPPER), so the criterion's item count is K + 1 (sadl divides by K).
 *
 * Bounds. A criterion must fix its buckets before the first input arrives, so the default
 * cannot be the min / max of the test set's SA (what `flare nn sa` uses). It is the min / max
 * of the leave-one-out SA of up to 1000 training traces (evenly spaced): the range the
 * training data itself spans. Inputs more surprising than that fill the top bucket; sadl's
 * fixed upper bound of 2000 is another choice, given as LOWER:UPPER.
 *
 * The SA object is shared, read-only in intent, by a criterion and its clones; DSA fills a
 * cache inside it while scoring, so clones must not be updated from two threads at once.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/lrp.h" /* fl_lrp_logits */
#include "flare/sa.h"

#define SC_DEFAULT_K 1000
#define SC_BOUND_SAMPLE 1000

typedef struct sc_params {
    fl_sa *sa;
    fl_sc *sc;         /* bucket geometry (its own hit array is not used) */
    int64_t off, width; /* the layer's neurons in the layer set's flat vector */
} sc_params;

static void sc_params_free(void *p) {
    sc_params *s = p;
    if (!s) return;
    fl_sa_free(s->sa);
    fl_sc_free(s->sc);
    free(s);
}

/* Split "K:LAYER:LOWER:UPPER" at ':' keeping empty fields; at most 4. */
static int split(char *buf, char **part) {
    int n = 0;
    for (char *p = buf;; n++) {
        if (n == 4) return -1;
        part[n] = p;
        char *colon = strchr(p, ':');
        if (!colon) return n + 1;
        *colon = 0;
        p = colon + 1;
    }
}

static fl_status parse_num(const fl_cover *c, const char *s, double *v, fl_err *e) {
    char *end;
    *v = strtod(s, &end);
    if (end == s || *end || !isfinite(*v))
        return fl_fail(e, FL_ERR_ARG, "%s: '%s' is not a number (usage: %s)", c->spec, s,
                       c->ops->usage);
    return FL_OK;
}

static fl_status sc_init(fl_cover *c, const fl_cover_ctx *ctx, const char *arg, fl_err *e,
                         fl_sa_kind kind) {
    char buf[512] = "", *part[4] = {0};
    int np = 0;
    if (arg) {
        if (strlen(arg) >= sizeof buf)
            return fl_fail(e, FL_ERR_ARG, "%s: argument too long", c->spec);
        strcpy(buf, arg);
        if ((np = split(buf, part)) < 0 || np == 3)
            return fl_fail(e, FL_ERR_ARG, "%s: expected %s", c->spec, c->ops->usage);
    }
    int64_t k = SC_DEFAULT_K;
    if (np >= 1 && part[0][0]) {
        char *end;
        long long v = strtoll(part[0], &end, 10);
        if (end == part[0] || *end || v < 2 || v > 100000000)
            return fl_fail(e, FL_ERR_ARG, "%s: K must be an integer in [2, 1e8] (usage: %s)",
                           c->spec, c->ops->usage);
        k = v;
    }
    double lower = 0, upper = 0;
    int bounds = np == 4;
    if (bounds) {
        fl_status st = parse_num(c, part[2], &lower, e);
        if (st == FL_OK) st = parse_num(c, part[3], &upper, e);
        if (st != FL_OK) return st;
        if (!(lower < upper))
            return fl_fail(e, FL_ERR_ARG, "%s: LOWER must be below UPPER", c->spec);
    }
    if (!ctx->m || !ctx->train)
        return fl_fail(e, FL_ERR_ARG, "%s needs the model and its training set (the training "
                       "traces surprise is measured against)", c->spec);
    /* The layer. */
    const fl_layerset *ls = ctx->ls;
    int li = -1;
    if (np >= 2 && part[1][0]) {
        for (int l = 0; l < ls->n && li < 0; l++)
            if (!strcmp(ls->name[l], part[1])) li = l;
        if (li < 0)
            return fl_fail(e, FL_ERR_NOTFOUND, "%s: layer '%s' is not in the layer set", c->spec,
                           part[1]);
    } else {
        int logits = fl_lrp_logits(ctx->m);
        for (int l = ls->n - 1; l >= 0 && li < 0; l--) {
            int out = ls->value[l] == logits;
            for (int o = 0; o < ctx->m->n_outputs; o++) out |= ls->value[l] == ctx->m->outputs[o];
            if (!out) li = l;
        }
        if (li < 0)
            return fl_fail(e, FL_ERR_NOTFOUND, "%s: the layer set has no layer other than the "
                           "model's outputs; name one (usage: %s)", c->spec, c->ops->usage);
    }
    sc_params *p = calloc(1, sizeof *p);
    if (!p) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    c->params = p;
    p->off = ls->offset[li];
    p->width = ls->width[li];

    /* Training traces of the layer, the SA object, the default bounds. */
    float *tr = NULL;
    int32_t *pred = NULL;
    int64_t dim = 0;
    fl_status st = fl_sa_traces(ctx->m, ls->name[li], ctx->train, 256, &tr, &pred, &dim, e);
    fl_sa_opts o;
    fl_sa_opts_init(&o, kind);
    if (st == FL_OK && (st = fl_sa_new(tr, pred, ctx->train->n, dim, &o, &p->sa, e)) != FL_OK) {
        char msg[sizeof e->msg];
        memcpy(msg, e->msg, sizeof msg);
        fl_fail(e, st, "%s: the training traces of layer '%s' (%s): %s", c->spec, ls->name[li],
                ctx->train->source ? ctx->train->source : "the training set", msg);
    }
    free(tr);
    free(pred);
    if (st == FL_OK && !bounds) {
        int64_t n = ctx->train->n, m = n < SC_BOUND_SAMPLE ? n : SC_BOUND_SAMPLE;
        int64_t *idx = malloc(sizeof(int64_t) * (size_t)m);
        double *v = malloc(sizeof(double) * (size_t)m);
        if (!idx || !v) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; st == FL_OK && i < m; i++) idx[i] = i * n / m;
        if (st == FL_OK) st = fl_sa_score_train(p->sa, idx, m, v, e);
        if (st == FL_OK && !fl_sc_bounds(v, m, &lower, &upper))
            st = fl_fail(e, FL_ERR_DATA, "%s: no finite training SA to take bounds from; give "
                         "LOWER:UPPER", c->spec);
        free(idx);
        free(v);
    }
    if (st == FL_OK) st = fl_sc_new((int)k, lower, upper, FL_SC_SADL, &p->sc, e);
    if (st != FL_OK) return st;
    char detail[512];
    snprintf(detail, sizeof detail, "layer %s (%lld neurons), %lld buckets over [%.6g, %.6g]%s",
             ls->name[li], (long long)p->width, (long long)k, lower, upper,
             bounds ? "" : " (bounds from 1000 training inputs' SA)");
    if (!(c->detail = strdup(detail))) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    fl_log(2, "%s: %s\n", c->spec, c->detail);
    int64_t items = k + 1;
    return fl_cover_layout(c, 1, (const char *const *)&ls->name[li], &items, e);
}

static fl_status lsc_init(fl_cover *c, const fl_cover_ctx *ctx, const char *arg, fl_err *e) {
    return sc_init(c, ctx, arg, e, FL_SA_LSA);
}
static fl_status dsc_init(fl_cover *c, const fl_cover_ctx *ctx, const char *arg, fl_err *e) {
    return sc_init(c, ctx, arg, e, FL_SA_DSA);
}

static fl_status sc_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, fl_err *e) {
    const sc_params *p = c->params;
    int n = b->n;
    if (n <= 0) return FL_OK;
    if (!b->m)
        return fl_fail(e, FL_ERR_ARG, "%s needs the model's predictions in the batch", c->spec);
    const fl_tensor *lg = fl_model_output(b->m, 0);
    int64_t nl = lg->size / n, total = c->ctx.ls->total;
    float *x = malloc(sizeof(float) * (size_t)(n * p->width));
    int32_t *pred = malloc(sizeof(int32_t) * (size_t)n);
    double *v = malloc(sizeof(double) * (size_t)n);
    fl_status st = FL_OK;
    if (!x || !pred || !v) {
        st = fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", c->spec);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        memcpy(x + (int64_t)i * p->width, b->mean + i * total + p->off,
               sizeof(float) * (size_t)p->width);
        const float *l = lg->data + i * nl;
        int best = 0;
        for (int j = 1; j < nl; j++)
            if (l[j] > l[best]) best = j;
        pred[i] = best;
    }
    if ((st = fl_sa_score(p->sa, x, pred, n, v, e)) != FL_OK) goto out;
    for (int i = 0; i < n; i++) {
        int bk = fl_sc_bucket(p->sc, v[i]);
        if (bk >= 0 && fl_cover_hit(c, bk)) added[i] = 1;
    }
out:
    free(x);
    free(pred);
    free(v);
    return st;
}

const fl_cover_ops fl_cover_lsc = {
    .name = "lsc",
    .usage = "lsc[:K[:LAYER[:LOWER:UPPER]]]",
    .needs = FL_COVER_NEED_MODEL,
    .init = lsc_init,
    .update = sc_update,
    .free_params = sc_params_free,
};

const fl_cover_ops fl_cover_dsc = {
    .name = "dsc",
    .usage = "dsc[:K[:LAYER[:LOWER:UPPER]]]",
    .needs = FL_COVER_NEED_MODEL,
    .init = dsc_init,
    .update = sc_update,
    .free_params = sc_params_free,
};
