/* Important neurons: LRP relevance summed over the correctly classified inputs of a dataset,
 * ranked per layer, saved as JSON and loaded back (format in docs/lrp.md). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/lrp.h"

void fl_important_opts_default(fl_important_opts *o) {
    memset(o, 0, sizeof *o);
    fl_lrp_opts_default(&o->lrp);
    o->ratio = 0.4;
    o->layers = "all";
}

void fl_important_free(fl_important *imp) {
    if (!imp) return;
    for (int i = 0; i < imp->n_layers; i++) {
        free(imp->layers[i].name);
        free(imp->layers[i].neuron);
        free(imp->layers[i].relevance);
    }
    free(imp->layers);
    free(imp->model);
    free(imp->data);
    free(imp);
}

const fl_important_layer *fl_important_layer_find(const fl_important *imp, const char *name) {
    for (int i = 0; i < imp->n_layers; i++)
        if (!strcmp(imp->layers[i].name, name)) return &imp->layers[i];
    return NULL;
}

/* ---- ranking -------------------------------------------------------------------------------- */
static const double *g_rel; /* qsort has no context argument; ranking is not re-entrant */

static int by_relevance(const void *a, const void *b) {
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    if (g_rel[i] != g_rel[j]) return g_rel[i] > g_rel[j] ? -1 : 1;
    return i < j ? -1 : i > j; /* ties: the lower index first, so the order is total */
}

/* round(ratio * width) as DeepSA's get_topk_neurons_composition computes it (Python's round:
 * half to even, which nearbyint does in the default rounding mode), but at least 1 — the
 * reference's 0 would select the whole layer through numpy's [-0:] slice. */
static int64_t count_for(double ratio, int64_t width) {
    int64_t k = (int64_t)nearbyint(ratio * (double)width);
    return k < 1 ? 1 : k > width ? width : k;
}

static fl_status rank_layer(fl_important_layer *L, double ratio, fl_err *e) {
    int64_t *order = malloc(sizeof(int64_t) * (size_t)(L->width ? L->width : 1));
    if (!order) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < L->width; i++) order[i] = i;
    g_rel = L->relevance;
    qsort(order, (size_t)L->width, sizeof *order, by_relevance);
    L->count = count_for(ratio, L->width);
    free(L->neuron);
    L->neuron = realloc(order, sizeof(int64_t) * (size_t)L->count);
    if (!L->neuron) L->neuron = order; /* shrinking cannot really fail; keep the block */
    return FL_OK;
}

fl_status fl_important_set_ratio(fl_important *imp, double ratio, fl_err *e) {
    if (!(ratio > 0 && ratio <= 1))
        return fl_fail(e, FL_ERR_ARG, "important-neuron ratio %g is not in (0, 1]", ratio);
    imp->ratio = ratio;
    for (int i = 0; i < imp->n_layers; i++) {
        fl_status st = rank_layer(&imp->layers[i], ratio, e);
        if (st != FL_OK) return st;
    }
    return FL_OK;
}

/* ---- computing ---------------------------------------------------------------------------------- */
typedef struct imp_ctx {
    fl_lrp *lrp;
    const fl_layerset *ls;
    const fl_dataset *d;
    fl_important *imp;
    int32_t *target;
    const fl_important_opts *o;
} imp_ctx;

static fl_status imp_batch(void *user, fl_model *m, const float *neurons, const float *logits,
                           int K, int64_t start, int n, fl_err *e) {
    imp_ctx *c = user;
    int any = 0;
    for (int b = 0; b < n; b++) {
        const float *y = logits + (int64_t)b * K;
        int p = 0;
        for (int k = 1; k < K; k++)
            if (y[k] > y[p]) p = k;
        c->target[b] = p == c->d->y[start + b] ? p : -1;
        any |= c->target[b] >= 0;
        c->imp->n_inputs += c->target[b] >= 0;
    }
    c->imp->n_seen += n;
    if (any) {
        fl_status st = fl_lrp_run(c->lrp, c->target, e);
        if (st != FL_OK) return st;
        for (int li = 0; li < c->ls->n; li++) {
            const fl_tensor *R = fl_lrp_relevance_idx(c->lrp, c->ls->value[li]);
            if (!R) continue; /* not upstream of the logits: no relevance reaches it */
            double *acc = c->imp->layers[li].relevance;
            fl_neuron_shape ns;
            if (!fl_neuron_shape_of(R, &ns)) continue; /* (a layer set holds none such) */
            int64_t C = ns.width, hw = ns.inner, T = ns.outer;
            for (int b = 0; b < n; b++) {
                if (c->target[b] < 0) continue;
                const float *r = R->data + (int64_t)b * T * C * hw;
                for (int64_t t = 0; t < T; t++, r += C * hw) /* tokens: summed too */
                    for (int64_t ch = 0; ch < C; ch++) {
                        double s = 0;
                        for (int64_t k = 0; k < hw; k++) s += r[ch * hw + k];
                        acc[ch] += s;
                    }
            }
        }
    }
    if (c->o->progress) c->o->progress(start + n, c->d->n, c->o->user);
    return FL_OK;
}

fl_status fl_important_compute(fl_model *m, const fl_dataset *d, const fl_important_opts *o,
                               fl_important **out, fl_err *e) {
    *out = NULL;
    if (!(o->ratio > 0 && o->ratio <= 1))
        return fl_fail(e, FL_ERR_ARG, "important-neuron ratio %g is not in (0, 1]", o->ratio);
    if (!d->has_labels)
        return fl_fail(e, FL_ERR_ARG,
                       "%s: important neurons need labels (relevance is summed over the "
                       "correctly classified inputs)",
                       d->source ? d->source : "dataset");
    if (d->n <= 0) return fl_fail(e, FL_ERR_ARG, "important neurons: the dataset is empty");
    imp_ctx c = {.d = d, .o = o};
    fl_layerset *ls = NULL;
    fl_important *imp = calloc(1, sizeof *imp);
    int batch = o->batch > 0 ? o->batch : 256;
    c.target = malloc(sizeof(int32_t) * (size_t)batch);
    fl_status st = imp && c.target ? FL_OK : fl_fail(e, FL_ERR_NOMEM, "out of memory");
    if (st == FL_OK) st = fl_layerset_make(m, o->layers ? o->layers : "all", &ls, e);
    if (st == FL_OK) st = fl_lrp_new(m, &o->lrp, &c.lrp, e);
    if (st == FL_OK) {
        imp->rule = o->lrp.rule;
        imp->eps = o->lrp.eps;
        imp->ratio = o->ratio;
        imp->layers = calloc((size_t)ls->n, sizeof(fl_important_layer));
        if (!imp->layers) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; st == FL_OK && i < ls->n; i++) {
        fl_important_layer *L = &imp->layers[i];
        imp->n_layers++;
        L->name = strdup(ls->name[i]);
        L->width = ls->width[i];
        L->relevance = calloc((size_t)L->width, sizeof(double));
        if (!L->name || !L->relevance) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    c.ls = ls;
    c.imp = imp;
    if (st == FL_OK) st = fl_layerset_stream(m, NULL, d, batch, imp_batch, &c, e);
    if (st == FL_OK && imp->n_inputs == 0)
        st = fl_fail(e, FL_ERR_ARG,
                     "important neurons: no input of %s is classified correctly, so there is "
                     "no relevance to sum",
                     d->source ? d->source : "the dataset");
    for (int i = 0; st == FL_OK && i < imp->n_layers; i++)
        st = rank_layer(&imp->layers[i], o->ratio, e);
    if (st == FL_OK && d->source && !(imp->data = strdup(d->source)))
        st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    fl_lrp_free(c.lrp);
    fl_layerset_free(ls);
    free(c.target);
    if (st != FL_OK) {
        fl_important_free(imp);
        return st;
    }
    *out = imp;
    return FL_OK;
}

/* ---- JSON ------------------------------------------------------------------------------------- */
#define FORMAT_NAME "flare-important-neurons"

/* cJSON prints 15 significant digits when they read back "close enough"; 17 read back exactly,
 * so a loaded file ranks exactly like the run that wrote it. */
static cJSON *exact(double v) {
    char b[32];
    snprintf(b, sizeof b, "%.17g", v);
    return cJSON_CreateRaw(b);
}

fl_status fl_important_save(const fl_important *imp, const char *path, fl_err *e) {
    for (int i = 0; i < imp->n_layers; i++)
        for (int64_t k = 0; k < imp->layers[i].width; k++)
            if (!isfinite(imp->layers[i].relevance[k]))
                return fl_fail(e, FL_ERR_NAN, "%s: relevance of neuron %lld of layer '%s' is not "
                               "finite (does the model produce NaN?)",
                               path, (long long)k, imp->layers[i].name);
    char eps[32];
    snprintf(eps, sizeof eps, "%.7g", imp->eps); /* a float: its short decimal */
    cJSON *j = cJSON_CreateObject(), *layers = NULL;
    int ok = j != NULL;
    ok = ok && cJSON_AddStringToObject(j, "format", FORMAT_NAME);
    ok = ok && cJSON_AddNumberToObject(j, "version", 1);
    ok = ok && cJSON_AddStringToObject(j, "rule", fl_lrp_rule_name(imp->rule));
    ok = ok && cJSON_AddRawToObject(j, "epsilon", eps);
    ok = ok && cJSON_AddNumberToObject(j, "ratio", imp->ratio);
    ok = ok && cJSON_AddNumberToObject(j, "inputs", (double)imp->n_inputs);
    ok = ok && cJSON_AddNumberToObject(j, "seen", (double)imp->n_seen);
    if (ok && imp->model) ok = cJSON_AddStringToObject(j, "model", imp->model) != NULL;
    if (ok && imp->data) ok = cJSON_AddStringToObject(j, "data", imp->data) != NULL;
    ok = ok && (layers = cJSON_AddArrayToObject(j, "layers"));
    for (int i = 0; ok && i < imp->n_layers; i++) {
        const fl_important_layer *L = &imp->layers[i];
        cJSON *o = cJSON_CreateObject(), *idx = cJSON_CreateArray(), *sc = cJSON_CreateArray(),
              *rel = cJSON_CreateArray();
        ok = o && idx && sc && rel;
        for (int64_t k = 0; ok && k < L->count; k++) {
            ok = cJSON_AddItemToArray(idx, cJSON_CreateNumber((double)L->neuron[k]));
            ok = ok && cJSON_AddItemToArray(sc, exact(L->relevance[L->neuron[k]]));
        }
        for (int64_t k = 0; ok && k < L->width; k++)
            ok = cJSON_AddItemToArray(rel, exact(L->relevance[k]));
        if (!ok) {
            cJSON_Delete(o), cJSON_Delete(idx), cJSON_Delete(sc), cJSON_Delete(rel);
            break;
        }
        cJSON_AddStringToObject(o, "name", L->name);
        cJSON_AddNumberToObject(o, "neurons", (double)L->width);
        cJSON_AddNumberToObject(o, "count", (double)L->count);
        cJSON_AddItemToObject(o, "important", idx);
        cJSON_AddItemToObject(o, "scores", sc);
        cJSON_AddItemToObject(o, "relevance", rel);
        ok = cJSON_AddItemToArray(layers, o);
    }
    char *txt = ok ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (!txt) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory writing JSON", path);
    size_t n = strlen(txt);
    txt[n] = '\n'; /* replaces the NUL: the file ends with a newline */
    fl_status st = fl_file_write_atomic(path, txt, n + 1, e);
    free(txt);
    return st;
}

static fl_status bad(const char *path, const char *what, fl_err *e) {
    return fl_fail(e, FL_ERR_FORMAT, "%s: not a flare important-neurons file: %s", path, what);
}

static fl_status load_layer(const char *path, cJSON *o, int li, fl_important_layer *L,
                            fl_err *e) {
    char what[160];
    cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    cJSON *width = cJSON_GetObjectItemCaseSensitive(o, "neurons");
    cJSON *idx = cJSON_GetObjectItemCaseSensitive(o, "important");
    cJSON *rel = cJSON_GetObjectItemCaseSensitive(o, "relevance");
    snprintf(what, sizeof what, "layers[%d] needs name, neurons, important and relevance", li);
    if (!cJSON_IsString(name) || !cJSON_IsNumber(width) || !cJSON_IsArray(idx) ||
        !cJSON_IsArray(rel))
        return bad(path, what, e);
    L->name = strdup(name->valuestring);
    if (!L->name) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    snprintf(what, sizeof what, "layer '%s': \"neurons\" is not a whole number >= 1", L->name);
    if (!fl_whole(width->valuedouble, 1, INT32_MAX)) return bad(path, what, e);
    L->width = (int64_t)width->valuedouble;
    L->count = cJSON_GetArraySize(idx);
    snprintf(what, sizeof what, "layer '%s': %lld neurons, but %d relevance values", L->name,
             (long long)L->width, cJSON_GetArraySize(rel));
    if (cJSON_GetArraySize(rel) != L->width) return bad(path, what, e);
    snprintf(what, sizeof what, "layer '%s': %lld important neurons of %lld", L->name,
             (long long)L->count, (long long)L->width);
    if (L->count < 1 || L->count > L->width) return bad(path, what, e);
    L->relevance = calloc((size_t)L->width, sizeof(double));
    L->neuron = malloc(sizeof(int64_t) * (size_t)L->count);
    uint8_t *seen = calloc((size_t)L->width, 1);
    fl_status st = L->relevance && L->neuron && seen ? FL_OK
                                                     : fl_fail(e, FL_ERR_NOMEM, "out of memory");
    int64_t k = 0;
    cJSON *it;
    cJSON_ArrayForEach(it, rel) {
        if (st != FL_OK) break;
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble)) {
            snprintf(what, sizeof what, "layer '%s': relevance[%lld] is not a finite number",
                     L->name, (long long)k);
            st = bad(path, what, e);
        } else {
            L->relevance[k++] = it->valuedouble;
        }
    }
    k = 0;
    cJSON_ArrayForEach(it, idx) {
        if (st != FL_OK) break;
        double v = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (v < 0 || v >= (double)L->width || v != floor(v) || seen[(int64_t)v]) {
            snprintf(what, sizeof what,
                     "layer '%s': important[%lld] is not a distinct neuron index below %lld",
                     L->name, (long long)k, (long long)L->width);
            st = bad(path, what, e);
        } else {
            seen[(int64_t)v] = 1;
            L->neuron[k++] = (int64_t)v;
        }
    }
    free(seen);
    return st;
}

/* A count member: 0 when absent (older files), -1 when not a whole number in int64 range. */
static int64_t count_member(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v) return 0;
    return cJSON_IsNumber(v) && fl_whole(v->valuedouble, 0, 9007199254740992.0)
               ? (int64_t)v->valuedouble
               : -1;
}

fl_status fl_important_load(const char *path, fl_important **out, fl_err *e) {
    *out = NULL;
    uint8_t *buf;
    size_t len;
    fl_status st = fl_file_read(path, &buf, &len, e);
    if (st != FL_OK) return st;
    cJSON *j = cJSON_ParseWithLength((const char *)buf, len);
    free(buf);
    if (!j) return bad(path, "invalid JSON", e);
    fl_important *imp = calloc(1, sizeof *imp);
    cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
    cJSON *rule = cJSON_GetObjectItemCaseSensitive(j, "rule");
    cJSON *layers = cJSON_GetObjectItemCaseSensitive(j, "layers");
    if (!imp) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    else if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, FORMAT_NAME))
        st = bad(path, "\"format\" is not \"" FORMAT_NAME "\"", e);
    else if (!cJSON_IsString(rule) || fl_lrp_rule_parse(rule->valuestring, &imp->rule, NULL))
        st = bad(path, "\"rule\" is not epsilon or zplus", e);
    else if (!cJSON_IsArray(layers) || cJSON_GetArraySize(layers) < 1)
        st = bad(path, "\"layers\" is not a non-empty array", e);
    if (st == FL_OK) {
        cJSON *v;
        imp->eps = cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(j, "epsilon")) ? v->valuedouble : 0;
        imp->ratio = cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(j, "ratio")) ? v->valuedouble : 0;
        imp->n_inputs = count_member(j, "inputs");
        imp->n_seen = count_member(j, "seen");
        if (imp->n_inputs < 0 || imp->n_seen < 0)
            st = bad(path, "\"inputs\" and \"seen\" must be whole numbers >= 0", e);
        if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(j, "model")))
            imp->model = strdup(v->valuestring);
        if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(j, "data")))
            imp->data = strdup(v->valuestring);
        imp->layers = calloc((size_t)cJSON_GetArraySize(layers), sizeof(fl_important_layer));
        if (!imp->layers) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    cJSON *o;
    int li = 0;
    if (st == FL_OK)
        cJSON_ArrayForEach(o, layers) {
            imp->n_layers++;
            st = load_layer(path, o, li++, &imp->layers[imp->n_layers - 1], e);
            if (st != FL_OK) break;
        }
    cJSON_Delete(j);
    if (st != FL_OK) {
        fl_important_free(imp);
        return st;
    }
    *out = imp;
    return FL_OK;
}

/* ---- the important neurons of a layer set --------------------------------------------------- */
static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

fl_status fl_important_subset(const fl_important *imp, const fl_layerset *ls, int64_t **idx,
                              int64_t *n, fl_err *e) {
    *idx = NULL;
    *n = 0;
    int64_t total = 0;
    for (int i = 0; i < ls->n; i++) {
        const fl_important_layer *L = fl_important_layer_find(imp, ls->name[i]);
        if (!L)
            return fl_fail(e, FL_ERR_NOTFOUND,
                           "layer '%s' has no important neurons in the file (run `flare nn lrp` "
                           "with --layers including it)",
                           ls->name[i]);
        if (L->width != ls->width[i])
            return fl_fail(e, FL_ERR_SHAPE,
                           "layer '%s' has %lld neurons in the model but %lld in the "
                           "important-neurons file (another model?)",
                           ls->name[i], (long long)ls->width[i], (long long)L->width);
        total += L->count;
    }
    int64_t *out = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
    if (!out) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    int64_t k = 0;
    for (int i = 0; i < ls->n; i++) {
        const fl_important_layer *L = fl_important_layer_find(imp, ls->name[i]);
        for (int64_t j = 0; j < L->count; j++) out[k++] = ls->offset[i] + L->neuron[j];
    }
    qsort(out, (size_t)k, sizeof *out, cmp_i64);
    *idx = out;
    *n = k;
    return FL_OK;
}
