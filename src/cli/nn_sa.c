/* flare nn sa: surprise adequacy of test inputs, from a model and datasets (--model --layers
 * --train --test) or from activation traces any framework can write (--train-ats
 * --train-pred --test-ats --test-pred); a summary table or JSON, the values as NPY, and
 * LSC/DSC coverage with --buckets. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "flare/onnx.h"
#include "flare/sa.h"
#include "flare/lrp.h"
#include "flare/select.h"

typedef struct traces {
    float *x;      /* [n, d] */
    int32_t *pred; /* [n] */
    int64_t n, d;
    fl_npy ax, ap; /* the NPY files, when read from files (x, pred point into them) */
} traces;

static void traces_free(traces *t) {
    if (t->ax.data || t->ap.data) {
        if ((void *)t->pred != t->ap.data) free(t->pred); /* converted from int64 */
        fl_npy_free(&t->ax);
        fl_npy_free(&t->ap);
    } else {
        free(t->x);
        free(t->pred);
    }
    memset(t, 0, sizeof *t);
}

/* Activation traces from ats (float32 [n, d]) and predictions from pred (int32 / int64 [n]). */
static fl_status read_traces(const char *ats, const char *pred, traces *t, fl_err *e) {
    char shp[128];
    fl_status st = fl_npy_read(ats, &t->ax, e);
    if (st != FL_OK) return st;
    fl_tensor view = {.ndim = t->ax.ndim};
    memcpy(view.shape, t->ax.shape, sizeof view.shape);
    if (t->ax.dtype != FL_DT_F32 || t->ax.ndim != 2)
        return fl_fail(e, FL_ERR_FORMAT, "%s: activation traces must be float32 [n, neurons]; "
                       "the file holds %s %s", ats, fl_dtype_name(t->ax.dtype),
                       fl_shape_str(&view, shp, sizeof shp));
    if ((st = fl_npy_read(pred, &t->ap, e)) != FL_OK) return st;
    fl_tensor pv = {.ndim = t->ap.ndim};
    memcpy(pv.shape, t->ap.shape, sizeof pv.shape);
    if ((t->ap.dtype != FL_DT_I32 && t->ap.dtype != FL_DT_I64) || t->ap.ndim != 1)
        return fl_fail(e, FL_ERR_FORMAT, "%s: predictions must be int32 or int64 class indices "
                       "[n]; the file holds %s %s", pred, fl_dtype_name(t->ap.dtype),
                       fl_shape_str(&pv, shp, sizeof shp));
    t->n = t->ax.shape[0];
    t->d = t->ax.shape[1];
    if (t->ap.shape[0] != t->n)
        return fl_fail(e, FL_ERR_SHAPE, "%s has %lld predictions but %s has %lld traces", pred,
                       (long long)t->ap.shape[0], ats, (long long)t->n);
    t->x = t->ax.data;
    if (t->ap.dtype == FL_DT_I32) {
        t->pred = t->ap.data;
        return FL_OK;
    }
    t->pred = malloc(sizeof(int32_t) * (size_t)(t->n ? t->n : 1));
    if (!t->pred) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    const int64_t *p = t->ap.data;
    for (int64_t i = 0; i < t->n; i++) {
        if (p[i] < INT32_MIN || p[i] > INT32_MAX)
            return fl_fail(e, FL_ERR_FORMAT, "%s: prediction %lld (%lld) is not a class index",
                           pred, (long long)i, (long long)p[i]);
        t->pred[i] = (int32_t)p[i];
    }
    return FL_OK;
}

/* Traces of spec's images; the dataset is handed back through *keep when keep != NULL (for
 * --grid), else released. */
static fl_status model_traces(const cli_opts *o, fl_model *m, const char *spec, traces *t,
                              fl_dataset **keep, fl_err *e) {
    fl_scale sc;
    fl_dataset *d = NULL;
    fl_status st = fl_scale_parse(o->sa_scale, &sc, e);
    if (st == FL_OK) st = fl_dataset_load(spec, &sc, o->sa_limit, &d, e);
    if (st == FL_OK) {
        cli_note("%s: %lld images through %s\n", spec, (long long)d->n, o->sa_model);
        st = fl_sa_traces(m, o->sa_layer, d, (int)o->sa_batch, &t->x, &t->pred, &t->d, e);
        t->n = d->n;
    }
    if (keep && st == FL_OK)
        *keep = d;
    else
        fl_dataset_free(d);
    return st;
}

/* --grid: the --top most surprising inputs as a labelled image grid, most surprising first;
 * each tile is labelled as every flare grid (fl_grid_label: "#index" and the SA value, the
 * true and the predicted class). */
static fl_status write_grid(const cli_opts *o, const fl_dataset *d, const traces *te,
                            const double *v, fl_err *e) {
    int64_t k = o->sa_top, idx[256];
    if (k > 256) k = 256;
    k = fl_select_top(v, te->n, k, 1, idx);
    if (k == 0) return fl_fail(e, FL_ERR_ARG, "--grid: no input has a finite SA value");
    fl_tensor x = {0};
    char text[256][160];
    const char *labels[256];
    fl_status st = fl_dataset_gather(d, idx, k, &x, NULL, e);
    for (int64_t i = 0; i < k && st == FL_OK; i++) {
        char score[32];
        snprintf(score, sizeof score, "%.3g", v[idx[i]]);
        fl_grid_label(d, idx[i], te->pred[idx[i]], score, text[i], sizeof text[i]);
        labels[i] = text[i];
    }
    if (st == FL_OK)
        st = fl_image_grid_write_scaled(o->sa_grid, x.data, (int)k, d->c, d->h, d->w, 0, labels,
                                        &d->scale, e);
    if (st == FL_OK) cli_note("wrote %s (the %lld most surprising inputs)\n", o->sa_grid, (long long)k);
    fl_tensor_free(&x);
    return st;
}

/* --neurons: "I,J,K" or an int32/int64 NPY file. */
static fl_status parse_neurons(const char *s, int64_t **out, int64_t *n, fl_err *e) {
    size_t len = strlen(s);
    if (len > 4 && !strcmp(s + len - 4, ".npy")) {
        fl_npy a;
        fl_status st = fl_npy_read(s, &a, e);
        if (st != FL_OK) return st;
        if ((a.dtype != FL_DT_I32 && a.dtype != FL_DT_I64) || a.count == 0) {
            fl_npy_free(&a);
            return fl_fail(e, FL_ERR_FORMAT, "%s: neuron indices must be a non-empty int32 or "
                           "int64 array", s);
        }
        *out = malloc(sizeof(int64_t) * (size_t)a.count);
        if (!*out) {
            fl_npy_free(&a);
            return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        }
        for (int64_t i = 0; i < a.count; i++)
            (*out)[i] = a.dtype == FL_DT_I32 ? ((int32_t *)a.data)[i] : ((int64_t *)a.data)[i];
        *n = a.count;
        fl_npy_free(&a);
        return FL_OK;
    }
    int64_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    *out = malloc(sizeof(int64_t) * (size_t)cap);
    if (!*out) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    *n = 0;
    for (const char *p = s; *p;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || (*end && *end != ',') || v < 0)
            return fl_fail(e, FL_ERR_ARG, "--neurons %s: expected non-negative indices I,J,K... "
                           "or an NPY file", s);
        (*out)[(*n)++] = v;
        p = *end ? end + 1 : end;
    }
    return FL_OK;
}

typedef struct summary {
    int64_t n, n_train, nan_count;
    double mean, min, max;
    int sc;                /* coverage computed */
    double lower, upper, coverage;
    int64_t covered;
} summary;

static void summarize(const cli_opts *o, const double *v, int64_t n, summary *s, fl_err *e,
                      fl_status *st) {
    memset(s, 0, sizeof *s);
    s->n = n;
    s->min = INFINITY;
    s->max = -INFINITY;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(v[i])) {
            s->nan_count++;
            continue;
        }
        s->mean += v[i];
        k++;
        if (v[i] < s->min) s->min = v[i];
        if (v[i] > s->max) s->max = v[i];
    }
    s->mean = k ? s->mean / (double)k : NAN;
    if (!o->set[F_buckets]) return;
    double lo = 0, hi = 1;
    int have = fl_sc_bounds(v, n, &lo, &hi);
    if (o->set[F_sc_lower]) lo = o->sc_lower;
    if (o->set[F_sc_upper]) hi = o->sc_upper;
    if (!have && !(o->set[F_sc_lower] && o->set[F_sc_upper])) return; /* nothing to cover */
    fl_sc_mode mode;
    fl_sc *sc;
    if ((*st = fl_sc_mode_parse(o->sc_mode, &mode, e)) != FL_OK ||
        (*st = fl_sc_new((int)o->buckets, lo, hi, mode, &sc, e)) != FL_OK)
        return;
    fl_sc_add(sc, v, n);
    s->sc = 1;
    s->lower = lo;
    s->upper = hi;
    s->covered = sc->covered;
    s->coverage = fl_sc_coverage(sc);
    fl_sc_free(sc);
}

static void print_summary(const cli_opts *o, const fl_sa *sa, const summary *s) {
    const char *kind = o->sa_kind;
    const char *cov = !strcmp(kind, "lsa") ? "LSC" : !strcmp(kind, "dsa") ? "DSC" : "MDSC";
    if (o->sa_json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "kind", kind);
        if (!strcmp(kind, "dsa")) cJSON_AddStringToObject(j, "dsa_variant", o->dsa_variant);
        cJSON_AddNumberToObject(j, "n", (double)s->n);
        cJSON_AddNumberToObject(j, "n_train", (double)s->n_train);
        cJSON_AddNumberToObject(j, "neurons", (double)fl_sa_dim(sa));
        cJSON_AddNumberToObject(j, "neurons_used", (double)fl_sa_kept(sa));
        cJSON_AddNumberToObject(j, "classes", fl_sa_n_classes(sa));
        cJSON_AddNumberToObject(j, "nan", (double)s->nan_count);
        if (s->n > s->nan_count) {
            cJSON_AddNumberToObject(j, "mean", s->mean);
            cJSON_AddNumberToObject(j, "min", s->min);
            cJSON_AddNumberToObject(j, "max", s->max);
        }
        if (s->sc) {
            cJSON *c = cJSON_AddObjectToObject(j, "coverage");
            cJSON_AddStringToObject(c, "name", cov);
            cJSON_AddNumberToObject(c, "buckets", (double)o->buckets);
            cJSON_AddStringToObject(c, "mode", o->sc_mode);
            cJSON_AddNumberToObject(c, "lower", s->lower);
            cJSON_AddNumberToObject(c, "upper", s->upper);
            cJSON_AddNumberToObject(c, "covered", (double)s->covered);
            cJSON_AddNumberToObject(c, "coverage", s->coverage);
        }
        if (o->sa_output) cJSON_AddStringToObject(j, "output", o->sa_output);
        char *txt = cJSON_Print(j);
        if (txt) printf("%s\n", txt);
        free(txt);
        cJSON_Delete(j);
        return;
    }
    printf("%s of %lld inputs against %lld training traces  (%lld of %lld neurons used, %d "
           "classes)\n", kind, (long long)s->n, (long long)s->n_train, (long long)fl_sa_kept(sa),
           (long long)fl_sa_dim(sa), fl_sa_n_classes(sa));
    if (s->n > s->nan_count)
        printf("  mean %.6g  min %.6g  max %.6g\n", s->mean, s->min, s->max);
    if (s->nan_count)
        printf("  %lld NaN (predicted as a class without training traces)\n",
               (long long)s->nan_count);
    if (s->sc)
        printf("  %s %.4f  (%lld of %lld buckets, %s, over [%.6g, %.6g])\n", cov, s->coverage,
               (long long)s->covered, (long long)o->buckets, o->sc_mode, s->lower, s->upper);
    if (o->sa_output) printf("wrote %s  [%lld]\n", o->sa_output, (long long)s->n);
}

int cmd_nn_sa(const cli_opts *o) {
    int ats = o->set[F_train_ats] || o->set[F_train_pred] || o->set[F_test_ats] ||
              o->set[F_test_pred];
    int model = o->set[F_sa_model];
    if (ats == model)
        return cli_usage(o->cmd, "give either --model (with --layers, --train, --test) or the "
                         "trace files --train-ats, --train-pred, --test-ats, --test-pred");
    /* Every missing flag of the chosen form at once. */
    static const struct {
        int flag;
        const char *name;
    } need[] = {{F_train_ats, "train-ats"}, {F_train_pred, "train-pred"}, {F_test_ats, "test-ats"},
                {F_test_pred, "test-pred"}, {F_sa_layer, "layers"},   {F_sa_train, "train"},
                {F_sa_test, "test"}};
    char missing[160] = "";
    int n_missing = 0;
    for (int i = model ? 4 : 0; i < (model ? 7 : 4); i++) {
        if (o->set[need[i].flag]) continue;
        size_t k = strlen(missing);
        snprintf(missing + k, sizeof missing - k, "%s--%s", k ? ", " : "", need[i].name);
        n_missing++;
    }
    if (n_missing && ats)
        return cli_usage(o->cmd, "%s %s missing: trace files come as --train-ats, --train-pred, "
                         "--test-ats, --test-pred", missing, n_missing > 1 ? "are" : "is");
    if (n_missing)
        return cli_usage(o->cmd, "--model needs --layers, --train and --test; missing: %s",
                         missing);
    if (o->set[F_buckets] && o->set[F_sc_lower] && o->set[F_sc_upper] &&
        !(o->sc_lower < o->sc_upper))
        return cli_usage(o->cmd, "--lower must be below --upper");
    if (o->set[F_sa_important] && (ats || o->set[F_sa_neurons]))
        return cli_usage(o->cmd, "--important needs --model (and not --neurons)");
    if (ats && o->set[F_sa_grid])
        return cli_usage(o->cmd, "--grid needs the images: use --model, --train and --test");
    fl_err e = {0};
    fl_scale sc;
    if (model && fl_scale_parse(o->sa_scale, &sc, &e) != FL_OK)
        return cli_usage(o->cmd, "--scale: %s", e.msg);
    cli_outs outs = {0}; /* -o and --grid: both, or neither */
    cli_outs_add(&outs, o->sa_output);
    cli_outs_add(&outs, o->sa_grid);
    if (cli_outs_check(&outs, &e) != FL_OK) return cli_fail(&e);
    fl_threads_set((int)o->sa_threads);

    traces tr = {0}, te = {0};
    fl_model *m = NULL;
    fl_sa *sa = NULL;
    fl_dataset *test_set = NULL; /* kept for --grid */
    double *v = NULL;
    float *f = NULL;
    int64_t *neurons = NULL, n_neurons = 0;
    int rc = CLI_FAIL;
    fl_status st = FL_OK;
    fl_sa_opts so;
    fl_sa_kind kind;
    if (fl_sa_kind_parse(o->sa_kind, &kind, &e) != FL_OK) goto out;
    fl_sa_opts_init(&so, kind);
    so.var_threshold = o->var_threshold;
    so.dsa_variant = !strcmp(o->dsa_variant, "nlc") ? FL_DSA_NLC : FL_DSA_KIM;
    so.mdsa_ridge = o->mdsa_ridge;
    so.n_classes = (int)o->n_classes;
    if (o->set[F_sa_neurons]) {
        if (parse_neurons(o->sa_neurons, &neurons, &n_neurons, &e) != FL_OK) {
            rc = e.status == FL_ERR_ARG ? cli_usage(o->cmd, "%s", e.msg) : cli_fail(&e);
            goto out_quiet;
        }
        so.neurons = neurons;
        so.n_neurons = n_neurons;
    }

    if (ats) {
        if ((st = read_traces(o->train_ats, o->train_pred, &tr, &e)) != FL_OK ||
            (st = read_traces(o->test_ats, o->test_pred, &te, &e)) != FL_OK)
            goto out;
        if (tr.d != te.d) {
            fl_fail(&e, FL_ERR_SHAPE, "%s has traces of %lld neurons but %s of %lld", o->train_ats,
                    (long long)tr.d, o->test_ats, (long long)te.d);
            goto out;
        }
    } else {
        if (fl_onnx_load(o->sa_model, &m, &e) != FL_OK) goto out;
        fl_layerset *ls; /* a wrong --layers is a usage error, found before any data is read */
        if ((rc = cli_layers_check(o->cmd, "layers", o->sa_model, m, o->sa_layer)) != CLI_OK)
            goto out_quiet;
        rc = CLI_FAIL;
        if (fl_layerset_make(m, o->sa_layer, &ls, &e) != FL_OK) {
            rc = e.status == FL_ERR_NOTFOUND ? cli_usage(o->cmd, "--layers %s: %s", o->sa_layer,
                                                         e.msg) : cli_fail(&e);
            goto out_quiet;
        }
        /* --important: LSAv / DSAv, the trace restricted to LRP's important neurons */
        if (o->set[F_sa_important]) {
            fl_important *imp = NULL;
            fl_status ist = fl_important_load(o->sa_important, &imp, &e);
            if (ist == FL_OK) ist = fl_important_subset(imp, ls, &neurons, &n_neurons, &e);
            fl_important_free(imp);
            if (ist != FL_OK) {
                fl_layerset_free(ls);
                goto out;
            }
            so.neurons = neurons;
            so.n_neurons = n_neurons;
            cli_note("%lld important neurons of %lld (%s)\n", (long long)n_neurons,
                     (long long)ls->total, o->sa_important);
        }
        fl_layerset_free(ls);
        if (model_traces(o, m, o->sa_train, &tr, NULL, &e) != FL_OK ||
            model_traces(o, m, o->sa_test, &te, o->sa_grid ? &test_set : NULL, &e) != FL_OK)
            goto out;
    }
    double t0 = fl_now();
    if (fl_sa_new(tr.x, tr.pred, tr.n, tr.d, &so, &sa, &e) != FL_OK) goto out;
    v = malloc(sizeof(double) * (size_t)(te.n ? te.n : 1));
    f = malloc(sizeof(float) * (size_t)(te.n ? te.n : 1));
    if (!v || !f) {
        fl_fail(&e, FL_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (fl_sa_score(sa, te.x, te.pred, te.n, v, &e) != FL_OK) goto out;
    cli_note("%s: %lld training traces, %lld inputs scored in %.2f s\n", o->sa_kind,
             (long long)tr.n, (long long)te.n, fl_now() - t0);
    if (o->sa_output) {
        for (int64_t i = 0; i < te.n; i++) f[i] = (float)v[i];
        int64_t shp[1] = {te.n};
        if (fl_npy_write(o->sa_output, FL_DT_F32, 1, shp, f, &e) != FL_OK) goto out;
        cli_outs_written(&outs, o->sa_output);
    }
    if (test_set && write_grid(o, test_set, &te, v, &e) != FL_OK) goto out;
    cli_outs_written(&outs, o->sa_grid);
    summary s;
    summarize(o, v, te.n, &s, &e, &st);
    s.n_train = tr.n;
    if (st != FL_OK) goto out;
    print_summary(o, sa, &s);
    rc = CLI_OK;
out:
    if (rc != CLI_OK) cli_fail(&e);
out_quiet:
    if (rc != CLI_OK) cli_outs_undo(&outs);
    traces_free(&tr);
    traces_free(&te);
    fl_sa_free(sa);
    fl_model_free(m);
    fl_dataset_free(test_set);
    free(neurons);
    free(v);
    free(f);
    return rc;
}
